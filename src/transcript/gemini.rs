//! The Gemini CLI session decoder
//! (`~/.gemini/tmp/<project>/chats/session-<date>-<id8>.jsonl`, 0.61).
//!
//! The file is appended to: a header (`sessionId`, `projectHash`, `startTime`) at each
//! start, then one record per message (`{"id","type":"user"|"gemini"|"info",…}`), and
//! `{"$set":{…}}` / `{"$rewindTo":ID}` edits of the CLI's own state. What this decoder
//! relies on, and why:
//! - **A message may be written twice under one id**: a model message is written when
//!   its response arrives (text, tokens) and again, with its `toolCalls` and their
//!   results, when its calls finish. Each message's text, each call and each result is
//!   emitted once, keyed by id; usage is emitted with the message id, so the meter
//!   counts it once.
//! - **A `$set` of `messages` is the whole history again** (at a start, a resume, a
//!   rollback or a compression), with ids already written above it or in the file
//!   the session resumed: it is skipped unread, so an old ACK in it is never read as
//!   new. A compression says so in an `info` record, read as a compaction.
//! - **A call is written only when it finishes**: a call running now, or one its
//!   agent was killed in, is not in the file. The turn has no end marker either: the
//!   lane ends a turn after the agent's text and a quiet spell, as for Claude Code
//!   when it writes none.
//! - A call's result is the tool's text wrapped in `<untrusted_context>`, with
//!   `Output:` before the output and `Exit Code: N` after it when not zero.
//!
//! Unknown record types and fields are skipped; a line that is not a JSON object is
//! counted as malformed.

use super::event::{commit_from, excerpt, Agent, ChangeKind, Decoder, Event, EventKind};
use super::event::{SessionMeta, Unread, EXCERPT};
use super::lenient::{items, micros, parse, Field, Flex};
use record::{Call, Record, Response};
use serde_json::Value;
use std::collections::HashSet;

mod record;

/// Decodes one Gemini CLI session file (see the module docs).
#[derive(Debug, Default)]
pub struct GeminiDecoder {
    malformed: u64,
    /// What was emitted already: hashes of `(kind, id)`.
    seen: HashSet<u64>,
    session_id: Option<String>,
    model: Option<String>,
    unread: Unread,
}

impl GeminiDecoder {
    pub fn new() -> GeminiDecoder {
        GeminiDecoder::default()
    }

    /// True the first time `(kind, id)` is seen.
    fn first(&mut self, kind: &str, id: &str) -> bool {
        let mut h = xxhash_rust::xxh3::Xxh3::new();
        h.update(kind.as_bytes());
        h.update(&[0]);
        h.update(id.as_bytes());
        self.seen.insert(h.digest())
    }
}

impl Decoder for GeminiDecoder {
    fn feed(&mut self, bytes: &[u8], line: u64, out: &mut Vec<Event>) {
        let trimmed = bytes.trim_ascii_start();
        if trimmed.is_empty() {
            return;
        }
        // The whole history again, and the CLI's bookkeeping: nothing new in either.
        if trimmed.starts_with(b"{\"$set\"") || trimmed.starts_with(b"{\"$rewindTo\"") {
            return;
        }
        let Some(rec) = parse::<Record>(bytes) else {
            self.malformed += 1;
            return;
        };
        if rec.set.is_some() || rec.rewind_to.is_some() {
            return;
        }
        let timestamp = rec
            .timestamp
            .str()
            .or(rec.start_time.str())
            .and_then(micros);
        let mut emit = |kind| {
            out.push(Event {
                line,
                timestamp,
                subagent: None,
                kind,
            })
        };
        if rec.project_hash.is_some() {
            let id = rec.session_id.str().map(str::to_string);
            if id.is_some() && id != self.session_id {
                self.session_id.clone_from(&id);
                emit(EventKind::SessionMeta(SessionMeta {
                    session_id: id,
                    agent: Some(Agent::Gemini),
                    model: self.model.clone(),
                    ..SessionMeta::default()
                }));
            }
            return;
        }
        let id = rec.id.str().unwrap_or_default();
        match rec.kind.str() {
            Some("user") => self.user(&rec, id, &mut emit),
            Some("gemini") => self.model_message(&rec, id, &mut emit),
            Some("info") => {
                let text = match &rec.content {
                    Some(Flex::Str(s)) => s.as_str(),
                    _ => "",
                };
                if text.starts_with("Context compressed") && self.first("info", id) {
                    emit(EventKind::Compaction {
                        trigger: None,
                        pre_tokens: None,
                    });
                }
            }
            // The CLI's own notices, shown in its TUI.
            Some("error" | "warning") => {}
            other => self.unread.note(other.unwrap_or("(no type)"), line),
        }
    }

    fn malformed(&self) -> u64 {
        self.malformed
    }

    fn unread(&self) -> &Unread {
        &self.unread
    }
}

impl GeminiDecoder {
    fn user(&mut self, rec: &Record, id: &str, emit: &mut impl FnMut(EventKind)) {
        let text: Vec<&str> = items(&rec.content).filter_map(|p| p.text.str()).collect();
        if !text.is_empty() && self.first("user", id) {
            let text = text.join("\n");
            if text.starts_with("<session_context>") {
                emit(EventKind::InjectedContext { text });
            } else {
                emit(EventKind::UserPrompt { text });
            }
        }
        for p in items(&rec.content) {
            if let Some(r) = p.function_response.as_ref().and_then(Flex::obj) {
                self.result(r, None, emit);
            }
        }
    }

