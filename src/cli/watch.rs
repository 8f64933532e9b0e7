//! `spice watch` and `spice session`: the read-only rungs. Nothing here opens the
//! store or writes anywhere.

use super::render::print_json;
use crate::error::{Error, Result};
use crate::transcript::discover::{self, Roots, SessionFile};
use crate::transcript::event::{Agent, Event};
use crate::transcript::follow::Follower;
use crate::transcript::render::{self, Style};
use crate::transcript::{briefing, jsonl, sanitize};
use clap::{Args, Subcommand};
use std::collections::HashMap;
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

#[derive(Debug, Args)]
pub struct WatchArgs {
    /// Transcript files or directories; none = the newest Claude and Codex sessions
    /// for the current directory.
    paths: Vec<PathBuf>,
    /// Print what is there and exit.
    #[arg(long)]
    once: bool,
    /// Normalised events as JSON Lines.
    #[arg(long)]
    json: bool,
    /// Include reasoning / thinking.
    #[arg(long)]
    reasoning: bool,
}

#[derive(Debug, Subcommand)]
pub enum SessionCmd {
    /// Sessions found for the current directory.
    List {
        #[arg(long)]
        json: bool,
    },
    /// Every event of one session.
    Show {
        /// A session id (or its prefix) or a transcript path.
        session: String,
        #[arg(long)]
        json: bool,
        #[arg(long)]
        reasoning: bool,
    },
    /// What a session was asked, did, and where it stopped (Markdown, or --json).
    Briefing {
        /// A session id (or prefix) or a transcript path; default: the newest here.
        session: Option<String>,
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
    Roots {
        claude_projects: claude.join("projects"),
        codex_sessions: codex.join("sessions"),
    }
}

fn cwd() -> PathBuf {
    std::env::current_dir().unwrap_or_default()
}

/// The stdout buffer, and the size of the blocks of `--json` lines written to it.
const JSON_BLOCK: usize = 1 << 16;

/// One followed file and what it decodes as.
struct Followed {
    label: String,
    follower: Follower,
    /// The start of its `--json` lines; `None` when the path is not UTF-8 (the lines
    /// are then `null`, as serde has it).
    json_prefix: Option<Vec<u8>>,
}

fn open(path: &Path) -> Result<Followed> {
    let agent = crate::transcript::detect_file(path)?;
    Ok(Followed {
        label: path
            .file_name()
            .map(|n| n.to_string_lossy().to_string())
            .unwrap_or_default(),
        follower: Follower::new(path, crate::transcript::decoder_fn(agent), None),
        json_prefix: jsonl::file_prefix(path),
    })
}

/// Every transcript under `dir` (sessions, sibling agent files, subagents/).
fn jsonl_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "jsonl") {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

pub fn watch(args: WatchArgs) -> Result<()> {
    let mut dirs: Vec<PathBuf> = Vec::new();
    let mut files: Vec<PathBuf> = Vec::new();
    if args.paths.is_empty() {
        let here = cwd();
        let found = discover::sessions_for(&roots(), &here);
        for agent in [Agent::Claude, Agent::Codex] {
            if let Some(f) = found.iter().rev().find(|f| f.agent == agent) {
                files.push(f.path.clone());
            }
        }
        if files.is_empty() {
            let r = roots();
            return Err(Error::input(format!(
                "no Claude or Codex session found for {} (looked in {} and {})",
                here.display(),
                r.claude_projects
                    .join(discover::claude_slug(&here))
                    .display(),
                r.codex_sessions.display()
            )));
        }
    }
    for p in &args.paths {
        if p.is_dir() {
            dirs.push(p.clone());
        } else if p.is_file() {
            files.push(p.clone());
        } else {
            return Err(Error::input(format!(
                "{}: no such file or directory",
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
    let mut followed: HashMap<PathBuf, Followed> = HashMap::new();
    // Block-buffered: stdout is line-buffered by default, a write call per event.
    let mut out = std::io::BufWriter::with_capacity(JSON_BLOCK, std::io::stdout().lock());
    // `--json` lines, written directly (see jsonl) and handed to `out` in blocks as
    // large as its buffer, which then passes them on without copying them.
    let mut json: Vec<u8> = Vec::new();
    // One poll's events (at most 8 MiB of lines), the allocation kept between polls.
    let mut events: Vec<Event> = Vec::new();
    loop {
        // New files in followed directories are picked up: a session that moves to a
        // new file (Claude /clear, a subagent) keeps being followed.
        for d in &dirs {
            for p in jsonl_under(d) {
                files.push(p);
            }
        }
        for p in files.drain(..) {
            if let std::collections::hash_map::Entry::Vacant(slot) = followed.entry(p) {
                match open(slot.key()) {
                    Ok(f) => {
                        slot.insert(f);
                    }
                    // A followed directory may hold files that are not transcripts.
                    Err(_) if !dirs.is_empty() => {}
                    Err(e) => return Err(e),
                }
            }
        }
        let many = followed.len() > 1;
        let mut keys: Vec<PathBuf> = followed.keys().cloned().collect();
        keys.sort();
        for k in keys {
            let f = followed.get_mut(&k).expect("key from the map");
            loop {
                events.clear();
                match f.follower.poll(&mut events) {
                    Ok(crate::transcript::follow::Restart::Rewritten) if !args.json => {
                        let _ = writeln!(
                            out,
                            "── {} was truncated or rewritten: reading it again ──",
                            f.label
                        );
                    }
                    Ok(_) => {}
                    Err(e) => {
                        let _ = writeln!(
                            std::io::stderr(),
                            "spice: failed to read {}: {e}",
                            k.display()
                        );
                        break;
                    }
                }
                for e in &events {
                    if args.json {
                        // `{"file":…,"event":…}`
                        match &f.json_prefix {
                            Some(prefix) => {
                                json.extend_from_slice(prefix);
                                jsonl::write_event(&mut json, e);
                                json.push(b'}');
                            }
                            None => json.extend_from_slice(b"null"),
                        }
                        json.push(b'\n');
                        if json.len() >= JSON_BLOCK {
                            if out.write_all(&json).is_err() {
                                return Ok(()); // the reader went away (a closed pipe)
                            }
                            json.clear();
                        }
                        continue;
                    }
                    let Some(l) = render::event(e, &style) else {
                        continue;
                    };
                    let written = if many {
                        writeln!(out, "{} {l}", f.label)
                    } else {
                        writeln!(out, "{l}")
                    };
                    if written.is_err() {
                        return Ok(()); // the reader went away (a closed pipe)
                    }
                }
                if out.write_all(&json).is_err() {
                    return Ok(());
                }
                json.clear();
                if f.follower.caught_up() {
                    break;
                }
            }
        }
        let _ = out.flush();
        if args.once {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(250));
    }
}

pub fn session(cmd: SessionCmd) -> Result<()> {
    match cmd {
        SessionCmd::List { json } => {
            let found = discover::sessions_for(&roots(), &cwd());
            if json {
                let v: Vec<_> = found.iter().map(list_json).collect();
                print_json(&v);
            } else if found.is_empty() {
                println!("no sessions for {}", cwd().display());
            } else {
                for f in &found {
                    let v = list_json(f);
                    println!(
                        "{:<6} {:<38} {:>9} B  {}  {}",
                        format!("{:?}", f.agent).to_lowercase(),
                        f.session_id.as_deref().unwrap_or("?"),
                        f.size,
                        v["last_activity"].as_str().unwrap_or(""),
                        sanitize::for_terminal(v["first_prompt"].as_str().unwrap_or(""))
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
            let path = find(&session)?;
            let (_, events, _) = crate::transcript::read_file(&path)?;
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
            let path = match session {
                Some(s) => find(&s)?,
                None => newest_here()?,
            };
            let (_, events, malformed) = crate::transcript::read_file(&path)?;
            let b = briefing::brief(&path.display().to_string(), &events, malformed);
            if json {
                println!("{}", sanitize::json_line(&b));
            } else {
                print!("{}", sanitize::for_terminal(&briefing::markdown(&b)));
            }
            Ok(())
        }
    }
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

/// A path as given, or the session whose id starts with `id` (this directory's first,
/// then every Claude project and Codex rollout).
fn find(id: &str) -> Result<PathBuf> {
    let p = Path::new(id);
    if p.is_file() {
        return Ok(p.to_path_buf());
    }
    let r = roots();
    let mut candidates: Vec<PathBuf> = discover::sessions_for(&r, &cwd())
        .into_iter()
        .filter(|f| f.session_id.as_deref().is_some_and(|s| s.starts_with(id)))
        .map(|f| f.path)
        .collect();
    if candidates.is_empty() {
        candidates = jsonl_under(&r.claude_projects)
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
