//! The operator's console (`spice serve`): a status page with live updates, steering
//! and stale-claim takeover, and the JSON API under `/api/` behind it. It runs on
//! either backend, through [`Authority`] only: on PostgreSQL the console on one host
//! shows the lanes of every host's supervisor and hears every host's commits.
//!
//! ```text
//!  browser ──HTTP/1.1──▶ server (header timeout, connection bound) ──▶ guard (Host,
//!                        Origin, token, JSON + x-spice on writes) ──▶ routes
//!                                                                              │
//!   /api/status ◀──────────────────────── bytes cached per change (and second)
//!   /api/tasks, /api/graph ◀────────────── table per graph generation, pages as bytes
//!   /api/live (SSE: "change") ◀──────────── watcher thread: the store's change notification
//!                                           (LISTEN on PostgreSQL, data_version on SQLite),
//!                                           lane rows after each change and every second
//!   /api/lanes/L/transcript[/live] ◀─────── transcripts: each file decoded once, tailed;
//!                                           another host's lane: where it lives (404)
//!   POST /api/steer, /api/takeover, /api/lanes/L/lift-hold, /api/lanes/L/budget ──▶ the Authority calls the CLI makes
//!   /api/lanes/L/terminal/live (SSE), POST …/terminal/keyboard|input|resize ──▶ the lane's
//!                                           attach socket (this host's lanes only; terminal)
//! ```
//!
//! Invariants:
//! - The store is the authority: the console keeps no state of its own beyond caches
//!   keyed by a generation, and writes only through the same [`Authority`] calls as
//!   the CLI. The status document (lane rows) is keyed by a counter the watcher bumps
//!   when another writer commits (the store's change token) or the lane rows differ
//!   from its last read (after each change and at least every second: PostgreSQL does
//!   not notify on a lane's report, and a host is found lost by the clock); the task
//!   table and graph by the store's generation of the graph and its claims
//!   (`store::generation`), which lane rows, renewals and checkpoints do not move, so
//!   a working fleet does not rebuild the table on every lane tick. Both are also
//!   refreshed once a second (leases lapse with the clock).
//! - Store work runs on blocking threads (a pool of connections from
//!   [`crate::store::connect`]) or the watcher's own thread, never on the async
//!   workers: a slow query delays its own request only, and the PostgreSQL client,
//!   which blocks on a runtime of its own, is never used or dropped on this one's.
//! - A transcript is read only on the host whose supervisor runs its lane (the lane
//!   row's `host`; [`Config::host`] is this one); for another host's lane the routes
//!   say where it lives.
//! - Agent text leaves as JSON strings; the page renders it with `textContent`.
//! - Every route sits behind [`guard`]; the live streams end when the server shuts
//!   down, so a graceful shutdown never waits on an open page.

pub mod conscience;
pub mod gate;
pub mod guard;
mod lane_transcript;
pub mod payloads;
pub mod review;
mod routes;
pub mod server;
mod terminal;
pub mod token;
pub mod transcripts;
mod writes;

use crate::clock::Clock;
use crate::error::{Error, Result};
use crate::store::{Authority, LaneRow, Location, Target};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// Reads a steering target as the operator typed it; with `force`, a lane no lane
/// file here defines is taken as typed (the console checks the store's lane rows).
pub type TargetParser = Box<dyn Fn(&str, bool) -> Result<Target> + Send + Sync>;

/// Everything the console needs, gathered by the CLI.
pub struct Config {
    /// The store: SQLite's file or PostgreSQL's URL.
    pub location: Location,
    /// This host's state directory: the token, the supervisor's pidfile, the archive.
    pub state_dir: PathBuf,
    /// This host's name among the fleet's supervisors: a lane another host runs has
    /// its transcript there, not here.
    pub host: String,
    pub clock: Arc<dyn Clock>,
    pub guard: guard::Guard,
    /// Reads a steering target as the operator typed it (the CLI's rules).
    pub parse_target: TargetParser,
    /// The shortest wait of the watcher for a commit by others before it looks again;
    /// it waits until the lane rows are due ([`LANES_EVERY`]) unless a commit or the
    /// console's stop (which nudges it) ends the wait.
    pub poll: Duration,
    /// Connections served at once and the time allowed for a request head.
    pub limits: server::Limits,
    /// How git is run for a task's review (read-only).
    pub git: crate::git::Runner,
}

