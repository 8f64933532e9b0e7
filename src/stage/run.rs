//! The one runner for the repository's own commands: the gates' checks, the test
//! beds' warm commands and the fleet's stage hooks. A command runs in its own process
//! group with stdout and stderr through one pipe (its output keeps its order), gets
//! its input on stdin, and is stopped, with everything it started, at its timeout
//! (or when its caller says so: a background warm when the supervisor stops).
//! Each line of output can be handed on as it comes (progress), and the end of it is
//! kept for when it fails.
//!
//! Invariants:
//! - A command's answer is its exit status, read when it exits, not when its output
//!   ends: a child it left behind holding the output open (under `setsid`, say) gets
//!   [`AFTER_EXIT`] to finish writing, then is ended.
//! - Whatever it started is ended with it, in or out of its process group
//!   ([`ending::end_all`]), when it exits, times out or is stopped.
//! - Output costs bounded memory: [`KEPT_LINES`] lines of at most [`ending::MAX_LINE`]
//!   bytes each, a longer line cut and saying so.

use super::ending;
use std::io::{BufReader, Write};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// At most this many lines of a command's output are kept (the last ones).
pub const KEPT_LINES: usize = 60;

/// One command to run.
pub struct Job<'a> {
    /// The program and its arguments; never empty.
    pub argv: &'a [String],
    pub cwd: PathBuf,
    /// Added to (or replacing in) the inherited environment.
    pub env: Vec<(String, String)>,
    /// Written to its stdin, which is then closed.
    pub stdin: Vec<u8>,
    pub timeout: Duration,
    /// Called with each line of output as it arrives.
    pub on_line: Option<&'a mut dyn FnMut(&str)>,
    /// The sandbox it runs in (a lane's, for a command run in an agent's files);
    /// `None`: unconfined. The ruleset it comes from must outlive the call.
    pub confine: Option<crate::sandbox::Entry>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Exit status 0, with the end of its output.
    Passed { output: String },
    /// It ran and said no: its exit code (`None`: killed by a signal) and output.
    Failed { code: Option<i32>, output: String },
    /// It could not be started.
    NotRun(String),
    /// It did not finish in time and was stopped, with the output it had given.
    TimedOut { output: String },
}

impl Outcome {
    pub fn passed(&self) -> bool {
        matches!(self, Outcome::Passed { .. })
    }

    /// The end of its output, if it ran.
    pub fn output(&self) -> &str {
        match self {
            Outcome::Passed { output }
            | Outcome::Failed { output, .. }
            | Outcome::TimedOut { output } => output,
            Outcome::NotRun(_) => "",
        }
    }

    /// One line: what happened.
    pub fn summary(&self, timeout: Duration) -> String {
        match self {
            Outcome::Passed { .. } => "passed".into(),
            Outcome::Failed { code: Some(c), .. } => format!("failed with exit code {c}"),
            Outcome::Failed { code: None, .. } => "killed by a signal".into(),
            Outcome::NotRun(why) => format!("could not run: {why}"),
            Outcome::TimedOut { .. } => {
                format!("timed out after {}s (stopped)", timeout.as_secs_f64())
            }
        }
    }
}

/// Runs `job` to its end or its timeout.
pub fn run(job: Job<'_>) -> Outcome {
    run_until(job, &AtomicBool::new(false))
}

/// How often a running command's caller is asked whether to stop it.
const STOP_EVERY: Duration = Duration::from_millis(100);

