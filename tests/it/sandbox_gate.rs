//! A confined agent's commits are gated by its supervisor, and nothing the gate
//! remembers is the agent's to write (issue #39). Regression: the pre-commit hook ran
//! inside the agent's `git commit`, so the gate's directory (latches, the trees that
//! passed) was granted to it: any agent could release its own latches or mark a tree
//! as passed.
//!
//! A scripted agent tries to write the gate's files (refused), latches two files by
//! flexing them, has a tree judged in which one is back at its base without ever
//! committing it, commits the other back at its base for real, and lands its phase:
//! the real release takes effect, the judged-only one never does, and every commit is
//! recorded as passed by (parent, tree), so the phase gate sees no bypass (a
//! `commit -a` included: its hook is judged on the index git gave it; and a
//! `commit --amend`, judged on the commit it replaces).
//!
//! Needs Landlock (as `sandbox.rs`): ignored by a bare `cargo test`, run by `.ci/run`.

use crate::common;
use crate::sandbox::scripted_profile;

use common::{git, TestEnv};

const AGENT: &str = r##"#!/bin/bash
report="$PWD/attempts.txt"
try() { name="$1"; shift; if ( "$@" ) >/dev/null 2>&1; then echo "escape $name: ALLOWED" >> "$report"; else echo "escape $name: refused" >> "$report"; fi; }
gate="$(git rev-parse --path-format=absolute --git-common-dir)/spice/gate"
try latches sh -c 'echo "{}" > "$0/latches.json"' "$gate"
try verified sh -c 'echo "- 0000" >> "$0/verified"' "$gate"
try released sh -c 'mkdir -p "$0/released" && echo "{}" > "$0/released/forged.json"' "$gate"
try gate_file sh -c 'echo x > "$0/forged"' "$gate"
set -e
lines() { seq 1 "$1" | sed 's/^/line /'; }
mkdir -p src
# Both files flex above their base (10) within the ceiling (15): latched.
lines 12 > src/a.txt
lines 12 > src/c.txt
git add src attempts.txt
git commit -q -m "a and c flex"
"$1" gate latches --json > "$TMPDIR/latches1.json"
# A tree with a.txt back at its base is judged (the hook run by hand), never committed.
lines 5 > src/a.txt
git add src/a.txt
"$(git rev-parse --git-path hooks)/pre-commit" 2> "$TMPDIR/judged.txt"
git checkout -q HEAD -- src/a.txt
# c.txt back at its base, committed with -a (git stages it into a temporary index
# that the hook is given); then one more commit.
lines 5 > src/c.txt
git commit -q -am "c back at its base"
echo b > src/b.txt
git add src/b.txt
git commit -q -m "b"
# An amendment: judged on the commit it replaces, which passed itself.
echo bb > src/b.txt
git add src/b.txt
git commit -q --amend -m "b, amended"
"$1" gate latches --json > "$TMPDIR/latches2.json"
"$1" task phase "$SPICE_TASK" --done > "$TMPDIR/done.txt" 2>&1
"##;

const CAPS: &str = "[gate]\njitter = 0.0\n[gate.files]\n\"src/**\" = { lines = 10, flex = 1.5 }\n";

fn latched(env: &TestEnv, file: &str) -> Vec<String> {
    let text = std::fs::read_to_string(env.home.join("tmp/a").join(file)).unwrap_or_default();
    let v: serde_json::Value =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
    let mut paths: Vec<String> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["path"].as_str().unwrap().to_string())
        .collect();
    paths.sort();
    paths
}

#[test]
#[ignore = "needs Landlock in the kernel (.ci/run asks for it)"]
fn regression_a_confined_agent_cannot_write_the_gate_and_a_judged_tree_releases_nothing() {
    let env = TestEnv::with_lanes(&[("a", "profile = \"gated\"\nphases = [\"todo\"]\n")]);
    scripted_profile(&env, "gated", AGENT);
    std::fs::write(env.repo.join("spice.toml"), CAPS).unwrap();
    git(&env.repo, &["add", "spice.toml"]);
    git(&env.repo, &["commit", "-q", "-m", "gate"]);
    env.run(&["gate", "install"]).ok();
    let task = env.add(&["Gated", "--project", "demo"]);
    let run = common::finished(env.fleet_up(&["--until-idle", "--json"]));
    assert_eq!(env.lane("a")["sandbox"], "confined");

    let branch = format!("spice/demo-{task}/work");
    let attempts = git(&env.repo, &["show", &format!("{branch}:attempts.txt")]);
    assert!(!attempts.contains("ALLOWED"), "{attempts}");
    assert_eq!(attempts.matches("refused").count(), 4, "{attempts}");
    let gate = env.repo.join(".git/spice/gate");
    assert!(!gate.join("forged").exists());
    assert!(!gate.join("released/forged.json").exists());

    assert_eq!(latched(&env, "latches1.json"), ["src/a.txt", "src/c.txt"]);
    // c.txt's release was committed; a.txt's was only judged.
    assert_eq!(
        latched(&env, "latches2.json"),
        ["src/a.txt"],
        "{}",
        run.stderr
    );
    let judged = std::fs::read_to_string(env.home.join("tmp/a/judged.txt")).unwrap();
    assert!(!judged.contains("refused"), "{judged}");

    let done = std::fs::read_to_string(env.home.join("tmp/a/done.txt")).unwrap_or_default();
    assert!(done.contains("todo → review"), "{done}\n{}", run.stderr);
    assert_eq!(
        git(&env.repo, &["show", "main:src/c.txt"]).lines().count(),
        5
    );
    // Every commit passed the supervisor's gate as the (parent, tree) it made.
    assert_eq!(
        env.ledger_of(&task, "gate_bypass"),
        Vec::<serde_json::Value>::new()
    );
    let runs = env.ledger_of(&task, "gate_run");
    let judged_by_supervisor = runs
        .iter()
        .filter(|r| r["detail"]["hook"] == "pre-commit" && r["detail"]["lane"] == "a")
        .count();
    assert_eq!(judged_by_supervisor, 5, "{runs:?}");
    let verified = std::fs::read_to_string(gate.join("verified")).unwrap();
    assert!(
        verified.lines().all(|l| l.split(' ').count() == 2),
        "{verified}"
    );
}
