//! The gate in a fleet: a demo agent's commit breaches a file cap, the pre-commit hook
//! refuses it with the finding, the agent reads the finding from the command's output
//! (its transcript shows it), does what it says and commits again; the task's ledger
//! keeps each run and the console shows the lane's last findings, the latched files
//! and a bypass.

use crate::common;
use crate::common::console;

use common::{git, TestEnv};
use console::Server;
use serde_json::Value;

const LANE: &str = "profile = \"demo\"\nphases = [\"todo\"]\nlease = \"5m\"\n";
/// Files under demo/ may have 10 lines, flexing to 15.
const CAPS: &str = "[gate]\njitter = 0.0\n[gate.files]\n\"demo/**\" = { lines = 10 }\n";

fn gated_fleet() -> TestEnv {
    let env = TestEnv::with_lanes(&[("a", LANE)]);
    std::fs::write(env.repo.join("spice.toml"), CAPS).unwrap();
    git(&env.repo, &["add", "spice.toml"]);
    git(&env.repo, &["commit", "-q", "-m", "gate"]);
    env.run(&["gate", "install"]).ok();
    env
}

/// The demo agent's transcript whose brief holds `marker`.
fn transcript_with(env: &TestEnv, marker: &str) -> std::path::PathBuf {
    std::fs::read_dir(env.home.join("demo-home/.claude/projects"))
        .unwrap()
        .flat_map(|d| std::fs::read_dir(d.unwrap().path()).unwrap())
        .map(|f| f.unwrap().path())
        .find(|p| std::fs::read_to_string(p).unwrap().contains(marker))
        .unwrap_or_else(|| panic!("no transcript holds {marker:?}"))
}

fn runs(env: &TestEnv, task: &str) -> Vec<Value> {
    env.ledger_of(task, "gate_run")
}

#[test]
fn a_demo_agent_whose_commit_breaches_a_cap_gets_the_finding_and_fixes_it() {
    let env = gated_fleet();
    let id = env.add(&[
        "Write a long file",
        "--project",
        "demo",
        "--body",
        "demo: write 40 lines",
    ]);
    let handle = format!("demo-{id}");
    let file = format!("demo/{id}.txt");
    common::finished(env.fleet_up(&["--until-idle"]));

    // The hook refused the first commit with the finding, then passed the fixed one.
    let r = runs(&env, &id);
    assert_eq!(r.len(), 2, "{r:#?}");
    let first = &r[0]["detail"];
    assert_eq!(first["clean"], false, "{first}");
    assert_eq!(first["hook"], "pre-commit");
    assert_eq!(first["lane"], "a");
    let f = &first["findings"][0];
    assert_eq!(f["path"], file.as_str(), "{f}");
    assert_eq!(f["rule"], "file.lines");
    assert_eq!(f["value"], 40);
    assert_eq!(f["limit"], 15);
    assert_eq!(r[1]["detail"]["clean"], true, "{:#}", r[1]);

    // The agent got the finding as the commit's output, one line with what to do.
    let path = transcript_with(&env, "demo: write 40 lines");
    let transcript = std::fs::read_to_string(&path).unwrap();
    let finding = format!(
        "{file}:1: file.lines: 40 lines, past the flex ceiling 15 (base 10): split it to 10 or less"
    );
    let result = transcript
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|v| v.to_string().contains(&finding) && v["type"] == "user")
        .unwrap_or_else(|| panic!("no command result carries the finding:\n{transcript}"));
    assert_eq!(
        result["message"]["content"][0]["is_error"], true,
        "the refused commit failed: {result}"
    );
    assert!(
        transcript.contains("The gate refused my commit"),
        "the agent answered the finding:\n{transcript}"
    );

    // The briefing a successor would read says so.
    let brief = env.run(&["session", "briefing", path.to_str().unwrap()]);
    let text = brief.ok();
    let gate = text
        .split("\n## Gate\n")
        .nth(1)
        .unwrap_or_else(|| panic!("{text}"));
    assert!(
        gate.contains("commit refused by the gate: `git add"),
        "{text}"
    );
    assert!(gate.contains(&format!("  > {finding}")), "{text}");
    assert!(!gate.contains("BYPASS"), "{text}");

    // Its phase landed with the fixed file.
    let show = env.run(&["task", "show", &id, "--json"]).json();
    assert_ne!(show["phase"], "todo", "{show}");
    let landed = git(&env.repo, &["show", &format!("main:{file}")]);
    assert_eq!(landed.lines().count(), 10, "{landed}");

    // The console: the lane's last run (clean now), and no latch (the file is back at
    // its base).
    let srv = Server::start(&env, &[]);
    let g = srv.get("/api/gate").expect(200);
    let lanes = g["lanes"].as_array().unwrap();
    assert_eq!(lanes.len(), 1, "{g:#}");
    assert_eq!(lanes[0]["lane"], "a");
    assert_eq!(lanes[0]["handle"], handle.as_str());
    assert_eq!(lanes[0]["last_run"]["clean"], true, "{g:#}");
    assert_eq!(lanes[0]["bypasses"], serde_json::json!([]), "{g:#}");
    let repos = g["repositories"].as_array().unwrap();
    assert_eq!(repos.len(), 1, "{g:#}");
    assert_eq!(repos[0]["latches"], serde_json::json!([]), "{g:#}");
}

