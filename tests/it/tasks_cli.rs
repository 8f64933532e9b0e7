//! `spice task` as a user drives it: adding, finding, listing, dependencies, flows.

use crate::common;
use common::TestEnv;

#[test]
fn add_list_show_and_handles() {
    let env = TestEnv::new();
    let a = env.add(&[
        "Write",
        "the",
        "parser",
        "--project",
        "app",
        "--priority",
        "L",
        "--tag",
        "rust",
    ]);
    let b = env.add(&[
        "Ship",
        "--project",
        "app",
        "--priority",
        "H",
        "--depends",
        &a,
        "--due",
        "2026-12-01",
    ]);
    assert_eq!(a.len(), 9, "ids are 9-character stamps");
    assert!(a < b, "stamps sort in time order");
    let list = env.run(&["task", "list", "--json"]).json();
    assert_eq!(list.as_array().unwrap().len(), 2);
    assert_eq!(list[0]["description"], "Write the parser");
    assert_eq!(list[1]["depends"][0], a.as_str());
    assert_eq!(list[1]["due"], "2026-12-01T00:00:00Z");
    // The handle, a unique prefix of the handle's stamp and the uuid all resolve.
    let uuid = list[0]["uuid"].as_str().unwrap().to_string();
    for input in [
        format!("app-{a}"),
        format!("app-{}", &a[..8]),
        uuid,
        a.clone(),
    ] {
        let shown = env.run(&["task", "show", &input, "--json"]).json();
        assert_eq!(shown["id"], a.as_str(), "{input}");
        assert_eq!(shown["dependents"][0], b.as_str());
    }
    let text = env.run(&["task", "show", &b]).ok().to_string();
    assert!(text.contains("waits on") && text.contains(&a), "{text}");
}

#[test]
fn state_directory_rules() {
    let env = TestEnv::new();
    // Without SPICE_HOME, state lives under the git common dir, reached from a worktree too.
    let out = env
        .cmd(&["store", "path"])
        .env_remove("SPICE_HOME")
        .output()
        .unwrap();
    let path = String::from_utf8(out.stdout).unwrap();
    assert!(path.trim().ends_with(".git/spice/spice.db"), "{path}");
    // Outside any repository and without SPICE_HOME: said plainly.
    let outside = env.dir.path().join("plain");
    std::fs::create_dir_all(&outside).unwrap();
    let out = env
        .cmd(&["task", "list"])
        .env_remove("SPICE_HOME")
        .env("GIT_CEILING_DIRECTORIES", env.dir.path())
        .current_dir(&outside)
        .output()
        .unwrap();
    let run = common::to_run(out);
    run.fails(2, "not inside a git repository and SPICE_HOME is not set");
    // With SPICE_HOME, it works anywhere.
    let run = common::to_run(
        env.cmd(&["task", "list"])
            .current_dir(&outside)
            .output()
            .unwrap(),
    );
    assert_eq!(run.ok().trim(), "no tasks");
}

#[test]
fn ambiguous_and_unknown_ids_are_refused() {
    let env = TestEnv::new();
    let a = env.add(&["one"]);
    let b = env.add(&["two"]);
    let common: String = a
        .chars()
        .zip(b.chars())
        .take_while(|(x, y)| x == y)
        .map(|(x, _)| x)
        .collect();
    assert!(!common.is_empty());
    env.run(&["task", "show", &common])
        .fails(2, "ambiguous task");
    env.run(&["task", "show", "zzzzzzzzz"])
        .fails(2, "unknown task 'zzzzzzzzz'");
    env.run(&["task", "done", "no such id"])
        .fails(2, "unknown task");
    // Stamps are case-sensitive: a prefix in the wrong case matches nothing.
    let upper = a.to_ascii_uppercase();
    if upper != a {
        let r = env.run(&["task", "show", &upper]);
        assert_ne!(r.code, 0);
    }
}

#[test]
fn cycles_are_refused_and_named() {
    let env = TestEnv::new();
    let a = env.add(&["a", "--project", "p"]);
    let b = env.add(&["b", "--project", "p", "--depends", &a]);
    let c = env.add(&["c", "--project", "p", "--depends", &b]);
    let before = env.count("SELECT count(*) FROM deps");
    let err = env
        .run(&["task", "dep", &a, "--on", &c])
        .fails(2, "dependency cycle");
    assert!(
        err.contains(&format!("p-{a} → p-{c} → p-{b} → p-{a}")),
        "{err}"
    );
    env.run(&["task", "dep", &a, "--on", &a]).fails(2, "cycle");
    assert_eq!(
        env.count("SELECT count(*) FROM deps"),
        before,
        "nothing written"
    );
    env.run(&["task", "dep", &c, "--remove", &b]).ok();
    env.run(&["task", "dep", &a, "--on", &c]).ok();
}

