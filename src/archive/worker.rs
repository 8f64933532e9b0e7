//! The fleet's archiver: one thread beside the lanes that copies each ended session's
//! transcript into the archive, records it in the task's ledger (`archived`: original
//! path, archive path, bytes in and out), then prunes the archive to its bound, and
//! ended sessions' recordings and briefs to theirs ([`super::sessions`]).
//!
//! Invariants:
//! - A lane only sends a job (a channel send): compressing a large transcript never
//!   holds up its next claim.
//! - [`Worker::finish`] archives every job sent before it and then ends: the
//!   supervisor calls it after its lanes have stopped, so a `fleet down` leaves no
//!   session unarchived.
//! - A transcript that cannot be archived is reported (stderr and the ledger's
//!   `archived` entry with its `error`), never retried in a loop; the original is
//!   never touched.

use super::Archive;
use crate::clock::Clock;
use crate::store::Location;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::sync::Arc;

/// One ended session's transcript to archive.
#[derive(Debug, Clone)]
pub struct Job {
    pub task_id: String,
    pub session: String,
    pub transcript: PathBuf,
}

enum Msg {
    Job(Job),
    Stop,
}

/// Where lanes send their jobs.
#[derive(Clone)]
pub struct Queue(mpsc::Sender<Msg>);

impl Queue {
    /// Hands `job` to the archiver; false when it has already stopped.
    pub fn send(&self, job: Job) -> bool {
        self.0.send(Msg::Job(job)).is_ok()
    }
}

/// How large the archive, and ended sessions' recordings and briefs, may grow.
#[derive(Debug, Clone, Copy)]
pub struct Bounds {
    pub archive: u64,
    pub sessions: u64,
}

/// The archiver thread.
pub struct Worker {
    tx: mpsc::Sender<Msg>,
    handle: std::thread::JoinHandle<()>,
}

impl Worker {
    /// Starts the archiver of `state_dir`, within `bounds`, recording what it
    /// archived in the store at `store`.
    pub fn spawn(
        state_dir: &Path,
        store: &Location,
        clock: Arc<dyn Clock>,
        bounds: Bounds,
    ) -> Worker {
        let (tx, rx) = mpsc::channel();
        let state_dir = state_dir.to_path_buf();
        let store = store.clone();
        let handle = std::thread::spawn(move || {
            while let Ok(Msg::Job(job)) = rx.recv() {
                archive_one(&state_dir, &store, &clock, bounds, &job);
            }
        });
        Worker { tx, handle }
    }

    pub fn queue(&self) -> Queue {
        Queue(self.tx.clone())
    }

    /// Archives what was sent so far, then stops the thread.
    pub fn finish(self) {
        let _ = self.tx.send(Msg::Stop);
        let _ = self.handle.join();
    }
}

/// Archives one job's transcript and records it (see the module invariants).
pub fn archive_one(
    state_dir: &Path,
    store: &Location,
    clock: &Arc<dyn Clock>,
    bounds: Bounds,
    job: &Job,
) {
    let max_bytes = bounds.archive;
    let archive = Archive::at(state_dir);
    let detail = match archive.store(&job.transcript, Some(&job.session), clock.now()) {
        Ok(s) if !s.written => return,
        Ok(s) => serde_json::json!({
            "original": s.entry.meta.original,
            "archive": s.entry.path,
            "bytes_in": s.entry.meta.bytes_in,
            "bytes_out": s.entry.bytes_out,
            "replaced": s.replaced,
        }),
        Err(e) => {
            tracing::warn!(target: "spice", "archiving {}: {e}", job.transcript.display());
            serde_json::json!({ "original": job.transcript, "error": e.to_string() })
        }
    };
    let mut keep = None;
    if let Ok(mut store) = crate::store::connect(store, clock.clone()) {
        if let Err(e) = store.note(&job.task_id, "archived", &job.session, detail) {
            tracing::warn!(
                target: "spice", "recording the archive of {}: {e}",
                job.transcript.display()
            );
        }
        keep = live_sessions(&mut *store);
    }
    // Without the lanes' sessions nothing is known to be ended: nothing is pruned.
    if let Some(keep) = keep {
        prune_sessions(state_dir, &keep, bounds.sessions);
    }
    match archive.prune(max_bytes, false) {
        Ok(gone) if !gone.is_empty() => {
            let bytes: u64 = gone.iter().map(|e| e.bytes_out).sum();
            tracing::info!(
                target: "spice", "archive over its bound ({max_bytes} bytes): pruned {} oldest cop{} ({bytes} bytes)",
                gone.len(),
                if gone.len() == 1 { "y" } else { "ies" }
            );
        }
        Ok(_) => {}
        Err(e) => tracing::warn!(target: "spice", "pruning the archive: {e}"),
    }
}

/// The sessions of every lane's current claim, its predecessors included (and any
/// session a claim names): their recordings and briefs stay.
fn live_sessions(
    store: &mut dyn crate::store::Authority,
) -> Option<std::collections::HashSet<String>> {
    let mut keep = std::collections::HashSet::new();
    for row in store.lanes().ok()? {
        keep.extend(row.session);
        keep.extend(row.lineage);
    }
    for c in store.claims().ok()? {
        keep.insert(c.claimant);
    }
    Some(keep)
}

/// Prunes ended sessions' recordings and briefs to `bound`, saying what went.
fn prune_sessions(state_dir: &Path, keep: &std::collections::HashSet<String>, bound: u64) {
    match super::sessions::prune(state_dir, keep, bound, false) {
        Ok(gone) if !gone.is_empty() => {
            let bytes: u64 = gone.iter().map(|p| p.bytes).sum();
            tracing::info!(
                target: "spice", "ended sessions' recordings and briefs over their bound ({bound} bytes): pruned {} oldest file(s) ({bytes} bytes)",
                gone.len()
            );
        }
        Ok(_) => {}
        Err(e) => tracing::warn!(target: "spice", "pruning recordings and briefs: {e}"),
    }
}
