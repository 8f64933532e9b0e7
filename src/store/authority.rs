//! The store's narrow interface, [`Authority`]: what a caller above the store may ask
//! of whichever backend holds the fleet's state (claim, next-claim, renew, takeover,
//! release, phase, steer, show, ack, checkpoint, ledger, lanes, change notification,
//! and the operator's edits: list, modify, annotate, dependencies, done, delete, import).
//!
//! Two backends implement it: [`Store`] (SQLite, embedded, the default; by delegation,
//! in `sqlite.rs`) and
//! [`super::pg::PgStore`] (PostgreSQL, one server for the supervisors of several hosts).
//! [`connect`] picks one from a [`Location`]; callers hold a `Box<dyn Authority>` and
//! never learn which. Every part is behind it; what belongs to a SQLite file alone
//! (`store check`, `store restore`) is refused on PostgreSQL in one line naming the
//! server's tools ([`super::location::not_on_postgres`]); nothing falls back to the
//! other backend.
//!
//! Invariants every backend keeps (the contract `tests/it/store_claims.rs` runs against
//! both): one claim per task, taken only while the task is ready, inside the
//! transaction that writes it; a fresh fence per holding; a lapsed lease is not free
//! work, and is taken over only under the exact fence seen; every write on a claim
//! comes from its holder (and its fence, when given); leases are judged by the
//! authority's own clock ([`Authority::now`]), never the caller's.

use super::location::Location;
use super::vocab::{Checkpoint, Directive, Filter};
use super::{
    AckRecord, BedSlot, Budget, BudgetRow, BudgetScope, BudgetState, Claim, ClaimRequest,
    ClaimView, ConscienceEntry, Generation, Holder, ImportReport, Item, LaneRow, LedgerEntry,
    ListFilter, Metered, NewStep, Outcome, PhaseOutcome, Proposal, Scope, SessionUsage, ShortIds,
    SlotRequest, Snapshot, Store, Takeover, Target, TaskUpdate, Waited,
};
use super::{LaneTake, SupervisorRow};
use crate::clock::{Clock, Micros};
use crate::error::Result;
use crate::task::taskwarrior::TwTask;
use crate::task::{NewTask, Task};
use std::sync::Arc;
use std::time::Duration;

/// A (project, phase) cell, as the ledger remembers a claimant's last one.
pub type Cell = (Option<String>, String);

/// The fleet's authority, whichever backend holds it. Ids are as typed (stamps,
/// prefixes, handles, uuids) unless a method says otherwise.
pub trait Authority: Send {
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
    /// The shortest unique prefixes of `ids` among every task id, for a listing of a
    /// few tasks: by default from every id ([`Authority::short_ids`]).
    fn short_ids_of(&mut self, ids: &[&str]) -> Result<ShortIds> {
        let _ = ids;
        self.short_ids()
    }
    /// Open tasks and every claim, from one consistent read, with its time.
    fn snapshot(&mut self) -> Result<Snapshot>;
    /// The cell of the task `claimant` last came to hold, if any.
    fn last_cell(&mut self, claimant: &str) -> Result<Option<Cell>>;
    /// The newest `limit` completed tasks (by end, else last change, newest first) and
    /// how many there are; a backend may leave their tags, dependencies and
    /// annotations empty.
    fn done_tasks(&mut self, limit: usize) -> Result<(usize, Vec<Task>)>;
    /// What a next-claim for `claimant` ranks from, read at one moment: the graph's
    /// generation, every claim, the clock and the claimant's last cell, with the
    /// ranking kept for that generation unless it is `have` (the caller holds it).
    fn claim_view(&mut self, claimant: &str, have: Option<i64>) -> Result<ClaimView>;
    /// The open tasks as a ranking reads them (uuid, title and body may be empty),
    /// with the graph's generation they are at.
    fn ranking_graph(&mut self) -> Result<(i64, Vec<Task>)>;
    /// Keeps `data` as the ranking of the graph's generation `graph`, unless the graph
    /// has moved on; a cache, so a backend may decline (busy): says whether it kept it.
    fn keep_ranking(&mut self, graph: i64, data: &[u8]) -> Result<bool>;

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
    /// How long a reader of the ledger's and acknowledgments' feeds and of lane rows
    /// may go on an unchanged [`Authority::change_token`] before it must look anyway:
    /// `None` when the token moves for every commit (SQLite). PostgreSQL's moves only
    /// for steering, claims and the graph, and its feeds hold back a committed row
    /// while an earlier transaction is open, so a watcher looks again at least this
    /// often.
    fn quiet_reread(&self) -> Option<Duration> {
        None
    }

