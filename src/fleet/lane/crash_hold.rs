//! A lane held after a crash loop: the claim renewed meanwhile, until the hold ends,
//! the operator lifts it, or the claim is taken over.

use super::machine::{self, HoldNext, Renewer};
use super::{Lane, Work, TICK};
use crate::error::Result;
use crate::fleet::crash_loop::{CRASH_DEATHS, CRASH_WINDOW};
use crate::store::{Holder, LaneState};
use serde_json::json;
use std::time::{Duration, Instant};

impl Lane<'_> {
    /// Holds the lane for `hold` after a crash loop (renewing the claim meanwhile)
    /// until the hold ends or the operator lifts it. Returns who took the claim over
    /// if that happened meanwhile (the hold then ends at once).
    pub(super) fn hold(&mut self, work: &Work, hold: Duration) -> Result<Option<String>> {
        let reason = format!(
            "{CRASH_DEATHS} agent deaths within {}s on {}; held for {}s",
            CRASH_WINDOW.as_secs(),
            work.claim.handle,
            hold.as_secs()
        );
        self.row.state = LaneState::Held;
        self.row.hold_until = Some(self.now() + hold.as_micros() as i64);
        self.row.hold_reason = Some(reason.clone());
        self.row.pid = None;
        self.row.pid_start = None;
        self.publish(true)?;
        self.store.note(
            &work.claim.task_id,
            "held",
            &work.session,
            json!({ "lane": self.cfg.name, "seconds": hold.as_secs(), "reason": reason }),
        )?;
        let holder = Holder::fenced(work.session.clone(), work.fence);
        let mut renewer = Renewer::new(self.cfg.renew, Instant::now());
        let mut lost = None;
        loop {
            if self.stopping() {
                return Ok(None);
            }
            let lifted = self
                .store
                .lane(&self.cfg.name)?
                .is_none_or(|r| r.hold_until.is_none());
            let until = self.row.hold_until.unwrap_or(0);
            // Before the hold ends (lifted, or its time passed) the claim is renewed
            // once more, so a claim taken over meanwhile ends it as lost, never with a
            // successor launched on a claim that is not ours.
            let ending = lifted || self.now() >= until;
            let renewal = if ending || renewer.due(Instant::now()) {
                self.renew_claim(&work.claim.task_id, &holder)?
            } else {
                None
            };
            match machine::hold(self.now(), until, lifted, renewal.as_ref()) {
                HoldNext::Wait => std::thread::sleep(TICK),
                HoldNext::Over => break,
                HoldNext::Lost(by) => {
                    lost = Some(by);
                    break;
                }
            }
        }
        self.row.hold_until = None;
        self.row.hold_reason = None;
        self.row.state = match &lost {
            // Taken over: no agent and no claim, and it is said at once; a row that
            // said "starting" with the last crash as its error until the lane looked
            // for other work told the operator a successor was coming.
            Some(by) => {
                self.row.last_error = Some(format!(
                    "lost the claim on {} to {by} while the lane was held; worktree kept",
                    work.claim.handle
                ));
                LaneState::Idle
            }
            None => LaneState::Starting,
        };
        self.publish(true)?;
        Ok(lost)
    }
}
