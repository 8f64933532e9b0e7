//! The Codex CLI rollout decoder (`~/.codex/sessions/**/rollout-*.jsonl`).
//!
//! One decoder reads one file from its first line and tells the shape of each line
//! from the line itself, so every era decodes and a file may mix them: the legacy bare
//! format (a `{id,timestamp,instructions,git}` header, then raw ResponseItems with
//! `{"record_type":"state"}` markers and no timestamps), the wrapped
//! `{timestamp,type,payload}` format (0.58 onward), and `codex exec --json` stdout
//! (`thread.started`, `item.completed`, …; see [`exec_json`]).
//!
//! Duplicates Codex writes on purpose are read once:
//! - Prompts (wrapped): `event_msg/user_message`, or 0.17x `item_completed/UserMessage`,
//!   not the `response_item` user message that repeats it (and comes first). Until a file
//!   has shown one of those events, its `response_item` prompts are held, and emitted
//!   only if the agent acts before any event claims them (files written by other tools).
//!   A prompt equal to the one just emitted, with nothing in between, is the same prompt
//!   reported twice. Bare era: user messages. Both eras tell injected context apart
//!   by its markers ([`speaker`]).
//! - Assistant text and reasoning come from `response_item` only (`agent_message`,
//!   `agent_reasoning` and `item_completed/AgentMessage` repeat them); a message Codex
//!   marks `compaction_output` is the compaction's summary, not a reply.
//! - Compaction: the `compacted` record; `context_compacted` and
//!   `item_completed/ContextCompaction` follow it and add nothing.
//! - Token usage: `token_count` cumulative totals, minus identical consecutive ones.
//! - Turn ends: `task_complete` and `turn_aborted`. Files without task events (0.128
//!   Desktop) end a turn at an assistant message with `phase: "final_answer"`; the bare
//!   era, 0.58 and 0.77 record nothing that says so, and get no `TurnEnd`.
//!
//! Lines are read into the typed, lenient [`record::Rec`]; tool calls and results are
//! in [`tools`]. A subagent's own file says so in `session_meta.source.subagent`, which
//! the event model has no field for yet.

mod exec_json;
#[cfg(test)]
mod fixtures;
mod lenient;
mod patch;
mod record;
mod shell;
mod speaker;
#[cfg(test)]
mod tests;
mod tools;

use super::event::{Agent, Decoder, Event, EventKind, SessionMeta, Unread};
use crate::clock::Micros;
use record::Rec;
use speaker::UserText;

/// Appends events stamped with the line (and time) they came from.
pub(super) struct Sink<'a> {
    out: &'a mut Vec<Event>,
    line: u64,
    timestamp: Option<Micros>,
}

impl Sink<'_> {
    fn event(&self, kind: EventKind) -> Event {
        Event {
            line: self.line,
            timestamp: self.timestamp,
            subagent: None,
            kind,
        }
    }

    fn push(&mut self, kind: EventKind) {
        let e = self.event(kind);
        self.out.push(e);
    }
}

/// Decodes one Codex transcript (any era), line by line.
#[derive(Debug, Default)]
pub struct CodexDecoder {
    malformed: u64,
    meta: SessionMeta,
    emitted_meta: Option<SessionMeta>,
    seen_session_meta: bool,
    /// Task events mark turn ends; without them a final answer does.
    task_events: bool,
    last_prompt: Option<String>,
    /// A prompt event was seen: `response_item` user messages only repeat them.
    prompt_events: bool,
    /// `response_item` prompts waiting to see whether an event repeats them.
    held: Vec<Event>,
    /// The last compaction had no summary text; the next summary message is its.
    summary_due: bool,
    last_tokens: Option<(u64, u64, u64)>,
    tools: tools::Tools,
    exec: exec_json::State,
    /// Top-level record types not read (a newer CLI's).
    unread: Unread,
}

impl CodexDecoder {
    pub fn new() -> Self {
        Self::default()
    }

    fn record(&mut self, r: &Rec, sink: &mut Sink) {
        match (r.ty.get(), &r.payload.0) {
            (Some(t), Some(p)) => {
                sink.timestamp = r.timestamp.get().and_then(record::micros);
                match t {
                    "session_meta" => self.session_meta(p, sink),
                    "turn_context" => self.turn_context(p, sink),
                    "response_item" => {
                        let summary = r.metadata.0.as_ref().and_then(|m| m.compaction_output.0);
                        self.response_item(p, summary == Some(true), true, sink)
                    }
                    "event_msg" => self.event_msg(p, sink),
                    "compacted" => self.compacted(p, sink),
                    // The CLI's own bookkeeping: nothing the agent said or did.
                    "world_state" | "token_usage_record" => {}
                    other => self.unread.note(other, sink.line),
                }
            }
            _ if r.record_type.is_some() => {}
            (Some(t), _) if t.contains('.') => exec_json::record(self, t, r, sink),
            (None, _) if r.id.get().is_some() => self.bare_header(r, sink),
            (Some(_), _) => self.response_item(r, false, false, sink),
            (None, _) => {}
        }
    }

