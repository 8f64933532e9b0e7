//! What an agent changed, and review comments that are steering (issue #38): the
//! console's `/api/tasks/ID/review` shows the task branch against the base its lane
//! merges into, file by file with numbered lines; `spice steer --at PATH:LINES` (and
//! the console's steer with `at`) makes an item anchored to those lines, quoting them;
//! the review shows each such comment at its lines with its state, the agent's answer,
//! and whether the lines changed since.

use crate::common;
use crate::common::console;

use common::{git, TestEnv};
use console::Server;
use serde_json::json;
use spice::store::Store;
use std::path::PathBuf;
use std::sync::Arc;

/// A repository on `main` with lane `a`, a task claimed by session `s1` of lane `a` in
/// its own worktree, where the agent changed `src/x.rs`; the launch recorded as the
/// supervisor records it. Returns the env, the task id and the worktree.
fn reviewed() -> (TestEnv, String, PathBuf) {
    let env = TestEnv::with_lanes(&[("a", "profile = \"demo\"\n")]);
    std::fs::create_dir_all(env.repo.join("src")).unwrap();
    std::fs::write(
        env.repo.join("src/x.rs"),
        "fn a() {}\nfn b() {}\nfn c() {}\n",
    )
    .unwrap();
    git(&env.repo, &["add", "src/x.rs"]);
    git(&env.repo, &["commit", "-q", "-m", "x"]);
    let task = env.add(&["Tidy x", "--project", "demo"]);
    let wt = env.dir.path().join("wt");
    git(
        &env.repo,
        &[
            "worktree",
            "add",
            "-q",
            "-b",
            "spice/demo-x",
            wt.to_str().unwrap(),
        ],
    );
    std::fs::write(
        wt.join("src/x.rs"),
        "fn a() {}\nfn b() { todo!() }\nfn c() {}\nfn d() {}\n",
    )
    .unwrap();
    git(&wt, &["commit", "-q", "-am", "b and d"]);
    env.run(&[
        "task",
        "claim",
        &task,
        "--claimant",
        "s1",
        "--lane",
        "a",
        "--worktree",
        wt.to_str().unwrap(),
    ])
    .ok();
    Store::open_dir(&env.home, Arc::new(spice::clock::SystemClock))
        .unwrap()
        .note(
            &task,
            "launched",
            "s1",
            json!({"lane": "a", "base": "main", "worktree": wt, "repo": env.repo, "pid": 1, "turn": 1}),
        )
        .unwrap();
    (env, task, wt)
}

