//! `spice conscience scan`: a transcript heard in the foreground, as a lane's watcher
//! would hear it, from where the last such scan of the same file stopped (its own
//! checkpoint, `conscience:PATH`, apart from the ACK scan's), so a file is heard once
//! however often it is scanned. The judges are asked in turn.

use super::{hear_now, Conscience, Scope};
use crate::error::{Error, Result};
use crate::store::Authority;
use crate::transcript::acks::Said;
use crate::transcript::event::EventKind;
use crate::transcript::follow::Follower;
use serde::Serialize;
use std::path::Path;

/// What one scan read.
#[derive(Debug, Clone, Serialize)]
pub struct Scanned {
    pub path: String,
    /// The lines read, `(first, last]`.
    pub from_line: u64,
    pub to_line: u64,
    /// Assistant messages of the main conversation heard.
    pub messages: usize,
    pub compactions: u64,
}

/// Hears the transcript at `path` for `scope` (judges run in `cwd`).
pub fn scan(
    store: &mut dyn Authority,
    c: &Conscience,
    scope: &Scope,
    path: &Path,
    cwd: &Path,
) -> Result<Scanned> {
    let canonical = std::fs::canonicalize(path)
        .map_err(|e| Error::input(format!("{}: {e}", path.display())))?;
    let shown = canonical.display().to_string();
    let key = format!("conscience:{shown}");
    let agent = crate::transcript::detect_file(&canonical)?;
    let from = store.transcript_checkpoint(&key)?;
    let mut follower = Follower::new(&canonical, crate::transcript::decoder_fn(agent), from);
    let from_line = follower.checkpoint().line;
    let mut said = Vec::new();
    let mut compactions = 0;
    loop {
        let mut events = Vec::new();
        follower
            .poll(&mut events)
            .map_err(|e| Error::input(format!("{shown}: {e}")))?;
        for e in events.iter().filter(|e| e.subagent.is_none()) {
            match &e.kind {
                EventKind::AssistantText { text, .. } => said.push(Said {
                    line: e.line,
                    text: text.clone(),
                    compactions_before: compactions,
                }),
                EventKind::Compaction { .. } => compactions += 1,
                _ => {}
            }
        }
        if follower.caught_up() {
            break;
        }
    }
    hear_now(store, c, scope, &shown, &said, compactions, cwd)?;
    let at = follower.checkpoint();
    store.apply_transcript(&key, at, &[], &[])?;
    Ok(Scanned {
        path: shown,
        from_line,
        to_line: at.line,
        messages: said.len(),
        compactions,
    })
}
