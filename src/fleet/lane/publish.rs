//! Writing the lane's row to the store: only when what it reports changed.

use super::Lane;
use crate::error::Result;
use crate::store::LaneState;
use std::time::{Duration, Instant};

/// How often the last-activity time alone is written to the store.
const ACTIVITY_EVERY: Duration = Duration::from_secs(5);

impl Lane<'_> {
    /// Writes the lane's row when what it reports changed (the last-activity time
    /// alone at most every [`ACTIVITY_EVERY`]).
    pub(super) fn publish(&mut self, force: bool) -> Result<()> {
        // A note says what an asking, sub-agent, errored or stalled state is about.
        if !matches!(
            self.row.state,
            LaneState::Asking | LaneState::Subagent | LaneState::Errored | LaneState::Stalled
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
            self.written = Some(self.store.put_lane(&self.row)?);
            self.written_at = Instant::now();
        }
        Ok(())
    }
}
