//! Finding sessions on disk: Claude Code under `<claude home>/projects/<slug>/`, Codex
//! under `<codex home>/sessions/YYYY/MM/DD/rollout-*.jsonl`, Gemini CLI under
//! `<gemini home>/tmp/<project>/chats/session-*.jsonl` (matched by the SHA-256 of the
//! directory its header names as `projectHash`), Qwen Code under
//! `<qwen home>/projects/<slug>/chats/*.jsonl` (by the `cwd` its records carry),
//! matched to a directory.
//!
//! The caller passes the roots (the CLI reads `HOME`, `CLAUDE_CONFIG_DIR`, `CODEX_HOME`,
//! `GEMINI_CLI_HOME`, `QWEN_HOME`); nothing here reads the environment. Subagent files (`agent-*.jsonl`, `subagents/`)
//! are not sessions of their own.

use super::event::Agent;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

pub struct Roots {
    /// `~/.claude/projects`
    pub claude_projects: PathBuf,
    /// `~/.codex/sessions`
    pub codex_sessions: PathBuf,
    /// `~/.gemini/tmp`
    pub gemini_tmp: PathBuf,
    /// `~/.qwen/projects`
    pub qwen_projects: PathBuf,
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
    let hash = project_hash(cwd);
    for p in glob_files(&roots.gemini_tmp, "*/chats/session-*.jsonl") {
        if gemini_project(&p).as_deref() == Some(hash.as_str()) {
            if let Some(f) = describe(&p, Agent::Gemini) {
                out.push(SessionFile {
                    cwd: Some(want.clone()),
                    ..f
                });
            }
        }
    }
    for p in glob_files(&roots.qwen_projects, "*/chats/*.jsonl") {
        if let Some(f) = describe(&p, Agent::Qwen) {
            if f.cwd.as_deref() == Some(want.as_str()) {
                out.push(f);
            }
        }
    }
    out.sort_by_key(|f| f.modified);
    out
}

/// Gemini CLI's `projectHash` for a project directory: the SHA-256 of its path, in
/// lowercase hex.
pub fn project_hash(dir: &Path) -> String {
    let d = ring::digest::digest(&ring::digest::SHA256, dir.as_os_str().as_encoded_bytes());
    d.as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

/// The `projectHash` a Gemini CLI session file's header names.
fn gemini_project(path: &Path) -> Option<String> {
    let f = std::fs::File::open(path).ok()?;
    let mut hash = None;
    let mut seen = 0;
    super::head::records(f, |r| {
        hash = r.project_hash.clone();
        seen += 1;
        hash.is_none() && seen < 5
    });
    hash
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

/// The files under `dir` matching `pattern`: components separated by `/`, where `*`
/// matches any run of characters within one component and `?` one character. At most
/// [`GLOB_MAX`] files, and never a symbolic link followed (to a directory or a file).
pub fn glob_files(dir: &Path, pattern: &str) -> Vec<PathBuf> {
    let parts: Vec<&str> = pattern.split('/').filter(|c| !c.is_empty()).collect();
    let mut out = Vec::new();
    walk_glob(dir, &parts, &mut out);
    out
}

/// The most files [`glob_files`] returns.
pub const GLOB_MAX: usize = 10_000;

fn walk_glob(dir: &Path, parts: &[&str], out: &mut Vec<PathBuf>) {
    let Some((first, rest)) = parts.split_first() else {
        return;
    };
    if !first.contains(['*', '?']) {
        let p = dir.join(first);
        if rest.is_empty() {
            // Never through a symbolic link: the files are the agent's to plant.
            let file = std::fs::symlink_metadata(&p).is_ok_and(|m| m.is_file());
            if file && out.len() < GLOB_MAX {
                out.push(p);
            }
        } else if std::fs::symlink_metadata(&p).is_ok_and(|m| m.is_dir()) {
            walk_glob(&p, rest, out);
        }
        return;
    }
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let name = e.file_name();
        let Some(name) = name.to_str() else { continue };
        if !wildcard(first, name) {
            continue;
        }
        let Ok(ty) = e.file_type() else { continue };
        if rest.is_empty() {
            if ty.is_file() && out.len() < GLOB_MAX {
                out.push(e.path());
            }
        } else if ty.is_dir() {
            walk_glob(&e.path(), rest, out);
        }
    }
}

/// Whether `name` matches `pattern` (`*`: any run, `?`: one character).
pub fn wildcard(pattern: &str, name: &str) -> bool {
    let (p, n): (Vec<char>, Vec<char>) = (pattern.chars().collect(), name.chars().collect());
    let (mut pi, mut ni, mut star, mut mark) = (0, 0, None, 0);
    while ni < n.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == n[ni]) {
            pi += 1;
            ni += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some(pi);
            mark = ni;
            pi += 1;
        } else if let Some(s) = star {
            pi = s + 1;
            mark += 1;
            ni = mark;
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|c| *c == '*')
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
            // A recording names no session and no directory.
            Agent::Terminal => return false,
            Agent::Claude | Agent::Qwen | Agent::Gemini => {
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
    fn globs_match_within_components() {
        assert!(wildcard(
            "session-*.jsonl",
            "session-2026-12-07T02-36-0a1b2c3d.jsonl"
        ));
        assert!(wildcard("*", "x"));
        assert!(wildcard("a?c*", "abc"));
        assert!(!wildcard("session-*.jsonl", "session-x.json"));
        assert!(!wildcard("a*b", "acbd"));
        let d = tempfile::tempdir().unwrap();
        for f in [
            "p1/chats/s1.jsonl",
            "p2/chats/s2.jsonl",
            "p2/other/s3.jsonl",
            "p3/chats/x.txt",
        ] {
            let p = d.path().join(f);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, "").unwrap();
        }
        let mut found = glob_files(d.path(), "*/chats/*.jsonl");
        found.sort();
        assert_eq!(
            found,
            [
                d.path().join("p1/chats/s1.jsonl"),
                d.path().join("p2/chats/s2.jsonl")
            ]
        );
        assert_eq!(glob_files(d.path(), "p1/chats/s1.jsonl").len(), 1);
    }

    #[test]
    fn slugs_follow_claude() {
        assert_eq!(
            claude_slug(Path::new("/home/marco/projects/spotter")),
            "-home-marco-projects-spotter"
        );
        assert_eq!(claude_slug(Path::new("/.x")), "--x");
    }
}
