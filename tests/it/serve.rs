//! `spice serve` through the real binary on an ephemeral port: the JSON API with real
//! tasks, claims, steering and a transcript; the live streams; the writes; and the
//! guards (Host, Origin, token, JSON-only writes, body limits, malformed requests).

use crate::common;
use crate::common::console;

use common::{wait_for, TestEnv};
use console::Server;
use serde_json::json;
use spice::store::{LaneRow, LaneState, Store};
use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A Claude Code transcript line this project writes itself.
fn claude_line(kind: &str, text: &str, n: u32) -> String {
    let content = match kind {
        "user" => json!(text),
        _ => json!([{ "type": "text", "text": text }]),
    };
    json!({
        "type": kind, "uuid": format!("u{n}"), "parentUuid": null, "sessionId": "sess-1",
        "cwd": "/tmp", "version": "2.1.0", "timestamp": "2026-11-29T12:00:00.000Z",
        "message": { "role": kind, "content": content, "id": format!("m{n}") },
    })
    .to_string()
        + "\n"
}

/// Records what a supervisor would report for lane `name`, without running one.
fn put_lane(
    env: &TestEnv,
    name: &str,
    state: LaneState,
    task: Option<&str>,
    transcript: Option<&Path>,
) {
    let mut s = Store::open_dir(&env.home, Arc::new(spice::clock::SystemClock)).unwrap();
    s.put_lane(&LaneRow {
        name: name.into(),
        state,
        profile: Some("demo".into()),
        session: Some(format!("sess-{name}")),
        task_id: task.map(String::from),
        transcript: transcript.map(|p| p.display().to_string()),
        ..LaneRow::default()
    })
    .unwrap();
}

fn lane_file(env: &TestEnv, name: &str) {
    std::fs::create_dir_all(env.repo.join("lanes")).unwrap();
    std::fs::write(
        env.repo.join(format!("lanes/{name}.toml")),
        "profile = \"demo\"\n",
    )
    .unwrap();
}

