//! Steering anchored to lines: a review comment on `path:start-end` of an agent's
//! worktree becomes an ordinary steering item whose text carries the anchor and the
//! lines as they were, so the agent sees exactly what is meant and the console can show
//! the item (and the agent's ACK or NACK) at those lines, or say they changed since.
//!
//! The text of an anchored item, written by [`compose`] and read back by [`parse`]:
//!
//! ````text
//! Review of src/x.rs:40-42:
//! ```
//! the three lines, as they were
//! ```
//! the operator's comment
//! ````
//!
//! (the fence is one backtick longer than any run in the lines). Invariants: a path is
//! relative to the worktree and stays inside it (no `..`, no absolute path, no symlink
//! out); a range is 1-based, inclusive, at most [`MAX_LINES`] lines, within the file.

use crate::error::{Error, Result};
use crate::store::{Authority, Target, TargetKind};
use std::path::{Component, Path, PathBuf};

/// The most lines one comment may be anchored to.
pub const MAX_LINES: u64 = 400;
/// The largest file whose lines are read for an anchor.
const MAX_FILE_BYTES: u64 = 8 << 20;
/// What the first line of an anchored item starts with.
const LEAD: &str = "Review of ";

/// `path:start-end` (or `path:line`) in a worktree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Anchor {
    pub path: String,
    pub start: u64,
    pub end: u64,
}

impl std::str::FromStr for Anchor {
    type Err = Error;

    fn from_str(s: &str) -> Result<Anchor> {
        let bad = |why: &str| {
            Error::input(format!(
                "--at {s:?}: {why} (expected PATH:LINE or PATH:START-END)"
            ))
        };
        let (path, range) = s.rsplit_once(':').ok_or_else(|| bad("no line range"))?;
        let (a, b) = range.split_once('-').unwrap_or((range, range));
        let start: u64 = a
            .parse()
            .map_err(|_| bad("the start is not a line number"))?;
        let end: u64 = b.parse().map_err(|_| bad("the end is not a line number"))?;
        if start == 0 || end < start {
            return Err(bad(
                "lines count from 1 and the end may not come before the start",
            ));
        }
        if end - start >= MAX_LINES {
            return Err(bad(&format!("at most {MAX_LINES} lines")));
        }
        check_path(path).map_err(|why| bad(&why))?;
        Ok(Anchor {
            path: path.to_string(),
            start,
            end,
        })
    }
}

impl std::fmt::Display for Anchor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}-{}", self.path, self.start, self.end)
    }
}

/// A relative path of normal components only.
fn check_path(path: &str) -> std::result::Result<(), String> {
    if path.is_empty() {
        return Err("no path".into());
    }
    if path.contains(['\n', '\r', '\0']) {
        return Err("the path holds a line break".into());
    }
    let p = Path::new(path);
    if !p.components().all(|c| matches!(c, Component::Normal(_))) {
        return Err("the path must be relative to the worktree, without `..`".into());
    }
    Ok(())
}

/// The anchored lines as the file in `worktree` holds them now. The file's real path
/// must lie inside the worktree's.
pub fn excerpt(worktree: &Path, a: &Anchor) -> Result<Vec<String>> {
    let file = inside(worktree, &a.path)?;
    let meta = std::fs::metadata(&file).map_err(|e| Error::input(format!("{}: {e}", a.path)))?;
    if !meta.is_file() || meta.len() > MAX_FILE_BYTES {
        return Err(Error::input(format!(
            "{}: not a text file of at most {} MiB",
            a.path,
            MAX_FILE_BYTES >> 20
        )));
    }
    let bytes = std::fs::read(&file).map_err(|e| Error::input(format!("{}: {e}", a.path)))?;
    let text = String::from_utf8_lossy(&bytes);
    let lines: Vec<String> = text
        .lines()
        .skip(a.start as usize - 1)
        .take((a.end - a.start + 1) as usize)
        .map(str::to_string)
        .collect();
    if lines.len() as u64 != a.end - a.start + 1 {
        return Err(Error::input(format!(
            "{}: has {} lines, so no lines {}-{}",
            a.path,
            text.lines().count(),
            a.start,
            a.end
        )));
    }
    Ok(lines)
}

/// `worktree/path` once its real path is known to lie inside the worktree's.
fn inside(worktree: &Path, path: &str) -> Result<PathBuf> {
    let root = std::fs::canonicalize(worktree)
        .map_err(|e| Error::input(format!("worktree {}: {e}", worktree.display())))?;
    let real = std::fs::canonicalize(root.join(path))
        .map_err(|e| Error::input(format!("{path}: {e} (in {})", root.display())))?;
    if !real.starts_with(&root) {
        return Err(Error::input(format!(
            "{path} leads out of the worktree {}",
            root.display()
        )));
    }
    Ok(real)
}