#[test]
fn a_review_comment_is_steering_anchored_to_its_lines() {
    let (env, task, wt) = reviewed();
    let srv = Server::start(&env, &[]);
    let doc = srv.get(&format!("/api/tasks/{task}/review")).expect(200);
    assert_eq!(doc["base"], "main", "{doc}");
    assert_eq!(doc["lane"], "a", "{doc}");
    assert_eq!(doc["commits"][0]["subject"], "b and d", "{doc}");
    let file = &doc["files"][0];
    assert_eq!(file["path"], "src/x.rs", "{doc}");
    assert_eq!(
        (file["added"].as_u64(), file["removed"].as_u64()),
        (Some(2), Some(1))
    );
    let added: Vec<(u64, String)> = file["hunks"][0]["lines"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|l| l["kind"] == "+")
        .map(|l| {
            (
                l["new"].as_u64().unwrap(),
                l["text"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        added,
        [(2, "fn b() { todo!() }".into()), (4, "fn d() {}".into())]
    );
    assert_eq!(doc["comments"], json!([]));

    // From the CLI: the item quotes the lines as they are in the lane's worktree.
    let key = env
        .run(&[
            "steer",
            "lane:a",
            "--at",
            "src/x.rs:2-3",
            "No todo!() here: return an error.",
        ])
        .ok()
        .trim()
        .to_string();
    let items = env.run(&["inbox", "lane:a", "--json"]).json();
    let text = items[0]["text"].as_str().unwrap();
    assert_eq!(
        text,
        "Review of src/x.rs:2-3:\n```\nfn b() { todo!() }\nfn c() {}\n```\nNo todo!() here: return an error."
    );
    // Lines that are not there, or a path out of the worktree: one-line refusals.
    env.run(&["steer", "lane:a", "--at", "src/x.rs:4-9", "x"])
        .fails(2, "src/x.rs: has 4 lines, so no lines 4-9");
    env.run(&["steer", "lane:a", "--at", "../secret:1", "x"])
        .fails(2, "relative to the worktree");
    env.run(&["steer", "lane:zzz", "--at", "src/x.rs:1", "x", "--force"])
        .fails(2, "lane zzz holds no claim with a worktree");

    // Shown at its lines, pending; answered by the agent, shown with the answer.
    let doc = srv.get(&format!("/api/tasks/{task}/review")).expect(200);
    let c = &doc["comments"][0];
    assert_eq!(
        (&c["key"], &c["path"], &c["start"], &c["end"], &c["state"]),
        (
            &json!(key),
            &json!("src/x.rs"),
            &json!(2),
            &json!(3),
            &json!("pending")
        ),
        "{doc}"
    );
    assert_eq!(c["comment"], "No todo!() here: return an error.");
    assert_eq!(c["outdated"], false, "{doc}");
    env.run_stdin(
        &["ack", "apply"],
        &format!("ACK {key}: it returns an error now"),
    )
    .ok();
    let doc = srv.get(&format!("/api/tasks/{task}/review")).expect(200);
    let c = &doc["comments"][0];
    assert_eq!(c["state"], "acked", "{doc}");
    assert_eq!(c["answer"]["body"], "it returns an error now", "{doc}");
    // The lines changed since: the comment is outdated.
    std::fs::write(
        wt.join("src/x.rs"),
        "fn a() {}\nfn b() -> Result<(), E> { Err(E) }\nfn c() {}\nfn d() {}\n",
    )
    .unwrap();
    let doc = srv.get(&format!("/api/tasks/{task}/review")).expect(200);
    assert_eq!(doc["comments"][0]["outdated"], true, "{doc}");

    // From the console: the same, through POST /api/steer with `at`.
    let made = srv
        .post(
            "/api/steer",
            &json!({"target": "lane:a", "text": "And here?", "at": "src/x.rs:4"}),
        )
        .expect(201);
    assert!(
        made["text"]
            .as_str()
            .unwrap()
            .starts_with("Review of src/x.rs:4-4:\n```\nfn d() {}\n```\n"),
        "{made}"
    );
    srv.post(
        "/api/steer",
        &json!({"target": "lane:a", "text": "x", "at": "/etc/passwd:1"}),
    )
    .refused(400, "relative to the worktree");
    // A task no agent was launched on has nothing to review yet.
    let other = env.add(&["Untouched", "--project", "demo"]);
    srv.get(&format!("/api/tasks/{other}/review"))
        .refused(400, "nothing to review yet");
}

/// Regression (issue 38): once a task's phase had merged, its branch and base met at
/// the same commit and the review showed nothing at all, just when the review lane
/// reads it. It shows what the merge brought in, named so; and edits the agent has
/// not committed come apart from the committed ones.
/// Each commit of a review says what the pre-commit gate made of it: passed through
/// the installed hook, or not through it (`--no-verify`, or made before the hook was
/// installed: the phase gate's bypasses, seen before the merge); nothing without it.
#[test]
fn each_commit_says_whether_it_went_through_the_pre_commit_gate() {
    let (env, task, wt) = reviewed();
    let srv = Server::start(&env, &[]);
    let path = format!("/api/tasks/{task}/review");
    let doc = srv.get(&path).expect(200);
    assert_eq!(doc["commits"][0]["gate"], json!(null), "no hook: {doc}");
    env.run(&["gate", "install"]).ok();
    for (file, flags) in [("src/y.rs", &[][..]), ("src/z.rs", &["--no-verify"][..])] {
        std::fs::write(wt.join(file), "fn f() {}\n").unwrap();
        git(&wt, &["add", file]);
        let mut args = vec!["commit", "-q", "-m", file];
        args.extend_from_slice(flags);
        git(&wt, &args);
    }
    let doc = srv.get(&path).expect(200);
    let gates: Vec<(String, serde_json::Value)> = doc["commits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["subject"].as_str().unwrap().to_string(),
                c["gate"].clone(),
            )
        })
        .collect();
    assert_eq!(
        gates,
        [
            ("b and d".to_string(), json!("unverified")),
            ("src/y.rs".to_string(), json!("passed")),
            ("src/z.rs".to_string(), json!("unverified")),
        ],
        "{doc}"
    );
}

#[test]
fn regression_a_merged_phase_still_shows_what_it_changed_and_loose_edits_apart() {
    let (env, task, wt) = reviewed();
    let done = env.run(&["task", "phase", &task, "--done", "--claimant", "s1"]);
    let out = done.ok();
    assert!(out.contains("merged spice/demo-x into main"), "{out}");
    let merged = &env.ledger_of(&task, "merged")[0]["detail"];
    assert_eq!(merged["base"], "main", "{merged}");
    assert_eq!(merged["phase"], "todo", "{merged}");

    let srv = Server::start(&env, &[]);
    let doc = srv.get(&format!("/api/tasks/{task}/review")).expect(200);
    assert_eq!(doc["merged"]["base"], "main", "{doc}");
    assert_eq!(doc["merged"]["commit"], merged["commit"], "{doc}");
    assert_eq!(doc["commits"][0]["subject"], "b and d", "{doc}");
    let file = &doc["files"][0];
    assert_eq!(file["path"], "src/x.rs", "{doc}");
    assert_eq!(
        (file["added"].as_u64(), file["removed"].as_u64()),
        (Some(2), Some(1)),
        "{doc}"
    );
    assert_eq!(doc["uncommitted"], json!([]), "{doc}");

    // An edit not committed yet: listed apart, with its lines.
    std::fs::write(
        wt.join("src/x.rs"),
        "fn a() {}\nfn b() { todo!() }\nfn c() { 1 }\nfn d() {}\n",
    )
    .unwrap();
    let doc = srv.get(&format!("/api/tasks/{task}/review")).expect(200);
    assert_eq!(
        doc["files"][0]["added"], 2,
        "the committed view is unchanged: {doc}"
    );
    let loose = &doc["uncommitted"][0];
    assert_eq!(loose["path"], "src/x.rs", "{doc}");
    assert_eq!(
        (loose["added"].as_u64(), loose["removed"].as_u64()),
        (Some(1), Some(1)),
        "{doc}"
    );
    let added: Vec<&str> = loose["hunks"][0]["lines"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|l| l["kind"] == "+")
        .map(|l| l["text"].as_str().unwrap())
        .collect();
    assert_eq!(added, ["fn c() { 1 }"]);
}
