//! Events as JSON Lines, written directly instead of through serde.
//!
//! `spice watch --json` prints every event of every followed file, and serde's derived
//! serialisation of an [`Event`] (a map for the flattened kind, serde_json's
//! byte-at-a-time escape table, the bidi pass over the finished line) was a sixth of
//! the time to decode and print a transcript. This writer is the fast path for it.
//!
//! Invariants:
//! - The bytes are exactly those of [`super::sanitize::json_line`] on the same value:
//!   serde's shape (field order, `None`s that are skipped, the `type` tag of the
//!   flattened kind), serde_json's escapes and number formatting, bidi controls as
//!   `\uXXXX`. Tests compare the two on every variant and on every fixture's events.
//! - Every field is written: each variant is destructured whole, so a field added to
//!   the event model does not compile until it is written here too.

use super::event::{ChangeKind, Event, EventKind, SessionMeta};
use super::sanitize::write_json_str;
use std::path::Path;

/// The start of every line of one file in `watch --json`: `{"file":<path>,"event":`.
/// `None` when the path is not UTF-8, which serde refuses (such lines are `null`).
pub fn file_prefix(path: &Path) -> Option<Vec<u8>> {
    let path = path.to_str()?;
    let mut out = b"{\"file\":".to_vec();
    write_json_str(&mut out, path);
    out.extend_from_slice(b",\"event\":");
    Some(out)
}

/// Appends `e` as one JSON object (no newline).
pub fn write_event(out: &mut Vec<u8>, e: &Event) {
    let Event {
        line,
        timestamp,
        subagent,
        kind,
    } = e;
    out.extend_from_slice(b"{\"line\":");
    int(out, *line);
    key(out, "timestamp");
    match timestamp {
        Some(t) => int(out, *t),
        None => out.extend_from_slice(b"null"),
    }
    opt_str(out, "subagent", subagent);
    match kind {
        EventKind::SessionMeta(meta) => {
            tag(out, "session_meta");
            let SessionMeta {
                session_id,
                agent,
                version,
                cwd,
                model,
                git_branch,
            } = meta;
            opt_str(out, "session_id", session_id);
            key(out, "agent");
            match agent {
                Some(a) => {
                    out.push(b'"');
                    out.extend_from_slice(a.name().as_bytes());
                    out.push(b'"');
                }
                None => out.extend_from_slice(b"null"),
            }
            opt_str(out, "version", version);
            opt_str(out, "cwd", cwd);
            opt_str(out, "model", model);
            opt_str(out, "git_branch", git_branch);
        }
        EventKind::UserPrompt { text } => {
            tag(out, "user_prompt");
            str_field(out, "text", text);
        }
        EventKind::InjectedContext { text } => {
            tag(out, "injected_context");
            str_field(out, "text", text);
        }
        EventKind::CompactionSummary { text } => {
            tag(out, "compaction_summary");
            str_field(out, "text", text);
        }
        EventKind::AssistantText { text, message_id } => {
            tag(out, "assistant_text");
            str_field(out, "text", text);
            opt_str(out, "message_id", message_id);
        }
        EventKind::Reasoning { text } => {
            tag(out, "reasoning");
            str_field(out, "text", text);
        }
        EventKind::ToolCall {
            id,
            name,
            command,
            cwd,
            input,
        } => {
            tag(out, "tool_call");
            str_field(out, "id", id);
            str_field(out, "name", name);
            opt_str(out, "command", command);
            opt_str(out, "cwd", cwd);
            str_field(out, "input", input);
        }
        EventKind::ToolResult {
            id,
            exit_code,
            failed,
            output,
        } => {
            tag(out, "tool_result");
            str_field(out, "id", id);
            if let Some(code) = exit_code {
                key(out, "exit_code");
                int(out, *code);
            }
            key(out, "failed");
            boolean(out, *failed);
            str_field(out, "output", output);
        }
        EventKind::FileChange {
            path,
            change,
            call_id,
        } => {
            tag(out, "file_change");
            str_field(out, "path", path);
            key(out, "change");
            match change {
                ChangeKind::Add => out.extend_from_slice(b"{\"kind\":\"add\"}"),
                ChangeKind::Update => out.extend_from_slice(b"{\"kind\":\"update\"}"),
                ChangeKind::Delete => out.extend_from_slice(b"{\"kind\":\"delete\"}"),
                ChangeKind::Move { to } => {
                    out.extend_from_slice(b"{\"kind\":\"move\"");
                    str_field(out, "to", to);
                    out.push(b'}');
                }
            }
            opt_str(out, "call_id", call_id);
        }
        EventKind::Commit {
            sha,
            message,
            call_id,
        } => {
            tag(out, "commit");
            opt_str(out, "sha", sha);
            opt_str(out, "message", message);
            opt_str(out, "call_id", call_id);
        }
        EventKind::Compaction {
            trigger,
            pre_tokens,
        } => {
            tag(out, "compaction");
            opt_str(out, "trigger", trigger);
            if let Some(n) = pre_tokens {
                key(out, "pre_tokens");
                int(out, *n);
            }
        }
        EventKind::SubagentLink {
            agent_id,
            description,
            call_id,
        } => {
            tag(out, "subagent_link");
            str_field(out, "agent_id", agent_id);
            opt_str(out, "description", description);
            opt_str(out, "call_id", call_id);
        }
        EventKind::TokenUsage {
            message_id,
            request_id,
            model,
            input_tokens,
            output_tokens,
            cache_read_tokens,
            cache_creation_tokens,
            cumulative,
        } => {
            tag(out, "token_usage");
            opt_str(out, "message_id", message_id);
            opt_str(out, "request_id", request_id);
            opt_str(out, "model", model);
            key(out, "input_tokens");
            int(out, *input_tokens);
            key(out, "output_tokens");
            int(out, *output_tokens);
            key(out, "cache_read_tokens");
            int(out, *cache_read_tokens);
            key(out, "cache_creation_tokens");
            int(out, *cache_creation_tokens);
            key(out, "cumulative");
            boolean(out, *cumulative);
        }
        EventKind::TurnEnd => tag(out, "turn_end"),
    }
    out.push(b'}');
}

/// `,"k":` (every key but the first; keys are plain ASCII).
fn key(out: &mut Vec<u8>, k: &str) {
    out.extend_from_slice(b",\"");
    out.extend_from_slice(k.as_bytes());
    out.extend_from_slice(b"\":");
}

fn tag(out: &mut Vec<u8>, ty: &str) {
    out.extend_from_slice(b",\"type\":\"");
    out.extend_from_slice(ty.as_bytes());
    out.push(b'"');
}

fn str_field(out: &mut Vec<u8>, k: &str, v: &str) {
    key(out, k);
    write_json_str(out, v);
}

/// Skipped when `None`, as `skip_serializing_if = "Option::is_none"` does.
fn opt_str(out: &mut Vec<u8>, k: &str, v: &Option<String>) {
    if let Some(v) = v {
        str_field(out, k, v);
    }
}

fn int<I: itoa::Integer>(out: &mut Vec<u8>, n: I) {
    out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
}

fn boolean(out: &mut Vec<u8>, b: bool) {
    out.extend_from_slice(if b { b"true" } else { b"false" });
}

#[cfg(test)]
mod tests;
