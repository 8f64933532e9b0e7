//! The fleet's archiver: one thread beside the lanes that copies each ended session's
//! transcript into the archive, records it in the task's ledger (`archived`: original
//! path, archive path, bytes in and out), then prunes the archive to its bound.
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

/// The archiver thread.
pub struct Worker {
    tx: mpsc::Sender<Msg>,
    handle: std::thread::JoinHandle<()>,
}

impl Worker {
    /// Starts the archiver of `state_dir`, bounded by `max_bytes`, recording what it
    /// archived in the store at `store`.
    pub fn spawn(
        state_dir: &Path,
        store: &Location,
        clock: Arc<dyn Clock>,
        max_bytes: u64,
    ) -> Worker {
        let (tx, rx) = mpsc::channel();
        let state_dir = state_dir.to_path_buf();
        let store = store.clone();
        let handle = std::thread::spawn(move || {
            while let Ok(Msg::Job(job)) = rx.recv() {
                archive_one(&state_dir, &store, &clock, max_bytes, &job);
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
    max_bytes: u64,
    job: &Job,
) {
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
    if let Ok(mut store) = crate::store::connect(store, clock.clone()) {
        if let Err(e) = store.note(&job.task_id, "archived", &job.session, detail) {
            tracing::warn!(
                target: "spice", "recording the archive of {}: {e}",
                job.transcript.display()
            );
        }
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
