//! The console's HTTP/1.1 server: the accept loop and each connection, in front of the
//! routes (which arrive as one warp filter). warp's own server has no header-read
//! timeout and no bound on connections, so connections that never send a byte used to
//! pile up until the file limit took the console offline; this loop owns both.
//!
//! Invariants:
//! - At most [`Limits::max_connections`] connections are served at once. At the bound,
//!   a new connection displaces the one idle longest (no request in flight: it never
//!   sent a request, or sits between keep-alive requests); when every connection is
//!   busy with a request or a live stream, the new one is answered `503` and closed,
//!   never accepted and left waiting.
//! - A connection must send a complete request head within [`Limits::header_timeout`]
//!   of connecting or of its previous response, or hyper closes it. The timeout covers
//!   only the wait for a head: a live stream lasts as long as the page keeps it open.
//! - Running out of file descriptors (`EMFILE`, `ENFILE`) neither ends the loop nor
//!   spins it: the loop waits for a connection to end (or a backoff growing to
//!   [`BACKOFF_MAX`]) before accepting again. (The default bound stays below the file
//!   limit, so this happens only with descriptors used elsewhere or a bound set higher.)
//! - A connection made by a lane's agent (its process descends from an agent shim,
//!   `agent::peer`) is answered `403` and closed before a byte of its request is
//!   read: the console is the operator's, and an agent on the same host reaches its
//!   loopback address as easily as the operator's browser does.
//! - On shutdown the loop stops accepting, asks every connection to finish its request
//!   and close, and waits for them at most [`DRAIN`].

use bytes::Bytes;
use hyper::body::{Body, Frame, Incoming, SizeHint};
use hyper::server::conn::http1;
use hyper::service::Service;
use hyper::{Request, Response};
use hyper_util::rt::{TokioIo, TokioTimer};
use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Notify, OwnedSemaphorePermit, Semaphore};

/// Connections served at once unless configured otherwise.
pub const DEFAULT_MAX_CONNECTIONS: usize = 512;
/// How long a connection may take to send a request head unless configured otherwise.
pub const DEFAULT_HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// How long shutdown waits for open requests.
const DRAIN: Duration = Duration::from_secs(5);
/// How long a displaced connection may take to finish what it was writing.
const EVICT_GRACE: Duration = Duration::from_secs(1);
/// The longest wait before accepting again once file descriptors ran out.
const BACKOFF_MAX: Duration = Duration::from_secs(1);
/// Connections answered `503` at once; past this they are closed without an answer.
const REFUSING: usize = 64;

/// The bounds the server keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Connections served at once (at least 1).
    pub max_connections: usize,
    /// Time allowed for a request head, from connecting or from the previous response.
    pub header_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_connections: DEFAULT_MAX_CONNECTIONS,
            header_timeout: DEFAULT_HEADER_TIMEOUT,
        }
    }
}

/// One served connection, as the accept loop sees it.
struct Conn {
    /// Requests begun whose response body has not been dropped yet (0 or 1 in HTTP/1.1).
    in_flight: AtomicUsize,
    /// [`Registry::clock`] at the last request start or end, or at the accept.
    last_active: AtomicU64,
    /// Chosen to make room; cleared again if it turned out busy.
    evicted: AtomicBool,
    close: Notify,
}

/// Every served connection, for choosing which one makes room.
#[derive(Default)]
struct Registry {
    conns: Mutex<HashMap<u64, Arc<Conn>>>,
    /// A counter, not a time: only the order of activity matters.
    clock: AtomicU64,
    /// Signalled whenever a connection ends.
    ended: Notify,
}

impl Registry {
    fn now(&self) -> u64 {
        self.clock.fetch_add(1, Ordering::Relaxed)
    }

    fn add(&self) -> (u64, Arc<Conn>) {
        let id = self.now();
        let conn = Arc::new(Conn {
            in_flight: AtomicUsize::new(0),
            last_active: AtomicU64::new(id),
            evicted: AtomicBool::new(false),
            close: Notify::new(),
        });
        self.lock().insert(id, conn.clone());
        (id, conn)
    }

