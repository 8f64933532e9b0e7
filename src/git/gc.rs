//! What `spice fleet gc` needs of git: the task checkouts a repository holds (each
//! `spice/<handle>/work` branch (or a legacy `spice/<handle>`), where it is checked out, and detached task worktrees),
//! whether one holds anything `base` lacks, saving that to `refs/spice/wip/<handle>`,
//! and removing the worktree and branch.
//!
//! Invariants:
//! - Nothing is removed that is not in `base` or saved first: [`Git::save_wip`]
//!   commits the worktree's whole content (HEAD, tracked changes, untracked files;
//!   ignored files are build output and go) through a scratch index on top of HEAD,
//!   so the wip commit also holds every commit the branch has beyond `base`. An
//!   earlier wip of the same task stays reachable as a second parent.
//! - The main work tree is never a task checkout, and deciding which checkouts may go
//!   (claims, pools, task states) is the caller's: this module only moves git.

use super::{args, canonical, Git};
use crate::error::{Error, Result};
use std::ffi::OsStr;
use std::path::{Path, PathBuf};

/// A task's branch and/or worktree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskCheckout {
    /// `spice/<handle>/work`; `None` for a detached task worktree.
    pub branch: Option<String>,
    pub handle: String,
    /// The commit the branch (or the detached worktree's HEAD) is at.
    pub tip: String,
    /// The worktree it is checked out in, if any (canonical).
    pub worktree: Option<PathBuf>,
    /// Registered, but its directory is gone.
    pub prunable: bool,
}

/// The bytes of the files at and under `p`, symbolic links counted as themselves.
pub fn disk_bytes(p: &Path) -> u64 {
    let Ok(m) = std::fs::symlink_metadata(p) else {
        return 0;
    };
    if !m.is_dir() {
        return m.len();
    }
    std::fs::read_dir(p)
        .map(|rd| rd.flatten().map(|e| disk_bytes(&e.path())).sum())
        .unwrap_or(0)
}

impl Git {
    /// Every `spice/*` branch with where it is checked out, and every detached
    /// worktree under `detached_root` (a task's place, its handle the directory's
    /// name). The main work tree is never one of them.
    pub fn task_checkouts(&self, detached_root: &Path) -> Result<Vec<TaskCheckout>> {
        let refs = self.check(
            &self.repo,
            &args![
                "for-each-ref",
                "--format=%(refname)%00%(objectname)",
                "refs/heads/spice/"
            ],
            || format!("cannot list the task branches of {}", self.repo.display()),
        )?;
        let list = self.worktrees()?;
        let mut out = Vec::new();
        for line in refs.stdout.lines() {
            let Some((name, tip)) = line.split_once('\0') else {
                continue;
            };
            let branch = name.strip_prefix("refs/heads/").unwrap_or(name).to_string();
            let Some(handle) = super::task_of_branch(&branch) else {
                continue;
            };
            let at = list
                .iter()
                .enumerate()
                .find(|(_, e)| e.branch.as_deref() == Some(branch.as_str()));
            if at.is_some_and(|(i, _)| i == 0) {
                continue;
            }
            out.push(TaskCheckout {
                handle: handle.to_string(),
                tip: tip.to_string(),
                worktree: at.map(|(_, e)| e.path.clone()),
                prunable: at.is_some_and(|(_, e)| e.prunable),
                branch: Some(branch),
            });
        }
        let root = canonical(&self.repo, detached_root);
        for e in list.iter().skip(1) {
            if e.branch.is_some() || e.prunable || !e.path.starts_with(&root) {
                continue;
            }
            let (Some(name), Ok(tip)) = (e.path.file_name(), self.head(&e.path)) else {
                continue;
            };
            out.push(TaskCheckout {
                branch: None,
                handle: name.to_string_lossy().to_string(),
                tip,
                worktree: Some(e.path.clone()),
                prunable: false,
            });
        }
        Ok(out)
    }

    /// Whether commit `tip` is in `base`.
    pub fn merged_into(&self, tip: &str, base: &str) -> Result<bool> {
        self.is_ancestor(tip, base)
    }

    /// The paths in the worktree at `path` that no commit holds: tracked changes
    /// (staged or not) and untracked files; ignored files are not work.
    pub fn unsaved_paths(&self, path: &Path) -> Result<Vec<String>> {
        let out = self.check(
            path,
            &args!["status", "--porcelain", "-z", "--untracked-files=all"],
            || format!("cannot read the status of {}", path.display()),
        )?;
        let mut paths = Vec::new();
        let mut fields = out.stdout.split('\0');
        while let Some(f) = fields.next() {
            if f.len() < 4 {
                continue;
            }
            paths.push(f[3..].to_string());
            // A rename names its source next.
            if matches!(f.as_bytes()[0], b'R' | b'C') {
                fields.next();
            }
        }
        Ok(paths)
    }

