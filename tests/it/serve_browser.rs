//! The console in real headless Chromium (playwright-core driving Debian's chromium):
//! this test prepares the store, starts `spice serve`, and runs
//! `tests/browser/console.mjs`, which loads the page, watches a live update arrive,
//! steers, takes over a stale claim (a fresh one only behind "force" and a
//! confirmation), and checks that
//! hostile transcript content stays text.
//! `the_terminal_in_headless_chromium` runs a real fleet instead and drives a lane's
//! terminal view through `tests/browser/terminal.mjs`.
//!
//! Needs `node`, `/usr/bin/chromium` (or `$CHROMIUM`) and `npm ci` in `tests/browser`:
//! ignored unless asked for (`--include-ignored`, as `.ci/run` does after installing
//! them), and then their absence is a failure.

use crate::common;
use crate::common::console;

use common::TestEnv;
use console::Server;
use serde_json::json;
use spice::store::{BudgetScope, Delta, LaneRow, LaneState, Metered, Store, Target, TargetKind};
use std::path::Path;
use std::sync::Arc;

/// Chromium's path, or a failure naming what is missing.
fn prerequisites() -> String {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/browser");
    let chromium = std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
    let missing = if !dir.join("node_modules/playwright-core").is_dir() {
        Some("tests/browser/node_modules (run npm ci there)".to_string())
    } else if !Path::new(&chromium).exists() {
        Some(chromium.clone())
    } else if std::process::Command::new("node")
        .arg("--version")
        .output()
        .is_err()
    {
        Some("node".into())
    } else {
        None
    };
    if let Some(m) = missing {
        panic!("the browser test needs {m} (.ci/run installs it)");
    }
    chromium
}

fn line(kind: &str, content: serde_json::Value, n: u32) -> String {
    json!({
        "type": kind, "uuid": format!("u{n}"), "parentUuid": null, "sessionId": "sess-a",
        "cwd": "/tmp", "version": "2.1.0", "timestamp": "2026-11-29T12:00:00.000Z",
        "message": { "role": kind, "id": format!("m{n}"), "content": content },
    })
    .to_string()
        + "\n"
}

