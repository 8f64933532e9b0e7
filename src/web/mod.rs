//! The operator's console (`spice serve`): a status page with live updates, steering
//! and stale-claim takeover, and the JSON API under `/api/` behind it.
//!
//! ```text
//!  browser ──HTTP/1.1──▶ server (header timeout, connection bound) ──▶ guard (Host,
//!                        Origin, token, JSON + x-spice on writes) ──▶ routes
//!                                                                              │
//!   /api/status ◀──────────────────────── bytes cached per commit (data_version)
//!   /api/tasks, /api/graph ◀────────────── table per graph generation, pages as bytes
//!   /api/live (SSE: "change") ◀──────────── watcher thread: PRAGMA data_version, 10 Hz
//!   /api/lanes/L/transcript[/live] ◀─────── transcripts: each file decoded once, tailed
//!   POST /api/steer, /api/takeover, /api/lanes/L/lift-hold, /api/lanes/L/budget ──▶ the store calls the CLI makes
//! ```
//!
//! Invariants:
//! - The store is the authority: the console keeps no state of its own beyond caches
//!   keyed by a generation, and writes only through the same `Store` calls as the CLI.
//!   The status document (lane rows) is keyed by a counter the watcher bumps when
//!   another connection commits; the task table and graph by the store's generation of
//!   the graph and its claims (`store::generation`), which lane rows, renewals and
//!   checkpoints do not move, so a working fleet does not rebuild the table on every
//!   lane tick. Both are also refreshed once a second (leases lapse with the clock).
//! - Store work runs on blocking threads, never on the async workers, so a slow query
//!   delays its own request only.
//! - Agent text leaves as JSON strings; the page renders it with `textContent`.
//! - Every route sits behind [`guard`]; the live streams end when the server shuts
//!   down, so a graceful shutdown never waits on an open page.

pub mod conscience;
pub mod docs;
pub mod gate;
pub mod guard;
mod routes;
pub mod server;
pub mod token;
pub mod transcripts;
mod writes;

use crate::clock::Clock;
use crate::error::{Error, Result};
use crate::store::{Store, Target};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// Reads a steering target as the operator typed it.
pub type TargetParser = Box<dyn Fn(&str) -> Result<Target> + Send + Sync>;

/// Everything the console needs, gathered by the CLI.
pub struct Config {
    pub state_dir: PathBuf,
    pub clock: Arc<dyn Clock>,
    pub guard: guard::Guard,
    /// Reads a steering target as the operator typed it (the CLI's rules).
    pub parse_target: TargetParser,
    /// How often the watcher looks for commits by others.
    pub poll: Duration,
    /// Connections served at once and the time allowed for a request head.
    pub limits: server::Limits,
}

/// How many idle store connections are kept for requests.
const POOL: usize = 8;
/// How long a cached document may be served within one generation (lease times and
/// staleness move with the clock, not only with commits).
const MAX_AGE: Duration = Duration::from_secs(1);

pub(crate) struct App {
    cfg: Config,
    pool: Mutex<Vec<Store>>,
    live: watch::Receiver<u64>,
    /// The store's generation of the graph and its claims, as the watcher last read it.
    graph: Arc<AtomicU64>,
    status: Cache<bytes::Bytes>,
    tasks: Cache<Arc<docs::TaskTable>>,
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

    /// Runs `f` with a pooled store connection on a blocking thread.
    async fn store<T, F>(self: &Arc<Self>, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&mut Store, &App) -> Result<T> + Send + 'static,
    {
        let app = self.clone();
        tokio::task::spawn_blocking(move || {
            let pooled = app.pool.lock().unwrap_or_else(|p| p.into_inner()).pop();
            let mut store = match pooled {
                Some(s) => s,
                None => Store::open_dir(&app.cfg.state_dir, app.cfg.clock.clone())?,
            };
            let out = f(&mut store, &app);
            let mut pool = app.pool.lock().unwrap_or_else(|p| p.into_inner());
            if pool.len() < POOL {
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
    // Fail now, with the store's own message, rather than on the first request.
    let watcher = Store::open_dir(&cfg.state_dir, cfg.clock.clone())?;
    listener.set_nonblocking(true).map_err(|source| Error::Io {
        context: "failed to configure the listening socket".into(),
        source,
    })?;
    let listener = tokio::net::TcpListener::from_std(listener).map_err(|source| Error::Io {
        context: "failed to register the listening socket".into(),
        source,
    })?;
    let (tx, rx) = watch::channel(0u64);
    let stop = Arc::new(AtomicBool::new(false));
    let poll = cfg.poll;
    let graph = Arc::new(AtomicU64::new(graph_number(&watcher).unwrap_or(0)));
    let watch_thread = {
        let (stop, graph) = (stop.clone(), graph.clone());
        std::thread::Builder::new()
            .name("spice-serve-watch".into())
            .spawn(move || watch_store(watcher, tx, &graph, poll, &stop))
            .map_err(|source| Error::Io {
                context: "failed to start the store watcher".into(),
                source,
            })?
    };
    let transcripts = transcripts::Transcripts::with_archive(&cfg.state_dir);
    let app = Arc::new(App {
        cfg,
        pool: Mutex::new(Vec::new()),
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
            let _ = stopping.send(true);
        }
    };
    let routes = hyper_util::service::TowerToHyperService::new(warp::service(routes::all(app)));
    let signal = tokio::spawn(stop_on_signal);
    server::run(listener, routes, limits, stop_rx).await;
    signal.abort();
    stop.store(true, Ordering::SeqCst);
    let _ = watch_thread.join();
    Ok(())
}

/// The store's graph generation as a cache key.
fn graph_number(store: &Store) -> Result<u64> {
    Ok(store.generation()?.number() as u64)
}

/// Bumps the generation whenever another connection committed, after noting the
/// store's graph generation then (so whoever hears of the commit sees both). Dropping
/// the sender when told to stop ends every live stream.
fn watch_store(
    store: Store,
    tx: watch::Sender<u64>,
    graph: &AtomicU64,
    poll: Duration,
    stop: &AtomicBool,
) {
    let mut last = store.data_version().ok();
    let mut generation = 0u64;
    let mut reported = false;
    while !stop.load(Ordering::SeqCst) {
        std::thread::sleep(poll);
        match store.data_version() {
            Ok(v) if Some(v) != last => {
                last = Some(v);
                generation += 1;
                // Unread, the table stays keyed as it was; it is still refreshed
                // once a second.
                if let Ok(g) = graph_number(&store) {
                    graph.store(g, Ordering::Release);
                }
                tx.send_replace(generation);
            }
            Ok(_) => {}
            Err(e) if !reported => {
                // Report once and keep serving what can be read; the store may recover.
                eprintln!("spice: serve: {e}");
                reported = true;
            }
            Err(_) => {}
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
