//! Boundary 1 (claim): a task's worktree on its branch, and its removal when done.
//!
//! Invariants:
//! - A worktree is created only where nothing is (or an empty directory is); a
//!   directory in the way that is not a worktree of this repository is refused, never
//!   adopted or cleared. The repository's main work tree is never a task worktree.
//! - An existing worktree (a successor session, a restart) is reused as it is. It
//!   moves only when it is clean and strictly behind `base`, and then only by a
//!   fast-forward that refuses to overwrite even ignored files. A worktree with local
//!   commits, a diverged branch or uncommitted changes stays exactly where it was.
//! - A worktree on another branch, or detached, is refused rather than switched.
//! - Removal refuses a dirty worktree unless the caller forces it; the branch is kept.

use super::{args, canonical, Git};
use crate::error::{Error, Result};
use serde::Serialize;
use std::path::{Path, PathBuf};

/// What [`Git::prepare_worktree`] did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "action", rename_all = "kebab-case")]
pub enum Prepared {
    /// A new worktree; `new_branch` when its branch was also created, from `base`.
    Created { new_branch: bool },
    /// The existing worktree (or branch) was left exactly where it was.
    Reused,
    /// The branch was clean and strictly behind `base`, and was fast-forwarded to it
    /// from `from`. [`Worktree::created`] tells whether the worktree was new.
    FastForwarded { from: String },
}

/// A task's worktree, ready for an agent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Worktree {
    pub path: PathBuf,
    pub branch: String,
    /// HEAD after preparation.
    pub head: String,
    /// The worktree directory was made by this call.
    pub created: bool,
    pub prepared: Prepared,
}

/// One entry of `git worktree list --porcelain`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Entry {
    pub path: PathBuf,
    /// Short branch name; `None` when detached or bare (nothing checked out).
    pub branch: Option<String>,
    /// Registered, but its directory (or its link back) is gone.
    pub prunable: bool,
}

impl Git {
    /// The worktrees of this repository, the main one first, paths canonical.
    pub(super) fn worktrees(&self) -> Result<Vec<Entry>> {
        let out = self.check(
            &self.repo,
            &args!["worktree", "list", "--porcelain"],
            || format!("cannot list the worktrees of {}", self.repo.display()),
        )?;
        let mut list = parse_list(&out.stdout);
        for e in &mut list {
            e.path = canonical(&self.repo, &e.path);
        }
        Ok(list)
    }

    /// The worktree at `path` (made canonical): the path, every worktree, and its
    /// place among them (0: the main work tree); one that is none is a conflict.
    pub(super) fn find_worktree(&self, path: &Path) -> Result<(PathBuf, Vec<Entry>, usize)> {
        let path = canonical(&self.repo, path);
        let list = self.worktrees()?;
        match list.iter().position(|e| e.path == path) {
            Some(i) => Ok((path, list, i)),
            None => Err(Error::conflict(format!(
                "{} is not a worktree of {}",
                path.display(),
                self.repo.display()
            ))),
        }
    }

    /// Boundary 1: makes `path` a worktree on `branch`, creating the branch from
    /// `base` if it does not exist, or reuses the worktree already there (see the
    /// module invariants). Relative paths are taken from the repository.
    pub fn prepare_worktree(&self, base: &str, branch: &str, path: &Path) -> Result<Worktree> {
        self.check_branch_name(branch)?;
        if branch == base {
            return Err(Error::input(format!(
                "task branch {branch} cannot be its own base"
            )));
        }
        let base_tip = self.branch_tip(base)?.ok_or_else(|| {
            Error::Other(format!(
                "base branch {base} does not exist in {}",
                self.repo.display()
            ))
        })?;
        let path = canonical(&self.repo, path);
        let list = self.worktrees()?;
        if let Some(i) = list.iter().position(|e| e.path == path) {
            let e = &list[i];
            if i == 0 {
                return Err(Error::conflict(format!(
                    "{} is the main work tree of {}, not a task worktree",
                    path.display(),
                    self.repo.display()
                )));
            }
            if !e.prunable {
                if e.branch.as_deref() != Some(branch) {
                    let on = e.branch.as_deref().unwrap_or("a detached HEAD");
                    return Err(Error::conflict(format!(
                        "worktree {} of {} is on {on}, not {branch}; refusing to switch it",
                        path.display(),
                        self.repo.display()
                    )));
                }
                return self.settle(base, &base_tip, branch, path, false, Prepared::Reused);
            }
            // Registered but its directory is gone: whatever it held is already lost,
            // and the stale registration would block re-creating it.
            self.check(&self.repo, &args!["worktree", "remove", &path], || {
                format!(
                    "cannot clear the stale worktree {} of {branch}",
                    path.display()
                )
            })?;
        } else if path.exists() && !is_empty_dir(&path) {
            return Err(Error::conflict(format!(
                "{} exists and is not a worktree of {}; refusing to use it for {branch}",
                path.display(),
                self.repo.display()
            )));
        }
        if let Some(other) = list
            .iter()
            .find(|e| e.branch.as_deref() == Some(branch) && e.path != path)
        {
            return Err(Error::conflict(format!(
                "branch {branch} is already checked out at {} in {}",
                other.path.display(),
                self.repo.display()
            )));
        }
        let what = || {
            format!(
                "cannot create worktree {} on {branch} from {base} in {}",
                path.display(),
                self.repo.display()
            )
        };
        if self.branch_tip(branch)?.is_some() {
            self.check(
                &self.repo,
                &args!["worktree", "add", "--quiet", &path, branch],
                what,
            )?;
            let kept = Prepared::Created { new_branch: false };
            self.settle(base, &base_tip, branch, path, true, kept)
        } else {
            self.check(
                &self.repo,
                &args![
                    "worktree",
                    "add",
                    "--quiet",
                    "--no-track",
                    "-b",
                    branch,
                    &path,
                    &base_tip
                ],
                what,
            )?;
            Ok(Worktree {
                head: self.head(&path)?,
                path,
                branch: branch.to_string(),
                created: true,
                prepared: Prepared::Created { new_branch: true },
            })
        }
    }

