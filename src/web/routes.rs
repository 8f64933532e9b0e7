//! The routes: one guard in front of everything, then pages, JSON documents, the live
//! streams and the three writes. Handlers answer every failure themselves with a JSON
//! `{"error": "one line"}` and the status its kind calls for; rejections from routing
//! and body limits are turned into the same shape by [`recover`].

use super::guard::{Denied, Kind, Seen, CUSTOM_HEADER};
use super::lane_transcript::{tail, transcript_page, PageQuery, TailQuery};
use super::writes::{parse, steer, takeover, Empty};
use super::{payloads, App};
use crate::error::{Error, Result};
use crate::when;
use bytes::Bytes;
use futures_util::stream::{self, Stream};
use serde::Deserialize;
use serde_json::{json, Value};
use std::convert::Infallible;
use std::sync::Arc;
use warp::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use warp::reply::Response;
use warp::{Filter, Rejection};

/// The largest request body accepted (steering text is the only large field).
pub const BODY_LIMIT: u64 = 64 * 1024;

const INDEX_HTML: &str = include_str!("assets/index.html");
const APP_JS: &str = include_str!("assets/app.js");
const APP_CSS: &str = include_str!("assets/app.css");
const REVIEW_JS: &str = include_str!("assets/review.js");
const MANIFEST: &str = include_str!("assets/manifest.webmanifest");
const ICON_SVG: &str = include_str!("assets/icon.svg");

/// Scripts, styles, the web app manifest and connections from this origin only;
/// nothing inline, no frames, no forms posting anywhere.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; \
                   manifest-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'none'; \
                   frame-ancestors 'none'";

#[derive(Debug)]
struct Refused(Denied);
impl warp::reject::Reject for Refused {}

