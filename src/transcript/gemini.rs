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
use super::event::{SessionMeta, EXCERPT};
use crate::clock::Micros;
use serde_json::Value;
use std::collections::HashSet;

/// Decodes one Gemini CLI session file (see the module docs).
#[derive(Debug, Default)]
pub struct GeminiDecoder {
    malformed: u64,
    /// What was emitted already: hashes of `(kind, id)`.
    seen: HashSet<u64>,
    session_id: Option<String>,
    model: Option<String>,
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

fn parse_time(v: &Value) -> Option<Micros> {
    let s = v.as_str()?;
    chrono::DateTime::parse_from_rfc3339(s)
        .ok()
        .map(|t| t.timestamp_micros())
}

fn str_of<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str)
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
        let Ok(Value::Object(rec)) = serde_json::from_slice::<Value>(bytes) else {
            self.malformed += 1;
            return;
        };
        let rec = Value::Object(rec);
        if rec.get("$set").is_some() || rec.get("$rewindTo").is_some() {
            return;
        }
        let timestamp = rec
            .get("timestamp")
            .or_else(|| rec.get("startTime"))
            .and_then(parse_time);
        let mut emit = |kind| {
            out.push(Event {
                line,
                timestamp,
                subagent: None,
                kind,
            })
        };
        if rec.get("projectHash").is_some() {
            let id = str_of(&rec, "sessionId").map(str::to_string);
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
        let id = str_of(&rec, "id").unwrap_or_default().to_string();
        match str_of(&rec, "type") {
            Some("user") => self.user(&rec, &id, &mut emit),
            Some("gemini") => self.model_message(&rec, &id, &mut emit),
            Some("info") => {
                let text = str_of(&rec, "content").unwrap_or_default();
                if text.starts_with("Context compressed") && self.first("info", &id) {
                    emit(EventKind::Compaction {
                        trigger: None,
                        pre_tokens: None,
                    });
                }
            }
            _ => {}
        }
    }

    fn malformed(&self) -> u64 {
        self.malformed
    }
}

impl GeminiDecoder {
    fn user(&mut self, rec: &Value, id: &str, emit: &mut impl FnMut(EventKind)) {
        let parts: Vec<&Value> = match rec.get("content") {
            Some(Value::Array(a)) => a.iter().collect(),
            _ => Vec::new(),
        };
        let text: Vec<&str> = parts.iter().filter_map(|p| str_of(p, "text")).collect();
        if !text.is_empty() && self.first("user", id) {
            let text = text.join("\n");
            if text.starts_with("<session_context>") {
                emit(EventKind::InjectedContext { text });
            } else {
                emit(EventKind::UserPrompt { text });
            }
        }
        for r in parts.iter().filter_map(|p| p.get("functionResponse")) {
            self.result(r, None, emit);
        }
    }

    fn model_message(&mut self, rec: &Value, id: &str, emit: &mut impl FnMut(EventKind)) {
        let model = str_of(rec, "model").map(str::to_string);
        if model.is_some() && model != self.model {
            self.model.clone_from(&model);
            emit(EventKind::SessionMeta(SessionMeta {
                session_id: self.session_id.clone(),
                agent: Some(Agent::Gemini),
                model: model.clone(),
                ..SessionMeta::default()
            }));
        }
        let thoughts: Vec<String> = rec
            .get("thoughts")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|t| {
                let d = str_of(t, "description").unwrap_or_default();
                let s = str_of(t, "subject").unwrap_or_default();
                let joined: Vec<&str> = [s, d].into_iter().filter(|x| !x.is_empty()).collect();
                (!joined.is_empty()).then(|| joined.join(": "))
            })
            .collect();
        if !thoughts.is_empty() && self.first("thoughts", id) {
            emit(EventKind::Reasoning {
                text: thoughts.join("\n"),
            });
        }
        let text = match rec.get("content") {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Array(parts)) => parts
                .iter()
                .filter_map(|p| str_of(p, "text"))
                .collect::<Vec<_>>()
                .join(""),
            _ => String::new(),
        };
        if !text.trim().is_empty() && self.first("text", id) {
            emit(EventKind::AssistantText {
                text,
                message_id: Some(id.to_string()),
            });
        }
        if let Some(t) = rec.get("tokens") {
            let n = |k: &str| t.get(k).and_then(Value::as_u64).unwrap_or(0);
            emit(EventKind::TokenUsage {
                message_id: Some(id.to_string()),
                request_id: None,
                model,
                input_tokens: n("input").saturating_sub(n("cached")),
                output_tokens: n("output").saturating_add(n("thoughts")),
                cache_read_tokens: n("cached"),
                cache_creation_tokens: 0,
                cumulative: false,
            });
        }
        for call in rec
            .get("toolCalls")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            self.call(call, emit);
        }
    }

    fn call(&mut self, call: &Value, emit: &mut impl FnMut(EventKind)) {
        let Some(id) = str_of(call, "id") else { return };
        let name = str_of(call, "name").unwrap_or_default();
        let args = call.get("args").cloned().unwrap_or(Value::Null);
        let command = (name == "run_shell_command")
            .then(|| str_of(&args, "command").map(str::to_string))
            .flatten();
        if self.first("call", id) {
            emit(EventKind::ToolCall {
                id: id.to_string(),
                name: name.to_string(),
                command: command.clone(),
                cwd: str_of(&args, "dir_path").map(str::to_string),
                input: excerpt(&args.to_string(), EXCERPT),
            });
            if let Some(path) = edited_path(name, &args) {
                emit(EventKind::FileChange {
                    path,
                    change: ChangeKind::Update,
                    call_id: Some(id.to_string()),
                });
            }
        }
        let failed = str_of(call, "status").is_some_and(|s| s != "success");
        let results = call.get("result").and_then(Value::as_array);
        for r in results.into_iter().flatten() {
            if let Some(r) = r.get("functionResponse") {
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
    }

    /// A call's result, once per call id; returns what it said and whether it
    /// failed when it was emitted now.
    fn result(
        &mut self,
        r: &Value,
        failed: Option<bool>,
        emit: &mut impl FnMut(EventKind),
    ) -> Option<(String, bool)> {
        let id = str_of(r, "id")?;
        if !self.first("result", id) {
            return None;
        }
        let response = r.get("response");
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
fn edited_path(name: &str, args: &Value) -> Option<String> {
    matches!(name, "write_file" | "replace" | "edit")
        .then(|| str_of(args, "file_path").map(str::to_string))
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
