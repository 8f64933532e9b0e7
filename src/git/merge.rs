//! Boundary 2 (phase completion): merging a clean task branch into `base`.
//!
//! Merges into one repository run one at a time, across processes: each holds the
//! repository's merge lock ([`Merging`], `lock`) from before it reads `base` until
//! `base` has moved. The merge is computed away from every checkout, then `base` is
//! moved in one step:
//!
//! - The task worktree must be on the task branch and clean (untracked files count;
//!   ignored ones do not, see `status`). Only commits are merged.
//! - Fast-forward when `base` is an ancestor of the branch; otherwise a merge commit
//!   (`Merge branch '<branch>' into <base>`) computed without any checkout
//!   (`merge_commit`). A conflict leaves no `MERGE_HEAD`, no half-merged files and
//!   `base` untouched, and is reported with the conflicting paths.
//! - Moving `base`: if no worktree has it checked out, `git update-ref` with the old
//!   value (a compare-and-swap, so a move by someone outside spice is noticed and the
//!   merge redone). If a worktree (typically the user's main one) has it checked out,
//!   its ref cannot move without its files, so that checkout is fast-forwarded in
//!   place, all or nothing (`checkout`): uncommitted changes the merge does not touch
//!   are kept byte for byte, and if it would touch any (modified, untracked or ignored
//!   files in the way), or another git process holds the index, nothing at all
//!   changes and the caller gets a one-line conflict naming them. Never a stash, never
//!   a checkout of `base` anywhere else, never a half-merged tree.
//! - A `base` being rebased in some worktree is refused; nothing is ever pushed here.

use super::{args, canonical, Git, Merging};
use crate::error::{Error, Result};
use serde::Serialize;
use std::path::Path;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum MergeKind {
    /// The branch had nothing `base` lacked; nothing moved.
    UpToDate,
    /// `base` moved to the branch's tip.
    FastForward,
    /// `base` moved to a new merge commit of its old tip and the branch's.
    MergeCommit,
}

/// What [`Git::complete_phase`] did to `base`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Merge {
    pub base: String,
    pub branch: String,
    /// `base` before the merge.
    pub previous: String,
    /// `base` after the merge: the merged commit.
    pub commit: String,
    pub kind: MergeKind,
}

impl Merge {
    pub fn fast_forward(&self) -> bool {
        self.kind == MergeKind::FastForward
    }
}

/// Tries before giving up when `base` keeps moving under concurrent merges.
const ATTEMPTS: usize = 5;

impl Git {
    /// Pushes `branch` to `remote` (a lane's `push`, after a merge at phase completion).
    pub fn push(&self, remote: &str, branch: &str) -> Result<()> {
        self.check_branch_name(branch)?;
        if remote.is_empty() || remote.starts_with('-') {
            return Err(Error::input(format!("{remote:?} is not a remote name")));
        }
        self.check(
            &self.repo,
            &args!["push", "--quiet", remote, branch],
            || format!("failed to push {branch} to {remote}"),
        )?;
        Ok(())
    }

    /// Boundary 2: merges `branch`, checked out clean in `worktree`, into the local
    /// branch `base` (see the module doc for how), waiting for the merge lock. The
    /// task worktree is not moved.
    pub fn complete_phase(&self, worktree: &Path, branch: &str, base: &str) -> Result<Merge> {
        self.lock_merges()?.complete_phase(worktree, branch, base)
    }
}

impl Merging<'_> {
    /// [`Git::complete_phase`] under a merge lock the caller already holds (so that
    /// it can check and record things around the merge with nothing else merging).
    pub fn complete_phase(&self, worktree: &Path, branch: &str, base: &str) -> Result<Merge> {
        self.git.merge(worktree, branch, base)
    }
}

