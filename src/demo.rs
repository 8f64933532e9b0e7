//! The scripted demo agent (`spice demo-agent`): a real program that behaves like a
//! coding agent, for the quickstart and the tests, with no network and no API key.
//!
//! It writes a Claude Code-format transcript where Claude would (so the supervisor
//! finds and follows it the same way), runs its commands through `bash -c` (so the
//! shell redirector shows it steering on their stderr), answers every steering key it
//! sees with `ACK <key>: …` in its next reply, commits its work in the worktree, and
//! completes its task's phase with `spice task phase --done`. A resumed session
//! appends to the same transcript and skips work already committed.
//!
//! Like a real agent's screen, its terminal (stdout) shows what it does as it goes:
//! the task it took, each command before it runs and then its output (stdout and
//! stderr, where steering appears), its replies (the ACKs among them). That is what a
//! lane's recording and `spice fleet attach` show (`screen`).

mod gate;
mod screen;

pub use gate::{LINES_MARKER, NO_VERIFY_MARKER};

use crate::error::{Error, Result};
use crate::transcript::discover::claude_slug;
use screen::{task_line, Screen};
use serde_json::json;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

/// What the demo agent needs, gathered by the CLI layer.
pub struct DemoConfig {
    pub session_id: String,
    pub resume: bool,
    pub brief: String,
    /// The worktree it works in (its current directory).
    pub cwd: PathBuf,
    /// `~/.claude/projects`, where its transcript goes.
    pub claude_projects: PathBuf,
    /// The spice binary, to complete the phase.
    pub spice: PathBuf,
    pub task: Option<String>,
    /// How long each "work" command runs, so steering can arrive mid-command.
    pub command_seconds: f64,
    /// Behave like an interactive agent: after each turn, wait for a message typed
    /// into the terminal (only when stdin is a terminal), until end of input.
    pub interactive: bool,
}

/// A line of the brief that makes the demo agent end its first turn waiting for the
/// operator before it starts (to show steering typed into an idle agent).
pub const WAIT_MARKER: &str = "demo: wait for the operator";
/// A line of the brief that makes the demo agent compact its context once, mid-task,
/// the way Claude Code records it (a `compact_boundary` and a summary).
pub const COMPACT_MARKER: &str = "demo: compact";

struct Transcript {
    path: PathBuf,
    session: String,
    cwd: String,
    n: u32,
    last: Option<String>,
    screen: Screen,
}

impl Transcript {
    fn line(&mut self, mut v: serde_json::Value) -> Result<()> {
        self.n += 1;
        let uuid = format!("{}-{:04}", self.session, self.n);
        v["uuid"] = json!(uuid);
        v["parentUuid"] = json!(self.last);
        v["sessionId"] = json!(self.session);
        v["cwd"] = json!(self.cwd);
        v["version"] = json!("spice-demo");
        v["timestamp"] =
            json!(chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true));
        self.last = Some(uuid);
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)
            .map_err(|source| Error::Io {
                context: format!("failed to open {}", self.path.display()),
                source,
            })?;
        // One write per whole line: a follower never sees half a record from us.
        f.write_all(format!("{v}\n").as_bytes())
            .map_err(|source| Error::Io {
                context: format!("failed to write {}", self.path.display()),
                source,
            })
    }

    fn user(&mut self, text: &str) -> Result<()> {
        self.line(json!({ "type": "user", "message": { "role": "user", "content": text } }))
    }

    fn say(&mut self, text: &str, end_turn: bool) -> Result<()> {
        self.screen.reply(text);
        let id = format!("msg_{}_{}", self.session, self.n + 1);
        self.line(json!({ "type": "assistant", "message": {
            "id": id, "role": "assistant", "model": "spice-demo",
            "content": [{ "type": "text", "text": text }],
            "stop_reason": if end_turn { json!("end_turn") } else { json!(null) },
            "usage": { "input_tokens": 10, "output_tokens": text.len() / 4 },
        }}))
    }

    /// Runs `command` through `bash -c`, recording the call and its result.
    fn bash(&mut self, command: &str) -> Result<(bool, String, String)> {
        self.bash_with(command, &[])
    }

    /// [`Transcript::bash`] with `env` added to the command's environment.
    fn bash_with(&mut self, command: &str, env: &[(&str, &str)]) -> Result<(bool, String, String)> {
        let call = format!("toolu_{}_{}", self.session, self.n + 1);
        self.line(json!({ "type": "assistant", "message": {
            "id": format!("msg_{call}"), "role": "assistant", "model": "spice-demo",
            "content": [{ "type": "tool_use", "id": call, "name": "Bash", "input": { "command": command } }],
            "stop_reason": "tool_use",
        }}))?;
        // Shown before it runs, so a watcher sees what the agent is waiting on.
        self.screen.command(command);
        let out = Command::new("bash")
            .args(["-c", command])
            .envs(env.iter().copied())
            .current_dir(&self.cwd)
            .output()
            .map_err(|source| Error::Io {
                context: "failed to run bash".into(),
                source,
            })?;
        let stdout = String::from_utf8_lossy(&out.stdout).to_string();
        let stderr = String::from_utf8_lossy(&out.stderr).to_string();
        let ok = out.status.success();
        let content = if ok {
            format!("{stdout}{stderr}")
        } else {
            format!(
                "Exit code {}\n{stdout}{stderr}",
                out.status.code().unwrap_or(-1)
            )
        };
        self.screen.output(&content);
        self.line(json!({
            "type": "user",
            "message": { "role": "user", "content": [{
                "type": "tool_result", "tool_use_id": call, "content": content, "is_error": !ok,
            }]},
            "toolUseResult": if ok {
                json!({ "stdout": stdout, "stderr": stderr, "interrupted": false, "isImage": false })
            } else {
                json!(format!("Error: {content}"))
            },
        }))?;
        Ok((ok, stdout, stderr))
    }
}

