//! Transcripts: reading, following and briefing Claude Code and Codex sessions.
//!
//! [`event`] is the one model both agents decode into; [`claude`] and [`codex`] are
//! the decoders; [`follow`] tails a growing file exactly once; [`detect`] tells
//! which agent wrote a file from its first records.

pub mod acks;
pub mod briefing;
pub mod claude;
pub mod codex;
pub mod discover;
pub mod event;
pub mod follow;
pub mod jsonl;
pub mod render;
pub mod sanitize;

use event::{Agent, Decoder};

/// Which agent wrote the transcript whose first non-empty lines are `head`, if any.
pub fn detect(head: &[u8]) -> Option<Agent> {
    for line in head
        .split(|b| *b == b'\n')
        .filter(|l| !l.trim_ascii().is_empty())
        .take(20)
    {
        let Ok(serde_json::Value::Object(o)) = serde_json::from_slice::<serde_json::Value>(line)
        else {
            continue;
        };
        let ty = o.get("type").and_then(|t| t.as_str());
        match ty {
            Some("session_meta" | "response_item" | "event_msg" | "turn_context" | "compacted")
                if o.contains_key("payload") =>
            {
                return Some(Agent::Codex)
            }
            // `codex exec --json` prints its own event stream (thread/turn/item events).
            Some(t)
                if t.starts_with("thread.") || t.starts_with("turn.") || t.starts_with("item.") =>
            {
                return Some(Agent::Codex)
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
            ) => return Some(Agent::Claude),
            None if o.contains_key("id")
                && (o.contains_key("instructions") || o.contains_key("git")) =>
            {
                return Some(Agent::Codex)
            }
            _ if o.contains_key("sessionId") || o.contains_key("parentUuid") => {
                return Some(Agent::Claude)
            }
            _ => {}
        }
    }
    None
}

/// A fresh decoder for `agent`.
pub fn decoder(agent: Agent) -> Box<dyn Decoder + Send> {
    match agent {
        Agent::Claude => Box::new(claude::ClaudeDecoder::new()),
        Agent::Codex => Box::new(codex::CodexDecoder::new()),
    }
}

/// The decoder constructor for `agent`, for a [`follow::Follower`].
pub fn decoder_fn(agent: Agent) -> fn() -> Box<dyn Decoder + Send> {
    match agent {
        Agent::Claude => || decoder(Agent::Claude),
        Agent::Codex => || decoder(Agent::Codex),
    }
}

/// Which agent wrote the file at `path`, from its first 1 MiB.
pub fn detect_file(path: &std::path::Path) -> crate::Result<Agent> {
    use std::io::Read;
    let mut head = Vec::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(1 << 20).read_to_end(&mut head))
        .map_err(|e| crate::Error::input(format!("{}: {e}", path.display())))?;
    detect(&head).ok_or_else(|| {
        crate::Error::input(format!(
            "{}: not a Claude Code or Codex transcript",
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
