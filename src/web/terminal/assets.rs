//! The terminal view's files, embedded like the rest of the page: its script and the
//! vendored xterm.js with its fit add-on and stylesheet; and the other vendored files:
//! highlight.js and its theme (the review's colours) and the licences (pinned by
//! `web/vendor/package-lock.json`, copied by `web/vendor/refresh.sh`). Served from
//! this origin under the console's content-security policy, so nothing is loaded from
//! elsewhere and `cargo install` needs no Node.

use warp::http::{header, HeaderValue};
use warp::reply::Response;
use warp::{Filter, Rejection};

const TERMINAL_JS: &str = include_str!("../assets/terminal.js");
const XTERM_JS: &str = include_str!("../assets/vendor/xterm.js");
const XTERM_CSS: &str = include_str!("../assets/vendor/xterm.css");
const FIT_JS: &str = include_str!("../assets/vendor/addon-fit.js");
const HIGHLIGHT_JS: &str = include_str!("../assets/vendor/highlight.js");
const HIGHLIGHT_CSS: &str = include_str!("../assets/vendor/highlight.css");
const LICENSES: &str = include_str!("../assets/vendor/LICENSES.txt");

const JS: &str = "text/javascript; charset=utf-8";

/// `GET /terminal.js` and `/vendor/…`.
pub(super) fn routes(
) -> impl Filter<Extract = (Response,), Error = Rejection> + Clone + Send + Sync + 'static {
    let file = |name: &'static str, body: &'static str, kind: &'static str| {
        warp::path("vendor")
            .and(warp::path(name))
            .and(warp::path::end())
            .and(warp::get())
            .map(move || asset(body, kind))
    };
    let script = warp::path!("terminal.js")
        .and(warp::get())
        .map(|| asset(TERMINAL_JS, JS));
    script
        .or(file("xterm.js", XTERM_JS, JS))
        .unify()
        .or(file("xterm.css", XTERM_CSS, "text/css; charset=utf-8"))
        .unify()
        .or(file("addon-fit.js", FIT_JS, JS))
        .unify()
        .or(file("highlight.js", HIGHLIGHT_JS, JS))
        .unify()
        .or(file(
            "highlight.css",
            HIGHLIGHT_CSS,
            "text/css; charset=utf-8",
        ))
        .unify()
        .or(file("LICENSES.txt", LICENSES, "text/plain; charset=utf-8"))
        .unify()
}

fn asset(body: &'static str, content_type: &'static str) -> Response {
    let mut r = Response::new(body.into());
    let h = r.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    r
}
