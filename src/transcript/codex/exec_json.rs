//! `codex exec --json` stdout: not a rollout, but the same session told as thread
//! events (`thread.started`, `turn.completed`, `item.started`/`item.completed` with
//! `command_execution`, `file_change`, `agent_message`, `reasoning`, `mcp_tool_call`).
//!
//! Items carry their outcome whole, so a call and its result come from the same
//! record. Item ids (`item_0`, …) restart with each `codex exec` run, so a call is
//! known only while it is open (between its `item.started` and `item.completed`).
//! Turn usage is per turn, not cumulative: each turn is its own usage entry.

use super::record::{Body, Rec};
use super::{CodexDecoder, Sink};
use crate::transcript::event::{commit_from, excerpt, ChangeKind, EventKind, EXCERPT};
use serde_json::Value;
use std::collections::HashSet;

#[derive(Debug, Default)]
pub(super) struct State {
    open: HashSet<String>,
    turns: u64,
}

pub(super) fn record(dec: &mut CodexDecoder, ty: &str, r: &Rec, sink: &mut Sink) {
    match ty {
        "thread.started" => {
            dec.meta.session_id = r.thread_id.non_empty().map(str::to_string);
            dec.emit_meta(sink);
        }
        "turn.completed" => {
            dec.exec.turns += 1;
            if let Some(u) = r.usage.as_deref() {
                let n = |k: &str| u.get(k).and_then(Value::as_u64).unwrap_or(0);
                sink.push(EventKind::TokenUsage {
                    message_id: Some(format!("turn-{}", dec.exec.turns)),
                    request_id: None,
                    model: dec.meta.model.clone(),
                    input_tokens: n("input_tokens"),
                    output_tokens: n("output_tokens"),
                    cache_read_tokens: n("cached_input_tokens"),
                    cache_creation_tokens: n("cache_write_input_tokens"),
                    cumulative: false,
                });
            }
            sink.push(EventKind::TurnEnd);
        }
        "turn.failed" => sink.push(EventKind::TurnEnd),
        "item.started" | "item.updated" | "item.completed" => {
            if let Some(item) = &r.item.0 {
                self::item(dec, item, ty == "item.completed", sink);
            }
        }
        _ => {}
    }
}

fn item(dec: &mut CodexDecoder, item: &Rec, completed: bool, sink: &mut Sink) {
    let id = item.id.get().unwrap_or("");
    match item.ty.get().unwrap_or("") {
        "command_execution" => {
            let command = item
                .command
                .as_deref()
                .and_then(Value::as_str)
                .unwrap_or("");
            if dec.exec.open.insert(id.to_string()) {
                sink.push(EventKind::ToolCall {
                    id: id.to_string(),
                    name: "command_execution".into(),
                    command: Some(command.to_string()),
                    cwd: dec.meta.cwd.clone(),
                    input: excerpt(command, EXCERPT),
                });
            }
            let status = item.status.get().unwrap_or("");
            if !completed && status == "in_progress" {
                return;
            }
            dec.exec.open.remove(id);
            let exit = item.exit_code.0;
            let failed = exit.is_some_and(|c| c != 0) || matches!(status, "failed" | "declined");
            let body = item
                .aggregated_output
                .as_deref()
                .cloned()
                .unwrap_or_default();
            let id = id.to_string();
            let result = EventKind::ToolResult {
                id: id.clone(),
                exit_code: exit,
                failed,
                output: body.excerpt,
            };
            sink.push(result);
            if let Some((sha, message)) = commit_from(command, &body.commit_lines, failed) {
                sink.push(EventKind::Commit {
                    sha,
                    message,
                    call_id: Some(id),
                });
            }
        }
        "mcp_tool_call" => {
            if dec.exec.open.insert(id.to_string()) {
                let input = item.arguments.0.as_deref().unwrap_or("");
                let (server, tool) = (
                    item.server.get().unwrap_or(""),
                    item.tool.get().unwrap_or(""),
                );
                sink.push(EventKind::ToolCall {
                    id: id.to_string(),
                    name: format!("mcp__{server}__{tool}"),
                    command: None,
                    cwd: None,
                    input: excerpt(input, EXCERPT),
                });
            }
            if completed {
                dec.exec.open.remove(id);
                let output = item
                    .result
                    .as_deref()
                    .map(Value::to_string)
                    .unwrap_or_default();
                let error = item.error.as_deref().is_some_and(|e| !e.is_null());
                let failed = item.status.is("failed") || error;
                let output = Body::of(&output).excerpt;
                sink.push(EventKind::ToolResult {
                    id: id.to_string(),
                    exit_code: None,
                    failed,
                    output,
                });
            }
        }
        "file_change" if completed && !item.status.is("failed") => {
            let changes = item.changes.as_deref().and_then(Value::as_array);
            for c in changes.into_iter().flatten() {
                let Some(path) = c.get("path").and_then(Value::as_str) else {
                    continue;
                };
                let change = match c.get("kind").and_then(Value::as_str) {
                    Some("add") => ChangeKind::Add,
                    Some("delete") => ChangeKind::Delete,
                    _ => ChangeKind::Update,
                };
                let call_id = Some(id.to_string());
                sink.push(EventKind::FileChange {
                    path: path.to_string(),
                    change,
                    call_id,
                });
            }
        }
        "agent_message" if completed => {
            let text = item.text.get().unwrap_or("").to_string();
            sink.push(EventKind::AssistantText {
                text,
                message_id: None,
            });
        }
        "reasoning" if completed => {
            sink.push(EventKind::Reasoning {
                text: item.text.get().unwrap_or("").to_string(),
            });
        }
        _ => {}
    }
}