#[test]
fn the_api_shows_lanes_claims_tasks_inbox_ledger_and_transcript() {
    let env = TestEnv::new();
    lane_file(&env, "a");
    let base = env.add(&["Parse the config", "--project", "app", "--priority", "L"]);
    let top = env.add(&[
        "Ship it",
        "--project",
        "app",
        "--priority",
        "H",
        "--depends",
        &base,
    ]);
    let other = env.add(&["Write docs", "--project", "app"]);
    env.run(&[
        "task",
        "claim",
        &base,
        "--claimant",
        "sess-a",
        "--lane",
        "a",
        "--lease",
        "10m",
    ])
    .ok();
    let transcript = env.dir.path().join("t.jsonl");
    let mut body = String::new();
    for n in 1..=30 {
        body.push_str(&claude_line("assistant", &format!("reply {n}"), n));
    }
    std::fs::write(&transcript, body).unwrap();
    put_lane(
        &env,
        "a",
        LaneState::Working,
        Some(&base),
        Some(&transcript),
    );
    let key = env
        .run(&["steer", "lane:a", "keep it short"])
        .ok()
        .trim()
        .to_string();
    // The row reads as the present only while a supervisor holds the state directory.
    let supervisor = spice::fleet::lock(&env.home).unwrap();
    let srv = Server::start(&env, &[]);

    let s = srv.get("/api/status").expect(200);
    let lane = &s["lanes"][0];
    assert_eq!(lane["lane"], "a");
    assert_eq!(lane["state"], "working");
    assert_eq!(s["supervisor_pid"], std::process::id());
    assert_eq!(lane["task"]["handle"], format!("app-{base}"));
    assert_eq!(lane["task"]["phase"], "todo");
    assert_eq!(lane["pending_steering"], 1);
    assert_eq!(lane["claims"][0]["stale"], false);
    assert!(lane["claims"][0]["lease_left_seconds"].as_i64().unwrap() > 500);
    assert_eq!(s["claims"].as_array().unwrap().len(), 1);
    assert_eq!(s["claims"][0]["task"], format!("app-{base}"));
    assert_eq!(s["pending_steering"], 1);
    drop(supervisor);

    // Tasks: the prerequisite inherits H and unblocks the top task.
    let t = srv.get("/api/tasks?category=claimed").expect(200);
    assert_eq!(
        t["counts"],
        json!({"ready": 1, "blocked": 1, "claimed": 1, "done": 0})
    );
    let row = &t["tasks"][0];
    assert_eq!(
        (
            row["id"].as_str().unwrap(),
            row["inherited_priority"].as_str()
        ),
        (base.as_str(), Some("H"))
    );
    assert_eq!(row["unblocks"], json!([format!("app-{top}")]));
    assert_eq!(row["releases"], 1);
    let ready = srv.get("/api/tasks?category=ready").expect(200);
    assert_eq!(ready["tasks"][0]["id"], other.as_str());
    assert_eq!(ready["tasks"][0]["rank"], 1);
    let blocked = srv.get("/api/tasks?category=blocked&q=ship").expect(200);
    assert_eq!(
        blocked["tasks"][0]["waits_on"],
        json!([format!("app-{base}")])
    );
    srv.get("/api/tasks?category=nope")
        .refused(400, "invalid category");
    let g = srv.get("/api/graph").expect(200);
    assert_eq!(g["nodes"].as_array().unwrap().len(), 3);
    assert_eq!(g["edges"], json!([{"from": base, "to": top}]));

    let l = srv.get(&format!("/api/tasks/{base}/ledger")).expect(200);
    let kinds: Vec<&str> = l["ledger"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["added", "claimed"]);
    srv.get("/api/tasks/zzzz/ledger").refused(400, "zzzz");

    let inbox = srv.get("/api/lanes/a/inbox?all=true").expect(200);
    assert_eq!(inbox["items"][0]["key"], key.as_str());
    assert_eq!(inbox["items"][0]["state"], "pending");
    srv.get("/api/lanes/nope/inbox")
        .refused(400, "no such lane");

    // Transcript history, newest page first, then the page before it.
    let p = srv.get("/api/lanes/a/transcript?limit=10").expect(200);
    let ev = p["events"].as_array().unwrap();
    assert_eq!(ev.len(), 10);
    assert_eq!(
        (ev[0]["line"].as_u64(), ev[9]["text"].as_str()),
        (Some(21), Some("reply 30"))
    );
    assert_eq!(p["more"], true);
    let p = srv
        .get("/api/lanes/a/transcript?limit=100&before=21")
        .expect(200);
    let texts = p["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["type"] == "assistant_text");
    assert_eq!(texts.count(), 20);
    assert_eq!(p["more"], false);
    srv.get("/api/lanes/a/transcript?limit=x")
        .refused(400, "invalid query");

    // The page and its assets, with a strict policy.
    let page = srv.get("/");
    assert_eq!(page.status, 200);
    assert!(page.body.contains("<script src=\"/app.js\""));
    let csp = page.header("content-security-policy").unwrap();
    assert!(
        csp.contains("default-src 'none'") && csp.contains("script-src 'self'"),
        "{csp}"
    );
    assert!(!csp.contains("unsafe-inline"));
    assert_eq!(page.header("x-content-type-options"), Some("nosniff"));
    assert!(srv.get("/app.js").body.contains("textContent"));
    srv.get("/nope").refused(404, "no such page");
}

#[test]
fn live_streams_report_steering_and_transcript_growth() {
    let env = TestEnv::new();
    lane_file(&env, "a");
    let transcript = env.dir.path().join("t.jsonl");
    std::fs::write(&transcript, claude_line("user", "start", 1)).unwrap();
    put_lane(&env, "a", LaneState::Working, None, Some(&transcript));
    let srv = Server::start(&env, &[]);

    let mut live = srv.stream("/api/live", &[]);
    assert_eq!(live.status(Duration::from_secs(5)), 200);
    let first = live
        .next("change", Duration::from_secs(5))
        .expect("a change event on connect");
    let t = Instant::now();
    env.run(&["steer", "lane:a", "hello"]).ok();
    let next = live
        .next("change", Duration::from_secs(5))
        .expect("a change event after steer");
    assert_ne!(first, next);
    assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
    assert_eq!(
        srv.get("/api/status").expect(200)["lanes"][0]["pending_steering"],
        1
    );

    let q = format!(
        "/api/lanes/a/transcript/live?after=1&epoch=0&path={}",
        transcript.display().to_string().replace('/', "%2F")
    );
    let mut tail = srv.stream(&q, &[]);
    assert_eq!(tail.status(Duration::from_secs(5)), 200);
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&transcript)
        .unwrap();
    f.write_all(claude_line("assistant", "ACK it: <script>alert(1)</script>", 2).as_bytes())
        .unwrap();
    let data = tail
        .next("events", Duration::from_secs(5))
        .expect("appended events");
    let evs: serde_json::Value = serde_json::from_str(&data).unwrap();
    assert_eq!(evs[0]["line"], 2);
    assert_eq!(evs[0]["text"], "ACK it: <script>alert(1)</script>");

    // The lane moves to a new transcript: the stream says so.
    let second = env.dir.path().join("t2.jsonl");
    std::fs::write(&second, claude_line("user", "again", 1)).unwrap();
    put_lane(&env, "a", LaneState::Working, None, Some(&second));
    let reset = tail
        .next("reset", Duration::from_secs(5))
        .expect("a reset event");
    assert!(reset.contains("t2.jsonl"), "{reset}");

    // SIGTERM ends open streams and the server.
    assert!(srv.stop().success());
}

