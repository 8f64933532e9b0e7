//! `spice exec -- CMD …`: runs an agent's command and shows it the steering items
//! addressed to it on stderr: before the command, the moment a new one is created
//! while it runs, again on a back-off while unanswered, and after it ends.
//!
//! Invariants:
//! - stdout, stdin and the command's stderr are the child's own file descriptors,
//!   inherited untouched: the wrapper never reads or rewrites them.
//! - The command runs in its own process group; SIGINT, SIGTERM, SIGHUP and SIGQUIT
//!   sent to the wrapper are forwarded to that group; the exit status is the child's,
//!   and death by signal N exits 128+N.
//! - New items are pushed by a change notification on the store (SQLite: inotify on
//!   the state directory, since every commit touches the WAL; PostgreSQL: `LISTEN` on
//!   a connection of its own, held by a thread that wakes the wait loop through a
//!   socket pair), with a once-a-second safety poll; the wrapper never polls faster
//!   than that. The notification is set up only once the command has run
//!   [`WATCH_AFTER`] (the store is read again then), so a command that ends sooner
//!   costs no inotify instance and no second connection.
//! - Without a store, the wrapper replaces itself with the command (`execvp`): no
//!   output added, no process in between.
//! - A broken store never stops the command: the wrapper warns once and runs it.
//! - Under a fleet (a session among its targets), the first stopping signal makes the
//!   wrapper note its command as cut off before it forwards the signal
//!   (`agent::inflight`).

use super::desk::{Desk, Steering};
use super::wake::{listen, watch_dir, Drained, Watch};
use crate::clock::{Clock, Micros};
use crate::error::{Error, Result};
use crate::store::{Authority, Item, Location, Store, Target};
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::signal::{killpg, SigSet, Signal};
use nix::sys::signalfd::{SfdFlags, SignalFd};
use nix::unistd::Pid;
use std::collections::HashMap;
use std::ffi::OsString;
use std::io::Write;
use std::os::fd::AsFd;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Re-show an unanswered item this long after it was last shown, then the next gap;
/// the last gap repeats.
pub const BACKOFF: [Duration; 3] = [
    Duration::from_secs(15),
    Duration::from_secs(60),
    Duration::from_secs(300),
];
/// The safety poll when no change notification arrives.
const SAFETY_POLL: Duration = Duration::from_secs(1);
/// How long after a change notification the store is read once more.
pub const SETTLE: Duration = Duration::from_millis(30);
/// How long the command runs before the wrapper watches the store for changes.
const WATCH_AFTER: Duration = Duration::from_millis(50);

/// The variable a lane sets in its agent's environment to say how steering reaches
/// it: [`DELIVER_MESSAGE`] when its profile delivers steering as the user's messages
/// (`deliver = "message"`), so the wrapper shows none on stderr.
pub const DELIVERY_VAR: &str = "SPICE_DELIVER";
pub const DELIVER_MESSAGE: &str = "message";

/// Everything the wrapper needs, gathered by the CLI layer.
pub struct ExecConfig {
    pub argv: Vec<OsString>,
    /// The state directory, if there is one; `None` or a missing database = no store.
    pub state_dir: Option<PathBuf>,
    /// The PostgreSQL server the state directory's store is on (its URL), if it is:
    /// then the store is there, whatever the directory holds.
    pub postgres: Option<String>,
    /// The supervisor's desk, under a fleet: then the steering is asked there (for the
    /// caller's own seat), and the store is never opened.
    pub desk: Option<Desk>,
    /// Whom the items must be addressed to (session, lane, worktree).
    pub targets: Vec<Target>,
    pub backoff: Vec<Duration>,
    /// Whether steering is shown on stderr: not when the agent's profile delivers
    /// it as messages (its CLI tells its model to ignore directives in tool output).
    pub readout: bool,
}

const SIGNALS: [Signal; 5] = [
    Signal::SIGINT,
    Signal::SIGTERM,
    Signal::SIGHUP,
    Signal::SIGQUIT,
    Signal::SIGCHLD,
];