/// Steering keys in a `spice exec` frame on stderr (`│ [KEY] …` lines).
pub fn keys_in(stderr: &str) -> Vec<String> {
    let mut keys = Vec::new();
    for line in stderr.lines() {
        let Some(rest) = line.trim_start_matches('│').trim_start().strip_prefix('[') else {
            continue;
        };
        let Some((key, _)) = rest.split_once(']') else {
            continue;
        };
        if crate::stamp::is_stamp(key) && !keys.iter().any(|k| k == key) {
            keys.push(key.to_string());
        }
    }
    keys
}

/// Runs the demo agent to the end of its task.
pub fn run(cfg: &DemoConfig) -> Result<()> {
    let dir = cfg.claude_projects.join(claude_slug(&cfg.cwd));
    std::fs::create_dir_all(&dir).map_err(|source| Error::Io {
        context: format!("failed to create {}", dir.display()),
        source,
    })?;
    let mut t = Transcript {
        path: dir.join(format!("{}.jsonl", cfg.session_id)),
        session: cfg.session_id.clone(),
        cwd: cfg.cwd.display().to_string(),
        n: 0,
        last: None,
        screen: Screen::stdout(),
    };
    t.screen
        .show(&format!("spice demo agent, session {}\n", cfg.session_id));
    if cfg.resume {
        t.n = std::fs::read_to_string(&t.path)
            .map(|s| s.lines().count() as u32)
            .unwrap_or(0);
        t.screen.message("Continue where you left off.");
        t.user("Continue where you left off.")?;
    } else {
        t.screen.message(task_line(&cfg.brief));
        t.user(&cfg.brief)?;
    }
    let task = cfg.task.clone().unwrap_or_else(|| "demo".into());
    let file = format!("demo/{task}.txt");
    let mut acked: Vec<String> = Vec::new();
    let mut answer = move |t: &mut Transcript, stderr: &str| -> Result<()> {
        let fresh: Vec<String> = keys_in(stderr)
            .into_iter()
            .filter(|k| !acked.contains(k))
            .collect();
        if fresh.is_empty() {
            return Ok(());
        }
        let reply: Vec<String> = fresh
            .iter()
            .map(|k| format!("ACK {k}: noted, and applied to the rest of this task"))
            .collect();
        acked.extend(fresh);
        t.say(&reply.join("\n"), false)
    };
    // Every step is idempotent, so a resumed session finishes whatever its
    // predecessor left: the file written, staged, committed.
    let interactive = cfg.interactive && nix::unistd::isatty(0).unwrap_or(false);
    let mut input = interactive.then(|| std::io::BufReader::new(std::io::stdin()));
    if let Some(input) = input.as_mut().filter(|_| cfg.brief.contains(WAIT_MARKER)) {
        t.say(
            "Before I start, I am waiting for the operator's go-ahead.",
            true,
        )?;
        let Some(message) = read_message(input) else {
            return Ok(());
        };
        t.user(&message)?;
        answer(&mut t, &message)?;
    }
    t.say("I'll look around, then do the task.", false)?;
    let (_, _, err) = t.bash(&format!(
        "git status --short; sleep {}",
        cfg.command_seconds
    ))?;
    answer(&mut t, &err)?;
    if cfg.brief.contains(COMPACT_MARKER) && !cfg.resume {
        t.line(json!({ "type": "system", "subtype": "compact_boundary", "content": "Conversation compacted",
            "compactMetadata": { "trigger": "auto", "preTokens": 150_000 } }))?;
        t.line(json!({ "type": "user", "isCompactSummary": true, "message": { "role": "user",
            "content": "This session is being continued from a previous conversation. Summary: looked around; next, write the file." } }))?;
    }
    let write = match gate::lines_wanted(&cfg.brief) {
        Some(n) => gate::write_lines(&file, n),
        None => format!("printf '%s\\n' 'done by the demo agent' > {file}"),
    };
    let (_, _, err) = t.bash(&format!(
        "mkdir -p demo && {{ [ -f {file} ] || {write}; }} && sleep {}",
        cfg.command_seconds
    ))?;
    answer(&mut t, &err)?;
    // The agent commits as itself when the machine has no git identity configured.
    let identity: &[(&str, &str)] = if has_git_identity(&cfg.cwd) {
        &[]
    } else {
        &[
            ("GIT_AUTHOR_NAME", "spice demo agent"),
            ("GIT_AUTHOR_EMAIL", "demo@spice.invalid"),
            ("GIT_COMMITTER_NAME", "spice demo agent"),
            ("GIT_COMMITTER_EMAIL", "demo@spice.invalid"),
        ]
    };
    let skip = if cfg.brief.contains(gate::NO_VERIFY_MARKER) {
        " --no-verify"
    } else {
        ""
    };
    let commit = format!(
        "git add {file} && {{ git diff --cached --quiet || git commit{skip} -m 'demo: {task}'; }}"
    );
    let (mut ok, _, mut err) = t.bash_with(&commit, identity)?;
    answer(&mut t, &err)?;
    // Refused by the gate: do what its finding says, then commit again (a bounded
    // number of times, as an agent would give up and say so).
    for _ in 0..3 {
        let Some(n) = gate::shrink_to(&err, &file).filter(|_| !ok) else {
            break;
        };
        t.say(
            &format!("The gate refused my commit: {file} is too long. I'll cut it to {n} lines and commit again."),
            false,
        )?;
        let (_, _, e) = t.bash(&format!(
            "head -n {n} {file} > {file}.tmp && mv {file}.tmp {file}"
        ))?;
        answer(&mut t, &e)?;
        (ok, _, err) = t.bash_with(&commit, identity)?;
        answer(&mut t, &err)?;
    }
    if !ok {
        t.say("I could not commit my work; see the error above.", true)?;
        return idle(&mut t, input.as_mut(), &mut answer);
    }
    if let Some(task) = &cfg.task {
        let spice = shell_quote(&cfg.spice.display().to_string());
        let (ok, _, err) = t.bash(&format!(
            "{spice} task phase {task} --done --claimant \"$SPICE_SESSION\""
        ))?;
        answer(&mut t, &err)?;
        if !ok {
            t.say("I could not complete the phase; see the error above.", true)?;
            return idle(&mut t, input.as_mut(), &mut answer);
        }
    }
    t.say("The task is done and its phase is complete.", true)?;
    idle(&mut t, input.as_mut(), &mut answer)
}

