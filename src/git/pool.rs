//! What recycling a finished task's worktree needs of git: everything in it that is
//! not committed and not part of its test bed saved under a ref, then the worktree
//! emptied of it and detached (its bed kept); later, a pooled worktree moved to a new
//! task's place and switched to the task's branch.
//!
//! Invariants:
//! - Nothing is removed before it is saved: tracked changes, untracked files and
//!   ignored files outside the bed paths all go into one commit (through a scratch
//!   index, so the worktree's own index is untouched) under
//!   `refs/spice/saved/<branch>/<tag>`, and only once that ref exists is the
//!   worktree reset and cleaned. Files under the bed paths are never saved nor
//!   cleaned: they are what recycling keeps.
//! - More than `max_bytes` of such files is refused (an error, nothing changed): a
//!   worktree holding that much is not a worktree to empty by itself.
//! - A pooled worktree is moved only by `git worktree move` (a rename): a move that
//!   git refuses (another filesystem, something in the way) changes nothing.

use super::{args, canonical, Git};
use crate::error::{Error, Result};
use serde::Serialize;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};

/// What [`Git::recycle_worktree`] saved before it emptied the worktree.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Recycled {
    /// The ref holding what was not committed (`None`: there was nothing).
    pub saved: Option<String>,
    /// Paths saved (tracked changes, untracked and ignored non-bed files).
    pub files: Vec<String>,
    pub bytes: u64,
}

/// Pathspecs leaving out each of `keep` (bed paths, relative to the worktree).
fn excludes(keep: &[String]) -> Vec<String> {
    keep.iter().map(|k| format!(":(exclude){k}")).collect()
}

fn under(p: &str, keep: &[String]) -> bool {
    let p = p.trim_end_matches('/');
    keep.iter().any(|k| {
        p == k
            || p.strip_prefix(k.as_str())
                .is_some_and(|r| r.starts_with('/'))
    })
}

/// The bytes of the files at and under `p` (symlinks counted as themselves).
fn bytes_of(p: &Path) -> u64 {
    let Ok(m) = std::fs::symlink_metadata(p) else {
        return 0;
    };
    if !m.is_dir() {
        return m.len();
    }
    std::fs::read_dir(p)
        .map(|rd| rd.flatten().map(|e| bytes_of(&e.path())).sum())
        .unwrap_or(0)
}

impl Git {
    /// Git's NUL-separated answer in `dir`, or an error saying it could not `what`.
    pub(super) fn lines(&self, dir: &Path, a: &[&OsStr], what: &str) -> Result<Vec<String>> {
        let out = self.check(dir, a, || format!("cannot {what} in {}", dir.display()))?;
        Ok(out
            .stdout
            .split('\0')
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect())
    }

    /// Saves what the worktree at `path` holds beyond its commits and its bed paths
    /// `keep`, then detaches it, resets it and removes those files (module
    /// invariants). `tag` names the saved ref.
    pub fn recycle_worktree(
        &self,
        path: &Path,
        keep: &[String],
        tag: &str,
        max_bytes: u64,
    ) -> Result<Recycled> {
        let (path, list, i) = self.find_worktree(path)?;
        if i == 0 {
            return Err(Error::conflict(format!(
                "{} is the main work tree of {}; refusing to recycle it",
                path.display(),
                self.repo.display()
            )));
        }
        let branch = list[i]
            .branch
            .clone()
            .unwrap_or_else(|| "detached".to_string());
        let ex = excludes(keep);
        let mut spec: Vec<&OsStr> = vec![OsStr::new("--"), OsStr::new(".")];
        spec.extend(ex.iter().map(OsStr::new));
        let with = |head: &[&'static str]| -> Vec<&OsStr> {
            head.iter()
                .map(|h| OsStr::new(*h))
                .chain(spec.iter().copied())
                .collect()
        };
        let changed = self.lines(&path, &with(&["diff", "HEAD", "--name-only", "-z"]), "diff")?;
        let untracked = self.lines(
            &path,
            &with(&["ls-files", "-z", "--others", "--exclude-standard"]),
            "list untracked files",
        )?;
        let ignored: Vec<String> = self
            .lines(
                &path,
                &with(&[
                    "ls-files",
                    "-z",
                    "--others",
                    "--ignored",
                    "--exclude-standard",
                    "--directory",
                ]),
                "list ignored files",
            )?
            .into_iter()
            .filter(|p| !under(p, keep))
            .collect();
        let mut files: Vec<String> = changed
            .iter()
            .chain(&untracked)
            .chain(&ignored)
            .cloned()
            .collect();
        files.sort();
        files.dedup();
        let bytes: u64 = untracked
            .iter()
            .chain(&ignored)
            .map(|f| bytes_of(&path.join(f)))
            .sum();
        if bytes > max_bytes {
            return Err(Error::conflict(format!(
                "{} holds {bytes} bytes of uncommitted files outside its test bed (more \
                 than {max_bytes}): not recycled, left as it is",
                path.display()
            )));
        }
        let saved = if files.is_empty() {
            None
        } else {
            Some(self.save_everything(&path, &branch, tag, &files)?)
        };
        // Saved: now the worktree can be emptied of it.
        self.check(&path, &args!["checkout", "--quiet", "--detach"], || {
            format!("cannot detach worktree {}", path.display())
        })?;
        self.check(&path, &args!["reset", "--quiet", "--hard"], || {
            format!("cannot reset worktree {}", path.display())
        })?;
        self.check(&path, &with(&["clean", "-ffdxq"]), || {
            format!("cannot clean worktree {}", path.display())
        })?;
        Ok(Recycled {
            saved,
            files,
            bytes,
        })
    }