    fn bare_header(&mut self, r: &Rec, sink: &mut Sink) {
        sink.timestamp = r.timestamp.get().and_then(record::micros);
        self.meta.session_id = r.id.non_empty().map(str::to_string);
        self.meta.git_branch = branch(r);
        self.emit_meta(sink);
    }

    fn session_meta(&mut self, p: &Rec, sink: &mut Sink) {
        // Forks and resumes may repeat it; the first one describes this file's session.
        if std::mem::replace(&mut self.seen_session_meta, true) {
            return;
        }
        let id = p.id.non_empty().or(p.session_id.non_empty());
        self.meta.session_id = id.map(str::to_string);
        self.meta.version = p.cli_version.non_empty().map(str::to_string);
        if let Some(cwd) = p.cwd.non_empty() {
            self.meta.cwd = Some(cwd.to_string());
        }
        if let Some(b) = branch(p) {
            self.meta.git_branch = Some(b);
        }
        self.emit_meta(sink);
    }

    fn turn_context(&mut self, p: &Rec, sink: &mut Sink) {
        if let Some(cwd) = p.cwd.non_empty() {
            self.meta.cwd = Some(cwd.to_string());
        }
        let settings = p
            .collaboration_mode
            .0
            .as_ref()
            .and_then(|c| c.settings.0.as_ref());
        if let Some(m) = p
            .model
            .non_empty()
            .or(settings.and_then(|s| s.model.non_empty()))
        {
            self.meta.model = Some(m.to_string());
        }
        self.emit_meta(sink);
    }

    fn compacted(&mut self, p: &Rec, sink: &mut Sink) {
        // Remote compaction (0.104) leaves an encrypted `compaction` item, not a summary.
        let remote = p.replacement_history.0;
        let trigger = Some(if remote { "remote" } else { "local" }.to_string());
        sink.push(EventKind::Compaction {
            trigger,
            pre_tokens: None,
        });
        let message = p.message.get().unwrap_or("");
        self.summary_due = message.trim().is_empty();
        if !self.summary_due {
            sink.push(EventKind::CompactionSummary {
                text: message.to_string(),
            });
        }
    }

    fn emit_meta(&mut self, sink: &mut Sink) {
        self.meta.agent = Some(Agent::Codex);
        if self.emitted_meta.as_ref() != Some(&self.meta) {
            self.emitted_meta = Some(self.meta.clone());
            sink.push(EventKind::SessionMeta(self.meta.clone()));
        }
    }

    /// `summary`: Codex marked the item as a compaction's own output.
    fn response_item(&mut self, p: &Rec, summary: bool, wrapped: bool, sink: &mut Sink) {
        let cwd = self.meta.cwd.as_deref();
        match p.ty.get().unwrap_or("") {
            "message" => self.message(p, summary, wrapped, sink),
            "reasoning" => reasoning(p, sink),
            "function_call" => self.tools.function_call(sink, p, cwd),
            "custom_tool_call" => self.tools.custom_call(sink, p),
            "local_shell_call" => self.tools.local_shell(sink, p, cwd),
            "web_search_call" => self.tools.web_search(sink, p),
            "function_call_output" | "custom_tool_call_output" => self.tools.output(sink, p),
            // ghost_snapshot is Codex's own undo commit, not the agent's.
            _ => {}
        }
    }

    fn message(&mut self, p: &Rec, summary: bool, wrapped: bool, sink: &mut Sink) {
        let texts = &p.content.0;
        match p.role.get().unwrap_or("") {
            "assistant" => {
                let text = texts.join("\n");
                if !summary && !text.trim().is_empty() {
                    let message_id = p.id.non_empty().map(str::to_string);
                    sink.push(EventKind::AssistantText { text, message_id });
                }
                if !self.task_events && p.phase.is("final_answer") {
                    sink.push(EventKind::TurnEnd);
                }
            }
            "user" => {
                for t in texts.iter().filter(|t| !t.trim().is_empty()) {
                    self.user_text(t, wrapped, sink);
                }
            }
            _ => {
                for t in texts.iter().filter(|t| !t.trim().is_empty()) {
                    sink.push(EventKind::InjectedContext {
                        text: t.to_string(),
                    });
                }
            }
        }
    }

    fn user_text(&mut self, t: &str, wrapped: bool, sink: &mut Sink) {
        let text = t.to_string();
        match speaker::classify(t) {
            UserText::Injected => {
                if let Some(cwd) = speaker::context_cwd(t).filter(|_| self.meta.cwd.is_none()) {
                    self.meta.cwd = Some(cwd.to_string());
                    self.emit_meta(sink);
                }
                sink.push(EventKind::InjectedContext { text });
            }
            UserText::Summary => {
                if !wrapped || std::mem::take(&mut self.summary_due) {
                    sink.push(EventKind::CompactionSummary { text });
                }
            }
            UserText::Prompt if !wrapped => self.prompt(t, false, sink),
            UserText::Prompt => {
                if !self.prompt_events {
                    self.held.push(sink.event(EventKind::UserPrompt { text }));
                }
            }
        }
    }

