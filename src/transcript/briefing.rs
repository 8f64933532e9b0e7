//! A session briefing: what a session was asked, what it did and where it stopped,
//! computed from its events alone, for an agent (or operator) taking over.
//!
//! What counts: prompts, replies, acknowledgments and token totals are the main
//! conversation's. Work is the whole session's: commands, file changes and commits
//! made in a subagent (1.0.x inline sidechains sit in the main file) count too, each
//! marked with the subagent's label, because a successor must know about them as
//! much as about its predecessor's own. Files are listed once each, with how many
//! changes they had. A failed command keeps the first meaningful lines of its output
//! ([`event::error_lines`]).
//!
//! Where it stopped: a call is unfinished only if the session did not go on after it.
//! The session goes on when the model speaks again after some input came back (a new
//! step), when the turn ends, when the human types or when the context is compacted;
//! calls made in one step (parallel calls) are all still open until then. A call
//! that never got a result but was followed by more of the session is history, not
//! something a successor should re-check.

mod gate;
mod markdown;
#[cfg(test)]
mod tests;

pub use gate::{GateBypass, GateRefusal};
pub use markdown::markdown;

use super::event::{self, Agent, ChangeKind, Event, EventKind, SessionMeta};
use crate::steer::grammar::{self, Polarity};
use serde::Serialize;
use std::collections::HashMap;

#[derive(Debug, Clone, Serialize)]
pub struct Command {
    pub command: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    pub exit_code: Option<i32>,
    pub failed: bool,
    /// False while no result was seen (the call may still run, or the session stopped).
    pub finished: bool,
    /// A failed command: the first meaningful lines of its output, `\n`-separated.
    pub error: Option<String>,
    /// The subagent that ran it; `None` for the main conversation.
    pub subagent: Option<String>,
    pub line: u64,
}

