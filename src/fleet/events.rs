//! Lane events: what happened to each lane, one event at a time, for the operator
//! watching `spice fleet up`. They are derived from what the lanes already write to
//! the store, so the lane loop knows nothing of them and cannot be slowed by them.
//!
//! Where each event comes from:
//!
//! | event | source |
//! | --- | --- |
//! | `claimed`, `successor`, `launched`, `exited`, `compacted`, `held` | the ledger entry of that kind |
//! | `budget` | a ledger `budget` entry: a lane paused at its token budget, raised, or stopped |
//! | `delivered` | a ledger `delivered` entry (typed into an idle agent), a `launched` entry's `steering_in_brief` (at the top of its brief), or the first showing of an item neither names (`spice exec` or the hook) |
//! | `worktree_wait` | a ledger `worktree_wait` entry: the task's branch is still in use by the lane of its previous phase, and the claim waits for it (a hand-off, not an error) |
//! | `worktree_ready` | a lane's claim that records a worktree it did not record before |
//! | `acked`, `refused` | an acknowledgment record with that effect (a NACK with a reason refuses) |
//! | `phase_done` | a ledger `phase_completed` (or `done`) entry by a lane's session |
//! | `released` | a ledger `released` entry that no phase completion wrote |
//! | `hook` | a ledger `stage_hook` entry (a repository's stage hook ran: stage, outcome) |
//! | `waiting` (done with its turn), `asking` (needs the operator), `subagent`, `idle`, `stalled`, `stopped` | a lane row whose state became that (`asking` again when the question changes); the detail says what it is about |
//! | `error` | also a lane row whose state became `errored` (the agent's API failed) |
//! | `error` | a lane row whose `last_error` became a new message |
//! | `needs` | an entry of the operator's queue no lane state says (`fleet::needs::beyond_lanes`: a stale claim, a refused merge, a maxim proposal) that was not in it at the last look (every 2 s) |
//!
//! Invariants:
//! - [`Observer`] reads from a cursor (ledger and acknowledgment `seq`, the lane rows
//!   and showing counts it saw last), so each event is emitted once, and the events of
//!   one poll in the order of their store times.
//! - It writes nothing; it re-reads only when another connection committed
//!   ([`crate::store::Store::data_version`]), or while a showing waits [`SETTLE`] to be told apart
//!   from a delivery the ledger is about to name.
//! - A row shows only its latest state: a state held for less than one poll (say a
//!   turn that ended and restarted within it) is not reported.

use crate::clock::Micros;
use serde::Serialize;

pub mod logfile;
mod observer;

pub use observer::{Observer, SETTLE};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EventKind {
    Claimed,
    /// The claim waits for the task's branch, still in use by its previous phase's lane.
    WorktreeWait,
    WorktreeReady,
    Launched,
    Waiting,
    Asking,
    Subagent,
    Delivered,
    Acked,
    Refused,
    Compacted,
    PhaseDone,
    Released,
    Hook,
    Recycled,
    Exited,
    Successor,
    Held,
    Budget,
    Idle,
    Stalled,
    Error,
    Stopped,
    /// Something no lane state says entered the operator's queue (`fleet::needs`): a
    /// stale claim, a refused merge, a maxim proposal.
    Needs,
}

impl EventKind {
    pub const ALL: [EventKind; 24] = [
        EventKind::Claimed,
        EventKind::WorktreeWait,
        EventKind::WorktreeReady,
        EventKind::Launched,
        EventKind::Waiting,
        EventKind::Asking,
        EventKind::Subagent,
        EventKind::Delivered,
        EventKind::Acked,
        EventKind::Refused,
        EventKind::Compacted,
        EventKind::PhaseDone,
        EventKind::Released,
        EventKind::Hook,
        EventKind::Recycled,
        EventKind::Exited,
        EventKind::Successor,
        EventKind::Held,
        EventKind::Budget,
        EventKind::Idle,
        EventKind::Stalled,
        EventKind::Error,
        EventKind::Stopped,
        EventKind::Needs,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::Claimed => "claimed",
            EventKind::WorktreeWait => "worktree_wait",
            EventKind::WorktreeReady => "worktree_ready",
            EventKind::Launched => "launched",
            EventKind::Waiting => "waiting",
            EventKind::Asking => "asking",
            EventKind::Subagent => "subagent",
            EventKind::Delivered => "delivered",
            EventKind::Acked => "acked",
            EventKind::Refused => "refused",
            EventKind::Compacted => "compacted",
            EventKind::PhaseDone => "phase_done",
            EventKind::Released => "released",
            EventKind::Hook => "hook",
            EventKind::Recycled => "recycled",
            EventKind::Exited => "exited",
            EventKind::Successor => "successor",
            EventKind::Held => "held",
            EventKind::Budget => "budget",
            EventKind::Idle => "idle",
            EventKind::Stalled => "stalled",
            EventKind::Error => "error",
            EventKind::Stopped => "stopped",
            EventKind::Needs => "needs",
        }
    }

    pub fn parse(s: &str) -> Option<EventKind> {
        EventKind::ALL.into_iter().find(|k| k.as_str() == s)
    }
}

impl std::fmt::Display for EventKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One thing that happened to a lane.
#[derive(Debug, Clone, PartialEq)]
pub struct LaneEvent {
    /// When the store recorded it.
    pub at: Micros,
    pub lane: String,
    pub event: EventKind,
    /// The task's handle.
    pub task: Option<String>,
    pub session: Option<String>,
    /// The steering keys it concerns (delivered, acked, refused).
    pub keys: Vec<String>,
    /// One line for a person (it may hold the agent's words: sanitise before printing).
    pub detail: String,
}

#[cfg(test)]
mod tests;