    /// `from_event`: a wrapped-era prompt event, which some versions send from two sources.
    fn prompt(&mut self, text: &str, from_event: bool, sink: &mut Sink) {
        if from_event {
            self.prompt_events = true;
            self.held.clear();
        }
        if text.trim().is_empty() || (from_event && self.last_prompt.as_deref() == Some(text)) {
            return;
        }
        self.last_prompt = Some(text.to_string());
        sink.push(EventKind::UserPrompt {
            text: text.to_string(),
        });
    }

    fn event_msg(&mut self, p: &Rec, sink: &mut Sink) {
        match p.ty.get().unwrap_or("") {
            "user_message" => {
                let text = p.message.get().unwrap_or("");
                // Some versions also announce injected context here, with a `kind`.
                let plain = p.kind.get().is_none_or(|k| k == "plain");
                if plain && matches!(speaker::classify(text), UserText::Prompt) {
                    self.prompt(text, true, sink);
                }
            }
            "task_started" => self.task_events = true,
            "task_complete" | "turn_aborted" => {
                self.task_events = true;
                sink.push(EventKind::TurnEnd);
            }
            "token_count" => self.tokens(p, sink),
            "exec_command_end" => {
                if let Some(id) = p.call_id.get() {
                    self.tools.exec_end(sink, id, p);
                }
            }
            "patch_apply_end" => self.tools.patch_end(sink, p),
            "item_completed" => {
                let Some(item) = &p.item.0 else { return };
                match item.ty.get().unwrap_or("") {
                    "UserMessage" => self.prompt(&item.content.0.join("\n"), true, sink),
                    "CommandExecution" => {
                        if let Some(id) = item.id.get() {
                            self.tools.exec_end(sink, id, item);
                        }
                    }
                    _ => {}
                }
            }
            _ => {}
        }
    }

    fn tokens(&mut self, p: &Rec, sink: &mut Sink) {
        let Some(total) = p.info.0.as_ref().and_then(|i| i.total_token_usage.0) else {
            return;
        };
        let n = |c: lenient::Count| c.0.unwrap_or(0);
        let now = (
            n(total.input_tokens),
            n(total.output_tokens),
            n(total.cached_input_tokens),
        );
        if self.last_tokens.replace(now) == Some(now) {
            return;
        }
        sink.push(EventKind::TokenUsage {
            message_id: None,
            request_id: None,
            model: self.meta.model.clone(),
            input_tokens: now.0,
            output_tokens: now.1,
            cache_read_tokens: now.2,
            cache_creation_tokens: 0,
            cumulative: true,
        });
    }
}

impl Decoder for CodexDecoder {
    fn feed(&mut self, bytes: &[u8], line: u64, out: &mut Vec<Event>) {
        let trimmed = bytes.trim_ascii();
        if trimmed.is_empty() {
            return;
        }
        // Only objects are records (serde would also read a struct from an array). A
        // line checked as UTF-8 once is parsed as text, which spares serde_json checking
        // every string it reads again; strings in skipped values are not checked, so a
        // line that is not UTF-8 is still read from its bytes.
        let parsed = match (trimmed.first(), simdutf8::basic::from_utf8(trimmed)) {
            (Some(b'{'), Ok(text)) => serde_json::from_str::<Rec>(text).ok(),
            (Some(b'{'), Err(_)) => serde_json::from_slice::<Rec>(trimmed).ok(),
            _ => None,
        };
        let Some(r) = parsed else {
            self.malformed += 1;
            return;
        };
        let start = out.len();
        let mut sink = Sink {
            out,
            line,
            timestamp: None,
        };
        self.record(&r, &mut sink);
        let acted = out[start..].iter().any(|e| {
            !matches!(
                e.kind,
                EventKind::UserPrompt { .. }
                    | EventKind::InjectedContext { .. }
                    | EventKind::CompactionSummary { .. }
                    | EventKind::SessionMeta(_)
                    | EventKind::TokenUsage { .. }
            )
        });
        if acted {
            self.last_prompt = None;
            // No event claimed the held prompts before the agent acted on them. They
            // come from earlier lines, so they go before this line's events.
            let held = std::mem::take(&mut self.held);
            out.splice(start..start, held);
        }
    }

    fn malformed(&self) -> u64 {
        self.malformed
    }

    fn unread(&self) -> &Unread {
        &self.unread
    }
}

fn reasoning(p: &Rec, sink: &mut Sink) {
    let texts = if p.summary.0.is_empty() {
        &p.content.0
    } else {
        &p.summary.0
    };
    let text = texts.join("\n\n");
    if !text.trim().is_empty() {
        sink.push(EventKind::Reasoning { text });
    }
}

fn branch(r: &Rec) -> Option<String> {
    let git = r.git.0.as_ref()?;
    git.branch.non_empty().map(str::to_string)
}
