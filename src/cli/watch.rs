//! `spice watch` and `spice session`: the read-only rungs. Nothing here opens the
//! store or writes anywhere. A transcript whose original is gone is read from the
//! state directory's archive (`crate::archive`), found by its original path or its
//! session id, decompressed in memory.

use super::render::print_json;
use crate::error::{Error, Result};
use crate::transcript::discover::{self, Roots, SessionFile};
use crate::transcript::event::Agent;
use crate::transcript::render::{self, Style};
use crate::transcript::{briefing, sanitize};
use clap::{Args, Subcommand};
use std::io::IsTerminal;
use std::path::{Path, PathBuf};

mod follow;

#[derive(Debug, Args)]
pub struct WatchArgs {
    /// Transcript files or directories; none = the newest session of each agent
    /// (Claude Code, Codex, Gemini CLI, Qwen Code) for the current directory.
    paths: Vec<PathBuf>,
    /// Print what is there and exit.
    #[arg(long)]
    once: bool,
    /// Print normalised events as JSON Lines instead of text.
    #[arg(long)]
    json: bool,
    /// Include reasoning / thinking.
    #[arg(long)]
    reasoning: bool,
}

#[derive(Debug, Subcommand)]
pub enum SessionCmd {
    /// Sessions found for the current directory, or in the transcript files and
    /// directories given.
    List {
        /// Transcript files or directories (searched through); none = the sessions
        /// for the current directory, archived ones included.
        paths: Vec<PathBuf>,
        /// Print the sessions as a JSON array instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Every event of one session.
    Show {
        /// A session id (or its prefix) or a transcript path.
        session: String,
        /// Print the session's normalised events as JSON Lines instead of text.
        #[arg(long)]
        json: bool,
        /// Include reasoning / thinking.
        #[arg(long)]
        reasoning: bool,
    },
    /// What a session was asked, did, and where it stopped (Markdown, or --json).
    Briefing {
        /// A session id (or prefix) or a transcript path; default: the newest here.
        session: Option<String>,
        /// Print the briefing as one JSON object instead of Markdown.
        #[arg(long)]
        json: bool,
    },
}

/// The agents' homes, from the environment (this is the CLI layer).
pub(super) fn roots() -> Roots {
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_default();
    let claude = std::env::var_os("CLAUDE_CONFIG_DIR")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| home.join(".claude"));
    let codex = std::env::var_os("CODEX_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| home.join(".codex"));
    let gemini = std::env::var_os("GEMINI_CLI_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| home.clone());
    let qwen = std::env::var_os("QWEN_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| home.join(".qwen"));
    Roots {
        claude_projects: claude.join("projects"),
        codex_sessions: codex.join("sessions"),
        gemini_tmp: gemini.join(".gemini").join("tmp"),
        qwen_projects: qwen.join("projects"),
    }
}

fn cwd() -> PathBuf {
    std::env::current_dir().unwrap_or_default()
}

pub fn watch(args: WatchArgs) -> Result<()> {
    let mut dirs: Vec<PathBuf> = Vec::new();
    let mut files: Vec<PathBuf> = Vec::new();
    if args.paths.is_empty() {
        let here = cwd();
        let found = discover::sessions_for(&roots(), &here);
        for agent in [Agent::Claude, Agent::Codex, Agent::Gemini, Agent::Qwen] {
            if let Some(f) = found.iter().rev().find(|f| f.agent == agent) {
                files.push(f.path.clone());
            }
        }
        if files.is_empty() {
            let r = roots();
            return Err(Error::input(format!(
                "no Claude Code, Codex, Gemini CLI or Qwen Code session found for {} (looked in {}, {}, {} and {})",
                here.display(),
                r.claude_projects
                    .join(discover::claude_slug(&here))
                    .display(),
                r.codex_sessions.display(),
                r.gemini_tmp.display(),
                r.qwen_projects.display()
            )));
        }
    }
    let mut archived: Vec<crate::archive::Opened> = Vec::new();
    for p in &args.paths {
        if p.is_dir() {
            dirs.push(p.clone());
        } else if p.is_file() {
            files.push(p.clone());
        } else if let Some(a) = from_archive(&p.display().to_string())? {
            archived.push(a);
        } else {
            return Err(Error::input(format!(
                "{}: no such file or directory (nor an archived transcript of that path or session)",
                p.display()
            )));
        }
    }
    let style = Style {
        color: !args.json
            && std::env::var_os("NO_COLOR").is_none()
            && std::io::stdout().is_terminal(),
        reasoning: args.reasoning,
    };
    // An archived transcript is over: shown once, then the live ones are followed.
    let many = archived.len() + files.len() + dirs.len() > 1;
    for a in &archived {
        follow::print_archived(a, args.json, &style, many)?;
    }
    if !archived.is_empty() && files.is_empty() && dirs.is_empty() {
        return Ok(());
    }
    follow::run(
        dirs,
        files,
        follow::Options {
            json: args.json,
            once: args.once,
            style,
        },
    )
}

pub fn session(cmd: SessionCmd) -> Result<()> {
    match cmd {
        SessionCmd::List { paths, json } => {
            let (found, archived, place) = if paths.is_empty() {
                // Sessions whose transcripts are gone but archived, listed after the rest.
                let archived: Vec<crate::archive::Entry> = state_dir()
                    .map(|s| crate::archive::Archive::at(&s).gone_for(&cwd()))
                    .unwrap_or_default();
                let found = discover::sessions_for(&roots(), &cwd());
                (found, archived, format!("for {}", cwd().display()))
            } else {
                let shown: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
                (
                    sessions_in(&paths)?,
                    Vec::new(),
                    format!("in {}", shown.join(", ")),
                )
            };
            if json {
                let mut v: Vec<_> = found.iter().map(list_json).collect();
                v.extend(archived.iter().filter_map(archived_json));
                print_json(&v);
            } else if found.is_empty() && archived.is_empty() {
                println!("no sessions {place}");
            } else {
                for f in &found {
                    let v = list_json(f);
                    println!(
                        "{:<6} {:<38} {:>9} B  {}  {}",
                        format!("{:?}", f.agent).to_lowercase(),
                        f.session_id.as_deref().unwrap_or("?"),
                        f.size,
                        v["last_activity"].as_str().unwrap_or(""),
                        sanitize::one_line(v["first_prompt"].as_str().unwrap_or(""))
                    );
                }
                for v in archived.iter().filter_map(archived_json) {
                    println!(
                        "{:<6} {:<38} {:>9} B  {}  (archived) {}",
                        v["agent"].as_str().unwrap_or(""),
                        v["session_id"].as_str().unwrap_or("?"),
                        v["size"],
                        v["last_activity"].as_str().unwrap_or(""),
                        sanitize::one_line(v["first_prompt"].as_str().unwrap_or(""))
                    );
                }
            }
            Ok(())
        }
        SessionCmd::Show {
            session,
            json,
            reasoning,
        } => {
            let found = find(&session)?;
            let (_, events, _) = crate::transcript::read_file(found.read_path())?;
            let style = Style {
                color: std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none(),
                reasoning,
            };
            for e in &events {
                if json {
                    println!("{}", sanitize::json_line(e));
                } else if let Some(l) = render::event(e, &style) {
                    println!("{l}");
                }
            }
            Ok(())
        }
        SessionCmd::Briefing { session, json } => {
            let found = match session {
                Some(s) => find(&s)?,
                None => Found::Live(newest_here()?),
            };
            let (_, events, malformed) = crate::transcript::read_file(found.read_path())?;
            let b = briefing::brief(&found.shown().display().to_string(), &events, malformed);
            if json {
                println!("{}", sanitize::json_line(&b));
            } else {
                print!("{}", sanitize::for_terminal(&briefing::markdown(&b)));
            }
            Ok(())
        }
    }
}

/// The sessions in `paths`, newest last: each transcript file named, and every one
/// under each directory named (a sub-agent's file is its session's, not one of its
/// own; a file that is not a transcript is passed over).
fn sessions_in(paths: &[PathBuf]) -> Result<Vec<SessionFile>> {
    let mut out = Vec::new();
    for p in paths {
        if p.is_dir() {
            let subagent = |f: &Path| {
                f.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with("agent-"))
                    || f.strip_prefix(p)
                        .is_ok_and(|rel| rel.components().any(|c| c.as_os_str() == "subagents"))
            };
            for f in follow::jsonl_under(p).into_iter().filter(|f| !subagent(f)) {
                if let Ok(agent) = crate::transcript::detect_file(&f) {
                    out.extend(discover::describe(&f, agent));
                }
            }
        } else if p.is_file() {
            let agent = crate::transcript::detect_file(p)?;
            out.extend(discover::describe(p, agent));
        } else {
            return Err(Error::input(format!(
                "{}: no such file or directory",
                p.display()
            )));
        }
    }
    out.sort_by_key(|f| f.modified);
    Ok(out)
}

fn list_json(f: &SessionFile) -> serde_json::Value {
    let first = crate::transcript::first_prompt(&f.path, f.agent);
    let modified = f
        .modified
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| crate::when::rfc3339(d.as_micros() as i64))
        .unwrap_or_default();
    serde_json::json!({
        "agent": f.agent,
        "session_id": f.session_id,
        "path": f.path,
        "size": f.size,
        "last_activity": modified,
        "started": first.as_ref().and_then(|p| p.0).map(crate::when::rfc3339),
        "first_prompt": first.map(|p| crate::transcript::event::excerpt(&p.1, 200)),
    })
}

/// A `session list` row for an archived session: as a live one's, with `archived`
/// naming the copy (its `path` is the original's, which is gone).
fn archived_json(e: &crate::archive::Entry) -> Option<serde_json::Value> {
    let opened = crate::archive::open(e).ok()?;
    let agent = crate::transcript::detect_file(opened.path()).ok()?;
    let first = crate::transcript::first_prompt(opened.path(), agent);
    Some(serde_json::json!({
        "agent": agent,
        "session_id": e.meta.session_id,
        "path": e.meta.original,
        "size": e.meta.bytes_in,
        "last_activity": crate::when::rfc3339(e.meta.source_modified),
        "started": first.as_ref().and_then(|p| p.0).map(crate::when::rfc3339),
        "first_prompt": first.map(|p| crate::transcript::event::excerpt(&p.1, 200)),
        "archived": e.path,
    }))
}

fn newest_here() -> Result<PathBuf> {
    discover::sessions_for(&roots(), &cwd())
        .pop()
        .map(|f| f.path)
        .ok_or_else(|| {
            Error::input(format!(
                "no Claude or Codex session found for {}",
                cwd().display()
            ))
        })
}

/// A transcript to read: on disk, or an archived copy of one that is gone.
enum Found {
    Live(PathBuf),
    Archived(crate::archive::Opened),
}

impl Found {
    /// Where its bytes can be read.
    fn read_path(&self) -> &Path {
        match self {
            Found::Live(p) => p,
            Found::Archived(a) => a.path(),
        }
    }