/// Runs the command and returns the exit code the wrapper must exit with.
pub fn run(cfg: ExecConfig, clock: Arc<dyn Clock>) -> Result<i32> {
    if cfg.argv.is_empty() {
        return Err(Error::input(
            "spice exec needs a command: spice exec -- CMD [ARG]...",
        ));
    }
    let (store, reopen) = open(&cfg, &clock)?;
    let mut shower = Shower {
        store,
        reopen,
        retry_at: None,
        failing: false,
        targets: cfg.targets,
        readout: cfg.readout,
        backoff: if cfg.backoff.is_empty() {
            BACKOFF.to_vec()
        } else {
            cfg.backoff
        },
        schedule: HashMap::new(),
    };
    shower.show(Moment::Before);

    // Block the signals we handle so they arrive on a signalfd instead of killing us;
    // the child gets an empty mask back before it execs.
    let mut mask = SigSet::empty();
    for s in SIGNALS {
        mask.add(s);
    }
    mask.thread_block()
        .map_err(|e| Error::Other(format!("failed to block signals: {e}")))?;
    let sfd = SignalFd::with_flags(&mask, SfdFlags::SFD_NONBLOCK | SfdFlags::SFD_CLOEXEC)
        .map_err(|e| Error::Other(format!("failed to open a signalfd: {e}")))?;

    let take_tty = foreground_tty();
    let mut cmd = std::process::Command::new(&cfg.argv[0]);
    cmd.args(&cfg.argv[1..])
        .env("SPICE_EXEC_ACTIVE", "1")
        .process_group(0);
    // Always through fork with this pre-exec step, never std's posix_spawn path: with
    // posix_spawn, the command a killed agent left running under this wrapper (the
    // wrapper, its shell and the command) outlived the agent's shim, every time
    // (`tests/it/agents_e2e.rs`, the real CLIs killed mid-command); the cause was not
    // pinned down.
    // SAFETY: only async-signal-safe calls (sigaction, tcsetpgrp, sigprocmask)
    // between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            if take_tty {
                // Become the terminal's foreground group so the command can read it;
                // ignoring SIGTTOU for the call is what shells do.
                let ign = nix::sys::signal::SigAction::new(
                    nix::sys::signal::SigHandler::SigIgn,
                    nix::sys::signal::SaFlags::empty(),
                    SigSet::empty(),
                );
                let old = nix::sys::signal::sigaction(Signal::SIGTTOU, &ign)?;
                let _ = nix::unistd::tcsetpgrp(std::io::stdin(), nix::unistd::getpid());
                nix::sys::signal::sigaction(Signal::SIGTTOU, &old)?;
            }
            SigSet::empty().thread_set_mask()?;
            Ok(())
        });
    }
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            let _ = SigSet::all().thread_unblock();
            let name = cfg.argv[0].to_string_lossy();
            return Err(if e.kind() == std::io::ErrorKind::NotFound {
                Error::Exit(127, format!("{name}: command not found"))
            } else {
                Error::Exit(126, format!("{name}: {e}"))
            });
        }
    };
    let pgid = Pid::from_raw(child.id() as i32);
    let _ = nix::unistd::setpgid(pgid, pgid); // also from the parent: no race either way

    // The change notification is set up only once the command has run WATCH_AFTER:
    // a command that ends sooner (most of an agent's) never pays for an inotify
    // instance, whose closing can block in the kernel for milliseconds. Until then the
    // wrapper wakes at WATCH_AFTER anyway and reads the store once more.
    let mut watch: Option<Watch> = None;
    let mut watch_at = shower.store.as_ref().map(|_| Instant::now() + WATCH_AFTER);
    let session = shower
        .targets
        .iter()
        .find(|t| t.kind == crate::store::TargetKind::Session)
        .map(|t| t.name.clone());
    let mut signalled_note = match (&cfg.state_dir, session) {
        (Some(dir), Some(session)) if shower.store.is_some() => {
            let dir = dir.clone();
            let command = crate::agent::inflight::command_text(
                &cfg.argv
                    .iter()
                    .map(|a| a.to_string_lossy().into_owned())
                    .collect::<Vec<_>>(),
            )
            .unwrap_or_default();
            Some(move || {
                crate::agent::inflight::note_signalled(&dir, &session, std::process::id(), &command)
            })
        }
        _ => None,
    };
    // A change notification can arrive before the writer's commit is visible (SQLite
    // writes WAL frames, then publishes the commit through shared memory, which makes
    // no event), so every burst of events is followed by one settled re-check.
    let mut recheck: Option<Instant> = None;
    let status = loop {
        if let Some(st) = child
            .try_wait()
            .map_err(|e| Error::Other(format!("wait failed: {e}")))?
        {
            break st;
        }
        if watch_at.is_some_and(|at| at <= Instant::now()) {
            watch_at = None;
            watch = match (&cfg.desk, &cfg.postgres) {
                (Some(desk), _) => desk.watch().ok().map(Watch::Listener),
                (None, Some(url)) => listen(url).map(Watch::Listener),
                (None, None) => cfg.state_dir.as_deref().and_then(watch_dir).map(Watch::Dir),
            };
            // Whatever was committed before the watch existed made no event.
            shower.show(Moment::During);
        }
        let mut wait = shower.next_due().min(SAFETY_POLL);
        for at in [recheck, watch_at].into_iter().flatten() {
            wait = wait.min(at.saturating_duration_since(Instant::now()));
        }
        let timeout = PollTimeout::try_from(wait.as_millis().clamp(1, 60_000) as i32)
            .unwrap_or(PollTimeout::NONE);
        let (sig_ready, store_changed) = {
            let mut fds = vec![PollFd::new(sfd.as_fd(), PollFlags::POLLIN)];
            if let Some(w) = &watch {
                fds.push(PollFd::new(w.fd(), PollFlags::POLLIN));
            }
            match poll(&mut fds, timeout) {
                Ok(_) => {
                    let ready = |f: &PollFd| f.revents().is_some_and(|r| !r.is_empty());
                    (ready(&fds[0]), fds.get(1).is_some_and(ready))
                }
                Err(nix::errno::Errno::EINTR) => (false, false),
                Err(e) => return Err(Error::Other(format!("poll failed: {e}"))),
            }
        };
        if sig_ready {
            while let Ok(Some(info)) = sfd.read_signal() {
                let sig = Signal::try_from(info.ssi_signo as i32).ok();
                if let Some(sig) = sig.filter(|s| *s != Signal::SIGCHLD) {
                    // The agent's whole group may be stopping: note the command first,
                    // so the next session learns it was cut off (`agent::inflight`).
                    if let Some(note) = signalled_note.take() {
                        note();
                    }
                    let _ = killpg(pgid, sig);
                }
            }
        }
        if store_changed {
            match watch.as_mut().map(Watch::drain) {
                Some(Drained::Settle) => recheck = Some(Instant::now() + SETTLE),
                Some(Drained::Visible) | None => {}
                // The listener ended (it warned why): the safety poll goes on.
                Some(Drained::Gone) => watch = None,
            }
        } else if recheck.is_some_and(|at| at <= Instant::now()) {
            recheck = None;
        }
        // The command ended (its SIGCHLD woke the wait): what is due is shown once,
        // after it, not read a second time here.
        if let Some(st) = child
            .try_wait()
            .map_err(|e| Error::Other(format!("wait failed: {e}")))?
        {
            break st;
        }
        shower.show(Moment::During);
    };
    if take_tty {
        reclaim_tty();
    }
    let _ = SigSet::all().thread_unblock();
    shower.show(Moment::After);
    if cfg.postgres.is_none() && cfg.desk.is_none() {
        // The process ends now: a SQLite connection is left for the kernel to end (its
        // locks go with the process; every write it made was committed), as on any exit
        // without destructors. Closing it freed the whole parsed schema, and the last
        // connection's close checkpointed the WAL into the database file, which is the
        // next writer's to do: a tenth of the wrapper's work for nothing it needs.
        std::mem::forget(shower);
    }
    Ok(match (status.code(), status.signal()) {
        (Some(code), _) => code,
        (None, Some(sig)) => 128 + sig,
        _ => 1,
    })
}

