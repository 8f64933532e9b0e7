//! `spice serve` on a PostgreSQL authority shared by two hosts (issue #18): two state
//! directories, "a" and "b" (`SPICE_HOST`), whose `config.toml` names one database.
//! Host B's CLI adds, claims and steers; B's lanes are written as B's supervisor
//! would (its row, `take_lane`, the lane's report). The console runs on host A and
//! shows B's lanes with their host, hears B's commits on its live stream (the server's
//! change notification), takes over a stale claim B made, and says where the
//! transcript of B's lane lives instead of reading a path on A.

use crate::common;
use crate::common::console;

use common::backend::{self, Fleet};
use common::{to_run, wait_for, Run, TestEnv};
use console::Server;
use serde_json::{json, Value};
use spice::store::{LaneRow, LaneState, LaneTake};
use spice::task::{NewTask, Status};
use std::time::{Duration, Instant};

/// Runs the CLI as host `host` of `env`.
fn run_as(env: &TestEnv, host: &str, args: &[&str]) -> Run {
    to_run(
        env.cmd(args)
            .env("SPICE_HOST", host)
            .output()
            .expect("spice runs"),
    )
}

fn lane_of<'a>(status: &'a Value, name: &str) -> Option<&'a Value> {
    status["lanes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["lane"] == name)
}

/// Lane `name` as host `host`'s supervisor runs it: its supervisor row (with `lease`),
/// the lane taken, and the lane's report with `transcript`.
fn run_lane(f: &Fleet, host: &str, name: &str, lease: Duration, task: &str, transcript: &str) {
    let mut s = f.authority();
    let sup = s
        .register_supervisor(host, std::process::id(), 1, lease)
        .unwrap();
    let took = s.take_lane(name, sup, &[]).unwrap();
    assert!(matches!(took, LaneTake::Taken { .. }), "{took:?}");
    s.put_lane(&LaneRow {
        name: name.into(),
        state: LaneState::Working,
        profile: Some("demo".into()),
        session: Some(format!("sess-{name}")),
        task_id: Some(task.into()),
        transcript: Some(transcript.into()),
        ..LaneRow::default()
    })
    .unwrap();
}