    fn remove(&self, id: u64) {
        self.lock().remove(&id);
        self.ended.notify_waiters();
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Arc<Conn>>> {
        self.conns.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Asks the connection idle longest to close; false if none is idle.
    fn evict_idle(&self) -> bool {
        let conns = self.lock();
        let victim = conns
            .values()
            .filter(|c| c.in_flight.load(Ordering::Acquire) == 0)
            .filter(|c| !c.evicted.load(Ordering::Acquire))
            .min_by_key(|c| c.last_active.load(Ordering::Relaxed));
        match victim {
            Some(c) => {
                c.evicted.store(true, Ordering::Release);
                c.close.notify_one();
                true
            }
            None => false,
        }
    }
}

/// Serves `routes` on `listener` until `shutdown` turns true.
pub async fn run<S, B>(
    listener: TcpListener,
    routes: S,
    limits: Limits,
    mut shutdown: watch::Receiver<bool>,
) where
    S: Service<Request<Incoming>, Response = Response<B>, Error = Infallible>
        + Clone
        + Send
        + Sync
        + 'static,
    S::Future: Send + 'static,
    B: Body<Data = Bytes> + Send + Unpin + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let max = limits.max_connections.max(1);
    let slots = Arc::new(Semaphore::new(max));
    let refusing = Arc::new(Semaphore::new(REFUSING));
    let registry = Arc::new(Registry::default());
    let mut http = http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout);
    let http = Arc::new(http);
    let mut backoff = Duration::ZERO;
    let mut reported_exhaustion = false;
    loop {
        let accepted = tokio::select! {
            _ = stopped(&mut shutdown) => break,
            a = listener.accept() => a,
        };
        let (stream, peer) = match accepted {
            Ok((stream, peer)) => {
                backoff = Duration::ZERO;
                (stream, peer)
            }
            Err(e) if out_of_descriptors(&e) => {
                // Linux reports this before looking at the queue, so it says nothing
                // about anyone waiting: closing an idle connection now could close
                // the one just accepted. Wait for a connection to end instead.
                if !reported_exhaustion {
                    tracing::warn!(
                        target: "spice", "serve: out of file descriptors ({e}); waiting for connections to end \
                         before accepting more"
                    );
                    reported_exhaustion = true;
                }
                backoff = (backoff * 2).clamp(Duration::from_millis(10), BACKOFF_MAX);
                tokio::select! {
                    _ = stopped(&mut shutdown) => break,
                    _ = registry.ended.notified() => {}
                    _ = tokio::time::sleep(backoff) => {}
                }
                continue;
            }
            // The peer gave up before we accepted (ECONNABORTED and the like).
            Err(_) => continue,
        };
        let Some(slot) = make_room(&slots, &registry).await else {
            if let Ok(permit) = refusing.clone().try_acquire_owned() {
                tokio::spawn(refuse(stream, max, permit));
            }
            continue;
        };
        let (id, conn) = registry.add();
        let service = Counted {
            inner: routes.clone(),
            conn: conn.clone(),
            registry: registry.clone(),
        };
        let http = http.clone();
        let registry = registry.clone();
        let shutdown = shutdown.clone();
        tokio::spawn(async move {
            match from_agent(&stream, peer).await {
                Some(pid) => refuse_agent(stream, pid).await,
                None => serve_one(&http, stream, service, &conn, shutdown).await,
            }
            registry.remove(id);
            drop(slot);
        });
    }
    // Stop accepting at once: a closed listener refuses, a queue would only time out.
    drop(listener);
    let _ = tokio::time::timeout(DRAIN, slots.acquire_many(max as u32)).await;
}

/// Completes once shutdown was asked for (or its sender is gone).
async fn stopped(shutdown: &mut watch::Receiver<bool>) {
    let _ = shutdown.wait_for(|s| *s).await;
}

/// A slot for a new connection: a free one, or one made by displacing the connection
/// idle longest. `None` when every connection is busy.
async fn make_room(slots: &Arc<Semaphore>, registry: &Registry) -> Option<OwnedSemaphorePermit> {
    loop {
        if let Ok(p) = slots.clone().try_acquire_owned() {
            return Some(p);
        }
        if !registry.evict_idle() {
            return None;
        }
        // The displaced connection ends within its grace; if it was busy after all, it
        // stays, and another is chosen.
        tokio::select! {
            p = slots.clone().acquire_owned() => return p.ok(),
            _ = tokio::time::sleep(Duration::from_millis(100)) => {}
        }
    }
}

async fn serve_one<S, B>(
    http: &http1::Builder,
    stream: TcpStream,
    service: Counted<S>,
    conn: &Conn,
    mut shutdown: watch::Receiver<bool>,
) where
    S: Service<Request<Incoming>, Response = Response<B>, Error = Infallible>,
    S::Future: Send + 'static,
    B: Body<Data = Bytes> + Send + Unpin + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let _ = stream.set_nodelay(true);
    let served = http.serve_connection(TokioIo::new(stream), service);
    tokio::pin!(served);
    // Errors here are the client's (a timeout, a reset, a malformed head, which hyper
    // has already answered): the connection ends and nothing else is affected.
    loop {
        tokio::select! {
            _ = served.as_mut() => return,
            _ = conn.close.notified() => {
                if conn.in_flight.load(Ordering::Acquire) > 0 {
                    conn.evicted.store(false, Ordering::Release);
                    continue;
                }
                served.as_mut().graceful_shutdown();
                let _ = tokio::time::timeout(EVICT_GRACE, served.as_mut()).await;
                return;
            }
            _ = stopped(&mut shutdown) => {
                served.as_mut().graceful_shutdown();
                let _ = tokio::time::timeout(DRAIN, served.as_mut()).await;
                return;
            }
        }
    }
}

/// Answers a connection there is no room for, without reading its request.
async fn refuse(stream: TcpStream, max: usize, _permit: OwnedSemaphorePermit) {
    let why = format!(
        "too many connections: all {max} are busy (spice serve --max-connections); retry shortly"
    );
    close_with(
        stream,
        "503 Service Unavailable",
        "retry-after: 1\r\n",
        &why,
    )
    .await;
}