    /// An existing branch in its worktree: fast-forwarded to `base_tip` when clean and
    /// strictly behind it, else left alone and reported as `otherwise`.
    fn settle(
        &self,
        base: &str,
        base_tip: &str,
        branch: &str,
        path: PathBuf,
        created: bool,
        otherwise: Prepared,
    ) -> Result<Worktree> {
        let head = self.head(&path)?;
        let behind = head != base_tip && self.is_ancestor(&head, base_tip)?;
        let prepared = if behind && self.is_clean(&path)? {
            self.check(&path, &super::fast_forward_args(base_tip), || {
                format!(
                    "cannot fast-forward worktree {} on {branch} to {base} in {}",
                    path.display(),
                    self.repo.display()
                )
            })?;
            Prepared::FastForwarded { from: head }
        } else {
            otherwise
        };
        Ok(Worktree {
            head: self.head(&path)?,
            path,
            branch: branch.to_string(),
            created,
            prepared,
        })
    }

    /// Removes the task worktree at `path` (its branch is kept). A dirty worktree
    /// (untracked files included) is refused unless `force`; ignored files go with
    /// it either way. A locked worktree is always refused.
    pub fn remove_worktree(&self, path: &Path, force: bool) -> Result<()> {
        let (path, list, i) = self.find_worktree(path)?;
        let e = &list[i];
        let branch = e.branch.as_deref().unwrap_or("a detached HEAD");
        if i == 0 {
            return Err(Error::conflict(format!(
                "{} is the main work tree of {}; refusing to remove it",
                path.display(),
                self.repo.display()
            )));
        }
        if !force && !e.prunable {
            self.require_clean(&path, "removing it")?;
        }
        // Its private objects may be all that holds its commits; kept listed (and
        // retired by the next `fleet gc`) if they cannot be copied now.
        if let Err(e) = self.retire_objects(&path) {
            tracing::warn!("{e}");
        }
        let what = || {
            format!(
                "cannot remove worktree {} on {branch} from {}",
                path.display(),
                self.repo.display()
            )
        };
        if force {
            self.check(
                &self.repo,
                &args!["worktree", "remove", "--force", &path],
                what,
            )?;
        } else {
            self.check(&self.repo, &args!["worktree", "remove", &path], what)?;
        }
        Ok(())
    }
}

fn is_empty_dir(p: &Path) -> bool {
    std::fs::read_dir(p).is_ok_and(|mut d| d.next().is_none())
}

/// Parses `git worktree list --porcelain`: blocks of `key [value]` lines separated by
/// blank lines, each starting with `worktree <path>`.
fn parse_list(out: &str) -> Vec<Entry> {
    let mut list: Vec<Entry> = Vec::new();
    for line in out.lines() {
        let (key, value) = line.split_once(' ').unwrap_or((line, ""));
        if key == "worktree" {
            list.push(Entry {
                path: PathBuf::from(value),
                branch: None,
                prunable: false,
            });
            continue;
        }
        let Some(e) = list.last_mut() else { continue };
        match key {
            "branch" => e.branch = Some(value.strip_prefix("refs/heads/").unwrap_or(value).into()),
            "prunable" => e.prunable = true,
            _ => {}
        }
    }
    list
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_porcelain_list() {
        let out = "worktree /r\nHEAD abc\nbranch refs/heads/main\n\n\
                   worktree /w/one two\nHEAD def\nbranch refs/heads/spice/web-1\nlocked\n\n\
                   worktree /w/gone\nHEAD 123\ndetached\nprunable gitdir file points to non-existent location\n\n";
        let list = parse_list(out);
        assert_eq!(list.len(), 3);
        assert_eq!(list[0].path, PathBuf::from("/r"));
        assert_eq!(list[0].branch.as_deref(), Some("main"));
        assert_eq!(list[1].path, PathBuf::from("/w/one two"));
        assert_eq!(list[1].branch.as_deref(), Some("spice/web-1"));
        assert!(!list[1].prunable);
        assert_eq!(list[2].branch, None);
        assert!(list[2].prunable);
    }

    #[test]
    fn parses_a_bare_main_entry() {
        let list =
            parse_list("worktree /r.git\nbare\n\nworktree /w\nHEAD a\nbranch refs/heads/x\n");
        assert_eq!(list[0].path, PathBuf::from("/r.git"));
        assert_eq!(list[0].branch, None);
        assert_eq!(list[1].branch.as_deref(), Some("x"));
    }
}
