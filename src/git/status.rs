//! Boundary 3 (launch) and the read-only questions the other boundaries ask.
//!
//! Invariant: nothing here writes, not even the index's cached stat data (git runs
//! with `--no-optional-locks`), so asking is safe while an agent works in the tree.
//!
//! "Clean" means no staged, unstaged, conflicted or untracked entries. Untracked files
//! count because they are work a merge of commits would silently leave behind;
//! ignored files do not, because build output (`target/`, `node_modules/`) would
//! otherwise make every tree dirty and is never part of what gets merged. The
//! user's `status.showUntrackedFiles` is overridden so it cannot hide untracked work.

use super::{args, canonical, Git};
use crate::error::{Error, Result};
use serde::Serialize;
use std::path::{Path, PathBuf};

/// What a worktree looks like before an agent is launched in it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LaunchState {
    pub path: PathBuf,
    /// The checked-out branch (short name), `None` when HEAD is detached.
    pub branch: Option<String>,
    /// HEAD's commit, `None` on an unborn branch.
    pub head: Option<String>,
    /// Entries with changes in the index.
    pub staged: usize,
    /// Entries with changes in the work tree not yet in the index.
    pub unstaged: usize,
    /// Untracked entries (a wholly untracked directory counts once).
    pub untracked: usize,
    /// Entries with unresolved conflicts.
    pub conflicted: usize,
}

impl LaunchState {
    pub fn is_clean(&self) -> bool {
        self.staged + self.unstaged + self.untracked + self.conflicted == 0
    }

    /// "2 staged, 1 untracked", for messages about a dirty tree.
    pub fn describe_changes(&self) -> String {
        let parts: Vec<String> = [
            (self.staged, "staged"),
            (self.unstaged, "unstaged"),
            (self.untracked, "untracked"),
            (self.conflicted, "conflicted"),
        ]
        .iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, what)| format!("{n} {what}"))
        .collect();
        if parts.is_empty() {
            "clean".into()
        } else {
            parts.join(", ")
        }
    }
}

impl Git {
    /// Boundary 3: reports branch, HEAD and cleanliness of the worktree at `path`
    /// (relative paths are taken from the repository). Moves nothing.
    pub fn launch_check(&self, path: &Path) -> Result<LaunchState> {
        let path = canonical(&self.repo, path);
        let out = self.check(
            &path,
            &args![
                "--no-optional-locks",
                "status",
                "--porcelain=v2",
                "--branch",
                "-z",
                "--untracked-files=normal",
                "--ignored=no",
                "--ignore-submodules=none",
            ],
            || format!("cannot read the status of worktree {}", path.display()),
        )?;
        Ok(parse_status(path, &out.stdout))
    }

    /// Whether the worktree at `path` has no staged, unstaged, conflicted or
    /// untracked changes (ignored files do not count).
    pub fn is_clean(&self, path: &Path) -> Result<bool> {
        Ok(self.launch_check(path)?.is_clean())
    }

    /// The commit checked out in the worktree at `path`.
    pub fn head(&self, path: &Path) -> Result<String> {
        let path = canonical(&self.repo, path);
        let out = self.check(
            &path,
            &args!["rev-parse", "--verify", "HEAD^{commit}"],
            || format!("cannot read HEAD of worktree {}", path.display()),
        )?;
        Ok(out.stdout.trim().to_string())
    }

    /// Fails with a conflict naming the changes unless the worktree is clean.
    pub(super) fn require_clean(&self, path: &Path, doing: &str) -> Result<LaunchState> {
        let state = self.launch_check(path)?;
        if state.is_clean() {
            Ok(state)
        } else {
            let on = state.branch.as_deref().unwrap_or("a detached HEAD");
            Err(Error::conflict(format!(
                "worktree {} on {on} has uncommitted changes ({}); commit or remove them \
                 before {doing}",
                state.path.display(),
                state.describe_changes()
            )))
        }
    }
}

/// Reads `git status --porcelain=v2 --branch -z` output.
fn parse_status(path: PathBuf, out: &str) -> LaunchState {
    let mut state = LaunchState {
        path,
        branch: None,
        head: None,
        staged: 0,
        unstaged: 0,
        untracked: 0,
        conflicted: 0,
    };
    let mut records = out.split('\0');
    while let Some(rec) = records.next() {
        if let Some(oid) = rec.strip_prefix("# branch.oid ") {
            state.head = (oid != "(initial)").then(|| oid.to_string());
        } else if let Some(head) = rec.strip_prefix("# branch.head ") {
            state.branch = (head != "(detached)").then(|| head.to_string());
        } else if rec.starts_with("1 ") || rec.starts_with("2 ") {
            let xy = rec.as_bytes().get(2..4).unwrap_or(b"..");
            state.staged += usize::from(xy[0] != b'.');
            state.unstaged += usize::from(xy[1] != b'.');
            if rec.starts_with('2') {
                // A rename or copy: its original path is the next NUL-separated field.
                records.next();
            }
        } else if rec.starts_with("u ") {
            state.conflicted += 1;
        } else if rec.starts_with("? ") {
            state.untracked += 1;
        }
    }
    state
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> LaunchState {
        parse_status(PathBuf::from("/w"), s)
    }

    #[test]
    fn clean_tree_on_a_branch() {
        let s = parse("# branch.oid abc123\0# branch.head spice/web-1\0");
        assert_eq!(s.branch.as_deref(), Some("spice/web-1"));
        assert_eq!(s.head.as_deref(), Some("abc123"));
        assert!(s.is_clean());
        assert_eq!(s.describe_changes(), "clean");
    }

    #[test]
    fn counts_each_kind_of_change() {
        let s = parse(concat!(
            "# branch.oid (initial)\0# branch.head (detached)\0",
            "1 M. N... 100644 100644 100644 aaa bbb staged.txt\0",
            "1 .M N... 100644 100644 100644 aaa aaa unstaged.txt\0",
            "1 MM N... 100644 100644 100644 aaa bbb both.txt\0",
            "2 R. N... 100644 100644 100644 aaa aaa R100 new name\0old name\0",
            "u UU N... 100644 100644 100644 100644 a b c conflict.txt\0",
            "? untracked dir/\0",
            "? 1 M. looks like an entry\0",
        ));
        assert_eq!(s.branch, None);
        assert_eq!(s.head, None);
        assert_eq!(
            (s.staged, s.unstaged, s.untracked, s.conflicted),
            (3, 2, 2, 1)
        );
        assert!(!s.is_clean());
        assert_eq!(
            s.describe_changes(),
            "3 staged, 2 unstaged, 2 untracked, 1 conflicted"
        );
    }
}
