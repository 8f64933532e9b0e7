//! The Gemini API as Gemini CLI (0.61) uses it with `GOOGLE_GEMINI_BASE_URL` and a
//! `gemini-api-key` auth type.
//!
//! * Turns: `POST /v1beta/models/{model}:streamGenerateContent?alt=sse`, body
//!   `{contents, systemInstruction, tools: [{functionDeclarations: [...]}], generationConfig}`
//!   (no `model` field: the model is in the path). The answer is SSE with one
//!   `GenerateContentResponse` per event, `data: {json}` and a blank line, no `event:`
//!   lines: `{"candidates": [{"content": {"role": "model", "parts": [...]},
//!   "finishReason": "STOP", "index": 0}], "usageMetadata": {...}, "modelVersion", "responseId"}`.
//!   A part is `{"text": …}` or `{"functionCall": {"name", "args"}}` (the CLI invents the call
//!   id when none is sent); `finishReason` is `STOP` for a call too. The last
//!   `usageMetadata` becomes the session file's `tokens` (`promptTokenCount` → input,
//!   `candidatesTokenCount` → output, `cachedContentTokenCount` → cached,
//!   `thoughtsTokenCount` → thoughts, `toolUsePromptTokenCount` → tool,
//!   `totalTokenCount` → total, copied as sent).
//! * `contents` alternate `user`/`model`; the first user content holds a
//!   `<session_context>` text part and then the prompt; a tool result is a user content
//!   `{"functionResponse": {"id", "name": "run_shell_command", "response": {"output":
//!   "<untrusted_context>\nOutput: …\nProcess Group PGID: N\n</untrusted_context>"}}}`
//!   (stdout and stderr merged; an AfterTool hook's `additionalContext` follows as
//!   `\n\n<hook_context>…</hook_context>`). After a resume the same functionResponse
//!   part appears twice in that content.
//! * Side requests (no tools), all `POST /v1beta/models/{model}:generateContent`
//!   (not streamed), answered by [`side_response`]: the model router when no `-m` is
//!   given (`generationConfig.responseMimeType: "application/json"` with a
//!   `responseJsonSchema`), and chat compression (a `<state_snapshot>` summary, then a
//!   "Critically evaluate the <state_snapshot>" check), to a fixed model, not `-m`'s.
//!   `:countTokens` was not seen; answer `{"totalTokens": N}` if it comes.

use super::{Reply, Request};
use serde_json::{json, Map, Value};

/// How the last user text of a compression request starts (a first snapshot, or one
/// merging a previous snapshot), and the check that follows it.
const COMPRESS: [&str; 3] = [
    "Generate a new <state_snapshot>",
    "A previous <state_snapshot> exists",
    "Critically evaluate the <state_snapshot>",
];

/// The shell tool Gemini CLI offers.
const SHELL_TOOL: &str = "run_shell_command";

pub(crate) fn parse(body: &Value) -> Request<'_> {
    let given = last_user_text(body);
    let has_tools = body["tools"].as_array().is_some_and(|t| {
        t.iter().any(|t| {
            t["functionDeclarations"]
                .as_array()
                .is_some_and(|d| !d.is_empty())
        })
    });
    let compress = COMPRESS.iter().any(|c| given.trim_start().starts_with(c));
    Request {
        body,
        turn: has_tools && !compress,
        given,
    }
}

/// What follows the model's last output in `contents`: tool outputs
/// (`functionResponse.response.output`, or the whole `response` when it has no string
/// `output`) and user text parts, one per line; a part repeated verbatim (a resumed
/// conversation repeats tool results) is taken once.
pub fn last_user_text(body: &Value) -> String {
    let Some(contents) = body["contents"].as_array() else {
        return String::new();
    };
    let from = contents
        .iter()
        .rposition(|c| c["role"] == "model")
        .map_or(0, |p| p + 1);
    let mut seen: Vec<&Value> = Vec::new();
    let mut out = String::new();
    for c in &contents[from..] {
        for part in c["parts"].as_array().into_iter().flatten() {
            if seen.contains(&part) {
                continue;
            }
            seen.push(part);
            if let Some(t) = part["text"].as_str() {
                out.push_str(t);
            } else if part["functionResponse"].is_object() {
                let response = &part["functionResponse"]["response"];
                match response["output"].as_str() {
                    Some(s) => out.push_str(s),
                    None => out.push_str(&response.to_string()),
                }
            } else {
                continue;
            }
            out.push('\n');
        }
    }
    out
}

