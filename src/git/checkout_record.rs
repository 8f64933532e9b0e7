//! The record of a checkout update in progress, and the status it compares: what
//! `checkout` writes before it lets git touch a checked-out `base`, and reads back to
//! tell "nothing changed" from "half-updated".
//!
//! Invariants: the record is written whole or not at all (a temporary file renamed
//! over it), lives in the checkout's own git directory (one per checkout), and only
//! the status entries of paths the update touches are kept, so the user's other work
//! in the tree never makes a record look stale or blocks a merge.

use super::{args, Git};
use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::path::Path;

/// The record of an update in progress, in the checkout's own git directory.
pub(super) const RECORD: &str = "spice-fast-forward.json";

/// What a checkout looked like before spice started moving it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct Record {
    pub base: String,
    pub from: String,
    pub to: String,
    /// `git status --porcelain=v2` entries of the paths the update touches.
    pub before: Vec<String>,
}

impl Git {
    /// Every path that differs between commits `a` and `b` (both sides of a rename).
    pub(super) fn touched(&self, a: &str, b: &str) -> Result<BTreeSet<String>> {
        let out = self.check(
            &self.repo,
            &args!["diff", "--name-only", "--no-renames", "-z", a, b],
            || format!("cannot compare {a} with {b} in {}", self.repo.display()),
        )?;
        Ok(out
            .stdout
            .split('\0')
            .filter(|p| !p.is_empty())
            .map(String::from)
            .collect())
    }

    /// The status entries (HEAD and index ids, work-tree flags) of the checkout at
    /// `wt` that concern `paths`, in git's order. Reads without taking any lock.
    pub(super) fn status_of(&self, wt: &Path, paths: &BTreeSet<String>) -> Result<Vec<String>> {
        let out = self.check(
            wt,
            &args![
                "--no-optional-locks",
                "status",
                "--porcelain=v2",
                "-z",
                "--untracked-files=normal",
                "--ignored=no",
                "--ignore-submodules=none",
            ],
            || format!("cannot read the status of {}", wt.display()),
        )?;
        Ok(entries(&out.stdout)
            .into_iter()
            .filter(|e| entry_paths(e).iter().any(|p| concerns(p, paths)))
            .collect())
    }
}

/// `git status --porcelain=v2 -z` entries, a rename's original path joined to its entry.
pub(super) fn entries(out: &str) -> Vec<String> {
    let mut list = Vec::new();
    let mut fields = out.split('\0').filter(|f| !f.is_empty());
    while let Some(f) = fields.next() {
        if f.starts_with("2 ") {
            list.push(format!("{f}\0{}", fields.next().unwrap_or_default()));
        } else {
            list.push(f.to_string());
        }
    }
    list
}

/// The paths one status entry names (two for a rename or copy).
pub(super) fn entry_paths(entry: &str) -> Vec<&str> {
    let (head, orig) = entry.split_once('\0').unwrap_or((entry, ""));
    let fields = match head.as_bytes().first() {
        Some(b'1') => 9,
        Some(b'2') => 10,
        Some(b'u') => 11,
        Some(b'?') | Some(b'!') => 2,
        _ => return vec![],
    };
    let path = head.splitn(fields, ' ').nth(fields - 1).unwrap_or_default();
    [path, orig].into_iter().filter(|p| !p.is_empty()).collect()
}

/// Whether a status path is one of `paths`, or an untracked directory holding one.
fn concerns(path: &str, paths: &BTreeSet<String>) -> bool {
    if path.ends_with('/') {
        paths
            .range(path.to_string()..)
            .next()
            .is_some_and(|p| p.starts_with(path))
    } else {
        paths.contains(path)
    }
}

pub(super) fn read_record(path: &Path) -> Result<Option<Record>> {
    match std::fs::read_to_string(path) {
        Ok(text) => serde_json::from_str(&text).map(Some).map_err(|e| {
            Error::Other(format!(
                "cannot read {} (spice's record of an unfinished checkout update): {e}",
                path.display()
            ))
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::Io {
            context: format!("failed to read {}", path.display()),
            source: e,
        }),
    }
}

/// Written whole or not at all (a temporary file renamed over it).
pub(super) fn write_record(path: &Path, record: &Record) -> Result<()> {
    let tmp = path.with_extension("json.tmp");
    let text = serde_json::to_string(record).expect("a record serialises");
    std::fs::write(&tmp, text)
        .and_then(|()| std::fs::rename(&tmp, path))
        .map_err(|e| Error::Io {
            context: format!("failed to write {}", path.display()),
            source: e,
        })
}

pub(super) fn remove_record(path: &Path) -> Result<()> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(Error::Io {
            context: format!("failed to remove {}", path.display()),
            source: e,
        }),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_entries_name_their_paths() {
        let out = concat!(
            "1 .M N... 100644 100644 100644 aaa aaa a file.txt\0",
            "2 R. N... 100644 100644 100644 aaa aaa R100 new name\0old name\0",
            "u UU N... 100644 100644 100644 100644 a b c conflict.txt\0",
            "? untracked dir/\0",
        );
        let e = entries(out);
        assert_eq!(e.len(), 4);
        let paths: Vec<Vec<&str>> = e.iter().map(|e| entry_paths(e)).collect();
        assert_eq!(
            paths,
            [
                vec!["a file.txt"],
                vec!["new name", "old name"],
                vec!["conflict.txt"],
                vec!["untracked dir/"],
            ]
        );
    }

    #[test]
    fn untracked_directories_concern_the_paths_inside_them() {
        let paths: BTreeSet<String> = ["a/b/c.txt", "d.txt"].map(String::from).into();
        assert!(concerns("d.txt", &paths));
        assert!(concerns("a/", &paths));
        assert!(concerns("a/b/", &paths));
        assert!(!concerns("a/c/", &paths));
        assert!(!concerns("e.txt", &paths));
        assert!(!concerns("d.txt/", &paths));
    }
}