impl Git {
    fn merge(&self, worktree: &Path, branch: &str, base: &str) -> Result<Merge> {
        self.check_branch_name(branch)?;
        self.check_branch_name(base)?;
        if branch == base {
            return Err(Error::input(format!("cannot merge {branch} into itself")));
        }
        let path = canonical(&self.repo, worktree);
        let list = self.worktrees()?;
        let entry = list.iter().skip(1).find(|e| e.path == path && !e.prunable);
        match entry.map(|e| e.branch.as_deref()) {
            Some(Some(b)) if b == branch => {}
            Some(on) => {
                return Err(Error::conflict(format!(
                    "worktree {} is on {}, not {branch}; nothing was merged into {base}",
                    path.display(),
                    on.unwrap_or("a detached HEAD")
                )))
            }
            None => {
                return Err(Error::conflict(format!(
                    "{} is not a task worktree of {}; nothing was merged into {base}",
                    path.display(),
                    self.repo.display()
                )))
            }
        }
        self.require_clean(&path, "completing the phase")?;
        let tip = self.branch_tip(branch)?.ok_or_else(|| {
            Error::Other(format!(
                "branch {branch} vanished from {}",
                self.repo.display()
            ))
        })?;
        for _ in 0..ATTEMPTS {
            let old = self.branch_tip(base)?.ok_or_else(|| {
                Error::Other(format!(
                    "base branch {base} does not exist in {}",
                    self.repo.display()
                ))
            })?;
            let done = |commit: String, kind| Merge {
                base: base.to_string(),
                branch: branch.to_string(),
                previous: old.clone(),
                commit,
                kind,
            };
            if self.is_ancestor(&tip, &old)? {
                return Ok(done(old.clone(), MergeKind::UpToDate));
            }
            let (commit, kind) = if self.is_ancestor(&old, &tip)? {
                (tip.clone(), MergeKind::FastForward)
            } else {
                let c = self.merge_commit(base, &old, branch, &tip)?;
                (c, MergeKind::MergeCommit)
            };
            if self.move_base(base, &old, &commit, branch)? {
                return Ok(done(commit, kind));
            }
        }
        Err(Error::conflict(format!(
            "base {base} kept moving while merging {branch} in {}; try again",
            self.repo.display()
        )))
    }

    /// Moves `base` from `old` to `new` (a descendant). `Ok(false)` means `base` was
    /// no longer at `old`, so the caller recomputes the merge.
    fn move_base(&self, base: &str, old: &str, new: &str, branch: &str) -> Result<bool> {
        self.refuse_if_rebasing(base, branch)?;
        let full = format!("refs/heads/{base}");
        let holder = self
            .worktrees()?
            .into_iter()
            .find(|e| e.branch.as_deref() == Some(base) && !e.prunable);
        let moved_away = || Ok::<_, Error>(self.branch_tip(base)?.as_deref() != Some(old));
        let Some(w) = holder else {
            let msg = format!("spice: merge {branch}");
            let out = self.run(
                &self.repo,
                &args!["update-ref", "-m", &msg, &full, new, old],
            )?;
            if out.ok() {
                return Ok(true);
            }
            if moved_away()? {
                return Ok(false);
            }
            return Err(Error::Other(format!(
                "cannot move {base} to the merge of {branch} in {}: {}",
                self.repo.display(),
                out.first_line()
            )));
        };
        self.fast_forward_checkout(&w.path, base, old, new, branch)
    }

    /// A rebase of `base` in any worktree would rewrite it from a stale start, so its
    /// ref must not move under it.
    fn refuse_if_rebasing(&self, base: &str, branch: &str) -> Result<()> {
        let full = format!("refs/heads/{base}");
        let mut gitdirs = vec![self.common_dir.clone()];
        if let Ok(rd) = std::fs::read_dir(self.common_dir.join("worktrees")) {
            gitdirs.extend(rd.flatten().map(|d| d.path()));
        }
        for dir in gitdirs {
            for state in ["rebase-merge", "rebase-apply"] {
                let name = std::fs::read_to_string(dir.join(state).join("head-name"));
                if name.is_ok_and(|n| n.trim() == full) {
                    return Err(Error::conflict(format!(
                        "cannot merge {branch} into {base}: {base} is being rebased \
                         (state in {}); finish or abort the rebase first",
                        dir.display()
                    )));
                }
            }
        }
        Ok(())
    }
}
