//! The lane's decisions as a state machine, with no I/O: what a running session is
//! doing and what the lane must do next ([`Session::step`]), and what follows a
//! session's end ([`after`]). The loop (`drive::drive`) only reads the world
//! (transcript, budgets, agent process, claim, screen: the [`Sense`]s this machine
//! [`Session::wants`]), feeds what it saw here as [`Event`]s with the time, and has
//! the [`Action`]s carried out; every transition is unit-tested below on made-up
//! instants, the way cargo-nextest splits its dispatcher from its executor.
//!
//! Invariants:
//! - The lane's reported state comes from the transcript: events mean working, a turn
//!   end (or the agent's text followed by [`QUIET_TURN_END`] of silence) means done
//!   with its turn (`waiting`), or `asking` when its last sentence is a question, or
//!   `errored` when it is the agent's API error; an open call of the agent's own
//!   ask-the-user tool is `asking`, of its sub-agent tool `subagent`; any other call
//!   open for [`PROMPT_QUIET`] with a permission prompt on the screen is `asking` (the
//!   screen is read for nothing else); `stall_after` of silence mid-turn is stalled.
//!   `note` says what the state is about (the question, the permission, the error).
//! - A claim taken over is told to the agent once and the agent stopped after
//!   [`LOST_GRACE`]; a claim released by the agent's own session (its phase done)
//!   stops the agent once its turn ended, or its transcript was never found, or after
//!   [`FINISH_GRACE`]. Neither is renewed again.
//! - Renewal is due every `renew` while the claim is ours; a refusal is fed back as
//!   what the claim is now.
//! - Steering is typed in only into an interactive (PTY) agent waiting for input whose
//!   claim is still ours and whose lane is not paused.
//! - Budgets are looked at while the agent's turn is over (and while paused): a crossed
//!   budget pauses the lane ([`Action::Pause`]: held, the agent left idle, its claim
//!   renewed, nothing typed in) until a raise resumes it; the operator's stop ends the
//!   session as the supervisor's stop would. An agent that exits while paused (a
//!   headless agent's turn ends so) ends its session only when the pause does, so
//!   one pause is one pause, however the agent runs. A claim that leaves the session
//!   or a supervisor that stops ends the pause first ([`Action::Resume`]), so the
//!   lane's row never keeps a pause that is over.

use super::{FINISH_GRACE, LOST_GRACE, QUIET_TURN_END};
use crate::store::LaneState;
use crate::transcript::turn::{self, CallKind, Turn};
use std::time::{Duration, Instant};

/// How long a call stays open with the transcript quiet before the screen is read
/// for a permission prompt.
pub(super) const PROMPT_QUIET: Duration = Duration::from_secs(1);

/// Why an agent is asking the operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Ask {
    /// Its turn ended on a question: steering typed in answers it.
    Question,
    /// A dialog of its own tool (a question with choices).
    Dialog,
    /// A permission prompt on its screen.
    Permission,
}

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

/// What the loop reads each tick, in [`Sense::ALL`]'s order, when the machine
/// [`Session::wants`] it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Sense {
    /// The agent's transcript ([`Event::Transcript`]).
    Transcript,
    /// The lane's and the task's token budgets ([`Event::Budget`]).
    Budget,
    /// Whether the agent process ended or the supervisor stops ([`Event::Exited`],
    /// [`Event::Stopping`]).
    Process,
    /// Who holds the claim ([`Event::Claim`]).
    Claim,
    /// The agent's screen ([`Event::Screen`]).
    Screen,
    /// Time passed ([`Event::Tick`]).
    Tick,
}

impl Sense {
    pub const ALL: [Sense; 6] = [
        Sense::Transcript,
        Sense::Budget,
        Sense::Process,
        Sense::Claim,
        Sense::Screen,
        Sense::Tick,
    ];
}

