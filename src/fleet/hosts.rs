//! One supervisor per host, several hosts on one store: the supervisor registers its
//! row (host, pid, start time), keeps it in force with a heartbeat, and each lane runs
//! only once it took the lane ([`crate::store::Authority::take_lane`]).
//!
//! Invariants:
//! - A lane runs on one supervisor at a time. A lane another supervisor in force runs
//!   waits, asking again every [`HEARTBEAT`], and takes it once that supervisor's
//!   heartbeat lapsed (its host is lost): its claims then pass to successor sessions
//!   here, fenced, exactly as after a supervisor restart on one machine.
//! - A lane whose `hosts` do not name this host does not run here, and says so.
//! - A supervisor superseded by another (one that took a lane from it after its
//!   heartbeat lapsed, or a later one registered for the same host) stops every lane at
//!   once: its agents stop, their claims stay for the successors elsewhere.
//! - The store out of reach (a server restart) is waited out: the heartbeat tries
//!   again, and a lease of [`LEASE`] covers a restart of several seconds.

use super::FleetOptions;
use crate::error::{Error, Result};
use crate::store::{Authority, LaneTake};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long a supervisor's row stays in force without a heartbeat: after that, its
/// host counts as lost and another host may take its lanes.
pub const LEASE: Duration = Duration::from_secs(10);
/// How often the row is renewed, and how often a waiting lane asks again.
pub const HEARTBEAT: Duration = Duration::from_secs(2);

/// Registers this supervisor (superseding this host's earlier rows).
pub fn register(store: &mut dyn Authority, host: &str) -> Result<i64> {
    let me = std::process::id();
    let started = crate::agent::start_time(me).ok().flatten().unwrap_or(0);
    store.register_supervisor(host, me, started, LEASE)
}

/// The heartbeat thread of a supervisor.
pub struct Heartbeat {
    done: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
    /// Why the supervisor had to stop, when another superseded it.
    superseded: Arc<Mutex<Option<String>>>,
    id: i64,
    opts: FleetOptions,
}

impl Heartbeat {
    /// Renews supervisor `id`'s row every [`HEARTBEAT`] until finished; sets `stop`
    /// when the row was superseded.
    pub fn spawn(opts: &FleetOptions, id: i64, stop: Arc<AtomicBool>) -> Heartbeat {
        let done = Arc::new(AtomicBool::new(false));
        let superseded = Arc::new(Mutex::new(None));
        let thread = {
            let (done, superseded, opts) = (done.clone(), superseded.clone(), opts.clone());
            std::thread::Builder::new()
                .name("spice-heartbeat".into())
                .spawn(move || beat(&opts, id, &stop, &done, &superseded))
                .ok()
        };
        Heartbeat {
            done,
            thread,
            superseded,
            id,
            opts: opts.clone(),
        }
    }

    /// Stops the heartbeat and ends the row (its lanes are free, its host not lost);
    /// the error says so if the supervisor was superseded meanwhile.
    pub fn finish(mut self) -> Result<()> {
        self.stop_and_end();
        match self.superseded.lock().unwrap().take() {
            Some(why) => Err(Error::conflict(why)),
            None => Ok(()),
        }
    }

    fn stop_and_end(&mut self) {
        self.done.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            t.thread().unpark();
            let _ = t.join();
            if self.superseded.lock().unwrap().is_none() {
                if let Ok(mut store) = self.opts.connect() {
                    // A lane may have learned first that another supervisor superseded
                    // this one (its row's write refused) and stopped before the next
                    // beat: one last beat asks, so the supervisor still ends saying so.
                    match store.supervisor_heartbeat(self.id, LEASE) {
                        Err(Error::Conflict(why)) => {
                            tracing::warn!(target: "spice", "{why}");
                            *self.superseded.lock().unwrap() = Some(why);
                        }
                        _ => {
                            let _ = store.end_supervisor(self.id);
                        }
                    }
                }
            }
        }
    }
}

impl Drop for Heartbeat {
    fn drop(&mut self) {
        self.stop_and_end();
    }
}