#[test]
fn steering_and_takeover_go_through_the_store() {
    let env = TestEnv::new();
    lane_file(&env, "a");
    let stale = env.add(&["Stale one", "--project", "app"]);
    let fresh = env.add(&["Fresh one", "--project", "app"]);
    let c = env
        .run(&[
            "task",
            "claim",
            &stale,
            "--claimant",
            "gone",
            "--lease",
            "1s",
            "--json",
        ])
        .json();
    let stale_fence = c["fence"].as_i64().unwrap();
    let c = env
        .run(&[
            "task",
            "claim",
            &fresh,
            "--claimant",
            "busy",
            "--lease",
            "30m",
            "--json",
        ])
        .json();
    let fresh_fence = c["fence"].as_i64().unwrap();
    let srv = Server::start(&env, &[]);

    let item = srv
        .post(
            "/api/steer",
            &json!({"target": "lane:a", "text": "use the fixture"}),
        )
        .expect(201);
    let key = item["key"].as_str().unwrap();
    let inbox = env.run(&["inbox", "lane:a", "--json"]).json();
    assert_eq!(inbox[0]["key"], key);
    assert_eq!(inbox[0]["text"], "use the fixture");
    srv.post("/api/steer", &json!({"target": "lane:a", "text": "  "}))
        .refused(400, "needs some text");
    srv.post(
        "/api/steer",
        &json!({"target": "nowhere at all", "text": "x"}),
    )
    .refused(400, "unknown target");
    srv.post(
        "/api/steer",
        &json!({"target": "lane:a", "text": "x", "ttl": "soon"}),
    )
    .refused(400, "ttl");

    // Refused while the 1 s lease is live; taken once it lapsed.
    let took = wait_for("the 1 s lease to lapse", 10, || {
        let r = srv.post(
            "/api/takeover",
            &json!({"task": stale, "fence": stale_fence}),
        );
        (r.status != 409).then(|| r.expect(200))
    });
    assert_eq!(took["claimant"], "operator");
    assert!(took["fence"].as_i64().unwrap() > stale_fence);
    let claims = env.run(&["task", "claims", "--json"]).json();
    assert!(claims
        .as_array()
        .unwrap()
        .iter()
        .any(|c| c["id"] == stale.as_str() && c["claimant"] == "operator"));
    // The fence the page showed is gone now: refused, naming the holder.
    srv.post(
        "/api/takeover",
        &json!({"task": stale, "fence": stale_fence}),
    )
    .refused(409, "held by operator");
    srv.post(
        "/api/takeover",
        &json!({"task": fresh, "fence": fresh_fence, "claimant": "me"}),
    )
    .refused(409, "still live, held by busy");
    srv.post("/api/takeover", &json!({"task": fresh, "fence": "x"}))
        .refused(400, "invalid JSON body");

    // Lifting a hold: refused for a lane that is not held.
    put_lane(&env, "a", LaneState::Working, None, None);
    srv.post("/api/lanes/a/lift-hold", &json!({}))
        .refused(409, "not held");
    let ledger = env.run(&["task", "ledger", &stale, "--json"]).json();
    let kinds: Vec<&str> = ledger
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["added", "claimed", "takeover", "displaced"]);
}

