//! The scripted demo agent driven by hand, as the supervisor will drive it: a claimed
//! task in a worktree, the shell redirector, a pending steering item. Its transcript
//! is where Claude's would be, it ACKs the item, commits, and completes the phase.

use crate::common;
use common::{git, TestEnv};

#[test]
fn the_demo_agent_answers_steering_commits_and_completes_its_phase() {
    let env = TestEnv::new();
    git(&env.repo, &["commit", "-q", "--allow-empty", "-m", "root"]);
    let task = env.add(&["Write the greeting", "--project", "demo"]);
    let session = "sess-demo-1";
    env.run(&[
        "task",
        "claim",
        &task,
        "--claimant",
        session,
        "--lane",
        "core",
    ])
    .ok();
    let key = env
        .run(&[
            "steer",
            "--force",
            "lane:core",
            "also mention the test plan",
        ])
        .ok()
        .trim()
        .to_string();
    let bashenv = env.dir.path().join("bashenv");
    std::fs::write(&bashenv, env.run(&["shell-init", "bash"]).ok()).unwrap();
    let brief = env.dir.path().join("brief.md");
    std::fs::write(&brief, format!("Task demo-{task}: write the greeting.")).unwrap();
    let home = env.dir.path().join("agent-home");
    let out = env
        .cmd(&[
            "demo-agent",
            "--session-id",
            session,
            "--brief-file",
            brief.to_str().unwrap(),
            "--command-seconds",
            "0.2",
        ])
        .env("HOME", &home)
        .env("BASH_ENV", &bashenv)
        .env("SPICE_LANE", "core")
        .env("SPICE_SESSION", session)
        .env("SPICE_TASK", &task)
        .env("GIT_AUTHOR_NAME", "demo")
        .env("GIT_AUTHOR_EMAIL", "demo@spice")
        .env("GIT_COMMITTER_NAME", "demo")
        .env("GIT_COMMITTER_EMAIL", "demo@spice")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // The transcript is where Claude Code would write it, and reads as one.
    let cwd = std::fs::canonicalize(&env.repo).unwrap();
    let slug: String = cwd
        .to_string_lossy()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    let transcript = home
        .join(".claude/projects")
        .join(slug)
        .join(format!("{session}.jsonl"));
    assert!(
        transcript.exists(),
        "no transcript at {}",
        transcript.display()
    );

    // The steering item reached its commands and its reply ACKs it; a scan retires it.
    let scan = env
        .run(&["ack", "scan", transcript.to_str().unwrap(), "--json"])
        .json();
    assert!(
        scan["outcomes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|o| o["key"] == key.as_str() && o["effect"] == "acked"),
        "{scan}"
    );
    let b = env
        .run(&[
            "session",
            "briefing",
            transcript.to_str().unwrap(),
            "--json",
        ])
        .json();
    assert!(b["acks"]
        .as_array()
        .unwrap()
        .iter()
        .any(|a| a["key"] == key.as_str()));
    let commits = b["commits"].as_array().unwrap();
    assert_eq!(commits.len(), 1, "{b}");
    let sha = commits[0]["sha"].as_str().unwrap();
    assert!(git(&env.repo, &["log", "--oneline", "-1"]).starts_with(sha));
    assert!(
        b["commands"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["failed"] == false),
        "{b}"
    );

    // The phase was completed by the holder: todo → review, claim released.
    let shown = env.run(&["task", "show", &task, "--json"]).json();
    assert_eq!(shown["phase"], "review");
    assert!(shown["claim"].is_null());
}

#[test]
fn completing_a_phase_merges_the_task_branch_into_base_only_when_clean() {
    let env = TestEnv::new();
    git(&env.repo, &["checkout", "-q", "-b", "main"]);
    git(&env.repo, &["commit", "-q", "--allow-empty", "-m", "root"]);
    let task = env.add(&["Merge me", "--project", "m"]);
    let wt = env.dir.path().join("wt");
    git(
        &env.repo,
        &[
            "worktree",
            "add",
            "-q",
            "-b",
            "spice/m-task",
            wt.to_str().unwrap(),
            "main",
        ],
    );
    env.run(&[
        "task",
        "claim",
        &task,
        "--claimant",
        "s1",
        "--worktree",
        wt.to_str().unwrap(),
    ])
    .ok();
    std::fs::write(wt.join("work.txt"), "work\n").unwrap();
    // Dirty (untracked file): refused, the phase stays.
    env.run(&["task", "phase", &task, "--done", "--claimant", "s1"])
        .fails(3, "");
    assert_eq!(
        env.run(&["task", "show", &task, "--json"]).json()["phase"],
        "todo"
    );
    git(&wt, &["add", "work.txt"]);
    git(&wt, &["commit", "-q", "-m", "work"]);
    let out = env
        .run(&["task", "phase", &task, "--done", "--claimant", "s1"])
        .ok()
        .to_string();
    assert!(out.contains("merged spice/m-task into main"), "{out}");
    assert_eq!(
        git(&env.repo, &["rev-parse", "main"]),
        git(&wt, &["rev-parse", "HEAD"])
    );
    assert_eq!(
        env.run(&["task", "show", &task, "--json"]).json()["phase"],
        "review"
    );
}

#[test]
fn regression_a_copy_of_the_demo_profile_never_writes_into_the_real_home() {
    // Before: copying the built-in demo profile to profiles/demo.toml (to change one
    // flag) made its fake sessions land in the operator's real ~/.claude/projects.
    let env = TestEnv::with_lanes(&[(
        "a",
        "profile = \"mydemo\"\nphases = [\"todo\"]\nlease = \"5m\"\n",
    )]);
    let builtin = include_str!("../../src/config/builtin/demo.toml");
    std::fs::create_dir_all(env.repo.join("profiles")).unwrap();
    std::fs::write(env.repo.join("profiles/mydemo.toml"), builtin).unwrap();
    git(&env.repo, &["add", "profiles"]);
    git(&env.repo, &["commit", "-q", "-m", "profile"]);
    env.add(&["Write the greeting", "--project", "demo"]);
    common::finished(env.fleet_up(&["--until-idle"]));
    // HOME of every command the test runs is the temp dir itself.
    let real = env.dir.path().join(".claude");
    assert!(!real.exists(), "fake sessions written into the real home");
    assert!(env.home.join("demo-home/.claude/projects").is_dir());
}
