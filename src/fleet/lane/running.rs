//! The real world of a running session ([`SessionIo`] for `drive::drive`): the
//! agent under its PTY, the transcript it writes, the store's claim, budgets and
//! inbox. Reading a sense turns what it finds into an event (and does the
//! bookkeeping the finding asks for: the conscience hears the transcript, the ledger
//! keeps keyless answers and compactions); carrying out an action touches the agent,
//! the store and the lane's row.
//!
//! Invariants:
//! - The claim is re-read only when another connection committed (the store's change
//!   token moved): the lane's own writes never change who holds it.
//! - The store out of reach mid-session is not an error: the agent goes on, and the
//!   read or write is tried again on a later tick (`Lane::through_outage`).
//! - Each steering item is typed into the agent at most once per session (`pasted`),
//!   but for one typed while the agent worked (`deliver = "message"`) that is still
//!   pending [`RETYPE_AFTER`] after the agent's turn is over: its CLI did not take it
//!   (a dialog had the keyboard), and it is typed once more.

use super::drive::SessionIo;
use super::machine::{Action, Budget, Event, Sense, Session};
use super::{Lane, GRACE, TICK};
use crate::agent::Agent;
use crate::error::Result;
use crate::fleet::follow::Follow;
use crate::store::{BudgetState, Holder, Item, LaneState, Target, TargetKind};
use crate::task::Task;
use serde_json::json;
use std::collections::HashSet;
use std::path::PathBuf;

/// How long an item typed while the agent worked may stay pending after its turn is
/// over before it is typed again (once).
pub(super) const RETYPE_AFTER: std::time::Duration = std::time::Duration::from_secs(15);

/// What a launched session holds while it runs, and what its end reads.
pub(super) struct Live {
    pub agent: Agent,
    pub follow: Follow,
    pub conscience: crate::conscience::watch::Watcher,
    pub task: Task,
    pub session: String,
    pub worktree: PathBuf,
    pub recording: PathBuf,
    pub targets: Vec<Target>,
    pub holder: Holder,
    /// Steering keys given to this session (in its brief or typed in).
    pub pasted: HashSet<String>,
    /// Keys typed while the agent worked, and when (see the module's invariants).
    pub typed_busy: Vec<(String, crate::clock::Micros)>,
    /// Since when the agent's turn has been over, while it is.
    pub idle_since: Option<crate::clock::Micros>,
    /// The conversation and transcript last written to the ledger for this session
    /// (what a successor after a restart resumes, see `lineage`).
    pub noted: (Option<String>, Option<String>),
    /// The store's change token when the claim was last read.
    pub seen_version: Option<i64>,
    /// The silent-start report on the lane's row, while it stands.
    pub silent_start: Option<String>,
    /// The budgets as last looked at.
    pub budgets: Option<BudgetState>,
    /// The lane's hold reason before a budget pause, while paused.
    pub hold_before: Option<Option<String>>,
    /// The desk answers this session's agent (and all it starts) until it ends.
    pub _seated: crate::fleet::desk::Seated,
}

/// A running session: the lane and what the session holds.
pub(super) struct Running<'l, 'a> {
    pub lane: &'l mut Lane<'a>,
    pub live: Live,
}

impl SessionIo for Running<'_, '_> {
    fn observe(&mut self, sense: Sense) -> Result<Option<Event>> {
        match sense {
            Sense::Transcript => self.read_transcript(),
            Sense::Budget => {
                let looked = self.lane.budgets(&self.live.task.id);
                let Some(st) = self.lane.through_outage(looked)? else {
                    return Ok(None);
                };
                let look = match st.crossed() {
                    _ if st.stop() => Budget::Stopped,
                    Some(why) => Budget::Crossed(why),
                    None => Budget::Within,
                };
                self.live.budgets = Some(st);
                Ok(Some(Event::Budget(look)))
            }
            Sense::Process => Ok(match self.live.agent.try_wait()? {
                Some(st) => Some(Event::Exited {
                    how: st.to_string(),
                    clean: st.success(),
                }),
                None if self.lane.stopping() => Some(Event::Stopping),
                None => None,
            }),
            Sense::Claim => {
                let version = self.lane.store.change_token().ok();
                let changed = version.is_none() || version != self.live.seen_version;
                self.live.seen_version = version;
                if !changed {
                    return Ok(None);
                }
                let holding = self.lane.holding(&self.live.task.id, &self.live.session);
                let holding = self.lane.through_outage(holding)?;
                if holding.is_none() {
                    // Asked again on the next tick.
                    self.live.seen_version = None;
                }
                Ok(holding.map(Event::Claim))
            }
            Sense::Screen => {
                let screen = self.live.agent.screen_words(2000);
                let prompt = crate::transcript::turn::permission_prompt(&screen);
                Ok(Some(Event::Screen(prompt)))
            }
            Sense::Tick => Ok(Some(Event::Tick {
                found: self.live.follow.path.is_some(),
            })),
        }
    }

