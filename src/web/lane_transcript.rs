//! A lane's transcript in the console: a page of its history
//! (`/api/lanes/L/transcript`) and the live tail of what is appended
//! (`/api/lanes/L/transcript/live`), or where it lives when another host's supervisor
//! runs the lane.

use super::routes::{error, json_value, no_lane, reply, SseItem};
use super::App;
use crate::error::{Error, Result};
use futures_util::stream::{self, Stream};
use serde::Deserialize;
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;
use warp::http::StatusCode;
use warp::reply::Response;

/// How often an open transcript stream looks for appended lines.
const TAIL_EVERY: Duration = Duration::from_millis(250);

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct PageQuery {
    before: Option<u64>,
    limit: Option<usize>,
}

/// A transcript that lives on another host: the supervisor running the lane reads and
/// archives it there, and this console never reads a path on a host it does not
/// run on (the same path here may be another file, or none).
#[derive(Debug)]
struct Elsewhere {
    lane: String,
    host: String,
    path: String,
}

impl Elsewhere {
    fn message(&self) -> String {
        format!(
            "the transcript of lane {} is on host {}: {} (run spice serve there to read it)",
            self.lane, self.host, self.path
        )
    }

    /// 404 (not here), with where it is.
    fn response(&self) -> Response {
        json_value(
            StatusCode::NOT_FOUND,
            &json!({"error": self.message(), "lane": self.lane, "host": self.host,
                    "path": self.path}),
        )
    }
}

/// The lane's current transcript path, from its row; [`Elsewhere`] when the lane is
/// run by another host's supervisor (`here`: this console's host).
fn transcript_of(
    s: &mut dyn crate::store::Authority,
    lane: &str,
    here: &str,
) -> Result<std::result::Result<Option<String>, Elsewhere>> {
    let row = s.lane(lane)?.ok_or_else(no_lane)?;
    Ok(match (row.host, row.transcript) {
        (Some(host), Some(path)) if host != here => Err(Elsewhere {
            lane: lane.to_string(),
            host,
            path,
        }),
        (_, path) => Ok(path),
    })
}

pub(super) async fn transcript_page(lane: String, q: PageQuery, app: Arc<App>) -> Response {
    let limit = q.limit.unwrap_or(200).clamp(1, 2000);
    let looked = app
        .store(move |s, app| {
            let path = match transcript_of(s, &lane, &app.cfg.host)? {
                Ok(path) => path,
                Err(elsewhere) => return Ok(Err(elsewhere)),
            };
            let mut doc = match &path {
                Some(p) => {
                    let d = app.transcripts.get(std::path::Path::new(p));
                    let page = d
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .page(q.before, limit);
                    page
                }
                None => json!({"events": [], "more": false, "last_line": 0, "epoch": 0,
                               "problem": "the lane has no transcript yet"}),
            };
            doc["lane"] = json!(lane);
            doc["path"] = json!(path);
            Ok(Ok(doc))
        })
        .await;
    match looked {
        Ok(Err(elsewhere)) => elsewhere.response(),
        Ok(Ok(doc)) => reply(Ok(doc)),
        Err(e) => error(&e),
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct TailQuery {
    after: Option<u64>,
    path: Option<String>,
    epoch: Option<u64>,
}

struct Tail {
    app: Arc<App>,
    lane: String,
    path: Option<String>,
    epoch: u64,
    after: u64,
    rx: tokio::sync::watch::Receiver<u64>,
}

/// `/api/lanes/L/transcript/live`: `events` with what was appended after `after`,
/// `reset` when the lane moved to another transcript or the file was rewritten (the
/// page then reloads the history). Ends when the server stops.
pub(super) fn tail(
    app: Arc<App>,
    lane: String,
    q: TailQuery,
) -> impl Stream<Item = SseItem> + Send + 'static {
    let rx = app.live.clone();
    let st = Tail {
        app,
        lane,
        path: q.path,
        epoch: q.epoch.unwrap_or(0),
        after: q.after.unwrap_or(0),
        rx,
    };
    stream::unfold(Some(st), |st| async move {
        let mut st = st?;
        loop {
            tokio::select! {
                _ = tokio::time::sleep(TAIL_EVERY) => {}
                r = st.rx.changed() => if r.is_err() { return None; },
            }
            let (lane, after) = (st.lane.clone(), st.after);
            let looked = st
                .app
                .store(move |s, app| {
                    let path = transcript_of(s, &lane, &app.cfg.host)?
                        .map_err(|elsewhere| Error::input(elsewhere.message()))?;
                    let Some(p) = &path else {
                        return Ok((path, 0, Vec::new()));
                    };
                    let d = app.transcripts.get(std::path::Path::new(p));
                    let d = d.lock().unwrap_or_else(|p| p.into_inner());
                    Ok((path.clone(), d.epoch(), d.after(after, 500)))
                })
                .await;
            let (path, epoch, fresh) = match looked {
                Ok(x) => x,
                Err(e) => {
                    let ev = warp::sse::Event::default()
                        .event("problem")
                        .data(e.to_string());
                    return Some((Ok(ev), None));
                }
            };
            if path != st.path || epoch != st.epoch {
                let ev = warp::sse::Event::default()
                    .event("reset")
                    .data(json!({"path": path, "epoch": epoch}).to_string());
                st.path = path;
                st.epoch = epoch;
                st.after = 0;
                return Some((Ok(ev), Some(st)));
            }
            if let Some(last) = fresh.last() {
                st.after = last.line;
                let ev = warp::sse::Event::default()
                    .event("events")
                    .data(serde_json::to_string(&fresh).expect("events serialise"));
                return Some((Ok(ev), Some(st)));
            }
        }
    })
}
