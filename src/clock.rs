//! Time as a seam: the library never reads the system clock directly, so lease
//! expiry, takeover and renewal can be tested by moving a [`ManualClock`].

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

/// Microseconds since the Unix epoch.
pub type Micros = i64;

pub trait Clock: Send + Sync {
    fn now(&self) -> Micros;
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
}

/// A clock that only moves when told to; clones share one time.
#[derive(Debug, Clone, Default)]
pub struct ManualClock(Arc<AtomicI64>);

impl ManualClock {
    pub fn new(start: Micros) -> Self {
        ManualClock(Arc::new(AtomicI64::new(start)))
    }
    pub fn advance(&self, by: std::time::Duration) {
        self.0.fetch_add(by.as_micros() as i64, Ordering::SeqCst);
    }
    pub fn set(&self, to: Micros) {
        self.0.store(to, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Micros {
        self.0.load(Ordering::SeqCst)
    }
}