#[test]
#[ignore = "needs chromium, node and npm ci in tests/browser (installed by .ci/run)"]
fn the_console_in_headless_chromium() {
    let chromium = prerequisites();
    let env = TestEnv::new();
    std::fs::create_dir_all(env.repo.join("lanes")).unwrap();
    std::fs::write(env.repo.join("lanes/a.toml"), "profile = \"demo\"\n").unwrap();
    let stale = env.add(&["Stale one", "--project", "app", "--priority", "H"]);
    let fresh = env.add(&["Fresh one", "--project", "app"]);
    env.add(&["Waits", "--project", "app", "--depends", &stale]);
    env.run(&[
        "task",
        "claim",
        &stale,
        "--claimant",
        "sess-a",
        "--lane",
        "a",
        "--lease",
        "1s",
    ])
    .ok();
    env.run(&[
        "task",
        "claim",
        &fresh,
        "--claimant",
        "busy",
        "--lease",
        "30m",
    ])
    .ok();
    env.run(&["steer", "lane:a", "an earlier item"]).ok();

    // Hostile content an agent (or what it read) could put in its transcript.
    let transcript = env.dir.path().join("hostile.jsonl");
    let mut t = line(
        "user",
        json!("please look at <img src=x onerror=\"window.__pwned = 2\">"),
        1,
    );
    t += &line(
        "assistant",
        json!([{"type": "text", "text":
            "<script>window.__pwned = 1</script> \u{1b}[2J\u{1b}]0;title\u{7} \u{202e}reversed <img src=x onerror=\"window.__pwned = 2\"> <a href=\"javascript:alert(1)\">x</a>"}]),
        2,
    );
    t += &line(
        "assistant",
        json!([{"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "cargo test <b>"}}]),
        3,
    );
    t += &json!({
        "type": "user", "uuid": "u4", "parentUuid": null, "sessionId": "sess-a", "cwd": "/tmp",
        "version": "2.1.0", "timestamp": "2026-11-29T12:00:01.000Z",
        "message": {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1",
            "content": "<iframe src=x></iframe> 1 test failed", "is_error": true}]},
    })
    .to_string();
    t += "\n";
    std::fs::write(&transcript, t).unwrap();
    Store::open_dir(&env.home, Arc::new(spice::clock::SystemClock))
        .unwrap()
        .put_lane(&LaneRow {
            name: "a".into(),
            state: LaneState::Working,
            profile: Some("demo".into()),
            session: Some("sess-a".into()),
            task_id: Some(stale.clone()),
            transcript: Some(transcript.display().to_string()),
            ..LaneRow::default()
        })
        .unwrap();
    // A lane whose last launch failed: the page shows why, not a bare "error".
    Store::open_dir(&env.home, Arc::new(spice::clock::SystemClock))
        .unwrap()
        .put_lane(&LaneRow {
            name: "b".into(),
            state: LaneState::Stalled,
            profile: Some("demo".into()),
            last_error: Some("agent exited with status 127: claude: command not found".into()),
            ..LaneRow::default()
        })
        .unwrap();
    // A lane whose agent asks the operator: the tab's title counts it.
    Store::open_dir(&env.home, Arc::new(spice::clock::SystemClock))
        .unwrap()
        .put_lane(&LaneRow {
            name: "d".into(),
            state: LaneState::Asking,
            profile: Some("demo".into()),
            state_note: Some("Should I keep <b>the alias</b>?".into()),
            ..LaneRow::default()
        })
        .unwrap();
    // A lane whose agent changed a file in its task's worktree: the review shows it.
    for (k, v) in [("user.email", "r@spice"), ("user.name", "r")] {
        common::git(&env.repo, &["config", k, v]);
    }
    common::git(&env.repo, &["checkout", "-q", "-b", "main"]);
    std::fs::write(env.repo.join("x.rs"), "fn a() {}\nfn b() {}\nfn c() {}\n").unwrap();
    std::fs::write(env.repo.join("notes.txt"), "one\n").unwrap();
    common::git(&env.repo, &["add", "x.rs", "notes.txt"]);
    common::git(&env.repo, &["commit", "-q", "-m", "x"]);
    let reviewed = env.add(&["Reviewed work", "--project", "app"]);
    let wt = env.dir.path().join("wt-r");
    common::git(
        &env.repo,
        &[
            "worktree",
            "add",
            "-q",
            "-b",
            "spice/app-r",
            wt.to_str().unwrap(),
        ],
    );
    std::fs::write(
        wt.join("x.rs"),
        "fn a() {}\nfn b() { todo!() }\nfn c() {}\n<img src=x onerror=\"window.__pwned = 4\">\n",
    )
    .unwrap();
    // A generated file long enough that the review draws it in blocks as it scrolls in.
    let table: String = (1..=1000)
        .map(|i| format!("pub const T{i}: u32 = {i}; // row {i}\n"))
        .collect();
    std::fs::write(wt.join("x_table.rs"), table).unwrap();
    common::git(&wt, &["add", "x_table.rs"]);
    common::git(&wt, &["commit", "-q", "-am", "b, and markup"]);
    // An edit the agent has not committed: the review shows it apart.
    std::fs::write(wt.join("notes.txt"), "one\ntwo\n").unwrap();
    env.run(&[
        "task",
        "claim",
        &reviewed,
        "--claimant",
        "sess-r",
        "--lane",
        "r",
        "--worktree",
        wt.to_str().unwrap(),
        "--lease",
        "30m",
    ])
    .ok();
    let mut s = Store::open_dir(&env.home, Arc::new(spice::clock::SystemClock)).unwrap();
    s.note(
        &reviewed,
        "launched",
        "sess-r",
        json!({"lane": "r", "base": "main", "worktree": wt, "repo": env.repo, "pid": 1, "turn": 1}),
    )
    .unwrap();
    s.put_lane(&LaneRow {
        name: "r".into(),
        state: LaneState::Waiting,
        profile: Some("demo".into()),
        session: Some("sess-r".into()),
        task_id: Some(reviewed.clone()),
        ..LaneRow::default()
    })
    .unwrap();
    drop(s);
    // A lane paused at its token budget: 1200 of 1000 tokens used.
    let mut s = Store::open_dir(&env.home, Arc::new(spice::clock::SystemClock)).unwrap();
    s.put_lane(&LaneRow {
        name: "c".into(),
        state: LaneState::Held,
        profile: Some("demo".into()),
        hold_reason: Some("budget: lane used 1200 of 1000 tokens".into()),
        ..LaneRow::default()
    })
    .unwrap();
    let writer = [Target {
        kind: TargetKind::Lane,
        name: "c".into(),
    }];
    let at = spice::transcript::follow::Checkpoint {
        offset: 10,
        line: 1,
        hash: 1,
    };
    let metered = Metered {
        delta: Delta {
            input: 200,
            output: 1000,
            ..Delta::default()
        },
        carry: None,
    };
    s.apply_transcript_metered("/c.jsonl", at, &[], &writer, &metered)
        .unwrap();
    s.budget_set(&BudgetScope::Lane("c".into()), 1000).unwrap();
    drop(s);
    // The gate refused lane a's last commit (a hostile file name among the findings),
    // and the repository has a latched file.
    let common_dir = env.dir.path().join("gated.git");
    std::fs::create_dir_all(common_dir.join("spice/gate")).unwrap();
    let hostile = "src/<img src=x onerror=\"window.__pwned = 3\">.rs";
    std::fs::write(
        common_dir.join("spice/gate/latches.json"),
        json!({"latches": {"file.lines": {hostile: {
            "rule": "file.lines", "path": hostile, "value": 12, "base": 10,
            "since": "2026-12-01T10:00:00Z"}}}})
        .to_string(),
    )
    .unwrap();
    Store::open_dir(&env.home, Arc::new(spice::clock::SystemClock))
        .unwrap()
        .note(
            &stale,
            "gate_run",
            "sess-a",
            json!({"hook": "pre-commit", "lane": "a", "clean": false,
                "common_dir": common_dir, "files": 1, "could_not_run": [], "flexed": [],
                "findings": [{"path": hostile, "line": 1, "rule": "file.lines", "value": 40,
                    "limit": 15, "base": 10, "ceiling": 15, "latched": true,
                    "message": "40 lines, past the flex ceiling 15 (base 10): split it to 10 or less"}]}),
        )
        .unwrap();
    // The stale claim's 1 s lease lapses (the page offers its takeover only then).
    let show = env.run(&["task", "show", &stale, "--json"]).json();
    let until: chrono::DateTime<chrono::Utc> = show["claim"]["lease_until"]
        .as_str()
        .unwrap_or_else(|| panic!("no lease: {show}"))
        .parse()
        .unwrap();
    common::wait_for("the 1 s lease to lapse", 10, || {
        (chrono::Utc::now() > until).then_some(())
    });

    // The lane row reads as the present (working) only while a supervisor holds the
    // state directory.
    let _supervisor = spice::fleet::lock(&env.home).unwrap();
    let srv = Server::start(&env, &[]);
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/browser");
    let out = std::process::Command::new("node")
        .arg("console.mjs")
        .current_dir(&dir)
        .env("CONSOLE_URL", srv.url("/"))
        .env("SPICE_BIN", common::bin())
        .env("SPICE_HOME", &env.home)
        .env("HOME", env.dir.path())
        .env("REPO", &env.repo)
        .env("TRANSCRIPT", &transcript)
        .env("STALE_ID", &stale)
        .env("STALE_HANDLE", format!("app-{stale}"))
        .env("FRESH_ID", &fresh)
        .env("REVIEWED_ID", &reviewed)
        .env("CHROMIUM", chromium)
        // Where to leave screenshots of the page (desktop and phone), when asked.
        .envs(std::env::var_os("SPICE_SCREENSHOTS").map(|d| ("SCREENSHOTS", d)))
        .output()
        .expect("node runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!("{stdout}");
    assert!(
        out.status.success(),
        "browser checks failed:\n{stdout}\n{stderr}"
    );
    assert!(stdout.contains("browser checks passed"));
}

/// A lane's terminal in real Chromium: a fleet's lane runs the demo agent, which waits
/// for the operator's go-ahead; `tests/browser/terminal.mjs` opens the lane's terminal,
/// sees the agent's screen live, is refused typing until it takes the keyboard (the
/// ledger records taking and giving it back, by hand and by leaving the page), types
/// the go-ahead, and watches the agent work to the session's end.
#[test]
#[ignore = "needs chromium, node and npm ci in tests/browser (installed by .ci/run)"]
fn the_terminal_in_headless_chromium() {
    let chromium = prerequisites();
    let env = TestEnv::with_lanes(&[("a", "profile = \"demo\"\nphases = [\"todo\"]\n")]);
    let task = env.add(&[
        "Wait for me",
        "--project",
        "demo",
        "--body",
        spice::demo::WAIT_MARKER,
    ]);
    let sup = env.fleet_up(&["--until-idle", "--json"]);
    common::wait_for("the agent to wait for input", 30, || {
        (env.lane("a")["state"] == "waiting").then_some(())
    });
    let srv = Server::start(&env, &[]);
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/browser");
    let out = std::process::Command::new("node")
        .arg("terminal.mjs")
        .current_dir(&dir)
        .env("CONSOLE_URL", srv.url("/"))
        .env("SPICE_BIN", common::bin())
        .env("SPICE_HOME", &env.home)
        .env("HOME", env.dir.path())
        .env("REPO", &env.repo)
        .env("TASK_ID", &task)
        .env("CHROMIUM", chromium)
        .envs(std::env::var_os("SPICE_SCREENSHOTS").map(|d| ("SCREENSHOTS", d)))
        .output()
        .expect("node runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!("{stdout}");
    assert!(
        out.status.success(),
        "terminal checks failed:\n{stdout}\n{stderr}"
    );
    assert!(stdout.contains("terminal checks passed"));
    sup.finished();
    let show = env.run(&["task", "show", &task, "--json"]).json();
    assert_eq!(show["phase"], "review", "{show}");
}