/// How many idle store connections are kept for requests.
const POOL: usize = 8;
/// How often the watcher reads the lane rows when nothing told it of a commit: rows
/// PostgreSQL does not notify on (a lane's report) and a host found lost by the
/// clock alone still reach the page within this.
const LANES_EVERY: Duration = Duration::from_secs(1);
/// How long the watcher waits between attempts to reopen a store it lost.
const REOPEN_EVERY: Duration = Duration::from_secs(1);
/// How long a cached document may be served within one generation (lease times and
/// staleness move with the clock, not only with commits).
const MAX_AGE: Duration = Duration::from_secs(1);

pub(crate) struct App {
    cfg: Config,
    pool: Pool,
    live: watch::Receiver<u64>,
    /// The store's generation of the graph and its claims, as the watcher last read it.
    graph: Arc<AtomicU64>,
    status: Cache<bytes::Bytes>,
    tasks: Cache<Arc<payloads::TaskTable>>,
    transcripts: transcripts::Transcripts,
}

/// One cached document: computed at most once per generation and second. Within a
/// generation, a document older than [`MAX_AGE`] is served as it is, to every request
/// including the one that noticed its age, while a background task recomputes it: the
/// recomputation (tens of ms with 10,000 tasks) never sits in a request's latency
/// (issue #14: it set `/api/tasks`' p99). After a commit (a new generation) every
/// request waits for the new document.
struct Cache<T> {
    slot: Arc<tokio::sync::Mutex<Option<(u64, Instant, T)>>>,
    refreshing: Arc<AtomicBool>,
}

impl<T: Clone + Send + 'static> Cache<T> {
    fn new() -> Self {
        Cache {
            slot: Arc::new(tokio::sync::Mutex::new(None)),
            refreshing: Arc::new(AtomicBool::new(false)),
        }
    }

    async fn get<F>(&self, generation: u64, compute: F) -> Result<T>
    where
        F: std::future::Future<Output = Result<T>> + Send + 'static,
    {
        let mut slot = self.slot.lock().await;
        if let Some((g, at, v)) = slot.as_ref() {
            if *g == generation {
                if at.elapsed() >= MAX_AGE && !self.refreshing.swap(true, Ordering::AcqRel) {
                    let (cell, refreshing) = (self.slot.clone(), self.refreshing.clone());
                    tokio::spawn(async move {
                        let fresh = compute.await;
                        let mut slot = cell.lock().await;
                        refreshing.store(false, Ordering::Release);
                        // A failed refresh keeps the aged document; the next request
                        // past its age tries again.
                        if let Ok(v) = fresh {
                            if slot.as_ref().is_none_or(|(g, _, _)| *g <= generation) {
                                *slot = Some((generation, Instant::now(), v));
                            }
                        }
                    });
                }
                return Ok(v.clone());
            }
        }
        let v = compute.await?;
        *slot = Some((generation, Instant::now(), v.clone()));
        Ok(v)
    }
}

impl App {
    fn generation(&self) -> u64 {
        *self.live.borrow()
    }

    /// The generation the task table and graph are cached by.
    fn graph_generation(&self) -> u64 {
        self.graph.load(Ordering::Acquire)
    }

    /// Runs `f` with a pooled store connection on a blocking thread. A connection
    /// whose call failed for any reason but the request's own (bad input, a lost
    /// race) is not pooled again: a server gone away is reconnected by the next one.
    async fn store<T, F>(self: &Arc<Self>, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&mut dyn Authority, &App) -> Result<T> + Send + 'static,
    {
        let app = self.clone();
        tokio::task::spawn_blocking(move || {
            let pooled = app.pool.lock().pop();
            let mut store = match pooled {
                Some(s) => s,
                None => crate::store::connect(&app.cfg.location, app.cfg.clock.clone())?,
            };
            let out = f(store.as_mut(), &app);
            let sound = match &out {
                Ok(_) => true,
                Err(e) => matches!(e, Error::Input(_)) || e.is_conflict(),
            };
            let mut pool = app.pool.lock();
            if sound && pool.len() < POOL {
                pool.push(store);
            }
            out
        })
        .await
        .map_err(|e| Error::Other(format!("console worker failed: {e}")))?
    }
}