fn beat(
    opts: &FleetOptions,
    id: i64,
    stop: &AtomicBool,
    done: &AtomicBool,
    superseded: &Mutex<Option<String>>,
) {
    let mut store: Option<Box<dyn Authority>> = None;
    let mut said_unreachable = false;
    let mut next = Instant::now() + HEARTBEAT;
    while !done.load(Ordering::SeqCst) {
        if Instant::now() < next {
            // Unparked by stop_and_end.
            std::thread::park_timeout(next.saturating_duration_since(Instant::now()));
            continue;
        }
        next = Instant::now() + HEARTBEAT;
        let result = match store.as_mut() {
            Some(s) => s.supervisor_heartbeat(id, LEASE),
            None => opts.connect().and_then(|mut s| {
                let r = s.supervisor_heartbeat(id, LEASE);
                store = Some(s);
                r
            }),
        };
        match result {
            Ok(()) => {
                if said_unreachable {
                    tracing::info!(target: "spice", "the store at {} is back", opts.location.describe());
                    said_unreachable = false;
                }
            }
            Err(Error::Conflict(why)) => {
                tracing::warn!(target: "spice", "{why}; stopping every lane of this supervisor");
                *superseded.lock().unwrap() = Some(why);
                stop.store(true, Ordering::SeqCst);
                crate::store::nudge();
                return;
            }
            Err(e) => {
                if !said_unreachable {
                    tracing::warn!(
                        target: "spice", "heartbeat: {e}; trying again every {}s (the lanes' runs \
                         are kept for {}s without one)",
                        HEARTBEAT.as_secs(),
                        LEASE.as_secs()
                    );
                    said_unreachable = true;
                }
                if !e.is_unreachable() {
                    store = None;
                }
            }
        }
    }
}

/// What a lane learned when it asked to run.
pub enum Take {
    /// It runs here now; `from` names the lost host it was taken from.
    Run { from: Option<String> },
    /// It does not run here: why (another host runs it and this run ends when idle, or
    /// its `hosts` do not name this host).
    Not(String),
    /// The supervisor is stopping.
    Stopping,
}

/// Takes lane `name` for supervisor `id`, waiting while another supervisor in force
/// runs it (asking every [`HEARTBEAT`]) unless `wait` is false.
pub fn take(
    store: &mut dyn Authority,
    name: &str,
    id: i64,
    hosts: &[String],
    wait: bool,
    stopping: &dyn Fn() -> bool,
) -> Result<Take> {
    let mut said: Option<i64> = None;
    let mut unreachable = 0u32;
    loop {
        if stopping() {
            return Ok(Take::Stopping);
        }
        match store.take_lane(name, id, hosts) {
            Ok(LaneTake::Taken { from }) => {
                let from = from.map(|f| {
                    tracing::info!(
                        target: "spice", "lane {name}: taken from host {} (supervisor pid {}), whose \
                         heartbeat lapsed; its claims pass to successors here",
                        f.host, f.pid
                    );
                    f.host
                });
                return Ok(Take::Run { from });
            }
            Ok(LaneTake::NotAllowed { host, hosts }) => {
                let why = format!(
                    "lane {name} runs only on hosts {}; this is host {host}",
                    hosts.join(", ")
                );
                tracing::warn!(target: "spice", "{why}: it does not run here");
                return Ok(Take::Not(why));
            }
            Ok(LaneTake::Held { by }) => {
                let why = format!(
                    "lane {name} runs on host {} (supervisor pid {})",
                    by.host, by.pid
                );
                if !wait {
                    return Ok(Take::Not(why));
                }
                if said != Some(by.id) {
                    tracing::warn!(target: "spice", "{why}; this supervisor takes it if that host is lost");
                    said = Some(by.id);
                }
            }
            Err(e) if e.is_unreachable() => {
                if unreachable == 0 {
                    tracing::warn!(target: "spice", "lane {name}: {e}; trying again");
                }
                unreachable += 1;
            }
            Err(e) => return Err(e),
        }
        let until = Instant::now() + HEARTBEAT;
        while Instant::now() < until && !stopping() {
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}
