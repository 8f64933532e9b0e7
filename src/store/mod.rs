//! The SQLite authority: tasks, dependencies, flows, claims and the ledger.
//!
//! Callers use the narrow methods on [`Store`] (add, resolve, claim, renew, …), never
//! raw SQL, so that a second backend can implement the same contract later.
//!
//! Invariants:
//! - Every writing transaction is `BEGIN IMMEDIATE` ([`Store::write`]): it takes the
//!   write lock before it reads, so the checks it makes (is the task ready, does the
//!   claim still carry this fence) still hold when it commits.
//! - The schema is versioned by `PRAGMA user_version`; a database from a newer spice, a
//!   file that is not SQLite, and a database without spice's tables are refused, never
//!   recreated or "repaired".
//! - WAL journal, `synchronous=FULL` (a committed claim survives a machine crash),
//!   `busy_timeout` so concurrent claimers queue instead of failing.
//! - A corrupt store takes no writes: each connection's first write runs SQLite's
//!   `quick_check` (the full `integrity_check` when a backup is due) and refuses on a
//!   damaged file, whichever command writes first ([`backup`]); the quick check is
//!   skipped when the files are exactly as the last verified write left them
//!   ([`backup::Verified`]).
//! - A store that cannot be written (read-only directory or file, full disk) still
//!   serves reads; its writes are refused naming the file and the reason ([`open`]).

mod acks;
pub mod authority;
mod backup;
mod beds;
mod bell;
mod check;
mod claims;
mod conscience;
mod edits;
mod generation;
mod inbox;
mod lanes;
mod leases;
mod ledger;
pub mod location;
mod next;
mod open;
pub mod pg;
mod phases;
mod refusals;
mod resolve;
mod schema;
mod snapshot;
mod sqlite;
mod sqlite_steps;
mod supervisors;
mod target;
mod tasks;
mod usage;
pub mod vocab;
mod watch;

pub use authority::{connect, Authority};
pub use backup::{list_backups, restore, Backup, Restored, BACKUPS_KEPT, BACKUP_DIR, BACKUP_EVERY};
pub use beds::{BedSlot, SlotRequest};
pub use bell::{nudge, nudge_from_signal, prepare_signal_nudge};
pub use check::{check, CheckReport, Verdict};
pub use claims::{Claim, ClaimRequest, Holder, Takeover, DEFAULT_LEASE, OPERATOR};
pub use conscience::{ConscienceEntry, NewStep, Proposal};
pub use edits::ImportReport;
pub use generation::{Generation, Waited};
pub use inbox::{AckRecord, Effect, Item, ItemState, Outcome, Scope, DEFAULT_TTL};
pub use lanes::{LaneRow, LaneState};
pub use ledger::LedgerEntry;
pub use location::Location;
pub use next::{ClaimSet, ClaimView, LeanClaim};
pub use resolve::ShortIds;
pub use snapshot::Snapshot;
pub use supervisors::{LaneTake, SupervisorRow};
pub use target::{agent_targets, Target, TargetKind};
pub use tasks::{ListFilter, PhaseOutcome, TaskUpdate};
pub use usage::{
    Budget, BudgetRow, BudgetScope, BudgetState, Delta, Metered, SessionUsage, Tokens,
};

use crate::clock::{Clock, Micros};
use crate::error::{Error, Result, SqlContext};
use rusqlite::{Connection, Transaction, TransactionBehavior};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// The file name of the database inside the state directory.
pub const DB_FILE: &str = "spice.db";

/// How long a writer waits for the lock before giving up.
pub(crate) const BUSY_TIMEOUT: Duration = Duration::from_secs(30);

pub struct Store {
    conn: Connection,
    clock: Arc<dyn Clock>,
    path: PathBuf,
    /// Why this connection cannot write, when it cannot: `read-only (…)` or
    /// `the disk is full (…)`, as the refusal of a write says after the file name.
    read_only: Option<String>,
    /// When this connection next looks at the file's soundness and its backups
    /// (`Micros::MIN` until its first write).
    next_guard: Micros,
    /// The process's bell for this file, once this connection first waited
    /// (`None` inside when it could not start: waits poll).
    bell: std::sync::OnceLock<Option<Arc<bell::Bell>>>,
}

/// Closing the last connection checkpoints the WAL into the database, which changes
/// both files after the last write recorded them as verified ([`backup::Verified`]), so
/// the next process's first write would run `quick_check` every time. A connection
/// that wrote, when the files are still as a verified write left them, closes first
/// and records them again.
impl Drop for Store {
    fn drop(&mut self) {
        if self.next_guard == Micros::MIN || self.read_only.is_some() {
            return;
        }
        // Held across the close's checkpoint and the record, as a write holds it.
        let held = backup::Verified::hold(&self.path);
        if !backup::Verified::matches(&self.path) {
            return;
        }
        let Ok(spare) = Connection::open_in_memory() else {
            return;
        };
        let conn = std::mem::replace(&mut self.conn, spare);
        if conn.close().is_ok() {
            backup::Verified::record(&self.path, held);
        }
    }
}