#[test]
fn guards_refuse_foreign_hosts_origins_forms_and_oversized_bodies() {
    let env = TestEnv::new();
    lane_file(&env, "a");
    let srv = Server::start(&env, &[]);
    let origin = format!("http://{}", srv.addr);
    let steer = json!({"target": "lane:a", "text": "x"}).to_string();

    // DNS rebinding: the right socket under another name.
    srv.send("GET", "/api/status", &[("Host", "evil.example:80")], b"")
        .refused(421, "not allowed");
    srv.send(
        "GET",
        "/",
        &[("Host", &format!("attacker.test:{}", srv.port()))],
        b"",
    )
    .refused(421, "not allowed");
    // Issue #14: a name that merely starts like an allowed one.
    for host in [
        "[::1].evil.example",
        "[::1]evil.example:80",
        "localhost:80.evil.example",
    ] {
        srv.send("GET", "/api/status", &[("Host", host)], b"")
            .refused(400, "malformed Host header");
    }
    srv.send(
        "GET",
        "/api/status",
        &[("Host", "localhost.evil.example")],
        b"",
    )
    .refused(421, "not allowed");
    // Another origin, even on localhost, may neither write nor listen.
    let json_headers = |o: &'static str| {
        vec![
            ("Origin", o),
            ("Content-Type", "application/json"),
            ("X-Spice", "1"),
        ]
    };
    srv.send(
        "POST",
        "/api/steer",
        &json_headers("http://evil.example"),
        steer.as_bytes(),
    )
    .refused(403, "is not this console");
    srv.send(
        "POST",
        "/api/steer",
        &json_headers("http://127.0.0.1:1"),
        steer.as_bytes(),
    )
    .refused(403, "is not this console");
    let mut s = srv.stream("/api/live", &[("Origin", "http://evil.example")]);
    assert_eq!(s.status(Duration::from_secs(5)), 403);
    let mut s = srv.stream("/api/live", &[("Sec-Fetch-Site", "cross-site")]);
    assert_eq!(s.status(Duration::from_secs(5)), 403);
    // A simple cross-site form post: refused before anything is written.
    let form = [
        ("Origin", origin.as_str()),
        ("Content-Type", "application/x-www-form-urlencoded"),
    ];
    srv.send("POST", "/api/steer", &form, b"target=lane%3Aa&text=x")
        .refused(415, "JSON body");
    let plain = [("Origin", origin.as_str()), ("Content-Type", "text/plain")];
    srv.send("POST", "/api/steer", &plain, steer.as_bytes())
        .refused(415, "JSON body");
    let no_custom = [
        ("Origin", origin.as_str()),
        ("Content-Type", "application/json"),
    ];
    srv.send("POST", "/api/steer", &no_custom, steer.as_bytes())
        .refused(403, "x-spice");
    let ok = [
        ("Origin", origin.as_str()),
        ("Content-Type", "application/json"),
        ("X-Spice", "1"),
    ];
    // Oversized, malformed, unknown fields, no length: 4xx, and the server lives on.
    let big = format!(
        "{{\"target\":\"lane:a\",\"text\":\"{}\"}}",
        "x".repeat(100_000)
    );
    srv.send("POST", "/api/steer", &ok, big.as_bytes())
        .refused(413, "larger than");
    srv.send("POST", "/api/steer", &ok, b"{\"target\": ")
        .refused(400, "invalid JSON body");
    srv.send(
        "POST",
        "/api/steer",
        &ok,
        b"{\"target\":\"lane:a\",\"text\":\"x\",\"admin\":true}",
    )
    .refused(400, "unknown field");
    let mut chunked = ok.to_vec();
    chunked.push(("Transfer-Encoding", "chunked"));
    srv.send("POST", "/api/steer", &chunked, b"5\r\n{\"a\":\r\n0\r\n\r\n")
        .refused(411, "Content-Length");
    srv.send("DELETE", "/api/status", &[], b"")
        .refused(415, "JSON body");
    let garbage = srv.raw(b"\x00\x01 not http at all\r\n\r\n");
    assert!(
        (400..500).contains(&garbage.status) || garbage.status == 0,
        "{garbage:?}"
    );
    let huge_header = format!(
        "GET / HTTP/1.1\r\nHost: {}\r\nX-Big: {}\r\n\r\n",
        srv.addr,
        "a".repeat(1 << 20)
    );
    let r = srv.raw(huge_header.as_bytes());
    assert!(
        (400..500).contains(&r.status) || r.status == 0,
        "{}",
        r.status
    );
    assert_eq!(env.run(&["inbox", "--json"]).json(), json!([]));
    assert_eq!(srv.get("/api/status").status, 200);
}

