//! The transcript archive through the binary: a demo lane's session ends, its
//! transcript is copied into `<state>/archive/` (ledger `archived`), the original is
//! deleted, and `spice session briefing` and `spice watch` give what they gave from the
//! original; `spice archive list/prune`; `[archive]` strict; the demo agents' fake
//! home stays inside the state directory.

use crate::common;
use common::{git, TestEnv};
use std::path::{Path, PathBuf};

const LANE: &str = "profile = \"demo\"\nphases = [\"todo\"]\nlease = \"5m\"\n";

/// One demo lane, one task, run until idle; the task's id.
fn run_one(env: &TestEnv) -> String {
    let id = env.add(&["Greet", "--project", "demo", "--priority", "H"]);
    let out = env
        .cmd(&["fleet", "up", "--until-idle", "--json"])
        .env("HOME", env.agent_home())
        .output()
        .unwrap();
    common::to_run(out).ok();
    id
}

/// The `archived` entry of the task's one session: (original, archive file).
fn archived(env: &TestEnv, id: &str) -> (PathBuf, PathBuf, serde_json::Value) {
    let entries = env.ledger_of(id, "archived");
    assert_eq!(entries.len(), 1, "{entries:?}");
    let d = entries[0]["detail"].clone();
    (
        PathBuf::from(d["original"].as_str().unwrap()),
        PathBuf::from(d["archive"].as_str().unwrap()),
        d,
    )
}

fn watch_events(env: &TestEnv, path: &Path) -> Vec<serde_json::Value> {
    let r = env.run(&["watch", "--once", "--json", path.to_str().unwrap()]);
    r.ok()
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .collect()
}

#[test]
fn a_deleted_transcript_still_briefs_and_watches_from_the_archive() {
    let env = TestEnv::with_lanes(&[("a", LANE)]);
    let id = run_one(&env);
    let (original, copy, detail) = archived(&env, &id);
    assert!(copy.starts_with(env.home.join("archive")), "{detail}");
    assert!(copy.to_string_lossy().ends_with(".jsonl.zst"), "{detail}");
    let size = std::fs::metadata(&original).unwrap().len();
    assert_eq!(detail["bytes_in"], size, "{detail}");
    assert_eq!(
        detail["bytes_out"],
        std::fs::metadata(&copy).unwrap().len(),
        "{detail}"
    );
    let session = original.file_stem().unwrap().to_str().unwrap().to_string();

    let brief_before = env
        .run(&["session", "briefing", original.to_str().unwrap(), "--json"])
        .json();
    let text_before = env
        .run(&["session", "briefing", original.to_str().unwrap()])
        .ok()
        .to_string();
    let watched_before = watch_events(&env, &original);
    assert!(watched_before.len() > 3, "{watched_before:?}");
    let usage_before = env.run(&["usage", "--by", "session", "--json"]).json();

    std::fs::remove_file(&original).unwrap();

    // Usage still counts the session, from its compressed copy.
    let usage_after = env.run(&["usage", "--by", "session", "--json"]).json();
    assert_eq!(
        usage_after["missing"],
        serde_json::json!([]),
        "{usage_after}"
    );
    assert_eq!(usage_after["total"], usage_before["total"], "{usage_after}");

    let by_path = env
        .run(&["session", "briefing", original.to_str().unwrap(), "--json"])
        .json();
    assert_eq!(by_path, brief_before);
    let by_id = env
        .run(&["session", "briefing", &session[..8], "--json"])
        .json();
    assert_eq!(by_id, brief_before);
    let text_after = env
        .run(&["session", "briefing", original.to_str().unwrap()])
        .ok()
        .to_string();
    assert_eq!(text_after, text_before);
    assert_eq!(watch_events(&env, &original), watched_before);
    let shown = env.run(&["session", "show", &session, "--json"]);
    assert!(shown.ok().lines().count() >= watched_before.len());

    // `session list` in the worktree the session ran in still shows it, archived.
    let cwd = brief_before["cwd"].as_str().unwrap().to_string();
    std::fs::create_dir_all(&cwd).unwrap();
    let listed = common::to_run(
        env.cmd(&["session", "list", "--json"])
            .current_dir(&cwd)
            .output()
            .unwrap(),
    )
    .json();
    let row = listed
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["session_id"] == session.as_str())
        .unwrap_or_else(|| panic!("{listed}"))
        .clone();
    assert_eq!(row["archived"], copy.to_str().unwrap(), "{row}");
    assert_eq!(row["path"], original.to_str().unwrap(), "{row}");

    let list = env.run(&["archive", "list", "--json"]).json();
    let list = list.as_array().unwrap();
    assert_eq!(list.len(), 1, "{list:?}");
    assert_eq!(list[0]["session_id"], session.as_str());
    assert_eq!(list[0]["original"], original.to_str().unwrap());
}

