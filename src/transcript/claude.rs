//! Claude Code transcript decoder (`~/.claude/projects/<slug>/<session>.jsonl`,
//! versions 1.0.x to 2.1.x, and the `--output-format stream-json` stdout, whose
//! events share the shapes). One line in, zero or more [`Event`]s out, in file order;
//! the caller owns files, partial lines and which subagent files to read.
//!
//! The work is split by meaning: [`record`] reads a line leniently; [`assistant`]
//! and [`user`] turn the two speakers' lines into events, with [`speaker`] telling
//! typed text from harness text; [`results`] says what a tool result means. This
//! file holds the state kept between lines and the envelope: session meta, subagent
//! labels, system and progress records, turn ends.
//!
//! What is remembered between lines, and why: the tool calls still waiting for a
//! result (name, path, command, Task description), because a file change or a commit
//! only counts once its result arrives without error, and a result names only the
//! call id; the agent ids already linked, so a subagent is linked once whether the
//! link comes from `agent_progress` or from the Task result; for 1.0.x inline
//! sidechains, which chain each sidechain uuid belongs to; the last session meta
//! emitted; whether the main chain's turn has already ended.
//!
//! Invariants: never panics on any input; a line that is not UTF-8 or not one JSON
//! object is counted ([`Decoder::malformed`]) and yields nothing; a whitespace-only
//! line yields nothing and is not counted (it holds nothing to misread); unknown
//! record types and keys are skipped; `summary`, `file-history-snapshot`,
//! `queue-operation`, `last-prompt`, `custom-title` and `attachment` are metadata and
//! yield nothing. Events of a sidechain line carry `subagent`: the line's `agentId`
//! (2.x), the uuid of the chain's root line (1.0.x inline chains have no id;
//! "sidechain" if the root was not seen), or the Task call id for stream-json
//! subagent events. Session meta follows the main chain: sidechain lines update it
//! only in a file with no main-chain line yet, that is, a subagent's own file.
//!
//! Turn ends: an assistant line with `stop_reason` `end_turn` or `stop_sequence`, a
//! user interrupt, `system/turn_duration` (interactive builds write it after the
//! turn) and stream-json's `result`. The last three are dropped when the main chain's
//! turn already ended with no user or assistant line since, so one turn gives one
//! `TurnEnd`. Headless 2.x transcripts often write `stop_reason: null` and no
//! `turn_duration`: such a turn has no `TurnEnd`.
//!
//! Subagents: linked from a Task result's `toolUseResult.agentId`, from the first
//! `agent_progress` naming an agent (2.1.x), or, for 1.0.x, from the Task result
//! whose prompt started an inline chain (the link's id is then the chain's root
//! uuid, the label its lines carry). 2.0.x "Warmup" agents are never linked (no
//! call starts them); their prompt reads as injected context.

mod assistant;
mod record;
mod results;
mod speaker;
mod user;

#[cfg(test)]
mod hostile;
#[cfg(test)]
mod tests;

use std::collections::{HashMap, HashSet};

use super::event::{Agent, Decoder, Event, EventKind, SessionMeta, Unread};
use crate::clock::Micros;
use record::{Field, Flex, Record};

/// Where one line's events go: its number, time and subagent label.
struct Origin {
    line: u64,
    timestamp: Option<Micros>,
    subagent: Option<String>,
}

impl Origin {
    fn push(&self, out: &mut Vec<Event>, kind: EventKind) {
        out.push(Event {
            line: self.line,
            timestamp: self.timestamp,
            subagent: self.subagent.clone(),
            kind,
        });
    }
}

/// A tool call waiting for its result.
struct Call {
    name: String,
    /// Edit, Write, MultiEdit, NotebookEdit: a success changes a file.
    edits: bool,
    /// Edit tools: the file they change (else the result's `filePath`).
    path: Option<String>,
    /// Bash: the command line.
    command: Option<String>,
    /// Task: what the subagent is for.
    description: Option<String>,
    /// Task: the prompt, to recognise a 1.0.x inline chain started by this call.
    prompt: Option<String>,
    /// Task: the inline chain (root uuid) that answered the prompt.
    chain: Option<String>,
}

/// Record types Claude Code writes that hold nothing the agent said or did (the
/// CLI's own bookkeeping), skipped without a note; any other unknown type is noted
/// as not understood.
const IGNORED: &[&str] = &[
    "file-history-snapshot",
    "queue-operation",
    "summary",
    "last-prompt",
    "permission-mode",
    "mode",
    "custom-title",
    "agent-name",
    "tag",
    "stream_event",
];

/// Decodes one Claude Code transcript file (or one stream-json capture): one
/// instance per file, fed its lines in order.
#[derive(Default)]
pub struct ClaudeDecoder {
    malformed: u64,
    meta: SessionMeta,
    main_seen: bool,
    calls: HashMap<String, Call>,
    linked: HashSet<String>,
    /// 1.0.x inline sidechains: line uuid → the chain's root uuid.
    chains: HashMap<String, String>,
    turn_ended: bool,
    unread: Unread,
}

impl ClaudeDecoder {
    pub fn new() -> Self {
        ClaudeDecoder {
            meta: SessionMeta {
                agent: Some(Agent::Claude),
                ..SessionMeta::default()
            },
            ..ClaudeDecoder::default()
        }
    }
}

