//! A lane's pauses: the wait of a lane with nothing eligible, and the backoff after a
//! claim it had to hand back.
//!
//! An idle lane does not look again on a timer. It waits, through the store
//! ([`Store::wait_for_change`]), for what can make work for it: the generation of
//! the graph and its claims moving (a task added by any process, a claim released or
//! a phase completed by another lane, a dependency finished), or the store's clock
//! reaching the next wait date of an open task. Other lanes' rows and lease renewals
//! do not wake it, so the wait costs the same with 10,000 tasks as with none. A
//! lapsing lease is no reason to look: a lapsed claim still holds its task.
//!
//! [`Store::wait_for_change`]: crate::store::Store::wait_for_change

use super::{Lane, TICK};
use crate::error::Result;
use crate::store::Generation;
use std::time::{Duration, Instant};

/// The pause before looking again when the store could not say whether anything
/// changed (a read failed): the lane then looks anyway.
const RETRY: Duration = Duration::from_secs(2);

impl Lane<'_> {
    /// Waits until something may have made work for this lane, the supervisor stops,
    /// or (with `--until-idle`) no lane is busy any more, so the lane looks once more
    /// and may end. `seen` is the generation read before the look that found nothing.
    pub(super) fn idle_wait(&self, seen: Result<Generation>) {
        let until = self.store.next_awakening();
        let (Ok(seen), Ok(until)) = (seen, until) else {
            return self.sleep(RETRY);
        };
        let until_idle = self.opts.until_idle;
        let give_up = || self.stopping() || (until_idle && !self.activity.any_busy());
        if self.store.wait_for_change(seen, until, &give_up).is_err() {
            self.sleep(RETRY);
        }
    }

    /// Sleeps `d`, or until the supervisor stops.
    pub(super) fn sleep(&self, d: Duration) {
        let until = Instant::now() + d;
        while !self.stopping() && Instant::now() < until {
            std::thread::sleep(TICK.min(until.saturating_duration_since(Instant::now())));
        }
    }
}
