//! Finding and following a session's transcript for its lane: by name when the
//! profile names the file exactly (Claude Code, given its session id), else by
//! searching the profile's directory for the newest file, written since the launch,
//! whose first records name the worktree as their cwd (Codex rollouts, named by time
//! and a thread id spice is never told). Once found, a [`Scanner`] reads it on every
//! tick: ACKs, turn ends, compactions. A Claude Code session's sub-agent files
//! (2.x: `<session>/subagents/agent-*.jsonl`, or sibling `agent-*.jsonl`) are
//! scanned beside it, for their tokens only: a sub-agent's API calls are recorded
//! there alone (the parent's progress records echo them and count nothing), so the
//! session's live usage, and the budgets read from it, count them once.

use crate::config::fleet::LaneConfig;
use crate::config::profile::{Format, Placeholder};
use crate::error::Result;
use crate::store::{Authority, Target};
use crate::transcript::acks::Scanner;
use crate::transcript::event::Agent;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

/// How often a transcript named by a pattern is looked for until found.
const LOCATE_EVERY: Duration = Duration::from_secs(1);

/// Where to look for a transcript whose name has a wildcard.
#[derive(Debug, Clone)]
pub(super) struct Search {
    pub dir: PathBuf,
    /// The file pattern under `dir`, placeholders expanded.
    pub glob: String,
    pub agent: Agent,
    /// The conversation id the agent was given: Gemini CLI's files name their session
    /// but not their directory, so they are told apart by it.
    pub conversation: Option<String>,
}

/// Where the profile says a session's transcript is: the exact file when the name has
/// no wildcard, else where to search, with the format to read.
pub(super) fn transcript_place(
    cfg: &LaneConfig,
    value: &dyn Fn(Placeholder) -> Option<String>,
) -> (Option<PathBuf>, Option<Search>) {
    let Some(t) = cfg.profile.transcript.as_ref() else {
        return (None, None);
    };
    let agent = match t.format {
        Format::Claude => Agent::Claude,
        Format::Codex => Agent::Codex,
        Format::Gemini => Agent::Gemini,
        Format::Qwen => Agent::Qwen,
        // The recording: the session knows where it is.
        Format::Terminal | Format::None => return (None, None),
    };
    let Some((dir, glob)) = &t.files else {
        return (None, None);
    };
    let (Some(dir), Some(name)) = (dir.expand(value), glob.expand(value)) else {
        return (None, None);
    };
    if name.contains(['*', '?']) {
        let search = Search {
            dir: PathBuf::from(dir),
            glob: name,
            agent,
            conversation: value(Placeholder::SessionId),
        };
        (None, Some(search))
    } else {
        (Some(PathBuf::from(dir).join(name)), None)
    }
}

/// Following a session's transcript: found (by name, or by searching for the newest
/// file whose recorded cwd is the worktree), then scanned.
pub(super) struct Follow {
    pub path: Option<PathBuf>,
    search: Option<Search>,
    scanner: Option<Scanner>,
    /// Whether the transcript is Claude Code's (known once it is read).
    claude: Option<bool>,
    /// The session's sub-agent files found so far, each with its own scanner.
    subagents: Vec<(PathBuf, Scanner)>,
    looked: Option<Instant>,
    launched_at: SystemTime,
    /// The session, lane and worktree writing the transcript: its ACKs count for them.
    writer: Vec<Target>,
    /// The last scan's error, said once on stderr until a scan succeeds.
    failing: Option<String>,
}

impl Follow {
    /// Follows `path` if it is known, else looks for the transcript in `search`
    /// (written since `launched_at`), on behalf of `writer`.
    pub fn new(
        path: Option<PathBuf>,
        search: Option<Search>,
        launched_at: SystemTime,
        writer: Vec<Target>,
    ) -> Follow {
        Follow {
            path,
            search,
            scanner: None,
            claude: None,
            subagents: Vec::new(),
            looked: None,
            launched_at,
            writer,
            failing: None,
        }
    }

    pub fn poll(
        &mut self,
        worktree: &Path,
        store: &mut dyn Authority,
    ) -> Result<Option<crate::transcript::acks::ScanReport>> {
        if self.path.is_none() && self.looked.is_none_or(|t| t.elapsed() >= LOCATE_EVERY) {
            self.looked = Some(Instant::now());
            if let Some(search) = &self.search {
                self.path = discover(search, worktree, self.launched_at);
            }
        }
        let Some(path) = self.path.as_ref().filter(|p| p.exists()) else {
            return Ok(None);
        };
        let scanner = self
            .scanner
            .get_or_insert_with(|| Scanner::new(path, self.writer.clone()));
        // A transcript that cannot be read (yet) is not the lane's failure; the scanner
        // reads what it could not record again from its checkpoint on the next poll.
        match scanner.scan(store) {
            Ok(report) => {
                self.failing = None;
                let path = path.clone();
                self.scan_subagents(&path, store);
                Ok(Some(report))
            }
            Err(e) => {
                let why = e.to_string();
                if self.failing.as_deref() != Some(why.as_str()) {
                    tracing::warn!(target: "spice", "following {}: {why}", path.display());
                    self.failing = Some(why);
                }
                Ok(None)
            }
        }
    }
}