/// A file that flexes is latched, and the console lists it; a commit made past the
/// hook is flagged as a bypass on the lane's row.
#[test]
fn the_console_shows_latched_files_and_bypasses_per_lane() {
    let env = gated_fleet();
    // 12 lines: above the base, within the flex ceiling: passes and latches.
    let id = env.add(&[
        "Write a longish file",
        "--project",
        "demo",
        "--body",
        "demo: write 12 lines",
    ]);
    common::finished(env.fleet_up(&["--until-idle"]));
    let srv = Server::start(&env, &[]);
    let g = srv.get("/api/gate").expect(200);
    let latches = &g["repositories"][0]["latches"];
    assert_eq!(latches[0]["path"], format!("demo/{id}.txt"), "{g:#}");
    assert_eq!(latches[0]["value"], 12, "{g:#}");
    assert_eq!(latches[0]["base"], 10, "{g:#}");
    let run = &g["lanes"][0]["last_run"];
    assert_eq!(run["clean"], true, "{g:#}");
    assert_eq!(run["flexed"][0]["value"], 12, "{g:#}");
    srv.stop();

    // A second task whose agent commits past the hook: the phase merge records it.
    let id2 = env.add(&[
        "Bypass",
        "--project",
        "demo",
        "--body",
        &format!("demo: write 3 lines\n{}", spice::demo::NO_VERIFY_MARKER),
    ]);
    common::finished(env.fleet_up(&["--until-idle"]));
    let bypass = env.ledger_of(&id2, "gate_bypass");
    assert_eq!(bypass.len(), 1, "{bypass:#?}");
    let path = transcript_with(&env, spice::demo::NO_VERIFY_MARKER);
    let brief = env.run(&["session", "briefing", "--json", path.to_str().unwrap()]);
    let b = brief.json();
    assert_eq!(
        b["gate_bypasses"][0]["how"], "`git commit --no-verify`",
        "{b:#}"
    );
    let text = env.run(&["session", "briefing", path.to_str().unwrap()]);
    assert!(
        text.ok()
            .contains("**BYPASS**: went round the gate's hooks with `git commit --no-verify`"),
        "{}",
        text.stdout
    );
    let srv = Server::start(&env, &[]);
    let g = srv.get("/api/gate").expect(200);
    let row = &g["lanes"][0];
    assert_eq!(row["task"], id2.as_str(), "the lane's newest task: {g:#}");
    assert_eq!(row["bypasses"][0]["kind"], "unverified", "{g:#}");
    assert_eq!(row["bypasses"][0]["lane"], "a", "{g:#}");
}
