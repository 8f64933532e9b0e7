//! The conscience beside a lane: a thread with its own store connection that hears
//! what the lane's transcript scans read, so that matching, judging and publishing
//! never hold up the lane's loop (handing a scan over is one channel send).
//!
//! Invariants:
//! - Messages are heard in transcript order, each in the epoch its preceding
//!   compactions put the lane in (the epoch is the store's, so a successor session
//!   or a restarted supervisor continues it).
//! - Judges run on threads of their own; their verdicts come back to this thread,
//!   which alone writes. While a maxim is being judged, its further triggers are
//!   suppressed.
//! - When the watcher is dropped (the session ended), messages already handed over
//!   are still heard; checks whose judges have not answered are logged `abandoned`
//!   (the session ended), and nothing is published for them afterwards.

use super::judge::{Answer, Verdict};
use super::{conclude, consider, Book, Check, Conscience, Scope, Source};
use crate::clock::Clock;
use crate::store::{Authority, Location};
use crate::transcript::acks::ScanReport;
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{channel, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

/// Where a lane's conscience reads its maxims and writes its steps.
pub struct Seat {
    /// Where the fleet's store is.
    pub store: Location,
    pub clock: Arc<dyn Clock>,
    pub maxims: Maxims,
    /// Where judges run.
    pub worktree: PathBuf,
    pub scope: Scope,
}

/// The maxims a watcher hears with.
pub enum Maxims {
    Book(Book),
    /// Those a revision of a repository carries, read on the watcher's thread (the
    /// lane does not wait for git); maxims that no longer parse are logged as an
    /// `error` step and nothing is heard.
    AtRev(PathBuf, String),
}

impl Seat {
    /// A lane's seat: the maxims `base` carries in `repo`.
    pub fn at_rev(
        store: &Location,
        clock: Arc<dyn Clock>,
        repo: &Path,
        base: &str,
        worktree: &Path,
        scope: Scope,
    ) -> Seat {
        Seat {
            store: store.clone(),
            clock,
            maxims: Maxims::AtRev(repo.to_path_buf(), base.to_string()),
            worktree: worktree.to_path_buf(),
            scope,
        }
    }
}

enum Msg {
    Heard(ScanReportPart),
    Judged(u64, Verdict, Vec<Answer>),
    /// Sent when a step is done (tests and benchmarks wait on it).
    Flush(Sender<()>),
    Stop,
}

struct ScanReportPart {
    transcript: String,
    said: Vec<crate::transcript::acks::Said>,
    compactions: u64,
}

/// A lane's conscience, running beside it.
pub struct Watcher {
    tx: Sender<Msg>,
    worker: Option<JoinHandle<()>>,
    error: Arc<Mutex<Option<String>>>,
}

impl Watcher {
    pub fn start(seat: Seat) -> Watcher {
        let (tx, rx) = channel::<Msg>();
        let error = Arc::new(Mutex::new(None));
        let (back, err) = (tx.clone(), error.clone());
        let worker = std::thread::Builder::new()
            .name(format!("conscience-{}", seat.scope.lane))
            .spawn(move || {
                let mut store = match crate::store::connect(&seat.store, seat.clock) {
                    Ok(s) => s,
                    Err(e) => {
                        *err.lock().expect("not poisoned") = Some(e.to_string());
                        return;
                    }
                };
                let book = match seat.maxims {
                    Maxims::Book(b) => b,
                    Maxims::AtRev(repo, rev) => match super::maxim::at_rev(&repo, &rev) {
                        Ok(b) => b,
                        Err(errs) => {
                            let why: Vec<String> = errs.iter().map(|e| e.to_string()).collect();
                            *err.lock().expect("not poisoned") = Some(why.join("; "));
                            let _ = store.conscience_note(&crate::store::NewStep {
                                lane: &seat.scope.lane,
                                maxim: "",
                                epoch: 0,
                                step: "error",
                                detail: serde_json::json!({ "why": why.join("; ") }),
                            });
                            return;
                        }
                    },
                };
                let conscience = Arc::new(Conscience::new(book));
                let mut w = Worker {
                    store: &mut *store,
                    c: conscience,
                    scope: seat.scope,
                    worktree: seat.worktree,
                    back,
                    pending: HashMap::new(),
                    next: 0,
                };
                for msg in rx {
                    let r = match msg {
                        Msg::Heard(part) => w.heard(part),
                        Msg::Judged(id, verdict, answers) => w.judged(id, verdict, &answers),
                        Msg::Flush(done) => {
                            let _ = done.send(());
                            Ok(())
                        }
                        Msg::Stop => {
                            let _ = w.abandon_all();
                            break;
                        }
                    };
                    if let Err(e) = r {
                        *err.lock().expect("not poisoned") = Some(e.to_string());
                    }
                }
            })
            .expect("spawning a thread");
        Watcher {
            tx,
            worker: Some(worker),
            error,
        }
    }

    /// Hands the assistant messages and compactions of one scan over (never blocks).
    pub fn hear(&self, report: &ScanReport) {
        if report.said.is_empty() && report.compactions == 0 {
            return;
        }
        let _ = self.tx.send(Msg::Heard(ScanReportPart {
            transcript: report.path.clone(),
            said: report.said.clone(),
            compactions: report.compactions,
        }));
    }

    /// Waits until everything handed over so far is heard (judges may still be out).
    pub fn flush(&self) {
        let (tx, rx) = channel();
        if self.tx.send(Msg::Flush(tx)).is_ok() {
            let _ = rx.recv();
        }
    }

    /// The last error the watcher met (a store it could not write), if any.
    pub fn error(&self) -> Option<String> {
        self.error.lock().expect("not poisoned").clone()
    }
}

impl Drop for Watcher {
    fn drop(&mut self) {
        let _ = self.tx.send(Msg::Stop);
        if let Some(w) = self.worker.take() {
            let _ = w.join();
        }
    }
}

struct Worker<'a> {
    store: &'a mut dyn Authority,
    c: Arc<Conscience>,
    scope: Scope,
    worktree: PathBuf,
    back: Sender<Msg>,
    /// Checks out with the judges, by id.
    pending: HashMap<u64, Check>,
    next: u64,
}

