//! The Qwen Code session decoder
//! (`~/.qwen/projects/<cwd, '/' and '.' as '-'>/chats/<sessionId>.jsonl`, 0.24).
//!
//! Records are appended and chained by `uuid`/`parentUuid`, each carrying the
//! session's id, `cwd`, `version` and `gitBranch`, with a `message` of Gemini-style
//! `parts`:
//! - `user`: the prompt's text parts; subtype `mid_turn_user_message` is text typed
//!   while a command ran, which Qwen Code sends right after that command's result;
//! - `assistant`: text, `thought` and `functionCall` parts, and `usageMetadata` (one
//!   API call each: counted by the record's uuid). An assistant record without a call
//!   ends the agent's turn;
//! - `tool_result`: the `functionResponse` and a `toolCallResult` with the status
//!   and, for the shell, the exit code and output;
//! - `system`, by `subtype`: `chat_compression` is a compaction; `ui_telemetry`
//!   repeats the model's text and side requests' (memory, suggestions), so no ACK
//!   and no token is read from it; the rest is the CLI's bookkeeping.
//!
//! A call the agent was killed in has its `functionCall` record and no result; a
//! resume appends to the same file. Unknown record types are skipped; a line that is
//! not a JSON object is counted as malformed.

use super::event::{commit_from, excerpt, Agent, ChangeKind, Decoder, Event, EventKind};
use super::event::{SessionMeta, EXCERPT};
use crate::clock::Micros;
use serde_json::Value;

/// Decodes one Qwen Code session file (see the module docs).
#[derive(Debug, Default)]
pub struct QwenDecoder {
    malformed: u64,
    meta: SessionMeta,
    /// Shell commands of calls still open, by call id: a result's commit is read
    /// from its command.
    commands: Vec<(String, String)>,
}

impl QwenDecoder {
    pub fn new() -> QwenDecoder {
        QwenDecoder {
            meta: SessionMeta {
                agent: Some(Agent::Qwen),
                ..SessionMeta::default()
            },
            ..QwenDecoder::default()
        }
    }
}

fn str_of<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str)
}

fn parse_time(v: Option<&Value>) -> Option<Micros> {
    let s = v?.as_str()?;
    chrono::DateTime::parse_from_rfc3339(s)
        .ok()
        .map(|t| t.timestamp_micros())
}

impl Decoder for QwenDecoder {
    fn feed(&mut self, bytes: &[u8], line: u64, out: &mut Vec<Event>) {
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return;
        }
        let Ok(rec @ Value::Object(_)) = serde_json::from_slice::<Value>(bytes) else {
            self.malformed += 1;
            return;
        };
        let timestamp = parse_time(rec.get("timestamp"));
        let mut emit = |kind| {
            out.push(Event {
                line,
                timestamp,
                subagent: None,
                kind,
            })
        };
        let ty = str_of(&rec, "type").unwrap_or_default();
        let subtype = str_of(&rec, "subtype");
        if ty == "system" && subtype != Some("chat_compression") {
            return;
        }
        self.observe_meta(&rec, &mut emit);
        let parts: &[Value] = rec
            .get("message")
            .and_then(|m| m.get("parts"))
            .and_then(Value::as_array)
            .map_or(&[], Vec::as_slice);
        match ty {
            "user" => {
                let text = texts(parts, false);
                if !text.is_empty() {
                    emit(EventKind::UserPrompt { text });
                }
            }
            "assistant" => self.assistant(&rec, parts, &mut emit),
            "tool_result" => self.tool_result(&rec, parts, &mut emit),
            "system" => emit(EventKind::Compaction {
                trigger: None,
                pre_tokens: None,
            }),
            _ => {}
        }
    }

    fn malformed(&self) -> u64 {
        self.malformed
    }
}

/// The text parts (`thought` parts, or the others), joined.
fn texts(parts: &[Value], thought: bool) -> String {
    parts
        .iter()
        .filter(|p| p.get("thought").and_then(Value::as_bool).unwrap_or(false) == thought)
        .filter_map(|p| str_of(p, "text"))
        .collect::<Vec<_>>()
        .join("")
}

impl QwenDecoder {
    /// A `SessionMeta` when the session's identity first shows or changes.
    fn observe_meta(&mut self, rec: &Value, emit: &mut impl FnMut(EventKind)) {
        let mut next = self.meta.clone();
        let set = |field: &mut Option<String>, key: &str| {
            if let Some(v) = str_of(rec, key) {
                if field.as_deref() != Some(v) {
                    *field = Some(v.to_string());
                }
            }
        };
        set(&mut next.session_id, "sessionId");
        set(&mut next.cwd, "cwd");
        set(&mut next.version, "version");
        set(&mut next.git_branch, "gitBranch");
        if str_of(rec, "type") == Some("assistant") {
            set(&mut next.model, "model");
        }
        if next != self.meta {
            self.meta = next;
            emit(EventKind::SessionMeta(self.meta.clone()));
        }
    }

