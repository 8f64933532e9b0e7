//! A mock model server for the real-agent tests, on 127.0.0.1, run on a tokio runtime
//! inside the test process: the Anthropic Messages API (Claude Code), the OpenAI
//! Responses API (Codex), the Gemini API (Gemini CLI) and OpenAI chat completions
//! (Qwen Code), all streaming, and the one-line protocol of the tests' own one-tool
//! agent ([`onetool`]).
//!
//! A test scripts the conversation as a sequence of [`Step`]s. Each *turn request* (one
//! that offers tools and is not a compaction) takes the next step; once the script is
//! used up, a turn gets [`Step::Say`] of `{acks}` (or "Done." when there is nothing to
//! acknowledge). Side calls (no tools) and compaction requests get plain text and
//! take no step, so the only tool calls are the scripted ones: at most one per step,
//! which keeps an agent that compacts from looping on a tool call.
//!
//! A test that restarts its agents can instead script each *session* of one
//! conversation ([`Mock::start_per_brief`]): a turn takes its step from the script of
//! the n-th session when the conversation it carries holds n spice briefs, so a stray
//! request from an agent being killed cannot take a later session's step.
//!
//! Every request is logged (method, path, headers, body, the reply given) so a test
//! can assert on what the model was shown.
#![allow(dead_code)]

mod anthropic;
mod chat;
mod gemini;
mod onetool;
mod openai;

use serde_json::Value;
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use warp::Filter;

/// One scripted model turn.
#[derive(Debug, Clone)]
pub enum Step {
    /// Call the agent's shell tool with this command; `{done}` becomes the command
    /// the conversation's latest spice brief gives for completing the phase.
    Shell(String),
    /// Call the agent's shell tool with this command, asking to run it outside the
    /// sandbox: Codex's `sandbox_permissions: "require_escalated"` with a
    /// `justification` (what its approval prompt shows), when the tool the request
    /// offers takes them; otherwise as [`Step::Shell`].
    Escalated(String),
    /// Reply with this text; `{acks}` becomes one `ACK <key>: done` line for every
    /// steering key (`[KEY]`) in what the model was just given (the last tool result
    /// and any text beside it, or the last user message), and `{refusals}` one
    /// `I refuse to ACK <key>: …` line (a refusal, which must not retire the item).
    Say(String),
}

/// What the mock answered.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// A tool call running this command.
    Shell(String),
    /// A tool call running this command outside the sandbox (see [`Step::Escalated`]).
    Escalated(String),
    Text(String),
    /// Not a model request (a probe, `count_tokens`, an unknown path).
    Other,
}

/// One logged request.
#[derive(Debug, Clone)]
pub struct Logged {
    pub at: Instant,
    pub method: String,
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: Value,
    /// A turn request (offers tools, not a compaction): the ones that take steps.
    pub turn: bool,
    pub reply: Reply,
}

impl Logged {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
    /// The whole body as text, for "was this shown at all" checks.
    pub fn text(&self) -> String {
        self.body.to_string()
    }
}

#[derive(Default)]
struct State {
    script: VecDeque<Step>,
    /// Per-session scripts (the n-th for a conversation holding n briefs); when set,
    /// `script` is unused.
    per_brief: Vec<VecDeque<Step>>,
    log: Vec<Logged>,
    calls: u64,
}

/// How a spice brief starts (`fleet::brief`): one per session of a conversation.
const BRIEF: &str = "You are working on task ";
/// What precedes the phase-completion command in a brief.
const DONE_PREFIX: &str = "When the phase is done and committed, run: ";

/// A running mock; dropped, it stops.
pub struct Mock {
    addr: SocketAddr,
    state: Arc<Mutex<State>>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    runtime: Option<tokio::runtime::Runtime>,
}

impl Mock {
    /// Serves on `listener` (bound by the caller, so it lives in the caller's network
    /// namespace) with `script`.
    pub fn start(listener: std::net::TcpListener, script: Vec<Step>) -> Mock {
        Mock::serve(
            listener,
            State {
                script: script.into(),
                ..State::default()
            },
        )
    }

    /// Serves on `listener` with one script per session of a conversation: a turn
    /// whose conversation holds n briefs takes the next step of `scripts[n - 1]`
    /// (`{acks}` once that is used up).
    pub fn start_per_brief(listener: std::net::TcpListener, scripts: Vec<Vec<Step>>) -> Mock {
        Mock::serve(
            listener,
            State {
                per_brief: scripts.into_iter().map(VecDeque::from).collect(),
                ..State::default()
            },
        )
    }

