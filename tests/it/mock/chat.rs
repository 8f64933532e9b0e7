//! The OpenAI Chat Completions API as Qwen Code (0.24) uses it: `POST /v1/chat/completions`
//! with `stream: true` and `stream_options.include_usage`, answered with
//! `text/event-stream` lines `data: {chat.completion.chunk}\n\n` (no `event:` lines): a
//! role chunk, one chunk with the whole `delta.content` or the whole
//! `delta.tool_calls[0]` (`id`, `type`, `function.name`, `function.arguments` as a JSON
//! string), a chunk with `finish_reason` (`tool_calls` or `stop`), a `choices: []` chunk
//! carrying `usage` when it was asked for, then `data: [DONE]`. A request with
//! `stream: false` gets one `chat.completion` JSON object.
//!
//! The conversation is `messages`: `system`, `user` (content a string or text parts; the
//! first carries `<system-reminder>` parts before the prompt), `assistant` (`content` and/or
//! `tool_calls`), `tool` (`tool_call_id`, content text parts: `Command: …\nDirectory: …\n
//! Output: …\nError: …\nExit Code: …\nSignal: …\nProcess Group PGID: …`). Text typed into
//! the TUI while a command runs comes as a `user` message right after the `tool` one.
//!
//! Side requests that must not take a step: the TUI's follow-up suggestion (same tools and
//! system prompt as a turn; last user text starts `[SUGGESTION MODE:`), the first try of a
//! compression (same tools; last user text starts `You are the component that summarizes a
//! conversation`), the managed auto-memory extractor (offers `run_shell_command` too; its
//! system prompt names it), and the auto-approval classifier (only `respond_in_schema`,
//! `tool_choice: "required"`, not streamed), which is told `shouldBlock: false`.

use super::{Reply, Request};
use serde_json::{json, Value};

/// The shell tool a turn offers.
const SHELL: &str = "run_shell_command";
/// The one tool of an auto-approval classifier request.
const CLASSIFIER: &str = "respond_in_schema";
/// The start of the last user text of a follow-up suggestion request.
const SUGGESTION: &str = "[SUGGESTION MODE:";
/// The start of the last user text of a compression request that still offers tools.
const COMPACT: &str = "You are the component that summarizes a conversation";
/// The start of the managed auto-memory extractor's system prompt.
const MEMORY: &str = "You are now acting as the managed memory extraction subagent";

pub(crate) fn parse(body: &Value) -> Request<'_> {
    let given = last_user_text(body);
    let last = last_message_text(body);
    let last = last.trim_start();
    let turn = offers(body, SHELL)
        && !system_text(body).trim_start().starts_with(MEMORY)
        && !last.starts_with(SUGGESTION)
        && !last.starts_with(COMPACT);
    Request { body, turn, given }
}

/// What follows the last `assistant` message in `messages`: tool results and user text,
/// one line per text part.
pub fn last_user_text(body: &Value) -> String {
    let Some(msgs) = body["messages"].as_array() else {
        return String::new();
    };
    let from = msgs
        .iter()
        .rposition(|m| m["role"] == "assistant")
        .map_or(0, |p| p + 1);
    let mut out = String::new();
    for m in &msgs[from..] {
        if m["role"] == "tool" || m["role"] == "user" {
            collect_text(&m["content"], &mut out);
        }
    }
    out
}

/// The text of a message's `content` (a string, or parts with `text`), a newline after
/// each piece.
fn collect_text(content: &Value, out: &mut String) {
    match content {
        Value::String(s) => {
            out.push_str(s);
            out.push('\n');
        }
        Value::Array(parts) => {
            for p in parts {
                if let Some(t) = p["text"].as_str() {
                    out.push_str(t);
                    out.push('\n');
                }
            }
        }
        _ => {}
    }
}