/// The arguments of a `run_shell_command` call running `cmd`.
fn shell_args(cmd: &str) -> Value {
    json!({"command": cmd, "description": "Run the scripted command"})
}

fn usage() -> Value {
    json!({"promptTokenCount": 100, "candidatesTokenCount": 10, "totalTokenCount": 110,
           "cachedContentTokenCount": 0, "thoughtsTokenCount": 0})
}

/// One `GenerateContentResponse` with these parts, finished.
fn response(parts: Value, n: u64) -> Value {
    json!({
        "candidates": [{"content": {"role": "model", "parts": parts},
                        "finishReason": "STOP", "index": 0}],
        "usageMetadata": usage(),
        "modelVersion": "mock-model",
        "responseId": format!("mockresp{n:06}"),
    })
}

/// A turn's answer, streamed (`alt=sse`). Gemini CLI's shell tool has no sandbox
/// escalation to ask for: [`Reply::Escalated`] is a plain call. [`Reply::Other`] gets
/// a short text, since an answer without parts makes the CLI retry.
pub(crate) fn respond(_body: &Value, reply: &Reply, n: u64) -> warp::http::Response<String> {
    let parts = match reply {
        Reply::Shell(cmd) | Reply::Escalated(cmd) => {
            json!([{"functionCall": {"name": SHELL_TOOL, "args": shell_args(cmd)}}])
        }
        Reply::Text(t) => json!([{ "text": t }]),
        Reply::Other => json!([{"text": "Done."}]),
    };
    sse(&[response(parts, n)])
}

/// A complete `text/event-stream` body of `data:` events, as the API sends for
/// `alt=sse`.
fn sse(chunks: &[Value]) -> warp::http::Response<String> {
    let mut out = String::new();
    for c in chunks {
        out.push_str(&format!("data: {c}\n\n"));
    }
    super::event_stream(out)
}

/// The answer to a non-streamed side request (`:generateContent`, no tools): a JSON
/// text matching `generationConfig.responseJsonSchema` when JSON is asked for (the
/// router; `next_speaker` is answered `"user"`), a `<state_snapshot>` for compression
/// (repeating the conversation's spice briefs, so that the compressed conversation still
/// holds them and [`super::briefs`] still counts its sessions), plain text otherwise.
pub(crate) fn side_response(body: &Value, n: u64) -> warp::http::Response<String> {
    let config = &body["generationConfig"];
    let text = if config["responseMimeType"] == "application/json" {
        let schema = if config["responseJsonSchema"].is_object() {
            &config["responseJsonSchema"]
        } else {
            &config["responseSchema"]
        };
        fill_schema(schema, "").to_string()
    } else if COMPRESS
        .iter()
        .any(|c| last_user_text(body).trim_start().starts_with(c))
    {
        snapshot(body)
    } else {
        "Side answer from the mock.".to_string()
    };
    super::json_response(response(json!([{ "text": text }]), n).to_string())
}

/// A value of the shape `schema` asks for (types in either case).
fn fill_schema(schema: &Value, name: &str) -> Value {
    if name == "next_speaker" {
        return json!("user");
    }
    if let Some(first) = schema["enum"].as_array().and_then(|e| e.first()) {
        return first.clone();
    }
    let kind = schema["type"]
        .as_str()
        .unwrap_or("object")
        .to_ascii_lowercase();
    match kind.as_str() {
        "string" => json!("mock"),
        "integer" | "number" => json!(1),
        "boolean" => json!(false),
        "array" => json!([]),
        _ => {
            let mut obj = Map::new();
            for (k, v) in schema["properties"].as_object().into_iter().flatten() {
                obj.insert(k.clone(), fill_schema(v, k));
            }
            Value::Object(obj)
        }
    }
}

