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

mod claims;
mod import;
mod inbox;
mod lanes;
mod ledger;
mod phases;
mod resolve;
mod schema;
mod snapshot;
mod target;
mod tasks;
mod watch;

pub use claims::{Claim, ClaimRequest, Holder, Takeover, DEFAULT_LEASE};
pub use import::ImportReport;
pub use inbox::{AckRecord, Effect, Item, ItemState, Outcome, Scope, DEFAULT_TTL};
pub use lanes::{LaneRow, LaneState};
pub use ledger::LedgerEntry;
pub use snapshot::Snapshot;
pub use target::{agent_targets, Target, TargetKind};
pub use tasks::{ListFilter, PhaseOutcome, TaskUpdate};

use crate::clock::{Clock, Micros};
use crate::error::{Error, Result, SqlContext};
use rusqlite::{Connection, OpenFlags, Transaction, TransactionBehavior};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// The file name of the database inside the state directory.
pub const DB_FILE: &str = "spice.db";

/// How long a writer waits for the lock before giving up.
const BUSY_TIMEOUT: Duration = Duration::from_secs(30);

pub struct Store {
    conn: Connection,
    clock: Arc<dyn Clock>,
    path: PathBuf,
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

    /// Opens the database at `path`, creating and migrating it as needed.
    pub fn open(path: &Path, clock: Arc<dyn Clock>) -> Result<Store> {
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = Connection::open_with_flags(path, flags).map_err(|e| open_error(path, e))?;
        conn.busy_timeout(BUSY_TIMEOUT)
            .map_err(|e| open_error(path, e))?;
        conn.execute_batch("PRAGMA foreign_keys = ON; PRAGMA synchronous = FULL;")
            .map_err(|e| open_error(path, e))?;
        let mode: String = conn
            .query_row("PRAGMA journal_mode", [], |r| r.get(0))
            .map_err(|e| open_error(path, e))?;
        if !mode.eq_ignore_ascii_case("wal") {
            conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get::<_, String>(0))
                .map_err(|e| open_error(path, e))?;
        }
        let mut store = Store {
            conn,
            clock,
            path: path.to_path_buf(),
        };
        schema::migrate(&mut store.conn, path)?;
        Ok(store)
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
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .ctx(|| format!("failed to start {what}"))?;
        // After the lock: a writer that waited for it must not stamp the past.
        let now = self.clock.now();
        let out = f(&tx, now).map_err(|e| corrupt(&self.path, e))?;
        tx.commit()
            .ctx(|| format!("failed to commit {what}"))
            .map_err(|e| corrupt(&self.path, e))?;
        Ok(out)
    }

    /// Runs `f` in a read transaction, so it sees one consistent snapshot.
    pub(crate) fn read<T>(
        &mut self,
        what: &str,
        f: impl FnOnce(&Transaction<'_>, Micros) -> Result<T>,
    ) -> Result<T> {
        let now = self.clock.now();
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Deferred)
            .ctx(|| format!("failed to start {what}"))?;
        f(&tx, now).map_err(|e| corrupt(&self.path, e))
    }

    /// `PRAGMA integrity_check`: `Ok(())` or the problems SQLite found.
    pub fn integrity_check(&self) -> Result<()> {
        let rows: Vec<String> = (|| {
            let mut stmt = self.conn.prepare("PRAGMA integrity_check")?;
            let rows = stmt.query_map([], |r| r.get(0))?;
            rows.collect::<std::result::Result<_, _>>()
        })()
        .map_err(|e| corrupt(&self.path, e.into()))?;
        if rows == ["ok"] {
            Ok(())
        } else {
            Err(Error::Store(format!(
                "{} failed its integrity check: {}",
                self.path.display(),
                rows.join("; ")
            )))
        }
    }
}

/// Turns SQLite's "malformed" errors into a refusal that names the file.
fn corrupt(path: &Path, e: Error) -> Error {
    match e {
        Error::Sqlite { source, .. } if crate::error::is_corruption(&source) => Error::Store(format!(
            "{} is corrupt ({source}): refusing to use or replace it; inspect it with `spice store check`",
            path.display()
        )),
        other => other,
    }
}

/// SQLite itself tells a foreign or damaged file apart on first read, without writing
/// to it. (An earlier version read the header with a plain `open`/`close` first; in a
/// process that already had a connection, that `close` dropped SQLite's POSIX locks on
/// the file, so another process could checkpoint and reset the WAL under it, and that
/// connection's later commits were lost to everyone else. Never open the database
/// file outside SQLite.)
fn open_error(path: &Path, e: rusqlite::Error) -> Error {
    if e.sqlite_error_code() == Some(rusqlite::ErrorCode::NotADatabase) {
        return Error::Store(format!(
            "{} is not a SQLite database (corrupt or foreign file): refusing to use or replace it",
            path.display()
        ));
    }
    if crate::error::is_corruption(&e) {
        Error::Store(format!(
            "{} is corrupt ({e}): refusing to use or replace it",
            path.display()
        ))
    } else {
        Error::Sqlite {
            context: format!("failed to open {}", path.display()),
            source: e,
        }
    }
}