/// Runs `job` to its end, its timeout, or until `stop` is set: then it is stopped
/// (its whole process group) and reported as killed by a signal, with the output it
/// had given. The caller, who set `stop`, knows why.
pub fn run_until(job: Job<'_>, stop: &AtomicBool) -> Outcome {
    let Some(program) = job.argv.first() else {
        return Outcome::NotRun("an empty command".into());
    };
    // One pipe for stdout and stderr, so the output keeps its order. Close-on-exec:
    // a command started meanwhile by another thread (the other judge, another lane's
    // hook) must not inherit this pipe's write end, or this one's output would not
    // end until that command did.
    let (reader, writer) = match nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC) {
        Ok(p) => p,
        Err(e) => return Outcome::NotRun(format!("a pipe: {e}")),
    };
    let reader = std::fs::File::from(reader);
    // Every process this command starts carries the token (`ending`), so all of them
    // are ended with it, whether they stay in its process group or not.
    let token = ending::token();
    let inherited = job
        .env
        .iter()
        .rev()
        .find(|(k, _)| k == ending::VAR)
        .map(|(_, v)| v.clone())
        .or_else(|| std::env::var(ending::VAR).ok());
    let mut cmd = Command::new(program);
    cmd.args(&job.argv[1..])
        .current_dir(&job.cwd)
        // Every command spice runs is one deeper than spice (`agent::depth`).
        .env(crate::agent::depth::VAR, crate::agent::depth::child())
        // The store's URL may carry its password, and a running command's initial
        // environment is readable by every process of the user, agents included.
        .env_remove(crate::config::state::URL_VAR)
        .envs(job.env.iter().map(|(k, v)| (k, v)))
        .env(ending::VAR, ending::marked(inherited.as_deref(), &token))
        .stdin(Stdio::piped())
        .process_group(0);
    if let Some(entry) = job.confine {
        // SAFETY: `Entry::enter` is two system calls, no allocation, between fork
        // and exec.
        unsafe {
            cmd.pre_exec(move || entry.enter());
        }
    }
    match writer.try_clone() {
        Ok(w2) => {
            cmd.stdout(w2).stderr(writer);
        }
        Err(e) => return Outcome::NotRun(format!("a pipe: {e}")),
    }
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Outcome::NotRun(format!("{program}: not found"));
        }
        Err(e) => return Outcome::NotRun(format!("{program}: {e}")),
    };
    // The command holds the only write ends now: the reader ends when it (and every
    // process it started) has closed them.
    drop(cmd);
    let mut stdin = child.stdin.take().expect("piped");
    let input = job.stdin;
    std::thread::spawn(move || {
        // A command that ignores stdin closes it early: that is its business. The
        // CLI restores SIGPIPE's default (`spice … | head` ends quietly), which would
        // end the whole process here: blocked in this thread, the write gets EPIPE.
        let mut pipe = nix::sys::signal::SigSet::empty();
        pipe.add(nix::sys::signal::Signal::SIGPIPE);
        let _ = pipe.thread_block();
        let _ = stdin.write_all(&input);
    });
    let (tx, rx) = mpsc::channel::<Option<String>>();
    std::thread::spawn(move || {
        let mut r = BufReader::new(reader);
        let mut buf = Vec::new();
        while let Ok(Some(n)) = ending::read_line(&mut r, &mut buf) {
            if tx.send(Some(ending::text(&buf, n))).is_err() {
                return;
            }
        }
        let _ = tx.send(None);
    });
    let deadline = Instant::now() + job.timeout;
    let mut out = Kept::default();
    let mut on_line = job.on_line;
    let pgid = child.id() as i32;
    // Set once the command itself has exited: its answer is its exit status, and
    // whatever it left holding the output open gets [`AFTER_EXIT`] to finish writing.
    let mut exited: Option<(std::process::ExitStatus, Instant)> = None;
    loop {
        if stop.load(Ordering::SeqCst) {
            ending::end_all(pgid, &token);
            let _ = child.wait();
            return Outcome::Failed {
                code: None,
                output: out.joined(),
            };
        }
        if exited.is_none() {
            if let Ok(Some(status)) = child.try_wait() {
                exited = Some((status, Instant::now() + AFTER_EXIT));
            }
        }
        let until = exited.map_or(deadline, |(_, d)| d);
        let left = until.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left.min(STOP_EVERY)) {
            Ok(Some(line)) => {
                if let Some(f) = on_line.as_mut() {
                    f(&line);
                }
                out.push(line);
            }
            Ok(None) | Err(mpsc::RecvTimeoutError::Disconnected) => break,
            Err(mpsc::RecvTimeoutError::Timeout) if Instant::now() < until => {}
            // Exited, its output still held open by something it started: that is
            // ended below, and the answer stands.
            Err(mpsc::RecvTimeoutError::Timeout) if exited.is_some() => break,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                ending::end_all(pgid, &token);
                let _ = child.wait();
                return Outcome::TimedOut {
                    output: out.joined(),
                };
            }
        }
    }
    // The output ended (or the command exited): the command gets until its deadline to
    // exit, then everything it started is ended.
    let status = loop {
        if let Some((s, _)) = exited {
            break Ok(s);
        }
        match child.try_wait() {
            Ok(Some(s)) => break Ok(s),
            Ok(None) => {}
            Err(e) => break Err(e),
        }
        if stop.load(Ordering::SeqCst) || Instant::now() >= deadline {
            ending::end_all(pgid, &token);
            let _ = child.wait();
            let output = out.joined();
            return if stop.load(Ordering::SeqCst) {
                Outcome::Failed { code: None, output }
            } else {
                Outcome::TimedOut { output }
            };
        }
        std::thread::sleep(STOP_EVERY.min(Duration::from_millis(10)));
    };
    ending::end_all(pgid, &token);
    // What the ended processes had written before they went.
    while let Ok(Some(line)) = rx.recv_timeout(Duration::from_millis(200)) {
        if let Some(f) = on_line.as_mut() {
            f(&line);
        }
        out.push(line);
    }
    let output = out.joined();
    match status {
        Ok(s) if s.success() => Outcome::Passed { output },
        Ok(s) => Outcome::Failed {
            code: s.code(),
            output,
        },
        Err(e) => Outcome::NotRun(format!("{program}: {e}")),
    }
}

/// How long what a command started may keep writing its output after the command
/// itself exited, before it is ended.
const AFTER_EXIT: Duration = Duration::from_millis(200);

/// The last [`KEPT_LINES`] lines of output, and how many came before them.
#[derive(Default)]
struct Kept {
    lines: std::collections::VecDeque<String>,
    dropped: usize,
}

impl Kept {
    fn push(&mut self, line: String) {
        self.lines.push_back(line);
        if self.lines.len() > KEPT_LINES {
            self.lines.pop_front();
            self.dropped += 1;
        }
    }

    fn joined(&self) -> String {
        joined(&self.lines, self.dropped)
    }
}

/// The kept lines, saying how many came before them.
fn joined(kept: &std::collections::VecDeque<String>, dropped: usize) -> String {
    let mut lines: Vec<&str> = kept.iter().map(String::as_str).collect();
    while lines.last().is_some_and(|l| l.trim().is_empty()) {
        lines.pop();
    }
    let text = lines.join("\n");
    if dropped == 0 {
        text
    } else {
        format!("… {dropped} lines before\n{text}")
    }
}

#[cfg(test)]
#[path = "run_tests.rs"]
mod tests;
