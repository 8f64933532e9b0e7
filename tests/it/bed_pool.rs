//! Recycling through the real binary: a lane of demo agents finishes a task, its
//! worktree (with the bed its task built up and a file its task left untracked) goes
//! to the repository's pool, and the lane's next task starts in that worktree on its
//! own branch: the bed kept, the untracked file gone from it but saved under
//! `refs/spice/saved/…`, nothing deleted silently. `spice bed status` shows the pool
//! and `spice bed gc` evicts pooled worktrees under a tiny budget.

use crate::common;
use common::{git, TestEnv};
use serde_json::Value;
use std::path::PathBuf;

const LANE: &str = "profile = \"demo\"\nphases = [\"todo\"]\nlease = \"5m\"\n";
/// Each task's on_release (after its phase merged, in its worktree) leaves an
/// untracked file and adds to the bed, as a test run would.
const BED: &str = r#"[testbed]
paths = ["build"]
warm = [["sh", "-c", "mkdir -p build && echo warm > build/base.txt"]]
key = ["deps.lock"]
pool = 2

[hooks]
on_release = ["sh", "-c", "echo \"notes of $SPICE_TASK\" > notes.txt && echo \"$SPICE_TASK\" >> build/built-by.txt"]
"#;

fn bed_repo(toml: &str) -> TestEnv {
    let env = TestEnv::with_lanes(&[("a", LANE)]);
    std::fs::write(env.repo.join("spice.toml"), toml).unwrap();
    std::fs::write(env.repo.join("deps.lock"), "dep 1\n").unwrap();
    std::fs::write(env.repo.join(".gitignore"), "build/\n").unwrap();
    git(&env.repo, &["add", "spice.toml", "deps.lock", ".gitignore"]);
    git(&env.repo, &["commit", "-q", "-m", "bed"]);
    env
}

fn one(env: &TestEnv, task: &str, kind: &str, action: &str) -> Value {
    let all = env.ledger_of(task, kind);
    let found: Vec<&Value> = all
        .iter()
        .filter(|e| e["detail"]["action"] == action)
        .collect();
    assert_eq!(found.len(), 1, "{task} {kind} {action}: {all:#?}");
    found[0]["detail"].clone()
}

#[test]
fn a_finished_worktree_is_recycled_for_the_next_task_and_its_leftovers_saved() {
    let env = bed_repo(BED);
    env.run(&["bed", "warm"]).ok();
    let first = env.add(&["First", "--project", "demo", "--priority", "H"]);
    let second = env.add(&["Second", "--project", "demo", "--priority", "L"]);
    common::finished(env.fleet_up(&["--until-idle"]));

    // The first task's worktree was seeded from the template, then pooled with its
    // untracked file saved.
    let bed1 = env.ledger_of(&first, "bed");
    assert_eq!(bed1[0]["detail"]["seeded"], true, "{bed1:#?}");
    let wt1 = PathBuf::from(bed1[0]["detail"]["worktree"].as_str().unwrap());
    let pooled = one(&env, &first, "pool", "pooled");
    let saved = pooled["saved"]
        .as_str()
        .expect("leftovers saved")
        .to_string();
    assert!(saved.starts_with("refs/spice/saved/spice/"), "{pooled:#}");
    assert_eq!(
        pooled["saved_files"],
        serde_json::json!(["notes.txt"]),
        "{pooled:#}"
    );
    let notes = git(&env.repo, &["show", &format!("{saved}:notes.txt")]);
    assert_eq!(notes.trim(), format!("notes of {first}"));

    // The second task started in it: the bed kept (the first task's addition is
    // there), the leftover gone, on its own branch.
    let taken = one(&env, &second, "pool", "taken");
    assert_eq!(taken["from_task"], first_handle(&env, &first), "{taken:#}");
    let bed2 = env.ledger_of(&second, "bed");
    assert_eq!(bed2[0]["detail"]["method"], "kept", "{bed2:#?}");
    let wt2 = PathBuf::from(bed2[0]["detail"]["worktree"].as_str().unwrap());
    assert_ne!(wt1, wt2);
    assert!(!wt1.exists(), "the first task's place was freed");
    // The second task's own on_release ran in it too, then it was pooled in turn.
    let pooled2 = one(&env, &second, "pool", "pooled");
    let home2 = PathBuf::from(pooled2["path"].as_str().unwrap());
    let built = std::fs::read_to_string(home2.join("build/built-by.txt")).unwrap();
    assert_eq!(built, format!("{first}\n{second}\n"), "one bed, both tasks");
    assert_eq!(
        std::fs::read_to_string(home2.join("build/base.txt")).unwrap(),
        "warm\n"
    );
    assert!(!home2.join("notes.txt").exists());
    let notes2 = pooled2["saved"].as_str().unwrap();
    assert_eq!(
        git(&env.repo, &["show", &format!("{notes2}:notes.txt")]).trim(),
        format!("notes of {second}")
    );
    // Both branches are merged and kept; the pooled worktree is on neither.
    assert_eq!(
        git(&home2, &["branch", "--show-current"]).trim(),
        "",
        "detached"
    );

    let s = env.run(&["bed", "status", "--json"]).json();
    let pool = s["pool"].as_array().unwrap();
    assert_eq!(pool.len(), 1, "{s:#}");
    assert!(pool[0]["usage"]["apparent"].as_u64().unwrap() > 0, "{s:#}");
    let text = env.run(&["bed", "status"]).ok().to_string();
    assert!(text.contains("pooled"), "{text}");

    // Under a tiny budget both the template and the pooled worktree go.
    std::fs::write(
        env.repo.join("spice.toml"),
        BED.replace("pool = 2", "pool = 2\ndisk_budget = \"1KiB\""),
    )
    .unwrap();
    let g = env.run(&["bed", "gc", "--json"]).json();
    let mut kinds: Vec<&str> = g
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["kind"].as_str().unwrap())
        .collect();
    kinds.sort();
    assert_eq!(kinds, ["pooled", "template"], "{g:#}");
    assert!(!home2.exists());
    assert_eq!(
        env.run(&["bed", "status", "--json"]).json()["pool"],
        serde_json::json!([])
    );
}

