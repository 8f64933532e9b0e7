//! A lane's terminal in the console: the agent's PTY as `spice fleet attach` sees it,
//! streamed to the page, read-only until the operator takes the keyboard.
//!
//! ```text
//!  GET  /api/lanes/L/terminal/live ──▶ connect <state>/attach/L.sock (fleet::attach)
//!       SSE: hello {page} · output (base64: the scrollback, then live) · end · problem
//!  POST /api/lanes/L/terminal/keyboard {page, take}  ──▶ ledger: keyboard_taken / _released
//!  POST /api/lanes/L/terminal/input    {page, data}  ──▶ frame `i` on the page's connection
//!  POST /api/lanes/L/terminal/resize   {page, cols, rows} ──▶ frame `r`
//! ```
//!
//! Output goes out over server-sent events, not a WebSocket: the stream and the writes
//! pass the same guard as every other route (Host, Origin, token; JSON and `x-spice`
//! on writes), and the console's own HTTP/1.1 server needs no upgrade path. Bytes are
//! base64 in each `output` event; the page hands them to xterm.js, which renders them
//! as a terminal draws text, never as HTML.
//!
//! Invariants:
//! - Each stream is one attach connection, so one session: when the session ends the
//!   supervisor closes the connection, the stream says `end` and ends, and whatever
//!   keyboard it held is released (the page opens a new stream for the next session).
//! - Only a lane this console's host runs is attached to (the socket is local); for
//!   another host's lane, none, or one without an agent running ([`NO_AGENT`]), the
//!   stream says where or why in a `problem` event.
//! - A stream ends when the console stops (its store watcher's channel closes), after
//!   recording the release of a keyboard it held; a page that goes away drops its
//!   stream, and the drop records that release (see [`keyboard`] for the rules of
//!   typing).

mod assets;
mod keyboard;

use super::routes::{no_lane, SseItem, BODY_LIMIT};
use super::App;
use crate::error::Error;
use crate::fleet::attach::NO_AGENT;
use futures_util::stream::{self, Stream};
use keyboard::Pages;
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::AsyncReadExt;
use tokio::net::unix::OwnedReadHalf;
use warp::reply::Response;
use warp::{Filter, Rejection, Reply};

/// The most output one event carries.
const READ_CHUNK: usize = 16 * 1024;
/// How often an idle stream sends a comment: a page that went away is noticed (its
/// keyboard released) within this even while the agent is quiet.
const KEEP_ALIVE: Duration = Duration::from_secs(5);

/// The terminal's routes; the pages they share live as long as the routes.
pub(super) fn routes(
    app: Arc<App>,
) -> impl Filter<Extract = (Response,), Error = Rejection> + Clone + Send + Sync + 'static {
    let pages = Arc::new(Pages::default());
    let with = warp::any()
        .map(move || (app.clone(), pages.clone()))
        .untuple_one();
    let body = warp::body::content_length_limit(BODY_LIMIT).and(warp::body::bytes());
    let live = warp::path!("api" / "lanes" / String / "terminal" / "live")
        .and(warp::get())
        .and(with.clone())
        .map(|lane: String, app: Arc<App>, pages: Arc<Pages>| {
            let events = live(app, pages, lane);
            warp::sse::reply(warp::sse::keep_alive().interval(KEEP_ALIVE).stream(events))
                .into_response()
        });
    let take = warp::path!("api" / "lanes" / String / "terminal" / "keyboard")
        .and(warp::post())
        .and(body)
        .and(with.clone())
        .then(keyboard::keyboard);
    let input = warp::path!("api" / "lanes" / String / "terminal" / "input")
        .and(warp::post())
        .and(body)
        .and(with.clone())
        .then(|lane, body, _app: Arc<App>, pages| keyboard::input(lane, body, pages));
    let resize = warp::path!("api" / "lanes" / String / "terminal" / "resize")
        .and(warp::post())
        .and(body)
        .and(with)
        .then(|lane, body, _app: Arc<App>, pages| keyboard::resize(lane, body, pages));
    assets::routes()
        .or(live)
        .unify()
        .or(take)
        .unify()
        .or(input)
        .unify()
        .or(resize)
        .unify()
}

/// One open stream: its page, its connection's output side, and how it ended.
struct Conn {
    app: Arc<App>,
    pages: Arc<Pages>,
    page: String,
    lane: String,
    output: OwnedReadHalf,
    buf: Vec<u8>,
    /// No output has been read yet.
    first: bool,
    live: tokio::sync::watch::Receiver<u64>,
}