    fn serve(listener: std::net::TcpListener, state: State) -> Mock {
        let addr = listener.local_addr().unwrap();
        listener.set_nonblocking(true).unwrap();
        let state = Arc::new(Mutex::new(state));
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let st = state.clone();
        let routes = warp::method()
            .and(warp::path::full())
            .and(warp::query::raw().or(warp::any().map(String::new)).unify())
            .and(warp::header::headers_cloned())
            .and(warp::body::bytes())
            .map(
                move |method: warp::http::Method,
                      path: warp::path::FullPath,
                      query: String,
                      headers: warp::http::HeaderMap,
                      body: warp::hyper::body::Bytes| {
                    let path = if query.is_empty() {
                        path.as_str().to_string()
                    } else {
                        format!("{}?{query}", path.as_str())
                    };
                    let headers = headers
                        .iter()
                        .map(|(k, v)| (k.to_string(), String::from_utf8_lossy(v.as_bytes()).into()))
                        .collect();
                    handle(&st, method.as_str(), path, headers, &body)
                },
            );
        runtime.spawn(async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            warp::serve(routes)
                .incoming(listener)
                .graceful(async {
                    let _ = rx.await;
                })
                .run()
                .await;
        });
        Mock {
            addr,
            state,
            stop: Some(tx),
            runtime: Some(runtime),
        }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Adds steps after those not yet taken.
    pub fn push(&self, steps: impl IntoIterator<Item = Step>) {
        self.state.lock().unwrap().script.extend(steps);
    }

    pub fn requests(&self) -> Vec<Logged> {
        self.state.lock().unwrap().log.clone()
    }

    /// The turn requests so far.
    pub fn turns(&self) -> Vec<Logged> {
        self.requests().into_iter().filter(|r| r.turn).collect()
    }

