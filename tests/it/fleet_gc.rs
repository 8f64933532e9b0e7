//! `spice fleet gc` on a real repository: a task checkout whose work merged is
//! removed; one with uncommitted, untracked or unmerged work is saved to
//! `refs/spice/wip/<handle>` first (the ref's tree holds exactly its files); a claimed
//! one and an open task's unmerged one are kept; a dry run changes nothing; the
//! fleet's `[gc] after` policy removes what ended long enough ago by itself.

use crate::common;
use common::{git, TestEnv};
use std::collections::BTreeSet;
use std::path::PathBuf;

const LANE: &str = "profile = \"demo\"\nphases = [\"todo\"]\nlease = \"5m\"\n";

struct Repo {
    env: TestEnv,
}

impl Repo {
    fn new() -> Repo {
        let env = TestEnv::with_lanes(&[("a", LANE)]);
        std::fs::write(env.repo.join("a.txt"), "one\n").unwrap();
        git(&env.repo, &["add", "a.txt"]);
        git(&env.repo, &["commit", "-q", "-m", "a"]);
        Repo { env }
    }

    /// A task and its checkout: branch `spice/<handle>/work` at main, in a worktree where
    /// the fleet puts one. Returns (id, handle, worktree).
    fn task(&self, title: &str) -> (String, String, PathBuf) {
        self.task_on(title, |handle| format!("spice/{handle}/work"))
    }

    /// [`Repo::task`] on the branch `branch` names for the handle.
    fn task_on(&self, title: &str, branch: fn(&str) -> String) -> (String, String, PathBuf) {
        let id = self.env.add(&[title, "--project", "demo"]);
        let handle = format!("demo-{id}");
        let wt = self.env.home.join("worktrees/a").join(&handle);
        std::fs::create_dir_all(wt.parent().unwrap()).unwrap();
        let branch = branch(&handle);
        git(
            &self.env.repo,
            &[
                "worktree",
                "add",
                "-q",
                "-b",
                &branch,
                wt.to_str().unwrap(),
                "main",
            ],
        );
        (id, handle, wt)
    }

    fn commit_in(&self, wt: &std::path::Path, file: &str, text: &str) {
        std::fs::write(wt.join(file), text).unwrap();
        git(wt, &["add", file]);
        git(wt, &["commit", "-q", "-m", file]);
    }

    fn gc(&self, args: &[&str]) -> serde_json::Value {
        let mut a = vec!["fleet", "gc", "--json"];
        a.extend_from_slice(args);
        self.env.run(&a).json()
    }

    fn branch_exists(&self, handle: &str) -> bool {
        !git(
            &self.env.repo,
            &["branch", "--list", &format!("spice/{handle}/work")],
        )
        .is_empty()
    }

    fn wip_files(&self, handle: &str) -> BTreeSet<String> {
        git(
            &self.env.repo,
            &[
                "ls-tree",
                "-r",
                "--name-only",
                &format!("refs/spice/wip/{handle}"),
            ],
        )
        .lines()
        .map(str::to_string)
        .collect()
    }

    fn wip_exists(&self, handle: &str) -> bool {
        let r = std::process::Command::new("git")
            .args([
                "rev-parse",
                "--verify",
                "--quiet",
                &format!("refs/spice/wip/{handle}"),
            ])
            .current_dir(&self.env.repo)
            .output()
            .unwrap();
        r.status.success()
    }
}

fn item<'a>(report: &'a serde_json::Value, handle: &str) -> &'a serde_json::Value {
    report["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["handle"] == handle)
        .unwrap_or_else(|| panic!("no item {handle} in {report}"))
}

fn set(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|s| s.to_string()).collect()
}