    // The supervisor's parts: what a fleet's lanes, observer and console keep.
    // Lane rows.
    /// One lane's row, if the lane ever ran.
    fn lane(&mut self, name: &str) -> Result<Option<LaneRow>>;
    /// Writes a lane's row (its state, session, task, hold); returns it as stored.
    fn put_lane(&mut self, lane: &LaneRow) -> Result<LaneRow>;
    /// [`Authority::put_lane`] by supervisor `runner`: refused (a conflict, nothing
    /// written) unless that supervisor runs the lane and was neither superseded nor
    /// ended, so a supervisor whose lane another host took cannot overwrite its row.
    fn put_lane_as(&mut self, lane: &LaneRow, runner: i64) -> Result<LaneRow>;
    /// The operator lifts a lane's hold; refused for an unknown lane, one not held, and
    /// one paused at its token budget.
    fn lift_hold(&mut self, name: &str) -> Result<()>;

    // Claims.
    /// A renewal before the holder acts outside the store (a merge): refused in `verb`'s
    /// words unless `holder` holds the task; the lease extended to at least `lease`.
    fn hold(&mut self, input: &str, holder: &Holder, lease: Duration, verb: &str) -> Result<Claim>;
    /// Records the worktree the holder's claim works in.
    fn set_claim_worktree(&mut self, input: &str, holder: &Holder, worktree: &str) -> Result<()>;

    // The ledger.
    /// Appends an entry to a task's ledger.
    fn note(
        &mut self,
        task_id: &str,
        kind: &str,
        actor: &str,
        detail: serde_json::Value,
    ) -> Result<()>;
    /// Ledger entries after `seq`, oldest first, at most `limit`.
    fn ledger_since(&mut self, seq: i64, limit: usize) -> Result<Vec<LedgerEntry>>;
    /// A task's newest ledger entries of `kinds`, at most `limit`.
    fn ledger_of_kinds(
        &mut self,
        task_id: &str,
        kinds: &[&str],
        limit: usize,
    ) -> Result<Vec<LedgerEntry>>;
    /// The newest ledger entries of `kinds` over every task, at most `limit`.
    fn ledger_recent_of_kinds(&mut self, kinds: &[&str], limit: usize) -> Result<Vec<LedgerEntry>>;
    /// The ledger's last sequence number (0 when empty).
    fn ledger_head(&mut self) -> Result<i64>;

    // Acknowledgments.
    /// The last acknowledgment's sequence number (0 when none).
    fn acks_head(&mut self) -> Result<i64>;
    /// Acknowledgments after `seq`, oldest first, at most `limit`.
    fn acks_since(&mut self, seq: i64, limit: usize) -> Result<Vec<(i64, AckRecord)>>;

    // Steering.
    /// One steering item by key.
    fn item(&mut self, key: &str) -> Result<Item>;
    /// The lane a session last ran under, if the store knows it.
    fn session_lane(&mut self, session: &str) -> Result<Option<String>>;