impl Store {
    /// Opens (creating if needed) `state_dir/spice.db`.
    pub fn open_dir(state_dir: &Path, clock: Arc<dyn Clock>) -> Result<Store> {
        std::fs::create_dir_all(state_dir).map_err(|source| Error::Io {
            context: format!("failed to create state directory {}", state_dir.display()),
            source,
        })?;
        Store::open(&state_dir.join(DB_FILE), clock)
    }

    /// Opens the database at `path`, creating and migrating it as needed; read-only
    /// (see [`Store::read_only`]) when it cannot be written.
    pub fn open(path: &Path, clock: Arc<dyn Clock>) -> Result<Store> {
        let (conn, read_only) = open::open(path)?;
        Ok(Store {
            conn,
            clock,
            path: path.to_path_buf(),
            read_only,
            next_guard: Micros::MIN,
            bell: std::sync::OnceLock::new(),
        })
    }

    /// Why writes to this store are refused (`read-only (…)`, `the disk is full (…)`),
    /// or `None` when it can be written.
    pub fn read_only(&self) -> Option<&str> {
        self.read_only.as_deref()
    }

    /// How long a write waits for another writer's lock. Interactive paths that must
    /// not stall (the exec wrapper forwarding signals) use a short one.
    pub fn set_busy_timeout(&self, timeout: Duration) -> Result<()> {
        self.conn
            .busy_timeout(timeout)
            .ctx(|| "failed to set busy timeout".into())
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn now(&self) -> Micros {
        self.clock.now()
    }

    /// Runs `f` in a `BEGIN IMMEDIATE` transaction; commits on `Ok`, rolls back on `Err`.
    pub(crate) fn write<T>(
        &mut self,
        what: &str,
        f: impl FnOnce(&Transaction<'_>, Micros) -> Result<T>,
    ) -> Result<T> {
        if let Some(why) = &self.read_only {
            return Err(Error::Other(format!(
                "{}: {why}; nothing was written ({what})",
                self.path.display()
            )));
        }
        let before = self.clock.now();
        let backup_due = before >= self.next_guard && self.guard(before)?;
        let (path, read_only) = (&self.path, self.read_only.as_deref());
        let written = (|| {
            let tx = self
                .conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .ctx(|| format!("failed to start {what}"))?;
            // After the lock: a writer that waited for it must not stamp the past.
            let now = self.clock.now();
            let out = f(&tx, now)?;
            // From before the commit until its record: see `backup::Verified`.
            let held = backup::Verified::hold(path);
            tx.commit().ctx(|| format!("failed to commit {what}"))?;
            #[cfg(test)]
            backup::probe::after_commit(path);
            Ok((out, held))
        })()
        .map_err(|e| open::explain(path, read_only, e));
        let written = written.map(|(out, held)| {
            backup::Verified::record(&self.path, held);
            out
        });
        match written {
            Ok(out) if backup_due => {
                self.take_backup(self.clock.now());
                Ok(out)
            }
            Ok(out) => Ok(out),
            Err(e) => {
                if backup_due {
                    // The backup waits for a write that commits.
                    self.next_guard = before;
                }
                Err(e)
            }
        }
    }

    /// Runs `f` in a read transaction, so it sees one consistent snapshot.
    pub(crate) fn read<T>(
        &mut self,
        what: &str,
        f: impl FnOnce(&Transaction<'_>, Micros) -> Result<T>,
    ) -> Result<T> {
        let now = self.clock.now();
        let (path, read_only) = (&self.path, self.read_only.as_deref());
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Deferred)
            .ctx(|| format!("failed to start {what}"))
            .map_err(|e| open::explain(path, read_only, e))?;
        f(&tx, now).map_err(|e| open::explain(path, read_only, e))
    }

    /// Frees this connection's page cache (`PRAGMA shrink_memory`), for a connection
    /// about to sit idle after reading the whole graph: the cache refills on the next
    /// read, from the operating system's.
    pub fn release_memory(&self) -> Result<()> {
        self.conn
            .execute_batch("PRAGMA shrink_memory")
            .ctx(|| "failed to free the page cache".into())
    }

    /// `PRAGMA integrity_check`: `Ok(())` or the problems SQLite found.
    pub fn integrity_check(&self) -> Result<()> {
        check::integrity(&self.conn, &self.path, "integrity_check")
    }
}
