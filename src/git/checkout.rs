//! Moving a `base` that a worktree has checked out (usually the operator's main work
//! tree), all or nothing: the checkout ends clean at the new commit with HEAD, index
//! and files moved together, or it is left as it was and the merge is refused.
//!
//! The ref cannot move without the files, so the checkout is fast-forwarded in place
//! with `git merge --ff-only --no-autostash --no-overwrite-ignore`. Git takes the
//! checkout's `index.lock` before anything else and checks every path before writing
//! any, so its refusals (the user's modified, untracked or ignored files in the way,
//! another git process holding the index, HEAD moved meanwhile) change nothing; the
//! caller gets one line naming the files or the lock, and may retry. The merge lock
//! (`lock`) keeps spice's own merges from interleaving in one checkout. What else
//! could leave the checkout half-updated is dealt with here:
//!
//! - git runs shielded (`Runner::run_shielded`): in a process group of its own and
//!   with TERM, INT, HUP and QUIT blocked, so stopping an agent while it completes a
//!   phase (TERM to its group from the lane, TERM to each process of its tree from
//!   its shim, seconds before any KILL) ends spice but not the update;
//! - before git starts, a record of the update (`checkout_record`:
//!   `spice-fast-forward.json` in the checkout's git directory, with from, to, and the
//!   status of every path the update touches) is written, and it is removed once HEAD has moved, or once the status
//!   is seen unchanged. A failure that did change files (git killed by pid, a disk
//!   error midway) leaves the record, and every later merge into that checkout is
//!   refused, naming the changed paths, until they are as recorded again or HEAD has
//!   moved on (the user restored or committed them). spice never repairs the tree
//!   itself: the files in question may hold the user's work by then.
//! - "nothing changed" is checked, not assumed: after git fails, HEAD and the status
//!   of the touched paths are compared with the record before the caller is told so,
//!   unless git's own message is one of its checks before writing (the lock, files in
//!   the way), which is trusted, since the user may be editing those files meanwhile.

use super::checkout_record::{
    entry_paths, read_record, remove_record, write_record, Record, RECORD,
};
use super::merge_commit::list_paths;
use super::{args, Git};
use crate::error::{Error, Result};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

impl Git {
    /// Fast-forwards `base`, checked out at `wt`, from `old` to `new`, or changes
    /// nothing and refuses. `Ok(false)`: the checkout was no longer at `old`, so the
    /// caller recomputes the merge.
    pub(super) fn fast_forward_checkout(
        &self,
        wt: &Path,
        base: &str,
        old: &str,
        new: &str,
        branch: &str,
    ) -> Result<bool> {
        let record_path = self.git_dir(wt)?.join(RECORD);
        self.settle_record(wt, &record_path, branch)?;
        // Re-read the holder's HEAD just before moving it: if the user switched
        // branches since the listing, its new branch must not be fast-forwarded.
        let sym = self.run(wt, &args!["symbolic-ref", "--quiet", "HEAD"])?;
        if sym.stdout.trim() != format!("refs/heads/{base}") || self.head(wt)? != old {
            return Ok(false);
        }
        let touched = self.touched(old, new)?;
        let record = Record {
            base: base.to_string(),
            from: old.to_string(),
            to: new.to_string(),
            before: self.status_of(wt, &touched)?,
        };
        write_record(&record_path, &record)?;
        let out = self.run_shielded(wt, &super::fast_forward_args(new))?;
        let head = self.head(wt)?;
        if out.ok() || head == new {
            remove_record(&record_path)?;
            return Ok(true);
        }
        if head != old {
            // Someone else moved HEAD; git moves it last and only from `old`, so this
            // update did not happen.
            remove_record(&record_path)?;
            return Ok(false);
        }
        if !refused_before_writing(&out) {
            let now = self.status_of(wt, &touched)?;
            if now != record.before {
                let why = out.first_line();
                return Err(half_updated(branch, wt, &record_path, &record, &now, &why));
            }
        }
        remove_record(&record_path)?;
        if self.branch_tip(base)?.as_deref() != Some(old) {
            return Ok(false);
        }
        Err(refusal(branch, base, wt, &record_path, &out))
    }

