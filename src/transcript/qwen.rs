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
use super::event::{SessionMeta, Unread, EXCERPT};
use super::lenient::{items, micros, parse, Field, Flex};
use record::{Part, Record};
use serde_json::Value;

mod record;

/// Decodes one Qwen Code session file (see the module docs).
#[derive(Debug, Default)]
pub struct QwenDecoder {
    malformed: u64,
    meta: SessionMeta,
    /// Shell commands of calls still open, by call id: a result's commit is read
    /// from its command.
    commands: Vec<(String, String)>,
    unread: Unread,
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

impl Decoder for QwenDecoder {
    fn feed(&mut self, bytes: &[u8], line: u64, out: &mut Vec<Event>) {
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return;
        }
        let Some(rec) = parse::<Record>(bytes) else {
            self.malformed += 1;
            return;
        };
        let timestamp = rec.timestamp.str().and_then(micros);
        let mut emit = |kind| {
            out.push(Event {
                line,
                timestamp,
                subagent: None,
                kind,
            })
        };
        let ty = rec.kind.str().unwrap_or_default();
        if !matches!(ty, "user" | "assistant" | "tool_result" | "system") {
            self.unread
                .note(rec.kind.str().unwrap_or("(no type)"), line);
            return;
        }
        if ty == "system" && rec.subtype.str() != Some("chat_compression") {
            return;
        }
        self.observe_meta(&rec, &mut emit);
        let parts: Vec<&Part> = rec
            .message
            .as_ref()
            .and_then(Flex::obj)
            .map(|m| items(&m.parts).collect())
            .unwrap_or_default();
        match ty {
            "user" => {
                let text = texts(&parts, false);
                if !text.is_empty() {
                    emit(EventKind::UserPrompt { text });
                }
            }
            "assistant" => self.assistant(&rec, &parts, &mut emit),
            "tool_result" => self.tool_result(&rec, &parts, &mut emit),
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

    fn unread(&self) -> &Unread {
        &self.unread
    }
}

/// The text parts (`thought` parts, or the others), joined.
fn texts(parts: &[&Part], thought: bool) -> String {
    parts
        .iter()
        .filter(|p| p.thought.truthy() == thought)
        .filter_map(|p| p.text.str())
        .collect::<Vec<_>>()
        .join("")
}

impl QwenDecoder {
    /// A `SessionMeta` when the session's identity first shows or changes.
    fn observe_meta(&mut self, rec: &Record, emit: &mut impl FnMut(EventKind)) {
        let mut next = self.meta.clone();
        let set = |field: &mut Option<String>, v: Option<&str>| {
            if let Some(v) = v {
                if field.as_deref() != Some(v) {
                    *field = Some(v.to_string());
                }
            }
        };
        set(&mut next.session_id, rec.session_id.str());
        set(&mut next.cwd, rec.cwd.str());
        set(&mut next.version, rec.version.str());
        set(&mut next.git_branch, rec.git_branch.str());
        if rec.kind.str() == Some("assistant") {
            set(&mut next.model, rec.model.str());
        }
        if next != self.meta {
            self.meta = next;
            emit(EventKind::SessionMeta(self.meta.clone()));
        }
    }

    fn assistant(&mut self, rec: &Record, parts: &[&Part], emit: &mut impl FnMut(EventKind)) {
        let id = rec.uuid.str().map(str::to_string);
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
        for call in parts.iter().filter_map(|p| p.function_call.as_ref()?.obj()) {
            called = true;
            let call_id = call.id.str().unwrap_or_default().to_string();
            let name = call.name.str().unwrap_or_default();
            let arg = |k: &str| {
                call.args
                    .as_ref()
                    .and_then(|a| a.get(k))
                    .and_then(Value::as_str)
            };
            let command = (name == "run_shell_command")
                .then(|| arg("command").map(str::to_string))
                .flatten();
            if let Some(c) = &command {
                self.commands.push((call_id.clone(), c.clone()));
                if self.commands.len() > 64 {
                    self.commands.remove(0);
                }
            }
            let input = call
                .args
                .as_ref()
                .map_or_else(|| "null".into(), Value::to_string);
            emit(EventKind::ToolCall {
                id: call_id.clone(),
                name: name.to_string(),
                command,
                cwd: arg("directory").map(str::to_string),
                input: excerpt(&input, EXCERPT),
            });
            if let Some(path) = matches!(name, "write_file" | "edit" | "replace")
                .then(|| arg("file_path").map(str::to_string))
                .flatten()
            {
                emit(EventKind::FileChange {
                    path,
                    change: ChangeKind::Update,
                    call_id: Some(call_id),
                });
            }
        }
        if let Some(u) = rec.usage.as_ref().and_then(Flex::obj) {
            let cached = u.cached.count();
            emit(EventKind::TokenUsage {
                message_id: id,
                request_id: None,
                model: rec.model.str().map(str::to_string),
                input_tokens: u.prompt.count().saturating_sub(cached),
                output_tokens: u.candidates.count().saturating_add(u.thoughts.count()),
                cache_read_tokens: cached,
                cache_creation_tokens: 0,
                cumulative: false,
            });
        }
        if !called {
            emit(EventKind::TurnEnd);
        }
    }

    fn tool_result(&mut self, rec: &Record, parts: &[&Part], emit: &mut impl FnMut(EventKind)) {
        let summary = rec.tool_call_result.as_ref().and_then(Flex::obj);
        let display = summary.and_then(|s| s.display.as_ref()?.obj());
        for r in parts
            .iter()
            .filter_map(|p| p.function_response.as_ref()?.obj())
        {
            let id = r.id.str().unwrap_or_default().to_string();
            let response = r.response.as_ref();
            let raw = match response.and_then(|v| v.get("output")) {
                Some(Value::String(s)) => s.clone(),
                Some(other) => other.to_string(),
                None => response.map(Value::to_string).unwrap_or_default(),
            };
            let (parsed, stated) = shell_output(&raw);
            let exit_code = display
                .and_then(|d| d.exit_code.int())
                .and_then(|c| i32::try_from(c).ok())
                .or(stated);
            let output = display
                .and_then(|d| d.output.str())
                .map(str::to_string)
                .unwrap_or(parsed);
            let failed = summary
                .and_then(|s| s.status.str())
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
