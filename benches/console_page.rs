//! The console in headless Chromium with a fleet's worth of data: 32 lanes, 10,000 tasks
//! (`../shared/bench/gen_tasks.py`) and a task whose review is a 5,000-line diff. This
//! driver builds the store and the repository, starts `spice serve`, and runs
//! `benches/console_page.mjs`, which measures each figure beside its baseline in the
//! same page (medians of five rounds):
//! - the page ready (every lane's row and the tasks drawn) against navigating to a
//!   static file of the same server;
//! - a lane held (written to the store here, when the page asks) to its entry in the
//!   needs-you queue, against the page fetching `/api/status` itself;
//! - the review of the 5,000-line diff interactive (its first line selected) against
//!   fetching and parsing the review's JSON.
//!
//! Run `cargo bench --bench console_page` (`--release` figures: `cargo bench` builds
//! release). Needs python3, node, `/usr/bin/chromium` (or `$CHROMIUM`) and `npm ci` in
//! `tests/browser`; `SPICE_GEN_TASKS` names another `gen_tasks.py`.

use serde_json::json;
use spice::store::{LaneRow, LaneState, Store};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;

const SPICE: &str = env!("CARGO_BIN_EXE_spice");
const LANES: usize = 32;
const TASKS: usize = 10_000;
/// Lines of the reviewed file, every one changed: a diff of twice as many lines.
const FILE_LINES: usize = 2_500;

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().expect("the command starts");
    assert!(
        out.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn git(dir: &Path, args: &[&str]) {
    run(Command::new("git").arg("-C").arg(dir).args(args));
}

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let gen = std::env::var("SPICE_GEN_TASKS").unwrap_or_else(|_| {
        root.join("../shared/bench/gen_tasks.py")
            .display()
            .to_string()
    });
    let tmp = tempfile::tempdir().unwrap();
    let (repo, wt, home) = (
        tmp.path().join("repo"),
        tmp.path().join("wt"),
        tmp.path().join("home"),
    );
    let spice = |args: &[&str]| {
        run(Command::new(SPICE)
            .args(args)
            .current_dir(&repo)
            .env("SPICE_HOME", &home))
    };
    std::fs::create_dir_all(&repo).unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    git(&repo, &["config", "user.email", "b@spice"]);
    git(&repo, &["config", "user.name", "b"]);
    let before: String = (0..FILE_LINES)
        .map(|i| format!("    let v{i} = table[{i}] + {i}; // before\n"))
        .collect();
    std::fs::write(repo.join("big.rs"), before).unwrap();
    git(&repo, &["add", "big.rs"]);
    git(&repo, &["commit", "-q", "-m", "big"]);
    let wt_s = wt.to_str().unwrap();
    git(&repo, &["worktree", "add", "-q", "-b", "spice/app-r", wt_s]);
    let after: String = (0..FILE_LINES)
        .map(|i| format!("    let v{i} = table[{i}] * {i}; // after\n"))
        .collect();
    std::fs::write(wt.join("big.rs"), after).unwrap();
    git(&wt, &["commit", "-q", "-am", "every line"]);

    eprintln!("setting up {TASKS} tasks and {LANES} lanes");
    let tasks = run(Command::new("python3").arg(&gen).arg(TASKS.to_string()));
    std::fs::write(tmp.path().join("tasks.json"), tasks).unwrap();
    spice(&[
        "task",
        "import",
        "--taskwarrior",
        tmp.path().join("tasks.json").to_str().unwrap(),
    ]);
    let added: serde_json::Value = serde_json::from_str(&spice(&[
        "task",
        "add",
        "--json",
        "Reviewed work",
        "--project",
        "app",
    ]))
    .unwrap();
    let reviewed = added["id"].as_str().unwrap().to_string();
    spice(&[
        "task",
        "claim",
        &reviewed,
        "--claimant",
        "sess-r",
        "--lane",
        "r",
        "--worktree",
        wt_s,
        "--lease",
        "2h",
    ]);
    let mut s = Store::open_dir(&home, Arc::new(spice::clock::SystemClock)).unwrap();
    s.note(
        &reviewed,
        "launched",
        "sess-r",
        json!({"lane": "r", "base": "main", "worktree": wt, "repo": repo, "pid": 1, "turn": 1}),
    )
    .unwrap();
    let lane = |i: usize| format!("l{i:02}");
    for i in 1..LANES {
        let state = if i % 3 == 0 {
            LaneState::Waiting
        } else {
            LaneState::Working
        };
        s.put_lane(&LaneRow {
            name: lane(i),
            state,
            profile: Some("demo".into()),
            ..LaneRow::default()
        })
        .unwrap();
    }
    let r = LaneRow {
        name: "r".into(),
        state: LaneState::Waiting,
        profile: Some("demo".into()),
        session: Some("sess-r".into()),
        task_id: Some(reviewed.clone()),
        ..LaneRow::default()
    };
    s.put_lane(&r).unwrap();

    // Lane rows read as the present only while a supervisor holds the state directory.
    let _supervisor = spice::fleet::lock(&home).unwrap();
    let mut server = Command::new(SPICE)
        .args(["serve", "--bind", "127.0.0.1:0"])
        .current_dir(&repo)
        .env("SPICE_HOME", &home)
        .stdout(Stdio::piped())
        .spawn()
        .expect("spice serve starts");
    let mut banner = BufReader::new(server.stdout.take().unwrap()).lines();
    let url = loop {
        let line = banner.next().expect("spice serve exits early").unwrap();
        if let Some(u) = line.strip_prefix("listening on ") {
            break u.trim().to_string();
        }
    };
    let chromium = std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
    let mut node = Command::new("node")
        .arg(root.join("benches/console_page.mjs"))
        .env("CONSOLE_URL", &url)
        .env("CHROMIUM", chromium)
        .env("LANES", LANES.to_string())
        .env("REVIEW_TASK", &reviewed)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("node starts (is it installed?)");
    let mut to_node = node.stdin.take().unwrap();
    // The page asks for each cause: `hold LANE` and `lift LANE`; the rest is the report.
    for line in BufReader::new(node.stdout.take().unwrap()).lines() {
        let line = line.unwrap();
        let (verb, name) = line.split_once(' ').unwrap_or((line.as_str(), ""));
        match verb {
            "hold" | "lift" => {
                let held = verb == "hold";
                let now = spice::clock::Clock::now(&spice::clock::SystemClock);
                s.put_lane(&LaneRow {
                    name: name.into(),
                    state: if held {
                        LaneState::Held
                    } else {
                        LaneState::Working
                    },
                    profile: Some("demo".into()),
                    hold_until: held.then_some(now + 600_000_000),
                    hold_reason: held.then(|| "crash loop: 3 exits in 60s (bench)".into()),
                    ..LaneRow::default()
                })
                .unwrap();
                let ms = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap()
                    .as_millis();
                writeln!(to_node, "{ms}").unwrap();
            }
            _ => println!("{line}"),
        }
    }
    let status = node.wait().unwrap();
    let _ = server.kill();
    let _ = server.wait();
    assert!(status.success(), "console_page.mjs failed");
}