impl Follow {
    /// Scans the sub-agent files of the Claude Code session whose transcript is
    /// `main`, for their tokens (their events are all a sub-agent's: no ACK in them
    /// counts, and the turn is the main file's). A file that cannot be read is read
    /// again from its checkpoint on the next poll.
    fn scan_subagents(&mut self, main: &Path, store: &mut dyn Authority) {
        if self.claude.is_none() {
            self.claude = crate::transcript::detect_file(main)
                .ok()
                .map(|a| a == Agent::Claude);
        }
        if self.claude != Some(true) {
            return;
        }
        for p in crate::transcript::discover::claude_subagent_files(main, self.launched_at) {
            if !self.subagents.iter().any(|(q, _)| *q == p) {
                let scanner = Scanner::new(&p, self.writer.clone());
                self.subagents.push((p, scanner));
            }
        }
        for (p, scanner) in &mut self.subagents {
            // Nothing to read yet (a file just created).
            if std::fs::metadata(&*p).map_or(true, |m| m.len() == 0) {
                continue;
            }
            if let Err(e) = scanner.scan(store) {
                let why = e.to_string();
                if self.failing.as_deref() != Some(why.as_str()) {
                    tracing::warn!(target: "spice", "following {}: {why}", p.display());
                    self.failing = Some(why);
                }
            }
        }
    }

    /// Looks for the transcript now if it is not found yet (the session is over, so
    /// waiting for the next search would miss it).
    pub fn locate_now(&mut self, worktree: &Path) {
        if self.path.is_none() {
            if let Some(search) = &self.search {
                self.path = discover(search, worktree, self.launched_at);
            }
        }
    }
}

/// A searched-for transcript (Codex's) that an earlier session in `worktree` wrote,
/// with the id it names its conversation by: what a successor resumes when the
/// session that wrote it ended (a supervisor killed within a second of its launch)
/// before its lane found it. The newest file whose cwd is the worktree, of any age.
pub(super) fn recover(search: &Search, worktree: &Path) -> Option<(PathBuf, String)> {
    let path = discover(
        search,
        worktree,
        SystemTime::UNIX_EPOCH + Duration::from_secs(2),
    )?;
    let id = crate::transcript::discover::describe(&path, search.agent)?.session_id?;
    Some((path, id))
}

/// The transcript under the search's directory, modified since the launch, that is
/// the session's: for Codex and Qwen Code the newest whose first records name
/// `worktree` as their cwd (Codex rollouts are named by time); for Gemini CLI the one
/// naming the conversation, the largest if several (a resume in a later minute
/// writes a stub beside the file it appends to).
fn discover(search: &Search, worktree: &Path, since: SystemTime) -> Option<PathBuf> {
    use crate::transcript::discover::{codex_rollouts, describe, glob_files};
    let want = std::fs::canonicalize(worktree).unwrap_or_else(|_| worktree.to_path_buf());
    let since = since - Duration::from_secs(2);
    let files: Vec<PathBuf> = match search.agent {
        Agent::Codex => codex_rollouts(&search.dir),
        Agent::Terminal => Vec::new(),
        Agent::Claude | Agent::Gemini | Agent::Qwen => glob_files(&search.dir, &search.glob),
    };
    let found = files
        .into_iter()
        .filter(|p| {
            std::fs::metadata(p)
                .and_then(|m| m.modified())
                .is_ok_and(|m| m >= since)
        })
        .filter_map(|p| describe(&p, search.agent));
    if search.agent == Agent::Gemini {
        let id = search.conversation.as_deref()?;
        return found
            .filter(|f| f.session_id.as_deref() == Some(id))
            .max_by_key(|f| f.size)
            .map(|f| f.path);
    }
    found
        .filter(|f| {
            f.cwd
                .as_deref()
                .map(|c| std::fs::canonicalize(c).unwrap_or_else(|_| PathBuf::from(c)))
                .is_some_and(|c| c == want)
        })
        .max_by_key(|f| f.modified)
        .map(|f| f.path)
}