/// The text of an item anchored at `a`, quoting `lines`, then `comment`.
pub fn compose(a: &Anchor, lines: &[String], comment: &str) -> String {
    let longest = lines
        .iter()
        .flat_map(|l| l.split(|c| c != '`'))
        .map(str::len)
        .max()
        .unwrap_or(0);
    let fence = "`".repeat(longest.max(2) + 1);
    let mut out = format!("{LEAD}{a}:\n{fence}\n");
    for l in lines {
        out.push_str(l);
        out.push('\n');
    }
    out.push_str(&fence);
    out.push('\n');
    out.push_str(comment.trim());
    out
}

/// An anchored item's anchor, the lines it quoted and the comment; `None` for an item
/// that is not anchored (or whose text does not hold together).
pub fn parse(text: &str) -> Option<(Anchor, Vec<String>, String)> {
    let mut lines = text.split('\n');
    let head = lines.next()?.strip_prefix(LEAD)?.strip_suffix(':')?;
    let anchor: Anchor = head.parse().ok()?;
    let fence = lines.next()?;
    if fence.len() < 3 || !fence.bytes().all(|b| b == b'`') {
        return None;
    }
    let mut quoted = Vec::new();
    for l in lines.by_ref() {
        if l == fence {
            let comment: Vec<&str> = lines.collect();
            return Some((anchor, quoted, comment.join("\n")));
        }
        quoted.push(l.to_string());
    }
    None
}

/// The worktree a steering target's agent works in: a worktree target itself, else
/// the worktree of the lane's (newest) or the session's claim.
pub fn worktree_of(store: &mut dyn Authority, target: &Target) -> Result<PathBuf> {
    if target.kind == TargetKind::Worktree {
        return Ok(PathBuf::from(&target.name));
    }
    let claims = store.claims()?;
    let held = claims
        .iter()
        .filter(|c| match target.kind {
            TargetKind::Lane => c.lane.as_deref() == Some(target.name.as_str()),
            _ => c.claimant == target.name,
        })
        .filter(|c| c.worktree.is_some())
        .max_by_key(|c| c.claimed_at);
    match held.and_then(|c| c.worktree.as_deref()) {
        Some(w) => Ok(PathBuf::from(w)),
        None => Err(Error::input(format!(
            "{target} holds no claim with a worktree, so there are no lines to anchor to"
        ))),
    }
}

/// The text of an item for `target` anchored at `a`: the lines read from the target's
/// worktree as they are now, then `comment`.
pub fn anchored(
    store: &mut dyn Authority,
    target: &Target,
    a: &Anchor,
    comment: &str,
) -> Result<String> {
    let worktree = worktree_of(store, target)?;
    Ok(compose(a, &excerpt(&worktree, a)?, comment))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn anchors_parse_and_refuse_what_leaves_the_worktree() {
        let a: Anchor = "src/x.rs:40-52".parse().unwrap();
        assert_eq!((a.path.as_str(), a.start, a.end), ("src/x.rs", 40, 52));
        let one: Anchor = "a b/c.rs:7".parse().unwrap();
        assert_eq!((one.start, one.end), (7, 7));
        for bad in [
            "x.rs",
            "x.rs:0",
            "x.rs:5-4",
            "x.rs:a-b",
            "/etc/passwd:1",
            "../x:1",
            "a/../../x:1",
            ":3",
            "x.rs:1-999",
        ] {
            let e = bad.parse::<Anchor>().unwrap_err().to_string();
            assert!(e.contains("--at"), "{bad}: {e}");
        }
    }

    #[test]
    fn composed_text_reads_back() {
        let a: Anchor = "src/x.rs:2-3".parse().unwrap();
        let lines = vec!["let s = \"```\";".to_string(), "".to_string()];
        let text = compose(&a, &lines, "  Use a raw string here.\n");
        assert!(
            text.starts_with("Review of src/x.rs:2-3:\n````\n"),
            "{text}"
        );
        let (back, quoted, comment) = parse(&text).unwrap();
        assert_eq!(back, a);
        assert_eq!(quoted, lines);
        assert_eq!(comment, "Use a raw string here.");
        assert!(parse("just steering").is_none());
        assert!(parse("Review of x.rs:1-1:\n```\nunclosed").is_none());
    }

    #[test]
    fn excerpts_come_from_inside_the_worktree() {
        let dir = tempfile::tempdir().unwrap();
        let wt = dir.path().join("wt");
        std::fs::create_dir_all(wt.join("src")).unwrap();
        std::fs::write(wt.join("src/x.rs"), "one\ntwo\nthree\n").unwrap();
        std::fs::write(dir.path().join("secret"), "s\n").unwrap();
        std::os::unix::fs::symlink(dir.path().join("secret"), wt.join("link")).unwrap();
        let a: Anchor = "src/x.rs:2-3".parse().unwrap();
        assert_eq!(excerpt(&wt, &a).unwrap(), ["two", "three"]);
        let past: Anchor = "src/x.rs:3-4".parse().unwrap();
        assert!(excerpt(&wt, &past)
            .unwrap_err()
            .to_string()
            .contains("has 3 lines"));
        let out: Anchor = "link:1".parse().unwrap();
        assert!(excerpt(&wt, &out)
            .unwrap_err()
            .to_string()
            .contains("leads out of the worktree"));
    }
}