    fn perform(&mut self, action: Action) -> Result<Vec<Event>> {
        let lane = &mut *self.lane;
        let live = &mut self.live;
        match action {
            Action::ReportSilentStart => {
                // The agent may be waiting at a prompt or dialog its transcript never
                // shows (a trust or login screen): say so, with what its screen says,
                // instead of "starting".
                let hint = format!(
                    "no transcript {}s after launch: the agent may be waiting at a prompt \
                     (look with: spice fleet attach {}); its screen ends: {}",
                    lane.cfg.start_timeout.as_secs(),
                    lane.cfg.name,
                    live.agent.screen_words(160)
                );
                lane.row.last_error = Some(hint.clone());
                live.silent_start = Some(hint);
            }
            Action::ClearSilentStart => {
                if let Some(hint) = live.silent_start.take() {
                    if lane.row.last_error.as_deref() == Some(hint.as_str()) {
                        lane.row.last_error = None;
                    }
                }
            }
            // A refusal says what the claim is now.
            Action::Renew => {
                let refused = lane.renew_claim(&live.task.id, &live.holder)?;
                return Ok(refused.map(Event::Claim).into_iter().collect());
            }
            Action::TellTakenOver(by) => self.tell_taken_over(&by),
            Action::Deliver => {
                let delivered = self.deliver();
                if self.lane.through_outage(delivered)? == Some(true) {
                    return Ok(vec![Event::Delivered]);
                }
            }
            Action::Pause(why) => self.pause_for_budget(why)?,
            Action::Resume { raised } => self.resume_from_budget(raised)?,
            Action::StopForBudget => {
                let st = live.budgets.clone().unwrap_or_default();
                lane.budget_stop(&live.task.id, &st, &live.holder)?;
            }
            Action::Stop(_) => {
                live.agent.stop(GRACE)?;
            }
            Action::Over(_) => {}
        }
        Ok(Vec::new())
    }

    fn publish(&mut self, machine: &Session) -> Result<()> {
        self.lane.row.state = machine.shown();
        self.lane.row.state_note.clone_from(&machine.note);
        let published = self.lane.publish(false);
        self.lane.through_outage(published)?;
        Ok(())
    }

    fn pause(&mut self) {
        std::thread::sleep(TICK);
    }
}

impl Running<'_, '_> {
    /// What the transcript says since the last read.
    fn read_transcript(&mut self) -> Result<Option<Event>> {
        let (lane, live) = (&mut *self.lane, &mut self.live);
        let Some(report) = live.follow.poll(&live.worktree, &mut *lane.store)? else {
            return Ok(None);
        };
        live.conscience.hear(&report);
        if report.events > 0 {
            lane.row.last_activity = Some(lane.now());
            lane.row.transcript = live.follow.path.as_ref().map(|p| p.display().to_string());
        }
        let (task, session) = (&live.task.id, &live.session);
        let named =
            lane.conversation_named(task, session, report.session_id.clone(), &mut live.noted);
        lane.through_outage(named)?;
        if !report.keyless.is_empty() {
            // The agent meant to answer but named no key: nothing is retired, and the
            // ledger says so (the items stay pending and shown).
            let noted = lane.store.note(
                task,
                "keyless_ack",
                session,
                json!({ "transcript": report.path, "lines": report.keyless }),
            );
            lane.through_outage(noted)?;
        }
        if report.compactions > 0 {
            let noted = lane.store.note(
                task,
                "compacted",
                session,
                json!({ "transcript": report.path, "count": report.compactions, "line": report.to_line }),
            );
            lane.through_outage(noted)?;
        }
        Ok(Some(Event::Transcript {
            events: report.events,
            turn_ended: report.turn_ended,
            text_last: report.text_last,
            turn: Some(report.turn),
        }))
    }

