//! The store's narrow interface, [`Authority`]: what a caller above the store may ask
//! of whichever backend holds the fleet's state (claim, next-claim, renew, takeover,
//! release, phase, steer, show, ack, checkpoint, ledger, lanes, change notification).
//!
//! Two backends implement it: [`Store`] (SQLite, embedded, the default) and
//! [`super::pg::PgStore`] (PostgreSQL, one server for the supervisors of several hosts).
//! [`connect`] picks one from a [`Location`]; callers hold a `Box<dyn Authority>` and
//! never learn which. A method a backend does not carry yet fails in one line naming
//! the part and the store ([`super::location::not_on_postgres`]); nothing falls back
//! to the other backend.
//!
//! Invariants every backend keeps (the contract `tests/store_claims.rs` runs against
//! both): one claim per task, taken only while the task is ready, inside the
//! transaction that writes it; a fresh fence per holding; a lapsed lease is not free
//! work, and is taken over only under the exact fence seen; every write on a claim
//! comes from its holder (and its fence, when given); leases are judged by the
//! authority's own clock ([`Authority::now`]), never the caller's.

use super::location::Location;
use super::vocab::{Checkpoint, Directive, Filter};
use super::{
    AckRecord, Claim, ClaimRequest, Holder, Item, LaneRow, LedgerEntry, Outcome, PhaseOutcome,
    Scope, ShortIds, Snapshot, Store, Takeover, Target,
};
use crate::clock::{Clock, Micros};
use crate::error::Result;
use crate::task::{NewTask, Task};
use std::sync::Arc;
use std::time::Duration;

/// A (project, phase) cell, as the ledger remembers a claimant's last one.
pub type Cell = (Option<String>, String);

/// The fleet's authority, whichever backend holds it. Ids are as typed (stamps,
/// prefixes, handles, uuids) unless a method says otherwise.
pub trait Authority {
    /// Where the store is, for messages (a path, or a URL without its password).
    fn describe(&self) -> String;
    /// The authority's clock: the one leases are judged by.
    fn now(&mut self) -> Result<Micros>;

    /// Creates a task waiting on `depends`.
    fn add_task(&mut self, new: NewTask, depends: &[String]) -> Result<Task>;
    /// One task with its tags, dependencies and annotations.
    fn task(&mut self, input: &str) -> Result<Task>;
    /// The ids of the tasks that directly wait on this one.
    fn dependents(&mut self, input: &str) -> Result<Vec<String>>;
    /// The shortest unique prefixes of every task id, for listings.
    fn short_ids(&mut self) -> Result<ShortIds>;
    /// Open tasks and every claim, from one consistent read, with its time.
    fn snapshot(&mut self) -> Result<Snapshot>;
    /// [`Authority::snapshot`] for ranking only: a backend may leave each task's
    /// uuid, title and body empty (nothing that ranks reads them). The full snapshot
    /// unless a backend has a cheaper read.
    fn ranking_snapshot(&mut self) -> Result<Snapshot> {
        self.snapshot()
    }
    /// The cell of the task `claimant` last came to hold, if any.
    fn last_cell(&mut self, claimant: &str) -> Result<Option<Cell>>;

    /// Claims a ready task; a conflict naming why when it is not ready.
    fn claim(&mut self, input: &str, req: &ClaimRequest) -> Result<Claim>;
    /// Next-claim: the first of `ids` (task ids, best first) still ready and in
    /// `filter`, in one transaction; `None` when every one was lost or changed.
    fn claim_first_ready(
        &mut self,
        ids: &[&str],
        req: &ClaimRequest,
        filter: &Filter,
    ) -> Result<Option<Claim>>;
    /// Extends the holder's lease (never shortening it); with `successor`, passes the
    /// holding to that session under a new fence without releasing it.
    fn renew(
        &mut self,
        input: &str,
        holder: &Holder,
        successor: Option<&str>,
        lease: Duration,
    ) -> Result<Claim>;
    /// Takes over a lapsed claim, only under the exact fence the caller saw.
    fn takeover(&mut self, input: &str, t: &Takeover) -> Result<Claim>;
    /// Gives the task back; returns its id.
    fn release(&mut self, input: &str, holder: &Holder) -> Result<String>;
    /// Completes the task's phase (the claim is released with it).
    fn complete_phase(&mut self, input: &str, holder: Option<&Holder>) -> Result<PhaseOutcome>;
    /// Every claim, live and lapsed, oldest first.
    fn claims(&mut self) -> Result<Vec<Claim>>;
    /// The claim on one task, if any.
    fn claim_on(&mut self, input: &str) -> Result<Option<Claim>>;
    /// A task's ledger, oldest first.
    fn ledger(&mut self, input: &str) -> Result<Vec<LedgerEntry>>;

