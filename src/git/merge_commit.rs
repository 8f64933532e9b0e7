//! Computing a merge commit of `base` and a task branch away from every checkout.
//!
//! Invariant: no work tree anyone uses is touched and no ref moves here; the result is
//! a commit object (or a conflict naming the paths), and moving `base` to it is the
//! caller's compare-and-swap. With git ≥ 2.38 the merge is `git merge-tree
//! --write-tree` + `git commit-tree`: no work tree, no index, no `MERGE_HEAD`, no
//! hooks. Older git gets `git merge --no-ff` in a temporary detached worktree inside
//! the git directory (same file system, invisible to `git status`), aborted on
//! conflict and removed on every path out, including a panic.

use super::run::first_line;
use super::{args, Git};
use crate::error::{Error, Result};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

/// How a merge commit is computed. Fast-forwards never need either.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MergeMethod {
    /// `MergeTree` when git is 2.38 or newer, else `TempWorktree`.
    Auto,
    /// `git merge-tree --write-tree`: no work tree at all.
    MergeTree,
    /// `git merge` in a temporary detached worktree, removed afterwards.
    TempWorktree,
}

/// Conflicting paths named in an error before "and N more".
const SHOWN_PATHS: usize = 10;

static TEMP_SEQ: AtomicU64 = AtomicU64::new(0);

impl Git {
    /// A merge commit of `old` (first parent) and `tip`, or a conflict naming paths.
    pub(super) fn merge_commit(
        &self,
        base: &str,
        old: &str,
        branch: &str,
        tip: &str,
    ) -> Result<String> {
        let msg = format!("Merge branch '{branch}' into {base}");
        let conflict = |paths: &[String]| {
            Error::conflict(format!(
                "merging {branch} into {base} in {} conflicts in {}; {base} was left at {}",
                self.repo.display(),
                list_paths(paths),
                &old[..old.len().min(12)]
            ))
        };
        let what = || {
            format!(
                "cannot merge {branch} into {base} in {}",
                self.repo.display()
            )
        };
        if self.resolved_method()? == MergeMethod::MergeTree {
            let out = self.run(
                &self.repo,
                &args![
                    "merge-tree",
                    "--write-tree",
                    "--name-only",
                    "--no-messages",
                    "-z",
                    old,
                    tip
                ],
            )?;
            let mut fields = out.stdout.split('\0').filter(|f| !f.is_empty());
            let tree = fields.next().unwrap_or_default().to_string();
            match out.code {
                Some(0) => {}
                Some(1) => return Err(conflict(&fields.map(String::from).collect::<Vec<_>>())),
                _ => return Err(Error::Other(format!("{}: {}", what(), out.first_line()))),
            }
            let args = args!["commit-tree", &tree, "-p", old, "-p", tip, "-m", &msg];
            let out = self.check(&self.repo, &args, what)?;
            return Ok(out.stdout.trim().to_string());
        }
        let tmp = TempTree::add(self, old, &what)?;
        let out = self.run(
            &tmp.dir,
            &args![
                "merge",
                "--no-ff",
                "--no-edit",
                "--quiet",
                "--no-autostash",
                "-m",
                &msg,
                tip
            ],
        )?;
        if out.ok() {
            return self.head(&tmp.dir);
        }
        let unmerged = self.run(
            &tmp.dir,
            &args!["diff", "--name-only", "--diff-filter=U", "-z"],
        )?;
        self.run(&tmp.dir, &args!["merge", "--abort"])?;
        let paths: Vec<String> = unmerged
            .stdout
            .split('\0')
            .filter(|f| !f.is_empty())
            .map(String::from)
            .collect();
        if paths.is_empty() {
            Err(Error::Other(format!("{}: {}", what(), out.first_line())))
        } else {
            Err(conflict(&paths))
        }
    }

    fn resolved_method(&self) -> Result<MergeMethod> {
        if self.merge_method != MergeMethod::Auto {
            return Ok(self.merge_method);
        }
        let out = self.check(&self.repo, &args!["version"], || {
            "cannot ask git its version".into()
        })?;
        Ok(match parse_version(&out.stdout) {
            Some(v) if v >= (2, 38) => MergeMethod::MergeTree,
            _ => MergeMethod::TempWorktree,
        })
    }
}

/// A detached worktree for computing one merge; removed on drop, whatever happened.
struct TempTree<'a> {
    git: &'a Git,
    dir: PathBuf,
}

impl<'a> TempTree<'a> {
    /// Inside the git directory, so it is on the repository's file system, invisible
    /// to `git status` in the user's tree, and never mistaken for a task worktree.
    fn add(git: &'a Git, at: &str, what: &dyn Fn() -> String) -> Result<TempTree<'a>> {
        let parent = git.common_dir.join("spice-merges");
        std::fs::create_dir_all(&parent)
            .map_err(|e| Error::Other(format!("{}: {}: {e}", what(), parent.display())))?;
        let dir = loop {
            let n = TEMP_SEQ.fetch_add(1, Ordering::Relaxed);
            let d = parent.join(format!("{}-{n}", std::process::id()));
            if !d.exists() {
                break d;
            }
        };
        git.check(
            &git.repo,
            &args!["worktree", "add", "--detach", "--quiet", &dir, at],
            what,
        )?;
        Ok(TempTree { git, dir })
    }
}

impl Drop for TempTree<'_> {
    fn drop(&mut self) {
        let removed = self
            .git
            .run(
                &self.git.repo,
                &args!["worktree", "remove", "--force", &self.dir],
            )
            .is_ok_and(|o| o.ok());
        if !removed {
            let _ = std::fs::remove_dir_all(&self.dir);
            let _ = self.git.run(&self.git.repo, &args!["worktree", "prune"]);
        }
    }
}

/// `git version 2.47.3` (or `2.39.3 (Apple Git-146)`, `2.45.1.windows.1`) → (2, 47).
fn parse_version(s: &str) -> Option<(u32, u32)> {
    let v = first_line(s)?.strip_prefix("git version ")?;
    let mut parts = v.split(|c: char| !c.is_ascii_digit());
    Some((parts.next()?.parse().ok()?, parts.next()?.parse().ok()?))
}

/// `a, b, c and 4 more`, with control characters escaped so it stays one line.
pub(super) fn list_paths(paths: &[String]) -> String {
    let shown: Vec<String> = paths
        .iter()
        .take(SHOWN_PATHS)
        .map(|p| p.chars().flat_map(char::escape_default).collect::<String>())
        .collect();
    let mut s = shown.join(", ");
    if paths.len() > SHOWN_PATHS {
        s.push_str(&format!(" and {} more", paths.len() - SHOWN_PATHS));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_parse() {
        assert_eq!(parse_version("git version 2.47.3\n"), Some((2, 47)));
        assert_eq!(
            parse_version("git version 2.39.3 (Apple Git-146)"),
            Some((2, 39))
        );
        assert_eq!(parse_version("git version 2.45.1.windows.1"), Some((2, 45)));
        assert_eq!(parse_version("hub version 2"), None);
        assert!(parse_version("git version 2.38.0").unwrap() >= (2, 38));
        assert!(parse_version("git version 2.9.5").unwrap() < (2, 38));
    }

    #[test]
    fn path_lists_are_one_capped_line() {
        let many: Vec<String> = (0..13).map(|i| format!("f{i}")).collect();
        let s = list_paths(&many);
        assert!(
            s.starts_with("f0, f1, ") && s.ends_with("f9 and 3 more"),
            "{s}"
        );
        assert_eq!(list_paths(&["a\nb".to_string()]), "a\\nb");
    }
}
