//! What the lane does between sessions, decided with no I/O: what follows a
//! session's end ([`after`]), the wait between two headless turns ([`between`]), a
//! crash-loop hold ([`hold`]), a worktree another lane still uses ([`handoff`]), the
//! back-off after a worktree could not be prepared ([`Backoff`]), and when a renewal
//! is due in every loop that holds a claim ([`Renewer`]).

use super::{End, Holding};
use crate::fleet::crash_loop::CrashLoop;
use std::time::{Duration, Instant};

/// What follows a session's end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(in crate::fleet::lane) enum Next {
    /// The claim left the session's hands (or the supervisor stops): the lane moves on.
    Done,
    /// A headless agent ended its turn: wait for steering to start the next one.
    BetweenTurns,
    /// The agent died with the claim still ours: a successor continues it.
    Successor,
    /// It died a third time within the crash window: hold the lane this long, then
    /// a successor.
    Hold(Duration),
}

/// The transition after a session ended as `end`: `ours` whether the claim is still
/// the session's, `headless` whether the agent runs one process per turn.
pub(in crate::fleet::lane) fn after(
    end: &End,
    ours: bool,
    headless: bool,
    crashes: &mut CrashLoop,
    now: Instant,
) -> Next {
    match end {
        End::Stopping | End::Finished | End::Lost(_) => Next::Done,
        End::Exited(..) if !ours => Next::Done,
        End::Exited(_, true) if headless => Next::BetweenTurns,
        End::Exited(..) => match crashes.death(now) {
            Some(hold) => Next::Hold(hold),
            None => Next::Successor,
        },
    }
}

/// What a headless session between turns does on what it saw (the claim, and whether
/// steering it was not yet given at the top of a brief waits): `None` waits on.
pub(in crate::fleet::lane) fn between(
    holding: &Holding,
    fresh_steering: bool,
) -> Option<BetweenNext> {
    match holding {
        Holding::Other(by) => Some(BetweenNext::Lost(by.clone())),
        Holding::Released => Some(BetweenNext::Over),
        Holding::Ours if fresh_steering => Some(BetweenNext::Turn),
        Holding::Ours => None,
    }
}

/// What ends the wait between two headless turns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(in crate::fleet::lane) enum BetweenNext {
    /// Steering waits: the next turn.
    Turn,
    /// The claim was taken over by this claimant.
    Lost(String),
    /// The claim ended (its phase completed, released).
    Over,
}

/// What a crash-loop hold does on what it saw: `until` (store micros) passed or the
/// operator lifted it ends it; a refused renewal ends it with the claim lost.
pub(in crate::fleet::lane) fn hold(
    now: i64,
    until: i64,
    lifted: bool,
    renewal: Option<&Holding>,
) -> HoldNext {
    match renewal {
        Some(Holding::Other(by)) => HoldNext::Lost(by.clone()),
        Some(Holding::Released) => HoldNext::Lost("nobody (the claim ended)".into()),
        _ if lifted || now >= until => HoldNext::Over,
        _ => HoldNext::Wait,
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(in crate::fleet::lane) enum HoldNext {
    Wait,
    /// The hold ended (its time passed, or lifted): a successor.
    Over,
    /// Taken over meanwhile.
    Lost(String),
}

/// Preparing a worktree, given where the task's branch is checked out (`None`:
/// nowhere else; `Some(true)`: the operator's main work tree) and who, if anyone,
/// still works in that other worktree.
pub(in crate::fleet::lane) fn handoff(checked_out: Option<bool>, user: Option<&str>) -> Handoff {
    match (checked_out, user) {
        (None, _) => Handoff::Make,
        // The operator's checkout is never touched: making the worktree fails with
        // git's reason.
        (Some(true), _) => Handoff::Make,
        (Some(false), Some(u)) => Handoff::Wait(u.to_string()),
        (Some(false), None) => Handoff::Free,
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(in crate::fleet::lane) enum Handoff {
    /// Make (or reuse) the worktree now.
    Make,
    /// Hold the claim and wait: this one still works in the other worktree.
    Wait(String),
    /// Nobody works there: free the branch from it, then make ours.
    Free,
}

/// The pause after a worktree could not be prepared: doubling from `first` up to
/// `max`, back to `first` once one was.
#[derive(Debug, Clone, Copy)]
pub(in crate::fleet::lane) struct Backoff {
    first: Duration,
    max: Duration,
    now: Duration,
}

impl Backoff {
    pub fn new(first: Duration, max: Duration) -> Backoff {
        Backoff {
            first,
            max,
            now: first,
        }
    }
    /// The pause to take now; the next one is twice as long.
    pub fn failed(&mut self) -> Duration {
        let pause = self.now;
        self.now = (self.now * 2).min(self.max);
        pause
    }
    /// The pause a failure now would take.
    pub fn next(&self) -> Duration {
        self.now
    }
    pub fn succeeded(&mut self) {
        self.now = self.first;
    }
}

/// When a renewal is due: one renewer for every loop that holds a claim (a running
/// session, between headless turns, a crash-loop hold, waiting for a worktree).
#[derive(Debug, Clone, Copy)]
pub(in crate::fleet::lane) struct Renewer {
    every: Duration,
    last: Instant,
}

impl Renewer {
    pub fn new(every: Duration, now: Instant) -> Renewer {
        Renewer { every, last: now }
    }

    /// True (and counted as done) when a renewal is due at `now`.
    pub fn due(&mut self, now: Instant) -> bool {
        if now.saturating_duration_since(self.last) >= self.every {
            self.last = now;
            true
        } else {
            false
        }
    }
}
