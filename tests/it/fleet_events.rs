//! `spice fleet up` reports each lane event as it happens, on stderr: one short line
//! per event, or one JSON object per line with `--json`, and the same JSON objects in
//! `<state>/logs/fleet.log`; stdout keeps the report printed at the end. Lanes of the
//! scripted demo agent, as in `tests/it/fleet.rs`.

use crate::common;
use common::{git, TestEnv};
use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::sync::mpsc;
use std::time::Duration;

fn setup() -> TestEnv {
    TestEnv::with_lanes(&[(
        "a",
        "profile = \"demo\"\nphases = [\"todo\"]\nlease = \"5m\"\n",
    )])
}

/// A task whose agent compacts its context once, and a steering item for its lane
/// (given in the brief, answered in the transcript): (handle, steering key).
fn one_task(env: &TestEnv) -> (String, String) {
    let id = env.add(&[
        "Greet",
        "--project",
        "demo",
        "--body",
        spice::demo::COMPACT_MARKER,
    ]);
    let key = env
        .run(&["steer", "lane:a", "keep the greeting short"])
        .ok()
        .trim()
        .to_string();
    (format!("demo-{id}"), key)
}

fn up(env: &TestEnv, args: &[&str]) -> common::Run {
    let mut a = vec!["fleet", "up", "--until-idle"];
    a.extend_from_slice(args);
    let out = env.cmd(&a).env("HOME", env.agent_home()).output().unwrap();
    let run = common::to_run(out);
    assert_eq!(run.code, 0, "{}", run.stderr);
    run
}

/// The event column of a terminal line (time, lane, event, task, detail).
fn event_of(line: &str) -> Option<&str> {
    line.split_whitespace().nth(2)
}

/// The events that must appear, in this order (others may come between them).
const ORDER: [&str; 5] = ["claimed", "worktree_ready", "launched", "exited", "stopped"];

/// Asserts that `events` (event names) hold every one of `ORDER` once, in order, and
/// the rest of what this run must report after the launch.
#[track_caller]
fn check_order(events: &[String]) {
    let at = |name: &str| {
        let found: Vec<usize> = (0..events.len()).filter(|&i| events[i] == name).collect();
        assert_eq!(found.len(), 1, "{name} once in {events:?}");
        found[0]
    };
    let order: Vec<usize> = ORDER.iter().map(|e| at(e)).collect();
    assert!(order.windows(2).all(|w| w[0] < w[1]), "{events:?}");
    let launched = at("launched");
    for after_launch in ["delivered", "acked", "compacted", "phase_done"] {
        let i = at(after_launch);
        assert!(
            launched < i && i < at("exited"),
            "{after_launch}: {events:?}"
        );
    }
}

#[test]
fn fleet_up_prints_a_line_per_lane_event_in_order_on_stderr() {
    let env = setup();
    let (handle, key) = one_task(&env);
    let run = up(&env, &[]);
    // stdout: the report, as before.
    assert_eq!(
        run.stdout.trim(),
        format!("a: claimed {handle}; 1 session(s)"),
        "{}",
        run.stdout
    );
    let lines: Vec<&str> = run.stderr.lines().collect();
    let mut events = Vec::new();
    for line in &lines {
        // 14:03:27 a claimed        demo-… detail
        let mut cols = line.split_whitespace();
        let time = cols.next().unwrap();
        assert!(
            time.len() == 8 && time.as_bytes()[2] == b':' && time.as_bytes()[5] == b':',
            "{line}"
        );
        assert_eq!(cols.next(), Some("a"), "{line}");
        let event = cols.next().unwrap().to_string();
        let task = cols.next().unwrap_or("");
        if !["idle", "stopped", "error"].contains(&event.as_str()) {
            assert_eq!(task, handle, "{line}");
        }
        events.push(event);
    }
    check_order(&events);
    let line_of = |name: &str| lines.iter().find(|l| event_of(l) == Some(name)).unwrap();
    let acked = line_of("acked");
    assert!(acked.contains(&format!("ACK {key}:")), "{acked}");
    let done = line_of("phase_done");
    assert!(done.contains("todo → review, branch merged"), "{done}");
    assert!(
        git(&env.repo, &["log", "--oneline", "main"]).contains("demo: "),
        "the merge the event names happened"
    );
}

