//! The bell: one thread per SQLite store file in a process that notices commits and
//! rings for the waiters of that process (idle lanes, the lane-event observer, the
//! console), so they sleep on a condition variable instead of each polling the file.
//!
//! SQLite has no event across processes, but every commit writes the WAL: the bell
//! waits on inotify for the store's directory (the database file and its `-wal`),
//! and on each event reads `PRAGMA data_version` on a read-only connection of its own
//! (a shared-memory read); when it moved, the generation row too. A waiter is woken
//! only for what it waits on: a change of the generation (what an allocator reads),
//! or any commit. An inotify event can come before its commit is visible (the WAL
//! frame is written before the WAL index says so), so the bell looks once more
//! [`SETTLE`] after an event; with no event it looks every [`SAFETY`] anyway (a
//! missed event costs latency, never a lost change), and every
//! [`super::generation::LOOK_EVERY`] where inotify cannot be had.
//!
//! A waiter also gives up on a condition of its own (the supervisor stopping, the
//! fleet gone quiet): whoever changes such a condition calls [`nudge`] (or, from a
//! signal handler, [`nudge_from_signal`]), which wakes every waiter to ask again.
//!
//! Invariants: a waiter takes its [`Ticket`] before it reads the store, so a commit
//! after that read always rings it; the bell's connection writes nothing (its close
//! never checkpoints); the thread ends when the last store using the bell is gone
//! (the bell's end of a pipe closes).

use super::open;
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify};
use std::ffi::OsString;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, Weak};
use std::time::{Duration, Instant};

/// How long after an inotify event the bell looks once more, for a commit whose WAL
/// write it heard before the commit was visible.
const SETTLE: Duration = Duration::from_millis(10);
/// How often the bell looks with no event.
const SAFETY: Duration = Duration::from_secs(1);

/// What a waiter waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A change of the graph-and-claims generation.
    Generation,
    /// Any commit.
    Commit,
}

/// The counts a waiter last saw; a wait returns when one of its kind moved.
#[derive(Debug, Clone, Copy)]
pub struct Ticket(Counts);

/// Why [`Bell::wait`] returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rang {
    /// What the waiter waits for happened (read the store).
    Changed,
    /// [`nudge`]: ask the waiter's own condition again.
    Nudged,
    /// The timeout passed.
    Timeout,
}

#[derive(Debug, Clone, Copy, Default)]
struct Counts {
    commits: u64,
    generations: u64,
    nudges: u64,
}

/// A store file's bell (module docs).
pub struct Bell {
    counts: Mutex<Counts>,
    generation: Condvar,
    commit: Condvar,
    /// Closing it (dropping the bell) ends the thread.
    _quit: OwnedFd,
}

/// Every bell of the process, by store file.
static BELLS: Mutex<Vec<(PathBuf, Weak<Bell>)>> = Mutex::new(Vec::new());

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Bell {
    /// The bell of the store file at `path`, started if this process has none; `None`
    /// when it cannot start (no thread, no pipe, no connection): the caller polls.
    pub fn of(path: &Path) -> Option<Arc<Bell>> {
        let key = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
        let mut bells = lock(&BELLS);
        bells.retain(|(_, w)| w.strong_count() > 0);
        if let Some(b) = bells
            .iter()
            .find(|(p, _)| *p == key)
            .and_then(|(_, w)| w.upgrade())
        {
            return Some(b);
        }
        let bell = start(&key)?;
        bells.push((key, Arc::downgrade(&bell)));
        Some(bell)
    }

    /// The counts now: what a wait compares with.
    pub fn ticket(&self) -> Ticket {
        Ticket(*lock(&self.counts))
    }

    /// Blocks until what `kind` names moved since `ticket`, a [`nudge`], or `timeout`;
    /// moves `ticket` to what it saw.
    pub fn wait(&self, ticket: &mut Ticket, kind: Kind, timeout: Duration) -> Rang {
        let deadline = Instant::now() + timeout;
        let cv = match kind {
            Kind::Generation => &self.generation,
            Kind::Commit => &self.commit,
        };
        let mut c = lock(&self.counts);
        loop {
            let moved = match kind {
                Kind::Generation => c.generations != ticket.0.generations,
                Kind::Commit => c.commits != ticket.0.commits,
            };
            let nudged = c.nudges != ticket.0.nudges;
            if moved || nudged {
                *ticket = Ticket(*c);
                return if moved { Rang::Changed } else { Rang::Nudged };
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Rang::Timeout;
            }
            c = cv
                .wait_timeout(c, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }

    fn ring(&self, generation: bool) {
        let mut c = lock(&self.counts);
        c.commits += 1;
        if generation {
            c.generations += 1;
        }
        drop(c);
        self.commit.notify_all();
        if generation {
            self.generation.notify_all();
        }
    }

    fn nudged(&self) {
        lock(&self.counts).nudges += 1;
        self.commit.notify_all();
        self.generation.notify_all();
    }
}

/// Wakes every waiter of every bell in this process to ask its own condition again
/// (module docs). Not for signal handlers: [`nudge_from_signal`].
pub fn nudge() {
    let bells: Vec<Arc<Bell>> = lock(&BELLS)
        .iter()
        .filter_map(|(_, w)| w.upgrade())
        .collect();
    for b in bells {
        b.nudged();
    }
}

/// The pipe a signal handler writes a byte to, to [`nudge`] through the bells'
/// threads: (read end, write end), made by [`prepare_signal_nudge`].
static SIGNAL_PIPE: OnceLock<Option<(OwnedFd, OwnedFd)>> = OnceLock::new();

/// Makes the pipe [`nudge_from_signal`] writes to; call before installing the handler.
pub fn prepare_signal_nudge() {
    SIGNAL_PIPE.get_or_init(|| {
        nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC | nix::fcntl::OFlag::O_NONBLOCK).ok()
    });
}

/// [`nudge`] from a signal handler: only writes a byte to a pipe (async-signal-safe;
/// `OnceLock::get` is an atomic load), which a bell's thread reads and nudges for.
/// Does nothing unless [`prepare_signal_nudge`] ran first.
pub fn nudge_from_signal() {
    if let Some(Some((_, w))) = SIGNAL_PIPE.get() {
        let _ = nix::unistd::write(w, &[1]);
    }
}

fn signal_read_end() -> Option<&'static OwnedFd> {
    SIGNAL_PIPE.get()?.as_ref().map(|(r, _)| r)
}

