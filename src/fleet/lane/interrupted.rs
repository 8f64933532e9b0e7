//! What the previous session (a successor's predecessor) or turn was in the middle
//! of when it ended, for the top of the next brief: the commands its shim recorded
//! as still running, else the call its transcript leaves without a result.

use super::{Lane, Work};
use crate::agent::inflight;
use std::path::Path;

/// What the previous session (or turn) was in the middle of when it ended.
pub(super) struct Interrupted {
    /// Whose record was read (and is cleared once the brief is written).
    pub previous: Option<String>,
    /// As the brief lists them.
    pub quoted: Vec<String>,
    /// "shim" or "transcript", for the ledger.
    pub from: Option<&'static str>,
}

impl Lane<'_> {
    /// What the previous session (a successor's predecessor, or this session's last
    /// turn) was in the middle of when it ended: the commands its shim found still
    /// running, else the call its transcript leaves without a result.
    pub(super) fn interrupted(&self, work: &Work, session: &str, successor: bool) -> Interrupted {
        let first_after_predecessor = successor && work.turns == 0;
        let previous = if work.turns > 0 {
            Some(session.to_string())
        } else {
            first_after_predecessor
                .then(|| self.row.lineage.last().cloned())
                .flatten()
        };
        let mut recorded = previous
            .as_deref()
            .map(|p| inflight::read(&self.opts.state_dir, p))
            .unwrap_or_default();
        let mut interrupted_from = (!recorded.is_empty()).then_some("shim");
        // The call the transcript leaves unanswered: the fallback, and, when a
        // recorded command contains it (the agents wrap their commands in shell
        // set-up), the way to show that command as the agent wrote it.
        let unanswered = first_after_predecessor
            .then(|| self.row.transcript.as_deref().and_then(interrupted_call))
            .flatten();
        match unanswered {
            Some(call) if recorded.is_empty() => {
                recorded.push(call);
                interrupted_from = Some("transcript");
            }
            Some(call) => {
                for r in recorded.iter_mut() {
                    if r.contains(call.trim()) {
                        *r = call.clone();
                    }
                }
            }
            None => {}
        }
        let mut interrupted: Vec<String> = recorded
            .iter()
            .take(inflight::QUOTE_COMMANDS)
            .map(|c| inflight::quote(c))
            .collect();
        if recorded.len() > inflight::QUOTE_COMMANDS {
            interrupted.push(format!(
                "and {} more",
                recorded.len() - inflight::QUOTE_COMMANDS
            ));
        }
        Interrupted {
            previous,
            quoted: interrupted,
            from: interrupted_from,
        }
    }
}

/// The call a transcript ends in the middle of (no result came back): its command,
/// or `(a NAME call)` for a tool that runs none. Unreadable: none.
fn interrupted_call(transcript: &str) -> Option<String> {
    let (_, events, malformed) = crate::transcript::read_file(Path::new(transcript)).ok()?;
    let call = crate::transcript::briefing::brief(transcript, &events, malformed).unfinished_call?;
    Some(
        call.command
            .unwrap_or_else(|| format!("(a {} call)", call.name)),
    )
}
