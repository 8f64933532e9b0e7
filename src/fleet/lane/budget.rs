//! A lane paused at its token budget: once the agent's turn has ended (an event of
//! the running session's machine, see `machine::Budget`), or before a session would
//! start or between headless turns (the blocking [`Lane::budget_pause`] here), a
//! crossed budget of the lane or its task holds the lane with
//! `hold_reason` "budget: …" and the agent left running, idle, its claim renewed,
//! nothing typed into it. The operator raises the budget (`spice budget raise`, the
//! console) and the lane goes on, or stops it (`spice budget stop`): the session ends
//! as on `fleet down`, the claim kept for a successor, and the lane stops.
//!
//! Each pause, resume and stop is a `budget` ledger entry (the fleet's `budget`
//! event).

use super::machine::{Holding, Renewer};
use super::{Lane, TICK};
use crate::error::{Error, Result};
use crate::store::{BudgetScope, BudgetState, Holder, LaneState};
use serde_json::json;
use std::time::Instant;

/// What a look at the budgets decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Paused {
    /// Within budget (or raised): go on.
    Go,
    /// The operator stopped the lane: end the session as on `fleet down`.
    Stop,
    /// The supervisor is stopping.
    Stopping,
    /// The claim changed hands while paused.
    Lost(Holding),
}

impl Lane<'_> {
    /// The budgets of this lane and `task` now.
    pub(super) fn budgets(&mut self, task: &str) -> Result<BudgetState> {
        let floor = self.cfg.lane.budget_tokens.as_ref().map(|b| *b.get_ref());
        self.store.budget_state(&self.cfg.name, Some(task), floor)
    }

    /// Looks at the budgets of this lane and `task`; while one is crossed, holds the
    /// lane (renewing the claim for `holder`) until it is raised or stopped.
    pub(super) fn budget_pause(&mut self, task: &str, holder: &Holder) -> Result<Paused> {
        let st = self.budgets(task)?;
        if st.stop() {
            return self.budget_stop(task, &st, holder);
        }
        let Some(reason) = st.crossed() else {
            return Ok(Paused::Go);
        };
        let before = (self.row.state, self.row.hold_reason.clone());
        self.row.state = LaneState::Held;
        self.row.hold_reason = Some(reason.clone());
        self.publish(true)?;
        self.note_budget(task, holder, "paused", &format!("paused: {reason}"), &st)?;
        let mut renewer = Renewer::new(self.cfg.renew, Instant::now());
        loop {
            if self.stopping() {
                return Ok(Paused::Stopping);
            }
            if renewer.due(Instant::now()) {
                if let Some(h) = self.renew_claim(task, holder)? {
                    (self.row.state, self.row.hold_reason) = before;
                    return Ok(Paused::Lost(h));
                }
            }
            let st = self.budgets(task)?;
            if st.stop() {
                return self.budget_stop(task, &st, holder);
            }
            if st.crossed().is_none() {
                (self.row.state, self.row.hold_reason) = before;
                self.publish(true)?;
                let why = "resumed: the budget was raised";
                self.note_budget(task, holder, "resumed", why, &st)?;
                return Ok(Paused::Go);
            }
            std::thread::sleep(TICK);
        }
    }

    /// A `budget` ledger entry: the pause, resume or stop `step`, why, and the budgets.
    pub(super) fn note_budget(
        &mut self,
        task: &str,
        holder: &Holder,
        step: &str,
        why: &str,
        st: &BudgetState,
    ) -> Result<()> {
        let what = json!({ "lane": self.cfg.name, "step": step, "reason": why, "budgets": st });
        self.store.note(task, "budget", &holder.claimant, what)?;
        Ok(())
    }

    /// The operator's stop: recorded, cleared (acted on), and the lane halted.
    pub(super) fn budget_stop(
        &mut self,
        task: &str,
        st: &BudgetState,
        holder: &Holder,
    ) -> Result<Paused> {
        let scope = if st.lane.stop {
            BudgetScope::Lane(self.cfg.name.clone())
        } else {
            BudgetScope::Task(task.to_string())
        };
        // Cleared only by the lane's runner: a supervisor that lost the lane (frozen
        // past its heartbeat) leaves the operator's stop to the one that runs it now.
        let by = self.opts.supervisor.map(|id| (self.cfg.name.as_str(), id));
        match self.store.budget_stopped(&scope, by) {
            Ok(()) => {}
            Err(Error::Conflict(why)) if by.is_some() => {
                self.taken_elsewhere(why);
                return Ok(Paused::Stopping);
            }
            Err(e) => return Err(e),
        }
        let why = "stopped by the operator at its budget; claim kept";
        self.note_budget(task, holder, "stopped", why, st)?;
        self.row.hold_reason = Some("budget: stopped by the operator; claim kept".into());
        self.halted = true;
        Ok(Paused::Stop)
    }
}
