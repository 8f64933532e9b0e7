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
//! - Steering items, acknowledgments and transcript checkpoints follow the SQLite
//!   store's rules ([`inbox`]); a committed change to steering or claims notifies
//!   `spice_changes`, which a waiter blocks on ([`notify`]).
//! - Usage and budgets follow the SQLite store's rules ([`usage`]); bed slots too
//!   ([`beds`]), reservations serialised by a lock on their table.
//! - The ledger's and acknowledgments' feeds hand out only rows no open transaction
//!   can still precede, so a watcher's `seq` cursor never skips a row ([`ledger`]);
//!   the conscience publishes a reminder once per maxim per epoch ([`conscience`]).
//!
//! - The operator's edits (modify, annotate, dependencies, a named phase, done,
//!   delete, import) follow the SQLite store's rules, the shared ones written once
//!   ([`crate::store::edits`], [`edits`], [`phases`]); a listing streams through
//!   portals ([`listing`]).
//!
//! - Phase flows (`spice task flow`) as on SQLite ([`phases`]).
//!
//! What belongs to a SQLite file (`spice store check`, `store restore`) has no
//! PostgreSQL side: the server's own tools do that there (refused in one line).

mod beds;
mod claims;
mod connect;
mod conscience;
mod edits;
mod generation;
mod inbox;
mod lanes;
mod leases;
mod ledger;
mod listing;
mod notify;
mod phases;
pub mod schema;
mod steps;
mod supervisors;
mod tasks;
mod tls;
mod usage;

pub(crate) use connect::check_url;

use super::authority::{Authority, Cell};
use super::location::Location;
use super::vocab::{Checkpoint, Directive, Filter};
use super::{
    AckRecord, BedSlot, Budget, BudgetRow, BudgetScope, BudgetState, Claim, ClaimRequest,
    ConscienceEntry, Generation, Holder, ImportReport, Item, LaneRow, LedgerEntry, ListFilter,
    Metered, NewStep, Outcome, PhaseOutcome, Proposal, Scope, SessionUsage, ShortIds, SlotRequest,
    Snapshot, Takeover, Target, TaskUpdate, Waited,
};
use super::{ClaimView, LaneTake, SupervisorRow};
use crate::clock::Micros;
use crate::error::{Error, Result};
use crate::task::taskwarrior::TwTask;
use crate::task::{NewTask, Status, Task};
use postgres::{Client, GenericClient, Statement};
use std::collections::HashMap;
use std::time::Duration;

/// A connection to the fleet's PostgreSQL authority.
pub struct PgStore {
    client: Client,
    /// The URL as given, to connect again after the server closed the connection.
    url: String,
    /// The URL without its password, for messages.
    at: String,
    prepared: Prepared,
    /// Whether this connection issued `LISTEN` ([`notify`]).
    listening: bool,
    /// Change notifications received since then: the change token.
    changes: i64,
    /// The claims last read for a next-claim, to read only what changed next time.
    seen: Option<tasks::SeenClaims>,
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
        let mut client = connect::client(url, &at)?;
        schema::migrate(&mut client, &at)?;
        Ok(PgStore {
            client,
            url: url.to_string(),
            at,
            prepared: Prepared::default(),
            listening: false,
            changes: 0,
            seen: None,
        })
    }

    /// A connection that works, as far as can be known without a round trip: one the
    /// server closed (a restart, an idle timeout, the network) is replaced before the
    /// next request. The new session has none of the old one's prepared statements or
    /// `LISTEN`; the change token moves, since changes may have been missed meanwhile.
    /// A request that met the closed connection itself has failed with
    /// [`Error::Unreachable`]: nothing is retried here, since a write whose reply was
    /// lost may have committed.
    fn live(&mut self) -> Result<()> {
        if !self.client.is_closed() {
            return Ok(());
        }
        let mut client = connect::client(&self.url, &self.at)?;
        schema::migrate(&mut client, &self.at)?;
        self.client = client;
        self.prepared = Prepared::default();
        self.listening = false;
        self.changes += 1;
        self.seen = None;
        Ok(())
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
        self.map_err(|e| {
            let msg = format!("failed {what} on {at}: {}", reason(&e));
            if transient(&e) {
                Error::Unreachable(msg)
            } else {
                Error::Other(msg)
            }
        })
    }
}