/// Starts the bell of `path` (canonical).
fn start(path: &Path) -> Option<Arc<Bell>> {
    let conn = open::read_only_conn(path).ok()?;
    let (quit_r, quit_w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).ok()?;
    let bell = Arc::new(Bell {
        counts: Mutex::new(Counts::default()),
        generation: Condvar::new(),
        commit: Condvar::new(),
        _quit: quit_w,
    });
    let weak = Arc::downgrade(&bell);
    // The watch and the first reading are made before the bell is handed out: a
    // commit made after `Bell::of` returns must move the counts, and the thread,
    // when slow to start, would take such a commit for the starting point.
    let watched = watch(path);
    let seen = read(&conn);
    std::thread::Builder::new()
        .name("spice-store-bell".into())
        .spawn(move || run(weak, conn, quit_r, watched, seen))
        .ok()?;
    Some(bell)
}

/// The inotify watch of the store's directory and the names in it that a commit
/// writes; `None` where inotify cannot be had.
fn watch(path: &Path) -> Option<(Inotify, Vec<OsString>)> {
    let dir = path.parent()?;
    let name = path.file_name()?;
    let ino = Inotify::init(InitFlags::IN_CLOEXEC | InitFlags::IN_NONBLOCK).ok()?;
    ino.add_watch(
        dir,
        AddWatchFlags::IN_MODIFY
            | AddWatchFlags::IN_CREATE
            | AddWatchFlags::IN_MOVED_TO
            | AddWatchFlags::IN_DELETE,
    )
    .ok()?;
    let mut wal = name.to_os_string();
    wal.push("-wal");
    let mut journal = name.to_os_string();
    journal.push("-journal");
    Some((ino, vec![name.to_os_string(), wal, journal]))
}

fn read(conn: &rusqlite::Connection) -> Option<(i64, i64)> {
    let version = conn
        .prepare_cached("PRAGMA data_version")
        .and_then(|mut st| st.query_row([], |r| r.get(0)))
        .ok()?;
    let generation = conn
        .prepare_cached("SELECT value FROM meta WHERE key = 'generation'")
        .and_then(|mut st| st.query_row([], |r| r.get(0)))
        .unwrap_or(0);
    Some((version, generation))
}