#[test]
fn bad_input_is_one_line_and_writes_nothing() {
    let env = TestEnv::new();
    env.add(&["seed"]);
    let tasks = env.count("SELECT count(*) FROM tasks");
    let ledger = env.count("SELECT count(*) FROM ledger");
    env.run(&["task", "add", "x", "--priority", "X"])
        .fails(2, "invalid priority 'X'");
    env.run(&["task", "add", "x", "--due", "someday"])
        .fails(2, "invalid date 'someday'");
    env.run(&["task", "add", "x", "--depends", "nope"])
        .fails(2, "unknown task 'nope'");
    env.run(&["task", "add", "x", "--phase", "qa"])
        .fails(2, "phase 'qa' is not in the flow");
    env.run(&["task", "add", "x", "--project", "has space"])
        .fails(2, "invalid project");
    env.run(&["task", "add", " "]).fails(2, "non-empty title");
    env.run(&[
        "task",
        "claim",
        "x",
        "--claimant",
        "c",
        "--lease",
        "forever",
    ])
    .fails(2, "invalid duration 'forever'");
    env.run(&["task", "bogus"])
        .fails(2, "unrecognized subcommand");
    assert_eq!(env.count("SELECT count(*) FROM tasks"), tasks);
    assert_eq!(env.count("SELECT count(*) FROM ledger"), ledger);
}

#[test]
fn flows_and_phases() {
    let env = TestEnv::new();
    env.run(&["task", "flow", "--project", "web", "plan", "todo", "verify"])
        .ok();
    assert_eq!(
        env.run(&["task", "flow", "--project", "web"]).ok().trim(),
        "plan → todo → verify"
    );
    assert_eq!(env.run(&["task", "flow"]).ok().trim(), "todo → review");
    let t = env.add(&["page", "--project", "web"]);
    assert_eq!(
        env.run(&["task", "show", &t, "--json"]).json()["phase"],
        "plan"
    );
    env.run(&["task", "phase", &t, "--done"]).ok();
    env.run(&["task", "phase", &t, "--done"]).ok();
    let out = env.run(&["task", "phase", &t, "--done", "--json"]).json();
    assert_eq!(out["from"], "verify");
    assert!(out["to"].is_null());
    assert_eq!(
        env.run(&["task", "show", &t, "--json"]).json()["status"],
        "completed"
    );
    // A flow that would strand open tasks is refused.
    let u = env.add(&["other", "--project", "web"]);
    env.run(&["task", "phase", &u, "todo"]).ok();
    env.run(&["task", "flow", "--project", "web", "plan", "verify"])
        .fails(2, "drops phase 'todo'");
}

#[test]
fn ledger_records_the_life_of_a_task() {
    let env = TestEnv::new();
    let t = env.add(&["work"]);
    env.run(&[
        "task",
        "claim",
        &t,
        "--claimant",
        "s1",
        "--worktree",
        "/w/1",
    ])
    .ok();
    env.run(&["task", "phase", &t, "--done", "--claimant", "s1"])
        .ok();
    env.run(&["task", "claim", &t, "--claimant", "s2"]).ok();
    env.run(&["task", "done", &t, "--claimant", "s2"]).ok();
    let kinds: Vec<String> = env
        .run(&["task", "ledger", &t, "--json"])
        .json()
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["kind"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        kinds,
        [
            "added",
            "claimed",
            "phase_completed",
            "released",
            "claimed",
            "done",
            "released"
        ]
    );
}

/// Regression: `dep X --on A --on B` committed X→A before refusing the cycle through B.
#[test]
fn a_refused_dependency_change_writes_none_of_it() {
    let env = TestEnv::new();
    let a = env.add(&["a"]);
    let x = env.add(&["x"]);
    let b = env.add(&["b", "--depends", &x]);
    env.run(&["task", "dep", &x, "--on", &a, "--on", &b])
        .fails(2, "dependency cycle");
    assert_eq!(env.count("SELECT count(*) FROM deps"), 1);
}

/// Regression: `flow --project ""` replaced the default flow unchecked, and a task in
/// a phase outside its flow was then silently completed by `phase --done`.
#[test]
fn flows_refuse_empty_projects_and_stray_phases_are_errors() {
    let env = TestEnv::new();
    env.run(&["task", "flow", "--project", "", "a", "b"])
        .fails(2, "invalid project");
    let t = env.add(&["t", "--project", "web"]);
    env.sql_write("UPDATE tasks SET phase = 'limbo'");
    env.run(&["task", "phase", &t, "--done"])
        .fails(2, "not in its flow");
    assert_eq!(
        env.run(&["task", "show", &t, "--json"]).json()["status"],
        "pending"
    );
}

#[test]
fn fence_pins_cli_writes_to_one_holding() {
    let env = TestEnv::new();
    let t = env.add(&["t"]);
    let f1 = env
        .run(&["task", "claim", &t, "--claimant", "me", "--json"])
        .json()["fence"]
        .as_i64()
        .unwrap();
    env.run(&[
        "task",
        "release",
        &t,
        "--claimant",
        "me",
        "--fence",
        &f1.to_string(),
    ])
    .ok();
    let f2 = env
        .run(&["task", "claim", &t, "--claimant", "me", "--json"])
        .json()["fence"]
        .as_i64()
        .unwrap();
    env.run(&[
        "task",
        "done",
        &t,
        "--claimant",
        "me",
        "--fence",
        &f1.to_string(),
    ])
    .fails(3, "that holding ended");
    env.run(&["task", "done", &t, "--fence", "1"])
        .fails(2, "--claimant");
    env.run(&[
        "task",
        "done",
        &t,
        "--claimant",
        "me",
        "--fence",
        &f2.to_string(),
    ])
    .ok();
}

