//! Passing a task's branch from one lane's worktree to another's (a `review` lane
//! taking the task a `todo` lane finished): git lets a branch be checked out in one
//! worktree only, so the earlier worktree must let go of it first.
//!
//! Invariants:
//! - The main work tree (the operator's checkout) is never touched: a branch checked
//!   out there is reported, and the caller refuses with that reason.
//! - Nothing uncommitted is lost. A clean worktree is removed (its branch holds every
//!   commit); a dirty one first has all of its changes, untracked files included,
//!   saved as a commit under `refs/spice/saved/…` (through a scratch index, so the
//!   worktree's own index and files are untouched), and is then only detached, its
//!   files left where they were.
//! - Deciding whether the worktree is still in use (an agent running in it) is the
//!   caller's: this module only moves git.

use super::{args, canonical, Git};
use crate::error::{Error, Result};
use serde::Serialize;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};

/// Where a branch is checked out, other than the place asked about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BranchHolder {
    pub path: PathBuf,
    /// The repository's main work tree (never freed by spice).
    pub main: bool,
}

/// What [`Git::free_branch`] did with the worktree that held the branch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "action", rename_all = "kebab-case")]
pub enum Freed {
    /// It was clean: removed (the branch keeps every commit).
    Removed { path: PathBuf },
    /// It had uncommitted work: saved as `saved` (a ref), then detached in place.
    Detached { path: PathBuf, saved: String },
}

impl Git {
    /// The worktree other than `except` that has `branch` checked out, if any.
    pub fn branch_holder(&self, branch: &str, except: &Path) -> Result<Option<BranchHolder>> {
        let except = canonical(&self.repo, except);
        let list = self.worktrees()?;
        Ok(list
            .iter()
            .enumerate()
            .find(|(_, e)| e.branch.as_deref() == Some(branch) && e.path != except && !e.prunable)
            .map(|(i, e)| BranchHolder {
                path: e.path.clone(),
                main: i == 0,
            }))
    }

    /// Makes `branch` free to check out elsewhere by letting go of it in the task
    /// worktree `at` (see the module invariants). `tag` names the saved ref.
    pub fn free_branch(&self, branch: &str, at: &Path, tag: &str) -> Result<Freed> {
        self.check_branch_name(branch)?;
        let (path, list, i) = self.find_worktree(at)?;
        if i == 0 {
            return Err(Error::conflict(format!(
                "{branch} is checked out in the main work tree {}; switch it to another \
                 branch so a lane can take it",
                path.display()
            )));
        }
        if list[i].branch.as_deref() != Some(branch) {
            return Err(Error::conflict(format!(
                "worktree {} is not on {branch}",
                path.display()
            )));
        }
        if self.is_clean(&path)? {
            self.remove_worktree(&path, false)?;
            return Ok(Freed::Removed { path });
        }
        let saved = self.save_uncommitted(&path, branch, tag)?;
        self.check(&path, &args!["checkout", "--quiet", "--detach"], || {
            format!("cannot detach worktree {} from {branch}", path.display())
        })?;
        Ok(Freed::Detached { path, saved })
    }

    /// Records every change in `path` (tracked and untracked, not ignored) as a
    /// commit on top of its HEAD under `refs/spice/saved/<branch>/<tag>`, through a
    /// scratch index so the worktree's own index is not touched.
    fn save_uncommitted(&self, path: &Path, branch: &str, tag: &str) -> Result<String> {
        let scratch = tempfile_path(&self.common_dir, tag);
        let run = |a: &[&OsStr], what: &str| -> Result<String> {
            self.run_indexed(path, &scratch, a, || {
                format!(
                    "cannot save the uncommitted work in {} ({what})",
                    path.display()
                )
            })
        };
        let result = (|| {
            run(&args!["read-tree", "HEAD"], "read-tree")?;
            run(&args!["add", "--all", "."], "add")?;
            let msg = format!("spice: uncommitted work in {} on {branch}", path.display());
            self.save_index(&run, branch, tag, &msg)
        })();
        let _ = std::fs::remove_file(&scratch);
        result
    }
}

impl Git {
    /// Writes the scratch index that `run` runs with as a commit on HEAD saying `msg`,
    /// under `refs/spice/saved/<branch>/<tag>`; the ref's name.
    pub(super) fn save_index(
        &self,
        run: &dyn Fn(&[&OsStr], &str) -> Result<String>,
        branch: &str,
        tag: &str,
        msg: &str,
    ) -> Result<String> {
        let name = format!("refs/spice/saved/{branch}/{tag}");
        self.save_index_as(run, &name, &[], msg)?;
        Ok(name)
    }