    /// The commit `refs/spice/wip/<handle>` names, if any.
    pub fn wip(&self, handle: &str) -> Result<Option<String>> {
        let name = format!("refs/spice/wip/{handle}^{{commit}}");
        let out = self.run(
            &self.repo,
            &args!["rev-parse", "--verify", "--quiet", &name],
        )?;
        Ok(out.ok().then(|| out.stdout.trim().to_string()))
    }

    /// Saves everything `c` holds as a commit under `refs/spice/wip/<handle>` (see
    /// the module invariants); the ref's name.
    pub fn save_wip(&self, c: &TaskCheckout) -> Result<String> {
        let name = format!("refs/spice/wip/{}", c.handle);
        self.check(&self.repo, &args!["check-ref-format", &name], || {
            format!("{name} is not a valid ref name")
        })?;
        let older = self.wip(&c.handle)?;
        let parents: Vec<&str> = older.iter().map(String::as_str).collect();
        let what = c.branch.as_deref().unwrap_or("a detached HEAD");
        match c.worktree.as_deref().filter(|_| !c.prunable) {
            Some(path) => {
                let scratch = self.common_dir.join(format!(
                    "spice-wip-{}-{}.index",
                    c.handle
                        .replace(|ch: char| !ch.is_ascii_alphanumeric(), "-"),
                    std::process::id()
                ));
                let run = |a: &[&OsStr], step: &str| -> Result<String> {
                    self.run_indexed(path, &scratch, a, || {
                        format!("cannot save the work in {} ({step})", path.display())
                    })
                };
                let result = (|| {
                    run(&args!["read-tree", "HEAD"], "read-tree")?;
                    run(&args!["add", "--all", "."], "add")?;
                    let msg = format!(
                        "spice: work in {} on {what}, saved before fleet gc removed it",
                        path.display()
                    );
                    self.save_index_as(&run, &name, &parents, &msg)
                })();
                let _ = std::fs::remove_file(&scratch);
                result?;
            }
            None => {
                let tree = format!("{}^{{tree}}", c.tip);
                let msg = format!("spice: {what}, saved before fleet gc removed it");
                let mut a: Vec<&OsStr> = args!["commit-tree", &tree, "-p", &c.tip].to_vec();
                for p in &parents {
                    a.extend(args!["-p", p]);
                }
                a.extend(args!["-m", &msg]);
                let failing = || format!("cannot save {what} in {}", self.repo.display());
                let commit = self
                    .check(&self.repo, &a, failing)?
                    .stdout
                    .trim()
                    .to_string();
                self.check(&self.repo, &args!["update-ref", &name, &commit], failing)?;
            }
        }
        Ok(name)
    }

    /// Removes `c`'s worktree (whatever it holds: the caller saved it) and branch.
    pub fn remove_checkout(&self, c: &TaskCheckout) -> Result<()> {
        match c.worktree.as_deref() {
            Some(path) if !c.prunable => self.remove_worktree(path, true)?,
            Some(path) => {
                if let Err(e) = self.retire_objects(path) {
                    tracing::warn!("{e}");
                }
                self.check(&self.repo, &args!["worktree", "prune"], || {
                    format!("cannot prune the worktrees of {}", self.repo.display())
                })?;
            }
            None => {}
        }
        if let Some(branch) = &c.branch {
            self.check(
                &self.repo,
                &args!["branch", "-D", "--quiet", branch],
                || format!("cannot delete branch {branch} in {}", self.repo.display()),
            )
            .map_err(|e| Error::Other(e.to_string()))?;
            self.forget_task_dirs(branch);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::git::testutil::{repo_with_task_worktree, sh as git};
    use crate::git::Runner;

    #[test]
    fn a_dirty_unmerged_worktree_is_saved_whole_then_removed() {
        let (d, repo, wt) = repo_with_task_worktree();
        let g = Git::open(&repo, Runner::new(std::env::vars_os())).unwrap();
        std::fs::write(wt.join("committed.txt"), "c\n").unwrap();
        git(&wt, &["add", "committed.txt"]);
        git(&wt, &["commit", "-q", "-m", "unmerged"]);
        std::fs::write(wt.join("new.txt"), "untracked\n").unwrap();
        let all = g.task_checkouts(&d.path().join("none")).unwrap();
        let c = all.iter().find(|c| c.handle == "t").unwrap().clone();
        assert!(!g.merged_into(&c.tip, "main").unwrap());
        assert_eq!(g.unsaved_paths(&wt).unwrap(), ["new.txt"]);
        let saved = g.save_wip(&c).unwrap();
        assert_eq!(saved, "refs/spice/wip/t");
        g.remove_checkout(&c).unwrap();
        assert!(!wt.exists());
        let files = git(&repo, &["ls-tree", "-r", "--name-only", &saved]);
        assert!(
            files.contains("committed.txt") && files.contains("new.txt"),
            "{files}"
        );
        assert!(git(&repo, &["branch", "--list", "spice/t"]).is_empty());
    }
}