/// The text of the last message (whatever its role).
fn last_message_text(body: &Value) -> String {
    let mut out = String::new();
    if let Some(last) = body["messages"].as_array().and_then(|m| m.last()) {
        collect_text(&last["content"], &mut out);
    }
    out
}

/// The text of the leading `system` message, if any.
fn system_text(body: &Value) -> String {
    let mut out = String::new();
    if let Some(first) = body["messages"].as_array().and_then(|m| m.first()) {
        if first["role"] == "system" {
            collect_text(&first["content"], &mut out);
        }
    }
    out
}

/// The offered tool called `name` (`tools[].function`), if any.
fn tool<'a>(body: &'a Value, name: &str) -> Option<&'a Value> {
    body["tools"]
        .as_array()?
        .iter()
        .map(|t| &t["function"])
        .find(|f| f["name"] == name)
}

fn offers(body: &Value, name: &str) -> bool {
    tool(body, name).is_some()
}

/// `run_shell_command`'s arguments for `cmd`: `command`, plus `description` and
/// `is_background` when the offered schema has them (only `command` is required in 0.24).
fn shell_args(body: &Value, cmd: &str) -> Value {
    let mut args = json!({ "command": cmd });
    let props = tool(body, SHELL).map(|f| &f["parameters"]["properties"]);
    let takes = |field: &str| props.is_some_and(|p| !p[field].is_null());
    if takes("description") || props.is_none() {
        args["description"] = json!("Run the scripted command");
    }
    if takes("is_background") || props.is_none() {
        args["is_background"] = json!(false);
    }
    args
}