#[derive(Clone, Copy, PartialEq)]
enum Moment {
    Before,
    During,
    After,
}

/// Where the steering is read: the desk, the PostgreSQL server, or the SQLite file
/// (`Err` carries the command run in place: no store, no wrapper), and how to reach
/// it again after a failure (the desk and PostgreSQL: a lost connection is worth
/// another try, a SQLite file that failed is not).
fn open(cfg: &ExecConfig, clock: &Arc<dyn Clock>) -> Result<Opened> {
    let unavailable = |e: Error| {
        warn(&format!(
            "steering unavailable ({e}); running the command anyway"
        ));
    };
    if let Some(desk) = &cfg.desk {
        let again = desk.clone();
        let reopen: Reopen = Box::new(move || Ok(Box::new(again.clone()) as Box<dyn Steering>));
        return Ok((Some(Box::new(desk.clone())), Some(reopen)));
    }
    if let Some(url) = &cfg.postgres {
        let store = match crate::store::connect(&Location::Postgres(url.clone()), clock.clone()) {
            Ok(s) => Some(Box::new(s) as Box<dyn Steering>),
            Err(e) => {
                unavailable(e);
                None
            }
        };
        let (url, clock) = (url.clone(), clock.clone());
        let reopen: Reopen = Box::new(move || {
            crate::store::connect(&Location::Postgres(url.clone()), clock.clone())
                .map(|s| Box::new(s) as Box<dyn Steering>)
        });
        return Ok((store, Some(reopen)));
    }
    let db = cfg
        .state_dir
        .as_ref()
        .map(|d| d.join(crate::store::DB_FILE))
        .filter(|p| p.exists());
    let Some(db) = db else {
        return Err(exec_in_place(&cfg.argv));
    };
    let store = match Store::open(&db, clock.clone()) {
        // Recording a showing may wait briefly for a writer, never long enough to
        // delay forwarding a signal noticeably.
        Ok(s) => s
            .set_busy_timeout(Duration::from_millis(250))
            .ok()
            .map(|()| Box::new(Box::new(s) as Box<dyn Authority>) as Box<dyn Steering>),
        Err(e) => {
            unavailable(e);
            None
        }
    };
    Ok((store, None))
}

