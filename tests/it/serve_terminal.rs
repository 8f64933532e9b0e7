//! A lane's terminal in the console, through the real binaries: `spice serve` streams
//! the PTY of a `spice fleet up` lane running the built-in demo agent (which waits for
//! the operator's go-ahead), refuses keys and resizes until the page takes the
//! keyboard, and records taking and giving it back in the task's ledger, whether given
//! back by hand, by the page going away or by the session ending.

use crate::common;
use crate::common::console;

use common::{wait_for, Supervisor, TestEnv};
use console::{Server, Sse};
use serde_json::json;
use std::time::Duration;

const LIVE: &str = "/api/lanes/a/terminal/live";
const KEYBOARD: &str = "/api/lanes/a/terminal/keyboard";
const INPUT: &str = "/api/lanes/a/terminal/input";
const RESIZE: &str = "/api/lanes/a/terminal/resize";
const SOON: Duration = Duration::from_secs(20);

/// A fleet whose lane `a` runs a demo agent waiting for the operator, and the task.
fn waiting_lane() -> (TestEnv, String, Supervisor, serde_json::Value) {
    let env = TestEnv::with_lanes(&[("a", "profile = \"demo\"\nphases = [\"todo\"]\n")]);
    let task = env.add(&[
        "Wait for me",
        "--project",
        "demo",
        "--body",
        spice::demo::WAIT_MARKER,
    ]);
    let sup = env.fleet_up(&["--until-idle", "--json"]);
    let lane = wait_for("the agent to wait for input", 30, || {
        let l = env.lane("a");
        (l["state"] == "waiting").then_some(l)
    });
    (env, task, sup, lane)
}

/// An open terminal page: its stream, its id, and the output it has shown so far.
struct Page {
    sse: Sse,
    id: String,
    shown: Vec<u8>,
}

impl Page {
    fn open(srv: &Server) -> Page {
        let mut sse = srv.stream(LIVE, &[]);
        assert_eq!(sse.status(SOON), 200);
        let hello = sse.next("hello", SOON).expect("a hello event");
        let hello: serde_json::Value = serde_json::from_str(&hello).unwrap();
        assert_eq!(hello["lane"], "a");
        Page {
            sse,
            id: hello["page"].as_str().unwrap().to_string(),
            shown: Vec::new(),
        }
    }

    /// Reads output until it shows `needle`.
    #[track_caller]
    fn shows(&mut self, needle: &str) {
        while !String::from_utf8_lossy(&self.shown).contains(needle) {
            let Some(chunk) = self.sse.next("output", SOON) else {
                panic!(
                    "{needle:?} never shown; the page shows:\n{}",
                    String::from_utf8_lossy(&self.shown)
                );
            };
            self.shown.extend(unbase64(&chunk));
        }
    }

    fn keyboard(&self, srv: &Server, take: bool) -> console::Resp {
        srv.post(KEYBOARD, &json!({"page": self.id, "take": take}))
    }

    fn type_in(&self, srv: &Server, data: &str) -> console::Resp {
        srv.post(INPUT, &json!({"page": self.id, "data": data}))
    }
}

/// Standard base64 (the page's `atob`), written out so the test checks the wire itself.
fn unbase64(s: &str) -> Vec<u8> {
    let value = |c: u8| match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'+' => 62,
        b'/' => 63,
        _ => panic!("not base64: {s:?}"),
    };
    let mut out = Vec::new();
    for quad in s.trim().as_bytes().chunks(4) {
        let digits: Vec<u8> = quad
            .iter()
            .filter(|&&c| c != b'=')
            .map(|&c| value(c))
            .collect();
        let n = digits
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, &d)| n | (d as u32) << (18 - 6 * i));
        out.extend_from_slice(&n.to_be_bytes()[1..digits.len()]);
    }
    out
}

/// The `why` of each `keyboard_released` entry in the task's ledger, oldest first.
fn releases(env: &TestEnv, task: &str) -> Vec<String> {
    env.ledger_of(task, "keyboard_released")
        .iter()
        .map(|e| e["detail"]["why"].as_str().unwrap_or("").to_string())
        .collect()
}

