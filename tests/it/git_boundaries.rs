//! The three git boundaries against real repositories made with `git init` in temp
//! directories: claim (worktrees), phase completion (merges), launch (read-only).

use spice::git::{task_branch, Git, MergeKind, MergeMethod, Prepared, Runner};
use spice::Error;
use std::path::{Path, PathBuf};
use std::process::Command;

const METHODS: [MergeMethod; 2] = [MergeMethod::MergeTree, MergeMethod::TempWorktree];

struct Fixture {
    dir: tempfile::TempDir,
    repo: PathBuf,
    git: Git,
}

/// What the library's runner is given: `PATH`, and an empty home so no user
/// configuration changes what the tests mean.
fn env(home: &Path) -> Vec<(String, String)> {
    vec![
        ("PATH".into(), std::env::var("PATH").unwrap_or_default()),
        ("HOME".into(), home.display().to_string()),
    ]
}

/// Runs git in `dir` for the fixture and returns trimmed stdout, asserting success.
#[track_caller]
fn sh(dir: &Path, args: &[&str]) -> String {
    let out = run(dir, args);
    assert!(out.0, "git {args:?} in {}: {}", dir.display(), out.2);
    out.1
}

/// Runs git in `dir`: (success, stdout, stderr).
fn run(dir: &Path, args: &[&str]) -> (bool, String, String) {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .output()
        .expect("git runs");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).trim().to_string(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn write(dir: &Path, file: &str, text: &str) {
    let p = dir.join(file);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

fn read(dir: &Path, file: &str) -> String {
    std::fs::read_to_string(dir.join(file)).unwrap()
}

/// Writes `file` in `dir` and commits it; returns the new commit.
fn commit(dir: &Path, file: &str, text: &str) -> String {
    write(dir, file, text);
    sh(dir, &["add", "--", file]);
    sh(dir, &["commit", "-q", "-m", &format!("change {file}")]);
    sh(dir, &["rev-parse", "HEAD"])
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    std::fs::create_dir(&repo).unwrap();
    sh(&repo, &["init", "-q"]);
    sh(&repo, &["symbolic-ref", "HEAD", "refs/heads/main"]);
    sh(&repo, &["config", "user.email", "test@example.com"]);
    sh(&repo, &["config", "user.name", "Spice Test"]);
    commit(&repo, ".gitignore", "target/\n");
    commit(&repo, "a.txt", "one\n");
    let runner = Runner::new(env(dir.path()));
    let git = Git::open(&repo, runner).unwrap();
    Fixture { dir, repo, git }
}

impl Fixture {
    fn wt(&self, name: &str) -> PathBuf {
        self.dir.path().join("worktrees").join(name)
    }
    fn main_tip(&self) -> String {
        sh(&self.repo, &["rev-parse", "refs/heads/main"])
    }
    fn with(self, method: MergeMethod) -> Fixture {
        Fixture {
            git: self.git.clone().with_merge_method(method),
            ..self
        }
    }
    /// No merge is in progress anywhere, and no temporary worktree is left behind.
    #[track_caller]
    fn assert_no_merge_state(&self, worktrees: usize) {
        let common = self.repo.join(".git");
        assert!(!common.join("MERGE_HEAD").exists());
        for d in std::fs::read_dir(common.join("worktrees"))
            .into_iter()
            .flatten()
        {
            assert!(!d.unwrap().path().join("MERGE_HEAD").exists());
        }
        let list = sh(&self.repo, &["worktree", "list", "--porcelain"]);
        assert_eq!(list.matches("worktree ").count(), worktrees, "{list}");
        let temp = common.join("spice-merges");
        assert!(std::fs::read_dir(&temp).map_or(true, |mut d| d.next().is_none()));
    }
}

#[track_caller]
fn conflict(r: Result<impl std::fmt::Debug, Error>) -> String {
    match r {
        Err(Error::Conflict(m)) => {
            assert!(!m.contains('\n'), "one line: {m}");
            m
        }
        other => panic!("expected a conflict, got {other:?}"),
    }
}

#[test]
fn created_worktree_then_phase_completion_fast_forwards_base() {
    let f = fixture();
    let path = f.wt("one");
    let start = f.main_tip();
    let w = f
        .git
        .prepare_worktree("main", "spice/web-1", &path)
        .unwrap();
    assert_eq!(w.prepared, Prepared::Created { new_branch: true });
    assert!(w.created);
    assert_eq!(w.head, start);
    let tip = commit(&path, "b.txt", "task work\n");
    let m = f.git.complete_phase(&path, "spice/web-1", "main").unwrap();
    assert_eq!(m.kind, MergeKind::FastForward);
    assert!(m.fast_forward());
    assert_eq!(
        (m.previous.as_str(), m.commit.as_str()),
        (start.as_str(), tip.as_str())
    );
    assert_eq!(f.main_tip(), tip);
    // `main` is checked out in the main work tree, which moved with it and stays clean.
    assert_eq!(read(&f.repo, "b.txt"), "task work\n");
    assert!(f.git.is_clean(&f.repo).unwrap());
    // Completing again has nothing to merge.
    let again = f.git.complete_phase(&path, "spice/web-1", "main").unwrap();
    assert_eq!(again.kind, MergeKind::UpToDate);
    assert_eq!(again.commit, tip);
}

#[test]
fn fast_forward_of_a_base_checked_out_nowhere_moves_only_the_ref() {
    let f = fixture();
    sh(&f.repo, &["checkout", "-q", "--detach"]);
    let path = f.wt("one");
    f.git
        .prepare_worktree("main", "spice/web-1", &path)
        .unwrap();
    let tip = commit(&path, "b.txt", "x\n");
    let m = f.git.complete_phase(&path, "spice/web-1", "main").unwrap();
    assert_eq!((m.kind, f.main_tip()), (MergeKind::FastForward, tip));
    assert!(
        !f.repo.join("b.txt").exists(),
        "the detached checkout is not touched"
    );
    let log = sh(
        &f.repo,
        &["reflog", "show", "-1", "--format=%gs", "refs/heads/main"],
    );
    assert!(log.contains("spice/web-1"), "{log}");
}

#[test]
fn diverged_base_gets_a_merge_commit() {
    for method in METHODS {
        let f = fixture().with(method);
        let path = f.wt("one");
        f.git
            .prepare_worktree("main", "spice/web-1", &path)
            .unwrap();
        let tip = commit(&path, "b.txt", "task\n");
        let old = commit(&f.repo, "c.txt", "operator\n");
        let m = f.git.complete_phase(&path, "spice/web-1", "main").unwrap();
        assert_eq!(m.kind, MergeKind::MergeCommit, "{method:?}");
        assert!(!m.fast_forward());
        assert_eq!(f.main_tip(), m.commit);
        let parents = sh(&f.repo, &["rev-list", "--parents", "-n1", &m.commit]);
        assert_eq!(parents, format!("{} {old} {tip}", m.commit));
        let subject = sh(&f.repo, &["log", "-1", "--format=%s", &m.commit]);
        assert_eq!(subject, "Merge branch 'spice/web-1' into main");
        assert_eq!(read(&f.repo, "b.txt"), "task\n");
        assert!(f.git.is_clean(&f.repo).unwrap());
        assert_eq!(
            f.git.head(&path).unwrap(),
            tip,
            "the task worktree is not moved"
        );
        f.assert_no_merge_state(2);
    }
}

#[test]
fn conflicting_change_is_a_conflict_and_changes_nothing() {
    for method in METHODS {
        let f = fixture().with(method);
        let path = f.wt("one");
        f.git
            .prepare_worktree("main", "spice/web-1", &path)
            .unwrap();
        commit(&path, "a.txt", "task version\n");
        let old = commit(&f.repo, "a.txt", "operator version\n");
        let msg = conflict(f.git.complete_phase(&path, "spice/web-1", "main"));
        assert!(
            msg.contains("a.txt") && msg.contains("spice/web-1"),
            "{msg}"
        );
        assert!(msg.contains(&f.git.repo().display().to_string()), "{msg}");
        assert_eq!(f.main_tip(), old, "{method:?}");
        assert_eq!(read(&f.repo, "a.txt"), "operator version\n");
        assert!(f.git.is_clean(&f.repo).unwrap() && f.git.is_clean(&path).unwrap());
        f.assert_no_merge_state(2);
    }
}

#[test]
fn dirty_task_worktree_is_refused() {
    let f = fixture();
    let path = f.wt("one");
    f.git
        .prepare_worktree("main", "spice/web-1", &path)
        .unwrap();
    commit(&path, "b.txt", "committed\n");
    let start = f.main_tip();
    write(&path, "b.txt", "edited\n");
    let msg = conflict(f.git.complete_phase(&path, "spice/web-1", "main"));
    assert!(msg.contains("1 unstaged"), "{msg}");
    sh(&path, &["checkout", "-q", "--", "b.txt"]);
    write(&path, "new.txt", "untracked\n");
    // A user setting that hides untracked files must not hide them from spice.
    sh(&f.repo, &["config", "status.showUntrackedFiles", "no"]);
    let msg = conflict(f.git.complete_phase(&path, "spice/web-1", "main"));
    assert!(msg.contains("1 untracked"), "{msg}");
    assert_eq!(f.main_tip(), start);
    // Ignored files are build output, not work: they do not block.
    std::fs::remove_file(path.join("new.txt")).unwrap();
    write(&path, "target/out.bin", "artefact\n");
    assert!(f.git.is_clean(&path).unwrap());
    f.git.complete_phase(&path, "spice/web-1", "main").unwrap();
}

#[test]
fn existing_worktree_with_local_commits_is_reused_unmoved() {
    let f = fixture();
    let path = f.wt("one");
    f.git
        .prepare_worktree("main", "spice/web-1", &path)
        .unwrap();
    let local = commit(&path, "b.txt", "local\n");
    commit(&f.repo, "c.txt", "base moved\n");
    let w = f
        .git
        .prepare_worktree("main", "spice/web-1", &path)
        .unwrap();
    assert_eq!((w.prepared, w.created), (Prepared::Reused, false));
    assert_eq!(w.head, local);
}

#[test]
fn clean_worktree_behind_base_is_fast_forwarded_and_dirty_one_is_not() {
    let f = fixture();
    let path = f.wt("one");
    let first = f
        .git
        .prepare_worktree("main", "spice/web-1", &path)
        .unwrap();
    let newer = commit(&f.repo, "c.txt", "base moved\n");
    let w = f
        .git
        .prepare_worktree("main", "spice/web-1", &path)
        .unwrap();
    assert_eq!(w.prepared, Prepared::FastForwarded { from: first.head });
    assert_eq!(w.head, newer);
    assert_eq!(read(&path, "c.txt"), "base moved\n");

    commit(&f.repo, "c.txt", "again\n");
    write(&path, "scratch.txt", "agent's notes\n");
    let w = f
        .git
        .prepare_worktree("main", "spice/web-1", &path)
        .unwrap();
    assert_eq!((w.prepared, w.head), (Prepared::Reused, newer));
    assert_eq!(read(&path, "scratch.txt"), "agent's notes\n");
}

#[test]
fn stale_registration_is_recreated_on_the_existing_branch() {
    let f = fixture();
    let path = f.wt("one");
    f.git
        .prepare_worktree("main", "spice/web-1", &path)
        .unwrap();
    let local = commit(&path, "b.txt", "kept on the branch\n");
    std::fs::remove_dir_all(&path).unwrap();
    let w = f
        .git
        .prepare_worktree("main", "spice/web-1", &path)
        .unwrap();
    assert_eq!(w.prepared, Prepared::Created { new_branch: false });
    assert_eq!(w.head, local);
}

#[test]
fn something_in_the_way_is_refused() {
    let f = fixture();
    let path = f.wt("busy");
    write(&path, "precious.txt", "mine\n");
    let msg = conflict(f.git.prepare_worktree("main", "spice/web-1", &path));
    assert!(
        msg.contains("not a worktree of") && msg.contains("spice/web-1"),
        "{msg}"
    );
    assert_eq!(read(&path, "precious.txt"), "mine\n");
    assert_eq!(sh(&f.repo, &["branch", "--list", "spice/*"]), "");

    // A worktree of another repository is just as much in the way.
    let other = f.dir.path().join("other");
    std::fs::create_dir(&other).unwrap();
    sh(&other, &["init", "-q"]);
    conflict(f.git.prepare_worktree("main", "spice/web-1", &other));
    // So are the main work tree and a worktree on another branch.
    conflict(f.git.prepare_worktree("main", "spice/web-1", &f.repo));
    let path = f.wt("two");
    f.git
        .prepare_worktree("main", "spice/web-2", &path)
        .unwrap();
    let msg = conflict(f.git.prepare_worktree("main", "spice/web-3", &path));
    assert!(msg.contains("on spice/web-2"), "{msg}");
    // An empty directory is not in the way.
    let empty = f.wt("empty");
    std::fs::create_dir_all(&empty).unwrap();
    f.git
        .prepare_worktree("main", "spice/web-4", &empty)
        .unwrap();
}

#[test]
fn odd_handles_make_valid_branches() {
    let f = fixture();
    let handles = [
        "web-Bc3dFg5hJ",
        "a b/c..d",
        "@{-1}",
        "x.lock",
        "-lead",
        "ünï cødé",
        "tab\there",
        "~^:?*[\\",
        "",
    ];
    for (i, h) in handles.iter().enumerate() {
        let b = task_branch(h);
        assert!(
            run(&f.repo, &["check-ref-format", "--branch", &b]).0,
            "{h:?} -> {b}"
        );
        assert!(run(&f.repo, &["check-ref-format", &format!("refs/heads/{b}")]).0);
        let w = f
            .git
            .prepare_worktree("main", &b, &f.wt(&i.to_string()))
            .unwrap();
        assert_eq!(w.branch, b);
    }
    let bad = f.git.prepare_worktree("main", "a..b", &f.wt("bad"));
    assert!(matches!(bad, Err(Error::Input(_))), "{bad:?}");
}

#[test]
fn dirty_checkout_of_base_keeps_the_users_changes() {
    for method in METHODS {
        let f = fixture().with(method);
        commit(&f.repo, "notes.txt", "committed notes\n");
        let path = f.wt("one");
        f.git
            .prepare_worktree("main", "spice/web-1", &path)
            .unwrap();
        commit(&path, "a.txt", "task\n");
        // The operator works in the main checkout of `main` meanwhile.
        write(&f.repo, "notes.txt", "unsaved edit\n");
        write(&f.repo, "scratch.txt", "untracked\n");
        commit(&path, "b.txt", "more task\n");
        commit(&f.repo, "c.txt", "operator commit\n");
        let m = f.git.complete_phase(&path, "spice/web-1", "main").unwrap();
        assert_eq!(m.kind, MergeKind::MergeCommit);
        assert_eq!(f.main_tip(), m.commit);
        assert_eq!(read(&f.repo, "a.txt"), "task\n");
        assert_eq!(read(&f.repo, "notes.txt"), "unsaved edit\n");
        assert_eq!(read(&f.repo, "scratch.txt"), "untracked\n");
        let st = f.git.launch_check(&f.repo).unwrap();
        assert_eq!(
            (st.unstaged, st.untracked, st.staged),
            (1, 1, 0),
            "{method:?}"
        );
        f.assert_no_merge_state(2);
    }
}

#[test]
fn dirty_checkout_of_base_in_the_way_is_a_conflict_and_untouched() {
    // (user's edit, file the task commits): a modified tracked file, an untracked file,
    // and an ignored file, each at a path the merge would write.
    let cases = [
        ("a.txt", "a.txt"),
        ("new.txt", "new.txt"),
        ("target/x", "target/x"),
    ];
    for (user_file, task_file) in cases {
        let f = fixture();
        let path = f.wt("one");
        f.git
            .prepare_worktree("main", "spice/web-1", &path)
            .unwrap();
        write(&path, task_file, "task\n");
        sh(&path, &["add", "-f", "--", task_file]);
        sh(&path, &["commit", "-q", "-m", "task"]);
        let start = f.main_tip();
        // The user's configuration must not change what happens: autostash would
        // stash and re-apply the user's edit around the merge.
        sh(&f.repo, &["config", "merge.autoStash", "true"]);
        sh(&f.repo, &["config", "merge.ff", "false"]);
        write(&f.repo, user_file, "the user's unsaved work\n");
        let msg = conflict(f.git.complete_phase(&path, "spice/web-1", "main"));
        assert!(
            msg.contains("checked out at") && msg.contains(user_file),
            "{msg}"
        );
        assert_eq!(f.main_tip(), start, "{user_file}");
        assert_eq!(read(&f.repo, user_file), "the user's unsaved work\n");
        f.assert_no_merge_state(2);
    }
}

#[test]
fn base_being_rebased_is_refused() {
    let f = fixture();
    let path = f.wt("one");
    f.git
        .prepare_worktree("main", "spice/web-1", &path)
        .unwrap();
    commit(&path, "b.txt", "task\n");
    let start = f.main_tip();
    // What an interrupted `git rebase` of main leaves: HEAD detached, state naming main.
    sh(&f.repo, &["checkout", "-q", "--detach"]);
    write(
        &f.repo.join(".git/rebase-merge"),
        "head-name",
        "refs/heads/main\n",
    );
    let msg = conflict(f.git.complete_phase(&path, "spice/web-1", "main"));
    assert!(msg.contains("being rebased"), "{msg}");
    assert_eq!(f.main_tip(), start);
}

#[test]
fn phase_completion_needs_the_task_worktree_on_its_branch() {
    let f = fixture();
    conflict(f.git.complete_phase(&f.repo, "main", "spice/x"));
    conflict(f.git.complete_phase(&f.wt("none"), "spice/web-1", "main"));
    let path = f.wt("one");
    f.git
        .prepare_worktree("main", "spice/web-1", &path)
        .unwrap();
    let msg = conflict(f.git.complete_phase(&path, "spice/web-2", "main"));
    assert!(msg.contains("not spice/web-2"), "{msg}");
    let e = f
        .git
        .complete_phase(&path, "spice/web-1", "nope")
        .unwrap_err();
    assert!(
        matches!(e, Error::Other(ref m) if m.contains("nope")),
        "{e:?}"
    );
}

#[test]
fn launch_check_reports_and_writes_nothing() {
    let f = fixture();
    let path = f.wt("one");
    let w = f
        .git
        .prepare_worktree("main", "spice/web-1", &path)
        .unwrap();
    let st = f.git.launch_check(&path).unwrap();
    assert_eq!(st.branch.as_deref(), Some("spice/web-1"));
    assert_eq!(st.head.as_deref(), Some(w.head.as_str()));
    assert!(st.is_clean());
    write(&path, "a.txt", "changed\n");
    write(&path, "u1.txt", "u\n");
    write(&path, "dir/u2.txt", "u\n");
    write(&path, "c.txt", "staged\n");
    sh(&path, &["add", "c.txt"]);
    // A tracked file whose stat data (an old mtime, so not "racily clean") no longer
    // matches the index: a plain `git status` would write the refreshed index back.
    let touched = Command::new("touch")
        .args(["-m", "-d", "@946684800"])
        .arg(path.join(".gitignore"))
        .status()
        .unwrap();
    assert!(touched.success());
    let index = sh(&path, &["rev-parse", "--git-path", "index"]);
    let before = std::fs::read(path.join(&index)).unwrap();
    let st = f.git.launch_check(&path).unwrap();
    assert_eq!(
        (st.staged, st.unstaged, st.untracked, st.conflicted),
        (1, 1, 2, 0)
    );
    assert!(!f.git.is_clean(&path).unwrap());
    assert_eq!(std::fs::read(path.join(&index)).unwrap(), before);
    assert_eq!(f.git.head(&path).unwrap(), w.head);
}

#[test]
fn remove_worktree_refuses_dirty_unless_forced() {
    let f = fixture();
    let path = f.wt("one");
    f.git
        .prepare_worktree("main", "spice/web-1", &path)
        .unwrap();
    write(&path, "wip.txt", "unsaved\n");
    conflict(f.git.remove_worktree(&path, false));
    assert_eq!(read(&path, "wip.txt"), "unsaved\n");
    f.git.remove_worktree(&path, true).unwrap();
    assert!(!path.exists());
    assert!(
        run(
            &f.repo,
            &["rev-parse", "--verify", "refs/heads/spice/web-1"]
        )
        .0
    );

    let path = f.wt("two");
    f.git
        .prepare_worktree("main", "spice/web-2", &path)
        .unwrap();
    write(&path, "target/build.o", "ignored\n");
    f.git.remove_worktree(&path, false).unwrap();
    assert!(!path.exists());
    conflict(f.git.remove_worktree(&f.repo, true));
    conflict(f.git.remove_worktree(&path, false));
}

#[test]
fn open_refuses_a_directory_inside_a_repository() {
    let f = fixture();
    let sub = f.repo.join("sub");
    std::fs::create_dir(&sub).unwrap();
    let e = Git::open(&sub, Runner::new(env(f.dir.path()))).unwrap_err();
    assert!(
        matches!(e, Error::Other(ref m) if m.contains("not the top")),
        "{e:?}"
    );
}

#[test]
fn inherited_git_variables_do_not_leak() {
    let f = fixture();
    let decoy = f.dir.path().join("decoy");
    std::fs::create_dir(&decoy).unwrap();
    sh(&decoy, &["init", "-q"]);
    let mut vars = env(f.dir.path());
    vars.push(("GIT_DIR".into(), decoy.join(".git").display().to_string()));
    vars.push(("GIT_WORK_TREE".into(), decoy.display().to_string()));
    let git = Git::open(&f.repo, Runner::new(vars)).unwrap();
    let w = git
        .prepare_worktree("main", "spice/web-1", &f.wt("one"))
        .unwrap();
    assert_eq!(w.head, f.main_tip());
}

#[test]
fn missing_git_is_a_clear_error() {
    let f = fixture();
    let runner = Runner::new(env(f.dir.path())).with_program("/nonexistent/git");
    let e = Git::open(&f.repo, runner).unwrap_err();
    assert!(
        matches!(e, Error::Other(ref m) if m.contains("cannot run git")),
        "{e:?}"
    );
}

/// Lanes create worktrees at the same moment; git fails a `worktree add` or `list`
/// that reads another one's half-written metadata unless spice serialises them.
#[test]
fn worktrees_created_concurrently_all_succeed() {
    let f = fixture();
    for round in 0..6 {
        let handles: Vec<_> = (0..12)
            .map(|i| {
                let git = f.git.clone();
                let path = f.wt(&format!("r{round}-{i}"));
                std::thread::spawn(move || {
                    git.prepare_worktree("main", &task_branch(&format!("r{round}-{i}")), &path)
                        .map(|_| ())
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap().unwrap();
        }
    }
    f.assert_no_merge_state(1 + 6 * 12);
}