    fn model_message(&mut self, rec: &Record, id: &str, emit: &mut impl FnMut(EventKind)) {
        let model = rec.model.str().map(str::to_string);
        if model.is_some() && model != self.model {
            self.model.clone_from(&model);
            emit(EventKind::SessionMeta(SessionMeta {
                session_id: self.session_id.clone(),
                agent: Some(Agent::Gemini),
                model: model.clone(),
                ..SessionMeta::default()
            }));
        }
        let thoughts: Vec<String> = items(&rec.thoughts)
            .filter_map(|t| {
                let joined: Vec<&str> = [t.subject.str(), t.description.str()]
                    .into_iter()
                    .flatten()
                    .filter(|x| !x.is_empty())
                    .collect();
                (!joined.is_empty()).then(|| joined.join(": "))
            })
            .collect();
        if !thoughts.is_empty() && self.first("thoughts", id) {
            emit(EventKind::Reasoning {
                text: thoughts.join("\n"),
            });
        }
        let text = match &rec.content {
            Some(Flex::Str(s)) => s.clone(),
            _ => items(&rec.content)
                .filter_map(|p| p.text.str())
                .collect::<Vec<_>>()
                .join(""),
        };
        if !text.trim().is_empty() && self.first("text", id) {
            emit(EventKind::AssistantText {
                text,
                message_id: Some(id.to_string()),
            });
        }
        if let Some(t) = rec.tokens.as_ref().and_then(Flex::obj) {
            let n = |f: &Option<_>| Field::count(f);
            emit(EventKind::TokenUsage {
                message_id: Some(id.to_string()),
                request_id: None,
                model,
                input_tokens: n(&t.input).saturating_sub(n(&t.cached)),
                output_tokens: n(&t.output).saturating_add(n(&t.thoughts)),
                cache_read_tokens: n(&t.cached),
                cache_creation_tokens: 0,
                cumulative: false,
            });
        }
        for call in items(&rec.tool_calls) {
            self.call(call, emit);
        }
    }

    fn call(&mut self, call: &Call, emit: &mut impl FnMut(EventKind)) {
        let Some(id) = call.id.str() else { return };
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
        if self.first("call", id) {
            let input = call
                .args
                .as_ref()
                .map_or_else(|| "null".into(), Value::to_string);
            emit(EventKind::ToolCall {
                id: id.to_string(),
                name: name.to_string(),
                command: command.clone(),
                cwd: arg("dir_path").map(str::to_string),
                input: excerpt(&input, EXCERPT),
            });
            if let Some(path) = edited_path(name, arg("file_path")) {
                emit(EventKind::FileChange {
                    path,
                    change: ChangeKind::Update,
                    call_id: Some(id.to_string()),
                });
            }
        }
        let failed = call.status.str().is_some_and(|s| s != "success");
        for p in items(&call.result) {
            let Some(r) = p.function_response.as_ref().and_then(Flex::obj) else {
                continue;
            };
            let shown = self.result(r, Some(failed), emit);
            if let (Some(cmd), Some((out, failed))) = (&command, shown) {
                if let Some((sha, message)) = commit_from(cmd, &out, failed) {
                    emit(EventKind::Commit {
                        sha,
                        message,
                        call_id: Some(id.to_string()),
                    });
                }
            }
        }
    }

    /// A call's result, once per call id; returns what it said and whether it
    /// failed when it was emitted now.
    fn result(
        &mut self,
        r: &Response,
        failed: Option<bool>,
        emit: &mut impl FnMut(EventKind),
    ) -> Option<(String, bool)> {
        let id = r.id.str()?;
        if !self.first("result", id) {
            return None;
        }
        let response = r.response.as_ref();
        let raw = match response.and_then(|v| v.get("output").or_else(|| v.get("error"))) {
            Some(Value::String(s)) => s.clone(),
            Some(other) => other.to_string(),
            None => response.map(Value::to_string).unwrap_or_default(),
        };
        let (output, exit_code) = shell_output(&raw);
        let failed = failed.unwrap_or(false)
            || exit_code.is_some_and(|c| c != 0)
            || response.is_some_and(|v| v.get("error").is_some());
        emit(EventKind::ToolResult {
            id: id.to_string(),
            exit_code,
            failed,
            output: excerpt(&output, EXCERPT),
        });
        Some((output, failed))
    }
}

/// The file an edit tool call writes, where it names one.
fn edited_path(name: &str, file_path: Option<&str>) -> Option<String> {
    matches!(name, "write_file" | "replace" | "edit")
        .then(|| file_path.map(str::to_string))
        .flatten()
}

/// The shell tool's result without its envelope (`<untrusted_context>`, `Output: `,
/// the process group line), and the exit code it states (`Exit Code: N`, written
/// only when not zero).
pub fn shell_output(raw: &str) -> (String, Option<i32>) {
    let mut body = raw.trim();
    if let Some(inner) = body
        .strip_prefix("<untrusted_context>")
        .and_then(|b| b.strip_suffix("</untrusted_context>"))
    {
        body = inner.trim();
    }
    let Some(rest) = body.strip_prefix("Output: ") else {
        return (body.to_string(), None);
    };
    let mut exit = None;
    let mut kept: Vec<&str> = Vec::new();
    for l in rest.lines() {
        if let Some(code) = l.strip_prefix("Exit Code: ") {
            exit = code.trim().parse().ok();
        } else if !l.starts_with("Process Group PGID: ") {
            kept.push(l);
        }
    }
    (kept.join("\n"), exit.or(Some(0)))
}

#[cfg(test)]
mod tests;
