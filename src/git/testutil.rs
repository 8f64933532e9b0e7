//! Repositories for the git module's unit tests: real git, no global configuration.

use std::path::{Path, PathBuf};

/// Runs git in `dir` with no global or system configuration; panics with its output on
/// failure and returns its trimmed stdout.
pub(crate) fn sh(dir: &Path, args: &[&str]) -> String {
    let out = std::process::Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {out:?}");
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// A repository `repo` on `main` (one commit of `a.txt` = "one") with an identity,
/// and a task worktree `wt` on a new branch `spice/t`, both under a temporary dir.
pub(crate) fn repo_with_task_worktree() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    std::fs::create_dir(&repo).unwrap();
    sh(&repo, &["init", "-q", "-b", "main"]);
    sh(&repo, &["config", "user.email", "t@example.com"]);
    sh(&repo, &["config", "user.name", "T"]);
    std::fs::write(repo.join("a.txt"), "one\n").unwrap();
    sh(&repo, &["add", "a.txt"]);
    sh(&repo, &["commit", "-q", "-m", "root"]);
    let wt = dir.path().join("wt");
    let wt_arg = wt.to_str().unwrap();
    sh(&repo, &["worktree", "add", "-q", "-b", "spice/t", wt_arg]);
    (dir, repo, wt)
}
