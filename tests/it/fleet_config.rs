//! `spice fleet check` against the sample configurations in `tests/sample-configs/`
//! (the layout of jj's `cli/tests/sample-configs`): each `valid/<case>` and
//! `invalid/<case>` directory holds `lanes/` and `profiles/` files that are copied into
//! a fresh git repository, plus `expected.txt`: the exact stdout of a valid case, the
//! exact stderr of an invalid one. An optional `setup.txt` renames files (`rename FROM
//! TO`) for names git cannot hold on every file system (names differing only in case).
//!
//! `PATH` holds only `git` and fake agents (`claude`, `fake-agent`), so whether an agent
//! binary is found never depends on the machine. `SPICE_BLESS=1` rewrites the
//! `expected.txt` files from the actual output (review the diff before keeping it).

use crate::common;

use common::{to_run, Run, TestEnv};
use std::ffi::OsString;
use std::path::{Path, PathBuf};

fn samples(kind: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/sample-configs")
        .join(kind);
    let mut cases: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    cases.sort();
    cases
}

fn copy_tree(from: &Path, to: &Path) {
    for entry in std::fs::read_dir(from).unwrap() {
        let path = entry.unwrap().path();
        let target = to.join(path.file_name().unwrap());
        if path.is_dir() {
            std::fs::create_dir_all(&target).unwrap();
            copy_tree(&path, &target);
        } else {
            std::fs::copy(&path, &target).unwrap();
        }
    }
}

/// A repository holding the case's `lanes/` and `profiles/`, renamed as `setup.txt` says.
fn repo_with(case: &Path) -> TestEnv {
    let env = TestEnv::new();
    // A first commit, on `main` as well as the branch checked out: a lane's base must
    // name a commit for `fleet check` to call it ready.
    common::git(&env.repo, &["commit", "-q", "--allow-empty", "-m", "root"]);
    if !common::git(&env.repo, &["branch", "--list", "main"]).contains("main") {
        common::git(&env.repo, &["branch", "main"]);
    }
    for sub in ["lanes", "profiles"] {
        if case.join(sub).is_dir() {
            std::fs::create_dir_all(env.repo.join(sub)).unwrap();
            copy_tree(&case.join(sub), &env.repo.join(sub));
        }
    }
    if let Ok(setup) = std::fs::read_to_string(case.join("setup.txt")) {
        for line in setup
            .lines()
            .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        {
            match line.split_whitespace().collect::<Vec<_>>().as_slice() {
                ["rename", from, to] => {
                    std::fs::rename(env.repo.join(from), env.repo.join(to)).unwrap()
                }
                _ => panic!("{}: bad setup line {line:?}", case.display()),
            }
        }
    }
    env
}

fn real_git() -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|d| d.join("git"))
        .find(|p| p.is_file())
        .expect("git on PATH")
}

