//! When a fleet run with `--until-idle` is over: not when one lane finds nothing
//! ready (a `review` lane has nothing until the `todo` lane finishes a phase), but
//! when no lane can make anything ready any more.
//!
//! Each lane counts as busy from its start until it finds nothing ready, and again
//! from just before each later look. A lane that finished a piece of work moves the
//! generation on. A lane may stop when, after finding nothing ready, no lane is busy
//! and the generation has not moved since just before it looked: nothing can have
//! changed since its look, and nothing will.

use std::sync::Mutex;

#[derive(Debug)]
pub struct Activity {
    /// (lanes busy, generation)
    state: Mutex<(usize, u64)>,
}

impl Activity {
    /// `lanes` lanes, all busy at their start.
    pub fn new(lanes: usize) -> Activity {
        Activity {
            state: Mutex::new((lanes, 0)),
        }
    }

    fn with<T>(&self, f: impl FnOnce(&mut (usize, u64)) -> T) -> T {
        f(&mut self.state.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// The generation, read by a busy lane just before it looks for work.
    pub fn generation(&self) -> u64 {
        self.with(|s| s.1)
    }

    /// A busy lane finished something that may have made work for others.
    pub fn progressed(&self) {
        self.with(|s| s.1 += 1);
    }

    /// A busy lane found nothing ready after reading `seen`: it is idle now. True when
    /// the whole fleet is quiet (no lane busy, nothing done since `seen`).
    pub fn idle(&self, seen: u64) -> bool {
        let (none_busy, quiet) = self.with(|s| {
            s.0 = s.0.saturating_sub(1);
            (s.0 == 0, s.0 == 0 && s.1 == seen)
        });
        if none_busy {
            // Idle lanes of an `--until-idle` run wait on the store's bell and ask
            // [`Activity::any_busy`] when woken: wake them.
            crate::store::nudge();
        }
        quiet
    }

    /// Whether any lane is busy (an idle lane in an `--until-idle` run looks once more
    /// when none is, since only a busy lane can still make work for it).
    pub fn any_busy(&self) -> bool {
        self.with(|s| s.0 > 0)
    }

    /// An idle lane is about to look again.
    pub fn busy(&self) {
        self.with(|s| s.0 += 1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_downstream_lane_waits_while_an_upstream_one_works() {
        let a = Activity::new(2); // todo and review lanes
        let seen_review = a.generation();
        // review: nothing ready yet, but todo is busy: not over.
        assert!(!a.idle(seen_review));
        // todo finishes a phase (work for review), then finds nothing more.
        a.progressed();
        let seen_todo = a.generation();
        assert!(!a.idle(seen_todo) || a.generation() != seen_review);
        // review looks again, takes the review task, does it, finds nothing.
        a.busy();
        let g = a.generation();
        a.progressed();
        assert!(!a.idle(g), "it progressed since its look: look once more");
        a.busy();
        let g = a.generation();
        assert!(a.idle(g), "nothing busy, nothing done since the look");
    }

    #[test]
    fn a_single_lane_with_nothing_ready_is_over_at_once() {
        let a = Activity::new(1);
        let g = a.generation();
        assert!(a.idle(g));
    }
}