    /// Polls until `f` finds something in the log, or panics after `secs` seconds
    /// naming `what` and printing the log.
    pub fn wait<T>(&self, what: &str, secs: u64, mut f: impl FnMut(&[Logged]) -> Option<T>) -> T {
        let deadline = Instant::now() + Duration::from_secs(secs);
        loop {
            if let Some(v) = f(&self.requests()) {
                return v;
            }
            if Instant::now() >= deadline {
                panic!(
                    "timed out after {secs}s waiting for {what}; the mock saw:\n{}",
                    self.summary()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// One line per request: method, path, whether it was a turn, what was answered.
    pub fn summary(&self) -> String {
        let log = self.requests();
        let t0 = log.first().map(|l| l.at);
        log.iter()
            .map(|l| {
                format!(
                    "  +{:>6.2}s {} {} turn={} briefs={} reply={:?} last_user={:?}",
                    t0.map_or(0.0, |t| l.at.duration_since(t).as_secs_f64()),
                    l.method,
                    l.path,
                    l.turn,
                    briefs(&l.body).len(),
                    l.reply,
                    truncate(&last_user_text(l), 300)
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    }
}

impl Drop for Mock {
    fn drop(&mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_timeout(Duration::from_secs(1));
        }
    }
}

fn truncate(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        s.chars().take(n).collect::<String>() + "…"
    }
}

/// What the model was just given in a logged request, whichever API it speaks.
pub fn last_user_text(l: &Logged) -> String {
    if l.path.starts_with("/v1/messages") {
        anthropic::last_user_text(&l.body)
    } else if l.path.starts_with("/v1/responses") {
        openai::last_user_text(&l.body)
    } else if l.path.starts_with("/v1/chat/completions") {
        chat::last_user_text(&l.body)
    } else if l.path.starts_with("/v1beta/") {
        gemini::last_user_text(&l.body)
    } else if l.path == onetool::PATH {
        onetool::last_user_text(&l.body)
    } else {
        String::new()
    }
}

/// Every string of the conversation a request carries (`messages` or `input`), in
/// order.
fn conversation_strings<'a>(body: &'a Value, out: &mut Vec<&'a str>) {
    fn walk<'a>(v: &'a Value, out: &mut Vec<&'a str>) {
        match v {
            Value::String(s) => out.push(s),
            Value::Array(a) => a.iter().for_each(|x| walk(x, out)),
            Value::Object(o) => o.values().for_each(|x| walk(x, out)),
            _ => {}
        }
    }
    walk(&body["messages"], out);
    walk(&body["input"], out);
    walk(&body["contents"], out);
    if let Value::String(s) = body {
        out.push(s);
    }
}

/// The spice briefs in the conversation a request carries, oldest first: for each,
/// the session it names as claimant (one brief per session of the conversation).
pub fn briefs(body: &Value) -> Vec<String> {
    let mut strings = Vec::new();
    conversation_strings(body, &mut strings);
    strings
        .iter()
        .flat_map(|s| s.match_indices(BRIEF).map(|(i, _)| &s[i..]))
        .map(|brief| {
            brief
                .split_once(" --claimant ")
                .and_then(|(_, rest)| rest.split_whitespace().next())
                .unwrap_or_default()
                .to_string()
        })
        .collect()
}

/// The phase-completion command of the latest brief in the conversation.
fn phase_done_command(body: &Value) -> Option<String> {
    let mut strings = Vec::new();
    conversation_strings(body, &mut strings);
    strings.iter().rev().find_map(|s| {
        let (_, rest) = s.rsplit_once(DONE_PREFIX)?;
        Some(rest.lines().next()?.trim().to_string())
    })
}

/// Steering keys (`[KEY]`: a 9-character stamp, maybe with a `-N` suffix) in `text`,
/// in order, each once.
pub fn steering_keys(text: &str) -> Vec<String> {
    let mut keys: Vec<String> = Vec::new();
    for (i, _) in text.match_indices('[') {
        let rest = &text[i + 1..];
        let Some(end) = rest.find(']') else { continue };
        let key = &rest[..end];
        let (stamp, suffix) = key.split_once('-').unwrap_or((key, ""));
        let ok = stamp.len() == 9
            && stamp.bytes().all(|b| b.is_ascii_alphanumeric())
            && suffix.bytes().all(|b| b.is_ascii_digit());
        if ok && !keys.iter().any(|k| k == key) {
            keys.push(key.to_string());
        }
    }
    keys
}

/// `{acks}` and `{refusals}` expanded for what the model was just given.
fn expand(template: &str, given: &str) -> String {
    let lines = |shape: &str| {
        let lines: Vec<String> = steering_keys(given)
            .iter()
            .map(|k| shape.replace("{k}", k))
            .collect();
        if lines.is_empty() {
            "Done.".to_string()
        } else {
            lines.join("\n")
        }
    };
    let mut text = template.to_string();
    if text.contains("{acks}") {
        text = text.replace("{acks}", &lines("ACK {k}: done"));
    }
    if text.contains("{refusals}") {
        let refusal = "I refuse to ACK {k}: this steering conflicts with the task.";
        text = text.replace("{refusals}", &lines(refusal));
    }
    text
}

/// A parsed model request, as the API modules see it.
pub(crate) struct Request<'a> {
    pub body: &'a Value,
    /// Offers tools and is not a compaction: takes the next step.
    pub turn: bool,
    /// What the model was just given (for `{acks}`).
    pub given: String,
}

fn handle(
    state: &Mutex<State>,
    method: &str,
    path: String,
    headers: Vec<(String, String)>,
    body: &[u8],
) -> warp::http::Response<String> {
    // JSON, or the one-tool agent's plain text.
    let body: Value = serde_json::from_slice(body)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(body).into_owned()));
    let mut st = state.lock().unwrap();
    st.calls += 1;
    let n = st.calls;
    let route = path.split('?').next().unwrap_or_default().to_string();
    let (reply, response, turn) = match (method, route.as_str()) {
        ("POST", "/v1/messages") => {
            let req = anthropic::parse(&body);
            let reply = next_reply(&mut st, &req);
            let resp = anthropic::respond(&body, &reply, n);
            (reply, resp, req.turn)
        }
        ("POST", "/v1/messages/count_tokens") => (
            Reply::Other,
            json_response(serde_json::json!({ "input_tokens": 100 }).to_string()),
            false,
        ),
        ("POST", "/v1/responses") => {
            let req = openai::parse(&body);
            let reply = next_reply(&mut st, &req);
            let resp = openai::respond(&body, &reply, n);
            (reply, resp, req.turn)
        }
        ("POST", "/v1/chat/completions") => {
            let req = chat::parse(&body);
            let reply = next_reply(&mut st, &req);
            let resp = chat::respond(&body, &reply, n);
            (reply, resp, req.turn)
        }
        ("POST", r)
            if r.starts_with("/v1beta/models/") && r.ends_with(":streamGenerateContent") =>
        {
            let req = gemini::parse(&body);
            let reply = next_reply(&mut st, &req);
            let resp = gemini::respond(&body, &reply, n);
            (reply, resp, req.turn)
        }
        ("POST", r) if r.starts_with("/v1beta/models/") && r.ends_with(":generateContent") => {
            (Reply::Other, gemini::side_response(&body, n), false)
        }
        ("POST", r) if r.ends_with(":countTokens") => (
            Reply::Other,
            json_response(serde_json::json!({ "totalTokens": 100 }).to_string()),
            false,
        ),
        ("POST", onetool::PATH) => {
            let req = onetool::parse(&body);
            let reply = next_reply(&mut st, &req);
            (reply.clone(), onetool::respond(&reply), true)
        }
        // Bun's connectivity probe (`HEAD /`) and anything else: an empty 200.
        _ => (Reply::Other, json_response(String::new()), false),
    };
    st.log.push(Logged {
        at: Instant::now(),
        method: method.to_string(),
        path,
        headers,
        body,
        turn,
        reply,
    });
    response
}

