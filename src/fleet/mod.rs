//! The supervisor: one thread per lane (see [`lane`]), one supervisor per state
//! directory (an exclusive lock on `supervisor.pid`, released by the kernel the moment
//! the holder dies).
//!
//! A lane's sessions are launched through the agent shim, confined by the paths
//! [`confine`] names; what a confined agent may not do itself (ending a phase) it asks
//! of the supervisor's [`desk`].

pub mod activity;
pub mod attach;
pub mod brief;
pub mod confine;
pub mod crash_loop;
pub mod desk;
pub mod events;
mod follow;
pub mod gc;
pub mod hosts;
pub mod lane;
mod launch;
pub mod needs;
pub mod notify;
pub mod status;
mod warm;

use crate::config::fleet::FleetConfig;
use crate::error::{Error, Result};
use serde::Serialize;
use std::ffi::OsString;
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

/// What the supervisor needs besides the configuration, gathered by the CLI layer.
#[derive(Clone)]
pub struct FleetOptions {
    pub state_dir: PathBuf,
    /// Where the store is: the state directory's SQLite file, or the PostgreSQL
    /// server several hosts' supervisors share.
    pub location: crate::store::Location,
    pub repo: PathBuf,
    /// The branch task branches start from when a lane names none.
    pub base: String,
    pub spice: PathBuf,
    pub home: PathBuf,
    pub path: String,
    /// The environment git may see (filtered again by the git runner).
    pub vars: Vec<(OsString, OsString)>,
    /// The bash startup file of the shell redirector.
    pub bash_env: PathBuf,
    /// Stop each lane when nothing is ready for it (the demo and tests).
    pub until_idle: bool,
    /// The wall clock the store stamps leases, ledger entries and rows with.
    pub clock: Arc<dyn crate::clock::Clock>,
    /// Where a lane sends an ended session's transcript to be archived; set by
    /// [`up`] for its lanes (`None`: the lane archives it itself).
    pub archive: Option<crate::archive::worker::Queue>,
    /// This host's name among the supervisors sharing the store.
    pub host: String,
    /// This supervisor's row in the store; set by [`up`] for its lanes, which run only
    /// once they take their lane ([`hosts`]). `None`: a lane runs without asking.
    pub supervisor: Option<i64>,
    /// The sessions running now, which the supervisor's desk answers
    /// ([`desk`]).
    pub seats: desk::Seats,
}

impl FleetOptions {
    /// A connection to the fleet's store, whichever backend holds it.
    pub fn connect(&self) -> Result<Box<dyn crate::store::Authority>> {
        crate::store::connect(&self.location, self.clock.clone())
    }
}

/// What a lane did in this run.
#[derive(Debug, Clone, Default, Serialize)]
pub struct LaneReport {
    pub lane: String,
    pub claimed: Vec<String>,
    pub sessions: Vec<String>,
    pub error: Option<String>,
    /// The lane stopped because of its error (it did not finish its run), or, with
    /// `--until-idle`, handed a claim back and left its task pending.
    pub failed: bool,
}

/// Holds the supervisor lock for its lifetime.
pub struct Lock {
    _file: nix::fcntl::Flock<std::fs::File>,
}

/// Takes the one-supervisor-per-state-directory lock, or names its holder.
pub fn lock(state_dir: &std::path::Path) -> Result<Lock> {
    std::fs::create_dir_all(state_dir).map_err(|source| Error::Io {
        context: format!("failed to create {}", state_dir.display()),
        source,
    })?;
    let path = state_dir.join("supervisor.pid");
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .map_err(|source| Error::Io {
            context: format!("failed to open {}", path.display()),
            source,
        })?;
    let mut locked =
        match nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusiveNonblock) {
            Ok(l) => l,
            Err(_) => {
                let holder = std::fs::read_to_string(&path).unwrap_or_default();
                let pid = holder.split_whitespace().next().unwrap_or("unknown");
                return Err(Error::conflict(format!(
                    "another supervisor holds {} (pid {pid})",
                    path.display()
                )));
            }
        };
    locked.set_len(0).ok();
    // The start time lets `fleet down` make sure it signals this process, not a later
    // one that was given the same pid.
    let me = std::process::id();
    let start = crate::agent::start_time(me).ok().flatten().unwrap_or(0);
    let _ = write!(locked, "{me} {start}");
    Ok(Lock { _file: locked })
}