/// A compression summary holding each distinct spice brief of the conversation, in
/// order (a brief runs from its start to the end of its phase-completion line, or to
/// the next brief).
fn snapshot(body: &Value) -> String {
    fn walk<'a>(v: &'a Value, out: &mut Vec<&'a str>) {
        match v {
            Value::String(s) => out.push(s),
            Value::Array(a) => a.iter().for_each(|x| walk(x, out)),
            Value::Object(o) => o.values().for_each(|x| walk(x, out)),
            _ => {}
        }
    }
    let mut strings = Vec::new();
    walk(&body["contents"], &mut strings);
    let mut briefs: Vec<&str> = Vec::new();
    for s in strings {
        let starts: Vec<usize> = s.match_indices(super::BRIEF).map(|(i, _)| i).collect();
        for (k, &i) in starts.iter().enumerate() {
            let end = starts.get(k + 1).copied().unwrap_or(s.len());
            let mut brief = &s[i..end];
            if let Some(d) = brief.find(super::DONE_PREFIX) {
                let line_end = brief[d..].find('\n').map_or(brief.len(), |e| d + e + 1);
                brief = &brief[..line_end];
            }
            if !briefs.contains(&brief) {
                briefs.push(brief);
            }
        }
    }
    let mut out = String::from("<state_snapshot>\nSummary: the mock conversation so far.\n");
    for b in briefs {
        out.push_str(b);
        if !b.ends_with('\n') {
            out.push('\n');
        }
    }
    out.push_str("</state_snapshot>");
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    fn tool_result(out: &str) -> serde_json::Value {
        json!({"functionResponse": {"id": "c1", "name": "run_shell_command",
                                    "response": {"output": out}}})
    }

    #[test]
    fn last_user_text_follows_the_last_model_content() {
        let body = json!({"contents": [
            {"role": "user", "parts": [{"text": "<session_context>x</session_context>"},
                                       {"text": "first"}]},
            {"role": "model", "parts": [{"functionCall": {"name": "run_shell_command",
                                                          "args": {"command": "ls"}}}]},
            {"role": "user", "parts": [tool_result("<untrusted_context>\nOutput: [abcdefghi]\n</untrusted_context>"),
                                       tool_result("<untrusted_context>\nOutput: [abcdefghi]\n</untrusted_context>")]},
            {"role": "user", "parts": [{"text": "queued"}]},
        ], "tools": [{"functionDeclarations": [{"name": "run_shell_command"}]}]});
        assert_eq!(
            super::last_user_text(&body),
            "<untrusted_context>\nOutput: [abcdefghi]\n</untrusted_context>\nqueued\n"
        );
        let req = super::parse(&body);
        assert!(req.turn);
        assert!(!super::parse(&json!({"contents": body["contents"]})).turn);
    }

    #[test]
    fn compression_is_a_side_request_that_keeps_the_briefs() {
        let brief = "You are working on task demo-1 in lane a: T\n\n\
                     When the phase is done and committed, run: /x/spice task phase 1 --done --claimant s1\n";
        let body = json!({"contents": [
            {"role": "user", "parts": [{"text": brief}]},
            {"role": "model", "parts": [{"text": "ok"}]},
            {"role": "user", "parts": [{"text": "Generate a new <state_snapshot> based on the provided history."}]},
        ], "tools": [{"functionDeclarations": [{"name": "run_shell_command"}]}]});
        assert!(!super::parse(&body).turn);
        let snap = super::snapshot(&body);
        assert!(snap.starts_with("<state_snapshot>") && snap.ends_with("</state_snapshot>"));
        assert_eq!(snap.matches("--claimant s1").count(), 1);
        // The check that follows sees the history and the first snapshot: still one copy.
        let check = json!({"contents": [
            {"role": "user", "parts": [{"text": brief}]},
            {"role": "model", "parts": [{"text": snap}]},
            {"role": "user", "parts": [{"text": "Critically evaluate the <state_snapshot> you just generated."}]},
        ]});
        assert_eq!(
            super::snapshot(&check).matches(super::super::BRIEF).count(),
            1
        );
    }

    #[test]
    fn json_side_requests_follow_the_schema() {
        let schema = json!({"type": "OBJECT", "properties": {
            "complexity_reasoning": {"type": "STRING"}, "complexity_score": {"type": "INTEGER"},
            "next_speaker": {"type": "string", "enum": ["user", "model"]}}});
        assert_eq!(
            super::fill_schema(&schema, ""),
            json!({"complexity_reasoning": "mock", "complexity_score": 1, "next_speaker": "user"})
        );
    }
}