/// Serves the console on `listener` until `shutdown` completes, then lets open
/// requests finish and ends the live streams.
pub async fn serve<S>(cfg: Config, listener: std::net::TcpListener, shutdown: S) -> Result<()>
where
    S: std::future::Future<Output = ()> + Send + 'static,
{
    let (tx, rx) = watch::channel(0u64);
    let stop = Arc::new(AtomicBool::new(false));
    let graph = Arc::new(AtomicU64::new(0));
    // The watcher's connection is opened, used and dropped on its own thread: the
    // PostgreSQL client blocks on a runtime of its own, which may not run (or be
    // dropped) on this one's workers. Its first open is waited for, so a bad store
    // fails now, with the store's own message, rather than on the first request.
    let (opened_tx, opened) = tokio::sync::oneshot::channel::<Result<()>>();
    let watch_thread = {
        let (stop, graph) = (stop.clone(), graph.clone());
        let (poll, location, clock) = (cfg.poll, cfg.location.clone(), cfg.clock.clone());
        std::thread::Builder::new()
            .name("spice-serve-watch".into())
            .spawn(move || {
                let reopen = || Watch::open(&location, &clock);
                let mut watcher = match reopen() {
                    Ok(w) => w,
                    Err(e) => {
                        let _ = opened_tx.send(Err(e));
                        return;
                    }
                };
                graph.store(watcher.graph_number().unwrap_or(0), Ordering::Release);
                let _ = opened_tx.send(Ok(()));
                watch_store(watcher, reopen, tx, &graph, poll, &stop)
            })
            .map_err(|source| Error::Io {
                context: "failed to start the store watcher".into(),
                source,
            })?
    };
    let first = opened
        .await
        .unwrap_or_else(|_| Err(Error::Other("the store watcher ended at start".into())));
    if let Err(e) = first {
        let _ = watch_thread.join();
        return Err(e);
    }
    let listener = match listen_async(listener) {
        Ok(l) => l,
        Err(e) => {
            stop.store(true, Ordering::SeqCst);
            crate::store::nudge();
            let _ = watch_thread.join();
            return Err(e);
        }
    };
    let transcripts = transcripts::Transcripts::with_archive(&cfg.state_dir);
    let app = Arc::new(App {
        cfg,
        pool: Pool::default(),
        live: rx,
        graph,
        status: Cache::new(),
        tasks: Cache::new(),
        transcripts,
    });
    let limits = app.cfg.limits;
    let (stopping, stop_rx) = watch::channel(false);
    let stop_on_signal = {
        let stop = stop.clone();
        async move {
            shutdown.await;
            // The watcher ends, dropping its sender, which ends every live stream.
            stop.store(true, Ordering::SeqCst);
            crate::store::nudge();
            let _ = stopping.send(true);
        }
    };
    let routes = hyper_util::service::TowerToHyperService::new(warp::service(routes::all(app)));
    let signal = tokio::spawn(stop_on_signal);
    server::run(listener, routes, limits, stop_rx).await;
    signal.abort();
    stop.store(true, Ordering::SeqCst);
    crate::store::nudge();
    let _ = watch_thread.join();
    Ok(())
}

/// The listening socket registered with this runtime.
fn listen_async(listener: std::net::TcpListener) -> Result<tokio::net::TcpListener> {
    listener.set_nonblocking(true).map_err(|source| Error::Io {
        context: "failed to configure the listening socket".into(),
        source,
    })?;
    tokio::net::TcpListener::from_std(listener).map_err(|source| Error::Io {
        context: "failed to register the listening socket".into(),
        source,
    })
}

/// The idle connections kept for requests. Taken and given back only on blocking
/// threads; those left when the console ends are closed on a thread of their own,
/// since the PostgreSQL client's runtime may not be dropped on an async worker
/// (where the last reference to the console may go).
#[derive(Default)]
struct Pool(Mutex<Vec<Box<dyn Authority>>>);

impl Pool {
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Box<dyn Authority>>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        let idle = std::mem::take(&mut *self.lock());
        if !idle.is_empty() {
            let _ = std::thread::spawn(move || drop(idle)).join();
        }
    }
}

/// The watcher's own connection, and what it last saw through it.
struct Watch {
    store: Box<dyn Authority>,
    /// The change token as last read (only this connection's tokens compare).
    token: i64,
    /// The lane rows and the store's generation as last read, and when.
    lanes: Vec<LaneRow>,
    generation: u64,
    lanes_read: Instant,
}

impl Watch {
    fn open(location: &Location, clock: &Arc<dyn Clock>) -> Result<Watch> {
        let mut store = crate::store::connect(location, clock.clone())?;
        let token = store.change_token()?;
        let lanes = store.lanes()?;
        let generation = store.generation()?.number() as u64;
        Ok(Watch {
            store,
            token,
            lanes,
            generation,
            lanes_read: Instant::now(),
        })
    }

