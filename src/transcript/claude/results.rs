//! What a tool result means: failed or not, the exit code where the transcript
//! proves it, and what the finished call leaves behind (a file change, a commit, a
//! subagent link). Effects wait for the result so that a failed or rejected edit or
//! commit is not counted.
//!
//! Output: a failure's text without the harness's envelope (the `Exit code N` line,
//! `<tool_use_error>` tags), so it starts with what the command or tool said, as a
//! Codex output does once its header is read; the exit code is kept apart.
//!
//! Exit codes: a failed result's `Exit code N` prefix (2.x); `exitCode` of a 1.0.x
//! `BashOutput` or a 2.x `TaskOutput`; and 0 for a successful `Bash` result only from
//! 2.1 on, when its structured result is present, not interrupted, not backgrounded
//! and has no `returnCodeInterpretation` (grep's "No matches found"): from 2.1 every
//! other non-zero status is an error with that prefix. 1.0.x flagged failures by
//! stderr without the prefix, so there a success proves nothing about the status;
//! subagent files carry no structured result, so their statuses stay unknown.

use super::record::{Block, Field, Flex, Record, ToolUseResult};
use super::{speaker, Call, ClaudeDecoder, Origin};
use crate::transcript::event::{self, ChangeKind, Event, EventKind, EXCERPT};

impl ClaudeDecoder {
    pub(super) fn tool_result(
        &mut self,
        rec: &Record,
        b: &Block,
        tur: Option<&ToolUseResult>,
        origin: &Origin,
        out: &mut Vec<Event>,
    ) {
        let id = b.tool_use_id.str().unwrap_or("").to_string();
        let is_error = b.is_error.truthy();
        let output = result_text(b);
        let call = self.calls.remove(&id);
        let name = call.as_ref().map(|c| c.name.as_str());
        let exit_code = if is_error {
            speaker::exit_code_prefix(&output)
        } else {
            let reported = tur.and_then(|t| {
                t.exit_code.int().or_else(|| {
                    t.task
                        .as_ref()
                        .and_then(Flex::obj)
                        .and_then(|k| k.exit_code.int())
                })
            });
            let reported = reported.and_then(|n| i32::try_from(n).ok());
            reported.or_else(|| (name == Some("Bash") && self.clean_exit(rec, tur)).then_some(0))
        };
        let failed = is_error || exit_code.is_some_and(|c| c != 0);
        let shown = if is_error {
            speaker::failure_body(&output)
        } else {
            &output
        };
        origin.push(
            out,
            EventKind::ToolResult {
                id: id.clone(),
                exit_code,
                failed,
                output: event::excerpt(shown, EXCERPT),
            },
        );
        if let Some(call) = call {
            self.after_call(call, tur, &id, &output, failed, origin, out);
        } else if let Some(agent) = tur.and_then(|t| t.agent_id.str()) {
            self.link(agent, None, Some(&id), origin, out);
        }
    }

    /// What a finished call leaves behind: a file change, a commit, a subagent link.
    #[allow(clippy::too_many_arguments)]
    fn after_call(
        &mut self,
        call: Call,
        tur: Option<&ToolUseResult>,
        id: &str,
        output: &str,
        failed: bool,
        origin: &Origin,
        out: &mut Vec<Event>,
    ) {
        // Other tools' results may name a file too (ExitPlanMode's plan): only the
        // edit tools change one.
        let path = call.path.as_deref().or(tur.and_then(|t| t.file_path.str()));
        if let (Some(path), true, false) = (path, call.edits, failed) {
            let created = call.name == "Write" && tur.and_then(|t| t.kind.str()) == Some("create");
            origin.push(
                out,
                EventKind::FileChange {
                    path: path.to_string(),
                    change: if created {
                        ChangeKind::Add
                    } else {
                        ChangeKind::Update
                    },
                    call_id: Some(id.to_string()),
                },
            );
        }
        if let Some(command) = &call.command {
            if let Some((sha, message)) = event::commit_from(command, output, failed) {
                origin.push(
                    out,
                    EventKind::Commit {
                        sha,
                        message,
                        call_id: Some(id.to_string()),
                    },
                );
            }
        }
        let agent = tur.and_then(|t| t.agent_id.str()).or(call.chain.as_deref());
        if let Some(agent) = agent {
            self.link(agent, call.description.as_deref(), Some(id), origin, out);
        }
    }

    /// Whether a successful Bash result proves status 0 (see the module notes).
    fn clean_exit(&self, rec: &Record, tur: Option<&ToolUseResult>) -> bool {
        let Some(t) = tur else { return false };
        let version = rec.version.str().or(self.meta.version.as_deref());
        at_least_2_1(version)
            && t.stdout.is_some()
            && !t.interrupted.truthy()
            && t.return_code_interpretation.is_none()
            && t.background_task_id.is_none()
    }
}

/// `major.minor` of a Claude Code version is at least 2.1.
fn at_least_2_1(version: Option<&str>) -> bool {
    let Some(v) = version else { return false };
    let mut parts = v.split('.').map(|p| p.parse::<u32>().ok());
    match (parts.next().flatten(), parts.next().flatten()) {
        (Some(major), Some(minor)) => (major, minor) >= (2, 1),
        _ => false,
    }
}

/// A result's text: the string content, or its text blocks joined.
fn result_text(b: &Block) -> String {
    match &b.content {
        Some(Flex::Str(s)) => s.clone(),
        Some(Flex::List(blocks)) => {
            let texts: Vec<&str> = blocks
                .iter()
                .filter_map(Flex::obj)
                .filter(|x| x.kind.str() == Some("text"))
                .filter_map(|x| x.text.str())
                .collect();
            texts.join("\n")
        }
        _ => String::new(),
    }
}
