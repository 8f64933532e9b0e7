//! The OpenAI Responses API as Codex uses it: `POST /v1/responses`, always streamed
//! (`response.created`, output items with their parts and deltas, `response.completed`).

use super::{Reply, Request};
use serde_json::{json, Value};

/// The start of the last user text of a compaction request (which also has no tools).
const COMPACT: &str = "You are performing a CONTEXT CHECKPOINT COMPACTION";

pub(crate) fn parse(body: &Value) -> Request<'_> {
    let given = last_user_text(body);
    let has_tools = body["tools"].as_array().is_some_and(|t| !t.is_empty());
    Request {
        body,
        turn: has_tools && !given.trim_start().starts_with(COMPACT),
        given,
    }
}

/// What follows the model's last output in `input`: tool outputs and user messages.
pub fn last_user_text(body: &Value) -> String {
    let Some(items) = body["input"].as_array() else {
        return String::new();
    };
    let from = items
        .iter()
        .rposition(|i| {
            i["type"] == "function_call" || (i["type"] == "message" && i["role"] == "assistant")
        })
        .map_or(0, |p| p + 1);
    let mut out = String::new();
    for i in &items[from..] {
        match i["type"].as_str() {
            Some("function_call_output") => match &i["output"] {
                Value::String(s) => out.push_str(s),
                other => out.push_str(&other.to_string()),
            },
            Some("message") if i["role"] == "user" => {
                for c in i["content"].as_array().into_iter().flatten() {
                    out.push_str(c["text"].as_str().unwrap_or_default());
                }
            }
            _ => continue,
        }
        out.push('\n');
    }
    out
}

/// Why an escalated call asks to leave the sandbox: what Codex's approval prompt shows.
pub const JUSTIFICATION: &str = "The scripted step runs outside the sandbox.";

/// The shell tool the request offers and the arguments it takes for `cmd`; with
/// `escalate`, asking to run it outside the sandbox when the tool takes
/// `sandbox_permissions` (Codex 0.171's `exec_command` does when approvals are asked
/// for).
fn shell_call(body: &Value, cmd: &str, escalate: bool) -> (String, Value) {
    let tools: Vec<&Value> = body["tools"].as_array().into_iter().flatten().collect();
    let names: Vec<&str> = tools.iter().filter_map(|t| t["name"].as_str()).collect();
    let (name, mut args) = if names.contains(&"exec_command") || names.is_empty() {
        ("exec_command".to_string(), json!({ "cmd": cmd }))
    } else if names.contains(&"shell_command") {
        ("shell_command".into(), json!({ "command": cmd }))
    } else {
        ("shell".into(), json!({ "command": ["bash", "-lc", cmd] }))
    };
    let takes = |field: &str| {
        tools
            .iter()
            .any(|t| t["name"] == name.as_str() && !t["parameters"]["properties"][field].is_null())
    };
    if escalate && takes("sandbox_permissions") {
        args["sandbox_permissions"] = json!("require_escalated");
        if takes("justification") {
            args["justification"] = json!(JUSTIFICATION);
        }
    }
    (name, args)
}

pub(crate) fn respond(body: &Value, reply: &Reply, n: u64) -> warp::http::Response<String> {
    let id = format!("resp_mock{n:06}");
    let item = match reply {
        Reply::Shell(cmd) | Reply::Escalated(cmd) => {
            let escalate = matches!(reply, Reply::Escalated(_));
            let (name, args) = shell_call(body, cmd, escalate);
            json!({"type": "function_call", "id": format!("fc_mock{n:06}"),
                   "call_id": format!("call_mock{n:06}"), "name": name,
                   "arguments": args.to_string(), "status": "completed"})
        }
        Reply::Text(t) => json!({"type": "message", "id": format!("msg_mock{n:06}"),
            "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "text": t, "annotations": []}]}),
        Reply::Other => Value::Null,
    };
    let response = |status: &str, output: Value| {
        json!({"id": id, "object": "response", "status": status, "model": body["model"],
               "output": output, "usage": {
                   "input_tokens": 100, "input_tokens_details": {"cached_tokens": 0},
                   "output_tokens": 10, "output_tokens_details": {"reasoning_tokens": 0},
                   "total_tokens": 110}})
    };
    let mut ev = vec![
        (
            "response.created",
            json!({"type": "response.created", "response": response("in_progress", json!([]))}),
        ),
        (
            "response.in_progress",
            json!({"type": "response.in_progress", "response": response("in_progress", json!([]))}),
        ),
    ];
    if item["type"] == "function_call" {
        let mut started = item.clone();
        started["arguments"] = json!("");
        started["status"] = json!("in_progress");
        let args = item["arguments"].clone();
        ev.extend([
            (
                "response.output_item.added",
                json!({"type": "response.output_item.added", "output_index": 0, "item": started}),
            ),
            (
                "response.function_call_arguments.delta",
                json!({"type": "response.function_call_arguments.delta", "item_id": item["id"],
                       "output_index": 0, "delta": args}),
            ),
            (
                "response.function_call_arguments.done",
                json!({"type": "response.function_call_arguments.done", "item_id": item["id"],
                       "output_index": 0, "arguments": args}),
            ),
        ]);
    } else if item["type"] == "message" {
        let text = item["content"][0]["text"].clone();
        let mut started = item.clone();
        started["content"] = json!([]);
        started["status"] = json!("in_progress");
        let part = |t: Value| json!({"type": "output_text", "text": t, "annotations": []});
        let at = |kind: &str, extra: Value| {
            let mut v = json!({"type": kind, "item_id": item["id"], "output_index": 0,
                               "content_index": 0});
            for (k, x) in extra.as_object().unwrap() {
                v[k] = x.clone();
            }
            v
        };
        ev.extend([
            (
                "response.output_item.added",
                json!({"type": "response.output_item.added", "output_index": 0, "item": started}),
            ),
            (
                "response.content_part.added",
                at(
                    "response.content_part.added",
                    json!({"part": part(json!(""))}),
                ),
            ),
            (
                "response.output_text.delta",
                at("response.output_text.delta", json!({"delta": text})),
            ),
            (
                "response.output_text.done",
                at("response.output_text.done", json!({"text": text})),
            ),
            (
                "response.content_part.done",
                at(
                    "response.content_part.done",
                    json!({"part": part(text.clone())}),
                ),
            ),
        ]);
    }
    let output = if item.is_null() {
        json!([])
    } else {
        ev.push((
            "response.output_item.done",
            json!({"type": "response.output_item.done", "output_index": 0, "item": item}),
        ));
        json!([item])
    };
    ev.push((
        "response.completed",
        json!({"type": "response.completed", "response": response("completed", output)}),
    ));
    super::sse(&ev)
}
