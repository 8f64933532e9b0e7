//! Which supervisor runs a lane, and a lane whose store is out of reach.
//!
//! A lane runs only once its supervisor took it in the store (`fleet::hosts`); the
//! agent a previous runner recorded is reaped only by the host that recorded it. A
//! store out of reach is waited out: mid-session the agent goes on and the tick's
//! store work is tried again ([`Lane::through_outage`]); between sessions the lane's
//! run waits and starts again ([`Lane::outage_wait`]).

use super::{Lane, OUTAGE_RETRY};
use crate::error::{Error, Result};
use crate::fleet::hosts::{self, Take};
use std::sync::atomic::Ordering;

impl Lane<'_> {
    /// Takes the lane for this supervisor, waiting while another live host runs it
    /// (unless `--until-idle`). `None`: it does not run here (the report says why, or
    /// the supervisor stops). `Some(here)`: it runs, and `here` says whether its last
    /// runner was this host, whose recorded agent is then ours to reap.
    pub(super) fn take_here(&mut self) -> Result<Option<bool>> {
        // Read before the take, which makes this supervisor the runner.
        let before = self.store.lane(&self.cfg.name)?.and_then(|r| r.host);
        let here = before.is_none() || before.as_deref() == Some(self.opts.host.as_str());
        let Some(id) = self.opts.supervisor else {
            return Ok(Some(here));
        };
        let (halted, stop) = (self.halted, self.stop);
        let stopping = move || halted || stop.load(Ordering::SeqCst);
        let wait = !self.opts.until_idle;
        let name = &self.cfg.name;
        match hosts::take(
            &mut *self.store,
            name,
            id,
            &self.cfg.lane.hosts,
            wait,
            &stopping,
        )? {
            Take::Run { .. } => {
                self.owned = true;
                Ok(Some(here))
            }
            Take::Not(why) => {
                self.report.error = Some(why);
                Ok(None)
            }
            Take::Stopping => Ok(None),
        }
    }

    /// Waits, saying so once, until the store answers again or the supervisor stops.
    pub(super) fn outage_wait(&mut self, e: &Error) {
        tracing::warn!(
            target: "spice", "lane {}: {e}; waiting for the store, then going on",
            self.cfg.name
        );
        while !self.stopping() {
            self.sleep(OUTAGE_RETRY);
            if self.store.now().is_ok() {
                tracing::info!(target: "spice", "lane {}: the store is back", self.cfg.name);
                return;
            }
        }
    }

    /// `r`, or `None` when the store was out of reach: a running agent goes on, and what
    /// failed is tried again on a later tick. Said once per outage.
    pub(super) fn through_outage<T>(&mut self, r: Result<T>) -> Result<Option<T>> {
        match r {
            Ok(v) => {
                if self.outage {
                    self.outage = false;
                    tracing::info!(target: "spice", "lane {}: the store is back", self.cfg.name);
                }
                Ok(Some(v))
            }
            Err(e) if e.is_unreachable() => {
                if !self.outage {
                    self.outage = true;
                    tracing::warn!(
                        target: "spice", "lane {}: {e}; the agent goes on, the lane tries again",
                        self.cfg.name
                    );
                }
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }
}