#[test]
fn the_terminal_streams_the_lane_and_types_only_with_the_keyboard() {
    let (env, task, sup, waiting) = waiting_lane();
    let srv = Server::start(&env, &[]);
    let mut page = Page::open(&srv);
    // The scrollback first: what the agent showed before the page opened.
    page.shows(&format!("task demo-{task}"));
    page.shows("go-ahead");

    // Read-only: keys and resizes are refused, and the agent goes on waiting.
    page.type_in(&srv, "go ahead\r")
        .refused(409, "read-only: take the keyboard first");
    srv.post(RESIZE, &json!({"page": page.id, "cols": 90, "rows": 20}))
        .refused(409, "take the keyboard first");
    // Taking it is a write like any other: the guard wants the custom header.
    srv.send(
        "POST",
        KEYBOARD,
        &[("Content-Type", "application/json")],
        json!({"page": page.id, "take": true})
            .to_string()
            .as_bytes(),
    )
    .refused(403, "x-spice");
    assert!(env.ledger_of(&task, "keyboard_taken").is_empty());
    assert_eq!(env.lane("a")["state"], "waiting");

    // Taken: recorded in the task's ledger; another page of the lane is refused it.
    let taken = page.keyboard(&srv, true).expect(200);
    assert_eq!(taken["task"], task.as_str());
    let entries = env.ledger_of(&task, "keyboard_taken");
    assert_eq!(entries.len(), 1, "{entries:?}");
    assert_eq!(entries[0]["actor"], "operator");
    assert_eq!(entries[0]["detail"]["lane"], "a");
    assert_eq!(entries[0]["detail"]["page"], page.id.as_str());
    let other = Page::open(&srv);
    other
        .keyboard(&srv, true)
        .refused(409, "held by another console page");
    other.type_in(&srv, "x").refused(409, "read-only");
    drop(other);

    // The operator's size reaches the agent's PTY (its recording says so).
    srv.post(RESIZE, &json!({"page": page.id, "cols": 90, "rows": 20}))
        .expect(200);
    let cast = waiting["recording"].as_str().unwrap().to_string();
    wait_for("the resize in the recording", 10, || {
        let text = std::fs::read_to_string(&cast).unwrap();
        text.contains(r#""r","90x20""#).then_some(())
    });
    srv.post(RESIZE, &json!({"page": page.id, "cols": 0, "rows": 20}))
        .refused(400, "out of range");

    // Given back: recorded, and typing is refused again.
    page.keyboard(&srv, false).expect(200);
    assert_eq!(releases(&env, &task), ["released"]);
    page.type_in(&srv, "go ahead\r").refused(409, "read-only");
    page.keyboard(&srv, false).expect(200);
    assert_eq!(releases(&env, &task), ["released"], "released once");

    // A page that goes away while it holds the keyboard gives it back.
    page.keyboard(&srv, true).expect(200);
    drop(page);
    wait_for("the release of a page that left", 15, || {
        (releases(&env, &task) == ["released", "page closed"]).then_some(())
    });
    assert_eq!(env.lane("a")["state"], "waiting", "nothing was typed yet");

    // Typed with the keyboard: the agent echoes it and acts on it, and when its
    // session ends the page hears so and the keyboard is released with it.
    let mut page = Page::open(&srv);
    page.shows("go-ahead");
    page.keyboard(&srv, true).expect(200);
    page.type_in(&srv, "go ahead\r").expect(200);
    page.shows("go ahead");
    page.shows("$ git status --short");
    let end = page.sse.next("end", Duration::from_secs(60));
    assert_eq!(end.as_deref(), Some("the session on lane a ended"));
    wait_for("the release at the session's end", 15, || {
        let r = releases(&env, &task);
        (r.last().map(String::as_str) == Some("session ended")).then_some(())
    });
    assert_eq!(env.ledger_of(&task, "keyboard_taken").len(), 3);
    sup.finished();
    let show = env.run(&["task", "show", &task, "--json"]).json();
    assert_eq!(show["phase"], "review", "{show}");

    // Without a supervisor there is nothing to attach to, and the page is told why.
    let mut gone = srv.stream(LIVE, &[]);
    let problem = gone.next("problem", SOON).expect("a problem event");
    assert!(
        problem.contains("is `spice fleet up` running?"),
        "{problem}"
    );
}

/// Between tasks a lane's socket answers with no session: the page is told so (and
/// looks again later) rather than shown a terminal of nothing.
#[test]
fn a_lane_without_an_agent_says_so() {
    let env = TestEnv::with_lanes(&[("a", "profile = \"demo\"\nphases = [\"todo\"]\n")]);
    let _sup = env.fleet_up(&[]);
    let socket = env.home.join("attach").join("a.sock");
    wait_for("the lane's attach socket", 30, || {
        socket.exists().then_some(())
    });
    let srv = Server::start(&env, &[]);
    let problem = wait_for("the lane's row", 30, || {
        let mut sse = srv.stream(LIVE, &[]);
        let problem = sse.next("problem", SOON).expect("a problem event");
        (!problem.contains("no such lane")).then_some(problem)
    });
    assert!(
        problem.contains("lane a has no agent running right now"),
        "{problem}"
    );
}

#[test]
fn the_terminal_files_are_served_from_this_origin_under_the_csp() {
    let env = TestEnv::new();
    let srv = Server::start(&env, &[]);
    let index = srv.get("/");
    assert!(index.body.contains(r#"<script src="/terminal.js" defer>"#));
    for (path, kind, needle) in [
        ("/terminal.js", "text/javascript", "bridgeStyles"),
        ("/vendor/xterm.js", "text/javascript", "xterm"),
        ("/vendor/addon-fit.js", "text/javascript", "FitAddon"),
        ("/vendor/xterm.css", "text/css", ".xterm"),
        (
            "/vendor/LICENSES.txt",
            "text/plain",
            "@xterm/xterm 6.0.0 (MIT)",
        ),
    ] {
        let r = srv.get(path);
        assert_eq!(r.status, 200, "{path}");
        assert!(
            r.header("content-type").unwrap().starts_with(kind),
            "{path}"
        );
        assert!(r.body.contains(needle), "{path}");
        let csp = r.header("content-security-policy").unwrap();
        assert!(csp.contains("script-src 'self';") && csp.contains("style-src 'self';"));
    }
    srv.get("/vendor/nothing.js").refused(404, "no such page");
    // Nothing of a lane this console cannot see.
    let mut sse = srv.stream("/api/lanes/nope/terminal/live", &[]);
    let problem = sse.next("problem", SOON).expect("a problem event");
    assert!(problem.contains("no such lane"), "{problem}");
    srv.post(INPUT, &json!({"page": "p", "data": "x"}))
        .refused(409, "no open terminal page p on lane a");
    srv.post(KEYBOARD, &json!({"page": "p", "take": true, "extra": 1}))
        .refused(400, "unknown field");
}