pub(crate) fn respond(body: &Value, reply: &Reply, n: u64) -> warp::http::Response<String> {
    let model = body["model"].as_str().unwrap_or("mock-model");
    let id = format!("chatcmpl-mock{n:06}");
    // The tool call to make, if any: the scripted shell command, or the classifier's verdict.
    let call = match reply {
        // Qwen Code's shell tool has no sandbox escalation to ask for: a plain call.
        Reply::Shell(cmd) | Reply::Escalated(cmd) => Some((SHELL, shell_args(body, cmd))),
        _ if offers(body, CLASSIFIER) => Some((CLASSIFIER, json!({ "shouldBlock": false }))),
        _ => None,
    };
    let text = match reply {
        Reply::Text(t) => t.clone(),
        _ => String::new(),
    };
    let usage = json!({"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110,
        "prompt_tokens_details": {"cached_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": 0}});
    let call_id = format!("call_mock{n:06}");
    let finish = if call.is_some() { "tool_calls" } else { "stop" };
    if body["stream"] != true {
        let message = match &call {
            Some((name, args)) => json!({"role": "assistant", "content": null, "tool_calls": [
                {"id": call_id, "type": "function",
                 "function": {"name": name, "arguments": args.to_string()}}]}),
            None => json!({"role": "assistant", "content": text}),
        };
        return super::json_response(
            json!({"id": id, "object": "chat.completion", "created": 0, "model": model,
                   "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                   "usage": usage})
            .to_string(),
        );
    }
    let chunk = |choices: Value| {
        json!({"id": id, "object": "chat.completion.chunk", "created": 0, "model": model,
               "choices": choices})
    };
    let delta = |delta: Value, finish: Value| {
        chunk(json!([{"index": 0, "delta": delta, "finish_reason": finish}]))
    };
    let mut chunks = vec![delta(
        json!({"role": "assistant", "content": ""}),
        Value::Null,
    )];
    match &call {
        Some((name, args)) => chunks.push(delta(
            json!({"tool_calls": [{"index": 0, "id": call_id, "type": "function",
                   "function": {"name": name, "arguments": args.to_string()}}]}),
            Value::Null,
        )),
        None if !text.is_empty() => chunks.push(delta(json!({ "content": text }), Value::Null)),
        None => {}
    }
    chunks.push(delta(json!({}), json!(finish)));
    if body["stream_options"]["include_usage"] == true {
        let mut last = chunk(json!([]));
        last["usage"] = usage;
        chunks.push(last);
    }
    let mut out = String::new();
    for c in &chunks {
        out.push_str(&format!("data: {c}\n\n"));
    }
    out.push_str("data: [DONE]\n\n");
    super::event_stream(out)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    fn turn(messages: serde_json::Value) -> serde_json::Value {
        json!({"model": "m", "stream": true, "stream_options": {"include_usage": true},
               "tools": [{"type": "function", "function": {"name": "run_shell_command",
                   "parameters": {"type": "object", "properties": {
                       "command": {"type": "string"}, "description": {"type": "string"},
                       "is_background": {"type": "boolean"}}, "required": ["command"]}}}],
               "messages": messages})
    }

    #[test]
    fn turns_and_side_requests_are_told_apart() {
        let prompt = turn(json!([
            {"role": "system", "content": "You are Qwen Code, an interactive CLI agent"},
            {"role": "user", "content": [{"type": "text", "text": "<system-reminder>\nx\n</system-reminder>"},
                                         {"type": "text", "text": "do it [abcdefghi]"}]},
        ]));
        let req = super::parse(&prompt);
        assert!(req.turn);
        assert!(req.given.ends_with("do it [abcdefghi]\n"));

        let after_tool = turn(json!([
            {"role": "system", "content": "You are Qwen Code"},
            {"role": "user", "content": [{"type": "text", "text": "do it"}]},
            {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function",
                "function": {"name": "run_shell_command", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": [{"type": "text", "text": "Output: hi"}]},
            {"role": "user", "content": [{"type": "text", "text": "steer [bcdfghjkl]"}]},
        ]));
        let req = super::parse(&after_tool);
        assert!(req.turn);
        assert_eq!(req.given, "Output: hi\nsteer [bcdfghjkl]\n");

        let suggestion = turn(json!([
            {"role": "system", "content": "You are Qwen Code"},
            {"role": "assistant", "content": "ok"},
            {"role": "user", "content": [{"type": "text", "text": "[SUGGESTION MODE: Suggest what…"}]},
        ]));
        assert!(!super::parse(&suggestion).turn);
        let compact = turn(json!([
            {"role": "user", "content": [{"type": "text",
                "text": "You are the component that summarizes a conversation when…"}]},
        ]));
        assert!(!super::parse(&compact).turn);
        let memory = turn(json!([
            {"role": "system", "content": "You are now acting as the managed memory extraction subagent for…"},
            {"role": "user", "content": [{"type": "text", "text": "Managed memory has TWO directories."}]},
        ]));
        assert!(!super::parse(&memory).turn);
        let no_tools = json!({"messages": [{"role": "user", "content": "hi"}]});
        assert!(!super::parse(&no_tools).turn);
    }

    #[test]
    fn a_shell_reply_streams_one_tool_call_and_usage() {
        let body = turn(json!([{"role": "user", "content": "x"}]));
        let resp = super::respond(&body, &super::Reply::Shell("echo hi".into()), 3);
        let text = resp.body();
        assert!(text.ends_with("data: [DONE]\n\n"));
        let chunks: Vec<serde_json::Value> = text
            .split("\n\n")
            .filter_map(|l| l.strip_prefix("data: "))
            .filter(|d| *d != "[DONE]")
            .map(|d| serde_json::from_str(d).unwrap())
            .collect();
        let call = &chunks[1]["choices"][0]["delta"]["tool_calls"][0];
        assert_eq!(call["function"]["name"], "run_shell_command");
        let args: serde_json::Value =
            serde_json::from_str(call["function"]["arguments"].as_str().unwrap()).unwrap();
        assert_eq!(args["command"], "echo hi");
        assert_eq!(args["is_background"], false);
        assert_eq!(chunks[2]["choices"][0]["finish_reason"], "tool_calls");
        assert_eq!(chunks[3]["usage"]["prompt_tokens"], 100);
    }
}