    /// One commit on HEAD of every one of `files` (changed, untracked, ignored), under `refs/spice/saved/<branch>/<tag>`.
    fn save_everything(
        &self,
        path: &Path,
        branch: &str,
        tag: &str,
        files: &[String],
    ) -> Result<String> {
        let scratch = self
            .common_dir
            .join(format!("spice-recycle-{}.index", std::process::id()));
        let specs = scratch.with_extension("paths");
        let run = |a: &[&OsStr], what: &str| -> Result<String> {
            self.run_indexed(path, &scratch, a, || {
                format!("cannot save what {} holds ({what})", path.display())
            })
        };
        let result = (|| {
            run(&args!["read-tree", "HEAD"], "read-tree")?;
            // The exact paths, as pathspecs read from a file: a pathspec naming an
            // ignored bed path would make `git add` refuse.
            let mut list = Vec::new();
            for f in files {
                list.extend_from_slice(f.as_bytes());
                list.push(0);
            }
            std::fs::write(&specs, &list).map_err(|source| Error::Io {
                context: format!("writing {}", specs.display()),
                source,
            })?;
            let from = format!("--pathspec-from-file={}", specs.display());
            run(
                &args!["add", "--all", "--force", "--pathspec-file-nul", &from],
                "add",
            )?;
            let msg = format!(
                "spice: what {} held when its task ended ({branch})",
                path.display()
            );
            self.save_index(&run, branch, tag, &msg)
        })();
        let _ = std::fs::remove_file(&scratch);
        let _ = std::fs::remove_file(&specs);
        result
    }

    /// Moves the worktree at `from` to `to` (a rename; see the module invariants).
    pub fn move_worktree(&self, from: &Path, to: &Path) -> Result<PathBuf> {
        // `git worktree move` into an existing directory moves into it, like `mv`.
        if std::fs::symlink_metadata(to).is_ok() {
            return Err(Error::conflict(format!(
                "cannot move worktree {} to {}: something is already there",
                from.display(),
                to.display()
            )));
        }
        if let Some(parent) = to.parent() {
            std::fs::create_dir_all(parent).map_err(|source| Error::Io {
                context: format!("creating {}", parent.display()),
                source,
            })?;
        }
        self.check(&self.repo, &args!["worktree", "move", from, to], || {
            format!(
                "cannot move worktree {} to {}",
                from.display(),
                to.display()
            )
        })?;
        Ok(canonical(&self.repo, to))
    }