/// One file the session changed, however many times.
#[derive(Debug, Clone, Serialize)]
pub struct FileChanged {
    pub path: String,
    /// The net change: deleted or moved if the last change was so, added if the
    /// first was, else updated.
    pub change: ChangeKind,
    /// How many changes the file had.
    pub changes: usize,
    /// How many of them subagents made, and which subagents (labels, first seen first).
    pub by_subagents: usize,
    pub subagents: Vec<String>,
    /// The first and the last change's line.
    pub line: u64,
    pub last_line: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct CommitMade {
    pub sha: Option<String>,
    pub message: Option<String>,
    pub subagent: Option<String>,
    pub line: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct CompactionAt {
    pub line: u64,
    pub trigger: Option<String>,
    pub pre_tokens: Option<u64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Subagent {
    pub agent_id: String,
    pub description: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct AckFound {
    pub key: String,
    pub polarity: Polarity,
    pub line: u64,
    pub body: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct UnfinishedCall {
    pub name: String,
    pub command: Option<String>,
    pub line: u64,
}

/// The session's tokens, counted by [`super::usage`] (its inline sub-agents' too).
pub use crate::store::Tokens;

#[derive(Debug, Clone, Serialize)]
pub struct Briefing {
    pub path: String,
    pub agent: Option<Agent>,
    pub session_id: Option<String>,
    pub cwd: Option<String>,
    pub model: Option<String>,
    pub version: Option<String>,
    pub git_branch: Option<String>,
    pub prompts: Vec<String>,
    pub commands: Vec<Command>,
    pub files_changed: Vec<FileChanged>,
    pub commits: Vec<CommitMade>,
    pub compactions: Vec<CompactionAt>,
    pub subagents: Vec<Subagent>,
    pub acks: Vec<AckFound>,
    /// Commits the gate's hooks refused, with their findings.
    pub gate_refusals: Vec<GateRefusal>,
    /// Commands that went round the gate's hooks.
    pub gate_bypasses: Vec<GateBypass>,
    pub last_assistant_text: Option<String>,
    pub unfinished_call: Option<UnfinishedCall>,
    pub tokens: Tokens,
    pub malformed_lines: u64,
}

impl Briefing {
    /// The description of the subagent labelled `label`, if it was linked.
    pub fn subagent_description(&self, label: &str) -> Option<&str> {
        self.subagents
            .iter()
            .find(|s| s.agent_id == label)
            .and_then(|s| s.description.as_deref())
    }
}

/// The main conversation's calls still open: made in the current step and not
/// answered (see the module notes).
#[derive(Default)]
struct Open {
    calls: Vec<(String, UnfinishedCall)>,
    /// Input (a result, a prompt, injected text) came back since the model last spoke.
    input_since_output: bool,
}

impl Open {
    fn observe(&mut self, kind: &EventKind, line: u64) {
        match kind {
            EventKind::AssistantText { .. }
            | EventKind::Reasoning { .. }
            | EventKind::ToolCall { .. } => {
                if std::mem::take(&mut self.input_since_output) {
                    self.calls.clear();
                }
                if let EventKind::ToolCall {
                    id, name, command, ..
                } = kind
                {
                    let call = UnfinishedCall {
                        name: name.clone(),
                        command: command.clone(),
                        line,
                    };
                    self.calls.push((id.clone(), call));
                }
            }
            EventKind::ToolResult { id, .. } => {
                self.calls.retain(|(open, _)| open != id);
                self.input_since_output = true;
            }
            EventKind::InjectedContext { .. } | EventKind::CompactionSummary { .. } => {
                self.input_since_output = true;
            }
            EventKind::UserPrompt { .. } | EventKind::TurnEnd | EventKind::Compaction { .. } => {
                self.calls.clear();
                self.input_since_output = false;
            }
            _ => {}
        }
    }
}

/// Builds the briefing of `events` (see the module notes for what counts).
pub fn brief(path: &str, events: &[Event], malformed: u64) -> Briefing {
    let mut meta = SessionMeta::default();
    let mut b = Briefing {
        path: path.to_string(),
        agent: None,
        session_id: None,
        cwd: None,
        model: None,
        version: None,
        git_branch: None,
        prompts: vec![],
        commands: vec![],
        files_changed: vec![],
        commits: vec![],
        compactions: vec![],
        subagents: vec![],
        acks: vec![],
        gate_refusals: vec![],
        gate_bypasses: vec![],
        last_assistant_text: None,
        unfinished_call: None,
        tokens: Tokens::default(),
        malformed_lines: malformed,
    };
    let mut by_call: HashMap<String, usize> = HashMap::new();
    let mut by_path: HashMap<String, usize> = HashMap::new();
    let mut open = Open::default();
    for e in events {
        match &e.kind {
            EventKind::SubagentLink {
                agent_id,
                description,
                ..
            } => {
                if !b.subagents.iter().any(|s| &s.agent_id == agent_id) {
                    b.subagents.push(Subagent {
                        agent_id: agent_id.clone(),
                        description: description.clone(),
                    });
                }
                continue;
            }
            EventKind::ToolCall {
                id,
                command: Some(c),
                cwd,
                ..
            } => {
                // Ids are per file: a subagent's call id never names a main one.
                by_call.insert(id.clone(), b.commands.len());
                if let Some(how) = gate::bypass(c) {
                    b.gate_bypasses.push(GateBypass {
                        command: c.clone(),
                        how,
                        subagent: e.subagent.clone(),
                        line: e.line,
                    });
                }
                b.commands.push(Command {
                    command: c.clone(),
                    cwd: cwd.clone(),
                    exit_code: None,
                    failed: false,
                    finished: false,
                    error: None,
                    subagent: e.subagent.clone(),
                    line: e.line,
                });
            }
            EventKind::ToolResult {
                id,
                exit_code,
                failed,
                output,
            } => {
                if let Some(&i) = by_call.get(id) {
                    let c = &mut b.commands[i];
                    c.exit_code = exit_code.or(c.exit_code);
                    c.failed |= *failed;
                    c.finished = true;
                    if *failed {
                        c.error = event::error_lines(output);
                    }
                    if let Some(findings) = gate::refusal(&c.command, output, *failed) {
                        b.gate_refusals.push(GateRefusal {
                            command: c.command.clone(),
                            findings,
                            subagent: e.subagent.clone(),
                            line: e.line,
                        });
                    }
                }
            }
            EventKind::FileChange { path, change, .. } => {
                // The gate's rules are the repository's: an agent that edits them is
                // flagged (once per file), whatever it changed.
                if gate::is_gate_config(path) && !by_path.contains_key(path.as_str()) {
                    b.gate_bypasses.push(GateBypass {
                        command: format!("edit {path}"),
                        how: "an edit of spice.toml (the gate's rules)".into(),
                        subagent: e.subagent.clone(),
                        line: e.line,
                    });
                }
                file_changed(&mut b.files_changed, &mut by_path, path, change, e);
            }
            EventKind::Commit { sha, message, .. } => b.commits.push(CommitMade {
                sha: sha.clone(),
                message: message.clone(),
                subagent: e.subagent.clone(),
                line: e.line,
            }),
            _ => {}
        }
        if e.subagent.is_some() {
            continue;
        }
        open.observe(&e.kind, e.line);
        match &e.kind {
            EventKind::SessionMeta(m) => merge(&mut meta, m),
            EventKind::UserPrompt { text } => b.prompts.push(text.clone()),
            EventKind::AssistantText { text, .. } => {
                b.last_assistant_text = Some(text.clone());
                for d in grammar::parse(text) {
                    for key in d.keys {
                        b.acks.push(AckFound {
                            key,
                            polarity: d.polarity,
                            line: e.line,
                            body: d.body.clone(),
                        });
                    }
                }
            }
            EventKind::Compaction {
                trigger,
                pre_tokens,
            } => b.compactions.push(CompactionAt {
                line: e.line,
                trigger: trigger.clone(),
                pre_tokens: *pre_tokens,
            }),
            _ => {}
        }
    }
    b.tokens = super::usage::total(meta.agent.unwrap_or(Agent::Claude), events);
    b.unfinished_call = open.calls.pop().map(|(_, call)| call);
    b.agent = meta.agent;
    b.session_id = meta.session_id;
    b.cwd = meta.cwd;
    b.model = meta.model;
    b.version = meta.version;
    b.git_branch = meta.git_branch;
    b
}

/// Adds one change to the file's entry, creating it at the file's first change.
fn file_changed(
    files: &mut Vec<FileChanged>,
    by_path: &mut HashMap<String, usize>,
    path: &str,
    change: &ChangeKind,
    e: &Event,
) {
    let i = *by_path.entry(path.to_string()).or_insert_with(|| {
        files.push(FileChanged {
            path: path.to_string(),
            change: change.clone(),
            changes: 0,
            by_subagents: 0,
            subagents: vec![],
            line: e.line,
            last_line: e.line,
        });
        files.len() - 1
    });
    let f = &mut files[i];
    f.changes += 1;
    f.last_line = e.line;
    f.change = match (&f.change, change) {
        (_, ChangeKind::Delete | ChangeKind::Move { .. }) => change.clone(),
        // Added in this session and changed since: still a new file.
        (ChangeKind::Add, _) if f.changes > 1 => ChangeKind::Add,
        // Deleted or moved away, then written again.
        (ChangeKind::Delete | ChangeKind::Move { .. }, _) => change.clone(),
        (prev, _) => prev.clone(),
    };
    if let Some(label) = &e.subagent {
        f.by_subagents += 1;
        if !f.subagents.contains(label) {
            f.subagents.push(label.clone());
        }
    }
}

fn merge(into: &mut SessionMeta, m: &SessionMeta) {
    macro_rules! take {
        ($f:ident) => {
            if m.$f.is_some() {
                into.$f = m.$f.clone();
            }
        };
    }
    take!(session_id);
    take!(agent);
    take!(version);
    take!(cwd);
    take!(model);
    take!(git_branch);
}