#[test]
fn fleet_up_json_gives_an_object_per_event_and_the_log_file_keeps_them() {
    let env = setup();
    let (handle, key) = one_task(&env);
    let run = up(&env, &["--json"]);
    // stdout: the report document, exactly as before.
    let report = run.json();
    assert_eq!(report[0]["lane"], "a", "{report}");
    assert_eq!(report[0]["claimed"], serde_json::json!([handle]));
    let events: Vec<serde_json::Value> = run
        .stderr
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    for e in &events {
        let mut keys: Vec<&str> = e.as_object().unwrap().keys().map(String::as_str).collect();
        keys.sort();
        assert_eq!(
            keys,
            ["at", "detail", "event", "keys", "lane", "session", "task"],
            "{e}"
        );
        assert_eq!(e["lane"], "a");
        assert!(e["at"].as_str().unwrap().ends_with('Z'), "{e}");
    }
    let names: Vec<String> = events
        .iter()
        .map(|e| e["event"].as_str().unwrap().to_string())
        .collect();
    check_order(&names);
    let by = |name: &str| events.iter().find(|e| e["event"] == name).unwrap();
    assert_eq!(by("claimed")["task"], handle.as_str());
    let session = by("claimed")["session"].as_str().unwrap();
    assert_eq!(by("launched")["session"], session);
    assert_eq!(by("delivered")["keys"], serde_json::json!([key]));
    assert_eq!(by("acked")["keys"], serde_json::json!([key]));
    let wt = by("worktree_ready")["detail"].as_str().unwrap().to_string();
    assert!(std::path::Path::new(&wt).join(".git").exists(), "{wt}");

    // The log holds the same objects, and the next run appends to it.
    let log = env.home.join("logs/fleet.log");
    let logged: Vec<serde_json::Value> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(logged, events);
    let again = up(&env, &[]);
    let logged_again = std::fs::read_to_string(&log).unwrap().lines().count();
    assert_eq!(
        logged_again,
        events.len() + again.stderr.lines().count(),
        "{}",
        again.stderr
    );
}

/// Events reach a pipe while the fleet runs: stderr is not held back until exit when
/// it is not a terminal. The agent waits for the operator after its brief; steering
/// typed into it is reported delivered and answered, all before `fleet down`.
#[test]
fn events_reach_a_pipe_while_the_fleet_still_runs() {
    let env = setup();
    let id = env.add(&[
        "Wait for me",
        "--project",
        "demo",
        "--body",
        spice::demo::WAIT_MARKER,
    ]);
    let mut child = env.supervisor(
        env.cmd(&["fleet", "up"])
            .stdout(Stdio::null())
            .stderr(Stdio::piped()),
    );
    let (tx, rx) = mpsc::channel();
    let stderr = child.stderr().unwrap();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut seen = Vec::new();
    let mut next_with = |event: &str| -> String {
        loop {
            let line = rx
                .recv_timeout(Duration::from_secs(60))
                .unwrap_or_else(|_| panic!("no {event} line; so far: {seen:#?}"));
            seen.push(line.clone());
            if event_of(&line) == Some(event) {
                return line;
            }
        }
    };
    let claimed = next_with("claimed");
    assert!(claimed.contains(&format!("demo-{id}")), "{claimed}");
    assert!(
        child.try_wait().unwrap().is_none(),
        "the fleet still runs when its first event is read"
    );
    next_with("waiting");
    let key = env
        .run(&["steer", "lane:a", "go ahead"])
        .ok()
        .trim()
        .to_string();
    let delivered = next_with("delivered");
    assert!(
        delivered.contains("typed into the idle agent's terminal"),
        "{delivered}"
    );
    let acked = next_with("acked");
    assert!(acked.contains(&format!("ACK {key}:")), "{acked}");
    assert!(child.try_wait().unwrap().is_none());
    env.run(&["fleet", "down"]).ok();
    next_with("stopped");
    assert!(child.wait().unwrap().success());
    reader.join().unwrap();
}
