//! The lane's decisions as a state machine, with no I/O: what a running session is
//! doing and what the lane must do next ([`Session::step`]), and what follows a
//! session's end ([`after`]). The loop in `session.rs` only reads the world
//! (transcript, claim, agent process), feeds what it saw here as [`Event`]s with the
//! time, and carries out the [`Action`]s; every transition is unit-tested below on
//! made-up instants, the way cargo-nextest splits its dispatcher from its executor.
//!
//! Invariants:
//! - The lane's reported state comes from the transcript: events mean working, a turn
//!   end (or the agent's text followed by [`QUIET_TURN_END`] of silence) means waiting
//!   for input, [`STALL_AFTER`] of silence mid-turn means stalled.
//! - A claim taken over is told to the agent once and the agent stopped after
//!   [`LOST_GRACE`]; a claim released by the agent's own session (its phase done)
//!   stops the agent once its turn ended, or its transcript was never found, or after
//!   [`FINISH_GRACE`]. Neither is renewed again.
//! - Renewal is due every `renew` while the claim is ours; a refusal is fed back as
//!   what the claim is now.
//! - Steering is typed in only into an interactive (PTY) agent waiting for input whose
//!   claim is still ours.

use super::{FINISH_GRACE, LOST_GRACE, QUIET_TURN_END, STALL_AFTER};
use crate::fleet::hold::CrashLoop;
use crate::store::LaneState;
use std::time::{Duration, Instant};

/// How a session ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum End {
    /// The agent exited by itself: how, and whether cleanly (code 0).
    Exited(String, bool),
    /// Its claim was released by its own session (phase completed); the agent stopped.
    Finished,
    /// Someone else holds the claim now.
    Lost(String),
    /// The supervisor is stopping; the claim stays leased for a successor.
    Stopping,
}

/// What the claim is, as last read (or as a refused renewal says).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Holding {
    Ours,
    /// Held by this claimant now.
    Other(String),
    /// Nobody holds it (the agent's session completed its phase or released it).
    Released,
}

/// What the loop saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Event {
    /// The transcript was read: how many events, whether they end (or begin) a turn,
    /// whether the agent's text came last.
    Transcript {
        events: u64,
        turn_ended: Option<bool>,
        text_last: Option<bool>,
    },
    Claim(Holding),
    /// The agent process ended.
    Exited {
        how: String,
        clean: bool,
    },
    /// The supervisor is stopping.
    Stopping,
    /// Steering was typed into the waiting agent.
    Delivered,
    /// Time passed; `found`: whether the session's transcript has been found.
    Tick {
        found: bool,
    },
}

/// What the lane must do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Action {
    /// Say the agent has written nothing `start_timeout` after its launch.
    ReportSilentStart,
    /// The agent wrote: that report no longer holds.
    ClearSilentStart,
    /// Renew the claim (fenced).
    Renew,
    /// Tell the agent (a steering item) that this claimant took its claim over.
    TellTakenOver(String),
    /// Type pending steering into the agent (it waits for input).
    Deliver,
    /// Stop the agent; the session ends so.
    Stop(End),
    /// The session is over: the agent ended by itself.
    Over(End),
}

/// The fixed rules of one session.
#[derive(Debug, Clone, Copy)]
pub(super) struct Rules {
    pub start_timeout: Duration,
    pub renew: Duration,
    /// An interactive agent under a PTY (steering can be typed in).
    pub interactive: bool,
    /// The profile names a transcript (so silence since launch means something).
    pub has_transcript: bool,
}

/// One running session, as the lane knows it.
#[derive(Debug, Clone)]
pub(super) struct Session {
    pub state: LaneState,
    /// Whether the agent wrote to its transcript since its launch.
    pub wrote: bool,
    rules: Rules,
    launched: Instant,
    last_event: Instant,
    last_renew: Instant,
    text_last: bool,
    silent_reported: bool,
    released_at: Option<Instant>,
    lost: Option<(Instant, String)>,
    over: bool,
}