    /// Holds the lane at its budget: the row says why, the ledger records the pause.
    fn pause_for_budget(&mut self, why: String) -> Result<()> {
        let lane = &mut *self.lane;
        self.live
            .hold_before
            .get_or_insert_with(|| lane.row.hold_reason.clone());
        lane.row.state = LaneState::Held;
        lane.row.hold_reason = Some(why.clone());
        lane.publish(true)?;
        let st = self.live.budgets.clone().unwrap_or_default();
        let (task, holder) = (&self.live.task.id, &self.live.holder);
        lane.note_budget(task, holder, "paused", &format!("paused: {why}"), &st)
    }

    /// Ends a budget pause: the row's hold reason is what it was before; a raise is
    /// recorded in the ledger.
    fn resume_from_budget(&mut self, raised: bool) -> Result<()> {
        let lane = &mut *self.lane;
        lane.row.hold_reason = self.live.hold_before.take().flatten();
        if raised {
            let st = self.live.budgets.clone().unwrap_or_default();
            let (task, holder) = (&self.live.task.id, &self.live.holder);
            let why = "resumed: the budget was raised";
            lane.note_budget(task, holder, "resumed", why, &st)?;
        }
        Ok(())
    }

    /// Tells the session (a steering item) that `by` took its claim over.
    fn tell_taken_over(&mut self, by: &str) {
        let (handle, session) = (self.live.task.handle(), &self.live.session);
        let note = format!(
            "Your claim on task {handle} was taken over by {by}. Stop working on it now: \
             do not commit or complete its phase. Your worktree is kept."
        );
        let target = Target {
            kind: TargetKind::Session,
            name: session.to_string(),
        };
        // A correction is never dropped in silence: a busy store is tried again, and
        // one that still refuses is said on the lane's row.
        let mut failed = None;
        for pause_ms in [0, 100, 400, 1600] {
            std::thread::sleep(std::time::Duration::from_millis(pause_ms));
            match self
                .lane
                .store
                .steer(&target, &note, crate::store::DEFAULT_TTL)
            {
                Ok(_) => return,
                Err(e) => failed = Some(e),
            }
        }
        if let Some(e) = failed {
            self.lane.row.last_error = Some(format!(
                "could not tell session {session} that {by} took its claim over: {e}"
            ));
        }
    }

    /// Types the pending steering not yet given to this session into the agent
    /// waiting for input, as one bracketed paste. True when something was typed.
    fn deliver(&mut self) -> Result<bool> {
        let (lane, live) = (&mut *self.lane, &mut self.live);
        let now = lane.now();
        let idle = matches!(
            lane.row.state,
            LaneState::Waiting | LaneState::Asking | LaneState::Errored
        );
        live.idle_since = if idle {
            live.idle_since.or(Some(now))
        } else {
            None
        };
        if let Some(since) = live.idle_since {
            // Counted from the later of the typing and the turn's end: a queued item
            // goes out as the turn ends.
            let retype = RETYPE_AFTER.as_micros() as i64;
            let pasted = &mut live.pasted;
            live.typed_busy.retain(|(key, at)| {
                let lost = now - (*at).max(since) >= retype;
                if lost {
                    pasted.remove(key);
                }
                !lost
            });
        }
        let fresh: Vec<_> = lane
            .store
            .inbox(&live.targets, false)?
            .into_iter()
            .filter(|i| !live.pasted.contains(&i.key))
            .collect();
        if fresh.is_empty() {
            return Ok(false);
        }
        let fresh: Vec<&Item> = fresh.iter().collect();
        let text = crate::steer::exec::frame(&fresh, lane.now());
        let keys: Vec<String> = crate::steer::exec::newest(&fresh)
            .0
            .iter()
            .map(|i| i.key.clone())
            .collect();
        let typed = match live.agent.paste(text.trim()) {
            Ok(()) => {
                if !idle {
                    live.typed_busy
                        .extend(keys.iter().map(|k| (k.clone(), now)));
                }
                lane.store.mark_shown(&keys)?;
                lane.store.note(
                    &live.task.id,
                    "delivered",
                    &live.session,
                    json!({ "keys": keys, "how": "typed into the idle agent's terminal" }),
                )?;
                true
            }
            Err(e) => {
                lane.row.last_error = Some(e.to_string());
                false
            }
        };
        live.pasted.extend(keys);
        Ok(typed)
    }
}