    /// The path it is known by (an archived one's original).
    fn shown(&self) -> &Path {
        match self {
            Found::Live(p) => p,
            Found::Archived(a) => &a.entry.meta.original,
        }
    }
}

/// The state directory, if this process has one (`SPICE_HOME`, else the
/// repository's): only to read its archive.
fn state_dir() -> Option<PathBuf> {
    super::Env::from_process_any().ok().map(|e| e.state_dir)
}

/// The archived copy of the transcript that was at `what` (a path), else of the one
/// session whose id starts with `what`.
fn from_archive(what: &str) -> Result<Option<crate::archive::Opened>> {
    let Some(state) = state_dir() else {
        return Ok(None);
    };
    let archive = crate::archive::Archive::at(&state);
    let entry = match archive.by_path(Path::new(what)) {
        Some(e) => e,
        None => {
            let mut matches = archive.by_session(what);
            match matches.len() {
                0 => return Ok(None),
                1 => matches.remove(0),
                n => {
                    return Err(Error::input(format!(
                    "ambiguous session '{what}': {n} archived sessions match; type more of the id"
                )))
                }
            }
        }
    };
    crate::archive::open(&entry).map(Some)
}

/// A path as given, or the session whose id starts with `id` (this directory's first,
/// then every Claude project and Codex rollout, then the archive).
fn find(id: &str) -> Result<Found> {
    let p = Path::new(id);
    if p.is_file() {
        return Ok(Found::Live(p.to_path_buf()));
    }
    match find_live(id) {
        Ok(p) => Ok(Found::Live(p)),
        Err(e) => match from_archive(id)? {
            Some(a) => Ok(Found::Archived(a)),
            None => Err(e),
        },
    }
}

fn find_live(id: &str) -> Result<PathBuf> {
    let r = roots();
    let mut candidates: Vec<PathBuf> = discover::sessions_for(&r, &cwd())
        .into_iter()
        .filter(|f| f.session_id.as_deref().is_some_and(|s| s.starts_with(id)))
        .map(|f| f.path)
        .collect();
    if candidates.is_empty() {
        candidates = follow::jsonl_under(&r.claude_projects)
            .into_iter()
            .chain(discover::codex_rollouts(&r.codex_sessions))
            .filter(|p| {
                p.file_name()
                    .is_some_and(|n| n.to_string_lossy().contains(id))
            })
            .filter(|p| {
                !p.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with("agent-"))
            })
            .collect();
    }
    match candidates.len() {
        0 => Err(Error::input(format!(
            "unknown session '{id}': not a file, and no session id starts with it"
        ))),
        1 => Ok(candidates.remove(0)),
        n => Err(Error::input(format!(
            "ambiguous session '{id}': {n} sessions match; type more of the id"
        ))),
    }
}
