//! A task branch's own directories: where git keeps the branch's loose ref and its
//! reflog, the two places a confined agent may write refs (issue #39;
//! [`super::refname`] says why each task has a directory).
//!
//! Invariants: the directories are named from the task's branch, which the
//! supervisor derives from the claim's handle, never from the worktree's HEAD (the
//! agent's to rewrite); each holds a [`KEEP`] file so git's pruning of packed refs
//! never removes a directory a running agent was granted; a legacy branch is renamed
//! only when its new name does not exist yet.

use super::{args, Git, KEEP};
use crate::error::{Error, Result};
use std::path::PathBuf;

impl Git {
    /// The directories of `branch`'s loose ref and reflog (`refs/heads/spice/NAME`,
    /// `logs/refs/heads/spice/NAME` in the common directory), created with their
    /// [`KEEP`] files.
    pub fn task_ref_dirs(&self, branch: &str) -> Result<Vec<PathBuf>> {
        let mut out = Vec::new();
        for dir in self.task_dirs(branch) {
            std::fs::create_dir_all(&dir)
                .and_then(|()| std::fs::write(dir.join(KEEP), ""))
                .map_err(|source| Error::Io {
                    context: format!("failed to create {}", dir.display()),
                    source,
                })?;
            out.push(dir);
        }
        Ok(out)
    }

    /// Removes what [`Git::task_ref_dirs`] made for `branch` once the branch is
    /// deleted (each directory only if nothing else is left in it).
    pub fn forget_task_dirs(&self, branch: &str) {
        for dir in self.task_dirs(branch) {
            let _ = std::fs::remove_file(dir.join(KEEP));
            let _ = std::fs::remove_dir(&dir);
        }
    }

    /// Renames `branch`'s legacy name (`spice/NAME`, before each task had a directory)
    /// to `branch`, when only the legacy one exists: a task claimed before the upgrade
    /// keeps its work and its worktree (git moves the worktree's HEAD with it).
    pub fn upgrade_task_branch(&self, branch: &str) -> Result<()> {
        let Some(legacy) = super::legacy_task_branch(branch) else {
            return Ok(());
        };
        if self.branch_tip(branch)?.is_some() || self.branch_tip(legacy)?.is_none() {
            return Ok(());
        }
        self.check(&self.repo, &args!["branch", "-m", legacy, branch], || {
            format!(
                "cannot rename the task branch {legacy} to {branch} in {}",
                self.repo.display()
            )
        })?;
        tracing::info!("renamed the task branch {legacy} to {branch}");
        Ok(())
    }

    fn task_dirs(&self, branch: &str) -> Vec<PathBuf> {
        let Some(dir) =
            super::legacy_task_branch(branch).filter(|dir| super::task_of_branch(dir).is_some())
        else {
            return Vec::new();
        };
        let common = self.common_dir();
        vec![
            common.join("refs/heads").join(dir),
            common.join("logs/refs/heads").join(dir),
        ]
    }
}

#[cfg(test)]
mod tests {
    use crate::git::testutil::{repo_with_task_worktree, sh as git};
    use crate::git::{task_branch, Git, Runner};

    #[test]
    fn a_legacy_branch_is_renamed_with_its_worktree_and_keeps_its_directory() {
        // A worktree on `spice/t`, the earlier layout's name of task `t`'s branch.
        let (_d, repo, wt) = repo_with_task_worktree();
        let g = Git::open(&repo, Runner::new(std::env::vars_os())).unwrap();
        let branch = task_branch("t");
        g.upgrade_task_branch(&branch).unwrap();
        assert_eq!(git(&wt, &["branch", "--show-current"]), branch);
        g.upgrade_task_branch(&branch).unwrap();
        let dirs = g.task_ref_dirs(&branch).unwrap();
        assert_eq!(dirs.len(), 2);
        git(&repo, &["pack-refs", "--all", "--prune"]);
        assert!(dirs[0].is_dir(), "packing refs keeps the granted directory");
        assert_eq!(
            git(
                &repo,
                &["for-each-ref", "--format=%(refname)", "refs/heads/spice"]
            ),
            format!("refs/heads/{branch}"),
            "the keep file is no ref"
        );
        git(
            &repo,
            &["worktree", "remove", "--force", wt.to_str().unwrap()],
        );
        git(&repo, &["branch", "-D", "-q", &branch]);
        g.forget_task_dirs(&branch);
        assert!(!dirs[0].exists() && !dirs[1].exists());
        assert!(g.task_ref_dirs("main").unwrap().is_empty());
    }
}
