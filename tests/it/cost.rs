//! What commands cost beyond their work (#20): no git process where `SPICE_HOME` says
//! where the store is, no inotify instance for a wrapped command that ends at once,
//! and `task list --json` written as it is read.

use crate::common;
use common::TestEnv;
use std::path::Path;

/// A `git` on PATH that records each call, then runs the real one.
fn spy_git(env: &TestEnv) -> (std::ffi::OsString, std::path::PathBuf) {
    let bin = env.dir.path().join("spy-bin");
    std::fs::create_dir_all(&bin).unwrap();
    let calls = env.dir.path().join("git-calls");
    let real = which("git");
    let script = format!(
        "#!/bin/sh\necho \"$@\" >> '{}'\nexec '{}' \"$@\"\n",
        calls.display(),
        real.display()
    );
    let spy = bin.join("git");
    std::fs::write(&spy, script).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&spy, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut path = bin.into_os_string();
    path.push(":");
    path.push(std::env::var_os("PATH").unwrap_or_default());
    (path, calls)
}

fn which(name: &str) -> std::path::PathBuf {
    std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .map(|d| d.join(name))
        .find(|p| p.is_file())
        .unwrap_or_else(|| panic!("{name} is needed on PATH"))
}

fn calls(file: &Path) -> Vec<String> {
    std::fs::read_to_string(file)
        .map(|s| s.lines().map(str::to_string).collect())
        .unwrap_or_default()
}

/// Regression (#20): every command ran `git rev-parse` (twice outside a repository),
/// even with SPICE_HOME set.
#[test]
fn no_git_process_when_spice_home_says_where_the_store_is() {
    let env = TestEnv::new();
    env.add(&["first"]);
    let (path, log) = spy_git(&env);
    // Inside the repository, and outside any repository.
    let outside = env.dir.path().join("elsewhere");
    std::fs::create_dir_all(&outside).unwrap();
    for dir in [env.repo.as_path(), outside.as_path()] {
        for args in [&["task", "list"][..], &["task", "next", "--json"]] {
            let out = env.cmd(args).env("PATH", &path).current_dir(dir).output();
            let run = common::to_run(out.unwrap());
            run.ok();
        }
    }
    assert_eq!(calls(&log), Vec::<String>::new(), "git was run");
    // Without SPICE_HOME, inside a repository, the store is still found (no git either:
    // the repository is read directly) and it is the repository's.
    let run = common::to_run(
        env.cmd(&["task", "add", "--json", "in the repo"])
            .env_remove("SPICE_HOME")
            .env("PATH", &path)
            .output()
            .unwrap(),
    );
    run.ok();
    assert!(env.repo.join(".git/spice/spice.db").exists());
    assert_eq!(calls(&log), Vec::<String>::new(), "git was run");
    // Where the environment redirects git, git decides.
    let run = common::to_run(
        env.cmd(&["task", "list"])
            .env_remove("SPICE_HOME")
            .env("GIT_DIR", env.repo.join(".git"))
            .env("PATH", &path)
            .current_dir(&outside)
            .output()
            .unwrap(),
    );
    assert!(run.ok().contains("in the repo"), "{}", run.stdout);
    assert!(!calls(&log).is_empty(), "GIT_DIR set: git should decide");
}

/// Regression (#20): `spice exec` set up an inotify watch for every command, and
/// closing it blocked the wrapper in the kernel; a command that ends at once must not
/// cost one. The command lists its parent's (the wrapper's) descriptors.
#[test]
fn a_command_that_ends_at_once_costs_no_inotify_watch() {
    let env = TestEnv::new();
    env.add(&["a task so the store exists"]);
    let out = env
        .cmd(&["exec", "--", "sh", "-c", "ls -l /proc/$PPID/fd"])
        .output()
        .unwrap();
    let run = common::to_run(out);
    let fds = run.ok();
    assert!(
        fds.contains("signalfd"),
        "the listing saw the wrapper: {fds}"
    );
    assert!(!fds.contains("inotify"), "an inotify watch at once: {fds}");
    // A command that runs on gets the watch (items are pushed to it live).
    let out = env
        .cmd(&["exec", "--", "sh", "-c", "sleep 0.5; ls -l /proc/$PPID/fd"])
        .output()
        .unwrap();
    let run = common::to_run(out);
    assert!(
        run.ok().contains("inotify"),
        "no watch later: {}",
        run.stdout
    );
}

/// `task list --json` is written as it is read; the document is the same as the
/// whole list's, empty or not, with every task's tags, dependencies and annotations.
#[test]
fn task_list_json_streams_the_same_document() {
    let env = TestEnv::new();
    let empty = env.run(&["task", "list", "--json"]);
    assert_eq!(empty.ok(), "[]\n");
    let a = env.add(&["a", "--tag", "x"]);
    let b = env.add(&["b", "--depends", &a]);
    env.run(&["task", "annotate", &b, "a note"]).ok();
    let done = env.add(&["done one", "--tag", "y"]);
    env.run(&["task", "done", &done]).ok();
    let c = env.add(&["c", "--tag", "z"]);
    let run = env.run(&["task", "list", "--json"]);
    let v = run.json();
    let rows = v.as_array().unwrap();
    let ids: Vec<&str> = rows.iter().map(|r| r["id"].as_str().unwrap()).collect();
    assert_eq!(ids, [a.as_str(), b.as_str(), c.as_str()]);
    assert_eq!(rows[0]["tags"], serde_json::json!(["x"]));
    assert_eq!(rows[1]["depends"], serde_json::json!([a]));
    assert_eq!(rows[1]["annotations"][0]["description"], "a note");
    assert_eq!(rows[2]["tags"], serde_json::json!(["z"]));
    assert!(rows.iter().all(|r| r["short"].is_string()));
    let all = env.run(&["task", "list", "--all", "--json"]).json();
    let done_row = all
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == done.as_str())
        .expect("done task listed with --all");
    assert_eq!(done_row["tags"], serde_json::json!(["y"]));
}