impl Session {
    /// A session whose agent was launched at `now`.
    pub fn new(rules: Rules, now: Instant) -> Session {
        Session {
            state: LaneState::Starting,
            wrote: false,
            rules,
            launched: now,
            last_event: now,
            last_renew: now,
            text_last: false,
            silent_reported: false,
            released_at: None,
            lost: None,
            over: false,
        }
    }

    /// Whether who holds the claim is still worth reading (neither lost nor released).
    pub fn watches_claim(&self) -> bool {
        self.lost.is_none() && self.released_at.is_none()
    }

    /// The transition for `event` at `now`, and what to do.
    pub fn step(&mut self, event: Event, now: Instant) -> Vec<Action> {
        let mut out = Vec::new();
        if self.over {
            return out;
        }
        match event {
            Event::Transcript {
                events,
                turn_ended,
                text_last,
            } => {
                if events > 0 {
                    self.wrote = true;
                    self.last_event = now;
                    if self.silent_reported {
                        self.silent_reported = false;
                        out.push(Action::ClearSilentStart);
                    }
                }
                match turn_ended {
                    Some(true) => self.state = LaneState::Waiting,
                    Some(false) => self.state = LaneState::Working,
                    None => {}
                }
                if let Some(t) = text_last {
                    self.text_last = t;
                }
            }
            Event::Claim(holding) => {
                if !self.watches_claim() {
                    return out;
                }
                match holding {
                    Holding::Ours => {}
                    Holding::Other(by) => {
                        out.push(Action::TellTakenOver(by.clone()));
                        self.lost = Some((now, by));
                    }
                    Holding::Released => self.released_at = Some(now),
                }
            }
            Event::Exited { how, clean } => {
                self.over = true;
                out.push(Action::Over(End::Exited(how, clean)));
            }
            Event::Stopping => {
                self.over = true;
                out.push(Action::Stop(End::Stopping));
            }
            Event::Delivered => {
                self.state = LaneState::Working;
                self.last_event = now;
            }
            Event::Tick { found } => self.tick(found, now, &mut out),
        }
        out
    }

    fn tick(&mut self, found: bool, now: Instant, out: &mut Vec<Action>) {
        let since = |t: Instant| now.saturating_duration_since(t);
        if !self.wrote
            && !self.silent_reported
            && self.rules.has_transcript
            && since(self.launched) >= self.rules.start_timeout
        {
            self.silent_reported = true;
            out.push(Action::ReportSilentStart);
        }
        if self.state == LaneState::Working
            && self.text_last
            && since(self.last_event) >= QUIET_TURN_END
        {
            self.state = LaneState::Waiting;
        }
        if matches!(self.state, LaneState::Working | LaneState::Starting)
            && since(self.last_event) >= STALL_AFTER
        {
            self.state = LaneState::Stalled;
        }
        if let Some(at) = self.released_at {
            let turn_over = self.state == LaneState::Waiting || !found;
            if turn_over || since(at) >= FINISH_GRACE {
                self.over = true;
                out.push(Action::Stop(End::Finished));
                return;
            }
        }
        if let Some((at, by)) = &self.lost {
            if since(*at) >= LOST_GRACE {
                self.over = true;
                out.push(Action::Stop(End::Lost(by.clone())));
            }
            return;
        }
        if self.released_at.is_some() {
            return;
        }
        if since(self.last_renew) >= self.rules.renew {
            self.last_renew = now;
            out.push(Action::Renew);
        }
        if self.state == LaneState::Waiting && self.rules.interactive {
            out.push(Action::Deliver);
        }
    }
}