/// Regression: re-importing a claimed task changed it under its holder.
#[test]
fn reimporting_a_claimed_task_is_refused() {
    let env = TestEnv::new();
    let t = env.add(&["t"]);
    let export = env
        .run(&["task", "export", "--taskwarrior"])
        .ok()
        .replace("\"pending\"", "\"completed\"");
    env.run(&["task", "claim", &t, "--claimant", "me"]).ok();
    env.run_stdin(&["task", "import", "--taskwarrior", "-"], &export)
        .fails(3, "claimed by me");
    assert_eq!(
        env.run(&["task", "show", &t, "--json"]).json()["status"],
        "pending"
    );
}

#[test]
fn output_into_a_closed_pipe_ends_quietly() {
    let env = TestEnv::new();
    env.add(&["A task to list"]);
    // The reader is gone before the command starts, as with `| head -0` once head has
    // exited: closing it only after spawning raced the command's write into the pipe.
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let out = env
        .cmd(&["task", "list"])
        .stdout(writer)
        .stderr(std::process::Stdio::piped())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(out.status.signal(), Some(13), "{:?} {stderr}", out.status);
}

/// Regression (#40): `task next --claim` required `--claimant`; a person's claim now
/// defaults to `operator` (the console's takeover claimant), and so do the other
/// commands a person takes or gives back a claim with.
#[test]
fn regression_a_claim_without_a_claimant_is_the_operators() {
    let env = TestEnv::new();
    let help = env.run(&["task", "next", "--help"]).ok().to_string();
    assert!(help.contains("operator"), "{help}");
    let first = env.add(&["First", "--priority", "H"]);
    let second = env.add(&["Second"]);
    let claim = env.run(&["task", "next", "--claim", "--json"]).json();
    assert_eq!(claim["claimant"], "operator", "{claim}");
    assert_eq!(claim["id"], first, "{claim}");
    env.run(&["task", "renew", &first]).ok();
    env.run(&["task", "release", &first]).ok();
    let claim = env.run(&["task", "claim", &second, "--json"]).json();
    assert_eq!(claim["claimant"], "operator", "{claim}");
    let show = env.run(&["task", "show", &first, "--json"]).json();
    assert!(show["claim"].is_null(), "{show}");
    // Someone else's claim is still refused to a release that names nobody.
    env.run(&["task", "claim", &first, "--claimant", "s1", "--lease", "1s"])
        .ok();
    env.run(&["task", "release", &first]).fails(3, "");
    // The store's hint for a lapsed lease names no claimant: as printed, it works.
    common::wait_for("the lease to lapse", 30, || {
        let stale = env.run(&["task", "claims", "--stale", "--json"]).json();
        (stale.as_array().unwrap().len() == 1).then_some(())
    });
    let err = env
        .run(&["task", "claim", &first])
        .fails(3, "is taken over with");
    let hint = err.split('`').nth(1).unwrap();
    let args: Vec<&str> = hint.split_whitespace().skip(1).collect();
    let taken = env.run(&[&args[..], &["--json"]].concat()).json();
    assert_eq!(taken["claimant"], "operator", "{hint}: {taken}");
}

/// Issue #40: with only finished tasks in the store, `task list` said a bare "no
/// tasks", as if the store were empty.
#[test]
fn regression_an_empty_open_list_counts_the_hidden_closed_tasks() {
    let env = TestEnv::new();
    assert_eq!(env.run(&["task", "list"]).ok().trim(), "no tasks");
    let done: Vec<String> = (0..3).map(|i| env.add(&[&format!("t{i}")])).collect();
    for id in &done {
        env.run(&["task", "done", id]).ok();
    }
    let gone = env.add(&["gone"]);
    env.run(&["task", "delete", &gone]).ok();
    assert_eq!(
        env.run(&["task", "list"]).ok().trim(),
        "no open tasks (3 completed, 1 deleted; --all shows them)"
    );
    let all = env.run(&["task", "list", "--all"]).ok().to_string();
    assert!(all.contains("t0") && all.contains("gone"), "{all}");
    // An explicit status or a filter that matches nothing closed says plainly so.
    assert_eq!(
        env.run(&["task", "list", "--status", "pending"])
            .ok()
            .trim(),
        "no tasks"
    );
    assert_eq!(
        env.run(&["task", "list", "--project", "elsewhere"])
            .ok()
            .trim(),
        "no tasks"
    );
    assert_eq!(
        env.run(&["task", "list", "--json"]).json(),
        serde_json::json!([])
    );
}