#[test]
#[ignore = "needs PostgreSQL (SPICE_TEST_POSTGRES)"]
fn the_console_on_host_a_shows_and_steers_the_lanes_of_host_b() {
    let Some(f) = backend::postgres("serve_pg") else {
        return;
    };
    let a = &f.env;
    let b = f.db.as_ref().unwrap().host();
    std::fs::create_dir_all(b.repo.join("lanes")).unwrap();
    std::fs::write(b.repo.join("lanes/b1.toml"), "profile = \"demo\"\n").unwrap();

    let add = |title: &str| {
        run_as(
            &b,
            "b",
            &["task", "add", "--json", title, "--project", "app"],
        )
        .json()["id"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let working = add("Build the parser");
    let stale = add("Left behind");
    run_as(
        &b,
        "b",
        &[
            "task",
            "claim",
            &working,
            "--claimant",
            "sess-b1",
            "--lease",
            "30m",
        ],
    )
    .ok();
    let c = run_as(
        &b,
        "b",
        &[
            "task",
            "claim",
            &stale,
            "--claimant",
            "gone",
            "--lease",
            "1s",
            "--json",
        ],
    )
    .json();
    let stale_fence = c["fence"].as_i64().unwrap();
    let mut s = f.authority();
    for (title, end) in [("Finished first", 1_000_000), ("Finished last", 2_000_000)] {
        let new = NewTask {
            title: title.into(),
            status: Some(Status::Completed),
            end: Some(end),
            ..NewTask::default()
        };
        s.add_task(new, &[]).unwrap();
    }
    // A path that exists on neither "host": the console must not try it.
    let transcript = "/nonexistent/host-b/sess-b1.jsonl";
    run_lane(
        &f,
        "b",
        "b1",
        Duration::from_secs(3600),
        &working,
        transcript,
    );

    let mut cmd = Server::command(a, &[]);
    cmd.env("SPICE_HOST", "a");
    let srv = Server::spawn(cmd);

    // B's lane, with its host, working (its supervisor is in force), and its task.
    let status = srv.get("/api/status").expect(200);
    let b1 = lane_of(&status, "b1").unwrap_or_else(|| panic!("no lane b1: {status}"));
    assert_eq!(b1["host"], "b", "{b1}");
    assert_eq!(b1["host_lost"], false, "{b1}");
    assert_eq!(b1["state"], "working", "{b1}");
    assert_eq!(b1["task"]["id"], working.as_str(), "{b1}");
    assert_eq!(status["claims"].as_array().unwrap().len(), 2, "{status}");
    let tasks = srv.get("/api/tasks?category=claimed").expect(200);
    assert_eq!(tasks["total"], 2, "{tasks}");
    // Finished work, newest first, read from the server (`Authority::done_tasks`).
    let done = srv.get("/api/tasks?category=done").expect(200);
    assert_eq!(done["counts"]["done"], 2, "{done}");
    let titles: Vec<&str> = done["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["description"].as_str().unwrap())
        .collect();
    assert_eq!(titles, ["Finished last", "Finished first"]);

    // B's CLI steers: A's live stream hears it from the server, within seconds.
    let mut live = srv.stream("/api/live", &[]);
    assert_eq!(live.status(Duration::from_secs(5)), 200);
    let first = live
        .next("change", Duration::from_secs(5))
        .expect("a change event on connect");
    let t = Instant::now();
    run_as(&b, "b", &["steer", "lane:b1", "use the fixture"]).ok();
    let next = live
        .next("change", Duration::from_secs(10))
        .expect("a change event after host b steered");
    assert_ne!(first, next);
    eprintln!(
        "host b's steer reached host a's live stream in {:?}",
        t.elapsed()
    );
    let status = srv.get("/api/status").expect(200);
    assert_eq!(lane_of(&status, "b1").unwrap()["pending_steering"], 1);
    let inbox = srv.get("/api/lanes/b1/inbox").expect(200);
    assert_eq!(inbox["items"][0]["text"], "use the fixture", "{inbox}");

    // B's CLI claims a task outside any lane. A claim taken notifies no one on
    // PostgreSQL (its commit would wait for every other notifying commit's flush), so
    // A's watcher sees it by the generation it reads with the lane rows every second.
    let spare = add("Claimed from a shell");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !srv
        .get("/api/tasks")
        .expect(200)
        .to_string()
        .contains(&spare)
    {
        let left = deadline.saturating_duration_since(Instant::now());
        live.next("change", left)
            .expect("a change event for the task added");
    }
    run_as(
        &b,
        "b",
        &["task", "claim", &spare, "--claimant", "shell-claimer"],
    )
    .ok();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        live.next("change", left)
            .expect("a change event after host b's claim, with no notification");
        if srv
            .get("/api/tasks")
            .expect(200)
            .to_string()
            .contains("shell-claimer")
        {
            break;
        }
    }

    // A's console steers B's lane, which no lane file on A defines: the store knows it.
    let item = srv
        .post(
            "/api/steer",
            &json!({"target": "lane:b1", "text": "and run the tests"}),
        )
        .expect(201);
    let mine = run_as(&b, "b", &["inbox", "lane:b1", "--json"]).json();
    assert!(
        mine.as_array()
            .unwrap()
            .iter()
            .any(|i| i["key"] == item["key"]),
        "{mine}"
    );
    srv.post(
        "/api/steer",
        &json!({"target": "lane:nowhere", "text": "x"}),
    )
    .refused(400, "unknown lane 'nowhere'");

    // B's stale claim, taken over from A's console once its lease lapsed.
    let took = wait_for("the 1 s lease to lapse", 10, || {
        let r = srv.post(
            "/api/takeover",
            &json!({"task": stale, "fence": stale_fence}),
        );
        (r.status != 409).then(|| r.expect(200))
    });
    assert_eq!(took["claimant"], "operator");
    let claims = run_as(&b, "b", &["task", "claims", "--json"]).json();
    assert!(
        claims
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["id"] == stale.as_str() && c["claimant"] == "operator"),
        "{claims}"
    );

    // The transcript of B's lane is on B: said, with where, not read on A.
    let r = srv.get("/api/lanes/b1/transcript");
    r.refused(
        404,
        &format!("the transcript of lane b1 is on host b: {transcript}"),
    );
    let v = r.json();
    assert_eq!(
        (v["host"].as_str(), v["path"].as_str()),
        (Some("b"), Some(transcript))
    );
    let mut tail = srv.stream("/api/lanes/b1/transcript/live", &[]);
    assert_eq!(tail.status(Duration::from_secs(5)), 200);
    let problem = tail
        .next("problem", Duration::from_secs(5))
        .expect("a problem event on the live transcript");
    assert!(problem.contains("is on host b"), "{problem}");

    // A third host whose supervisor stops beating: its lane reads stopped and its host
    // lost, and the live stream says so though nothing was committed (the watcher reads
    // the lane rows every second, which PostgreSQL does not notify on).
    run_lane(
        &f,
        "c",
        "c1",
        Duration::from_secs(2),
        &working,
        "/c/t.jsonl",
    );
    let deadline = Instant::now() + Duration::from_secs(15);
    let lost = loop {
        let left = deadline.saturating_duration_since(Instant::now());
        live.next("change", left)
            .expect("a change event once host c was lost");
        let s = srv.get("/api/status").expect(200);
        if let Some(c1) = lane_of(&s, "c1").filter(|c1| c1["host_lost"] == true) {
            break c1.clone();
        }
    };
    assert_eq!(lost["host"], "c");
    assert_eq!(lost["state"], "stopped", "{lost}");
    assert_eq!(
        lane_of(&srv.get("/api/status").expect(200), "b1").unwrap()["state"],
        "working"
    );
    assert!(
        srv.stop().success(),
        "the console ends cleanly, its connections closed"
    );
}