/// What follows a session's end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Next {
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
pub(super) fn after(
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
pub(super) fn between(holding: &Holding, fresh_steering: bool) -> Option<BetweenNext> {
    match holding {
        Holding::Other(by) => Some(BetweenNext::Lost(by.clone())),
        Holding::Released => Some(BetweenNext::Over),
        Holding::Ours if fresh_steering => Some(BetweenNext::Turn),
        Holding::Ours => None,
    }
}

/// What ends the wait between two headless turns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum BetweenNext {
    /// Steering waits: the next turn.
    Turn,
    /// The claim was taken over by this claimant.
    Lost(String),
    /// The claim ended (its phase completed, released).
    Over,
}

/// What a crash-loop hold does on what it saw: `until` (store micros) passed or the
/// operator lifted it ends it; a refused renewal ends it with the claim lost.
pub(super) fn hold(now: i64, until: i64, lifted: bool, renewal: Option<&Holding>) -> HoldNext {
    match renewal {
        Some(Holding::Other(by)) => HoldNext::Lost(by.clone()),
        Some(Holding::Released) => HoldNext::Lost("nobody (the claim ended)".into()),
        _ if lifted || now >= until => HoldNext::Over,
        _ => HoldNext::Wait,
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum HoldNext {
    Wait,
    /// The hold ended (its time passed, or lifted): a successor.
    Over,
    /// Taken over meanwhile.
    Lost(String),
}

/// Preparing a worktree, given where the task's branch is checked out (`None`:
/// nowhere else; `Some(true)`: the operator's main work tree) and who, if anyone,
/// still works in that other worktree.
pub(super) fn handoff(checked_out: Option<bool>, user: Option<&str>) -> Handoff {
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
pub(super) enum Handoff {
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
pub(super) struct Backoff {
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
pub(super) struct Renewer {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fleet::hold::HOLD_FIRST;

    const S: Duration = Duration::from_secs(1);

    fn rules(interactive: bool) -> Rules {
        Rules {
            start_timeout: 60 * S,
            renew: 3600 * S,
            interactive,
            has_transcript: true,
        }
    }

    /// A session launched at `t0`, and a clock reading `t0 + secs`.
    fn session(interactive: bool) -> (Session, impl Fn(u64) -> Instant) {
        let t0 = Instant::now();
        (Session::new(rules(interactive), t0), move |s: u64| {
            t0 + Duration::from_secs(s)
        })
    }

    fn events(n: u64, turn_ended: Option<bool>, text_last: Option<bool>) -> Event {
        Event::Transcript {
            events: n,
            turn_ended,
            text_last,
        }
    }

    const TICK: Event = Event::Tick { found: true };

    #[test]
    fn a_silent_start_is_reported_once_and_cleared_by_the_first_event() {
        let (mut s, at) = session(true);
        assert_eq!(s.step(TICK, at(59)), []);
        assert_eq!(s.step(TICK, at(60)), [Action::ReportSilentStart]);
        assert_eq!(s.step(TICK, at(61)), [], "reported once");
        assert_eq!(s.state, LaneState::Starting);
        assert_eq!(
            s.step(events(2, Some(false), Some(false)), at(62)),
            [Action::ClearSilentStart]
        );
        assert_eq!(s.state, LaneState::Working);
        assert!(s.wrote);
    }

    #[test]
    fn no_transcript_in_the_profile_means_no_silent_start_report() {
        let t0 = Instant::now();
        let mut s = Session::new(
            Rules {
                has_transcript: false,
                ..rules(true)
            },
            t0,
        );
        assert_eq!(s.step(TICK, t0 + 120 * S), []);
    }

    #[test]
    fn a_turn_end_means_waiting_and_steering_is_typed_into_an_interactive_agent() {
        let (mut s, at) = session(true);
        s.step(events(3, Some(false), None), at(1));
        assert_eq!(s.step(TICK, at(2)), []);
        s.step(events(1, Some(true), Some(true)), at(3));
        assert_eq!(s.state, LaneState::Waiting);
        assert_eq!(s.step(TICK, at(4)), [Action::Deliver]);
        s.step(Event::Delivered, at(4));
        assert_eq!(s.state, LaneState::Working);
        assert_eq!(s.step(TICK, at(5)), []);
    }

    #[test]
    fn a_headless_agent_is_never_typed_to() {
        let (mut s, at) = session(false);
        s.step(events(1, Some(true), None), at(1));
        assert_eq!(s.step(TICK, at(2)), []);
    }

    #[test]
    fn text_followed_by_quiet_ends_the_turn_and_long_silence_is_a_stall() {
        let (mut s, at) = session(true);
        s.step(events(1, Some(false), Some(true)), at(1));
        s.step(TICK, at(5));
        assert_eq!(s.state, LaneState::Working, "4 s of quiet is not enough");
        s.step(TICK, at(6));
        assert_eq!(s.state, LaneState::Waiting);

        let (mut s, at) = session(true);
        s.step(events(1, Some(false), Some(false)), at(1));
        s.step(TICK, at(1 + 599));
        assert_eq!(s.state, LaneState::Working);
        s.step(TICK, at(1 + 600));
        assert_eq!(s.state, LaneState::Stalled);
    }

    #[test]
    fn renewal_is_due_every_renew_interval_while_the_claim_is_ours() {
        let t0 = Instant::now();
        let at = |secs: u64| t0 + Duration::from_secs(secs);
        let rules = Rules {
            renew: 30 * S,
            ..rules(false)
        };
        let mut s = Session::new(rules, t0);
        s.step(events(1, Some(false), None), at(1));
        assert_eq!(s.step(TICK, at(29)), []);
        assert_eq!(s.step(TICK, at(30)), [Action::Renew]);
        assert_eq!(s.step(TICK, at(31)), []);
        assert_eq!(s.step(TICK, at(60)), [Action::Renew]);
    }

    #[test]
    fn a_takeover_is_told_once_and_the_agent_stopped_after_the_grace() {
        let (mut s, at) = session(true);
        s.step(events(1, Some(false), None), at(1));
        assert_eq!(
            s.step(Event::Claim(Holding::Other("op".into())), at(2)),
            [Action::TellTakenOver("op".into())]
        );
        assert!(!s.watches_claim());
        assert_eq!(s.step(Event::Claim(Holding::Other("x".into())), at(3)), []);
        // Never renewed again, never typed to, stopped after LOST_GRACE.
        assert_eq!(s.step(TICK, at(11)), []);
        assert_eq!(s.step(TICK, at(12)), [Action::Stop(End::Lost("op".into()))]);
        assert_eq!(s.step(TICK, at(13)), [], "over");
    }

    #[test]
    fn a_released_claim_stops_the_agent_once_its_turn_ended_or_after_the_grace() {
        let (mut s, at) = session(true);
        s.step(events(1, Some(false), None), at(1));
        s.step(Event::Claim(Holding::Released), at(2));
        assert_eq!(s.step(TICK, at(3)), [], "mid-turn: let it finish");
        s.step(events(1, Some(true), None), at(4));
        assert_eq!(s.step(TICK, at(4)), [Action::Stop(End::Finished)]);

        let (mut s, at) = session(true);
        s.step(events(1, Some(false), None), at(1));
        s.step(Event::Claim(Holding::Released), at(2));
        assert_eq!(s.step(TICK, at(31)), []);
        assert_eq!(s.step(TICK, at(32)), [Action::Stop(End::Finished)]);

        // Its transcript never found: nothing can say its turn ended.
        let (mut s, at) = session(true);
        s.step(Event::Claim(Holding::Released), at(1));
        assert_eq!(
            s.step(Event::Tick { found: false }, at(1)),
            [Action::Stop(End::Finished)]
        );
    }

    #[test]
    fn an_exit_or_a_stopping_supervisor_ends_the_session() {
        let (mut s, at) = session(true);
        assert_eq!(
            s.step(
                Event::Exited {
                    how: "exit 3".into(),
                    clean: false
                },
                at(1)
            ),
            [Action::Over(End::Exited("exit 3".into(), false))]
        );
        assert_eq!(s.step(TICK, at(100)), []);
        let (mut s, at) = session(true);
        assert_eq!(
            s.step(Event::Stopping, at(1)),
            [Action::Stop(End::Stopping)]
        );
    }

    #[test]
    fn after_a_session_a_headless_turn_waits_a_death_succeeds_and_three_hold() {
        let t0 = Instant::now();
        let mut c = CrashLoop::default();
        let died = End::Exited("signal 9".into(), false);
        let turn = End::Exited("exit 0".into(), true);
        assert_eq!(after(&turn, true, true, &mut c, t0), Next::BetweenTurns);
        assert_eq!(after(&turn, true, false, &mut c, t0), Next::Successor);
        assert_eq!(after(&died, true, false, &mut c, t0 + S), Next::Successor);
        assert_eq!(
            after(&died, true, false, &mut c, t0 + 2 * S),
            Next::Hold(HOLD_FIRST)
        );
        assert_eq!(
            after(&died, false, false, &mut c, t0),
            Next::Done,
            "not ours"
        );
        for end in [End::Finished, End::Lost("x".into()), End::Stopping] {
            assert_eq!(after(&end, true, true, &mut c, t0), Next::Done);
        }
    }

    #[test]
    fn between_turns_steering_starts_a_turn_and_a_claim_gone_ends_the_wait() {
        assert_eq!(between(&Holding::Ours, false), None);
        assert_eq!(between(&Holding::Ours, true), Some(BetweenNext::Turn));
        assert_eq!(
            between(&Holding::Other("op".into()), true),
            Some(BetweenNext::Lost("op".into()))
        );
        assert_eq!(between(&Holding::Released, true), Some(BetweenNext::Over));
    }

    #[test]
    fn a_hold_ends_when_its_time_passes_when_lifted_or_when_taken_over() {
        assert_eq!(hold(10, 20, false, None), HoldNext::Wait);
        assert_eq!(hold(10, 20, false, Some(&Holding::Ours)), HoldNext::Wait);
        assert_eq!(hold(20, 20, false, None), HoldNext::Over);
        assert_eq!(hold(10, 20, true, None), HoldNext::Over);
        assert_eq!(
            hold(10, 20, true, Some(&Holding::Other("op".into()))),
            HoldNext::Lost("op".into()),
            "taken over wins over lifted"
        );
        assert!(matches!(
            hold(10, 20, false, Some(&Holding::Released)),
            HoldNext::Lost(_)
        ));
    }

    #[test]
    fn a_branch_in_another_lanes_worktree_is_waited_for_then_freed() {
        assert_eq!(handoff(None, None), Handoff::Make);
        assert_eq!(
            handoff(Some(false), Some("lane core's agent")),
            Handoff::Wait("lane core's agent".into())
        );
        assert_eq!(handoff(Some(false), None), Handoff::Free);
        assert_eq!(handoff(Some(true), None), Handoff::Make, "git refuses it");
    }

    #[test]
    fn the_backoff_doubles_to_its_cap_and_resets() {
        let mut b = Backoff::new(S, 5 * S);
        let pauses: Vec<u64> = (0..5).map(|_| b.failed().as_secs()).collect();
        assert_eq!(pauses, [1, 2, 4, 5, 5]);
        b.succeeded();
        assert_eq!(b.next(), S);
    }

    #[test]
    fn the_renewer_is_due_once_per_interval() {
        let t0 = Instant::now();
        let mut r = Renewer::new(10 * S, t0);
        assert!(!r.due(t0 + 9 * S));
        assert!(r.due(t0 + 10 * S));
        assert!(!r.due(t0 + 19 * S));
        assert!(r.due(t0 + 25 * S));
    }
}
