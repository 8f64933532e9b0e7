//! The crash-loop policy: an agent that keeps dying soon after it starts holds its
//! lane instead of being restarted in a tight loop (burning a model's quota, filling
//! the disk with recordings). Three deaths within [`CRASH_WINDOW`] hold the lane for
//! [`HOLD_FIRST`], doubling with every hold up to [`HOLD_MAX`].

use std::collections::VecDeque;
use std::time::{Duration, Instant};

pub const CRASH_WINDOW: Duration = Duration::from_secs(30);
pub const CRASH_DEATHS: usize = 3;
pub const HOLD_FIRST: Duration = Duration::from_secs(30);
pub const HOLD_MAX: Duration = Duration::from_secs(30 * 60);

#[derive(Debug, Default)]
pub struct CrashLoop {
    deaths: VecDeque<Instant>,
    holds: u32,
}

impl CrashLoop {
    /// Records a death at `now`; returns how long to hold the lane if this death
    /// completes a crash loop.
    pub fn death(&mut self, now: Instant) -> Option<Duration> {
        self.deaths.push_back(now);
        while self
            .deaths
            .front()
            .is_some_and(|d| now.duration_since(*d) > CRASH_WINDOW)
        {
            self.deaths.pop_front();
        }
        if self.deaths.len() < CRASH_DEATHS {
            return None;
        }
        self.deaths.clear();
        let hold = (HOLD_FIRST * 2u32.saturating_pow(self.holds)).min(HOLD_MAX);
        self.holds += 1;
        Some(hold)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn three_quick_deaths_hold_and_each_hold_doubles_up_to_the_cap() {
        let t0 = Instant::now();
        let s = Duration::from_secs;
        let mut c = CrashLoop::default();
        assert_eq!(c.death(t0), None);
        assert_eq!(c.death(t0 + s(1)), None);
        assert_eq!(c.death(t0 + s(2)), Some(HOLD_FIRST));
        // Deaths spread wider than the window never hold.
        assert_eq!(c.death(t0 + s(100)), None);
        assert_eq!(c.death(t0 + s(140)), None);
        assert_eq!(c.death(t0 + s(180)), None);
        assert_eq!(c.death(t0 + s(181)), None);
        assert_eq!(c.death(t0 + s(182)), Some(HOLD_FIRST * 2));
        let mut at = t0 + s(200);
        let mut last = None;
        for _ in 0..30 {
            for _ in 0..3 {
                at += s(1);
                last = c.death(at).or(last);
            }
        }
        assert_eq!(last, Some(HOLD_MAX));
    }
}
