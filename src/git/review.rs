//! What a task's branch changed, for review: its commits since it left base and the
//! diff of their sum, file by file and hunk by hunk, with each line's numbers on both
//! sides (so a comment can name the lines it is about).
//!
//! Read-only: `merge-base`, `log` and `diff` in the task's worktree, nothing written.
//! Paths and counts come from `diff --numstat -z` (exact bytes, no quoting); the hunks
//! from the patch of the same diff, matched to them in order. Renames are detected
//! (`-M`); a binary file has counts and no hunks.
//!
//! Invariants: every hunk's lines agree with its header (old lines = context +
//! removed, new lines = context + added); the whole review is bounded
//! ([`MAX_PATCH_BYTES`]): past it the remaining files keep their counts and lose their
//! hunks, and the review says it was cut (`truncated`).

use super::{args, Git};
use crate::error::{Error, Result};
use serde::Serialize;
use std::path::Path;

/// The most patch text read into one review; a larger diff keeps its file list.
pub const MAX_PATCH_BYTES: usize = 16 << 20;

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Review {
    pub base: String,
    /// The commit the branch left base at, and the branch's tip.
    pub merge_base: String,
    pub head: String,
    /// Oldest first.
    pub commits: Vec<Commit>,
    pub files: Vec<FileDiff>,
    pub added: u64,
    pub removed: u64,
    /// The patch passed [`MAX_PATCH_BYTES`]: files after the cut have no hunks.
    pub truncated: bool,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Commit {
    pub sha: String,
    pub author: String,
    /// Unix seconds.
    pub at: i64,
    pub subject: String,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct FileDiff {
    pub path: String,
    /// Where a renamed file came from.
    pub old_path: Option<String>,
    /// `added`, `deleted`, `modified` or `renamed`.
    pub status: &'static str,
    pub added: u64,
    pub removed: u64,
    pub binary: bool,
    pub hunks: Vec<Hunk>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Hunk {
    pub old_start: u64,
    pub old_lines: u64,
    pub new_start: u64,
    pub new_lines: u64,
    /// What git put after the second `@@` (the enclosing function, often).
    pub section: String,
    pub lines: Vec<Line>,
}

/// One line of a hunk: `' '` context, `'+'` added, `'-'` removed, with its number in
/// the old and the new file where it has one.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Line {
    pub kind: char,
    pub old: Option<u64>,
    pub new: Option<u64>,
    pub text: String,
}

impl Git {
    /// The review of `head` (a commit-ish, usually `HEAD` of the task's worktree) against
    /// `base`, read in `worktree`: what `head` changed since it left `base`.
    pub fn review(&self, worktree: &Path, base: &str, head: &str) -> Result<Review> {
        let what = || format!("reviewing {head} against {base} in {}", worktree.display());
        let mb = self.check(worktree, &args!["merge-base", base, head], what)?;
        self.review_range(worktree, base, mb.stdout.trim(), head)
    }

    /// The review of what `head` changed since `from` (a phase already merged: base
    /// before the merge, and the merged commit), labelled against `base`.
    pub fn review_range(
        &self,
        worktree: &Path,
        base: &str,
        from: &str,
        head: &str,
    ) -> Result<Review> {
        let what = || format!("reviewing {from}..{head} in {}", worktree.display());
        let tip = self.check(worktree, &args!["rev-parse", "--verify", head], what)?;
        let head_sha = tip.stdout.trim().to_string();
        let range = format!("{from}..{head_sha}");
        let log = self.check(
            worktree,
            &args![
                "log",
                "--reverse",
                "--no-color",
                "--format=%H%x1f%an%x1f%at%x1f%s",
                &range
            ],
            what,
        )?;
        let commits = log.stdout.lines().filter_map(commit).collect();
        let (files, truncated) = self.diff_files(worktree, &[from, &head_sha], what)?;
        Ok(Review {
            base: base.to_string(),
            merge_base: from.to_string(),
            head: head_sha,
            commits,
            added: files.iter().map(|f| f.added).sum(),
            removed: files.iter().map(|f| f.removed).sum(),
            files,
            truncated,
        })
    }

    /// What the worktree holds that `HEAD` does not: tracked files edited (staged or
    /// not) and not committed yet. Untracked files are not read. True when the patch
    /// was cut at [`MAX_PATCH_BYTES`].
    pub fn uncommitted(&self, worktree: &Path) -> Result<(Vec<FileDiff>, bool)> {
        let what = || format!("reading what {} has not committed", worktree.display());
        self.diff_files(worktree, &["HEAD"], what)
    }

    /// The files `git diff REVS...` names, with their hunks: counts from `--numstat -z`,
    /// hunks from the patch of the same diff.
    fn diff_files(
        &self,
        worktree: &Path,
        revs: &[&str],
        what: impl Fn() -> String,
    ) -> Result<(Vec<FileDiff>, bool)> {
        let diff = |shape: &[&str]| {
            let mut argv: Vec<&std::ffi::OsStr> = args![
                "-c",
                "core.quotePath=false",
                "diff",
                "--no-color",
                "--no-ext-diff",
                "--no-textconv",
                "-M"
            ]
            .to_vec();
            argv.extend(shape.iter().map(std::ffi::OsStr::new));
            argv.extend(revs.iter().map(std::ffi::OsStr::new));
            self.check(worktree, &argv, &what)
        };
        let numstat = diff(&["--numstat", "-z"])?;
        let mut files = numstat_files(&numstat.stdout);
        let patch = diff(&["-U3"])?;
        let truncated = attach_hunks(&mut files, &patch.stdout)?;
        Ok((files, truncated))
    }
}

fn commit(line: &str) -> Option<Commit> {
    let mut f = line.splitn(4, '\u{1f}');
    Some(Commit {
        sha: f.next()?.to_string(),
        author: f.next()?.to_string(),
        at: f.next()?.parse().ok()?,
        subject: f.next().unwrap_or("").to_string(),
    })
}

/// The files of `diff --numstat -z`: `ADDED\tREMOVED\tPATH\0`, or for a rename
/// `ADDED\tREMOVED\t\0OLD\0NEW\0`; `-` counts mark a binary file.
fn numstat_files(out: &str) -> Vec<FileDiff> {
    let mut fields = out.split('\0');
    let mut files = Vec::new();
    while let Some(head) = fields.next() {
        let head = head.trim_start_matches('\n');
        if head.is_empty() {
            continue;
        }
        let mut parts = head.splitn(3, '\t');
        let (Some(a), Some(r), Some(path)) = (parts.next(), parts.next(), parts.next()) else {
            continue;
        };
        let binary = a == "-" && r == "-";
        let (path, old_path) = if path.is_empty() {
            let old = fields.next().unwrap_or_default().to_string();
            (fields.next().unwrap_or_default().to_string(), Some(old))
        } else {
            (path.to_string(), None)
        };
        files.push(FileDiff {
            path,
            status: if old_path.is_some() {
                "renamed"
            } else {
                "modified"
            },
            old_path,
            added: a.parse().unwrap_or(0),
            removed: r.parse().unwrap_or(0),
            binary,
            hunks: Vec::new(),
        });
    }
    files
}

/// Gives each file the hunks of its section of `patch` (the sections come in the
/// numstat's order), and its status from the section's header. True when the patch
/// was cut at [`MAX_PATCH_BYTES`].
fn attach_hunks(files: &mut [FileDiff], patch: &str) -> Result<bool> {
    let truncated = patch.len() > MAX_PATCH_BYTES;
    let mut cut = patch.len().min(MAX_PATCH_BYTES);
    while !patch.is_char_boundary(cut) {
        cut -= 1;
    }
    let patch = &patch[..cut];
    let sections: Vec<&str> = split_sections(patch);
    if sections.len() > files.len() {
        return Err(Error::Other(format!(
            "git's patch has {} files, its numstat {}",
            sections.len(),
            files.len()
        )));
    }
    let whole = if truncated {
        sections.len().saturating_sub(1)
    } else {
        sections.len()
    };
    for (file, section) in files.iter_mut().zip(&sections).take(whole) {
        let mut lines = section.lines();
        for l in lines.by_ref() {
            if l.starts_with("new file mode") {
                file.status = "added";
            } else if l.starts_with("deleted file mode") {
                file.status = "deleted";
            } else if l.starts_with("@@") {
                file.hunks.push(hunk_header(l)?);
            } else if let Some(h) = file.hunks.last_mut() {
                push_line(h, l);
            }
        }
    }
    Ok(truncated)
}

/// The patch split at each `diff --git` line.
fn split_sections(patch: &str) -> Vec<&str> {
    let mut starts: Vec<usize> = patch
        .match_indices("diff --git ")
        .map(|(i, _)| i)
        .filter(|&i| i == 0 || patch.as_bytes()[i - 1] == b'\n')
        .collect();
    starts.push(patch.len());
    starts.windows(2).map(|w| &patch[w[0]..w[1]]).collect()
}

/// `@@ -a[,b] +c[,d] @@ section`.
fn hunk_header(l: &str) -> Result<Hunk> {
    let bad = || Error::Other(format!("cannot read the hunk header {l:?}"));
    let rest = l.strip_prefix("@@ -").ok_or_else(bad)?;
    let (ranges, section) = rest.split_once(" @@").ok_or_else(bad)?;
    let (old, new) = ranges.split_once(" +").ok_or_else(bad)?;
    let range = |r: &str| -> Result<(u64, u64)> {
        let (s, n) = r.split_once(',').unwrap_or((r, "1"));
        Ok((s.parse().map_err(|_| bad())?, n.parse().map_err(|_| bad())?))
    };
    let (old_start, old_lines) = range(old)?;
    let (new_start, new_lines) = range(new)?;
    Ok(Hunk {
        old_start,
        old_lines,
        new_start,
        new_lines,
        section: section.trim().to_string(),
        lines: Vec::new(),
    })
}

/// Adds a patch line to its hunk with its numbers; `\ No newline` notes are dropped.
fn push_line(h: &mut Hunk, l: &str) {
    let (olds, news) = h.lines.iter().fold((0, 0), |(o, n), x| {
        (o + u64::from(x.kind != '+'), n + u64::from(x.kind != '-'))
    });
    let (kind, text) = match l.chars().next() {
        Some(c @ (' ' | '+' | '-')) => (c, &l[1..]),
        None => (' ', ""),
        _ => return,
    };
    if (kind != '+' && olds >= h.old_lines) || (kind != '-' && news >= h.new_lines) {
        return;
    }
    h.lines.push(Line {
        kind,
        old: (kind != '+').then_some(h.old_start + olds),
        new: (kind != '-').then_some(h.new_start + news),
        text: text.to_string(),
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::git::testutil::{repo_with_task_worktree, sh};
    use crate::git::Runner;

    #[test]
    fn a_branch_s_review_has_its_commits_files_and_numbered_lines() {
        let (_dir, repo, wt) = repo_with_task_worktree();
        std::fs::write(repo.join("a.txt"), "one\ntwo\nthree\nfour\n").unwrap();
        sh(&repo, &["commit", "-q", "-am", "base"]);
        sh(&wt, &["merge", "-q", "--ff-only", "main"]);
        std::fs::write(wt.join("a.txt"), "one\n2\nthree\nfour\nfive\n").unwrap();
        sh(&wt, &["commit", "-q", "-am", "edit a"]);
        std::fs::write(wt.join("b b.txt"), "new file\n").unwrap();
        sh(&wt, &["add", "b b.txt"]);
        sh(&wt, &["commit", "-q", "-m", "add b"]);
        std::fs::write(wt.join("bin"), [0u8, 1, 2, 3]).unwrap();
        sh(&wt, &["add", "bin"]);
        sh(&wt, &["commit", "-q", "-m", "a binary"]);
        // Base moving on afterwards is not the branch's change.
        std::fs::write(repo.join("c.txt"), "base only\n").unwrap();
        sh(&repo, &["add", "c.txt"]);
        sh(&repo, &["commit", "-q", "-m", "base moves"]);
        let git = Git::open(&repo, Runner::new(std::env::vars_os())).unwrap();
        let r = git.review(&wt, "main", "HEAD").unwrap();
        let subjects: Vec<&str> = r.commits.iter().map(|c| c.subject.as_str()).collect();
        assert_eq!(subjects, ["edit a", "add b", "a binary"]);
        let paths: Vec<(&str, &str)> = r
            .files
            .iter()
            .map(|f| (f.path.as_str(), f.status))
            .collect();
        assert_eq!(
            paths,
            [
                ("a.txt", "modified"),
                ("b b.txt", "added"),
                ("bin", "added")
            ]
        );
        let a = &r.files[0];
        assert_eq!((a.added, a.removed), (2, 1));
        let lines: Vec<(char, Option<u64>, Option<u64>, &str)> = a.hunks[0]
            .lines
            .iter()
            .map(|l| (l.kind, l.old, l.new, l.text.as_str()))
            .collect();
        assert_eq!(
            lines,
            [
                (' ', Some(1), Some(1), "one"),
                ('-', Some(2), None, "two"),
                ('+', None, Some(2), "2"),
                (' ', Some(3), Some(3), "three"),
                (' ', Some(4), Some(4), "four"),
                ('+', None, Some(5), "five"),
            ]
        );
        assert!(r.files[2].binary && r.files[2].hunks.is_empty());
        assert_eq!((r.added, r.removed), (3, 1));
        assert!(!r.truncated);
    }

    #[test]
    fn a_rename_keeps_where_it_came_from() {
        let out = "1\t0\t\0old name.rs\0new.rs\0-\t-\tx.png\0";
        let files = numstat_files(out);
        assert_eq!(files[0].path, "new.rs");
        assert_eq!(files[0].old_path.as_deref(), Some("old name.rs"));
        assert_eq!(files[0].status, "renamed");
        assert!(files[1].binary);
    }
}