/// Like an interactive agent between turns: each message typed in is a new turn,
/// answered (its steering keys ACKed), until end of input.
fn idle(
    t: &mut Transcript,
    input: Option<&mut impl std::io::BufRead>,
    answer: &mut impl FnMut(&mut Transcript, &str) -> Result<()>,
) -> Result<()> {
    let Some(input) = input else {
        return Ok(());
    };
    while let Some(message) = read_message(input) {
        t.user(&message)?;
        answer(t, &message)?;
        t.say("Noted.", true)?;
    }
    Ok(())
}

/// One message typed at the terminal: a line, or a bracketed paste (which may span
/// lines) and the Enter after it. `None` at end of input.
fn read_message(input: &mut impl std::io::BufRead) -> Option<String> {
    const START: &str = "\x1b[200~";
    const END: &str = "\x1b[201~";
    let mut message = String::new();
    let mut in_paste = false;
    loop {
        let mut raw = Vec::new();
        if input.read_until(b'\n', &mut raw).ok()? == 0 {
            return None;
        }
        let mut line = String::from_utf8_lossy(&raw)
            .trim_end_matches(['\r', '\n'])
            .to_string();
        if line.contains(START) {
            in_paste = true;
            line = line.replace(START, "");
        }
        if line.contains(END) {
            in_paste = false;
            line = line.replace(END, "");
        }
        message.push_str(&line);
        if in_paste {
            message.push('\n');
        } else if !message.trim().is_empty() {
            return Some(message);
        }
    }
}

/// Whether git in `cwd` has an email to commit with (from any of its config files).
fn has_git_identity(cwd: &Path) -> bool {
    Command::new("git")
        .args(["config", "user.email"])
        .current_dir(cwd)
        .output()
        .is_ok_and(|o| o.status.success())
}

fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// Reads the brief from a file, as the profile passes it.
pub fn read_brief(path: &Path) -> Result<String> {
    std::fs::read_to_string(path).map_err(|e| Error::input(format!("{}: {e}", path.display())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bracketed_paste_over_lines_is_one_message() {
        let typed = b"\x1b[200~first line\nsecond [k]\x1b[201~\nhello\n";
        let mut input = std::io::Cursor::new(&typed[..]);
        assert_eq!(read_message(&mut input).unwrap(), "first line\nsecond [k]");
        assert_eq!(read_message(&mut input).unwrap(), "hello");
        assert_eq!(read_message(&mut input), None);
    }

    #[test]
    fn keys_come_from_the_exec_frame() {
        let stderr = "noise [not a key]\n┌── spice: 1 steering item for you ──\n│ [dZxPMZGfr] from the operator, 3ms ago\n│   hello [dZxPMZGfr]\n└──\n";
        assert_eq!(keys_in(stderr), ["dZxPMZGfr"]);
    }
}
