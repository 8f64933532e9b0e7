//! Transcripts: reading, following and briefing Claude Code and Codex sessions.
//!
//! [`event`] is the one model both agents decode into; [`claude`] and [`codex`] are
//! the decoders; [`follow`] tails a growing file exactly once; [`detect`] tells
//! which agent wrote a file from its first records.

pub mod briefing;
pub mod claude;
pub mod discover;
pub mod codex;
pub mod event;
pub mod follow;
pub mod render;
pub mod sanitize;

use event::Agent;

/// Which agent wrote the transcript whose first non-empty lines are `head`, if any.
pub fn detect(head: &[u8]) -> Option<Agent> {
    for line in head.split(|b| *b == b'\n').filter(|l| !l.trim_ascii().is_empty()).take(20) {
        let Ok(serde_json::Value::Object(o)) = serde_json::from_slice::<serde_json::Value>(line) else {
            continue;
        };
        let ty = o.get("type").and_then(|t| t.as_str());
        match ty {
            Some("session_meta" | "response_item" | "event_msg" | "turn_context" | "compacted")
                if o.contains_key("payload") =>
            {
                return Some(Agent::Codex)
            }
            Some(
                "user" | "assistant" | "system" | "summary" | "file-history-snapshot" | "queue-operation"
                | "progress" | "last-prompt" | "custom-title",
            ) => return Some(Agent::Claude),
            None if o.contains_key("id") && (o.contains_key("instructions") || o.contains_key("git")) => {
                return Some(Agent::Codex)
            }
            _ if o.contains_key("sessionId") || o.contains_key("parentUuid") => return Some(Agent::Claude),
            _ => {}
        }
    }
    None
}