#[test]
fn gc_removes_merged_work_and_saves_everything_else_first() {
    let r = Repo::new();
    // Merged: its commit is in main, its worktree clean.
    let (merged_id, merged, merged_wt) = r.task("Merged");
    r.commit_in(&merged_wt, "m.txt", "merged\n");
    git(
        &r.env.repo,
        &["merge", "-q", "--ff-only", &format!("spice/{merged}/work")],
    );
    // Merged but dirty: a tracked change and an untracked file.
    let (_, dirty, dirty_wt) = r.task("Dirty");
    std::fs::write(dirty_wt.join("a.txt"), "changed\n").unwrap();
    std::fs::create_dir_all(dirty_wt.join("sub")).unwrap();
    std::fs::write(dirty_wt.join("sub/new.txt"), "untracked\n").unwrap();
    // Unmerged commits, its task done.
    let (done_id, done, done_wt) = r.task("Done unmerged");
    r.commit_in(&done_wt, "u.txt", "unmerged\n");
    r.env.run(&["task", "done", &done_id]).ok();
    // Unmerged commits, its task open: kept.
    let (_, open, open_wt) = r.task("Open unmerged");
    r.commit_in(&open_wt, "o.txt", "open\n");
    // Claimed (the lease is live): kept even though merged.
    let (claimed_id, claimed, claimed_wt) = r.task("Claimed");
    r.env
        .run(&[
            "task",
            "claim",
            &claimed_id,
            "--claimant",
            "someone",
            "--worktree",
            claimed_wt.to_str().unwrap(),
        ])
        .ok();

    // A dry run reports and changes nothing.
    let dry = r.gc(&["--dry-run"]);
    assert_eq!(dry["dry_run"], true);
    assert_eq!(item(&dry, &merged)["action"], "would-remove", "{dry}");
    assert_eq!(
        item(&dry, &dirty)["saved"],
        format!("refs/spice/wip/{dirty}")
    );
    assert_eq!(dry["worktrees_removed"], 3, "{dry}");
    for (h, wt) in [
        (&merged, &merged_wt),
        (&dirty, &dirty_wt),
        (&done, &done_wt),
    ] {
        assert!(wt.exists() && r.branch_exists(h), "dry run removed {h}");
        assert!(!r.wip_exists(h), "dry run saved {h}");
    }
    assert_eq!(
        std::fs::read_to_string(dirty_wt.join("a.txt")).unwrap(),
        "changed\n"
    );

    let report = r.gc(&[]);
    // Merged and clean: removed, nothing to save.
    let m = item(&report, &merged);
    assert_eq!(m["action"], "removed", "{report}");
    assert!(m["saved"].is_null(), "{m}");
    assert!(m["bytes"].as_u64().unwrap() > 0, "{m}");
    assert!(!merged_wt.exists() && !r.branch_exists(&merged) && !r.wip_exists(&merged));
    assert_eq!(r.env.ledger_of(&merged_id, "gc").len(), 1);
    // Dirty: every file it held, untracked too, exactly, in the wip commit.
    assert_eq!(item(&report, &dirty)["action"], "removed", "{report}");
    assert!(!dirty_wt.exists() && !r.branch_exists(&dirty));
    assert_eq!(
        r.wip_files(&dirty),
        set(&["a.txt", "lanes/a.toml", "m.txt", "sub/new.txt"])
    );
    let saved_a = git(
        &r.env.repo,
        &["show", &format!("refs/spice/wip/{dirty}:a.txt")],
    );
    assert_eq!(saved_a.trim(), "changed");
    // Done but unmerged: its commit is saved (the wip commit holds it), then removed.
    assert_eq!(item(&report, &done)["action"], "removed", "{report}");
    assert!(!done_wt.exists() && !r.branch_exists(&done));
    assert_eq!(
        r.wip_files(&done),
        set(&["a.txt", "lanes/a.toml", "m.txt", "u.txt"])
    );
    let log = git(
        &r.env.repo,
        &["log", "--format=%s", &format!("refs/spice/wip/{done}")],
    );
    assert!(
        log.lines().any(|l| l == "u.txt"),
        "the unmerged commit is an ancestor: {log}"
    );
    // Kept: open and unmerged; claimed.
    assert_eq!(item(&report, &open)["action"], "kept");
    assert!(item(&report, &open)["why"]
        .as_str()
        .unwrap()
        .contains("task is open"));
    assert!(open_wt.exists() && r.branch_exists(&open));
    assert_eq!(item(&report, &claimed)["action"], "kept");
    assert!(item(&report, &claimed)["why"]
        .as_str()
        .unwrap()
        .contains("claimed by someone"));
    assert!(claimed_wt.exists() && r.branch_exists(&claimed));
    assert_eq!(report["worktrees_removed"], 3);
    assert_eq!(report["branches_removed"], 3);
    assert!(report["freed_bytes"].as_u64().unwrap() > 0);
    // Nothing left to do: a second run removes nothing.
    let again = r.gc(&[]);
    assert_eq!(again["worktrees_removed"], 0, "{again}");
    // The text report says what was freed.
    let text = r.env.run(&["fleet", "gc"]);
    assert!(
        text.ok()
            .contains("freed 0 B in 0 worktree(s) and 0 branch(es)"),
        "{}",
        text.stdout
    );
}