    /// A new steering item for `target`.
    fn steer(&mut self, target: &Target, text: &str, ttl: Duration) -> Result<Item>;
    /// Show: the items for `targets` (pending ones unless `all`).
    fn inbox(&mut self, targets: &[Target], all: bool) -> Result<Vec<Item>>;
    /// Counts one more showing of each item (`shown`, `last_shown`); never its state.
    fn mark_shown(&mut self, keys: &[String]) -> Result<()>;
    /// Every acknowledgment recorded for `key`, oldest first.
    fn acks_for(&mut self, key: &str) -> Result<Vec<AckRecord>>;
    /// A session as typed: a unique prefix of a session the store knows is that
    /// session; anything else is kept as typed.
    fn resolve_session(&mut self, typed: &str) -> Result<String>;
    /// Ack: applies directives from `source` to the items within `scope`.
    fn apply_acks_in(
        &mut self,
        directives: &[Directive],
        source: &str,
        scope: Scope<'_>,
    ) -> Result<Vec<Outcome>>;
    /// Where reading the transcript at `path` got to.
    fn transcript_checkpoint(&mut self, path: &str) -> Result<Option<Checkpoint>>;
    /// Checkpoint: the directives up to `at` applied and the checkpoint moved, at once.
    fn apply_transcript(
        &mut self,
        path: &str,
        at: Checkpoint,
        directives: &[Directive],
        writer: &[Target],
    ) -> Result<Vec<Outcome>>;
    /// The lanes' rows, by name.
    fn lanes(&mut self) -> Result<Vec<LaneRow>>;
    /// Change notification: a value that differs after another writer committed a
    /// change to steering items or claims (it may move for other commits too: SQLite's
    /// moves for any). Only this connection's values compare.
    fn change_token(&mut self) -> Result<i64>;
    /// Blocks until the change token differs from `seen` (at once if it already does)
    /// or `timeout` passes; returns the token then. PostgreSQL blocks on `LISTEN`;
    /// SQLite, which has no event across processes, looks at `data_version` every
    /// [`super::generation::LOOK_EVERY`].
    fn wait_change(&mut self, seen: i64, timeout: Duration) -> Result<i64>;

    /// The embedded store with every part, for a caller of a part not behind this
    /// interface yet; `None` on a backend that has only the interface. The seam's one
    /// admission that the interface is not whole: it shrinks as parts move behind it.
    fn full_store(&mut self) -> Option<&mut Store>;
}

/// Opens the authority at `loc`: the SQLite file (created and migrated as needed), or
/// a connection to the PostgreSQL server (its schema migrated as needed).
pub fn connect(loc: &Location, clock: Arc<dyn Clock>) -> Result<Box<dyn Authority>> {
    Ok(match loc {
        Location::Sqlite(path) => {
            if let Some(dir) = path.parent() {
                return Ok(Box::new(Store::open_dir(dir, clock)?));
            }
            Box::new(Store::open(path, clock)?)
        }
        Location::Postgres(url) => Box::new(super::pg::PgStore::connect(url)?),
    })
}