pub(super) fn all(
    app: Arc<App>,
) -> impl Filter<Extract = (Response,), Error = Infallible> + Clone + Send + Sync + 'static {
    let with_app = {
        let app = app.clone();
        warp::any().map(move || app.clone())
    };
    let guard = {
        let app = app.clone();
        warp::method()
            .and(warp::path::full())
            .and(warp::header::headers_cloned())
            .and_then(move |m: Method, p: warp::path::FullPath, h: HeaderMap| {
                let app = app.clone();
                async move {
                    let kind = kind_of(&m, p.as_str());
                    app.cfg
                        .guard
                        .check(kind, &seen(&h))
                        .map_err(|d| warp::reject::custom(Refused(d)))
                }
            })
            .untuple_one()
    };
    let get = warp::get();
    let post = warp::post();
    let body = warp::body::content_length_limit(BODY_LIMIT).and(warp::body::bytes());

    let index = warp::path::end()
        .and(get)
        .map(|| asset(INDEX_HTML, "text/html; charset=utf-8"));
    let js = warp::path!("app.js")
        .and(get)
        .map(|| asset(APP_JS, "text/javascript; charset=utf-8"));
    let review_js = warp::path!("review.js")
        .and(get)
        .map(|| asset(REVIEW_JS, "text/javascript; charset=utf-8"));
    let css = warp::path!("app.css")
        .and(get)
        .map(|| asset(APP_CSS, "text/css; charset=utf-8"));
    // What makes the console installable as an app (reach stays a transport matter).
    let manifest = warp::path!("manifest.webmanifest")
        .and(get)
        .map(|| asset(MANIFEST, "application/manifest+json"));
    let icon_svg = warp::path!("icon.svg")
        .and(get)
        .map(|| asset(ICON_SVG, "image/svg+xml"));
    // No icon: an empty answer keeps the browser from logging a 404 on every load.
    let icon = warp::path!("favicon.ico").and(get).map(|| {
        let mut r = Response::new(Bytes::new().into());
        *r.status_mut() = StatusCode::NO_CONTENT;
        r
    });
    let login = warp::path!("login")
        .and(get)
        .and(warp::query::<LoginQuery>())
        .and(with_app.clone())
        .map(login);

    let status = warp::path!("api" / "status")
        .and(get)
        .and(with_app.clone())
        .then(status);
    let live = warp::path!("api" / "live")
        .and(get)
        .and(with_app.clone())
        .map(|app: Arc<App>| {
            warp::sse::reply(warp::sse::keep_alive().stream(changes(app))).into_response_()
        });
    let tasks = warp::path!("api" / "tasks")
        .and(get)
        .and(warp::query::<TasksQuery>())
        .and(with_app.clone())
        .then(tasks);
    let graph = warp::path!("api" / "graph")
        .and(get)
        .and(warp::query::<GraphQuery>())
        .and(with_app.clone())
        .then(graph);
    let ledger = warp::path!("api" / "tasks" / String / "ledger")
        .and(get)
        .and(with_app.clone())
        .then(|id: String, app: Arc<App>| async move {
            reply(app.store(move |s, _| payloads::ledger(s, &id)).await)
        });
    let review = warp::path!("api" / "tasks" / String / "review")
        .and(get)
        .and(with_app.clone())
        .then(|id: String, app: Arc<App>| async move {
            reply(
                app.store(move |s, app| super::review::doc(s, &app.cfg.git, &id))
                    .await,
            )
        });
    let gate = warp::path!("api" / "gate")
        .and(get)
        .and(with_app.clone())
        .then(|app: Arc<App>| async move { reply(app.store(|s, _| super::gate::doc(s)).await) });
    let conscience = warp::path!("api" / "conscience")
        .and(get)
        .and(with_app.clone())
        .then(
            |app: Arc<App>| async move { reply(app.store(|s, _| super::conscience::doc(s)).await) },
        );
    let claims = warp::path!("api" / "claims")
        .and(get)
        .and(with_app.clone())
        .then(|app: Arc<App>| async move {
            reply(
                app.store(|s, _| {
                    let now = s.now()?;
                    let c = s.claims()?;
                    Ok(json!({
                        "now": when::rfc3339(now),
                        "claims": c.iter().map(|c| payloads::claim_doc(c, now)).collect::<Vec<_>>(),
                    }))
                })
                .await,
            )
        });
    let inbox = warp::path!("api" / "inbox")
        .and(get)
        .and(warp::query::<InboxQuery>())
        .and(with_app.clone())
        .then(|q: InboxQuery, app: Arc<App>| async move {
            reply(
                app.store(move |s, _| payloads::inbox(s, q.all.unwrap_or(false)))
                    .await,
            )
        });
    let lane_inbox = warp::path!("api" / "lanes" / String / "inbox")
        .and(get)
        .and(warp::query::<InboxQuery>())
        .and(with_app.clone())
        .then(|lane: String, q: InboxQuery, app: Arc<App>| async move {
            let all = q.all.unwrap_or(false);
            let doc = app
                .store(move |s, _| payloads::lane_inbox(s, &lane, all)?.ok_or_else(no_lane))
                .await;
            reply(doc)
        });
    let transcript = warp::path!("api" / "lanes" / String / "transcript")
        .and(get)
        .and(warp::query::<PageQuery>())
        .and(with_app.clone())
        .then(transcript_page);
    let transcript_live = warp::path!("api" / "lanes" / String / "transcript" / "live")
        .and(get)
        .and(warp::query::<TailQuery>())
        .and(with_app.clone())
        .map(|lane: String, q: TailQuery, app: Arc<App>| {
            warp::sse::reply(warp::sse::keep_alive().stream(tail(app, lane, q))).into_response_()
        });

    let steer = warp::path!("api" / "steer")
        .and(post)
        .and(body)
        .and(with_app.clone())
        .then(steer);
    let takeover = warp::path!("api" / "takeover")
        .and(post)
        .and(body)
        .and(with_app.clone())
        .then(takeover);
    let lift = warp::path!("api" / "lanes" / String / "lift-hold")
        .and(post)
        .and(body)
        .and(with_app.clone())
        .then(|lane: String, body: Bytes, app: Arc<App>| async move {
            if let Err(e) = parse::<Empty>(&body) {
                return error(&e);
            }
            reply(
                app.store(move |s, _| {
                    s.lift_hold(&lane)?;
                    Ok(json!({"lane": lane, "lifted": true}))
                })
                .await,
            )
        });

    // A lane's terminal: its stream and writes, behind the same guard.
    let terminal = super::terminal::routes(app.clone());

    let budget = warp::path!("api" / "lanes" / String / "budget")
        .and(post)
        .and(body)
        .and(with_app.clone())
        .then(super::writes::budget);

    let pages = index
        .or(js)
        .unify()
        .or(review_js)
        .unify()
        .or(css)
        .unify()
        .or(icon)
        .unify()
        .or(manifest)
        .unify()
        .or(icon_svg)
        .unify()
        .or(login)
        .unify();
    let reads = status
        .or(live)
        .unify()
        .or(tasks)
        .unify()
        .or(graph)
        .unify()
        .or(ledger)
        .unify()
        .or(review)
        .unify()
        .or(claims)
        .unify()
        .or(gate)
        .unify()
        .or(conscience)
        .unify()
        .or(inbox)
        .unify()
        .or(lane_inbox)
        .unify()
        .or(transcript)
        .unify()
        .or(transcript_live)
        .unify();
    let writes = steer
        .or(takeover)
        .unify()
        .or(lift)
        .unify()
        .or(budget)
        .unify();
    guard
        .and(
            pages
                .or(reads)
                .unify()
                .or(writes)
                .unify()
                .or(terminal)
                .unify(),
        )
        .recover(recover)
        .unify()
        .map(secure)
}

