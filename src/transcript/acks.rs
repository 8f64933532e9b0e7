//! Retiring steering items from a transcript: the agent's own replies are where
//! `ACK <key>: …` is written, so the transcript is read from its stored checkpoint,
//! every directive in the main conversation's assistant text is applied with the
//! transcript line it came from, and the checkpoint moves in the same transaction.

use super::event::EventKind;
use super::follow::{Follower, Restart};
use crate::error::{Error, Result};
use crate::steer::grammar;
use crate::store::{Outcome, Store};
use std::path::Path;

/// What one scan did.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ScanReport {
    pub path: String,
    pub outcomes: Vec<Outcome>,
    /// The lines read in this scan, `(first, last]`.
    pub from_line: u64,
    pub to_line: u64,
    /// The file no longer matched its checkpoint and was read from the start.
    pub rewritten: bool,
}

/// Reads `path` from where the store last left it and applies the ACK/NACK
/// directives found in assistant text. Subagents' text is not the agent answering.
pub fn scan(store: &mut Store, path: &Path) -> Result<ScanReport> {
    let canonical = std::fs::canonicalize(path)
        .map_err(|e| Error::input(format!("{}: {e}", path.display())))?;
    let key = canonical.display().to_string();
    let agent = super::detect_file(&canonical)?;
    let from = store.transcript_checkpoint(&key)?;
    let mut follower = Follower::new(&canonical, super::decoder_fn(agent), from);
    let mut report = ScanReport {
        path: key.clone(),
        outcomes: Vec::new(),
        from_line: from.map_or(0, |c| c.line),
        to_line: 0,
        rewritten: false,
    };
    loop {
        let mut events = Vec::new();
        let restart = follower
            .poll(&mut events)
            .map_err(|e| Error::input(format!("{}: {e}", canonical.display())))?;
        if restart == Restart::Rewritten {
            report.rewritten = true;
            report.from_line = 0;
        }
        let mut directives = Vec::new();
        for e in events.iter().filter(|e| e.subagent.is_none()) {
            if let EventKind::AssistantText { text, .. } = &e.kind {
                for mut d in grammar::parse(text) {
                    if d.problem.is_none() {
                        d.line = e.line as usize;
                        directives.push(d);
                    }
                }
            }
        }
        let at = follower.checkpoint();
        report
            .outcomes
            .extend(store.apply_transcript(&key, at, &directives)?);
        report.to_line = at.line;
        if follower.caught_up() {
            return Ok(report);
        }
    }
}