/// A `PATH` of one directory: `git` plus the named fake agents (scripts that exit 0).
fn fake_path(env: &TestEnv, agents: &[&str]) -> OsString {
    use std::os::unix::fs::PermissionsExt;
    let bin = env.dir.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::os::unix::fs::symlink(real_git(), bin.join("git")).unwrap();
    for name in agents {
        let p = bin.join(name);
        std::fs::write(&p, "#!/bin/sh\nexit 0\n").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    bin.into_os_string()
}

fn check(env: &TestEnv, path: &OsString, args: &[&str]) -> Run {
    let mut all = vec!["fleet", "check"];
    all.extend_from_slice(args);
    to_run(
        env.cmd(&all)
            .env("PATH", path)
            .output()
            .expect("spice runs"),
    )
}

/// `Landlock ABI 7` written `Landlock ABI N`.
fn landlock_abi_as_n(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(i) = rest.find("Landlock ABI ") {
        let (head, tail) = rest.split_at(i + "Landlock ABI ".len());
        out.push_str(head);
        let digits = tail.chars().take_while(char::is_ascii_digit).count();
        out.push_str(if digits > 0 { "N" } else { "" });
        rest = &tail[digits..];
    }
    out.push_str(rest);
    out
}

/// Compares `actual` with the case's `expected.txt`, or rewrites it when blessing.
fn expect(case: &Path, actual: &str) -> Result<(), String> {
    let file = case.join("expected.txt");
    if std::env::var_os("SPICE_BLESS").is_some() {
        std::fs::write(&file, landlock_abi_as_n(actual)).unwrap();
        return Ok(());
    }
    // The kernel's Landlock ABI is the machine's, not the sample's.
    let actual = landlock_abi_as_n(actual);
    let expected =
        std::fs::read_to_string(&file).map_err(|e| format!("{}: {e}", file.display()))?;
    if expected == actual {
        Ok(())
    } else {
        Err(format!(
            "{}:\n--- expected\n{expected}--- actual\n{actual}",
            case.display()
        ))
    }
}

#[test]
fn valid_samples_pass() {
    let cases = samples("valid");
    assert!(cases.len() >= 3, "{cases:?}");
    let mut failures = Vec::new();
    for case in &cases {
        let env = repo_with(case);
        let run = check(&env, &fake_path(&env, &["claude", "fake-agent"]), &[]);
        if run.code != 0 || !run.stderr.is_empty() {
            failures.push(format!(
                "{}: exit {}: {}",
                case.display(),
                run.code,
                run.stderr
            ));
            continue;
        }
        if let Err(e) = expect(case, &run.stdout) {
            failures.push(e);
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn invalid_samples_fail_with_located_errors() {
    let cases = samples("invalid");
    assert!(cases.len() >= 12, "{cases:?}");
    let mut failures = Vec::new();
    for case in &cases {
        let env = repo_with(case);
        let run = check(&env, &fake_path(&env, &["claude", "fake-agent"]), &[]);
        if run.code != 2 || !run.stdout.is_empty() {
            failures.push(format!(
                "{}: exit {} (want 2), stdout {:?}, stderr {}",
                case.display(),
                run.code,
                run.stdout,
                run.stderr
            ));
            continue;
        }
        // Every problem is its own complete line: `spice: file:line:col: reason`.
        for line in run.stderr.lines() {
            let rest = line.strip_prefix("spice: ").unwrap_or("");
            let parts: Vec<&str> = rest.splitn(4, ':').collect();
            let located = parts.len() == 4
                && parts[1].parse::<usize>().is_ok()
                && parts[2].parse::<usize>().is_ok()
                && parts[3].starts_with(' ');
            if !located || line.contains("panicked") {
                failures.push(format!("{}: not a located error: {line:?}", case.display()));
            }
        }
        if let Err(e) = expect(case, &run.stderr) {
            failures.push(e);
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The repository's own lanes use the built-in `claude` and `codex` profiles: they
/// validate whether or not those CLIs are installed.
#[test]
fn repository_lanes_validate_with_or_without_the_agents() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let env = repo_with(root);
    let run = check(&env, &fake_path(&env, &[]), &[]);
    assert_eq!((run.code, run.stderr.as_str()), (0, ""), "{}", run.stdout);
    assert!(
        run.stdout.contains("lanes/core.toml:2:11: agent binary 'claude' (command[0] of profile 'claude') not found on PATH"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.ends_with(
            "2 lanes: 0 ready, 2 unavailable (agent binary missing; not a configuration error)\n"
        ),
        "{}",
        run.stdout
    );

    let env = repo_with(root);
    let run = check(&env, &fake_path(&env, &["claude", "codex"]), &["--json"]);
    let doc = run.json();
    let lanes = doc["lanes"].as_array().unwrap();
    let names: Vec<&str> = lanes.iter().map(|l| l["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["core", "review"]);
    for l in lanes {
        assert!(l["program"]
            .as_str()
            .unwrap()
            .ends_with(l["profile"].as_str().unwrap()));
        assert!(l["unavailable"].is_null());
        assert_eq!(l["lease_secs"], 1800);
        assert_eq!(l["renew_secs"], 300);
    }
    assert_eq!(
        (doc["ready"].as_u64(), doc["unavailable"].as_u64()),
        (Some(2), Some(0))
    );
}

#[test]
fn json_reports_unavailable_lanes_and_sources() {
    let case =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/sample-configs/valid/builtin-profiles");
    let env = repo_with(&case);
    let run = check(&env, &fake_path(&env, &["claude"]), &["--json"]);
    let doc = run.json();
    let by_name = |n: &str| {
        doc["lanes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|l| l["name"] == n)
            .unwrap()
            .clone()
    };
    assert_eq!(by_name("build")["model"], "claude-sonnet");
    assert_eq!(by_name("build")["profile_source"], "built-in");
    assert_eq!(
        by_name("review")["unavailable"],
        "lanes/review.toml:2:11: agent binary 'codex' (command[0] of profile 'codex') not found on PATH"
    );
    // `{spice}` resolves to the running binary.
    assert_eq!(
        by_name("tour")["program"].as_str().map(PathBuf::from),
        Some(common::bin())
    );
    assert_eq!(
        (doc["ready"].as_u64(), doc["unavailable"].as_u64()),
        (Some(2), Some(1))
    );
}

/// What `fleet check` and `fleet status` print and `fleet up` refuses with when the
/// repository defines no lane: the directory looked in, and how to add a lane.
fn no_lanes_in(env: &TestEnv) -> String {
    let repo = std::fs::canonicalize(&env.repo).unwrap();
    format!(
        "no lanes in {}: add one as lanes/NAME.toml holding `profile = \"claude\"`, or run \
         `spice demo` to see a fleet at work",
        repo.join("lanes").display()
    )
}

#[test]
fn no_lanes_is_not_an_error() {
    let env = TestEnv::new();
    let run = check(&env, &fake_path(&env, &[]), &[]);
    assert_eq!(run.ok(), format!("{}\n", no_lanes_in(&env)));
}

/// Regression (issue 40): `spice fleet up` in a repository with no lane file (no
/// `lanes/`, or one holding none) exited 0 having printed nothing; with every lane
/// disabled it did the same. It refuses now, saying where it looked and what to do;
/// `fleet status` says the same as `fleet check`.
#[test]
fn regression_fleet_up_without_a_lane_says_where_it_looked_and_fails() {
    let env = TestEnv::new();
    let err = env
        .run(&["fleet", "up", "--until-idle"])
        .fails(2, &no_lanes_in(&env));
    assert!(err.contains("spice demo"), "{err}");
    let status = env.run(&["fleet", "status"]);
    assert!(
        status.ok().contains(&no_lanes_in(&env)),
        "{}",
        status.stdout
    );
    // A lanes/ directory holding no lane file is the same.
    std::fs::create_dir_all(env.repo.join("lanes")).unwrap();
    std::fs::write(env.repo.join("lanes/README.md"), "lanes go here\n").unwrap();
    let up = env.run(&["fleet", "up"]);
    up.fails(2, &no_lanes_in(&env));
    assert_eq!(up.stdout, "", "nothing ran");
    // Lanes, every one disabled: nothing to run either.
    std::fs::write(
        env.repo.join("lanes/a.toml"),
        "profile = \"demo\"\nenabled = false\n",
    )
    .unwrap();
    env.run(&["fleet", "up", "--until-idle"]).fails(
        2,
        "no lane to run: every lane sets enabled = false (lanes/a.toml)",
    );
}

/// Regression (issue 40): a repository with no commit passed `fleet check` ("1 lane:
/// 1 ready") and `fleet up` then claimed, released and retried "base branch master
/// does not exist" forever. Both now name the lane and what to do, and refuse; a
/// lane whose `base` names a branch that does not exist is refused the same way.
#[test]
fn regression_a_repository_with_no_commit_is_refused_before_anything_runs() {
    let env = TestEnv::new();
    std::fs::create_dir_all(env.repo.join("lanes")).unwrap();
    std::fs::write(env.repo.join("lanes/a.toml"), "profile = \"demo\"\n").unwrap();
    let task = env.add(&["Never claimed"]);
    let run = env.run(&["fleet", "check"]);
    let err = run.fails(2, "lane a: ");
    assert!(err.contains("has no commit yet"), "{err}");
    assert!(err.contains("git commit --allow-empty -m init"), "{err}");
    assert!(run.stdout.contains("no base"), "{}", run.stdout);
    assert!(run.stdout.contains("0 ready"), "{}", run.stdout);
    let json = env.run(&["fleet", "check", "--json"]);
    let doc: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
    assert!(
        doc["lanes"][0]["no_base"]
            .as_str()
            .unwrap()
            .contains("no commit yet"),
        "{doc}"
    );
    let up = env.run(&["fleet", "up", "--until-idle"]);
    up.fails(2, "has no commit yet");
    assert!(
        env.ledger_of(&task, "claimed").is_empty(),
        "nothing was claimed"
    );

    // A first commit, and the lane is ready; a base that does not exist is refused.
    common::git(&env.repo, &["commit", "-q", "--allow-empty", "-m", "init"]);
    env.run(&["fleet", "check"]).ok();
    std::fs::write(
        env.repo.join("lanes/a.toml"),
        "profile = \"demo\"\nbase = \"nope\"\n",
    )
    .unwrap();
    let err = env.run(&["fleet", "check"]).fails(2, "lane a: ");
    assert!(err.contains("base branch nope does not exist"), "{err}");
    assert!(err.contains("lanes/a.toml"), "{err}");
}
