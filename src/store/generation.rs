//! The generation of the graph and its claims: what an idle lane waits on.
//!
//! A counter in `meta`, moved by triggers (schema 10) on every write to the tables
//! that decide what is eligible and how it ranks: `tasks` (the columns a ranking or
//! the console reads), `deps`, `flows` and `claims` (a claim taken, released, or
//! passed to another holder). Triggers, not the write paths, move it, so every
//! writer does: another process, `spice task add`, an import, a future write path.
//! Lane rows, lease renewals, transcript checkpoints, steering and the ledger do not
//! move it: they change nothing an allocator reads.
//!
//! Waiting ([`Store::wait_for_change`]) is part of the store's interface, so a
//! backend with change notification (PostgreSQL's LISTEN/NOTIFY) blocks on that
//! instead. SQLite has no such event across processes: in this backend one thread
//! per process and file, the [`super::bell`], hears each commit (inotify on the WAL)
//! and reads `PRAGMA data_version` and the one-row counter, and wakes the waiters
//! only when the generation moved. Either way a wait costs the same with 10,000
//! tasks as with none, and nothing while nothing changes.

use super::bell::{Bell, Kind, Rang};
use super::Store;
use crate::clock::Micros;
use crate::error::{Result, SqlContext};
use rusqlite::OptionalExtension;
use std::time::Duration;

/// How often the SQLite backend looks for another connection's commit while waiting,
/// where the process's bell cannot be had (it hears commits as they are made).
pub const LOOK_EVERY: Duration = Duration::from_millis(250);

/// How long a wait goes at most without asking its `give_up` again, when no
/// [`super::nudge`] came: a backstop for a condition changed without one.
pub const GIVE_UP_EVERY: Duration = Duration::from_secs(5);

/// A value of the graph-and-claims generation; equal values mean nothing an
/// allocator reads changed in between.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Generation(i64);

impl Generation {
    /// The value as a number, for keys: it only grows within one store.
    pub fn number(self) -> i64 {
        self.0
    }

    /// A backend's counter as a generation.
    pub(crate) fn from_number(v: i64) -> Generation {
        Generation(v)
    }
}

/// Why [`Store::wait_for_change`] returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Waited {
    /// The graph or its claims changed: the generation now.
    Changed(Generation),
    /// The store's clock reached the time the caller gave.
    Due,
    /// The caller's `give_up` said so.
    GaveUp,
}

impl Store {
    /// The graph-and-claims generation now (one row read).
    pub fn generation(&self) -> Result<Generation> {
        self.conn
            .prepare_cached("SELECT value FROM meta WHERE key = 'generation'")
            .and_then(|mut st| st.query_row([], |r| r.get(0)))
            .map(Generation)
            .ctx(|| "failed to read the store's generation".into())
    }

    /// The earliest wait date still ahead of the store's clock among open tasks: the
    /// first moment at which time alone makes one eligible. A lease that lapses is no
    /// such moment: a lapsed claim still holds its task until it is taken over (a
    /// write, which moves the generation).
    pub fn next_awakening(&self) -> Result<Option<Micros>> {
        let now = self.clock.now();
        self.conn
            .prepare_cached(
                "SELECT wait FROM tasks WHERE wait > ?1 AND status IN ('pending', 'waiting')
                 ORDER BY wait LIMIT 1",
            )
            .and_then(|mut st| st.query_row([now], |r| r.get(0)).optional())
            .ctx(|| "failed to read the next wait date".into())
    }

    /// Blocks until the generation differs from `seen`, the store's clock reaches
    /// `until`, or `give_up` returns true, whichever is first. `give_up` is asked at
    /// the start, whenever [`super::nudge`] is called (whoever changes what it reads
    /// calls it), and at least every [`GIVE_UP_EVERY`]. A change made before the
    /// call, by this connection too, is seen at once; one made during the wait is
    /// heard through the process's [`super::bell`] for the file.
    pub fn wait_for_change(
        &self,
        seen: Generation,
        until: Option<Micros>,
        give_up: &dyn Fn() -> bool,
    ) -> Result<Waited> {
        let bell = self.bell();
        // Taken before the read below: a commit after that read rings it.
        let mut ticket = bell.map(|b| b.ticket());
        // Only a wait without the bell compares data versions itself.
        let mut version = match bell {
            Some(_) => 0,
            None => self.data_version()?,
        };
        let now = self.generation()?;
        if now != seen {
            return Ok(Waited::Changed(now));
        }
        loop {
            let left = until.map(|u| u.saturating_sub(self.clock.now()));
            if left.is_some_and(|l| l <= 0) {
                return Ok(Waited::Due);
            }
            if give_up() {
                return Ok(Waited::GaveUp);
            }
            let pause = left.map_or(GIVE_UP_EVERY, |l| {
                Duration::from_micros(l as u64).min(GIVE_UP_EVERY)
            });
            let look = match (bell, ticket.as_mut()) {
                (Some(b), Some(t)) => b.wait(t, Kind::Generation, pause) == Rang::Changed,
                _ => {
                    std::thread::sleep(LOOK_EVERY.min(pause));
                    let v = self.data_version()?;
                    std::mem::replace(&mut version, v) != v
                }
            };
            if look {
                let now = self.generation()?;
                if now != seen {
                    return Ok(Waited::Changed(now));
                }
            }
        }
    }

