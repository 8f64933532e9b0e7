//! A resume on this host of a conversation another host (or another home) wrote.
//!
//! An agent resumes a conversation from the transcript where its profile says it is
//! (`[transcript] dir` and `glob`, expanded with this host's home, worktree and the
//! conversation's id). A successor on another host than its predecessor (a lane taken
//! from a lost host), or under another `HOME`, finds nothing there: the CLI refuses to
//! resume (Claude Code: "No conversation found"), the session dies at once, and the
//! lane would crash-loop on a resume that cannot work.
//!
//! Invariants:
//! - When the profile names the transcript outright (no wildcard) and it is missing
//!   here, the transcript the claim's sessions last recorded is copied there if this
//!   host can read it (a shared filesystem; one machine under two homes): the resume
//!   continues the conversation. Recorded as `transcript_restored`.
//! - When it cannot be read here (or is gone), the session starts afresh from its brief (which
//!   names the predecessor and its transcript) instead of resuming; recorded as
//!   `resume_unavailable`, with where the conversation was written, and said on
//!   stderr. Nothing is lost that the ledger and the worktree hold.
//! - A copy is written whole under a temporary name, then renamed; an existing file
//!   is never overwritten.
//! - A profile whose transcript is found by searching (a wildcard, as Codex's
//!   rollouts) is left as it is: the file the agent will look for is not known.

use super::Lane;
use crate::config::profile::Placeholder;
use crate::error::Result;
use crate::fleet::follow::transcript_place;
use crate::transcript::discover::claude_slug;
use serde_json::json;
use std::path::{Path, PathBuf};

impl Lane<'_> {
    /// Whether session `session` may resume `conversation` in `worktree` with the
    /// agent's `home` ([`prepare`]): a transcript copied here is followed from its new
    /// place (`transcript_restored`); `false` when it must start afresh
    /// (`resume_unavailable`, said on stderr), its recorded transcript forgotten.
    pub(super) fn resumable_here(
        &mut self,
        task: &str,
        session: &str,
        conversation: &str,
        worktree: &Path,
        home: &str,
    ) -> Result<bool> {
        // The placeholders a transcript's `dir` and `glob` know.
        let place = |p: Placeholder| -> Option<String> {
            Some(match p {
                Placeholder::SessionId => conversation.to_string(),
                Placeholder::Worktree => worktree.display().to_string(),
                Placeholder::Home => home.to_string(),
                Placeholder::CwdSlug => claude_slug(worktree),
                _ => return None,
            })
        };
        let (expected, _) = transcript_place(self.cfg, &place);
        let recorded = self.row.transcript.as_ref().map(PathBuf::from);
        let lane = self.cfg.name.clone();
        let (kind, mut detail, resumable) = match prepare(
            conversation,
            expected.as_deref(),
            recorded.as_deref(),
        ) {
            ResumeHere::Resume => return Ok(true),
            ResumeHere::Restored { from, to } => {
                self.row.transcript = Some(to.display().to_string());
                let detail = json!({ "from": from, "to": to });
                ("transcript_restored", detail, true)
            }
            ResumeHere::Fresh { why } => {
                tracing::warn!(
                    target: "spice", "lane {lane}: {why}; session {session} starts afresh from its brief"
                );
                self.row.transcript = None;
                (
                    "resume_unavailable",
                    json!({ "transcript": recorded, "why": why }),
                    false,
                )
            }
        };
        detail["lane"] = json!(lane);
        detail["conversation"] = json!(conversation);
        self.store.note(task, kind, session, detail)?;
        Ok(resumable)
    }
}

/// What a resume on this host can do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResumeHere {
    /// The transcript is where the agent will look (or nothing is known to check).
    Resume,
    /// It was copied there from `from`.
    Restored { from: PathBuf, to: PathBuf },
    /// It is not readable here: the session starts afresh.
    Fresh { why: String },
}