    /// Clears the record of an earlier update that finished or changed nothing, and
    /// refuses while one left the checkout half-updated.
    fn settle_record(&self, wt: &Path, record_path: &Path, branch: &str) -> Result<()> {
        let Some(record) = read_record(record_path)? else {
            return Ok(());
        };
        let lock = record_path.with_file_name("index.lock");
        if self.head(wt)? == record.from {
            let now = self.status_of(wt, &self.touched(&record.from, &record.to)?)?;
            if now != record.before || lock.exists() {
                let why = match lock.exists() {
                    true => format!("{} is still there", lock.display()),
                    false => "it was interrupted".to_string(),
                };
                return Err(half_updated(branch, wt, record_path, &record, &now, &why));
            }
        }
        remove_record(record_path)
    }

    /// The git directory of the worktree at `wt` (the common one for the main tree).
    fn git_dir(&self, wt: &Path) -> Result<PathBuf> {
        let out = self.check(wt, &args!["rev-parse", "--absolute-git-dir"], || {
            format!("cannot find the git directory of {}", wt.display())
        })?;
        Ok(PathBuf::from(out.stdout.trim()))
    }
}

/// Git refused and nothing changed: what was in the way, on one line.
fn refusal(branch: &str, base: &str, wt: &Path, record_path: &Path, out: &super::Output) -> Error {
    let lock = record_path.with_file_name("index.lock");
    if out.stderr.contains("index.lock") && out.stderr.contains("File exists") {
        return Error::conflict(format!(
            "cannot merge {branch} into {base}: {base} is checked out at {} and another git \
             process is using its index ({} exists; remove it if no git is running there); \
             nothing was merged, retry when it is done",
            wt.display(),
            lock.display()
        ));
    }
    let why = out.first_line();
    let why = why
        .strip_prefix("error: ")
        .or_else(|| why.strip_prefix("fatal: "))
        .unwrap_or(&why)
        .trim_end_matches(':');
    let paths = indented_paths(&out.stderr);
    let named = if paths.is_empty() {
        String::new()
    } else {
        format!(": {}", list_paths(&paths))
    };
    Error::conflict(format!(
        "cannot merge {branch} into {base}: {base} is checked out at {} and git refused to \
         update it ({why}{named}); nothing was merged, retry once they are committed or moved",
        wt.display()
    ))
}

/// Whether git's own message says it refused before writing anything (it checks
/// the lock and every path first). Trusted over a status comparison, since the user
/// may be changing those very files, or the index, at the same moment.
fn refused_before_writing(out: &super::Output) -> bool {
    const BEFORE: [&str; 5] = [
        "index.lock",
        "would be overwritten",
        "would be removed",
        "Not possible to fast-forward",
        "not uptodate",
    ];
    out.code.is_some() && BEFORE.iter().any(|m| out.stderr.contains(m))
}

/// The checkout changed although HEAD did not move: say which paths, and keep the
/// record so later merges refuse too.
fn half_updated(
    branch: &str,
    wt: &Path,
    record_path: &Path,
    record: &Record,
    now: &[String],
    why: &str,
) -> Error {
    let changed: BTreeSet<&str> = record
        .before
        .iter()
        .filter(|e| !now.contains(e))
        .chain(now.iter().filter(|e| !record.before.contains(e)))
        .flat_map(|e| entry_paths(e))
        .collect();
    let changed: Vec<String> = changed.into_iter().map(String::from).collect();
    let paths = match changed.is_empty() {
        true => "its index".to_string(),
        false => list_paths(&changed),
    };
    Error::conflict(format!(
        "cannot merge {branch} into {base}: an update of {base} checked out at {wt} from {} \
         to {} did not finish ({why}) and left {paths} changed with HEAD unmoved; check them \
         (`git -C {wt} status`), restore or commit them, then retry (or remove {} once the \
         checkout is as you want it); nothing was merged",
        short(&record.from),
        short(&record.to),
        record_path.display(),
        base = record.base,
        wt = wt.display(),
    ))
}