    // The generation.
    /// The graph-and-claims generation: moves when what ranking reads changes.
    fn generation(&mut self) -> Result<Generation>;
    /// The earliest wait date still ahead among open tasks.
    fn next_awakening(&mut self) -> Result<Option<Micros>>;
    /// Blocks until the generation differs from `seen`, the authority's clock reaches
    /// `until`, or `give_up` says so (asked at every look).
    fn wait_for_change(
        &mut self,
        seen: Generation,
        until: Option<Micros>,
        give_up: &dyn Fn() -> bool,
    ) -> Result<Waited>;
    /// Hands back what a look at the whole graph left cached on this connection.
    fn release_memory(&mut self) -> Result<()>;

    // Supervisors (`store::supervisors`): one per host, each lane run by one of them.
    /// Registers a supervisor starting on `host` (its pid and the process's start time)
    /// with a heartbeat lease; its id. Supersedes the host's earlier rows in force.
    fn register_supervisor(
        &mut self,
        host: &str,
        pid: u32,
        started: u64,
        lease: Duration,
    ) -> Result<i64>;
    /// Extends the supervisor's lease (never shortening it); refused when its row
    /// ended or was superseded (another supervisor took one of its lanes).
    fn supervisor_heartbeat(&mut self, id: i64, lease: Duration) -> Result<()>;
    /// The supervisor ends itself: its lanes are free, its host not lost.
    fn end_supervisor(&mut self, id: i64) -> Result<()>;
    /// Every supervisor row, oldest first, each judged live by the authority's clock.
    fn supervisors(&mut self) -> Result<Vec<SupervisorRow>>;
    /// In one transaction, makes `supervisor` the runner of lane `name` if its host is
    /// among `hosts` (empty: any) and no other live supervisor runs it; else says who
    /// runs it, or that the host may not. A runner whose heartbeat lapsed is taken
    /// from (and superseded); the lane's claims still need an explicit takeover.
    fn take_lane(&mut self, name: &str, supervisor: i64, hosts: &[String]) -> Result<LaneTake>;

    // Usage.
    /// What the reading of `path` remembered when its checkpoint last moved.
    fn usage_carry(&mut self, path: &str) -> Result<Option<String>>;
    /// [`Authority::apply_transcript`] with the token usage read up to `at`, at once.
    fn apply_transcript_metered(
        &mut self,
        path: &str,
        at: Checkpoint,
        directives: &[Directive],
        writer: &[Target],
        metered: &Metered,
    ) -> Result<Vec<Outcome>>;
    /// Every session's metered usage.
    fn session_usage(&mut self) -> Result<Vec<SessionUsage>>;

    // Budgets.
    /// Where a lane (and its task) stands against their budgets.
    fn budget_state(
        &mut self,
        lane: &str,
        task: Option<&str>,
        lane_floor: Option<u64>,
    ) -> Result<BudgetState>;
    /// Raises a budget by `tokens`.
    fn budget_raise(&mut self, scope: &BudgetScope, tokens: u64) -> Result<Budget>;
    /// Sets a budget to `tokens`.
    fn budget_set(&mut self, scope: &BudgetScope, tokens: u64) -> Result<Budget>;
    /// Asks the lane working under `scope` to stop (the claim kept); a raise clears it.
    fn budget_stop(&mut self, scope: &BudgetScope) -> Result<()>;
    /// Clears a stop asked for (the lane acted on it). With `by` (a lane and the
    /// supervisor running it), only while that supervisor still runs the lane, as
    /// [`Authority::put_lane_as`]: a conflict, nothing cleared, when another took it,
    /// so the stop stays for the lane's new runner to act on.
    fn budget_stopped(&mut self, scope: &BudgetScope, by: Option<(&str, i64)>) -> Result<()>;
    /// Every budget.
    fn budgets(&mut self) -> Result<Vec<BudgetRow>>;