#[test]
fn prune_keeps_the_archive_within_its_bound() {
    let env = TestEnv::with_lanes(&[("a", LANE)]);
    let id = run_one(&env);
    let (_, copy, _) = archived(&env, &id);
    let dry = env
        .run(&[
            "archive",
            "prune",
            "--max-bytes",
            "1",
            "--dry-run",
            "--json",
        ])
        .json();
    assert_eq!(dry["removed"].as_array().unwrap().len(), 1, "{dry}");
    assert!(copy.exists(), "a dry run removes nothing");
    // The bound in the repository's spice.toml applies without --max-bytes.
    std::fs::write(
        env.repo.join("spice.toml"),
        "[archive]\nmax_bytes = \"1GiB\"\n",
    )
    .unwrap();
    let kept = env.run(&["archive", "prune", "--json"]).json();
    assert_eq!(kept["max_bytes"], 1u64 << 30, "{kept}");
    assert!(kept["removed"].as_array().unwrap().is_empty(), "{kept}");
    std::fs::write(env.repo.join("spice.toml"), "[archive]\nmax_bytes = 1\n").unwrap();
    let gone = env.run(&["archive", "prune", "--json"]).json();
    assert_eq!(gone["removed"].as_array().unwrap().len(), 1, "{gone}");
    assert!(!copy.exists());
    assert!(env.run(&["archive", "list", "--json"]).json() == serde_json::json!([]));
}

#[test]
fn a_bad_archive_or_gc_section_stops_the_fleet_with_its_place() {
    let env = TestEnv::with_lanes(&[("a", LANE)]);
    std::fs::write(
        env.repo.join("spice.toml"),
        "[archive]\nmax_bytes = \"lots\"\n[gc]\nafter = \"soon\"\n",
    )
    .unwrap();
    git(&env.repo, &["add", "spice.toml"]);
    git(&env.repo, &["commit", "-q", "-m", "bad"]);
    env.add(&["Never", "--project", "demo"]);
    let r = common::to_run(
        env.cmd(&["fleet", "up", "--until-idle"])
            .env("HOME", env.agent_home())
            .output()
            .unwrap(),
    );
    // Every problem, each a whole `spice: file:line:col: reason` line, exit 2.
    let every = |r: &common::Run, file: &str| {
        assert_eq!(r.code, 2, "{}", r.stderr);
        let lines: Vec<&str> = r.stderr.lines().collect();
        assert_eq!(lines.len(), 2, "{}", r.stderr);
        assert!(
            lines[0].starts_with(&format!("spice: {file}:2:13: archive.max_bytes:")),
            "{lines:?}"
        );
        assert!(
            lines[1].starts_with(&format!("spice: {file}:4:9: gc.after:")),
            "{lines:?}"
        );
    };
    every(&r, "spice.toml (at main)");
    assert!(!env.home.join("worktrees").exists(), "nothing started");
    every(&env.run(&["fleet", "check"]), "spice.toml (at main)");
    let r = env.run(&["archive", "prune"]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.stderr.contains("spice.toml:2:13: archive.max_bytes:"),
        "{}",
        r.stderr
    );
}

/// Regression: a lane of the built-in demo profile wrote its fake transcripts into
/// the operator's real `~/.claude` (the HOME `fleet up` runs with).
#[test]
fn regression_the_demo_agents_home_is_inside_the_state_directory() {
    let env = TestEnv::with_lanes(&[("a", LANE)]);
    env.add(&["Greet", "--project", "demo"]);
    let user_home = env.dir.path().join("user-home");
    std::fs::create_dir_all(&user_home).unwrap();
    let out = env
        .cmd(&["fleet", "up", "--until-idle", "--json"])
        .env("HOME", &user_home)
        .output()
        .unwrap();
    common::to_run(out).ok();
    let left: Vec<_> = std::fs::read_dir(&user_home)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    assert!(left.is_empty(), "the user's HOME was written to: {left:?}");
    assert!(env.home.join("demo-home/.claude/projects").is_dir());
}