/// What a look at the budgets of the lane and its task found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Budget {
    Within,
    /// Crossed: why, as the lane's hold reason says it.
    Crossed(String),
    /// The operator stopped the lane at its budget.
    Stopped,
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
        /// Where the turn stands (open calls, last text), when the scan says.
        turn: Option<Turn>,
    },
    /// The agent's screen was read (see [`Session::wants_screen`]): the permission
    /// prompt it shows, if any.
    Screen(Option<&'static str>),
    Claim(Holding),
    /// The budgets were looked at.
    Budget(Budget),
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
    /// Hold the lane at its budget, for this reason.
    Pause(String),
    /// The pause is over: `raised` when by a raise (said in the ledger), else because
    /// the session ends or its claim left it.
    Resume { raised: bool },
    /// Record the operator's stop at the budget (the session then stops).
    StopForBudget,
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
    /// Silence mid-turn for this long is a stall.
    pub stall_after: Duration,
    /// An interactive agent whose profile delivers steering as messages: typed in
    /// while it works too, once it has written (its TUI queues the text).
    pub type_while_busy: bool,
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
    turn: Turn,
    /// Why the agent asks, while the state is `asking`.
    pub ask: Option<Ask>,
    /// What the state is about (the question, the permission, the sub-agent, the error).
    pub note: Option<String>,
    /// Why the lane is paused at its budget, while it is.
    paused: Option<String>,
    /// How the agent exited while paused: the session ends so once the pause ends.
    exited: Option<(String, bool)>,
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
            turn: Turn::default(),
            ask: None,
            note: None,
            paused: None,
            exited: None,
        }
    }

    /// Whether `sense` is worth reading at `now`.
    pub fn wants(&self, sense: Sense, now: Instant) -> bool {
        match sense {
            Sense::Transcript | Sense::Process | Sense::Tick => true,
            Sense::Budget => self.watches_claim() && (self.turn_over() || self.paused.is_some()),
            Sense::Claim => self.watches_claim(),
            Sense::Screen => self.wants_screen(now),
        }
    }

    /// The state the lane reports: held while paused at its budget.
    pub fn shown(&self) -> LaneState {
        if self.paused.is_some() {
            LaneState::Held
        } else {
            self.state
        }
    }

    /// The session is over with `action`; a pause ends first.
    fn end(&mut self, action: Action, out: &mut Vec<Action>) {
        self.resume(false, out);
        if !self.over {
            self.over = true;
            out.push(action);
        }
    }

    /// A pause ends (`raised`: by a raise); an exit seen meanwhile ends the session.
    fn resume(&mut self, raised: bool, out: &mut Vec<Action>) {
        if self.paused.take().is_none() {
            return;
        }
        out.push(Action::Resume { raised });
        if let Some((how, clean)) = self.exited.take() {
            self.over = true;
            out.push(Action::Over(End::Exited(how, clean)));
        }
    }

    /// Whether the agent's screen should be read now: a call is open, not a question
    /// or sub-agent, and the transcript has been quiet for [`PROMPT_QUIET`].
    pub fn wants_screen(&self, now: Instant) -> bool {
        (self.state == LaneState::Working
            || (self.state == LaneState::Asking && self.ask == Some(Ask::Permission)))
            && self
                .turn
                .waiting_on()
                .is_some_and(|c| c.kind() == CallKind::Other)
            && now.saturating_duration_since(self.last_event) >= PROMPT_QUIET
    }

    /// Whether the agent's turn is over (steering typed in starts its next one).
    pub fn turn_over(&self) -> bool {
        matches!(self.state, LaneState::Waiting | LaneState::Errored)
            || (self.state == LaneState::Asking && self.ask == Some(Ask::Question))
    }

    fn set(&mut self, state: LaneState, ask: Option<Ask>, note: Option<String>) {
        self.state = state;
        self.ask = ask;
        self.note = note;
    }

    /// The turn ended: done, asking on a question, or errored.
    fn end_turn(&mut self) {
        let text = self.turn.last_text.clone().unwrap_or_default();
        if text.trim_start().starts_with("API Error") {
            let first = text.lines().next().unwrap_or("").trim().to_string();
            self.set(LaneState::Errored, None, Some(first));
        } else if let Some(q) = turn::question(&text) {
            self.set(LaneState::Asking, Some(Ask::Question), Some(q));
        } else {
            self.set(LaneState::Waiting, None, None);
        }
    }

    /// Mid-turn: what its open calls say it waits on.
    fn mid_turn(&mut self) {
        match self.turn.waiting_on().map(|c| (c.kind(), c.describe(200))) {
            Some((CallKind::Question, what)) => {
                self.set(LaneState::Asking, Some(Ask::Dialog), Some(what))
            }
            Some((CallKind::Subagent, what)) => self.set(LaneState::Subagent, None, Some(what)),
            // A permission prompt stays until the screen or the transcript moves.
            _ if self.ask == Some(Ask::Permission) => {}
            _ => self.set(LaneState::Working, None, None),
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
                turn,
            } => {
                if events > 0 {
                    self.wrote = true;
                    self.last_event = now;
                    if self.silent_reported {
                        self.silent_reported = false;
                        out.push(Action::ClearSilentStart);
                    }
                }
                if let Some(t) = turn {
                    self.turn = t;
                }
                if events > 0 && self.ask == Some(Ask::Permission) {
                    // The transcript moved: the prompt was answered.
                    self.ask = None;
                }
                match turn_ended {
                    Some(true) => self.end_turn(),
                    Some(false) => self.mid_turn(),
                    None => {}
                }
                if let Some(t) = text_last {
                    self.text_last = t;
                }
            }
            Event::Screen(prompt) => match prompt {
                Some(p) if self.state == LaneState::Working => {
                    let what = self.turn.waiting_on().map(|c| c.describe(160));
                    let note = match what {
                        Some(w) => format!("permission prompt ({p}) for {w}"),
                        None => format!("permission prompt ({p})"),
                    };
                    self.set(LaneState::Asking, Some(Ask::Permission), Some(note));
                }
                None if self.ask == Some(Ask::Permission) => {
                    self.set(LaneState::Working, None, None)
                }
                _ => {}
            },
            Event::Claim(holding) => {
                if !self.watches_claim() {
                    return out;
                }
                match holding {
                    Holding::Ours => {}
                    Holding::Other(by) => {
                        out.push(Action::TellTakenOver(by.clone()));
                        self.lost = Some((now, by));
                        self.resume(false, &mut out);
                    }
                    Holding::Released => {
                        self.released_at = Some(now);
                        self.resume(false, &mut out);
                    }
                }
            }
            Event::Budget(Budget::Stopped) => {
                // The stop replaces the pause's hold reason: no resume.
                self.paused = None;
                out.push(Action::StopForBudget);
                self.end(Action::Stop(End::Stopping), &mut out);
            }
            Event::Budget(Budget::Crossed(why)) if self.paused.is_none() => {
                self.paused = Some(why.clone());
                out.push(Action::Pause(why));
            }
            Event::Budget(Budget::Within) => self.resume(true, &mut out),
            Event::Budget(Budget::Crossed(_)) => {}
            Event::Exited { how, clean } if self.paused.is_some() => {
                self.exited = Some((how, clean))
            }
            Event::Exited { how, clean } => {
                self.end(Action::Over(End::Exited(how, clean)), &mut out)
            }
            Event::Stopping => self.end(Action::Stop(End::Stopping), &mut out),
            Event::Delivered => {
                self.set(LaneState::Working, None, None);
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
            && self.turn.open.is_empty()
            && since(self.last_event) >= QUIET_TURN_END
        {
            self.end_turn();
        }
        if matches!(self.state, LaneState::Working | LaneState::Starting)
            && since(self.last_event) >= self.rules.stall_after
        {
            let note = self.turn.waiting_on().map(|c| {
                format!(
                    "{} with no transcript growth for {}s",
                    c.describe(160),
                    since(self.last_event).as_secs()
                )
            });
            self.set(LaneState::Stalled, None, note);
        }
        if let Some(at) = self.released_at {
            let turn_over = self.turn_over() || !found;
            if turn_over || since(at) >= FINISH_GRACE {
                self.end(Action::Stop(End::Finished), out);
                return;
            }
        }
        if let Some((at, by)) = &self.lost {
            if since(*at) >= LOST_GRACE {
                let end = End::Lost(by.clone());
                self.end(Action::Stop(end), out);
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
        let busy = self.wrote && matches!(self.state, LaneState::Working | LaneState::Stalled);
        let typeable = self.turn_over() || (self.rules.type_while_busy && busy);
        if typeable && self.rules.interactive && self.paused.is_none() {
            out.push(Action::Deliver);
        }
    }
}

mod after;
pub(super) use after::{
    after, between, handoff, hold, Backoff, BetweenNext, Handoff, HoldNext, Next, Renewer,
};

#[cfg(test)]
mod tests;
