//! Who a steering item is for, and which targets an agent answers to.
//!
//! An item names one target: a lane, a worktree (by path) or a session. An agent
//! running in a lane answers to all three of its own: the session it runs as, the
//! lane it runs in, and the worktree it works in. [`agent_targets`] is the one place
//! that set is built, so the lane loop, `spice exec`, the Claude Code hook, `fleet
//! status` and the console all count and show the same items.
//!
//! Invariant: a worktree is named by its canonical path (what `spice steer
//! worktree:PATH` stores and what `spice exec` sees as its cwd); the path as given is
//! kept beside it when it differs, so an item addressed to the path the claim
//! recorded (a symlinked state directory, say) reaches the same agent.

use serde::Serialize;
use std::path::Path;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TargetKind {
    Lane,
    Worktree,
    Session,
}

impl TargetKind {
    pub fn as_str(self) -> &'static str {
        match self {
            TargetKind::Lane => "lane",
            TargetKind::Worktree => "worktree",
            TargetKind::Session => "session",
        }
    }
    pub(super) fn parse(s: &str) -> TargetKind {
        match s {
            "lane" => TargetKind::Lane,
            "worktree" => TargetKind::Worktree,
            _ => TargetKind::Session,
        }
    }
}

/// Who an item is for.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, serde::Deserialize)]
pub struct Target {
    pub kind: TargetKind,
    pub name: String,
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.kind.as_str(), self.name)
    }
}

/// Every target an agent answers to: its session, its lane, its worktree (canonical,
/// and as given when that differs), in that order. Any of the three may be unknown
/// (`spice exec` outside a fleet knows only its worktree; an idle lane has no session
/// and no worktree). Earlier sessions of the same claim are not included: the lane
/// gives a successor only what is addressed to it, its lane and its worktree.
pub fn agent_targets(
    session: Option<&str>,
    lane: Option<&str>,
    worktree: Option<&Path>,
) -> Vec<Target> {
    let mut out = Vec::with_capacity(4);
    if let Some(s) = session.filter(|s| !s.is_empty()) {
        out.push(Target {
            kind: TargetKind::Session,
            name: s.to_string(),
        });
    }
    if let Some(l) = lane.filter(|l| !l.is_empty()) {
        out.push(Target {
            kind: TargetKind::Lane,
            name: l.to_string(),
        });
    }
    if let Some(wt) = worktree.filter(|w| !w.as_os_str().is_empty()) {
        let canonical = std::fs::canonicalize(wt).unwrap_or_else(|_| wt.to_path_buf());
        for p in [canonical.as_path(), wt] {
            let t = Target {
                kind: TargetKind::Worktree,
                name: p.display().to_string(),
            };
            if !out.contains(&t) {
                out.push(t);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(t: &[Target]) -> Vec<String> {
        t.iter().map(Target::to_string).collect()
    }

    #[test]
    fn an_agent_answers_to_its_session_lane_and_worktree_both_spellings() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real");
        std::fs::create_dir_all(real.join("wt")).unwrap();
        std::os::unix::fs::symlink(&real, dir.path().join("link")).unwrap();
        let given = dir.path().join("link/wt");
        let canonical = std::fs::canonicalize(&given).unwrap();
        let t = agent_targets(Some("s1"), Some("a"), Some(&given));
        assert_eq!(
            names(&t),
            [
                "session s1".to_string(),
                "lane a".into(),
                format!("worktree {}", canonical.display()),
                format!("worktree {}", given.display()),
            ]
        );
        // A canonical path is named once; a missing one as given.
        let t = agent_targets(None, Some("a"), Some(&canonical));
        assert_eq!(t.len(), 2);
        let gone = dir.path().join("gone");
        let t = agent_targets(None, None, Some(&gone));
        assert_eq!(names(&t), [format!("worktree {}", gone.display())]);
        assert!(agent_targets(Some(""), None, None).is_empty());
    }
}
