//! The Anthropic Messages API as Claude Code uses it: `POST /v1/messages`, streamed
//! (SSE: `message_start`, `ping`, per block `content_block_start`/`_delta`/`_stop`,
//! `message_delta`, `message_stop`) or as one JSON message.

use super::{Reply, Request};
use serde_json::{json, Value};

/// The start of the last user text of a `/compact` request.
const COMPACT: &str = "CRITICAL: Respond with TEXT ONLY";

pub(crate) fn parse(body: &Value) -> Request<'_> {
    let given = last_user_text(body);
    let has_tools = body["tools"].as_array().is_some_and(|t| !t.is_empty());
    Request {
        body,
        turn: has_tools && !given.trim_start().starts_with(COMPACT),
        given,
    }
}

/// The text of the last `user` message: plain text, text blocks, and tool results
/// (string or block content). `messages` may hold `role: "system"` entries.
pub fn last_user_text(body: &Value) -> String {
    let Some(msgs) = body["messages"].as_array() else {
        return String::new();
    };
    let Some(last) = msgs.iter().rev().find(|m| m["role"] == "user") else {
        return String::new();
    };
    let mut out = String::new();
    collect_text(&last["content"], &mut out);
    out
}

fn collect_text(content: &Value, out: &mut String) {
    match content {
        Value::String(s) => {
            out.push_str(s);
            out.push('\n');
        }
        Value::Array(blocks) => {
            for b in blocks {
                match b["type"].as_str() {
                    Some("text") => collect_text(&b["text"], out),
                    Some("tool_result") => collect_text(&b["content"], out),
                    _ => {}
                }
            }
        }
        _ => {}
    }
}

pub(crate) fn respond(body: &Value, reply: &Reply, n: u64) -> warp::http::Response<String> {
    let model = body["model"].as_str().unwrap_or("mock-model");
    let mut blocks = Vec::new();
    let stop = match reply {
        // Claude Code's Bash has no sandbox escalation to ask for: a plain call.
        Reply::Shell(cmd) | Reply::Escalated(cmd) => {
            blocks.push(json!({"type": "text", "text": "Running the command."}));
            blocks.push(json!({
                "type": "tool_use", "id": format!("toolu_mock{n:06}"), "name": "Bash",
                "input": {"command": cmd, "description": "Run the scripted command"},
            }));
            "tool_use"
        }
        Reply::Text(t) => {
            blocks.push(json!({"type": "text", "text": t}));
            "end_turn"
        }
        Reply::Other => "end_turn",
    };
    let usage = json!({"input_tokens": 100, "output_tokens": 10,
        "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0});
    let id = format!("msg_mock{n:06}");
    if body["stream"] != true {
        return super::json_response(
            json!({
                "id": id, "type": "message", "role": "assistant", "model": model,
                "content": blocks, "stop_reason": stop, "stop_sequence": null, "usage": usage,
            })
            .to_string(),
        );
    }
    let mut ev = vec![
        (
            "message_start",
            json!({"type": "message_start", "message": {
                "id": id, "type": "message", "role": "assistant", "model": model,
                "content": [], "stop_reason": null, "stop_sequence": null, "usage": usage,
            }}),
        ),
        ("ping", json!({"type": "ping"})),
    ];
    for (i, b) in blocks.iter().enumerate() {
        let (start, delta) = if b["type"] == "tool_use" {
            (
                json!({"type": "tool_use", "id": b["id"], "name": b["name"], "input": {}}),
                json!({"type": "input_json_delta", "partial_json": b["input"].to_string()}),
            )
        } else {
            (
                json!({"type": "text", "text": ""}),
                json!({"type": "text_delta", "text": b["text"]}),
            )
        };
        ev.push((
            "content_block_start",
            json!({"type": "content_block_start", "index": i, "content_block": start}),
        ));
        ev.push((
            "content_block_delta",
            json!({"type": "content_block_delta", "index": i, "delta": delta}),
        ));
        ev.push((
            "content_block_stop",
            json!({"type": "content_block_stop", "index": i}),
        ));
    }
    ev.push((
        "message_delta",
        json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null},
               "usage": {"output_tokens": 10}}),
    ));
    ev.push(("message_stop", json!({"type": "message_stop"})));
    super::sse(&ev)
}