#[test]
fn off_loopback_a_token_is_required_and_shown_once() {
    let env = TestEnv::new();
    let srv = Server::start(&env, &["--bind", "0.0.0.0:0"]);
    let line = srv
        .banner
        .iter()
        .find(|l| l.contains("token"))
        .expect("the token is shown");
    let token = line.rsplit("token=").next().unwrap().to_string();
    assert_eq!(token.len(), 64);
    let file = env.home.join("serve.token");
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&file).unwrap().permissions().mode() & 0o777,
        0o600
    );

    srv.get("/api/status").refused(401, "token is required");
    srv.get("/").refused(401, "token is required");
    srv.send(
        "GET",
        "/api/status",
        &[("Authorization", "Bearer nope")],
        b"",
    )
    .refused(401, "wrong token");
    let mut wrong = token.clone();
    wrong.replace_range(63.., if token.ends_with('0') { "1" } else { "0" });
    srv.send(
        "GET",
        "/api/status",
        &[("Authorization", &format!("Bearer {wrong}"))],
        b"",
    )
    .refused(401, "wrong token");
    let bearer = format!("Bearer {token}");
    srv.send("GET", "/api/status", &[("Authorization", &bearer)], b"")
        .expect(200);
    // The login address sets an HttpOnly, SameSite=Strict cookie the page then uses.
    srv.get("/login?token=nope").refused(401, "wrong token");
    let login = srv.get(&format!("/login?token={token}"));
    assert_eq!(login.status, 303);
    let cookie = login.header("set-cookie").unwrap();
    assert!(
        cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"),
        "{cookie}"
    );
    let pair = cookie.split(';').next().unwrap();
    assert_eq!(srv.send("GET", "/", &[("Cookie", pair)], b"").status, 200);
    // Writes need the token too.
    let ok = [("Content-Type", "application/json"), ("X-Spice", "1")];
    srv.send("POST", "/api/steer", &ok, b"{}")
        .refused(401, "token is required");
    drop(srv);

    // A second start reuses the token and does not show it again.
    let srv = Server::start(&env, &["--bind", "0.0.0.0:0"]);
    assert!(
        srv.banner.iter().all(|l| !l.contains(&token)),
        "{:?}",
        srv.banner
    );
    srv.send("GET", "/api/status", &[("Authorization", &bearer)], b"")
        .expect(200);
    drop(srv);
    // A token file others can read is refused.
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
    env.run(&["serve", "--bind", "0.0.0.0:0"])
        .fails(2, "readable by others");
}