fn short(id: &str) -> &str {
    &id[..id.len().min(12)]
}

/// The tab-indented paths git lists under "would be overwritten by merge".
fn indented_paths(stderr: &str) -> Vec<String> {
    stderr
        .lines()
        .filter_map(|l| l.strip_prefix('\t'))
        .map(|l| l.trim().to_string())
        .filter(|l| !l.is_empty())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::git::testutil::{repo_with_task_worktree, sh};

    #[test]
    fn overwritten_paths_are_read_from_stderr() {
        let err = "error: Your local changes to the following files would be overwritten by merge:\n\
                   \tb.txt\n\tdir/c d.txt\nPlease commit your changes or stash them before you merge.\nAborting\n";
        assert_eq!(indented_paths(err), ["b.txt", "dir/c d.txt"]);
    }

    #[test]
    fn a_half_update_names_what_changed_on_one_line() {
        let record = Record {
            base: "main".into(),
            from: "1".repeat(40),
            to: "2".repeat(40),
            before: vec!["1 .M N... 100644 100644 100644 aaa aaa kept.txt".into()],
        };
        let now = vec![
            "1 .M N... 100644 100644 100644 aaa aaa kept.txt".to_string(),
            "1 .M N... 100644 100644 100644 bbb bbb half.txt".to_string(),
            "? new/".to_string(),
        ];
        let record_path = Path::new("/repo/.git").join(RECORD);
        let msg = half_updated(
            "spice/x",
            Path::new("/repo"),
            &record_path,
            &record,
            &now,
            "killed",
        )
        .to_string();
        assert!(!msg.contains('\n'), "{msg}");
        assert!(msg.contains("half.txt, new/ changed"), "{msg}");
        assert!(!msg.contains("kept.txt"), "{msg}");
        assert!(msg.contains("from 111111111111 to 222222222222"), "{msg}");
    }

    /// A repository whose `main` is checked out in its main work tree, and a task
    /// worktree on `spice/t` one commit ahead (editing `a.txt`, adding `new.txt`).
    struct Fixture {
        _dir: tempfile::TempDir,
        repo: PathBuf,
        wt: PathBuf,
        runner: super::super::Runner,
    }

    fn fixture() -> Fixture {
        let (dir, repo, wt) = repo_with_task_worktree();
        std::fs::write(wt.join("a.txt"), "two\n").unwrap();
        std::fs::write(wt.join("new.txt"), "new\n").unwrap();
        sh(&wt, &["add", "a.txt", "new.txt"]);
        sh(&wt, &["commit", "-q", "-m", "task"]);
        let runner = super::super::Runner::new([
            ("PATH", std::env::var("PATH").unwrap_or_default()),
            ("HOME", dir.path().display().to_string()),
        ]);
        Fixture {
            _dir: dir,
            repo,
            wt,
            runner,
        }
    }

    impl Fixture {
        fn git(&self) -> Git {
            Git::open(&self.repo, self.runner.clone()).unwrap()
        }
        /// HEAD, the index and the status of the operator's checkout.
        fn state(&self) -> (String, String, String) {
            (
                sh(&self.repo, &["rev-parse", "HEAD"]),
                sh(&self.repo, &["ls-files", "-s"]),
                sh(
                    &self.repo,
                    &["--no-optional-locks", "status", "--porcelain", "-uall"],
                ),
            )
        }
        fn record(&self) -> PathBuf {
            self.repo.join(".git").join(RECORD)
        }
    }

    #[track_caller]
    fn conflict(r: Result<super::super::Merge>, needle: &str) -> String {
        match r {
            Err(Error::Conflict(m)) => {
                assert!(!m.contains('\n') && m.contains(needle), "{m}");
                m
            }
            other => panic!("expected a conflict naming {needle}, got {other:?}"),
        }
    }

    #[test]
    fn an_index_held_by_another_git_refuses_and_changes_nothing() {
        let f = fixture();
        let lock = f.repo.join(".git/index.lock");
        std::fs::write(&lock, "").unwrap();
        let before = f.state();
        let msg = conflict(
            f.git().complete_phase(&f.wt, "spice/t", "main"),
            "index.lock",
        );
        assert!(msg.contains("retry"), "{msg}");
        assert!(lock.exists(), "another process's lock is never removed");
        std::fs::remove_file(&lock).unwrap();
        assert_eq!(f.state(), before);
        assert!(!f.record().exists());
        let m = f.git().complete_phase(&f.wt, "spice/t", "main").unwrap();
        assert_eq!(f.state().0, m.commit);
        assert_eq!(f.state().2, "", "the checkout ends clean");
    }

    #[test]
    fn files_in_the_way_refuse_and_leave_no_record() {
        let f = fixture();
        std::fs::write(f.repo.join("new.txt"), "the operator's\n").unwrap();
        let before = f.state();
        conflict(f.git().complete_phase(&f.wt, "spice/t", "main"), "new.txt");
        assert_eq!(f.state(), before);
        assert!(!f.record().exists());
    }

    /// A git killed after writing some files (by pid, which its own process group does
    /// not prevent): the merge is refused naming them, and so is every later one until
    /// the operator restores them.
    #[test]
    fn an_update_cut_off_midway_is_reported_and_blocks_merges_until_restored() {
        let f = fixture();
        let fake = f._dir.path().join("git-killed-midway");
        std::fs::write(
            &fake,
            "#!/bin/sh\nif [ \"$1\" = merge ] && [ \"$2\" = --ff-only ]; then\n  \
             echo new > new.txt; kill -9 $$\nfi\nexec git \"$@\"\n",
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
        let start = f.state().0;
        let killed = Git::open(&f.repo, f.runner.clone().with_program(&fake)).unwrap();
        let msg = conflict(
            killed.complete_phase(&f.wt, "spice/t", "main"),
            "did not finish",
        );
        assert!(msg.contains("new.txt changed"), "{msg}");
        assert!(f.record().exists());
        assert_eq!(f.state().0, start, "HEAD unmoved");
        // The real git later: still refused, nothing touched.
        let before = f.state();
        conflict(
            f.git().complete_phase(&f.wt, "spice/t", "main"),
            "new.txt changed",
        );
        assert_eq!(f.state(), before);
        // The operator removes the half-written file: the next merge lands.
        std::fs::remove_file(f.repo.join("new.txt")).unwrap();
        let m = f.git().complete_phase(&f.wt, "spice/t", "main").unwrap();
        assert_eq!(f.state().0, m.commit);
        assert_eq!(f.state().2, "");
        assert!(!f.record().exists());
    }

    /// spice killed while its git went on and finished: the record is stale, not a block.
    #[test]
    fn a_record_of_an_update_that_finished_is_cleared() {
        let f = fixture();
        let old = f.state().0;
        let new = sh(&f.wt, &["rev-parse", "HEAD"]);
        let git = f.git();
        let touched = git.touched(&old, &new).unwrap();
        let record = Record {
            base: "main".into(),
            from: old.clone(),
            to: new.clone(),
            before: git.status_of(&f.repo, &touched).unwrap(),
        };
        write_record(&f.record(), &record).unwrap();
        sh(&f.repo, &["merge", "-q", "--ff-only", &new]);
        sh(&f.wt, &["commit", "-q", "--allow-empty", "-m", "more"]);
        let m = git.complete_phase(&f.wt, "spice/t", "main").unwrap();
        assert_eq!(m.previous, new);
        assert!(!f.record().exists());
        assert_eq!(f.state().2, "");
    }
}