/// Which checks a request gets besides `Host`.
fn kind_of(m: &Method, path: &str) -> Kind {
    if path == "/login" {
        Kind::Login
    } else if m != Method::GET && m != Method::HEAD {
        Kind::Mutate
    } else if path == "/api/live"
        || path.ends_with("/transcript/live")
        || path.ends_with("/terminal/live")
    {
        Kind::Stream
    } else {
        Kind::Read
    }
}

fn seen(h: &HeaderMap) -> Seen<'_> {
    let get = |name: &str| h.get(name).and_then(|v| v.to_str().ok());
    Seen {
        host: get("host"),
        origin: get("origin"),
        sec_fetch_site: get("sec-fetch-site"),
        authorization: get("authorization"),
        cookie: get("cookie"),
        content_type: get("content-type"),
        custom: get(CUSTOM_HEADER),
    }
}

/// Headers every answer carries.
fn secure(mut r: Response) -> Response {
    let h = r.headers_mut();
    h.insert("content-security-policy", HeaderValue::from_static(CSP));
    h.insert(
        "x-content-type-options",
        HeaderValue::from_static("nosniff"),
    );
    h.insert("x-frame-options", HeaderValue::from_static("DENY"));
    h.insert("referrer-policy", HeaderValue::from_static("no-referrer"));
    h.entry(header::CACHE_CONTROL)
        .or_insert(HeaderValue::from_static("no-store"));
    r
}

trait IntoResponse {
    fn into_response_(self) -> Response;
}
impl<T: warp::Reply> IntoResponse for T {
    fn into_response_(self) -> Response {
        self.into_response()
    }
}

fn asset(body: &'static str, content_type: &'static str) -> Response {
    let mut r = Response::new(body.into());
    r.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    r.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    r
}

fn json_bytes(status: StatusCode, body: Bytes) -> Response {
    let mut r = Response::new(body.into());
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}

pub(super) fn json_value(status: StatusCode, v: &Value) -> Response {
    json_bytes(
        status,
        Bytes::from(serde_json::to_vec(v).expect("JSON values serialise")),
    )
}

fn error_status(status: StatusCode, msg: &str) -> Response {
    let one_line = msg.split('\n').map(str::trim).collect::<Vec<_>>().join(" ");
    json_value(status, &json!({ "error": one_line }))
}

/// A store error as an HTTP answer: bad input 400, conflict 409, the rest 500.
pub(super) fn error(e: &Error) -> Response {
    let status = match e {
        Error::Input(_) => StatusCode::BAD_REQUEST,
        e if e.is_conflict() => StatusCode::CONFLICT,
        Error::Store(_) => StatusCode::SERVICE_UNAVAILABLE,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    };
    error_status(status, &e.to_string())
}

pub(super) fn reply(r: Result<Value>) -> Response {
    match r {
        Ok(v) => json_value(StatusCode::OK, &v),
        Err(e) => error(&e),
    }
}

pub(super) fn no_lane() -> Error {
    Error::input("no such lane: the supervisor has not reported on it")
}

