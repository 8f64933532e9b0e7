//! Transcripts: reading, following and briefing Claude Code, Codex, Gemini CLI and
//! Qwen Code sessions, and the terminal of any other CLI.
//!
//! [`event`] is the one model every agent decodes into; [`claude`], [`codex`],
//! [`gemini`], [`qwen`] and [`terminal`] (an asciicast recording) are the decoders; [`follow`] tails a growing file exactly once; [`detect`] tells
//! which agent wrote a file from its first records ([`head`], however long they are).

pub mod acks;
pub mod briefing;
pub mod claude;
pub mod codex;
pub mod discover;
pub mod event;
pub mod follow;
pub mod gemini;
pub mod head;
pub mod jsonl;
pub mod lenient;
pub mod qwen;
pub mod render;
pub use crate::sanitize;
pub mod terminal;
pub mod turn;
pub mod usage;

use event::{Agent, Decoder};

/// Which agent wrote the transcript whose first non-empty lines are `head`, if any.
pub fn detect(head: &[u8]) -> Option<Agent> {
    detect_in(head)
}

/// Which agent wrote the transcript `r` starts, from its first 20 records, however
/// long their lines (see [`head`]).
fn detect_in(r: impl std::io::Read) -> Option<Agent> {
    let mut found = None;
    let mut seen = 0;
    head::records(r, |rec| {
        found = agent_of(rec);
        seen += 1;
        found.is_none() && seen < 20
    });
    found
}

/// The agent one record names, if it names one.
fn agent_of(r: &head::Record) -> Option<Agent> {
    if !r.object {
        return None;
    }
    if r.has_version && r.has_width && r.ty.is_none() {
        return Some(Agent::Terminal);
    }
    if r.has_project_hash && r.has_session_id {
        return Some(Agent::Gemini);
    }
    if r.has_provenance && r.has_session_id {
        return Some(Agent::Qwen);
    }
    // Gemini's messages: an id, a type of its own.
    if r.has_id && matches!(r.ty.as_deref(), Some("gemini")) {
        return Some(Agent::Gemini);
    }
    match r.ty.as_deref() {
        Some("session_meta" | "response_item" | "event_msg" | "turn_context" | "compacted")
            if r.has_payload =>
        {
            Some(Agent::Codex)
        }
        // `codex exec --json` prints its own event stream (thread/turn/item events).
        Some(t) if t.starts_with("thread.") || t.starts_with("turn.") || t.starts_with("item.") => {
            Some(Agent::Codex)
        }
        Some(
            "user"
            | "assistant"
            | "system"
            | "summary"
            | "file-history-snapshot"
            | "queue-operation"
            | "progress"
            | "last-prompt"
            | "custom-title",
        ) => Some(Agent::Claude),
        None if r.has_id && (r.has_instructions || r.has_git) => Some(Agent::Codex),
        _ if r.has_session_id || r.has_parent_uuid => Some(Agent::Claude),
        _ => None,
    }
}

/// A fresh decoder for `agent`.
pub fn decoder(agent: Agent) -> Box<dyn Decoder + Send> {
    match agent {
        Agent::Claude => Box::new(claude::ClaudeDecoder::new()),
        Agent::Codex => Box::new(codex::CodexDecoder::new()),
        Agent::Gemini => Box::new(gemini::GeminiDecoder::new()),
        Agent::Qwen => Box::new(qwen::QwenDecoder::new()),
        Agent::Terminal => Box::new(terminal::TerminalDecoder::new()),
    }
}

/// The decoder constructor for `agent`, for a [`follow::Follower`].
pub fn decoder_fn(agent: Agent) -> fn() -> Box<dyn Decoder + Send> {
    match agent {
        Agent::Claude => || decoder(Agent::Claude),
        Agent::Codex => || decoder(Agent::Codex),
        Agent::Gemini => || decoder(Agent::Gemini),
        Agent::Qwen => || decoder(Agent::Qwen),
        Agent::Terminal => || decoder(Agent::Terminal),
    }
}

/// Which agent wrote the file at `path`, from its first records (of any length).
pub fn detect_file(path: &std::path::Path) -> crate::Result<Agent> {
    let f = std::fs::File::open(path)
        .map_err(|e| crate::Error::input(format!("{}: {e}", path.display())))?;
    detect_in(f).ok_or_else(|| {
        crate::Error::input(format!(
            "{}: not a Claude Code, Codex, Gemini CLI or Qwen Code transcript, nor a terminal recording",
            path.display()
        ))
    })
}

/// Decodes a whole file: its agent, its events and how many lines were malformed.
pub fn read_file(path: &std::path::Path) -> crate::Result<(Agent, Vec<event::Event>, u64)> {
    let agent = detect_file(path)?;
    let mut f = follow::Follower::new(path, decoder_fn(agent), None);
    let mut events = Vec::new();
    loop {
        f.poll(&mut events)
            .map_err(|e| crate::Error::input(format!("{}: {e}", path.display())))?;
        if f.caught_up() {
            return Ok((agent, events, f.malformed()));
        }
    }
}

/// The first human prompt of a session and when it was made, reading no further
/// than needed.
pub fn first_prompt(
    path: &std::path::Path,
    agent: Agent,
) -> Option<(Option<crate::clock::Micros>, String)> {
    use std::io::BufRead;
    let f = std::fs::File::open(path).ok()?;
    let mut reader = std::io::BufReader::new(f);
    let mut d = decoder(agent);
    let mut buf = Vec::new();
    let mut events = Vec::new();
    for line in 1..=5000u64 {
        buf.clear();
        if reader.read_until(b'\n', &mut buf).ok()? == 0 {
            return None;
        }
        d.feed(buf.strip_suffix(b"\n").unwrap_or(&buf), line, &mut events);
        if let Some(e) = events
            .iter()
            .find(|e| matches!(e.kind, event::EventKind::UserPrompt { .. }))
        {
            if let event::EventKind::UserPrompt { text } = &e.kind {
                return Some((e.timestamp, text.clone()));
            }
        }
        events.clear();
    }
    None
}