impl Decoder for ClaudeDecoder {
    fn feed(&mut self, bytes: &[u8], line: u64, out: &mut Vec<Event>) {
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return;
        }
        let Some(rec) = record::parse::<Record>(bytes) else {
            self.malformed += 1;
            return;
        };
        let kind = rec.kind.str().unwrap_or("");
        if !matches!(
            kind,
            "user" | "assistant" | "system" | "progress" | "attachment" | "result"
        ) {
            if !IGNORED.contains(&kind) {
                self.unread
                    .note(rec.kind.str().unwrap_or("(no type)"), line);
            }
            return;
        }
        let origin = Origin {
            line,
            timestamp: rec.timestamp.str().and_then(super::lenient::micros),
            subagent: self.subagent(&rec),
        };
        let message = rec.message.as_ref().and_then(Flex::obj);
        let model = match kind {
            "assistant" => message.and_then(|m| m.model.str()),
            "system" => rec.model.str(),
            _ => None,
        };
        self.observe_meta(&rec, model, &origin, out);
        if origin.subagent.is_none() && matches!(kind, "user" | "assistant") {
            self.turn_ended = false;
        }
        match kind {
            "user" => {
                if let Some(m) = message {
                    self.user(&rec, m, &origin, out);
                }
            }
            "assistant" => {
                if let Some(m) = message {
                    self.assistant(&rec, m, &origin, out);
                }
            }
            "system" => self.system(&rec, &origin, out),
            "progress" => self.progress(&rec, &origin, out),
            "result" => self.turn_end(&origin, out, true),
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

impl ClaudeDecoder {
    fn subagent(&mut self, rec: &Record) -> Option<String> {
        if !rec.is_sidechain.truthy() {
            return rec.parent_tool_use_id_snake.str().map(str::to_string);
        }
        if let Some(agent) = rec.agent_id.str() {
            return Some(agent.to_string());
        }
        let uuid = rec.uuid.str();
        let label = match rec.parent_uuid.str() {
            None => uuid.unwrap_or("sidechain").to_string(),
            Some(parent) => self
                .chains
                .get(parent)
                .cloned()
                .unwrap_or_else(|| "sidechain".to_string()),
        };
        if let Some(uuid) = uuid {
            self.chains.insert(uuid.to_string(), label.clone());
        }
        Some(label)
    }

    fn observe_meta(
        &mut self,
        rec: &Record,
        model: Option<&str>,
        origin: &Origin,
        out: &mut Vec<Event>,
    ) {
        if origin.subagent.is_some() && self.main_seen {
            return;
        }
        self.main_seen |= origin.subagent.is_none();
        let m = &mut self.meta;
        let mut changed = false;
        let session = rec.session_id.str().or(rec.session_id_snake.str());
        let version = rec.version.str().or(rec.claude_code_version.str());
        let model = model.filter(|m| *m != "<synthetic>");
        for (field, value) in [
            (&mut m.session_id, session),
            (&mut m.version, version),
            (&mut m.cwd, rec.cwd.str()),
            (&mut m.model, model),
        ] {
            if let Some(v) = value.filter(|v| !v.is_empty()) {
                if field.as_deref() != Some(v) {
                    *field = Some(v.to_string());
                    changed = true;
                }
            }
        }
        // `""` is written outside a repository: the branch is then unknown, not "".
        if let Some(branch) = rec.git_branch.str() {
            let branch = (!branch.is_empty()).then_some(branch);
            if m.git_branch.as_deref() != branch {
                m.git_branch = branch.map(str::to_string);
                changed = true;
            }
        }
        if changed {
            origin.push(out, EventKind::SessionMeta(self.meta.clone()));
        }
    }

    /// Ends the main chain's turn; `dedup` drops it when the turn already ended.
    fn turn_end(&mut self, origin: &Origin, out: &mut Vec<Event>, dedup: bool) {
        if origin.subagent.is_none() {
            if dedup && self.turn_ended {
                return;
            }
            self.turn_ended = true;
        }
        origin.push(out, EventKind::TurnEnd);
    }

    fn link(
        &mut self,
        agent: &str,
        description: Option<&str>,
        call_id: Option<&str>,
        origin: &Origin,
        out: &mut Vec<Event>,
    ) {
        if !self.linked.insert(agent.to_string()) {
            return;
        }
        origin.push(
            out,
            EventKind::SubagentLink {
                agent_id: agent.to_string(),
                description: description.map(str::to_string),
                call_id: call_id.map(str::to_string),
            },
        );
    }

    fn system(&mut self, rec: &Record, origin: &Origin, out: &mut Vec<Event>) {
        match rec.subtype.str() {
            Some("compact_boundary") => {
                let meta = rec.compact_metadata.as_ref().and_then(Flex::obj);
                origin.push(
                    out,
                    EventKind::Compaction {
                        trigger: meta.and_then(|m| m.trigger.str()).map(str::to_string),
                        pre_tokens: meta
                            .and_then(|m| m.pre_tokens.int())
                            .and_then(|n| u64::try_from(n).ok()),
                    },
                );
            }
            Some("turn_duration") => self.turn_end(origin, out, true),
            // 2.1.x writes a slash command run locally (`/model`) and its output as
            // system lines; older builds wrote the same as user lines.
            Some("local_command") => {
                if let Some(text) = rec.content.str() {
                    let said = speaker::classify(text);
                    if let Some(prompt) = said.prompt {
                        origin.push(out, EventKind::UserPrompt { text: prompt });
                    }
                    if let Some(injected) = said.injected {
                        origin.push(out, EventKind::InjectedContext { text: injected });
                    }
                }
            }
            _ => {}
        }
    }

    fn progress(&mut self, rec: &Record, origin: &Origin, out: &mut Vec<Event>) {
        let Some(data) = rec.data.as_ref().and_then(Flex::obj) else {
            return;
        };
        if data.kind.str() != Some("agent_progress") {
            return;
        }
        let Some(agent) = data.agent_id.str() else {
            return;
        };
        let call_id = rec.parent_tool_use_id.str();
        let description = call_id
            .and_then(|c| self.calls.get(c))
            .and_then(|c| c.description.clone());
        self.link(agent, description.as_deref(), call_id, origin, out);
    }
}