/// The running supervisor for `state_dir` as (pid, start time), if one holds the lock
/// and has written its pid.
pub fn running(state_dir: &std::path::Path) -> Option<(u32, u64)> {
    match probe(state_dir) {
        Probe::Running(pid, start) => Some((pid, start)),
        Probe::Starting | Probe::None => None,
    }
}

/// What holds a state directory's supervisor lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Probe {
    /// Nobody: no supervisor runs.
    None,
    /// A supervisor holds the lock but has not written its pid yet (it empties the
    /// file, then writes): there is nothing to signal yet.
    Starting,
    /// The holder's pid and start time.
    Running(u32, u64),
}

/// Looks at the supervisor lock of `state_dir` without taking it.
pub fn probe(state_dir: &std::path::Path) -> Probe {
    let path = state_dir.join("supervisor.pid");
    let Ok(file) = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)
    else {
        return Probe::None;
    };
    match nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockSharedNonblock) {
        Ok(_) => Probe::None, // nobody holds it; dropping releases our probe at once
        Err(_) => {
            let text = std::fs::read_to_string(&path).unwrap_or_default();
            let mut parts = text.split_whitespace();
            match parts.next().and_then(|p| p.parse().ok()) {
                Some(pid) => {
                    Probe::Running(pid, parts.next().and_then(|s| s.parse().ok()).unwrap_or(0))
                }
                None => Probe::Starting,
            }
        }
    }
}