    // Bed slots.
    /// Reserves a test-bed slot, or names the slots in use.
    fn reserve_bed_slot(
        &mut self,
        req: &SlotRequest<'_>,
    ) -> Result<std::result::Result<BedSlot, Vec<u16>>>;
    /// Every reserved bed slot.
    fn bed_slots(&mut self) -> Result<Vec<BedSlot>>;
    /// The bed slot a worktree holds, if any.
    fn bed_slot(&mut self, worktree: &str) -> Result<Option<BedSlot>>;

    // The conscience.
    /// A lane's compaction epoch.
    fn conscience_epoch(&mut self, lane: &str) -> Result<i64>;
    /// Counts `n` compactions of the lane's context; returns its epoch now.
    fn conscience_compacted(&mut self, lane: &str, n: u64) -> Result<i64>;
    /// The key of the reminder `maxim` published for `lane` in `epoch`, if it did.
    fn conscience_fired(&mut self, lane: &str, maxim: &str, epoch: i64) -> Result<Option<String>>;
    /// Records a conscience step.
    fn conscience_note(&mut self, s: &NewStep<'_>) -> Result<()>;
    /// Publishes a reminder (a steering item and the `published` step) unless the maxim
    /// already did in this epoch; its key.
    fn conscience_publish(
        &mut self,
        s: &NewStep<'_>,
        text: &str,
        ttl: Duration,
    ) -> Result<Option<String>>;
    /// The conscience's newest steps.
    fn conscience_log(&mut self, lane: Option<&str>, limit: usize) -> Result<Vec<ConscienceEntry>>;
    /// Expires a lane's pending reminders; their keys.
    fn expire_reminders(&mut self, lane: &str, why: &str) -> Result<Vec<String>>;
    /// The proposal filed for `theme`, if one was.
    fn proposal(&mut self, theme: &str) -> Result<Option<Proposal>>;
    /// Records that `task_id` is the proposal for `theme` (false: one was already).
    fn record_proposal(&mut self, theme: &str, task_id: &str) -> Result<bool>;

    // The operator's edits of tasks.
    /// Calls `f` with each task matching `filter`, oldest id first, complete with its
    /// tags, dependencies and annotations, all from one read: one task held at a time,
    /// however many there are.
    fn each_task(
        &mut self,
        filter: &ListFilter,
        f: &mut dyn FnMut(Task) -> Result<()>,
    ) -> Result<()>;
    /// Changes a task's descriptive fields (the operator's: no claim is consulted).
    fn modify(&mut self, input: &str, up: &TaskUpdate) -> Result<Task>;
    /// Adds a note to a task.
    fn annotate(&mut self, input: &str, text: &str) -> Result<Task>;
    /// Makes a task wait on each of `add` and stop waiting on each of `remove`, in one
    /// transaction; an edge that would close a cycle refuses all of it, naming the cycle.
    fn change_deps(&mut self, input: &str, add: &[String], remove: &[String]) -> Result<()>;
    /// The phase flow of `project` (its own, else the default one).
    fn flow(&mut self, project: Option<&str>) -> Result<Vec<String>>;
    /// Sets the flow of `project` (`None`: the default for projects without one);
    /// refused if open tasks sit in a phase the new flow drops.
    fn set_flow(&mut self, project: Option<&str>, phases: &[String]) -> Result<()>;
    /// Moves a task to `phase` of its flow (only its holder may, while it is claimed).
    fn set_phase(&mut self, input: &str, phase: &str, holder: Option<&Holder>) -> Result<()>;
    /// Marks an open task completed, whatever its phase, releasing its claim (only its
    /// holder may, while it is claimed); its id.
    fn done(&mut self, input: &str, holder: Option<&Holder>) -> Result<String>;
    /// Marks an open task deleted (kept, so an export still carries it), as
    /// [`Authority::done`] completes it.
    fn delete(&mut self, input: &str, holder: Option<&Holder>) -> Result<String>;
    /// Imports a Taskwarrior export (`source` names it in messages) in one
    /// transaction: all of it or none of it.
    fn import(&mut self, tasks: &[TwTask], source: &str) -> Result<ImportReport>;
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