fn run(
    bell: Weak<Bell>,
    conn: rusqlite::Connection,
    quit: OwnedFd,
    watch: Option<(Inotify, Vec<OsString>)>,
    mut seen: Option<(i64, i64)>,
) {
    let mut settle = false;
    loop {
        let timeout = if settle {
            SETTLE
        } else if watch.is_some() {
            SAFETY
        } else {
            super::generation::LOOK_EVERY
        };
        let mut fds = vec![PollFd::new(quit.as_fd(), PollFlags::POLLIN)];
        if let Some(r) = signal_read_end() {
            fds.push(PollFd::new(r.as_fd(), PollFlags::POLLIN));
        }
        let watched = fds.len();
        if let Some((ino, _)) = &watch {
            fds.push(PollFd::new(ino.as_fd(), PollFlags::POLLIN));
        }
        let ms = PollTimeout::try_from(timeout).unwrap_or(PollTimeout::MAX);
        let _ = poll(&mut fds, ms);
        let ready = |i: usize| {
            fds.get(i)
                .and_then(|f| f.revents())
                .is_some_and(|r| !r.is_empty())
        };
        if ready(0) {
            return;
        }
        let signalled = watched == 2 && ready(1);
        let heard = watch.is_some() && ready(watched);
        drop(fds);
        if signalled {
            if let Some(r) = signal_read_end() {
                let mut buf = [0u8; 64];
                while matches!(nix::unistd::read(r.as_raw_fd(), &mut buf), Ok(n) if n > 0) {}
            }
            nudge();
        }
        settle = false;
        if heard {
            if let Some((ino, names)) = &watch {
                let events = ino.read_events().unwrap_or_default();
                settle = events
                    .iter()
                    .any(|e| e.name.as_ref().is_none_or(|n| names.contains(n)));
            }
        }
        let Some(bell) = bell.upgrade() else {
            return;
        };
        let now = read(&conn);
        match (seen, now) {
            (Some((v0, g0)), Some((v1, g1))) if v1 != v0 => bell.ring(g1 != g0),
            (None, Some(_)) => bell.ring(true),
            _ => {}
        }
        if now.is_some() {
            seen = now;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::SystemClock;
    use crate::store::Store;
    use crate::task::NewTask;

    fn add(s: &mut Store, title: &str) {
        s.add_task(
            NewTask {
                title: title.into(),
                ..NewTask::default()
            },
            &[],
        )
        .unwrap();
    }

    /// A wait that sits out nudges (other tests in this process nudge every bell).
    fn rung(bell: &Bell, t: &mut Ticket, kind: Kind, timeout: Duration) -> Rang {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match bell.wait(t, kind, left) {
                Rang::Nudged => continue,
                r => return r,
            }
        }
    }

    #[test]
    fn a_commit_rings_the_waiters_of_its_kind_and_a_nudge_rings_all() {
        let dir = tempfile::tempdir().unwrap();
        let mut writer = Store::open_dir(dir.path(), Arc::new(SystemClock)).unwrap();
        add(&mut writer, "first");
        let bell = Bell::of(&dir.path().join(crate::store::DB_FILE)).unwrap();
        let same = Bell::of(&dir.path().join(crate::store::DB_FILE)).unwrap();
        assert!(Arc::ptr_eq(&bell, &same), "one bell per file in a process");

        // Nothing committed: a wait times out.
        let mut t = bell.ticket();
        assert_eq!(
            rung(&bell, &mut t, Kind::Commit, Duration::from_millis(50)),
            Rang::Timeout
        );

        // A commit that moves the generation rings both kinds.
        let mut g = bell.ticket();
        let mut c = bell.ticket();
        add(&mut writer, "second");
        assert_eq!(
            rung(&bell, &mut g, Kind::Generation, Duration::from_secs(30)),
            Rang::Changed
        );
        assert_eq!(
            rung(&bell, &mut c, Kind::Commit, Duration::from_secs(30)),
            Rang::Changed
        );

        // A commit that leaves the generation alone (a lane's row) rings commits only.
        let mut g = bell.ticket();
        let mut c = bell.ticket();
        let row = crate::store::LaneRow {
            name: "l1".into(),
            ..crate::store::LaneRow::default()
        };
        writer.put_lane(&row).unwrap();
        assert_eq!(
            rung(&bell, &mut c, Kind::Commit, Duration::from_secs(30)),
            Rang::Changed
        );
        assert_eq!(
            rung(&bell, &mut g, Kind::Generation, Duration::from_millis(300)),
            Rang::Timeout
        );

        // A nudge wakes a waiter of either kind.
        let waiter = {
            let bell = bell.clone();
            let mut t = bell.ticket();
            std::thread::spawn(move || bell.wait(&mut t, Kind::Generation, Duration::from_secs(30)))
        };
        while !waiter.is_finished() {
            nudge();
            std::thread::yield_now();
        }
        assert_eq!(waiter.join().unwrap(), Rang::Nudged);
    }

    /// A signal handler cannot lock: its nudge goes through a pipe the bell's thread
    /// reads. Unnudged, the waiter would ask its condition only at its backstop.
    #[test]
    fn a_nudge_from_a_signal_handler_reaches_the_waiters() {
        let dir = tempfile::tempdir().unwrap();
        let mut writer = Store::open_dir(dir.path(), Arc::new(SystemClock)).unwrap();
        add(&mut writer, "first");
        prepare_signal_nudge();
        let bell = Bell::of(&dir.path().join(crate::store::DB_FILE)).unwrap();
        let mut t = bell.ticket();
        let started = Instant::now();
        nudge_from_signal();
        assert_eq!(
            bell.wait(&mut t, Kind::Generation, Duration::from_secs(30)),
            Rang::Nudged
        );
        assert!(started.elapsed() < Duration::from_secs(10));
    }

    #[test]
    fn a_bell_its_last_user_dropped_is_made_anew_and_rings() {
        let dir = tempfile::tempdir().unwrap();
        let mut writer = Store::open_dir(dir.path(), Arc::new(SystemClock)).unwrap();
        add(&mut writer, "first");
        let path = dir.path().join(crate::store::DB_FILE);
        let bell = Bell::of(&path).unwrap();
        let weak = Arc::downgrade(&bell);
        drop(bell);
        assert!(weak.upgrade().is_none());
        // A new user gets a new bell that works.
        let bell = Bell::of(&path).unwrap();
        let mut t = bell.ticket();
        add(&mut writer, "second");
        assert_eq!(
            rung(&bell, &mut t, Kind::Generation, Duration::from_secs(30)),
            Rang::Changed
        );
    }
}
