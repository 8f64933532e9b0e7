//! Writing the lane's row to the store: only when what it reports changed.

use super::Lane;
use crate::error::{Error, Result};
use crate::store::LaneState;
use std::time::{Duration, Instant};

/// How often the last-activity time alone is written to the store.
const ACTIVITY_EVERY: Duration = Duration::from_secs(5);

impl Lane<'_> {
    /// Writes the lane's row when what it reports changed (the last-activity time
    /// alone at most every [`ACTIVITY_EVERY`]).
    pub(super) fn publish(&mut self, force: bool) -> Result<()> {
        // A note says what an asking, sub-agent, errored or stalled state is about, and
        // what a starting lane waits for (a hand-off).
        if !matches!(
            self.row.state,
            LaneState::Asking
                | LaneState::Subagent
                | LaneState::Errored
                | LaneState::Stalled
                | LaneState::Starting
        ) {
            self.row.state_note = None;
        }
        let changed = match &self.written {
            None => true,
            Some(w) => {
                let mut a = w.clone();
                a.updated = 0;
                a.last_activity = self.row.last_activity;
                let mut b = self.row.clone();
                b.updated = 0;
                a != b
                    || (w.last_activity != self.row.last_activity
                        && self.written_at.elapsed() >= ACTIVITY_EVERY)
            }
        };
        if changed || force {
            let written = match self.opts.supervisor {
                Some(id) => self.store.put_lane_as(&self.row, id),
                None => self.store.put_lane(&self.row),
            };
            match written {
                Ok(w) => {
                    self.written = Some(w);
                    self.written_at = Instant::now();
                }
                Err(Error::Conflict(why)) if self.opts.supervisor.is_some() => {
                    self.taken_elsewhere(why)
                }
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Another supervisor runs the lane now (it took it after this one's heartbeat
    /// lapsed, or this one was superseded), as a fenced write just learned: the row
    /// and the lane are its. This lane ends as on `fleet down`, its claim kept for the
    /// successor there, and writes nothing more.
    pub(super) fn taken_elsewhere(&mut self, why: String) {
        if self.owned {
            tracing::warn!(target: "spice", "lane {}: {why}; stopping it here", self.cfg.name);
            self.report.error = Some(why);
        }
        self.owned = false;
        self.halted = true;
    }
}