/// Decides (and, for [`ResumeHere::Restored`], makes) what a resume of `conversation`
/// can do when the agent will look for its transcript at `expected` and the claim's
/// sessions last recorded it at `recorded`.
pub fn prepare(conversation: &str, expected: Option<&Path>, recorded: Option<&Path>) -> ResumeHere {
    let Some(expected) = expected else {
        return ResumeHere::Resume;
    };
    if expected.exists() {
        return ResumeHere::Resume;
    }
    // No transcript recorded: nothing is known to check against (as before).
    let Some(from) = recorded else {
        return ResumeHere::Resume;
    };
    if from == expected {
        return ResumeHere::Fresh {
            why: format!(
                "the transcript of conversation {conversation} ({}) is gone",
                expected.display()
            ),
        };
    }
    match copy(from, expected) {
        Ok(()) => ResumeHere::Restored {
            from: from.to_path_buf(),
            to: expected.to_path_buf(),
        },
        Err(e) => ResumeHere::Fresh {
            why: format!(
                "the transcript of conversation {conversation} ({}) cannot be read on this \
                 host: {e}",
                from.display()
            ),
        },
    }
}

/// Copies `from` to `to` (its directory made): whole under a temporary name, then
/// linked to `to`, which fails if `to` appeared meanwhile (a rename would replace it:
/// the agent may have begun writing there).
fn copy(from: &Path, to: &Path) -> std::io::Result<()> {
    let dir = to.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let name = to
        .file_name()
        .map(|n| n.to_string_lossy())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{name}.spice-{}", std::process::id()));
    let result = std::fs::copy(from, &tmp).and_then(|_| match std::fs::hard_link(&tmp, to) {
        // A filesystem without hard links (EPERM): a rename, once `to` is not there.
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied && !to.exists() => {
            std::fs::rename(&tmp, to)
        }
        other => other,
    });
    let _ = std::fs::remove_file(&tmp);
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_transcript_already_in_place_is_resumed() {
        let dir = tempfile::tempdir().unwrap();
        let here = dir.path().join("c.jsonl");
        std::fs::write(&here, "{}\n").unwrap();
        assert_eq!(prepare("c", Some(&here), None), ResumeHere::Resume);
        assert_eq!(
            prepare("c", None, None),
            ResumeHere::Resume,
            "nothing to check"
        );
    }

    #[test]
    fn a_readable_transcript_elsewhere_is_copied_where_the_agent_looks() {
        let dir = tempfile::tempdir().unwrap();
        let there = dir.path().join("a/projects/x/c.jsonl");
        std::fs::create_dir_all(there.parent().unwrap()).unwrap();
        std::fs::write(&there, "{\"n\":1}\n{\"n\":2}\n").unwrap();
        let here = dir.path().join("b/projects/y/c.jsonl");
        assert_eq!(
            prepare("c", Some(&here), Some(&there)),
            ResumeHere::Restored {
                from: there.clone(),
                to: here.clone()
            }
        );
        assert_eq!(
            std::fs::read(&here).unwrap(),
            std::fs::read(&there).unwrap()
        );
        let left: Vec<_> = std::fs::read_dir(here.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(left.len(), 1, "no temporary file left: {left:?}");
    }

    #[test]
    fn a_copy_never_replaces_a_transcript_that_appeared_meanwhile() {
        let dir = tempfile::tempdir().unwrap();
        let there = dir.path().join("a.jsonl");
        std::fs::write(&there, "old\n").unwrap();
        let here = dir.path().join("b/c.jsonl");
        std::fs::create_dir_all(here.parent().unwrap()).unwrap();
        std::fs::write(&here, "the agent's own\n").unwrap();
        let e = copy(&there, &here).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::AlreadyExists, "{e}");
        assert_eq!(std::fs::read_to_string(&here).unwrap(), "the agent's own\n");
        let left = std::fs::read_dir(here.parent().unwrap()).unwrap().count();
        assert_eq!(left, 1, "no temporary file left");
    }

    #[test]
    fn an_unreadable_transcript_starts_afresh_and_says_where_it_was() {
        let dir = tempfile::tempdir().unwrap();
        let gone = dir.path().join("host-a/c.jsonl");
        let here = dir.path().join("b/c.jsonl");
        match prepare("c", Some(&here), Some(&gone)) {
            ResumeHere::Fresh { why } => {
                assert!(why.contains("conversation c"), "{why}");
                assert!(why.contains(&gone.display().to_string()), "{why}");
            }
            other => panic!("{other:?}"),
        }
        assert!(!here.exists());
        match prepare("c", Some(&here), Some(&here)) {
            ResumeHere::Fresh { why } => assert!(why.contains("is gone"), "{why}"),
            other => panic!("{other:?}"),
        }
        assert_eq!(
            prepare("c", Some(&here), None),
            ResumeHere::Resume,
            "nothing recorded: nothing to judge by"
        );
    }
}