async fn recover(r: Rejection) -> std::result::Result<Response, Infallible> {
    use warp::reject::{
        InvalidQuery, LengthRequired, MethodNotAllowed, PayloadTooLarge, UnsupportedMediaType,
    };
    let (status, msg) = if let Some(Refused(d)) = r.find::<Refused>() {
        (
            StatusCode::from_u16(d.status).unwrap_or(StatusCode::FORBIDDEN),
            d.reason.clone(),
        )
    } else if r.find::<PayloadTooLarge>().is_some() {
        (
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("request body larger than {BODY_LIMIT} bytes"),
        )
    } else if r.find::<LengthRequired>().is_some() {
        (
            StatusCode::LENGTH_REQUIRED,
            "a request body needs a Content-Length".into(),
        )
    } else if r.find::<UnsupportedMediaType>().is_some() {
        (
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported content type".into(),
        )
    } else if r.find::<InvalidQuery>().is_some() {
        (
            StatusCode::BAD_REQUEST,
            "invalid query string (see 'The JSON API' in docs/console.md)".into(),
        )
    } else if r.is_not_found() {
        (StatusCode::NOT_FOUND, "no such page or API".into())
    } else if r.find::<MethodNotAllowed>().is_some() {
        (
            StatusCode::METHOD_NOT_ALLOWED,
            "method not allowed here".into(),
        )
    } else {
        (StatusCode::BAD_REQUEST, "bad request".into())
    };
    Ok(error_status(status, &msg))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct LoginQuery {
    token: String,
}

fn login(q: LoginQuery, app: Arc<App>) -> Response {
    if !app.cfg.guard.needs_token() {
        return redirect_home(None);
    }
    if !app.cfg.guard.token_matches(&q.token) {
        return error_status(StatusCode::UNAUTHORIZED, "wrong token");
    }
    redirect_home(Some(&q.token))
}

fn redirect_home(token: Option<&str>) -> Response {
    let mut r = Response::new(Bytes::new().into());
    *r.status_mut() = StatusCode::SEE_OTHER;
    r.headers_mut()
        .insert(header::LOCATION, HeaderValue::from_static("/"));
    if let Some(t) = token {
        let cookie = format!(
            "{}={t}; HttpOnly; SameSite=Strict; Path=/",
            super::guard::COOKIE
        );
        if let Ok(v) = HeaderValue::from_str(&cookie) {
            r.headers_mut().insert(header::SET_COOKIE, v);
        }
    }
    r
}

async fn status(app: Arc<App>) -> Response {
    let g = app.generation();
    let a = app.clone();
    let doc = app
        .status
        .get(g, async move {
            let v = a
                .store(move |s, app| {
                    let supervisor = crate::fleet::running(&app.cfg.state_dir).map(|(pid, _)| pid);
                    let mut v = payloads::status(s, &app.cfg.host, supervisor)?;
                    v["generation"] = json!(g);
                    Ok(v)
                })
                .await?;
            Ok(Bytes::from(
                serde_json::to_vec(&v).expect("JSON values serialise"),
            ))
        })
        .await;
    match doc {
        Ok(b) => json_bytes(StatusCode::OK, b),
        Err(e) => error(&e),
    }
}

async fn task_table(app: &Arc<App>) -> Result<Arc<payloads::TaskTable>> {
    let g = app.graph_generation();
    let a = app.clone();
    app.tasks
        .get(g, async move {
            a.store(|s, _| payloads::task_table(s).map(Arc::new)).await
        })
        .await
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TasksQuery {
    category: Option<String>,
    q: Option<String>,
    offset: Option<usize>,
    limit: Option<usize>,
}

async fn tasks(q: TasksQuery, app: Arc<App>) -> Response {
    if let Some(c) = &q.category {
        if !payloads::CATEGORIES.contains(&c.as_str()) {
            return error_status(
                StatusCode::BAD_REQUEST,
                &format!(
                    "invalid category {c:?}: expected one of {}",
                    payloads::CATEGORIES.join(", ")
                ),
            );
        }
    }
    match task_table(&app).await {
        Ok(t) => json_bytes(
            StatusCode::OK,
            t.page_bytes(
                q.category.as_deref(),
                q.q.as_deref(),
                q.offset.unwrap_or(0),
                q.limit.unwrap_or(100).min(1000),
            ),
        ),
        Err(e) => error(&e),
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct GraphQuery {
    limit: Option<usize>,
}

async fn graph(q: GraphQuery, app: Arc<App>) -> Response {
    match task_table(&app).await {
        Ok(t) => json_bytes(
            StatusCode::OK,
            t.graph_bytes(q.limit.unwrap_or(60).min(400)),
        ),
        Err(e) => error(&e),
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct InboxQuery {
    all: Option<bool>,
}

pub(super) type SseItem = std::result::Result<warp::sse::Event, Infallible>;

/// `/api/live`: a `change` event with the store generation now and after each commit
/// by anyone; ends when the server stops.
fn changes(app: Arc<App>) -> impl Stream<Item = SseItem> + Send + 'static {
    let rx = app.live.clone();
    stream::unfold((rx, true), |(mut rx, first)| async move {
        if !first && rx.changed().await.is_err() {
            return None;
        }
        let g = *rx.borrow_and_update();
        let ev = warp::sse::Event::default()
            .event("change")
            .data(g.to_string());
        Some((Ok(ev), (rx, false)))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_kinds() {
        assert_eq!(kind_of(&Method::GET, "/api/status"), Kind::Read);
        assert_eq!(kind_of(&Method::GET, "/api/live"), Kind::Stream);
        assert_eq!(
            kind_of(&Method::GET, "/api/lanes/a/transcript/live"),
            Kind::Stream
        );
        assert_eq!(
            kind_of(&Method::GET, "/api/lanes/a/terminal/live"),
            Kind::Stream
        );
        assert_eq!(
            kind_of(&Method::POST, "/api/lanes/a/terminal/input"),
            Kind::Mutate
        );
        assert_eq!(kind_of(&Method::POST, "/api/steer"), Kind::Mutate);
        assert_eq!(kind_of(&Method::PUT, "/anything"), Kind::Mutate);
        assert_eq!(kind_of(&Method::GET, "/login"), Kind::Login);
    }
}