#[test]
fn a_second_save_keeps_the_first_reachable() {
    let r = Repo::new();
    let (_, h, wt) = r.task("Twice");
    std::fs::write(wt.join("first.txt"), "1\n").unwrap();
    r.gc(&[]);
    let first = git(&r.env.repo, &["rev-parse", &format!("refs/spice/wip/{h}")]);
    // The same task's checkout made again, with other work.
    git(
        &r.env.repo,
        &[
            "worktree",
            "add",
            "-q",
            "-b",
            &format!("spice/{h}/work"),
            wt.to_str().unwrap(),
            "main",
        ],
    );
    std::fs::write(wt.join("second.txt"), "2\n").unwrap();
    r.gc(&[]);
    assert!(r.wip_files(&h).contains("second.txt"));
    let parents = git(
        &r.env.repo,
        &["log", "-1", "--format=%P", &format!("refs/spice/wip/{h}")],
    );
    assert!(
        parents.contains(&first),
        "the earlier wip is a parent: {parents}"
    );
}

#[test]
fn the_fleet_applies_its_gc_policy_by_itself() {
    let r = Repo::new();
    std::fs::write(r.env.repo.join("spice.toml"), "[gc]\nafter = \"1ms\"\n").unwrap();
    git(&r.env.repo, &["add", "spice.toml"]);
    git(&r.env.repo, &["commit", "-q", "-m", "gc policy"]);
    let (id, h, wt) = r.task("Finished long ago");
    std::fs::write(wt.join("left.txt"), "left over\n").unwrap();
    r.env.run(&["task", "done", &id]).ok();
    let out = r
        .env
        .cmd(&["fleet", "up", "--until-idle"])
        .env("HOME", r.env.agent_home())
        .output()
        .unwrap();
    let run = common::to_run(out);
    run.ok();
    assert!(run.stderr.contains("spice: gc in"), "{}", run.stderr);
    assert!(!wt.exists() && !r.branch_exists(&h));
    assert!(r.wip_files(&h).contains("left.txt"));
}

/// Regression: what the library reported (a collection's result among it) went to the
/// supervisor's stderr alone, so a detached supervisor (`--log-only`, its stderr
/// nowhere) lost it; it reaches `logs/fleet.log` now, and not stderr.
#[test]
fn a_log_only_supervisor_logs_what_its_collection_did() {
    let r = Repo::new();
    std::fs::write(r.env.repo.join("spice.toml"), "[gc]\nafter = \"1ms\"\n").unwrap();
    git(&r.env.repo, &["add", "spice.toml"]);
    git(&r.env.repo, &["commit", "-q", "-m", "gc policy"]);
    let (id, _, wt) = r.task("Finished long ago");
    r.env.run(&["task", "done", &id]).ok();
    let out = r
        .env
        .cmd(&["fleet", "up", "--until-idle", "--log-only"])
        .env("HOME", r.env.agent_home())
        .output()
        .unwrap();
    let run = common::to_run(out);
    run.ok();
    assert!(!wt.exists());
    assert!(!run.stderr.contains("gc in"), "{}", run.stderr);
    let log = std::fs::read_to_string(r.env.home.join("logs/fleet.log")).unwrap();
    let record = log
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|v| {
            v["message"]
                .as_str()
                .is_some_and(|m| m.starts_with("gc in "))
        })
        .unwrap_or_else(|| panic!("no gc record in the log:\n{log}"));
    assert_eq!(record["level"], "info");
    assert_eq!(record["target"], "spice");
    assert!(
        record["message"]
            .as_str()
            .unwrap()
            .contains("removed 1 worktree(s)"),
        "{record}"
    );
}

/// A lane's agent still running on a task whose claim its phase released (it is
/// finishing its turn in the worktree) keeps the worktree, though it is merged.
#[test]
fn a_lane_agent_still_running_on_the_task_keeps_its_worktree() {
    let r = Repo::new();
    let (id, h, wt) = r.task("Finishing its turn");
    let mut agent = std::process::Command::new("sleep")
        .arg("60")
        .spawn()
        .unwrap();
    let stat = std::fs::read_to_string(format!("/proc/{}/stat", agent.id())).unwrap();
    let after_comm = &stat[stat.rfind(')').unwrap() + 2..];
    let start: u64 = after_comm.split(' ').nth(19).unwrap().parse().unwrap();
    r.env.sql_write(&format!(
        "INSERT INTO lanes (name, state, task_id, pid, pid_start, updated) \
         VALUES ('a', 'working', '{id}', {}, {start}, 0)",
        agent.id()
    ));
    let report = r.gc(&[]);
    assert_eq!(item(&report, &h)["action"], "kept", "{report}");
    assert!(item(&report, &h)["why"]
        .as_str()
        .unwrap()
        .contains("agent still runs"));
    assert!(wt.exists());
    agent.kill().unwrap();
    agent.wait().unwrap();
    // Its agent gone, the merged worktree goes.
    let report = r.gc(&[]);
    assert_eq!(item(&report, &h)["action"], "removed", "{report}");
    assert!(!wt.exists());
}