impl Conn {
    /// Ends the page, recording the release of a keyboard it held.
    async fn finish(self, why: &'static str) {
        if let Some(task) = self.pages.close(&self.page) {
            let _ = keyboard::record_release(&self.app, &self.lane, &self.page, task, why).await;
        }
    }
}

impl Drop for Conn {
    /// The page went away (its connection closed): hyper dropped the stream. The
    /// release is recorded on a task of its own; after [`Conn::finish`] there is none.
    fn drop(&mut self) {
        let Some(task) = self.pages.close(&self.page) else {
            return;
        };
        let (app, lane, page) = (self.app.clone(), self.lane.clone(), self.page.clone());
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move {
                let _ = keyboard::record_release(&app, &lane, &page, task, "page closed").await;
            });
        }
    }
}

enum Step {
    Start(Arc<App>, Arc<Pages>, String),
    Open(Conn),
    Done,
}

fn event(name: &str, data: impl Into<String>) -> SseItem {
    Ok(warp::sse::Event::default().event(name).data(data.into()))
}

/// `/api/lanes/L/terminal/live`: `hello` with the page's id, then `output` events
/// (base64 bytes: the agent's recent output first), and `end` when the session ends;
/// `problem` instead when there is nothing here to attach to.
fn live(app: Arc<App>, pages: Arc<Pages>, lane: String) -> impl Stream<Item = SseItem> + Send {
    stream::unfold(Step::Start(app, pages, lane), |step| async move {
        match step {
            Step::Start(app, pages, lane) => match attach(app, pages, &lane).await {
                Ok(conn) => {
                    let hello = json!({"page": conn.page, "lane": lane}).to_string();
                    Some((event("hello", hello), Step::Open(conn)))
                }
                Err(why) => Some((event("problem", why), Step::Done)),
            },
            Step::Open(mut conn) => loop {
                tokio::select! {
                    read = conn.output.read(&mut conn.buf) => {
                        let n = read.unwrap_or(0);
                        let first = std::mem::replace(&mut conn.first, false);
                        if first && conn.buf[..n].starts_with(NO_AGENT) {
                            let lane = conn.lane.clone();
                            conn.finish("no agent").await;
                            let why = format!("lane {lane} has no agent running right now");
                            return Some((event("problem", why), Step::Done));
                        }
                        if n == 0 {
                            let lane = conn.lane.clone();
                            conn.finish("session ended").await;
                            let why = format!("the session on lane {lane} ended");
                            return Some((event("end", why), Step::Done));
                        }
                        let bytes = base64(&conn.buf[..n]);
                        return Some((event("output", bytes), Step::Open(conn)));
                    }
                    changed = conn.live.changed() => {
                        if changed.is_err() {
                            conn.finish("console stopped").await;
                            return None;
                        }
                    }
                }
            },
            Step::Done => None,
        }
    })
}

/// Connects a new page to `lane`'s attach socket, or says why it cannot.
async fn attach(app: Arc<App>, pages: Arc<Pages>, lane: &str) -> Result<Conn, String> {
    let name = lane.to_string();
    let here = app
        .store(move |s, app| {
            let row = s.lane(&name)?.ok_or_else(no_lane)?;
            match row.host {
                Some(host) if host != app.cfg.host => Err(Error::input(format!(
                    "lane {name} runs on host {host}: its terminal is there (run spice serve on {host})"
                ))),
                _ => Ok(()),
            }
        })
        .await;
    here.map_err(|e| e.to_string())?;
    let path = crate::fleet::attach::socket_path(&app.cfg.state_dir, lane);
    let conn = tokio::net::UnixStream::connect(&path).await.map_err(|_| {
        format!(
            "lane {lane} has no terminal here: nothing listens on {} (is `spice fleet up` running?)",
            path.display()
        )
    })?;
    let (output, keys) = conn.into_split();
    let page = pages.open(lane, keys);
    Ok(Conn {
        live: app.live.clone(),
        app,
        pages,
        page,
        lane: lane.to_string(),
        output,
        buf: vec![0; READ_CHUNK],
        first: true,
    })
}

/// Standard base64 with padding (RFC 4648 §4), as the page's `atob` reads it.
fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let at = |i: usize| chunk.get(i).copied().unwrap_or(0);
        let n = u32::from_be_bytes([0, at(0), at(1), at(2)]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[(n >> (18 - 6 * i)) as usize & 63] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::base64;

    #[test]
    fn base64_matches_rfc_4648_test_vectors() {
        for (plain, encoded) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(base64(plain.as_bytes()), encoded);
        }
        assert_eq!(base64(&[0xff, 0xfe, 0x1b]), "//4b");
    }
}