    fn assistant(&mut self, rec: &Value, parts: &[Value], emit: &mut impl FnMut(EventKind)) {
        let id = str_of(rec, "uuid").map(str::to_string);
        let thought = texts(parts, true);
        if !thought.trim().is_empty() {
            emit(EventKind::Reasoning { text: thought });
        }
        let text = texts(parts, false);
        if !text.trim().is_empty() {
            emit(EventKind::AssistantText {
                text,
                message_id: id.clone(),
            });
        }
        let mut called = false;
        for call in parts.iter().filter_map(|p| p.get("functionCall")) {
            called = true;
            let call_id = str_of(call, "id").unwrap_or_default().to_string();
            let name = str_of(call, "name").unwrap_or_default();
            let args = call.get("args").cloned().unwrap_or(Value::Null);
            let command = (name == "run_shell_command")
                .then(|| str_of(&args, "command").map(str::to_string))
                .flatten();
            if let Some(c) = &command {
                self.commands.push((call_id.clone(), c.clone()));
                if self.commands.len() > 64 {
                    self.commands.remove(0);
                }
            }
            emit(EventKind::ToolCall {
                id: call_id.clone(),
                name: name.to_string(),
                command,
                cwd: str_of(&args, "directory").map(str::to_string),
                input: excerpt(&args.to_string(), EXCERPT),
            });
            if let Some(path) = matches!(name, "write_file" | "edit" | "replace")
                .then(|| str_of(&args, "file_path").map(str::to_string))
                .flatten()
            {
                emit(EventKind::FileChange {
                    path,
                    change: ChangeKind::Update,
                    call_id: Some(call_id),
                });
            }
        }
        if let Some(u) = rec.get("usageMetadata") {
            let n = |k: &str| u.get(k).and_then(Value::as_u64).unwrap_or(0);
            let cached = n("cachedContentTokenCount");
            emit(EventKind::TokenUsage {
                message_id: id,
                request_id: None,
                model: str_of(rec, "model").map(str::to_string),
                input_tokens: n("promptTokenCount").saturating_sub(cached),
                output_tokens: n("candidatesTokenCount").saturating_add(n("thoughtsTokenCount")),
                cache_read_tokens: cached,
                cache_creation_tokens: 0,
                cumulative: false,
            });
        }
        if !called {
            emit(EventKind::TurnEnd);
        }
    }

    fn tool_result(&mut self, rec: &Value, parts: &[Value], emit: &mut impl FnMut(EventKind)) {
        let summary = rec.get("toolCallResult");
        let display = summary.and_then(|s| s.get("resultDisplay"));
        for r in parts.iter().filter_map(|p| p.get("functionResponse")) {
            let id = str_of(r, "id").unwrap_or_default().to_string();
            let raw = match r.get("response").and_then(|v| v.get("output")) {
                Some(Value::String(s)) => s.clone(),
                Some(other) => other.to_string(),
                None => r.get("response").map(Value::to_string).unwrap_or_default(),
            };
            let (parsed, stated) = shell_output(&raw);
            let exit_code = display
                .and_then(|d| d.get("exitCode"))
                .and_then(Value::as_i64)
                .map(|c| c as i32)
                .or(stated);
            let output = display
                .and_then(|d| str_of(d, "output"))
                .map(str::to_string)
                .unwrap_or(parsed);
            let failed = summary
                .and_then(|s| str_of(s, "status"))
                .is_some_and(|s| s != "success")
                || exit_code.is_some_and(|c| c != 0);
            emit(EventKind::ToolResult {
                id: id.clone(),
                exit_code,
                failed,
                output: excerpt(&output, EXCERPT),
            });
            if let Some(at) = self.commands.iter().position(|(c, _)| *c == id) {
                let (_, command) = self.commands.remove(at);
                if let Some((sha, message)) = commit_from(&command, &output, failed) {
                    emit(EventKind::Commit {
                        sha,
                        message,
                        call_id: Some(id),
                    });
                }
            }
        }
    }
}

/// The shell tool's result text (`Command:`, `Directory:`, `Output:`, `Error:`,
/// `Exit Code:` …): the output, and the exit code it states.
pub fn shell_output(raw: &str) -> (String, Option<i32>) {
    let Some(start) = raw.find("Output: ") else {
        return (raw.to_string(), None);
    };
    let rest = &raw[start + "Output: ".len()..];
    let end = rest.find("\nError: ").unwrap_or(rest.len());
    let exit = raw
        .lines()
        .find_map(|l| l.strip_prefix("Exit Code: "))
        .and_then(|c| c.trim().parse().ok());
    (rest[..end].to_string(), exit)
}

#[cfg(test)]
mod tests;