    /// Checks out `branch` in the (detached, clean) worktree at `path`: the branch as
    /// it is when it exists, else made at `base`.
    pub fn switch_recycled(&self, path: &Path, branch: &str, base: &str) -> Result<()> {
        self.check_branch_name(branch)?;
        let what = || format!("cannot check out {branch} in {}", path.display());
        if self.branch_tip(branch)?.is_some() {
            self.check(path, &args!["checkout", "--quiet", branch], what)?;
        } else {
            self.check(
                path,
                &args!["checkout", "--quiet", "-b", branch, base],
                what,
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::git::testutil::{repo_with_task_worktree, sh};
    use crate::git::{Git, Runner};

    fn keep() -> Vec<String> {
        vec!["target".to_string()]
    }

    #[test]
    fn everything_outside_the_bed_is_saved_before_it_is_cleaned() {
        let (_d, repo, wt) = repo_with_task_worktree();
        let g = Git::open(&repo, Runner::new(std::env::vars_os())).unwrap();
        std::fs::write(wt.join(".gitignore"), "target/\n*.log\n").unwrap();
        sh(&wt, &["add", ".gitignore"]);
        sh(&wt, &["commit", "-q", "-m", "ignore"]);
        std::fs::create_dir_all(wt.join("target/debug")).unwrap();
        std::fs::write(wt.join("target/debug/warm"), "bed").unwrap();
        std::fs::write(wt.join("a.txt"), "changed\n").unwrap();
        std::fs::write(wt.join("notes.txt"), "mine\n").unwrap();
        std::fs::write(wt.join("run.log"), "log\n").unwrap();
        let r = g.recycle_worktree(&wt, &keep(), "t1", 1 << 20).unwrap();
        let saved = r.saved.clone().expect("something was saved");
        assert_eq!(saved, "refs/spice/saved/spice/t/t1");
        assert_eq!(r.files, ["a.txt", "notes.txt", "run.log"]);
        // The ref holds all three, and not the bed.
        let tree = sh(&repo, &["ls-tree", "-r", "--name-only", &saved]);
        for f in ["a.txt", "notes.txt", "run.log", ".gitignore"] {
            assert!(tree.lines().any(|l| l == f), "{f} in {tree}");
        }
        assert!(!tree.contains("target"), "{tree}");
        assert_eq!(sh(&repo, &["show", &format!("{saved}:a.txt")]), "changed");
        // The worktree: detached, clean, its bed kept.
        assert_eq!(
            sh(&wt, &["status", "--porcelain", "--ignored"]),
            "!! target/"
        );
        assert!(std::fs::read_to_string(wt.join("target/debug/warm")).unwrap() == "bed");
        assert!(sh(&wt, &["branch", "--show-current"]).is_empty());
        // The branch is untouched and free to check out elsewhere.
        sh(&repo, &["rev-parse", "--verify", "spice/t"]);
    }

    #[test]
    fn a_clean_worktree_saves_nothing_and_too_much_is_refused() {
        let (_d, repo, wt) = repo_with_task_worktree();
        let g = Git::open(&repo, Runner::new(std::env::vars_os())).unwrap();
        std::fs::write(wt.join("big.bin"), vec![7u8; 4096]).unwrap();
        let e = g.recycle_worktree(&wt, &keep(), "t", 1000).unwrap_err();
        assert!(e.to_string().contains("4096 bytes"), "{e}");
        assert!(wt.join("big.bin").exists(), "nothing changed");
        assert_eq!(sh(&wt, &["branch", "--show-current"]), "spice/t");
        std::fs::remove_file(wt.join("big.bin")).unwrap();
        let r = g.recycle_worktree(&wt, &keep(), "t", 1000).unwrap();
        assert_eq!(r.saved, None);
        assert!(r.files.is_empty());
    }

    #[test]
    fn a_recycled_worktree_moves_and_takes_a_new_branch() {
        let (d, repo, wt) = repo_with_task_worktree();
        let g = Git::open(&repo, Runner::new(std::env::vars_os())).unwrap();
        std::fs::create_dir_all(wt.join("target")).unwrap();
        std::fs::write(wt.join("target/warm"), "bed").unwrap();
        g.recycle_worktree(&wt, &keep(), "t", 1000).unwrap();
        let to = d.path().join("lanes/l/u");
        let at = g.move_worktree(&wt, &to).unwrap();
        assert!(!wt.exists());
        g.switch_recycled(&at, "spice/u", "main").unwrap();
        assert_eq!(sh(&at, &["branch", "--show-current"]), "spice/u");
        assert!(at.join("target/warm").exists());
        // An existing branch is checked out as it is.
        g.recycle_worktree(&at, &keep(), "u", 1000).unwrap();
        g.switch_recycled(&at, "spice/t", "main").unwrap();
        assert_eq!(sh(&at, &["branch", "--show-current"]), "spice/t");
        // A move onto something that exists changes nothing.
        std::fs::create_dir_all(d.path().join("taken/x")).unwrap();
        std::fs::write(d.path().join("taken/x/f"), "x").unwrap();
        assert!(g.move_worktree(&at, &d.path().join("taken/x")).is_err());
        assert!(at.join("target/warm").exists());
    }
}