/// Whether `e` says the server is out of reach rather than that the request was
/// wrong: the connection closed or could not be made (an I/O error), or the server
/// said it is shutting down, starting up or cut the connection (SQLSTATE classes
/// 08 and 57P).
pub(super) fn transient(e: &postgres::Error) -> bool {
    if e.is_closed() {
        return true;
    }
    match e.as_db_error() {
        Some(db) => {
            let code = db.code().code();
            code.starts_with("08") || code.starts_with("57P")
        }
        None => {
            // The client's kinds show only in its words: I/O, a failed connect, a
            // closed connection, a timeout.
            let text = e.to_string();
            if [
                "error communicating with the server",
                "error connecting to server",
                "connection closed",
                "timeout waiting for server",
            ]
            .iter()
            .any(|k| text.starts_with(k))
            {
                return true;
            }
            let mut source = std::error::Error::source(e);
            while let Some(s) = source {
                if s.is::<std::io::Error>() {
                    return true;
                }
                source = s.source();
            }
            false
        }
    }
}

impl Authority for PgStore {
    fn describe(&self) -> String {
        self.at.clone()
    }
    fn quiet_reread(&self) -> Option<Duration> {
        Some(Duration::from_secs(1))
    }
    fn now(&mut self) -> Result<Micros> {
        self.live()?;
        let at = self.at.clone();
        let row = self
            .client
            .query_one("SELECT spice_now()", &[])
            .ctx("to read the server's clock", &at)?;
        Ok(row.get(0))
    }
    fn add_task(&mut self, new: NewTask, depends: &[String]) -> Result<Task> {
        self.live()?;
        tasks::add(self, new, depends)
    }
    fn task(&mut self, input: &str) -> Result<Task> {
        self.live()?;
        tasks::one(self, input)
    }
    fn dependents(&mut self, input: &str) -> Result<Vec<String>> {
        self.live()?;
        tasks::dependents(self, input)
    }
    fn short_ids(&mut self) -> Result<ShortIds> {
        self.live()?;
        tasks::short_ids(self)
    }
    fn snapshot(&mut self) -> Result<Snapshot> {
        self.live()?;
        tasks::snapshot(self)
    }
    fn last_cell(&mut self, claimant: &str) -> Result<Option<Cell>> {
        self.live()?;
        tasks::last_cell(self, claimant)
    }
    fn done_tasks(&mut self, limit: usize) -> Result<(usize, Vec<Task>)> {
        self.live()?;
        tasks::done(self, limit)
    }
    fn claim_view(&mut self, claimant: &str, have: Option<i64>) -> Result<ClaimView> {
        self.live()?;
        tasks::claim_view(self, claimant, have)
    }
    fn ranking_graph(&mut self) -> Result<(i64, Vec<Task>)> {
        self.live()?;
        tasks::ranking_graph(self)
    }
    fn keep_ranking(&mut self, graph: i64, data: &[u8]) -> Result<bool> {
        self.live()?;
        tasks::keep_ranking(self, graph, data)
    }
    fn claim(&mut self, input: &str, req: &ClaimRequest) -> Result<Claim> {
        self.live()?;
        claims::claim(self, input, req)
    }
    fn claim_first_ready(
        &mut self,
        ids: &[&str],
        req: &ClaimRequest,
        filter: &Filter,
    ) -> Result<Option<Claim>> {
        self.live()?;
        claims::claim_first_ready(self, ids, req, filter)
    }
    fn renew(
        &mut self,
        input: &str,
        holder: &Holder,
        successor: Option<&str>,
        lease: Duration,
    ) -> Result<Claim> {
        self.live()?;
        leases::renew(self, input, holder, successor, lease)
    }
    fn takeover(&mut self, input: &str, t: &Takeover) -> Result<Claim> {
        self.live()?;
        leases::takeover(self, input, t)
    }
    fn release(&mut self, input: &str, holder: &Holder) -> Result<String> {
        self.live()?;
        leases::release(self, input, holder)
    }
    fn complete_phase(&mut self, input: &str, holder: Option<&Holder>) -> Result<PhaseOutcome> {
        self.live()?;
        phases::complete_phase(self, input, holder)
    }
    fn claims(&mut self) -> Result<Vec<Claim>> {
        self.live()?;
        claims::all(self)
    }
    fn claim_on(&mut self, input: &str) -> Result<Option<Claim>> {
        self.live()?;
        claims::on(self, input)
    }
    fn ledger(&mut self, input: &str) -> Result<Vec<LedgerEntry>> {
        self.live()?;
        tasks::ledger(self, input)
    }
    fn steer(&mut self, target: &Target, text: &str, ttl: Duration) -> Result<Item> {
        self.live()?;
        inbox::steer(self, target, text, ttl)
    }
    fn inbox(&mut self, targets: &[Target], all: bool) -> Result<Vec<Item>> {
        self.live()?;
        inbox::inbox(self, targets, all)
    }
    fn mark_shown(&mut self, keys: &[String]) -> Result<()> {
        self.live()?;
        inbox::mark_shown(self, keys)
    }
    fn acks_for(&mut self, key: &str) -> Result<Vec<AckRecord>> {
        self.live()?;
        inbox::acks_for(self, key)
    }
    fn resolve_session(&mut self, typed: &str) -> Result<String> {
        self.live()?;
        inbox::resolve_session(self, typed)
    }
    fn apply_acks_in(
        &mut self,
        directives: &[Directive],
        source: &str,
        scope: Scope<'_>,
    ) -> Result<Vec<Outcome>> {
        self.live()?;
        inbox::apply_acks_in(self, directives, source, scope)
    }
    fn transcript_checkpoint(&mut self, path: &str) -> Result<Option<Checkpoint>> {
        self.live()?;
        inbox::transcript_checkpoint(self, path)
    }
    fn apply_transcript(
        &mut self,
        path: &str,
        at: Checkpoint,
        directives: &[Directive],
        writer: &[Target],
    ) -> Result<Vec<Outcome>> {
        self.live()?;
        inbox::apply_transcript(self, path, at, directives, writer)
    }
    fn lanes(&mut self) -> Result<Vec<LaneRow>> {
        self.live()?;
        lanes::all(self)
    }
    fn change_token(&mut self) -> Result<i64> {
        self.live()?;
        PgStore::change_token(self)
    }
    fn wait_change(&mut self, seen: i64, timeout: Duration) -> Result<i64> {
        self.live()?;
        PgStore::wait_change(self, seen, timeout)
    }
    fn lane(&mut self, name: &str) -> Result<Option<LaneRow>> {
        self.live()?;
        lanes::one(self, name)
    }
    fn put_lane(&mut self, lane: &LaneRow) -> Result<LaneRow> {
        self.live()?;
        lanes::put(self, lane, None)
    }
    fn put_lane_as(&mut self, lane: &LaneRow, runner: i64) -> Result<LaneRow> {
        self.live()?;
        lanes::put(self, lane, Some(runner))
    }
    fn lift_hold(&mut self, name: &str) -> Result<()> {
        self.live()?;
        lanes::lift_hold(self, name)
    }
    fn hold(&mut self, input: &str, holder: &Holder, lease: Duration, verb: &str) -> Result<Claim> {
        self.live()?;
        leases::hold(self, input, holder, lease, verb)
    }
    fn set_claim_worktree(&mut self, input: &str, holder: &Holder, worktree: &str) -> Result<()> {
        self.live()?;
        leases::set_worktree(self, input, holder, worktree)
    }
    fn note(
        &mut self,
        task_id: &str,
        kind: &str,
        actor: &str,
        detail: serde_json::Value,
    ) -> Result<()> {
        self.live()?;
        ledger::note(self, task_id, kind, actor, detail)
    }
    fn ledger_since(&mut self, seq: i64, limit: usize) -> Result<Vec<LedgerEntry>> {
        self.live()?;
        ledger::ledger_since(self, seq, limit)
    }
    fn ledger_of_kinds(
        &mut self,
        task_id: &str,
        kinds: &[&str],
        limit: usize,
    ) -> Result<Vec<LedgerEntry>> {
        self.live()?;
        ledger::ledger_of_kinds(self, task_id, kinds, limit)
    }
    fn ledger_recent_of_kinds(&mut self, kinds: &[&str], limit: usize) -> Result<Vec<LedgerEntry>> {
        self.live()?;
        ledger::ledger_recent_of_kinds(self, kinds, limit)
    }
    fn ledger_head(&mut self) -> Result<i64> {
        self.live()?;
        ledger::ledger_head(self)
    }
    fn acks_head(&mut self) -> Result<i64> {
        self.live()?;
        ledger::acks_head(self)
    }
    fn acks_since(&mut self, seq: i64, limit: usize) -> Result<Vec<(i64, AckRecord)>> {
        self.live()?;
        ledger::acks_since(self, seq, limit)
    }
    fn item(&mut self, key: &str) -> Result<Item> {
        self.live()?;
        inbox::item(self, key)
    }
    fn session_lane(&mut self, session: &str) -> Result<Option<String>> {
        self.live()?;
        ledger::session_lane(self, session)
    }
    fn generation(&mut self) -> Result<Generation> {
        self.live()?;
        generation::generation(self)
    }
    fn next_awakening(&mut self) -> Result<Option<Micros>> {
        self.live()?;
        generation::next_awakening(self)
    }
    fn wait_for_change(
        &mut self,
        seen: Generation,
        until: Option<Micros>,
        give_up: &dyn Fn() -> bool,
    ) -> Result<Waited> {
        self.live()?;
        generation::wait_for_change(self, seen, until, give_up)
    }
    // Nothing to hand back: the rows a look at the graph read were dropped with its
    // result, and the pages it touched are the server's shared buffers, not this
    // connection's (SQLite's page cache lives in the connection; PostgreSQL's does not).
    fn release_memory(&mut self) -> Result<()> {
        self.live()?;
        Ok(())
    }
    fn register_supervisor(
        &mut self,
        host: &str,
        pid: u32,
        started: u64,
        lease: Duration,
    ) -> Result<i64> {
        self.live()?;
        supervisors::register(self, host, pid, started, lease)
    }
    fn supervisor_heartbeat(&mut self, id: i64, lease: Duration) -> Result<()> {
        self.live()?;
        supervisors::heartbeat(self, id, lease)
    }
    fn end_supervisor(&mut self, id: i64) -> Result<()> {
        self.live()?;
        supervisors::end(self, id)
    }
    fn supervisors(&mut self) -> Result<Vec<SupervisorRow>> {
        self.live()?;
        supervisors::all(self)
    }
    fn take_lane(&mut self, name: &str, supervisor: i64, hosts: &[String]) -> Result<LaneTake> {
        self.live()?;
        supervisors::take_lane(self, name, supervisor, hosts)
    }
    fn usage_carry(&mut self, path: &str) -> Result<Option<String>> {
        self.live()?;
        usage::usage_carry(self, path)
    }
    fn apply_transcript_metered(
        &mut self,
        path: &str,
        at: Checkpoint,
        directives: &[Directive],
        writer: &[Target],
        metered: &Metered,
    ) -> Result<Vec<Outcome>> {
        self.live()?;
        usage::apply_transcript_metered(self, path, at, directives, writer, metered)
    }
    fn session_usage(&mut self) -> Result<Vec<SessionUsage>> {
        self.live()?;
        usage::session_usage(self)
    }
    fn budget_state(
        &mut self,
        lane: &str,
        task: Option<&str>,
        lane_floor: Option<u64>,
    ) -> Result<BudgetState> {
        self.live()?;
        usage::budget_state(self, lane, task, lane_floor)
    }
    fn budget_raise(&mut self, scope: &BudgetScope, tokens: u64) -> Result<Budget> {
        self.live()?;
        usage::budget_put(self, scope, tokens, true)
    }
    fn budget_set(&mut self, scope: &BudgetScope, tokens: u64) -> Result<Budget> {
        self.live()?;
        usage::budget_put(self, scope, tokens, false)
    }
    fn budget_stop(&mut self, scope: &BudgetScope) -> Result<()> {
        self.live()?;
        usage::budget_stop(self, scope)
    }
    fn budget_stopped(&mut self, scope: &BudgetScope, by: Option<(&str, i64)>) -> Result<()> {
        self.live()?;
        usage::budget_stopped(self, scope, by)
    }
    fn budgets(&mut self) -> Result<Vec<BudgetRow>> {
        self.live()?;
        usage::budgets(self)
    }
    fn reserve_bed_slot(
        &mut self,
        req: &SlotRequest<'_>,
    ) -> Result<std::result::Result<BedSlot, Vec<u16>>> {
        self.live()?;
        beds::reserve(self, req)
    }
    fn bed_slots(&mut self) -> Result<Vec<BedSlot>> {
        self.live()?;
        beds::live(self)
    }
    fn bed_slot(&mut self, worktree: &str) -> Result<Option<BedSlot>> {
        self.live()?;
        beds::of(self, worktree)
    }
    fn conscience_epoch(&mut self, lane: &str) -> Result<i64> {
        self.live()?;
        conscience::epoch(self, lane)
    }
    fn conscience_compacted(&mut self, lane: &str, n: u64) -> Result<i64> {
        self.live()?;
        conscience::compacted(self, lane, n)
    }
    fn conscience_fired(&mut self, lane: &str, maxim: &str, epoch: i64) -> Result<Option<String>> {
        self.live()?;
        conscience::fired(self, lane, maxim, epoch)
    }
    fn conscience_note(&mut self, s: &NewStep<'_>) -> Result<()> {
        self.live()?;
        conscience::note(self, s)
    }
    fn conscience_publish(
        &mut self,
        s: &NewStep<'_>,
        text: &str,
        ttl: Duration,
    ) -> Result<Option<String>> {
        self.live()?;
        conscience::publish(self, s, text, ttl)
    }
    fn conscience_log(&mut self, lane: Option<&str>, limit: usize) -> Result<Vec<ConscienceEntry>> {
        self.live()?;
        conscience::log(self, lane, limit)
    }
    fn expire_reminders(&mut self, lane: &str, why: &str) -> Result<Vec<String>> {
        self.live()?;
        conscience::expire_reminders(self, lane, why)
    }
    fn proposal(&mut self, theme: &str) -> Result<Option<Proposal>> {
        self.live()?;
        conscience::proposal(self, theme)
    }
    fn record_proposal(&mut self, theme: &str, task_id: &str) -> Result<bool> {
        self.live()?;
        conscience::record_proposal(self, theme, task_id)
    }
    fn each_task(
        &mut self,
        filter: &ListFilter,
        f: &mut dyn FnMut(Task) -> Result<()>,
    ) -> Result<()> {
        self.live()?;
        listing::each_task(self, filter, f)
    }
    fn modify(&mut self, input: &str, up: &TaskUpdate) -> Result<Task> {
        self.live()?;
        edits::modify(self, input, up)
    }
    fn annotate(&mut self, input: &str, text: &str) -> Result<Task> {
        self.live()?;
        edits::annotate(self, input, text)
    }
    fn change_deps(&mut self, input: &str, add: &[String], remove: &[String]) -> Result<()> {
        self.live()?;
        edits::change_deps(self, input, add, remove)
    }
    fn flow(&mut self, project: Option<&str>) -> Result<Vec<String>> {
        self.live()?;
        phases::flow(self, project)
    }
    fn set_flow(&mut self, project: Option<&str>, phases: &[String]) -> Result<()> {
        self.live()?;
        phases::set_flow(self, project, phases)
    }
    fn set_phase(&mut self, input: &str, phase: &str, holder: Option<&Holder>) -> Result<()> {
        self.live()?;
        phases::set_phase(self, input, phase, holder)
    }
    fn done(&mut self, input: &str, holder: Option<&Holder>) -> Result<String> {
        self.live()?;
        phases::finish(self, input, holder, Status::Completed)
    }
    fn delete(&mut self, input: &str, holder: Option<&Holder>) -> Result<String> {
        self.live()?;
        phases::finish(self, input, holder, Status::Deleted)
    }
    fn import(&mut self, tasks: &[TwTask], source: &str) -> Result<ImportReport> {
        self.live()?;
        edits::import(self, tasks, source)
    }
}