    /// Writes the scratch index that `run` runs with as a commit on HEAD (and on
    /// each of `parents`) saying `msg`, under the ref `name`; the commit.
    pub(super) fn save_index_as(
        &self,
        run: &dyn Fn(&[&OsStr], &str) -> Result<String>,
        name: &str,
        parents: &[&str],
        msg: &str,
    ) -> Result<String> {
        let tree = run(&args!["write-tree"], "write-tree")?;
        let mut a: Vec<&OsStr> = args!["commit-tree", &tree, "-p", "HEAD"].to_vec();
        for p in parents {
            a.push(OsStr::new("-p"));
            a.push(OsStr::new(p));
        }
        a.extend(args!["-m", msg]);
        let commit = run(&a, "commit-tree")?;
        run(&args!["update-ref", name, &commit], "update-ref")?;
        Ok(commit)
    }

    /// Runs git in `path` with `index` as its index (a scratch one, so the worktree's
    /// own is untouched); its trimmed stdout, or `failing()` with git's complaint.
    pub(super) fn run_indexed(
        &self,
        path: &Path,
        index: &Path,
        a: &[&OsStr],
        failing: impl FnOnce() -> String,
    ) -> Result<String> {
        let env = [("GIT_INDEX_FILE", index.as_os_str())];
        let out = self
            .runner
            .run_with(path, a, &env)
            .map_err(|e| Error::Other(format!("cannot run git in {}: {e}", path.display())))?;
        if out.ok() {
            Ok(out.stdout.trim().to_string())
        } else {
            Err(Error::Other(format!("{}: {}", failing(), out.first_line())))
        }
    }
}

fn tempfile_path(common_dir: &Path, tag: &str) -> PathBuf {
    let safe: String = tag
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    common_dir.join(format!("spice-save-{safe}-{}.index", std::process::id()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::git::testutil::{repo_with_task_worktree, sh as git};
    use crate::git::Runner;

    /// A repository on `main` with a task worktree at `wt` on `spice/t`.
    fn setup() -> (tempfile::TempDir, Git, PathBuf) {
        let (dir, repo, wt) = repo_with_task_worktree();
        let g = Git::open(&repo, Runner::new(std::env::vars_os())).unwrap();
        (dir, g, wt)
    }

    #[test]
    fn a_clean_worktree_is_removed_and_its_branch_is_free() {
        let (_d, g, wt) = setup();
        let holder = g.branch_holder("spice/t", Path::new("/elsewhere")).unwrap();
        assert_eq!(holder.map(|h| h.main), Some(false));
        let freed = g.free_branch("spice/t", &wt, "s1").unwrap();
        assert!(matches!(freed, Freed::Removed { .. }), "{freed:?}");
        assert!(!wt.exists());
        assert_eq!(g.branch_holder("spice/t", Path::new("/x")).unwrap(), None);
    }

    #[test]
    fn a_dirty_worktree_is_saved_to_a_ref_then_detached_with_its_files_kept() {
        let (_d, g, wt) = setup();
        std::fs::write(wt.join("a.txt"), "changed\n").unwrap();
        std::fs::write(wt.join("new.txt"), "untracked\n").unwrap();
        git(&wt, &["add", "a.txt"]);
        let index_before = git(&wt, &["diff", "--cached", "--name-only"]);
        let freed = g.free_branch("spice/t", &wt, "s2").unwrap();
        let Freed::Detached { saved, .. } = freed else {
            panic!("{freed:?}")
        };
        assert_eq!(saved, "refs/spice/saved/spice/t/s2");
        // Every change is in the saved commit, untracked files too ...
        assert_eq!(git(&wt, &["show", &format!("{saved}:a.txt")]), "changed");
        assert_eq!(
            git(&wt, &["show", &format!("{saved}:new.txt")]),
            "untracked"
        );
        // ... and the worktree is as it was, only detached.
        assert_eq!(
            std::fs::read_to_string(wt.join("a.txt")).unwrap(),
            "changed\n"
        );
        assert_eq!(
            std::fs::read_to_string(wt.join("new.txt")).unwrap(),
            "untracked\n"
        );
        assert_eq!(git(&wt, &["diff", "--cached", "--name-only"]), index_before);
        assert!(git(&wt, &["status", "--porcelain", "-b"]).starts_with("## HEAD (no branch)"));
        assert_eq!(g.branch_holder("spice/t", Path::new("/x")).unwrap(), None);
    }

    #[test]
    fn the_main_work_tree_is_never_freed() {
        let (d, g, _wt) = setup();
        let repo = d.path().join("repo");
        git(&repo, &["checkout", "-q", "-b", "spice/u"]);
        let holder = g
            .branch_holder("spice/u", Path::new("/x"))
            .unwrap()
            .unwrap();
        assert!(holder.main);
        let err = g
            .free_branch("spice/u", &repo, "s3")
            .unwrap_err()
            .to_string();
        assert!(err.contains("main work tree"), "{err}");
        assert_eq!(git(&repo, &["branch", "--show-current"]), "spice/u");
    }
}