/// The pid of a lane's process that made this connection, if one did (looked up on
/// a blocking thread: it reads `/proc`).
async fn from_agent(stream: &TcpStream, peer: std::net::SocketAddr) -> Option<u32> {
    let local = stream.local_addr().ok()?;
    tokio::task::spawn_blocking(move || crate::agent::peer::agent_of(peer, local))
        .await
        .ok()
        .flatten()
}

/// Answers a lane's agent, without reading its request.
async fn refuse_agent(stream: TcpStream, pid: u32) {
    tracing::warn!(
        target: "spice",
        "serve: refused a connection from process {pid}, which runs under a lane's agent shim"
    );
    let why = format!(
        "the console answers its operator only: process {pid} runs under a lane's agent shim"
    );
    close_with(stream, "403 Forbidden", "", &why).await;
}

/// Writes a JSON `{"error": why}` answer with `status` (and `extra` header lines)
/// and closes the connection.
async fn close_with(mut stream: TcpStream, status: &str, extra: &str, why: &str) {
    let body = serde_json::json!({ "error": why }).to_string();
    let answer = format!(
        "HTTP/1.1 {status}\r\ncontent-type: application/json\r\n\
         content-length: {}\r\n{extra}connection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = tokio::time::timeout(Duration::from_secs(1), async {
        stream.write_all(answer.as_bytes()).await?;
        stream.shutdown().await
    })
    .await;
}

fn out_of_descriptors(e: &io::Error) -> bool {
    use nix::errno::Errno;
    e.raw_os_error().map(Errno::from_raw).is_some_and(|n| {
        matches!(
            n,
            Errno::EMFILE | Errno::ENFILE | Errno::ENOBUFS | Errno::ENOMEM
        )
    })
}

/// The routes, counting each request as in flight on its connection until its
/// response body is dropped (for a live stream: until the stream ends).
#[derive(Clone)]
struct Counted<S> {
    inner: S,
    conn: Arc<Conn>,
    registry: Arc<Registry>,
}

/// Marks its connection busy while alive.
struct Busy {
    conn: Arc<Conn>,
    registry: Arc<Registry>,
}

impl Busy {
    fn new(conn: Arc<Conn>, registry: Arc<Registry>) -> Busy {
        conn.in_flight.fetch_add(1, Ordering::AcqRel);
        conn.last_active.store(registry.now(), Ordering::Relaxed);
        Busy { conn, registry }
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.conn
            .last_active
            .store(self.registry.now(), Ordering::Relaxed);
        self.conn.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}

impl<S, B> Service<Request<Incoming>> for Counted<S>
where
    S: Service<Request<Incoming>, Response = Response<B>, Error = Infallible>,
    S::Future: Send + 'static,
    B: Body + Unpin,
{
    type Response = Response<Tracked<B>>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Infallible>> + Send>>;

    fn call(&self, req: Request<Incoming>) -> Self::Future {
        let busy = Busy::new(self.conn.clone(), self.registry.clone());
        let answer = self.inner.call(req);
        Box::pin(async move {
            let r = answer.await?;
            Ok(r.map(|body| Tracked { body, _busy: busy }))
        })
    }
}

/// A response body that keeps its connection counted busy until it is dropped.
pub struct Tracked<B> {
    body: B,
    _busy: Busy,
}

impl<B: Body + Unpin> Body for Tracked<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn displaced(reg: &Registry) -> Vec<u64> {
        let mut v: Vec<u64> = reg
            .lock()
            .iter()
            .filter(|(_, c)| c.evicted.load(Ordering::Acquire))
            .map(|(id, _)| *id)
            .collect();
        v.sort();
        v
    }

    #[test]
    fn the_connection_idle_longest_makes_room_and_busy_ones_never_do() {
        let reg = Arc::new(Registry::default());
        let (a, ca) = reg.add();
        let (b, cb) = reg.add();
        let (c, _) = reg.add();
        // a serves a live stream; b answered a request after c connected.
        let stream = Busy::new(ca, reg.clone());
        drop(Busy::new(cb, reg.clone()));
        assert!(reg.evict_idle());
        assert_eq!(
            displaced(&reg),
            vec![c],
            "c never sent a request: idle longest"
        );
        assert!(reg.evict_idle());
        assert_eq!(displaced(&reg), vec![b, c]);
        assert!(!reg.evict_idle(), "a is busy: nothing left to displace");
        drop(stream);
        assert!(reg.evict_idle());
        assert_eq!(displaced(&reg), vec![a, b, c]);
    }

    #[test]
    fn running_out_of_descriptors_is_recognised() {
        for errno in [
            nix::errno::Errno::EMFILE,
            nix::errno::Errno::ENFILE,
            nix::errno::Errno::ENOBUFS,
        ] {
            assert!(out_of_descriptors(&io::Error::from_raw_os_error(
                errno as i32
            )));
        }
        assert!(!out_of_descriptors(&io::Error::from_raw_os_error(
            nix::errno::Errno::ECONNABORTED as i32
        )));
    }
}