/// Text that zstd has real work to compress (about 4 bits of entropy a byte) and no
/// newline: a transcript's unfinished last line, which the lane's follower holds back
/// and never decodes, but the archive copies whole.
fn unfinished_line(bytes: usize) -> Vec<u8> {
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    (0..bytes)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            b"0123456789abcdef"[(x & 15) as usize]
        })
        .collect()
}

/// A session the supervisor stops (`fleet down`) is archived before the supervisor
/// exits: the ledger has it the moment `fleet down` returns. The transcript ends in
/// 64 MiB of an unfinished line, so its copy takes the archiver far longer than the
/// supervisor takes to exit once its lanes stop: without the wait for the archiver,
/// the process ends with the copy half made and nothing in the ledger.
#[test]
fn fleet_down_archives_the_stopped_sessions_before_exiting() {
    let env = TestEnv::with_lanes(&[("a", LANE)]);
    let id = env.add(&[
        "Wait",
        "--project",
        "demo",
        "--body",
        "demo: wait for the operator",
    ]);
    let fleet = env.fleet_up(&[]);
    common::wait_for("the agent to wait for the operator", 30, || {
        (env.lane("a")["state"] == "waiting").then_some(())
    });
    let transcript = PathBuf::from(env.lane("a")["transcript"].as_str().unwrap());
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&transcript)
        .unwrap();
    std::io::Write::write_all(&mut f, &unfinished_line(64 << 20)).unwrap();
    drop(f);
    env.run(&["fleet", "down"]).ok();
    let (original, copy, detail) = archived(&env, &id);
    assert!(copy.is_file(), "{detail}");
    assert!(
        original.is_file(),
        "the original is never touched: {detail}"
    );
    assert_eq!(
        detail["bytes_in"],
        std::fs::metadata(&original).unwrap().len()
    );
    common::finished(fleet);
}

/// Regression (issue 40): each session left a terminal recording and a brief in the
/// state directory for good, so a fleet that ran for days filled its disk. Ended
/// sessions' recordings and briefs are pruned to `[archive] sessions_max_bytes`,
/// oldest first, after each archiving; the current claim's are kept.
#[test]
fn regression_ended_sessions_recordings_and_briefs_are_pruned_to_their_bound() {
    let env = TestEnv::with_lanes(&[("a", LANE)]);
    std::fs::write(
        env.repo.join("spice.toml"),
        "[archive]\nsessions_max_bytes = 1\n",
    )
    .unwrap();
    git(&env.repo, &["add", "spice.toml"]);
    git(&env.repo, &["commit", "-q", "-m", "a small bound"]);
    // An ended session of long ago, and the files of an unrelated name.
    let rec = env.home.join("recordings");
    std::fs::create_dir_all(&rec).unwrap();
    std::fs::write(rec.join("long-ago.cast"), "x".repeat(4096)).unwrap();
    std::fs::write(rec.join("README"), "mine").unwrap();
    for title in ["One", "Two"] {
        env.add(&[title, "--project", "demo"]);
    }
    let out = env
        .cmd(&["fleet", "up", "--until-idle"])
        .env("HOME", env.agent_home())
        .output()
        .unwrap();
    let run = common::to_run(out);
    run.ok();
    assert!(!rec.join("long-ago.cast").exists(), "{}", run.stderr);
    assert!(rec.join("README").exists());
    let log = std::fs::read_to_string(env.home.join("logs/fleet.log")).unwrap_or_default();
    assert!(
        log.contains("recordings and briefs over their bound")
            || run
                .stderr
                .contains("recordings and briefs over their bound"),
        "{log}\n{}",
        run.stderr
    );
    // Two sessions ran; at most the last one's files can be left (the bound is 1 byte).
    let casts = std::fs::read_dir(&rec)
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .is_ok_and(|e| e.path().extension().is_some_and(|x| x == "cast"))
        })
        .count();
    assert!(casts <= 1, "{casts} recordings left");
    // A bad bound is located like the others.
    std::fs::write(
        env.repo.join("spice.toml"),
        "[archive]\nsessions_max_bytes = \"much\"\n",
    )
    .unwrap();
    git(&env.repo, &["commit", "-q", "-am", "bad"]);
    let r = env.run(&["fleet", "check"]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.stderr
            .contains("spice.toml (at main):2:22: archive.sessions_max_bytes:"),
        "{}",
        r.stderr
    );
}