/// A todo lane and a review lane on one repository with a pool: whichever way the
/// review lane gets the task's branch (the todo lane's worktree recycled and taken
/// from the pool, or let go of by the handoff), every task completes both phases,
/// each phase's leftovers are saved under `refs/spice/saved/`, and no lane errs.
#[test]
fn a_todo_and_a_review_lane_share_the_pool_and_lose_nothing() {
    let env = TestEnv::with_lanes(&[
        (
            "core",
            "profile = \"demo\"\nphases = [\"todo\"]\nlease = \"5m\"\n",
        ),
        (
            "review",
            "profile = \"demo\"\nphases = [\"review\"]\nlease = \"5m\"\n",
        ),
    ]);
    std::fs::write(env.repo.join("spice.toml"), BED).unwrap();
    std::fs::write(env.repo.join("deps.lock"), "dep 1\n").unwrap();
    std::fs::write(env.repo.join(".gitignore"), "build/\n").unwrap();
    git(&env.repo, &["add", "spice.toml", "deps.lock", ".gitignore"]);
    git(&env.repo, &["commit", "-q", "-m", "bed"]);
    env.run(&["bed", "warm"]).ok();
    let tasks: Vec<String> = (1..=3)
        .map(|i| env.add(&[&format!("Task {i}"), "--project", "demo"]))
        .collect();
    let run = common::finished(env.fleet_up(&["--until-idle"]));
    for l in ["core", "review"] {
        assert!(
            env.lane(l)["last_error"].is_null(),
            "{}\n{}",
            env.lane(l),
            run.stdout
        );
    }
    for task in &tasks {
        let show = env.run(&["task", "show", task, "--json"]).json();
        assert_eq!(show["status"], "completed", "{show}\n{}", run.stdout);
        let handle = show["handle"].as_str().unwrap();
        // Every phase's bed was there: seeded from the template, or kept in a
        // recycled worktree.
        for b in env.ledger_of(task, "bed") {
            let how = b["detail"]["method"].as_str().unwrap_or("");
            assert!(how != "cold", "{b:#}");
        }
        let refs = git(
            &env.repo,
            &[
                "for-each-ref",
                "--format=%(refname)",
                &format!("refs/spice/saved/spice/{handle}/"),
            ],
        );
        let refs: Vec<&str> = refs.lines().collect();
        assert!(
            refs.len() >= 2,
            "one save per phase at least: {refs:?}\n{show}"
        );
        for r in &refs {
            let notes = git(&env.repo, &["show", &format!("{r}:notes.txt")]);
            assert_eq!(notes.trim(), format!("notes of {task}"), "{r}");
        }
    }
}

fn first_handle(env: &TestEnv, task: &str) -> String {
    env.run(&["task", "show", task, "--json"]).json()["handle"]
        .as_str()
        .unwrap()
        .to_string()
}