    /// The store's graph generation as a cache key.
    fn graph_number(&mut self) -> Result<u64> {
        Ok(self.store.generation()?.number() as u64)
    }

    /// Waits until the lane rows are due for another writer's commit (the store's
    /// change notification: `LISTEN` on PostgreSQL, the bell on SQLite); whether
    /// anything the console shows may have changed. The lane rows are read after each
    /// commit and at least every [`LANES_EVERY`], with the generation, since
    /// PostgreSQL notifies on steering, the graph and claims released or passed on but
    /// not on a lane's report or a claim taken, and a host is found lost by the clock,
    /// not by a commit.
    fn look(&mut self, poll: Duration) -> Result<bool> {
        // Until the lane rows are due (at least `poll`): a commit ends the wait at once,
        // and the console's stop nudges it (`store::nudge`), so an idle console sleeps.
        let wait = LANES_EVERY
            .saturating_sub(self.lanes_read.elapsed())
            .max(poll);
        let token = self.store.wait_change(self.token, wait)?;
        let committed = token != self.token;
        self.token = token;
        if !committed && self.lanes_read.elapsed() < LANES_EVERY {
            return Ok(false);
        }
        let lanes = self.store.lanes()?;
        let generation = self.graph_number()?;
        self.lanes_read = Instant::now();
        let moved = lanes != self.lanes || generation != self.generation;
        self.lanes = lanes;
        self.generation = generation;
        Ok(committed || moved)
    }
}

/// Bumps the generation whenever another writer committed (on any host) or the lane
/// rows changed, after noting the store's graph generation then (so whoever hears of
/// the change sees both). A store that fails is reported once and reopened (a
/// PostgreSQL server restarted); the generation is bumped when it is back. Dropping
/// the sender when told to stop ends every live stream.
fn watch_store(
    watch: Watch,
    reopen: impl Fn() -> Result<Watch>,
    tx: watch::Sender<u64>,
    graph: &AtomicU64,
    poll: Duration,
    stop: &AtomicBool,
) {
    let mut watch = Some(watch);
    let mut generation = 0u64;
    let mut reported = false;
    let mut lost_at = Instant::now();
    while !stop.load(Ordering::SeqCst) {
        let looked = match watch.as_mut() {
            Some(w) => w.look(poll),
            None if lost_at.elapsed() < REOPEN_EVERY => {
                std::thread::sleep(poll);
                continue;
            }
            None => reopen().map(|w| {
                watch = Some(w);
                reported = false;
                true
            }),
        };
        match looked {
            Ok(true) => {
                generation += 1;
                // Unread, the table stays keyed as it was; it is still refreshed
                // once a second.
                if let Some(g) = watch.as_mut().and_then(|w| w.graph_number().ok()) {
                    graph.store(g, Ordering::Release);
                }
                tx.send_replace(generation);
            }
            Ok(false) => {}
            Err(e) => {
                if !reported {
                    // Keep serving what can be read; the store may recover.
                    tracing::warn!(target: "spice", "serve: {e}");
                    reported = true;
                }
                watch = None;
                lost_at = Instant::now();
                std::thread::sleep(poll);
            }
        }
    }
}

#[cfg(test)]
mod cache_tests {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_aged_document_is_served_at_once_while_it_is_recomputed_in_the_background() {
        let cache = Arc::new(Cache::<u32>::new());
        assert_eq!(cache.get(1, async { Ok(1) }).await.unwrap(), 1);
        tokio::time::sleep(MAX_AGE + Duration::from_millis(50)).await;
        let (release, wait) = tokio::sync::oneshot::channel::<()>();
        let noticed = cache
            .get(1, async move {
                let _ = wait.await;
                Ok(2)
            })
            .await
            .unwrap();
        assert_eq!(
            noticed, 1,
            "the request that noticed the age is not kept waiting"
        );
        assert!(cache.refreshing.load(Ordering::Acquire));
        let meanwhile = cache
            .get(1, async { panic!("a second recomputation") })
            .await
            .unwrap();
        assert_eq!(meanwhile, 1, "the aged document, at once");
        release.send(()).unwrap();
        while cache.refreshing.load(Ordering::Acquire) {
            tokio::task::yield_now().await;
        }
        assert_eq!(cache.get(1, async { Ok(3) }).await.unwrap(), 2);
        // A new generation is never answered with the old document.
        assert_eq!(cache.get(2, async { Ok(4) }).await.unwrap(), 4);
    }
}