#[test]
fn bad_arguments_are_one_line_errors() {
    let env = TestEnv::new();
    env.run(&["serve", "--bind", "nonsense"])
        .fails(2, "invalid address");
    env.run(&["serve", "--bind", "127.0.0.1:99999"])
        .fails(2, "invalid");
    env.run(&["serve", "--allow-host", "http://x"])
        .fails(2, "--allow-host");
    let srv = Server::start(&env, &[]);
    let taken = format!("127.0.0.1:{}", srv.port());
    env.run(&["serve", "--bind", &taken])
        .fails(1, &format!("cannot listen on {taken}"));
}

/// Regression (#40): a busy port gave the OS error alone ("Address already in use (os
/// error 98)"); now one line names the address and what to do instead.
#[test]
fn regression_a_busy_port_names_the_address_and_says_to_bind_another() {
    let env = TestEnv::new();
    let busy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let taken = busy.local_addr().unwrap().to_string();
    let err = env.run(&["serve", "--bind", &taken]).fails(
        1,
        &format!("cannot listen on {taken}: the address is in use"),
    );
    assert!(err.contains("--bind 127.0.0.1:PORT"), "{err}");
    assert!(!err.contains("os error"), "{err}");
}

fn jsonl_under(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            jsonl_under(&p, out);
        } else if p.extension().is_some_and(|x| x == "jsonl") {
            out.push(p);
        }
    }
}

#[test]
fn a_real_demo_fleet_run_reads_back_through_the_api() {
    let env = TestEnv::new();
    for (k, v) in [("user.email", "demo@spice"), ("user.name", "demo")] {
        common::git(&env.repo, &["config", k, v]);
    }
    common::git(&env.repo, &["checkout", "-q", "-b", "main"]);
    std::fs::create_dir_all(env.repo.join("lanes")).unwrap();
    std::fs::write(
        env.repo.join("lanes/a.toml"),
        "profile = \"demo\"\nphases = [\"todo\"]\nlease = \"5m\"\n",
    )
    .unwrap();
    common::git(&env.repo, &["add", "lanes"]);
    common::git(&env.repo, &["commit", "-q", "-m", "lanes"]);
    let task = env.add(&["Greet", "--project", "demo", "--priority", "H"]);
    let key = env
        .run(&["steer", "lane:a", "keep the greeting short"])
        .ok()
        .trim()
        .to_string();
    let agent_home = env.dir.path().join("agent-home");
    let out = env
        .cmd(&["fleet", "up", "--until-idle", "--json"])
        .env("HOME", &agent_home)
        .output()
        .unwrap();
    common::to_run(out).ok();
    let mut transcripts = Vec::new();
    jsonl_under(
        &env.home.join("demo-home/.claude/projects"),
        &mut transcripts,
    );
    assert_eq!(transcripts.len(), 1, "{transcripts:?}");
    let srv = Server::start(&env, &[]);
    // The lane row is the supervisor's own report.
    let status = srv.get("/api/status").expect(200);
    assert_eq!(status["lanes"][0]["lane"], "a", "{status}");
    // No supervisor runs any more: the row is history.
    assert_eq!(status["lanes"][0]["state"], "stopped", "{status}");
    assert_eq!(
        status["lanes"][0]["transcript"].as_str(),
        Some(transcripts[0].to_str().unwrap()),
        "{status}"
    );

    let page = srv.get("/api/lanes/a/transcript").expect(200);
    let events = page["events"].as_array().unwrap();
    let kinds: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert!(
        kinds.contains(&"tool_call") && kinds.contains(&"tool_result"),
        "{kinds:?}"
    );
    assert!(
        events.iter().any(|e| e["type"] == "assistant_text"
            && e["text"].as_str().unwrap().contains(&format!("ACK {key}"))),
        "{page}"
    );
    let inbox = srv.get("/api/inbox?all=true").expect(200);
    let item = &inbox["items"][0];
    assert_eq!(
        (item["key"].as_str(), item["state"].as_str()),
        (Some(key.as_str()), Some("acked"))
    );
    assert_eq!(item["reply"]["polarity"], "ack");
    let ledger = srv.get(&format!("/api/tasks/{task}/ledger")).expect(200);
    let kinds: Vec<&str> = ledger["ledger"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["kind"].as_str().unwrap())
        .collect();
    assert!(
        kinds.contains(&"claimed") && kinds.contains(&"phase_completed"),
        "{kinds:?}"
    );
    let t = srv.get("/api/tasks?q=greet").expect(200);
    assert_eq!(t["tasks"][0]["phase"], "review");
}