    /// Blocks until this connection's [`Store::data_version`] differs from `seen` or
    /// `timeout` passes; the value then. Woken by the process's bell for the file.
    pub fn wait_commit(&self, seen: i64, timeout: Duration) -> Result<i64> {
        let deadline = std::time::Instant::now() + timeout;
        let bell = self.bell();
        let mut ticket = bell.map(|b| b.ticket());
        loop {
            let now = self.data_version()?;
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if now != seen || left.is_zero() {
                return Ok(now);
            }
            match (bell, ticket.as_mut()) {
                (Some(b), Some(t)) => {
                    b.wait(t, Kind::Commit, left);
                }
                _ => std::thread::sleep(left.min(LOOK_EVERY)),
            }
        }
    }

    /// The process's bell for this store's file, started at the first wait.
    fn bell(&self) -> Option<&Bell> {
        self.bell.get_or_init(|| Bell::of(&self.path)).as_deref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::{Clock, ManualClock};
    use crate::store::{ClaimRequest, Holder, LaneRow, DEFAULT_LEASE};
    use crate::task::NewTask;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    const T0: Micros = 1_790_000_000_000_000;

    fn open(dir: &std::path::Path, clock: &ManualClock) -> Store {
        Store::open_dir(dir, Arc::new(clock.clone())).unwrap()
    }

    fn add(s: &mut Store, title: &str, wait: Option<Micros>) -> String {
        s.add_task(
            NewTask {
                title: title.into(),
                wait,
                ..NewTask::default()
            },
            &[],
        )
        .unwrap()
        .id
    }

    fn req(who: &str) -> ClaimRequest {
        ClaimRequest {
            claimant: who.into(),
            lane: Some("a".into()),
            worktree: None,
            lease: DEFAULT_LEASE,
        }
    }

    /// What a supervisor writes all the time while its lanes work or sit idle moves
    /// nothing an idle lane waits on; what can make work (or take it) does.
    #[test]
    fn lane_rows_renewals_and_checkpoints_do_not_move_the_generation() {
        let dir = tempfile::tempdir().unwrap();
        let clock = ManualClock::new(T0);
        let mut s = open(dir.path(), &clock);
        let a = add(&mut s, "a", None);
        let b = add(&mut s, "b", None);
        let claim = s.claim(&a, &req("me")).unwrap();
        let before = s.generation().unwrap();
        let row = LaneRow {
            name: "a".into(),
            ..LaneRow::default()
        };
        for _ in 0..3 {
            s.put_lane(&row).unwrap();
            clock.advance(Duration::from_secs(60));
            s.renew(&a, &Holder::fenced("me", claim.fence), None, DEFAULT_LEASE)
                .unwrap();
        }
        s.hold(
            &a,
            &Holder::fenced("me", claim.fence),
            Duration::from_secs(900),
            "merge",
        )
        .unwrap();
        let at = crate::transcript::follow::Checkpoint {
            offset: 10,
            line: 1,
            hash: 7,
        };
        s.apply_transcript("/t.jsonl", at, &[], &[]).unwrap();
        s.note(&a, "conversation", "me", serde_json::json!({}))
            .unwrap();
        assert_eq!(
            s.generation().unwrap(),
            before,
            "a report moved the generation"
        );

        // Each of these can change what a lane may claim.
        let mut last = before;
        let mut moved = |s: &mut Store, what: &str| {
            let g = s.generation().unwrap();
            assert_ne!(g, last, "{what} did not move the generation");
            last = g;
        };
        add(&mut s, "c", None);
        moved(&mut s, "a task added");
        s.change_deps(&b, std::slice::from_ref(&a), &[]).unwrap();
        moved(&mut s, "a dependency");
        s.release(&a, &Holder::fenced("me", claim.fence)).unwrap();
        moved(&mut s, "a release");
        let c = s.claim(&a, &req("other")).unwrap();
        moved(&mut s, "a claim");
        s.renew(
            &a,
            &Holder::fenced("other", c.fence),
            Some("next"),
            DEFAULT_LEASE,
        )
        .unwrap();
        moved(&mut s, "a claim passed to a successor");
        s.done(&a, Some(&Holder::new("next"))).unwrap();
        moved(&mut s, "a task done");
    }

    #[test]
    fn the_next_awakening_is_the_earliest_wait_date_ahead_of_an_open_task() {
        let dir = tempfile::tempdir().unwrap();
        let clock = ManualClock::new(T0);
        let mut s = open(dir.path(), &clock);
        assert_eq!(s.next_awakening().unwrap(), None);
        let hour = 3_600_000_000;
        add(&mut s, "past", Some(T0 - hour));
        add(&mut s, "later", Some(T0 + 2 * hour));
        let soon = add(&mut s, "soon", Some(T0 + hour));
        assert_eq!(s.next_awakening().unwrap(), Some(T0 + hour));
        s.done(&soon, None).unwrap();
        assert_eq!(s.next_awakening().unwrap(), Some(T0 + 2 * hour));
        clock.advance(Duration::from_secs(3 * 3600));
        assert_eq!(s.next_awakening().unwrap(), None);
    }

    /// The wait ends when the (fake) clock reaches the time given, and not before; a
    /// nudge makes it look at the clock.
    #[test]
    fn a_wait_ends_when_the_clock_reaches_its_time() {
        let dir = tempfile::tempdir().unwrap();
        let clock = ManualClock::new(T0);
        let s = open(dir.path(), &clock);
        let seen = s.generation().unwrap();
        let asked = std::sync::atomic::AtomicUsize::new(0);
        let give_up = || {
            asked.fetch_add(1, Ordering::SeqCst);
            false
        };
        let woke = std::thread::scope(|scope| {
            scope.spawn(|| {
                // Not yet: a nudge before the time only makes the wait ask again.
                while asked.load(Ordering::SeqCst) < 1 {
                    std::thread::yield_now();
                }
                clock.advance(Duration::from_secs(1));
                while asked.load(Ordering::SeqCst) < 2 {
                    crate::store::nudge();
                    std::thread::sleep(Duration::from_millis(5));
                }
                clock.advance(Duration::from_secs(9));
                crate::store::nudge();
            });
            s.wait_for_change(seen, Some(T0 + 5_000_000), &give_up)
                .unwrap()
        });
        assert_eq!(woke, Waited::Due);
        assert_eq!(clock.now(), T0 + 10_000_000);
    }

    /// Another connection's lane rows and renewals do not end a wait; its new task does.
    #[test]
    fn a_wait_ends_on_another_connections_graph_change_only() {
        let dir = tempfile::tempdir().unwrap();
        let clock = ManualClock::new(T0);
        let mut writer = open(dir.path(), &clock);
        let waiter = open(dir.path(), &clock);
        let a = add(&mut writer, "a", None);
        let claim = writer.claim(&a, &req("me")).unwrap();
        let seen = waiter.generation().unwrap();
        let done = AtomicBool::new(false);
        let woke = std::thread::scope(|scope| {
            scope.spawn(|| {
                let row = LaneRow {
                    name: "a".into(),
                    ..LaneRow::default()
                };
                for _ in 0..4 {
                    writer.put_lane(&row).unwrap();
                    writer
                        .renew(&a, &Holder::fenced("me", claim.fence), None, DEFAULT_LEASE)
                        .unwrap();
                    std::thread::sleep(LOOK_EVERY / 2);
                }
                done.store(true, Ordering::SeqCst);
                crate::store::nudge();
            });
            waiter
                .wait_for_change(seen, None, &|| done.load(Ordering::SeqCst))
                .unwrap()
        });
        assert_eq!(woke, Waited::GaveUp, "woken by a lane row or a renewal");
        assert_eq!(waiter.generation().unwrap(), seen);
        let added = std::thread::scope(|scope| {
            scope.spawn(|| add(&mut writer, "b", None));
            waiter.wait_for_change(seen, None, &|| false).unwrap()
        });
        assert!(
            matches!(added, Waited::Changed(g) if g != seen),
            "{added:?}"
        );
    }
}
