//! `spice gate` through the real binary and real git: sticky-flex caps over a sequence
//! of commits, routine caps, repository checks, commit messages, and hooks chained
//! with hooks already there, under `core.hooksPath` and in a linked worktree. No store
//! and no fleet: the rung is useful alone.

use crate::common;
use common::{git, to_run, Run, TestEnv};
use std::path::Path;
use std::process::Command;

/// A repository with an initial commit and `spice.toml` holding `toml`.
fn repo(toml: &str) -> TestEnv {
    let env = TestEnv::new();
    git(&env.repo, &["checkout", "-q", "-b", "main"]);
    std::fs::write(env.repo.join("spice.toml"), toml).unwrap();
    git(&env.repo, &["add", "spice.toml"]);
    git(&env.repo, &["commit", "-q", "-m", "spice.toml"]);
    env
}

fn lines(n: usize) -> String {
    (0..n).map(|i| format!("line {i}\n")).collect()
}

fn write(env: &TestEnv, path: &str, text: &str) {
    let p = env.repo.join(path);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

/// `git commit` as a user runs it, hooks and all (environment inherited, identity set).
fn commit(dir: &Path, msg: &str) -> Run {
    to_run(
        Command::new("git")
            .args(["commit", "-q", "-m", msg])
            .current_dir(dir)
            .env("GIT_AUTHOR_NAME", "t")
            .env("GIT_AUTHOR_EMAIL", "t@t")
            .env("GIT_COMMITTER_NAME", "t")
            .env("GIT_COMMITTER_EMAIL", "t@t")
            .env_remove("SPICE_TASK")
            .env_remove("SPICE_SESSION")
            .output()
            .unwrap(),
    )
}

/// `spice gate check ARGS…` in `dir`.
fn gate(env: &TestEnv, dir: &Path, args: &[&str]) -> Run {
    let mut a = vec!["gate", "check"];
    a.extend_from_slice(args);
    to_run(env.cmd(&a).current_dir(dir).output().unwrap())
}

const CAPS: &str = "[gate]\njitter = 0.0\n[gate.files]\n\"src/**\" = { lines = 10, flex = 1.5 }\n";

/// The sticky-flex cases as one history of commits through the installed hook: each
/// step stages a size for `src/a.txt` and expects the commit to pass or be refused.
#[test]
fn sticky_flex_over_a_history_of_commits() {
    let env = repo(CAPS);
    env.run(&["gate", "install"]).ok();
    let steps: &[(usize, bool, &str)] = &[
        (8, true, "under the base"),
        (14, true, "between base and flex: passes, latches at 14"),
        (15, false, "latched: may not grow, even within the ceiling"),
        (
            12,
            true,
            "latched, shrinking: passes, the latch moves down to 12",
        ),
        (13, false, "latched at 12: may not grow back"),
        (10, true, "back at the base: clears the latch"),
        (15, true, "cleared: may flex again (15 is the ceiling)"),
        (9, true, "shrinks under the base, clears"),
        (
            16,
            false,
            "past the flex ceiling: fails, latches at the base",
        ),
        (
            14,
            false,
            "a failure latched it at the base: within the ceiling is not enough",
        ),
        (10, true, "at the base: passes and clears"),
    ];
    for (i, (n, pass, why)) in steps.iter().enumerate() {
        write(&env, "src/a.txt", &lines(*n));
        git(&env.repo, &["add", "src/a.txt"]);
        let r = commit(&env.repo, &format!("step {i}"));
        assert_eq!(
            r.code == 0,
            *pass,
            "step {i} ({n} lines, {why}): {}",
            r.stderr
        );
        if !pass {
            assert!(
                r.stderr.contains("src/a.txt:1: file.lines:"),
                "{}",
                r.stderr
            );
            git(&env.repo, &["reset", "-q"]);
        }
    }
    // The refusal says what to do, with the limit.
    write(&env, "src/a.txt", &lines(30));
    git(&env.repo, &["add", "src/a.txt"]);
    let r = commit(&env.repo, "too big");
    assert!(
        r.stderr
            .contains("30 lines, past the flex ceiling 15 (base 10): split it to 10 or less"),
        "{}",
        r.stderr
    );
}

#[test]
fn a_rename_carries_its_latch_and_latches_are_shared_by_worktrees() {
    let env = repo(CAPS);
    env.run(&["gate", "install"]).ok();
    write(&env, "src/a.txt", &lines(14));
    git(&env.repo, &["add", "src/a.txt"]);
    let r = commit(&env.repo, "flex");
    assert_eq!(r.code, 0, "{}", r.stderr);
    let latches = env.run(&["gate", "latches", "--json"]).json();
    assert_eq!(latches[0]["path"], "src/a.txt", "{latches}");
    git(&env.repo, &["mv", "src/a.txt", "src/b.txt"]);
    assert_eq!(commit(&env.repo, "rename").code, 0);
    let latches = env.run(&["gate", "latches", "--json"]).json();
    assert_eq!(latches[0]["path"], "src/b.txt", "{latches}");
    // Another worktree of the same repository sees the latch.
    let wt = env.dir.path().join("wt");
    git(
        &env.repo,
        &["worktree", "add", "-q", "-b", "other", wt.to_str().unwrap()],
    );
    std::fs::write(wt.join("src/b.txt"), lines(15)).unwrap();
    git(&wt, &["add", "src/b.txt"]);
    let r = commit(&wt, "grow while latched");
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(
        r.stderr
            .contains("15 lines, latched at 14: it may not grow until it is back at the base 10"),
        "{}",
        r.stderr
    );
}

#[test]
fn a_refused_commit_leaves_no_latch_behind() {
    // The file flexes (a pass that would latch) but a check fails: nothing is recorded.
    let env = repo(&format!(
        "{CAPS}[[gate.check]]\nname = \"no\"\nrun = [\"false\"]\n"
    ));
    env.run(&["gate", "install"]).ok();
    write(&env, "src/a.txt", &lines(14));
    git(&env.repo, &["add", "src/a.txt"]);
    let r = commit(&env.repo, "flex, but the check fails");
    assert_eq!(r.code, 1);
    assert!(r.stderr.contains("check.no: failed"), "{}", r.stderr);
    let latches = env.run(&["gate", "latches", "--json"]).json();
    assert_eq!(latches, serde_json::json!([]));
}

#[test]
fn check_reports_every_finding_as_text_and_json_and_is_silent_when_clean() {
    let env = repo(
        "[gate]\njitter = 0.0\n[gate.files]\ndefault = { lines = 5, bytes = 1000 }\n\
         [gate.routines]\nlines = 4\ncomplexity = 2\n",
    );
    let clean = gate(&env, &env.repo, &["--all"]);
    assert_eq!(
        (clean.code, clean.stdout.as_str()),
        (0, ""),
        "{}",
        clean.stderr
    );
    write(
        &env,
        "src/lib.rs",
        "fn long(x: i32) -> i32 {\n    if x > 1 {\n        return 1;\n    }\n    if x > 2 && x < 9 {\n        return 2;\n    }\n    3\n}\n",
    );
    write(&env, "app.py", "def ok():\n    return 1\n");
    write(&env, "big.md", &lines(9));
    write(&env, "logo.png", "\u{0}\u{1}binary");
    write(&env, "gen.txt", &lines(50));
    write(&env, ".gitattributes", "gen.txt linguist-generated\n");
    git(&env.repo, &["add", "-A"]);
    let r = gate(&env, &env.repo, &["--staged"]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    let out: Vec<&str> = r.stdout.lines().collect();
    assert_eq!(out.len(), 4, "{}", r.stdout);
    assert!(
        out.iter()
            .any(|l| l.starts_with("big.md:1: file.lines: 9 lines, past the flex ceiling 7")),
        "{out:?}"
    );
    assert!(
        out.iter()
            .any(|l| l.starts_with("src/lib.rs:1: file.lines:")),
        "{out:?}"
    );
    assert!(
        out.iter()
            .any(|l| l.starts_with("src/lib.rs:1: routine.lines: long: 9 lines in the routine")),
        "{out:?}"
    );
    assert!(
        out.iter()
            .any(|l| l.starts_with("src/lib.rs:1: routine.complexity: long: complexity 4")),
        "{out:?}"
    );
    let j: serde_json::Value =
        serde_json::from_str(&gate(&env, &env.repo, &["--staged", "--json"]).stdout).unwrap();
    assert_eq!(j["findings"].as_array().unwrap().len(), 4, "{j}");
    // logo.png (binary) and gen.txt (generated) are not measured.
    assert_eq!(j["skipped"], 2, "{j}");
    let f = &j["findings"][0];
    for key in [
        "path", "line", "rule", "value", "limit", "base", "ceiling", "latched",
    ] {
        assert!(!f[key].is_null(), "{key}: {f}");
    }
    // A plain check only looks: nothing latched.
    assert_eq!(
        env.run(&["gate", "latches", "--json"]).json(),
        serde_json::json!([])
    );
}

#[test]
fn bad_configuration_is_every_problem_located_and_exit_2() {
    let env = repo("[gate]\nflex = 0.5\n[gate.files]\n\"src/[\" = { lines = 3 }\n");
    let r = gate(&env, &env.repo, &["--all"]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    let lines: Vec<&str> = r.stderr.lines().collect();
    assert_eq!(lines.len(), 2, "{}", r.stderr);
    assert!(
        lines[0].starts_with("spice: spice.toml:2:8: flex: 0.5"),
        "{}",
        r.stderr
    );
    assert!(
        lines[1].starts_with("spice: spice.toml:4:1: files: bad glob"),
        "{}",
        r.stderr
    );
    std::fs::write(env.repo.join("spice.toml"), "[gate]\nfiels = 1\n").unwrap();
    gate(&env, &env.repo, &[]).fails(2, "spice.toml:2:1: unknown field `fiels`");
}

#[test]
fn repository_checks_fail_time_out_or_cannot_run_and_get_the_staged_paths() {
    let env = repo(
        "[[gate.check]]\nname = \"lint\"\nrun = [\"./lint.sh\"]\npaths = [\"src/**\"]\n\
         [[gate.check]]\nname = \"slow\"\nrun = [\"sh\", \"-c\", \"sleep 30\"]\ntimeout = \"300ms\"\npaths = [\"slow/**\"]\n\
         [[gate.check]]\nname = \"gone\"\nrun = [\"./missing.sh\"]\npaths = [\"gone/**\"]\n\
         [[gate.check]]\nname = \"review-only\"\nrun = [\"false\"]\nphases = [\"review\"]\n",
    );
    write(
        &env,
        "lint.sh",
        "#!/bin/sh\necho \"env: $SPICE_STAGED_PATHS\"\necho \"stdin: $(cat)\"\necho 'lint: bad style' >&2\nexit 4\n",
    );
    std::fs::set_permissions(
        env.repo.join("lint.sh"),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    write(&env, "src/a.rs", "fn a() {}\n");
    write(&env, "slow/x", "x\n");
    write(&env, "gone/y", "y\n");
    git(&env.repo, &["add", "src/a.rs", "slow/x", "gone/y"]);
    let r = gate(&env, &env.repo, &[]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(r.stdout.contains("check.lint: failed:\n    env: src/a.rs\n    stdin: [\"src/a.rs\"]\n    lint: bad style\n"), "{}", r.stdout);
    assert!(
        r.stdout
            .contains("check.slow: could not run: timed out after 0.3s"),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout
            .contains("check.gone: could not run: ./missing.sh: not found"),
        "{}",
        r.stdout
    );
    assert!(!r.stdout.contains("review-only"), "{}", r.stdout);
    let review = gate(&env, &env.repo, &["--phase", "review"]);
    assert!(
        review.stdout.contains("check.review-only: failed"),
        "{}",
        review.stdout
    );
}

/// Hooks chain with one already there, honour `core.hooksPath`, and work in a linked
/// worktree; uninstall puts the old hook back.
#[test]
fn hooks_chain_with_existing_ones_and_honour_core_hooks_path() {
    let env = repo(CAPS);
    // Hooks kept outside the repository, as a user's shared hooks are.
    let hooks = env.dir.path().join("my-hooks");
    std::fs::create_dir_all(&hooks).unwrap();
    git(
        &env.repo,
        &["config", "core.hooksPath", hooks.to_str().unwrap()],
    );
    let marker = env.dir.path().join("old-hook-ran");
    std::fs::write(
        hooks.join("pre-commit"),
        format!("#!/bin/sh\necho ran >> '{}'\n", marker.display()),
    )
    .unwrap();
    std::fs::set_permissions(
        hooks.join("pre-commit"),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let installed = env.run(&["gate", "install", "--json"]).json();
    assert_eq!(installed[0]["action"], "chained", "{installed}");
    assert!(installed[0]["path"]
        .as_str()
        .unwrap()
        .ends_with("my-hooks/pre-commit"));
    assert_eq!(
        env.run(&["gate", "install", "--json"]).json()[0]["action"],
        "already"
    );
    write(&env, "src/a.txt", &lines(3));
    git(&env.repo, &["add", "src/a.txt"]);
    assert_eq!(commit(&env.repo, "small").code, 0);
    assert_eq!(std::fs::read_to_string(&marker).unwrap(), "ran\n");
    // The same hooks run in a linked worktree.
    let wt = env.dir.path().join("wt");
    git(
        &env.repo,
        &["worktree", "add", "-q", "-b", "side", wt.to_str().unwrap()],
    );
    std::fs::write(wt.join("src/a.txt"), lines(40)).unwrap();
    git(&wt, &["add", "src/a.txt"]);
    let r = commit(&wt, "too big in a worktree");
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(
        r.stderr.contains("src/a.txt:1: file.lines: 40 lines"),
        "{}",
        r.stderr
    );
    assert_eq!(std::fs::read_to_string(&marker).unwrap(), "ran\nran\n");
    // A failing old hook stops the commit before ours runs.
    std::fs::write(
        hooks.join("pre-commit.spice-chained"),
        "#!/bin/sh\necho no >&2\nexit 7\n",
    )
    .unwrap();
    let r = commit(&wt, "old hook says no");
    assert_eq!(r.code, 1);
    assert!(
        r.stderr.contains("no") && !r.stderr.contains("file.lines"),
        "{}",
        r.stderr
    );
    let removed = env.run(&["gate", "uninstall", "--json"]).json();
    assert_eq!(removed[0]["action"], "restored", "{removed}");
    assert_eq!(removed[1]["action"], "removed", "{removed}");
    let back = std::fs::read_to_string(hooks.join("pre-commit")).unwrap();
    assert!(back.contains("exit 7"), "{back}");
    assert!(!hooks.join("commit-msg").exists());
}

#[test]
fn a_tasks_commits_carry_its_trailers_and_messages_are_checked() {
    let env = repo("[gate.commit]\nsubject = 30\nbody = 40\n");
    env.run(&["gate", "install"]).ok();
    write(&env, "a.txt", "a\n");
    git(&env.repo, &["add", "a.txt"]);
    let as_task = |msg: &str| {
        to_run(
            Command::new("git")
                .args(["commit", "-q", "-m", msg])
                .current_dir(&env.repo)
                .env("GIT_AUTHOR_NAME", "t")
                .env("GIT_AUTHOR_EMAIL", "t@t")
                .env("GIT_COMMITTER_NAME", "t")
                .env("GIT_COMMITTER_EMAIL", "t@t")
                .env("SPICE_TASK", "demo-abc")
                .env("SPICE_SESSION", "s-123")
                .output()
                .unwrap(),
        )
    };
    let r = as_task("A subject far longer than thirty characters");
    assert_eq!(r.code, 1);
    assert!(
        r.stderr
            .contains("commit message:1: commit.subject: the subject is 43 characters, over 30"),
        "{}",
        r.stderr
    );
    let r = as_task("Short subject");
    assert_eq!(r.code, 0, "{}", r.stderr);
    let msg = git(&env.repo, &["log", "-1", "--format=%B"]);
    assert_eq!(
        msg,
        "Short subject\n\nTask: demo-abc\nTask-Session: s-123\n\n"
    );
}

/// A task claimed with a worktree on `spice/p-task`, off `main` whose `spice.toml`
/// holds `toml`, with the gate's hooks installed.
fn task_in_worktree(toml: &str) -> (TestEnv, String, std::path::PathBuf) {
    let env = repo(toml);
    env.run(&["gate", "install"]).ok();
    let task = env.add(&["Gated work", "--project", "p"]);
    let wt = env.dir.path().join("wt");
    let wt_s = wt.to_str().unwrap();
    git(
        &env.repo,
        &["worktree", "add", "-q", "-b", "spice/p-task", wt_s, "main"],
    );
    env.run(&[
        "task",
        "claim",
        &task,
        "--claimant",
        "s1",
        "--worktree",
        wt_s,
        "--lease",
        "10m",
    ])
    .ok();
    (env, task, wt)
}

fn phase_done(env: &TestEnv, task: &str) -> Run {
    env.run(&["task", "phase", task, "--done", "--claimant", "s1"])
}

fn ledger_kinds(env: &TestEnv, task: &str) -> Vec<String> {
    env.run(&["task", "ledger", task, "--json"])
        .json()
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["kind"].as_str().unwrap().to_string())
        .collect()
}

/// The gate before a phase lands: refused with the findings (nothing merged, the
/// claim kept), accepted once the branch is fixed.
#[test]
fn a_phase_completion_is_refused_by_the_gate_and_accepted_after_the_fix() {
    let (env, task, wt) = task_in_worktree(CAPS);
    let main_before = git(&env.repo, &["rev-parse", "main"]);
    std::fs::create_dir_all(wt.join("src")).unwrap();
    std::fs::write(wt.join("src/a.txt"), lines(30)).unwrap();
    git(&wt, &["add", "src/a.txt"]);
    // Committed past the hook, as an agent with --no-verify would.
    git(&wt, &["commit", "-q", "--no-verify", "-m", "too big"]);
    let r = phase_done(&env, &task);
    assert_eq!(r.code, 5, "{}", r.stderr);
    let lines_out: Vec<&str> = r.stderr.lines().collect();
    assert!(
        lines_out[0].starts_with("src/a.txt:1: file.lines: 30 lines, past the flex ceiling 15"),
        "{}",
        r.stderr
    );
    assert!(
        lines_out.last().unwrap().contains(
            "the gate refused to merge spice/p-task into main (1 finding(s)); nothing was merged"
        ),
        "{}",
        r.stderr
    );
    assert_eq!(
        git(&env.repo, &["rev-parse", "main"]),
        main_before,
        "nothing merged"
    );
    let show = env.run(&["task", "show", &task, "--json"]).json();
    assert_eq!(show["phase"], "todo", "{show}");
    assert_eq!(show["claim"]["claimant"], "s1", "the claim is kept: {show}");
    let kinds = ledger_kinds(&env, &task);
    assert!(kinds.contains(&"gate_refused".to_string()), "{kinds:?}");
    assert!(
        kinds.contains(&"gate_bypass".to_string()),
        "the --no-verify commit: {kinds:?}"
    );
    // The refusal needs the operator (#38), with its findings, until a phase lands.
    let needs = env.run(&["fleet", "status", "--json"]).json()["needs"].clone();
    let refused = needs
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["kind"] == "merge_refused" && n["task_id"] == task.as_str())
        .unwrap_or_else(|| panic!("no merge_refused in {needs}"));
    assert_eq!(
        refused["findings"]["findings"][0]["path"], "src/a.txt",
        "{refused}"
    );
    assert!(
        refused["what"].as_str().unwrap().contains("1 finding(s)"),
        "{refused}"
    );
    // The fix, committed through the hook.
    std::fs::write(wt.join("src/a.txt"), lines(9)).unwrap();
    git(&wt, &["add", "src/a.txt"]);
    let c = commit(&wt, "split it");
    assert_eq!(c.code, 0, "{}", c.stderr);
    let r = phase_done(&env, &task);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let show = env.run(&["task", "show", &task, "--json"]).json();
    assert_ne!(show["phase"], "todo", "{show}");
    assert_ne!(
        git(&env.repo, &["rev-parse", "main"]),
        main_before,
        "merged"
    );
    let needs = env.run(&["fleet", "status", "--json"]).json()["needs"].clone();
    assert!(
        !needs.to_string().contains("merge_refused"),
        "a merged phase still needs you: {needs}"
    );
}

/// A branch cannot loosen its own gate: the rules are base's, and the change is
/// recorded as a bypass.
#[test]
fn a_branch_that_loosens_its_gate_is_checked_under_bases_rules() {
    let (env, task, wt) = task_in_worktree(CAPS);
    std::fs::write(wt.join("spice.toml"), "[gate]\n").unwrap();
    std::fs::create_dir_all(wt.join("src")).unwrap();
    std::fs::write(wt.join("src/a.txt"), lines(30)).unwrap();
    git(&wt, &["add", "spice.toml", "src/a.txt"]);
    let c = commit(&wt, "no more caps");
    assert_eq!(
        c.code, 0,
        "the branch's own hook runs its own rules: {}",
        c.stderr
    );
    let r = phase_done(&env, &task);
    assert_eq!(r.code, 5, "{}", r.stderr);
    assert!(
        r.stderr.contains("src/a.txt:1: file.lines: 30 lines"),
        "{}",
        r.stderr
    );
    let ledger = env.run(&["task", "ledger", &task, "--json"]).json();
    let bypass = ledger
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["kind"] == "gate_bypass")
        .unwrap_or_else(|| panic!("{ledger}"));
    assert_eq!(bypass["detail"]["kind"], "config", "{bypass}");
}

/// Every latch as (path, rule), sorted.
fn latched(env: &TestEnv) -> Vec<(String, String)> {
    let all = env.run(&["gate", "latches", "--json"]).json();
    let mut out: Vec<(String, String)> = all
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            (
                l["path"].as_str().unwrap().to_string(),
                l["rule"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    out.sort();
    out
}

fn pairs(want: &[(&str, &str)]) -> Vec<(String, String)> {
    want.iter()
        .map(|(p, r)| (p.to_string(), r.to_string()))
        .collect()
}

/// A five-line routine (base 4, ceiling 6: it flexes) in a file of `n` lines.
fn with_routine(n: usize) -> String {
    format!(
        "{}fn big() {{\n    let a = 1;\n    let b = 2;\n    let c = a + b;\n}}\n",
        lines(n - 5).replace("line", "// line")
    )
}

/// Issue 37: a latched file that turns generated is no longer limited, so the next
/// accepted commit drops its latches (file and routine), though it does not touch the
/// file; latches of files still capped stay, and a refused commit drops nothing.
#[test]
fn a_latched_file_that_turns_generated_loses_its_latches_on_the_next_accepted_commit() {
    let env = repo(&format!("{CAPS}[gate.routines]\nlines = 4\nflex = 1.5\n"));
    env.run(&["gate", "install"]).ok();
    write(&env, "src/gen.rs", &with_routine(14));
    write(&env, "src/keep.rs", &with_routine(8));
    write(&env, "src/keep.txt", &lines(14));
    git(&env.repo, &["add", "src"]);
    let r = commit(&env.repo, "flex");
    assert_eq!(r.code, 0, "{}", r.stderr);
    let all = pairs(&[
        ("src/gen.rs", "file.lines"),
        ("src/gen.rs::big", "routine.lines"),
        ("src/keep.rs::big", "routine.lines"),
        ("src/keep.txt", "file.lines"),
    ]);
    assert_eq!(latched(&env), all);
    // Marked generated in a commit refused for another file: nothing is released.
    write(&env, ".gitattributes", "src/gen.rs linguist-generated\n");
    write(&env, "src/keep.txt", &lines(15));
    git(&env.repo, &["add", ".gitattributes", "src/keep.txt"]);
    let r = commit(&env.repo, "generated, but keep.txt grew");
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(
        r.stderr.contains("src/keep.txt:1: file.lines"),
        "{}",
        r.stderr
    );
    assert_eq!(latched(&env), all, "a refused commit leaves no trace");
    git(&env.repo, &["reset", "-q"]);
    git(&env.repo, &["checkout", "-q", "--", "src/keep.txt"]);
    // Accepted: the generated file's latches go; the untouched, still capped, stay.
    git(&env.repo, &["add", ".gitattributes"]);
    let r = commit(&env.repo, "src/gen.rs is generated");
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(
        latched(&env),
        pairs(&[
            ("src/keep.rs::big", "routine.lines"),
            ("src/keep.txt", "file.lines"),
        ])
    );
    // A latched routine the file no longer has goes with the commit that removed it.
    write(
        &env,
        "src/keep.rs",
        &with_routine(8).replace("big", "small"),
    );
    git(&env.repo, &["add", "src/keep.rs"]);
    let r = commit(&env.repo, "big renamed small");
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(
        latched(&env),
        pairs(&[
            ("src/keep.rs::small", "routine.lines"),
            ("src/keep.txt", "file.lines"),
        ])
    );
}

/// Issue 37: a latch goes once no cap holds its (rule, path): the cap's glob stops
/// matching the file, the cap is removed, the cap no longer names the rule, the file
/// is deleted. Only on an accepted commit; an unchanged file still capped keeps it.
#[test]
fn a_latch_goes_when_no_cap_holds_its_file_any_more() {
    let env = repo(
        "[gate]\njitter = 0.0\n[gate.files]\n\"src/**\" = { lines = 10, flex = 1.5 }\n\
         \"lib/**\" = { lines = 10, bytes = 1000, flex = 1.5 }\n\
         \"etc/**\" = { lines = 10, flex = 1.5 }\n",
    );
    env.run(&["gate", "install"]).ok();
    for f in [
        "src/a.txt",
        "src/b.txt",
        "src/d.txt",
        "lib/c.txt",
        "etc/e.txt",
    ] {
        write(&env, f, &lines(14));
    }
    git(&env.repo, &["add", "-A"]);
    let r = commit(&env.repo, "flex");
    assert_eq!(r.code, 0, "{}", r.stderr);
    let all = pairs(&[
        ("etc/e.txt", "file.lines"),
        ("lib/c.txt", "file.lines"),
        ("src/a.txt", "file.lines"),
        ("src/b.txt", "file.lines"),
        ("src/d.txt", "file.lines"),
    ]);
    assert_eq!(latched(&env), all);
    // `src/**` narrowed to two files (a.txt no longer matches), `lib/**` caps bytes
    // only, `etc/**` gone.
    write(
        &env,
        "spice.toml",
        "[gate]\njitter = 0.0\n[gate.files]\n\"src/b.txt\" = { lines = 10, flex = 1.5 }\n\
         \"src/d.txt\" = { lines = 10, flex = 1.5 }\n\"lib/**\" = { bytes = 1000 }\n",
    );
    // Refused (b.txt grew while latched): nothing is released.
    write(&env, "src/b.txt", &lines(15));
    git(&env.repo, &["add", "spice.toml", "src/b.txt"]);
    let r = commit(&env.repo, "looser caps, but b.txt grew");
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert_eq!(latched(&env), all, "a refused commit leaves no trace");
    git(&env.repo, &["reset", "-q", "src/b.txt"]);
    git(&env.repo, &["checkout", "-q", "--", "src/b.txt"]);
    let r = commit(&env.repo, "looser caps");
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(
        latched(&env),
        pairs(&[("src/b.txt", "file.lines"), ("src/d.txt", "file.lines")])
    );
    // A deleted file's latch goes with the commit that deletes it.
    git(&env.repo, &["rm", "-q", "src/d.txt"]);
    let r = commit(&env.repo, "d.txt deleted");
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(latched(&env), pairs(&[("src/b.txt", "file.lines")]));
}