impl Worker<'_> {
    fn judging(&self) -> HashSet<usize> {
        self.pending.values().map(|c| c.maxim).collect()
    }

    fn heard(&mut self, part: ScanReportPart) -> crate::Result<()> {
        let lane = self.scope.lane.clone();
        let mut counted = 0;
        let mut epoch = self.store.conscience_epoch(&lane)?;
        for s in &part.said {
            if s.compactions_before > counted {
                epoch = self
                    .store
                    .conscience_compacted(&lane, s.compactions_before - counted)?;
                counted = s.compactions_before;
            }
            for heard in self.c.hits(&self.scope, &s.text) {
                let source = Source {
                    transcript: part.transcript.clone(),
                    line: s.line,
                };
                let judging = self.judging();
                if let Some(check) =
                    consider(self.store, &self.c, &lane, epoch, heard, source, &judging)?
                {
                    self.send_to_judges(check);
                }
            }
        }
        if part.compactions > counted {
            self.store
                .conscience_compacted(&lane, part.compactions - counted)?;
        }
        Ok(())
    }

    fn send_to_judges(&mut self, check: Check) {
        let id = self.next;
        self.next += 1;
        let (c, cwd, back, asked) = (
            self.c.clone(),
            self.worktree.clone(),
            self.back.clone(),
            check.clone(),
        );
        self.pending.insert(id, check);
        std::thread::spawn(move || {
            let (verdict, answers) = super::ask(&c, &asked, cwd);
            let _ = back.send(Msg::Judged(id, verdict, answers));
        });
    }

    fn judged(&mut self, id: u64, verdict: Verdict, answers: &[Answer]) -> crate::Result<()> {
        let Some(check) = self.pending.remove(&id) else {
            return Ok(());
        };
        conclude(
            self.store,
            &self.c,
            &self.scope.lane,
            &check,
            verdict,
            answers,
        )
    }

    fn abandon_all(&mut self) -> crate::Result<()> {
        for (_, check) in self.pending.drain() {
            let name = self.c.maxim(check.maxim).name.clone();
            self.store.conscience_note(&crate::store::NewStep {
                lane: &self.scope.lane,
                maxim: &name,
                epoch: check.epoch,
                step: "abandoned",
                detail: serde_json::json!({
                    "sentence": check.sentence, "transcript": check.source.transcript,
                    "line": check.source.line, "why": "the session ended before the judges answered",
                }),
            })?;
        }
        Ok(())
    }
}
