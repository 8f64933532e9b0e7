//! `apply_patch`: finding a patch in a tool call and reading its file operations.
//!
//! The grammar is Codex's own: `*** Begin Patch`, then `*** Add File: p`,
//! `*** Update File: p` (optionally followed by `*** Move to: q`) or `*** Delete File: p`
//! headers with their hunks, then `*** End Patch`. Only the headers matter here; hunk
//! lines never start with `*** `, so they are skipped without being read.

use crate::transcript::event::ChangeKind;

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Change {
    pub path: String,
    pub kind: ChangeKind,
}

const BEGIN: &str = "*** Begin Patch";

/// The file operations of a patch, in order. Text before `*** Begin Patch` and after
/// `*** End Patch` is ignored; a patch without headers yields nothing.
pub(super) fn parse(patch: &str) -> Vec<Change> {
    let body = patch
        .find(BEGIN)
        .map_or(patch, |i| &patch[i + BEGIN.len()..]);
    let mut changes: Vec<Change> = Vec::new();
    for line in body.lines() {
        let line = line.trim_end();
        let Some(header) = line.strip_prefix("*** ") else {
            continue;
        };
        if header == "End Patch" {
            break;
        }
        let (kind, path) = if let Some(p) = header.strip_prefix("Add File: ") {
            (ChangeKind::Add, p)
        } else if let Some(p) = header.strip_prefix("Update File: ") {
            (ChangeKind::Update, p)
        } else if let Some(p) = header.strip_prefix("Delete File: ") {
            (ChangeKind::Delete, p)
        } else if let Some(to) = header.strip_prefix("Move to: ") {
            if let Some(last) = changes.last_mut().filter(|c| c.kind == ChangeKind::Update) {
                last.kind = ChangeKind::Move {
                    to: to.trim().to_string(),
                };
            }
            continue;
        } else {
            continue;
        };
        let path = path.trim();
        if !path.is_empty() {
            changes.push(Change {
                path: path.to_string(),
                kind,
            });
        }
    }
    changes
}

/// The patch a shell argv applies: `["apply_patch", "<patch>"]`.
pub(super) fn from_argv<'a>(argv: &[&'a str]) -> Option<&'a str> {
    match argv {
        [tool, patch, ..] if is_tool(tool.rsplit('/').next().unwrap_or(tool)) => Some(patch),
        _ => None,
    }
}

/// The patch a shell script applies: `apply_patch <<'PATCH'` … (or `apply_patch "…"`),
/// recognised by the tool's name before `*** Begin Patch`.
pub(super) fn from_script(script: &str) -> Option<&str> {
    let begin = script.find(BEGIN)?;
    let before = &script[..begin];
    let invoked = before
        .split(|c: char| c.is_whitespace() || matches!(c, ';' | '&' | '|' | '(' | '\'' | '"' | '<'))
        .any(is_tool);
    invoked.then(|| &script[begin..])
}

fn is_tool(word: &str) -> bool {
    matches!(word, "apply_patch" | "applypatch")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_headers_and_moves() {
        let p = "*** Begin Patch\n*** Add File: a.txt\n+hi\n*** Update File: b.rs\n*** Move to: c.rs\n@@\n-x\n+y\n\
                 *** Delete File: d\n*** End Patch\n*** Add File: ignored";
        let got = parse(p);
        assert_eq!(
            got,
            vec![
                Change {
                    path: "a.txt".into(),
                    kind: ChangeKind::Add
                },
                Change {
                    path: "b.rs".into(),
                    kind: ChangeKind::Move { to: "c.rs".into() }
                },
                Change {
                    path: "d".into(),
                    kind: ChangeKind::Delete
                },
            ]
        );
    }

    #[test]
    fn finds_patches_in_commands() {
        let script = "cd x && apply_patch <<'PATCH'\n*** Begin Patch\n*** Update File: f\n*** End Patch\nPATCH";
        assert!(from_script(script).unwrap().starts_with(BEGIN));
        assert!(from_script("cat <<'EOF' > notes\n*** Begin Patch\nEOF").is_none());
        assert_eq!(from_argv(&["apply_patch", "P"]), Some("P"));
        assert_eq!(from_argv(&["bash", "-lc", "ls"]), None);
    }
}