/// Regression: `fleet status` counted a lane's pending steering over its lane and its
/// current session only, and the console over its lane, every session of the claim and
/// the worktree as the claim spelled it, so the two showed different numbers, and
/// neither the number of items the lane's agent is given: those for its session, its
/// lane and its worktree (canonical or as the claim recorded it).
#[test]
fn fleet_status_and_the_console_count_a_lanes_pending_steering_alike() {
    let env = TestEnv::new();
    lane_file(&env, "a");
    // The claim records its worktree through a symlink, as a symlinked state directory
    // would; `spice steer worktree:PATH` stores the canonical path.
    let real = env.dir.path().join("real");
    std::fs::create_dir_all(real.join("wt")).unwrap();
    std::os::unix::fs::symlink(&real, env.dir.path().join("link")).unwrap();
    let given = env.dir.path().join("link/wt");
    let given_s = given.display().to_string();
    let task = env.add(&["Work", "--project", "app"]);
    env.run(&[
        "task",
        "claim",
        &task,
        "--claimant",
        "sess-a",
        "--lane",
        "a",
        "--worktree",
        &given_s,
        "--lease",
        "10m",
    ])
    .ok();
    let mut s = Store::open_dir(&env.home, Arc::new(spice::clock::SystemClock)).unwrap();
    s.put_lane(&LaneRow {
        name: "a".into(),
        state: LaneState::Working,
        profile: Some("demo".into()),
        session: Some("sess-a".into()),
        lineage: vec!["sess-old".into()],
        task_id: Some(task.clone()),
        ..LaneRow::default()
    })
    .unwrap();
    for target in [
        "session:sess-a",
        "lane:a",
        &format!("worktree:{given_s}"),
        // An earlier session's items are not its successor's; another lane's neither.
        "session:sess-old",
        "session:sess-old",
        "lane:b",
    ] {
        env.run(&["steer", "--force", target, "mind the tests"])
            .ok();
    }
    let spelled = spice::store::Target {
        kind: spice::store::TargetKind::Worktree,
        name: given_s.clone(),
    };
    s.steer(
        &spelled,
        "as the claim spells it",
        spice::store::DEFAULT_TTL,
    )
    .unwrap();

    let cli_doc = env.run(&["fleet", "status", "--json"]).json();
    let cli = env.lane("a");
    assert_eq!(cli["pending_steering"], 4, "{cli}");
    let srv = Server::start(&env, &[]);
    let api_doc = srv.get("/api/status").expect(200);
    let api = &api_doc["lanes"][0];
    assert_eq!(api["lane"], "a", "{api}");
    assert_eq!(api["pending_steering"], 4, "{api}");
    let canonical = std::fs::canonicalize(&given).unwrap();
    assert_eq!(
        api["targets"],
        json!([
            {"kind": "session", "name": "sess-a"},
            {"kind": "lane", "name": "a"},
            {"kind": "worktree", "name": canonical.display().to_string()},
            {"kind": "worktree", "name": given_s},
        ])
    );
    assert_eq!(cli["targets"], api["targets"]);
    // One document: the same fields in both, the console's generation besides.
    let keys = |v: &serde_json::Value| {
        let mut k: Vec<String> = v.as_object().unwrap().keys().cloned().collect();
        k.sort();
        k
    };
    assert_eq!(keys(&cli), keys(api));
    let mut top = keys(&api_doc);
    top.retain(|k| k != "generation");
    assert_eq!(keys(&cli_doc), top);
    assert_eq!(cli["claims"][0]["task"], api["claims"][0]["task"]);
    assert_eq!(cli["state"], "stopped", "no supervisor runs: {cli}");
    assert_eq!(api["state"], "stopped", "{api}");
    assert_eq!(
        (cli["enabled"].clone(), api["enabled"].clone()),
        (json!(true), json!(null))
    );
}
