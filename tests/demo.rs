//! `spice demo`: the newcomer's first run, through the real binary, in a scratch
//! directory: the whole loop narrated, four tasks done and merged, nothing outside
//! the directory touched.

mod common;
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