impl Authority for Store {
    fn describe(&self) -> String {
        self.path().display().to_string()
    }
    fn now(&mut self) -> Result<Micros> {
        Ok(Store::now(self))
    }
    fn add_task(&mut self, new: NewTask, depends: &[String]) -> Result<Task> {
        Store::add_task(self, new, depends)
    }
    fn task(&mut self, input: &str) -> Result<Task> {
        Store::task(self, input)
    }
    fn dependents(&mut self, input: &str) -> Result<Vec<String>> {
        Store::dependents(self, input)
    }
    fn short_ids(&mut self) -> Result<ShortIds> {
        Store::short_ids(self)
    }
    fn snapshot(&mut self) -> Result<Snapshot> {
        Store::snapshot(self)
    }
    fn ranking_snapshot(&mut self) -> Result<Snapshot> {
        Store::ranking_snapshot(self)
    }
    fn last_cell(&mut self, claimant: &str) -> Result<Option<Cell>> {
        Store::last_cell(self, claimant)
    }
    fn claim(&mut self, input: &str, req: &ClaimRequest) -> Result<Claim> {
        Store::claim(self, input, req)
    }
    fn claim_first_ready(
        &mut self,
        ids: &[&str],
        req: &ClaimRequest,
        filter: &Filter,
    ) -> Result<Option<Claim>> {
        Store::claim_first_ready(self, ids, req, filter)
    }
    fn renew(
        &mut self,
        input: &str,
        holder: &Holder,
        successor: Option<&str>,
        lease: Duration,
    ) -> Result<Claim> {
        Store::renew(self, input, holder, successor, lease)
    }
    fn takeover(&mut self, input: &str, t: &Takeover) -> Result<Claim> {
        Store::takeover(self, input, t)
    }
    fn release(&mut self, input: &str, holder: &Holder) -> Result<String> {
        Store::release(self, input, holder)
    }
    fn complete_phase(&mut self, input: &str, holder: Option<&Holder>) -> Result<PhaseOutcome> {
        Store::complete_phase(self, input, holder)
    }
    fn claims(&mut self) -> Result<Vec<Claim>> {
        Store::claims(self)
    }
    fn claim_on(&mut self, input: &str) -> Result<Option<Claim>> {
        Store::claim_on(self, input)
    }
    fn ledger(&mut self, input: &str) -> Result<Vec<LedgerEntry>> {
        Store::ledger(self, input)
    }
    fn steer(&mut self, target: &Target, text: &str, ttl: Duration) -> Result<Item> {
        Store::steer(self, target, text, ttl)
    }
    fn inbox(&mut self, targets: &[Target], all: bool) -> Result<Vec<Item>> {
        Store::inbox(self, targets, all)
    }
    fn mark_shown(&mut self, keys: &[String]) -> Result<()> {
        Store::mark_shown(self, keys)
    }
    fn acks_for(&mut self, key: &str) -> Result<Vec<AckRecord>> {
        Store::acks_for(self, key)
    }
    fn resolve_session(&mut self, typed: &str) -> Result<String> {
        Store::resolve_session(self, typed)
    }
    fn apply_acks_in(
        &mut self,
        directives: &[Directive],
        source: &str,
        scope: Scope<'_>,
    ) -> Result<Vec<Outcome>> {
        Store::apply_acks_in(self, directives, source, scope)
    }
    fn transcript_checkpoint(&mut self, path: &str) -> Result<Option<Checkpoint>> {
        Store::transcript_checkpoint(self, path)
    }
    fn apply_transcript(
        &mut self,
        path: &str,
        at: Checkpoint,
        directives: &[Directive],
        writer: &[Target],
    ) -> Result<Vec<Outcome>> {
        Store::apply_transcript(self, path, at, directives, writer)
    }
    fn lanes(&mut self) -> Result<Vec<LaneRow>> {
        Store::lanes(self)
    }
    fn change_token(&mut self) -> Result<i64> {
        Store::data_version(self)
    }
    fn wait_change(&mut self, seen: i64, timeout: Duration) -> Result<i64> {
        let deadline = std::time::Instant::now() + timeout;
        loop {
            let now = Store::data_version(self)?;
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if now != seen || left.is_zero() {
                return Ok(now);
            }
            std::thread::sleep(left.min(super::generation::LOOK_EVERY));
        }
    }
    fn full_store(&mut self) -> Option<&mut Store> {
        Some(self)
    }
}
