//! The PostgreSQL backend of [`Authority`]: one server shared by the supervisors of
//! several hosts, so a fleet outgrows one machine without a protocol of its own.
//!
//! Invariants (the same contract as SQLite's, by other means):
//! - Claims, renewals, takeovers and releases are one transaction each, serialised by
//!   row locks (`SELECT … FOR UPDATE`), never by advisory locks, which belong to a
//!   connection and break under poolers. Next-claim locks its candidates with
//!   `FOR UPDATE SKIP LOCKED`, so claimers pass each other instead of queueing on the
//!   best row, and inserts with `ON CONFLICT DO NOTHING`: a task claimed meanwhile is
//!   a lost race, and the claimer moves on to its next candidate.
//! - A fence is drawn from the sequence `fences`, one per holding; every write on a
//!   claim after the check carries `WHERE fence = $f`, so a holding that changed
//!   between the check and the write changes nothing.
//! - Leases are judged by the server's clock (`spice_now()`, read after the locks are
//!   taken, as SQLite reads its clock after the write lock): a host with a skewed
//!   clock neither stretches nor shortens a lease.
//! - The schema is versioned (`spice_schema`); a newer one is refused before anything
//!   is written ([`schema`]).
//! - Round trips are the cost under load (each one waits for the server's process to
//!   be scheduled): the claim path's statements are prepared once per connection
//!   ([`Prepared`]) and each part of a snapshot is one query.
//!
//! Not on PostgreSQL yet (each says so in one line): steering, acknowledgments,
//! transcript checkpoints, lane rows, change notification (`LISTEN/NOTIFY`), flows
//! other than the default, annotations, imports.

mod claims;
pub mod schema;
mod tasks;
mod tls;

pub(crate) use tls::check_url;

use super::authority::{Authority, Cell};
use super::location::{not_on_postgres, Location};
use super::vocab::{Checkpoint, Directive, Filter};
use super::{
    Claim, ClaimRequest, Holder, Item, LaneRow, LedgerEntry, Outcome, PhaseOutcome, Scope,
    ShortIds, Snapshot, Takeover, Target,
};
use crate::clock::Micros;
use crate::error::{Error, Result};
use crate::task::{NewTask, Task};
use postgres::{Client, GenericClient, Statement};
use std::collections::HashMap;
use std::time::Duration;

/// A connection to the fleet's PostgreSQL authority.
pub struct PgStore {
    client: Client,
    /// The URL without its password, for messages.
    at: String,
    prepared: Prepared,
}

/// Statements prepared on this connection, by their text: a long-lived connection (a
/// supervisor, a claimer) sends each hot query's text once, then only its parameters,
/// one round trip instead of two. Prepared statements outlive a rolled-back
/// transaction (they belong to the session), so one prepared inside a transaction
/// stays valid.
#[derive(Default)]
pub(super) struct Prepared(HashMap<&'static str, Statement>);

impl Prepared {
    /// The statement for `sql`, prepared through `c` the first time it is asked for.
    pub(super) fn get(
        &mut self,
        c: &mut impl GenericClient,
        sql: &'static str,
        at: &str,
    ) -> Result<Statement> {
        if let Some(st) = self.0.get(sql) {
            return Ok(st.clone());
        }
        let st = c.prepare(sql).ctx("to prepare a statement", at)?;
        self.0.insert(sql, st.clone());
        Ok(st)
    }
}

impl PgStore {
    /// Connects to `url` and migrates its schema as needed (a newer one is refused).
    pub fn connect(url: &str) -> Result<PgStore> {
        let at = Location::Postgres(url.to_string()).describe();
        let mut client = tls::client(url, &at)?;
        schema::migrate(&mut client, &at)?;
        Ok(PgStore {
            client,
            at,
            prepared: Prepared::default(),
        })
    }

    fn unsupported<T>(&self, what: &str) -> Result<T> {
        Err(not_on_postgres(what, &self.at))
    }
}

/// What went wrong, in the server's words when it gave any.
pub(super) fn reason(e: &postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => match db.detail() {
            Some(d) => format!("{} ({d})", db.message()),
            None => db.message().to_string(),
        },
        None => e.to_string(),
    }
}