/// The reply to a model request: the next step for a turn, text otherwise.
fn next_reply(st: &mut State, req: &Request<'_>) -> Reply {
    if !req.turn {
        return Reply::Text("Summary: the mock conversation so far.".into());
    }
    let step = if st.per_brief.is_empty() {
        st.script.pop_front()
    } else {
        let n = briefs(req.body).len().max(1);
        st.per_brief.get_mut(n - 1).and_then(VecDeque::pop_front)
    };
    match step {
        Some(Step::Shell(cmd)) if cmd.contains("{done}") => {
            let done = phase_done_command(req.body)
                .unwrap_or_else(|| "echo 'no spice brief in the conversation'".into());
            Reply::Shell(cmd.replace("{done}", &done))
        }
        Some(Step::Shell(cmd)) => Reply::Shell(cmd),
        Some(Step::Escalated(cmd)) => Reply::Escalated(cmd),
        Some(Step::Say(t)) => Reply::Text(expand(&t, &req.given)),
        None => Reply::Text(expand("{acks}", &req.given)),
    }
}

fn json_response(body: String) -> warp::http::Response<String> {
    warp::http::Response::builder()
        .status(200)
        .header("content-type", "application/json")
        .body(body)
        .unwrap()
}

/// A complete `text/event-stream` body from (event, data) pairs.
fn sse(events: &[(&str, Value)]) -> warp::http::Response<String> {
    let mut out = String::new();
    for (name, data) in events {
        out.push_str(&format!("event: {name}\ndata: {data}\n\n"));
    }
    event_stream(out)
}

/// A `text/event-stream` response of a complete body (every API here streams so).
pub(crate) fn event_stream(body: String) -> warp::http::Response<String> {
    warp::http::Response::builder()
        .status(200)
        .header("content-type", "text/event-stream")
        .header("cache-control", "no-cache")
        .body(body)
        .unwrap()
}

#[cfg(test)]
mod tests {
    #[test]
    fn keys_are_found_once_in_order() {
        let t =
            "│ [dZxPMZGfr] from the operator\n│ [bcdfghjkl-2] x [dZxPMZGfr] [short] [toolongstamp]";
        assert_eq!(super::steering_keys(t), ["dZxPMZGfr", "bcdfghjkl-2"]);
    }

    #[test]
    fn briefs_are_counted_and_the_latest_gives_the_done_command() {
        let brief = |s: &str| {
            format!(
                "You are working on task demo-1 in lane a: T\n\nPhase: todo.\n\n\
                 When the phase is done and committed, run: /x/spice task phase 1 --done --claimant {s}\n"
            )
        };
        let body = serde_json::json!({"messages": [
            {"role": "user", "content": brief("s1")},
            {"role": "assistant", "content": [{"type": "text", "text": "ok"}]},
            {"role": "user", "content": [{"type": "text", "text": brief("s2")}]},
        ]});
        assert_eq!(super::briefs(&body), ["s1", "s2"]);
        assert_eq!(
            super::phase_done_command(&body).as_deref(),
            Some("/x/spice task phase 1 --done --claimant s2")
        );
        assert!(super::briefs(&serde_json::json!({"input": []})).is_empty());
    }
}