/// Asks the running supervisor to stop (SIGTERM: it stops each agent's process group
/// with a grace period, then SIGKILL; claims stay leased for successors) and waits up
/// to `wait` for its lock to be free. Returns the pid it stopped, if any. A supervisor
/// that holds the lock but has not written its pid yet is waited for, within `wait`
/// too: stopping nothing and saying so would leave it running.
pub fn down(state_dir: &std::path::Path, wait: Duration) -> Result<Option<u32>> {
    let deadline = std::time::Instant::now() + wait;
    let (pid, start) = loop {
        match probe(state_dir) {
            Probe::None => return Ok(None),
            Probe::Running(pid, start) => break (pid, start),
            Probe::Starting if std::time::Instant::now() > deadline => {
                return Err(Error::Other(format!(
                    "a supervisor is starting ({} is locked but holds no pid yet after {}s); nothing signalled: run `spice fleet down` again",
                    state_dir.join("supervisor.pid").display(),
                    wait.as_secs()
                )));
            }
            Probe::Starting => std::thread::sleep(Duration::from_millis(20)),
        }
    };
    if !crate::agent::signal_if_same(pid, start, nix::sys::signal::Signal::SIGTERM)? {
        return Err(Error::Other(format!(
            "the supervisor recorded as pid {pid} is gone or was replaced; nothing signalled"
        )));
    }
    let deadline = std::time::Instant::now() + wait;
    while running(state_dir).is_some() {
        if std::time::Instant::now() > deadline {
            return Err(Error::Other(format!(
                "supervisor pid {pid} did not stop within {}s",
                wait.as_secs()
            )));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Ok(Some(pid))
}

/// Runs every enabled lane that has its agent binary until `stop` is set (or, with
/// `until_idle`, until no lane has work).
pub fn up(
    cfg: &FleetConfig,
    opts: &FleetOptions,
    stop: Arc<AtomicBool>,
) -> Result<Vec<LaneReport>> {
    let _lock = lock(&opts.state_dir)?;
    // Records of interrupted commands are for the successors of current claimants;
    // any other is left over from a session nothing follows.
    let supervisor = {
        let mut store = opts.connect()?;
        let claimants: Vec<String> = store.claims()?.into_iter().map(|c| c.claimant).collect();
        crate::agent::inflight::prune(&opts.state_dir, &claimants);
        hosts::register(&mut *store, &opts.host)?
    };
    // Keeps this supervisor's row in force; stops every lane if another superseded it.
    let heartbeat = hosts::Heartbeat::spawn(opts, supervisor, stop.clone());
    let warmer = warm::spawn(cfg, opts, stop.clone());
    let housekeeping = housekeeping(cfg, opts);
    let archiver = crate::archive::worker::Worker::spawn(
        &opts.state_dir,
        &opts.location,
        opts.clock.clone(),
        crate::archive::worker::Bounds {
            archive: housekeeping.archive_bound(),
            sessions: housekeeping.sessions_bound(),
        },
    );
    let collector = gc::spawn(cfg, opts, housekeeping.gc, stop.clone());
    let lane_opts = FleetOptions {
        archive: Some(archiver.queue()),
        supervisor: Some(supervisor),
        ..opts.clone()
    };
    let opts = &lane_opts;
    // Where the lanes' agents ask for what a confined agent may not do itself.
    let desk = desk::serve(opts, opts.seats.clone(), stop.clone())?;
    let mut listeners: Vec<(String, std::thread::JoinHandle<()>)> = Vec::new();
    let mut handles = Vec::new();
    let enabled: Vec<_> = cfg.lanes.iter().filter(|l| l.lane.enabled).collect();
    let activity = Arc::new(activity::Activity::new(enabled.len()));
    for l in enabled.into_iter().cloned() {
        let port = attach::Port::default();
        listeners.push((
            l.name.clone(),
            attach::serve(
                &opts.state_dir,
                &l.name,
                port.clone(),
                stop.clone(),
                opts.seats.clone(),
            )?,
        ));
        let opts = opts.clone();
        let stop = stop.clone();
        let activity = activity.clone();
        let name = l.name.clone();
        handles.push((
            name,
            std::thread::spawn(move || lane::run(&l, &opts, &stop, &port, &activity)),
        ));
    }
    let reports: Vec<LaneReport> = handles
        .into_iter()
        .map(|(name, h)| {
            h.join().unwrap_or_else(|panic| {
                let why = panic
                    .downcast_ref::<String>()
                    .map(String::as_str)
                    .or_else(|| panic.downcast_ref::<&str>().copied())
                    .unwrap_or("no message");
                LaneReport {
                    lane: name,
                    error: Some(format!("lane thread panicked: {why}")),
                    failed: true,
                    ..LaneReport::default()
                }
            })
        })
        .collect();
    // The lanes are done (--until-idle) or stopping: so are their attach sockets.
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    for (lane, l) in listeners {
        attach::wake(&opts.state_dir, &lane);
        let _ = l.join();
    }
    desk::wake(&opts.state_dir);
    let _ = desk.join();
    warmer.thread().unpark();
    let _ = warmer.join();
    let _ = collector.join();
    // Every session's transcript is archived before the supervisor exits.
    drop(lane_opts);
    archiver.finish();
    // The lanes are free for another supervisor; a superseded one says so.
    heartbeat.finish()?;
    Ok(reports)
}

/// The `[archive]` and `[gc]` of the fleet's repositories (each lane's base): the
/// smallest archive bound any of them sets, and the first gc policy. `fleet up` has
/// refused problems in them before it got here ([`check_housekeeping`]).
pub fn housekeeping(
    cfg: &FleetConfig,
    opts: &FleetOptions,
) -> crate::config::housekeeping::Housekeeping {
    let mut out = crate::config::housekeeping::Housekeeping::default();
    for (_, git, base) in lane::bases(cfg, opts) {
        let Ok(Some(text)) = git.file_at(&base, "spice.toml") else {
            continue;
        };
        let shown = format!("spice.toml (at {base})");
        if let Ok(h) = crate::config::housekeeping::parse(std::path::Path::new(&shown), &text) {
            out.archive_max_bytes = match (out.archive_max_bytes, h.archive_max_bytes) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            out.sessions_max_bytes = match (out.sessions_max_bytes, h.sessions_max_bytes) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            out.gc = out.gc.or(h.gc);
        }
    }
    out
}

/// Every problem in the `[archive]` and `[gc]` each enabled lane's base carries.
pub fn check_housekeeping(
    cfg: &FleetConfig,
    opts: &FleetOptions,
) -> Vec<crate::config::ConfigError> {
    let mut errors = Vec::new();
    for (_, git, base) in lane::bases(cfg, opts) {
        let Ok(Some(text)) = git.file_at(&base, "spice.toml") else {
            continue;
        };
        let shown = format!("spice.toml (at {base})");
        if let Err(e) = crate::config::housekeeping::parse(std::path::Path::new(&shown), &text) {
            errors.extend(e);
        }
    }
    errors
}

/// Makes sure the agent a killed supervisor recorded (pid and start time) is gone:
/// SIGTERM to its group, a grace period, SIGKILL. A pid now used by another process
/// is left alone.
pub fn reap_orphan(pid: u32, start: u64) {
    use crate::agent::{signal_group_if_same, Signal};
    if !signal_group_if_same(pid, start, Signal::SIGTERM).unwrap_or(false) {
        return;
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while std::time::Instant::now() < deadline {
        if crate::agent::start_time(pid).ok().flatten() != Some(start) {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = signal_group_if_same(pid, start, Signal::SIGKILL);
}
