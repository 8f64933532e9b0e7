//! Finding sessions on disk: Claude Code under `<claude home>/projects/<slug>/`, Codex
//! under `<codex home>/sessions/YYYY/MM/DD/rollout-*.jsonl`, matched to a directory.
//!
//! The caller passes the roots (the CLI reads `HOME`, `CLAUDE_CONFIG_DIR`, `CODEX_HOME`);
//! nothing here reads the environment. Subagent files (`agent-*.jsonl`, `subagents/`)
//! are not sessions of their own.

use super::event::Agent;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

pub struct Roots {
    /// `~/.claude/projects`
    pub claude_projects: PathBuf,
    /// `~/.codex/sessions`
    pub codex_sessions: PathBuf,
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct SessionFile {
    pub path: PathBuf,
    pub agent: Agent,
    pub session_id: Option<String>,
    #[serde(skip)]
    pub modified: SystemTime,
    pub size: u64,
    pub cwd: Option<String>,
}

/// Claude's project directory name for `cwd`: every non-alphanumeric character → `-`.
pub fn claude_slug(cwd: &Path) -> String {
    cwd.to_string_lossy()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect()
}

/// Sessions whose working directory is `cwd`, newest last.
pub fn sessions_for(roots: &Roots, cwd: &Path) -> Vec<SessionFile> {
    let mut out = Vec::new();
    let dir = roots.claude_projects.join(claude_slug(cwd));
    if let Ok(rd) = std::fs::read_dir(&dir) {
        for e in rd.flatten() {
            let p = e.path();
            let name = e.file_name().to_string_lossy().to_string();
            if name.ends_with(".jsonl") && !name.starts_with("agent-") {
                if let Some(f) = describe(&p, Agent::Claude) {
                    out.push(SessionFile {
                        cwd: Some(cwd.display().to_string()),
                        ..f
                    });
                }
            }
        }
    }
    let want = cwd.display().to_string();
    for p in codex_rollouts(&roots.codex_sessions) {
        if let Some(f) = describe(&p, Agent::Codex) {
            if f.cwd.as_deref() == Some(want.as_str()) {
                out.push(f);
            }
        }
    }
    out.sort_by_key(|f| f.modified);
    out
}

/// Every `rollout-*.jsonl` under the Codex sessions tree.
pub fn codex_rollouts(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            let name = e.file_name().to_string_lossy().to_string();
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                stack.push(p);
            } else if name.starts_with("rollout-") && name.ends_with(".jsonl") {
                out.push(p);
            }
        }
    }
    out
}

/// Where Claude Code 2.x records the sub-agents of the session whose transcript is
/// `main` (`<dir>/<session>.jsonl`), in name order: the files under
/// `<dir>/<session>/subagents/` (2.1.x), and the sibling `<dir>/agent-*.jsonl` files,
/// modified since `since`, whose records name the session (2.0.x; only their first
/// records are read).
pub fn claude_subagent_files(main: &Path, since: SystemTime) -> Vec<PathBuf> {
    let (Some(dir), Some(session)) = (main.parent(), main.file_stem()) else {
        return Vec::new();
    };
    let listed = |d: &Path| -> Vec<PathBuf> {
        let Ok(rd) = std::fs::read_dir(d) else {
            return Vec::new();
        };
        rd.flatten()
            .map(|e| e.path())
            .filter(|p| {
                p.extension().is_some_and(|x| x == "jsonl")
                    && p.file_name()
                        .and_then(|n| n.to_str())
                        .is_some_and(|n| n.starts_with("agent-"))
            })
            .collect()
    };
    let mut out = listed(&dir.join(session).join("subagents"));
    let session = session.to_string_lossy();
    out.extend(listed(dir).into_iter().filter(|p| {
        std::fs::metadata(p)
            .and_then(|m| m.modified())
            .is_ok_and(|m| m >= since)
            && head_fields(p, Agent::Claude).0.as_deref() == Some(session.as_ref())
    }));
    out.sort();
    out
}

/// Size, time and the identity fields from the first records of a session file.
pub fn describe(path: &Path, agent: Agent) -> Option<SessionFile> {
    let md = std::fs::metadata(path).ok()?;
    let (session_id, cwd) = head_fields(path, agent);
    Some(SessionFile {
        path: path.to_path_buf(),
        agent,
        session_id,
        modified: md.modified().unwrap_or(SystemTime::UNIX_EPOCH),
        size: md.len(),
        cwd,
    })
}

/// Session id and cwd from the first 50 records (never the whole file, and never a
/// whole line in memory: a first line can be megabytes, see [`super::head`]).
fn head_fields(path: &Path, agent: Agent) -> (Option<String>, Option<String>) {
    let Ok(f) = std::fs::File::open(path) else {
        return (None, None);
    };
    let (mut id, mut cwd) = (None, None);
    let mut seen = 0;
    super::head::records(f, |r| {
        match agent {
            Agent::Claude => {
                id = id.take().or_else(|| r.session_id.clone());
                cwd = cwd.take().or_else(|| r.cwd.clone());
            }
            Agent::Codex => {
                // The session's own record: `session_meta`, or (older rollouts) a
                // first line without a type; its fields in `payload` when it has one.
                if r.object && matches!(r.ty.as_deref(), Some("session_meta") | None) {
                    let (i, c) = if r.has_payload {
                        (&r.payload_id, &r.payload_cwd)
                    } else {
                        (&r.id, &r.cwd)
                    };
                    id = id.take().or_else(|| i.clone());
                    cwd = cwd.take().or_else(|| c.clone());
                }
            }
        }
        seen += 1;
        (id.is_none() || cwd.is_none()) && seen < 50
    });
    (id, cwd)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slugs_follow_claude() {
        assert_eq!(
            claude_slug(Path::new("/home/marco/projects/spotter")),
            "-home-marco-projects-spotter"
        );
        assert_eq!(claude_slug(Path::new("/.x")), "--x");
    }
}