/// Attaches "what failed" (and where) to a PostgreSQL error.
pub(super) trait PgContext<T> {
    fn ctx(self, what: &str, at: &str) -> Result<T>;
}

impl<T> PgContext<T> for std::result::Result<T, postgres::Error> {
    fn ctx(self, what: &str, at: &str) -> Result<T> {
        self.map_err(|e| Error::Other(format!("failed {what} on {at}: {}", reason(&e))))
    }
}

impl Authority for PgStore {
    fn describe(&self) -> String {
        self.at.clone()
    }
    fn now(&mut self) -> Result<Micros> {
        let at = self.at.clone();
        let row = self
            .client
            .query_one("SELECT spice_now()", &[])
            .ctx("to read the server's clock", &at)?;
        Ok(row.get(0))
    }
    fn add_task(&mut self, new: NewTask, depends: &[String]) -> Result<Task> {
        tasks::add(self, new, depends)
    }
    fn task(&mut self, input: &str) -> Result<Task> {
        tasks::one(self, input)
    }
    fn dependents(&mut self, input: &str) -> Result<Vec<String>> {
        tasks::dependents(self, input)
    }
    fn short_ids(&mut self) -> Result<ShortIds> {
        tasks::short_ids(self)
    }
    fn snapshot(&mut self) -> Result<Snapshot> {
        tasks::snapshot(self)
    }
    fn last_cell(&mut self, claimant: &str) -> Result<Option<Cell>> {
        tasks::last_cell(self, claimant)
    }
    fn claim(&mut self, input: &str, req: &ClaimRequest) -> Result<Claim> {
        claims::claim(self, input, req)
    }
    fn claim_first_ready(
        &mut self,
        ids: &[&str],
        req: &ClaimRequest,
        filter: &Filter,
    ) -> Result<Option<Claim>> {
        claims::claim_first_ready(self, ids, req, filter)
    }
    fn renew(
        &mut self,
        input: &str,
        holder: &Holder,
        successor: Option<&str>,
        lease: Duration,
    ) -> Result<Claim> {
        claims::renew(self, input, holder, successor, lease)
    }
    fn takeover(&mut self, input: &str, t: &Takeover) -> Result<Claim> {
        claims::takeover(self, input, t)
    }
    fn release(&mut self, input: &str, holder: &Holder) -> Result<String> {
        claims::release(self, input, holder)
    }
    fn complete_phase(&mut self, input: &str, holder: Option<&Holder>) -> Result<PhaseOutcome> {
        claims::complete_phase(self, input, holder)
    }
    fn claims(&mut self) -> Result<Vec<Claim>> {
        claims::all(self)
    }
    fn claim_on(&mut self, input: &str) -> Result<Option<Claim>> {
        claims::on(self, input)
    }
    fn ledger(&mut self, input: &str) -> Result<Vec<LedgerEntry>> {
        tasks::ledger(self, input)
    }
    fn steer(&mut self, _: &Target, _: &str, _: Duration) -> Result<Item> {
        self.unsupported("steering")
    }
    fn inbox(&mut self, _: &[Target], _: bool) -> Result<Vec<Item>> {
        self.unsupported("the steering inbox")
    }
    fn apply_acks_in(&mut self, _: &[Directive], _: &str, _: Scope<'_>) -> Result<Vec<Outcome>> {
        self.unsupported("acknowledging steering")
    }
    fn transcript_checkpoint(&mut self, _: &str) -> Result<Option<Checkpoint>> {
        self.unsupported("transcript checkpoints")
    }
    fn apply_transcript(
        &mut self,
        _: &str,
        _: Checkpoint,
        _: &[Directive],
        _: &[Target],
    ) -> Result<Vec<Outcome>> {
        self.unsupported("transcript checkpoints")
    }
    fn lanes(&mut self) -> Result<Vec<LaneRow>> {
        self.unsupported("lane rows")
    }
    fn change_token(&mut self) -> Result<i64> {
        self.unsupported("change notification")
    }
    fn full_store(&mut self) -> Option<&mut super::Store> {
        None
    }
}