/// A branch of the layout before each task had a directory of refs (`spice/<handle>`)
/// is still a task checkout: merged and clean, gc removes it as it removes the others.
#[test]
fn a_legacy_task_branch_is_still_collected() {
    let r = Repo::new();
    let (_, handle, wt) = r.task_on("Old layout", |handle| format!("spice/{handle}"));
    let legacy = format!("spice/{handle}");
    let report = r.gc(&[]);
    assert_eq!(item(&report, &handle)["action"], "removed", "{report}");
    assert!(git(&r.env.repo, &["branch", "--list", &legacy]).is_empty());
    assert!(!wt.exists());
}

/// Commits `file` in `wt` as a confined agent's git does: its objects in the
/// worktree's private directory (`git::objects`), listed in the repository's
/// alternates.
fn commit_privately(repo: &std::path::Path, wt: &std::path::Path, file: &str) -> PathBuf {
    let admin = PathBuf::from(git(wt, &["rev-parse", "--absolute-git-dir"]).trim());
    let common = repo.join(".git");
    let private = common
        .join("spice/objects")
        .join(admin.file_name().unwrap());
    std::fs::create_dir_all(private.join("info")).unwrap();
    std::fs::create_dir_all(common.join("objects/info")).unwrap();
    let alternates = common.join("objects/info/alternates");
    let mut listed = std::fs::read_to_string(&alternates).unwrap_or_default();
    listed.push_str(&format!("{}\n", private.display()));
    std::fs::write(&alternates, listed).unwrap();
    std::fs::write(wt.join(file), format!("{file}\n")).unwrap();
    let objects = common.join("objects");
    for args in [&["add", file][..], &["commit", "-q", "-m", file][..]] {
        let out = std::process::Command::new("git")
            .args(args)
            .current_dir(wt)
            .env("GIT_OBJECT_DIRECTORY", &private)
            .env("GIT_ALTERNATE_OBJECT_DIRECTORIES", &objects)
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
    }
    private
}

/// Regression (#39): a removed worktree's private object directory stayed listed in
/// the repository's alternates for good, and deleting it lost the commits a saved or
/// unmerged branch still needed. Now its objects are copied into the repository's
/// store as the worktree goes (here: gc removing a done task's unmerged worktree), or
/// at the next gc for a worktree removed without spice; then it is unlisted and gone.
#[test]
fn a_removed_worktrees_private_objects_are_kept_and_its_directory_retired() {
    let r = Repo::new();
    let repo = r.env.repo.clone();
    let (done_id, done, done_wt) = r.task("Done unmerged");
    let done_dir = commit_privately(&repo, &done_wt, "done.txt");
    r.env.run(&["task", "done", &done_id]).ok();
    let (_, open, open_wt) = r.task("Removed by hand");
    let open_dir = commit_privately(&repo, &open_wt, "open.txt");
    git(
        &repo,
        &["worktree", "remove", "--force", open_wt.to_str().unwrap()],
    );

    let report = r.gc(&[]);
    assert_eq!(item(&report, &done)["action"], "removed", "{report}");
    assert_eq!(report["object_dirs_retired"], 1, "{report}");
    for d in [&done_dir, &open_dir] {
        assert!(!d.exists(), "{} is still there", d.display());
    }
    let alternates =
        std::fs::read_to_string(repo.join(".git/objects/info/alternates")).unwrap_or_default();
    assert!(alternates.trim().is_empty(), "{alternates}");
    common::assert_history_whole(&repo);
    assert_eq!(
        git(&repo, &["show", &format!("refs/spice/wip/{done}:done.txt")]).trim(),
        "done.txt"
    );
    assert_eq!(
        git(&repo, &["show", &format!("spice/{open}/work:open.txt")]).trim(),
        "open.txt"
    );
}