/// Reaches the steering again after a failure.
type Reopen = Box<dyn Fn() -> Result<Box<dyn Steering>>>;

/// The steering as first reached (`None`: unavailable, said), and how to reach it again.
type Opened = (Option<Box<dyn Steering>>, Option<Reopen>);

/// Decides what to show when, and records each showing.
struct Shower {
    store: Option<Box<dyn Steering>>,
    /// How to open the store again once it failed (PostgreSQL only: a lost connection
    /// is worth another try, a SQLite file that failed is not), at most once per
    /// [`SAFETY_POLL`] (`retry_at`).
    reopen: Option<Reopen>,
    retry_at: Option<Instant>,
    /// Said on stderr that steering is unavailable, and not back since: said once.
    failing: bool,
    targets: Vec<Target>,
    readout: bool,
    backoff: Vec<Duration>,
    /// Items shown by this run: when each is due again and how many times it was shown.
    schedule: HashMap<String, (Instant, usize)>,
}

impl Shower {
    fn next_due(&self) -> Duration {
        let now = Instant::now();
        self.schedule
            .values()
            .map(|(due, _)| due.saturating_duration_since(now))
            .min()
            .unwrap_or(SAFETY_POLL)
    }

    /// The store, opened again when it failed and a retry is due.
    fn store(&mut self) -> Option<&mut Box<dyn Steering>> {
        if self.store.is_none() {
            if let (Some(reopen), Some(at)) = (&self.reopen, self.retry_at) {
                if Instant::now() >= at {
                    match reopen() {
                        Ok(s) => {
                            self.store = Some(s);
                            self.retry_at = None;
                        }
                        Err(_) => self.retry_at = Some(Instant::now() + SAFETY_POLL),
                    }
                }
            }
        }
        self.store.as_mut()
    }

    /// The store failed: said once, dropped, and (where it can be) tried again at once.
    fn lost(&mut self, e: &Error) {
        if !self.failing {
            let again = if self.reopen.is_some() {
                "; trying again meanwhile"
            } else {
                ""
            };
            warn(&format!("steering unavailable ({e}){again}"));
            self.failing = true;
        }
        self.store = None;
        if self.reopen.is_some() {
            self.retry_at = Some(Instant::now());
        }
    }

    /// The due items and the store's clock; a failure is tried once more on a new
    /// connection (the first may have been lost).
    fn read(&mut self) -> Option<(Vec<Item>, Micros)> {
        for _ in 0..2 {
            let targets = std::mem::take(&mut self.targets);
            let got = self.store().map(|store| store.due(&targets));
            self.targets = targets;
            match got? {
                Ok(got) => {
                    self.failing = false;
                    return Some(got);
                }
                Err(e) => self.lost(&e),
            }
        }
        None
    }

