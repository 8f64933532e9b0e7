//! `spice demo`: the newcomer's first run, through the real binary, in a scratch
//! directory: the whole loop narrated, four tasks done and merged, nothing outside
//! the directory touched.

use crate::common;
use common::{bin, git};
use std::process::Command;

fn demo(dir: &std::path::Path, home: &std::path::Path) -> common::Run {
    common::to_run(
        Command::new(bin())
            .arg("demo")
            .arg(dir)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", home)
            .output()
            .unwrap(),
    )
}

#[test]
fn the_demo_shows_the_loop_and_leaves_a_repository_to_explore() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let dir = tmp.path().join("demo");
    let run = demo(&dir, &home);
    let out = run.ok();
    for needle in [
        "claimed",
        "launched the demo agent",
        "spice steer lane:a",
        "the agent answered \"ACK ",
        "item retired",
        "its branch is merged into main",
        "Look around",
    ] {
        assert!(out.contains(needle), "{needle:?} missing from:\n{out}");
    }
    assert_eq!(
        out.matches("its branch is merged into main").count(),
        4,
        "{out}"
    );
    // A dependent task is claimed only after its prerequisite was merged.
    let merged_first = out.find("merged into main").unwrap();
    let farewell = out.find(" \"Add a farewell\"").unwrap();
    assert!(farewell > merged_first, "{out}");
    let log = git(&dir, &["log", "--oneline", "main"]);
    assert_eq!(log.matches("demo: ").count(), 4, "{log}");
    let list = common::to_run(
        Command::new(bin())
            .args(["task", "list", "--all", "--json"])
            .current_dir(&dir)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .output()
            .unwrap(),
    )
    .json();
    let tasks = list.as_array().unwrap();
    assert_eq!(tasks.len(), 4);
    assert!(tasks.iter().all(|t| t["status"] == "completed"), "{list}");
    // The agents' transcripts live inside the demo directory, not in $HOME.
    assert!(
        std::fs::read_dir(&home).unwrap().next().is_none(),
        "HOME untouched"
    );
    assert!(dir.join(".git/spice/demo-home/.claude/projects").is_dir());
    // A directory that has something in it is refused.
    demo(&dir, &home).fails(2, "is not empty");
}

/// Regression (#40): the demo's closing hint said `spice task list` shows its tasks,
/// but they are all done by then and `task list` shows open ones: "no tasks". The
/// hint's command, typed as printed inside the demo's repository, lists them; and the
/// hint says how to get there from where the demo was run.
#[test]
fn regression_the_closing_hint_lists_the_demos_tasks() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let dir = tmp.path().join("demo");
    let out = demo(&dir, &home).ok().to_string();
    let hint = out.split("Look around").nth(1).expect("a closing hint");
    let line = |start: &str| {
        hint.lines()
            .map(str::trim)
            .find(|l| l.starts_with(start))
            .unwrap_or_else(|| panic!("no {start:?} line in:\n{hint}"))
            .split("  ")
            .next()
            .unwrap()
            .to_string()
    };
    let bin_dir = bin().parent().unwrap().to_path_buf();
    let path = std::env::join_paths(std::iter::once(bin_dir).chain(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    )))
    .unwrap();
    let sh = |script: &str, cwd: &std::path::Path| {
        common::to_run(
            Command::new("sh")
                .args(["-c", script])
                .current_dir(cwd)
                .env_clear()
                .env("PATH", &path)
                .env("HOME", &home)
                .output()
                .unwrap(),
        )
    };
    let list = line("spice task list");
    let titles = [
        "Write the greeting",
        "Add a farewell",
        "Document the demo",
        "Polish the farewell",
    ];
    let listed = sh(&list, &dir);
    for title in titles {
        assert!(listed.ok().contains(title), "{list}:\n{}", listed.stdout);
    }
    // From where the demo was run: the hint's `cd`, then the same command.
    let script = format!("{} && {list}", line("cd "));
    let listed = sh(&script, tmp.path());
    for title in titles {
        assert!(listed.ok().contains(title), "{script}:\n{}", listed.stdout);
    }
}

/// Regression (#40): a demo whose lanes stopped on an error still exited 0, its
/// failure only a line in the middle of the narration. A post-checkout hook that
/// refuses every checkout (the operator's `core.hooksPath`) fails each worktree.
#[test]
fn regression_a_failed_lane_fails_the_demo() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let hooks = tmp.path().join("hooks");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::create_dir_all(&hooks).unwrap();
    let hook = hooks.join("post-checkout");
    std::fs::write(&hook, "#!/bin/sh\necho 'checkout refused' >&2\nexit 1\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(
        home.join(".gitconfig"),
        format!("[core]\n\thooksPath = {}\n", hooks.display()),
    )
    .unwrap();
    let run = demo(&tmp.path().join("demo"), &home);
    let err = run.fails(1, "the demo did not finish");
    assert!(err.contains("lane(s) stopped with an error ("), "{err}");
    assert!(err.contains("could not prepare a worktree"), "{err}");
    // The narration and the summary still come first, on stdout.
    assert!(run.stdout.contains("Where things are"), "{}", run.stdout);
}
