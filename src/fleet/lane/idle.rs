//! A lane's pauses: the wait of a lane with nothing eligible, and the backoff after a
//! claim it had to hand back.
//!
//! An idle lane does not look again on a timer. It waits, through the store
//! ([`Authority::wait_for_change`]), for what can make work for it: the generation of
//! the graph and its claims moving (a task added by any process, a claim released or
//! a phase completed by another lane, a dependency finished), or the store's clock
//! reaching the next wait date of an open task. Other lanes' rows and lease renewals
//! do not wake it, so the wait costs the same with 10,000 tasks as with none. A
//! lapsing lease is no reason to look: a lapsed claim still holds its task.
//!
//! Nor does an idle lane keep the memory of its look: the graph it read (its
//! connection's page cache, the snapshot its thread allocated) is handed back before
//! it waits ([`give_back_memory`]), and the lanes' threads share a few allocator
//! arenas ([`share_arenas`]), so a supervisor's resident size grows with its lanes by
//! what a lane needs, not by a copy of the graph per lane.
//!
//! [`Authority::wait_for_change`]: crate::store::Store::wait_for_change

use super::{Lane, TICK};
use crate::error::Result;
use crate::store::Generation;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// The pause before looking again when the store could not say whether anything
/// changed (a read failed): the lane then looks anyway.
const RETRY: Duration = Duration::from_secs(2);

impl Lane<'_> {
    /// Waits until something may have made work for this lane, the supervisor stops,
    /// or (with `--until-idle`) no lane is busy any more, so the lane looks once more
    /// and may end. `seen` is the generation read before the look that found nothing.
    pub(super) fn idle_wait(&mut self, seen: Result<Generation>) {
        give_back_memory(&mut *self.store);
        let until = self.store.next_awakening();
        let (Ok(seen), Ok(until)) = (seen, until) else {
            return self.sleep(RETRY);
        };
        let until_idle = self.opts.until_idle;
        let (halted, stop, activity) = (self.halted, self.stop, self.activity);
        let give_up =
            || halted || stop.load(Ordering::SeqCst) || (until_idle && !activity.any_busy());
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

/// Frees what a look at the graph leaves behind: the connection's page cache, and the
/// freed pages of the allocator's arenas. glibc keeps memory a thread freed in that
/// thread's arena, to reuse it, and each lane thread has one: without the trim, every
/// idle lane held a graph's worth of freed pages (about 6 MB at 10,000 tasks).
fn give_back_memory(store: &mut dyn crate::store::Authority) {
    let _ = store.release_memory();
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        extern "C" {
            fn malloc_trim(pad: usize) -> std::os::raw::c_int;
        }
        // SAFETY: malloc_trim only returns free memory to the kernel; it takes each
        // arena's lock, so it is safe beside other threads allocating.
        unsafe {
            malloc_trim(0);
        }
    }
}

/// How many glibc malloc arenas the supervisor's threads share. glibc gives threads up
/// to eight per core, and what a trim cannot return (pages a long-lived allocation
/// pins) is kept per arena: 3-5 MB each after a look at 10,000 tasks. Lanes mostly
/// wait, so contention on a few arenas costs nothing that shows.
const ARENAS: i32 = 4;

/// Caps the process's malloc arenas at [`ARENAS`]; once, before the lanes allocate.
pub(super) fn share_arenas() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        #[cfg(all(target_os = "linux", target_env = "gnu"))]
        {
            extern "C" {
                fn mallopt(
                    param: std::os::raw::c_int,
                    value: std::os::raw::c_int,
                ) -> std::os::raw::c_int;
            }
            /// glibc's `M_ARENA_MAX` (malloc.h).
            const M_ARENA_MAX: std::os::raw::c_int = -8;
            // SAFETY: mallopt only sets a limit the allocator reads when a thread
            // first needs an arena.
            unsafe {
                mallopt(M_ARENA_MAX, ARENAS);
            }
        }
    });
}