    fn show(&mut self, moment: Moment) {
        if !self.readout {
            return;
        }
        let Some((items, wall)) = self.read() else {
            return;
        };
        let now = Instant::now();
        let due: Vec<&Item> = items
            .iter()
            .filter(|i| match (moment, self.schedule.get(&i.key)) {
                (Moment::During, Some((when, _))) => *when <= now,
                _ => true,
            })
            .collect();
        if due.is_empty() {
            return;
        }
        let _ = std::io::stderr().write_all(frame(&due, wall).as_bytes());
        let (due, _) = newest(&due);
        for i in &due {
            let n = self.schedule.get(&i.key).map_or(0, |(_, n)| n + 1);
            let gap = self.backoff[n.min(self.backoff.len() - 1)];
            self.schedule.insert(i.key.clone(), (now + gap, n));
        }
        let keys: Vec<String> = due.iter().map(|i| i.key.clone()).collect();
        let Some(store) = self.store.as_mut() else {
            return;
        };
        if let Err(e) = store.mark_shown(&keys) {
            warn(&format!("could not record shown items ({e})"));
        }
    }
}

/// At most this many items are framed at once: a flood of pending items is shown as
/// the newest few and a count, never as megabytes on every command's stderr.
pub const FRAME_MAX: usize = 5;

/// The items a frame shows (the newest [`FRAME_MAX`], in the order given) and how
/// many it leaves out. Only those shown are to be marked shown.
pub fn newest<'a>(items: &[&'a Item]) -> (Vec<&'a Item>, usize) {
    if items.len() <= FRAME_MAX {
        return (items.to_vec(), 0);
    }
    let mut order: Vec<usize> = (0..items.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse((items[i].created, i)));
    let mut keep: Vec<usize> = order[..FRAME_MAX].to_vec();
    keep.sort_unstable();
    (
        keep.into_iter().map(|i| items[i]).collect(),
        items.len() - FRAME_MAX,
    )
}

/// The framed block on stderr. Framed so it cannot be mistaken for the command's own
/// output; it tells the agent exactly how to answer. It shows what [`newest`] keeps,
/// and says how many more wait.
pub fn frame(items: &[&Item], now: Micros) -> String {
    let (items, more) = newest(items);
    let mut out = String::new();
    let n = items.len() + more;
    let plural = if n == 1 { "item" } else { "items" };
    out.push_str(&format!("\n┌── spice: {n} steering {plural} for you ──\n"));
    if more > 0 {
        out.push_str(&format!(
            "│ (the newest {}; {more} older wait: `spice inbox` lists them all)\n",
            items.len()
        ));
    }
    for i in &items {
        out.push_str(&format!(
            "│ [{}] from the operator, {} ago, shown {} time(s) before\n",
            i.key,
            crate::when::span(now - i.created),
            i.shown
        ));
        for line in i.text.lines() {
            out.push_str(&format!("│   {line}\n"));
        }
    }
    out.push_str(
        "│ Answer each in your next reply, on its own line: ACK <key>: <what you did>\n\
         │ or, if you will not do it, NACK <key>: <why not>.\n",
    );
    out.push_str("└──\n");
    out
}

/// Replaces this process with the command; returns only on failure.
fn exec_in_place(argv: &[OsString]) -> Error {
    let e = std::process::Command::new(&argv[0]).args(&argv[1..]).exec();
    let name = argv[0].to_string_lossy();
    if e.kind() == std::io::ErrorKind::NotFound {
        Error::Exit(127, format!("{name}: command not found"))
    } else {
        Error::Exit(126, format!("{name}: {e}"))
    }
}

/// True if stdin is a terminal whose foreground group is ours.
fn foreground_tty() -> bool {
    let stdin = std::io::stdin();
    nix::unistd::isatty(std::os::fd::AsRawFd::as_raw_fd(&stdin)).unwrap_or(false)
        && nix::unistd::tcgetpgrp(&stdin).is_ok_and(|g| g == nix::unistd::getpgrp())
}

fn reclaim_tty() {
    let _ = nix::sys::signal::SigSet::from(Signal::SIGTTOU).thread_block();
    let _ = nix::unistd::tcsetpgrp(std::io::stdin(), nix::unistd::getpgrp());
}

pub(super) fn warn(msg: &str) {
    let _ = writeln!(std::io::stderr(), "spice exec: {msg}");
}
