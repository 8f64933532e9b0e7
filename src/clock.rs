//! Time as a seam: the library never reads the system clock directly, so lease
//! expiry, takeover and renewal can be tested by moving a [`ManualClock`].
//!
//! Two times: the wall clock ([`Clock::now`], what leases and stamps are written in)
//! and a monotonic one ([`Clock::monotonic`], what a running session's timeouts are
//! measured on, since the wall clock may jump). A [`ManualClock`] moves both with
//! [`ManualClock::advance`]; [`ManualClock::set`] moves the wall clock only, as a
//! jump of the system's clock would.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Microseconds since the Unix epoch.
pub type Micros = i64;

pub trait Clock: Send + Sync {
    /// The wall clock.
    fn now(&self) -> Micros;
    /// The monotonic clock: never goes back, unaffected by the wall clock's jumps.
    fn monotonic(&self) -> Instant;
}

/// The real wall clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Micros {
        let d = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        d.as_micros() as Micros
    }
    fn monotonic(&self) -> Instant {
        Instant::now()
    }
}

/// A clock that only moves when told to; clones share one time.
#[derive(Debug, Clone)]
pub struct ManualClock {
    wall: Arc<AtomicI64>,
    /// Microseconds the monotonic clock has moved since `origin`.
    elapsed: Arc<AtomicI64>,
    origin: Instant,
}

impl Default for ManualClock {
    fn default() -> Self {
        ManualClock::new(0)
    }
}

impl ManualClock {
    pub fn new(start: Micros) -> Self {
        ManualClock {
            wall: Arc::new(AtomicI64::new(start)),
            elapsed: Arc::new(AtomicI64::new(0)),
            origin: Instant::now(),
        }
    }
    /// Moves both clocks on by `by`.
    pub fn advance(&self, by: Duration) {
        let by = by.as_micros() as i64;
        self.wall.fetch_add(by, Ordering::SeqCst);
        self.elapsed.fetch_add(by, Ordering::SeqCst);
    }
    /// Sets the wall clock only (the monotonic one never goes back).
    pub fn set(&self, to: Micros) {
        self.wall.store(to, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Micros {
        self.wall.load(Ordering::SeqCst)
    }
    fn monotonic(&self) -> Instant {
        self.origin + Duration::from_micros(self.elapsed.load(Ordering::SeqCst) as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manual_clock_moves_both_times_on_advance_and_only_the_wall_on_set() {
        let clock = ManualClock::new(1_000);
        let t0 = clock.monotonic();
        clock.advance(Duration::from_millis(5));
        assert_eq!(clock.now(), 6_000);
        assert_eq!(clock.monotonic() - t0, Duration::from_millis(5));
        clock.set(0);
        assert_eq!(clock.now(), 0);
        assert_eq!(clock.monotonic() - t0, Duration::from_millis(5));
        let shared = clock.clone();
        shared.advance(Duration::from_secs(1));
        assert_eq!(clock.monotonic() - t0, Duration::from_millis(1005));
    }
}
