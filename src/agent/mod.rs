//! One agent process under a PTY, for the supervisor: launch, input (raw keys and
//! bracketed paste), resize, exit status, stop, and the output recording.
//!
//! Invariants:
//! - **Own session and process group.** The agent is a session leader (portable-pty
//!   calls `setsid` and makes the PTY its controlling terminal), so its pid is also
//!   its process group id and the terminal's foreground group; everything it starts
//!   stays in that group unless it leaves on purpose. [`Agent::stop`] and drop signal
//!   the whole group.
//! - **The leader stays unreaped until its group has been swept.** [`Agent::try_wait`]
//!   observes the exit without reaping (`waitid` with `WNOWAIT`), so the pid, and with
//!   it the group id, cannot be given to another process while this handle may still
//!   signal the group.
//! - **The reader never blocks the agent.** A thread drains the PTY master
//!   continuously into a bounded screen tail and the asciicast recording
//!   (`reader.rs`), whatever the supervisor is doing.
//! - **pid with start time.** [`Agent::start_time`] is the kernel's start time of the
//!   pid; records that outlive this handle signal through [`signal_if_same`], which
//!   never hits a reused pid.
//! - The environment is exactly [`LaunchSpec::env`] (plus `SHELL`, which portable-pty
//!   always sets; see [`Agent::spawn`]); nothing is inherited from the supervisor.

pub mod depth;
pub mod inflight;
mod input;
pub mod peer;
mod proc;
mod reader;
mod record;
pub mod shim;
mod sock_diag;
mod spec;

pub use input::{ENTER_AFTER_PASTE, INPUT_STALL};
pub use nix::sys::signal::Signal;
pub use proc::{
    group_members, proc_stat, signal_group_if_same, signal_if_same, start_time, tree, ProcStat,
};
pub use reader::TAIL_BYTES;
pub use record::{Utf8Stream, FLUSH_EVERY};
pub use spec::{ExitStatus, LaunchSpec};

use crate::clock::{Clock, SystemClock};
use crate::error::{Error, Result};
use nix::errno::Errno;
use nix::libc;
use portable_pty::{CommandBuilder, MasterPty, PtySize};
use reader::{lock, Shared};
use std::os::fd::{BorrowedFd, OwnedFd};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How often waiting loops look at the process again.
const POLL_EVERY: Duration = Duration::from_millis(10);

/// A running agent under a PTY. Dropping it kills the agent's whole process group
/// at once (SIGKILL) and closes the recording; call [`Agent::stop`] for a graceful end.
pub struct Agent {
    pid: u32,
    start_time: u64,
    child: std::process::Child,
    term: Arc<Terminal>,
    shared: Arc<Shared>,
    reader: Option<JoinHandle<()>>,
    /// The exit, once observed (the leader may still be an unreaped zombie).
    status: Option<ExitStatus>,
    reaped: bool,
}

impl Agent {
    /// Launches `spec.argv` in its own session under a new PTY.
    ///
    /// portable-pty always adds `SHELL` (from the password database when `spec.env`
    /// has none) and resolves `argv[0]` through `spec.env`'s `PATH`.
    pub fn spawn(spec: &LaunchSpec) -> Result<Agent> {
        Agent::spawn_with_clock(spec, &SystemClock)
    }

    /// [`Agent::spawn`] with the clock that stamps the recording's header.
    pub fn spawn_with_clock(spec: &LaunchSpec, clock: &dyn Clock) -> Result<Agent> {
        spec.check()?;
        let started = Instant::now();
        let term = spec
            .env
            .iter()
            .find(|(k, _)| k == "TERM")
            .map(|(_, v)| v.as_str());
        let recorder = match &spec.recording {
            Some(path) => Some(record::Recorder::create(
                path,
                spec.cols,
                spec.rows,
                clock.now().div_euclid(1_000_000),
                term,
                started,
            )?),
            None => None,
        };
        let (mut child, master) = match launch(spec) {
            Ok(v) => v,
            Err(e) => {
                if let Some(path) = &spec.recording {
                    let _ = std::fs::remove_file(path);
                }
                return Err(e);
            }
        };
        let pid = child.id();
        let prepared = (|| {
            let raw = master
                .as_raw_fd()
                .ok_or_else(|| Error::Other("the PTY master has no descriptor".into()))?;
            // SAFETY: `master` owns `raw` and outlives this borrow.
            let fd = unsafe { BorrowedFd::borrow_raw(raw) };
            let dup = || {
                fd.try_clone_to_owned().map_err(|source| Error::Io {
                    context: "failed to duplicate the PTY master".into(),
                    source,
                })
            };
            let (input, output) = (dup()?, dup()?);
            // Shared by both duplicates: neither reads nor writes can block.
            input::set_nonblocking(&input)?;
            let start_time = start_time(pid)?
                .ok_or_else(|| Error::Other(format!("agent {pid} vanished at launch")))?;
            Ok::<_, Error>((input, output, start_time))
        })();
        // A launch that fails half-way leaves nothing behind: no process, no file.
        let abandon = |child: &mut std::process::Child, e: Error| {
            let _ = proc::signal_group(pid, Signal::SIGKILL);
            let _ = child.wait();
            if let Some(path) = &spec.recording {
                let _ = std::fs::remove_file(path);
            }
            e
        };
        let (input, output, start_time) = match prepared {
            Ok(v) => v,
            Err(e) => return Err(abandon(&mut child, e)),
        };
        let shared = Arc::new(Shared::new(recorder));
        let for_reader = shared.clone();
        let reader = std::thread::Builder::new()
            .name(format!("agent-pty-{pid}"))
            .spawn(move || reader::run(output, &for_reader));
        let reader = match reader {
            Ok(h) => h,
            Err(source) => {
                let e = Error::Io {
                    context: "failed to start the PTY reader thread".into(),
                    source,
                };
                return Err(abandon(&mut child, e));
            }
        };
        Ok(Agent {
            pid,
            start_time,
            child,
            term: Arc::new(Terminal {
                pid,
                master: Mutex::new(master),
                input: Mutex::new(input),
                shared: shared.clone(),
            }),
            shared,
            reader: Some(reader),
            status: None,
            reaped: false,
        })
    }

    /// The agent's pid, which is also its process group and session id.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// The kernel's start time of [`Agent::pid`] (`/proc/<pid>/stat` field 22).
    pub fn start_time(&self) -> u64 {
        self.start_time
    }

    /// Writes raw bytes into the PTY, as keys typed at the terminal. Fails if the
    /// agent has not made room for them within [`INPUT_STALL`].
    pub fn write_input(&self, bytes: &[u8]) -> Result<()> {
        self.term.write_input(bytes)
    }

    /// Types `text` as one bracketed paste, then Enter. Line feeds are sent as
    /// carriage returns, as terminals paste them, and an end-of-paste marker inside
    /// the text is removed so the text cannot end the paste early and type keys.
    pub fn paste(&self, text: &str) -> Result<()> {
        let input = lock(&self.term.input);
        input::write_all(&input, self.pid, &input::bracketed(text))?;
        std::thread::sleep(ENTER_AFTER_PASTE);
        input::write_all(&input, self.pid, b"\r")
    }

    /// Changes the terminal size (the agent gets SIGWINCH) and records it.
    pub fn resize(&self, cols: u16, rows: u16) -> Result<()> {
        self.term.resize(cols, rows)
    }

    /// The agent's terminal, for another thread (an operator attached to it).
    pub fn terminal(&self) -> Arc<Terminal> {
        self.term.clone()
    }

    /// The exit, if the agent has ended. The process stays a zombie until
    /// [`Agent::stop`] or drop, so its group id stays ours to signal.
    pub fn try_wait(&mut self) -> Result<Option<ExitStatus>> {
        if self.status.is_none() {
            self.status = peek_exit(self.pid)?;
        }
        Ok(self.status)
    }

    /// Waits up to `limit` for the agent to end.
    pub fn wait_timeout(&mut self, limit: Duration) -> Result<Option<ExitStatus>> {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(st) = self.try_wait()? {
                return Ok(Some(st));
            }
            if Instant::now() >= deadline {
                return Ok(None);
            }
            std::thread::sleep(POLL_EVERY);
        }
    }

    /// Stops the agent: SIGTERM to its process group, up to `grace` for the leader
    /// and every other member to end, then SIGKILL to the group. Returns how the
    /// leader ended (it may have ended before the call).
    pub fn stop(&mut self, grace: Duration) -> Result<ExitStatus> {
        if let (true, Some(st)) = (self.reaped, self.status) {
            return Ok(st);
        }
        proc::signal_group(self.pid, Signal::SIGTERM)?;
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline {
            // Only once the leader is gone is the /proc scan for stragglers worth it.
            if self.try_wait()?.is_some() && group_members(self.pid)?.is_empty() {
                break;
            }
            std::thread::sleep(POLL_EVERY);
        }
        // Safe even when everything ended: the unreaped leader keeps the group id ours.
        proc::signal_group(self.pid, Signal::SIGKILL)?;
        self.reap()
    }

    /// The last [`TAIL_BYTES`] of output, for diagnostics.
    pub fn screen_tail(&self) -> Vec<u8> {
        self.shared.tail()
    }

    /// The words at the end of the agent's output, without escape sequences or
    /// controls: about what its screen last said, for a one-line report.
    pub fn screen_words(&self, max_chars: usize) -> String {
        visible_words(&self.shared.tail(), max_chars)
    }

    /// Why the recording stopped early (a full disk, say), if it did; the agent runs on.
    pub fn recording_error(&self) -> Option<String> {
        self.shared.recording_error()
    }

    /// True once all of the agent's output has been read and recorded: every holder
    /// of the terminal has exited.
    pub fn output_done(&self) -> bool {
        self.shared.done()
    }

    fn reap(&mut self) -> Result<ExitStatus> {
        let st = self.child.wait().map_err(|source| Error::Io {
            context: format!("failed to wait for agent {}", self.pid),
            source,
        })?;
        self.reaped = true;
        let st = *self.status.get_or_insert(ExitStatus::from_std(st));
        Ok(st)
    }
}

/// An agent's terminal as another thread may use it while the [`Agent`] handle is
/// busy elsewhere: keys in, size, and a copy of the output from now on.
pub struct Terminal {
    pid: u32,
    /// Kept for resizing; the PTY's input and output go through descriptors.
    master: Mutex<Box<dyn MasterPty + Send>>,
    /// A non-blocking descriptor of the master for input; the lock keeps a paste and
    /// its Enter together.
    input: Mutex<OwnedFd>,
    shared: Arc<Shared>,
}

impl Terminal {
    /// Writes raw bytes into the PTY, as keys typed at the terminal.
    pub fn write_input(&self, bytes: &[u8]) -> Result<()> {
        input::write_all(&lock(&self.input), self.pid, bytes)
    }

    /// Changes the terminal size (the agent gets SIGWINCH) and records it.
    pub fn resize(&self, cols: u16, rows: u16) -> Result<()> {
        if cols == 0 || rows == 0 {
            return Err(Error::input(format!(
                "terminal size {cols}x{rows} is empty"
            )));
        }
        let size = PtySize {
            rows,
            cols,
            pixel_width: 0,
            pixel_height: 0,
        };
        lock(&self.master)
            .resize(size)
            .map_err(|e| Error::Other(format!("failed to resize agent {}: {e:#}", self.pid)))?;
        self.shared.record(|r| r.resize(cols, rows));
        Ok(())
    }

    /// Sends the recent output, then everything the agent writes from now on, to
    /// `to` (made non-blocking). A watcher that cannot keep up, or went away, is
    /// dropped: it never slows the agent down.
    pub fn watch(&self, to: std::os::unix::net::UnixStream) -> Result<()> {
        to.set_nonblocking(true).map_err(|source| Error::Io {
            context: "failed to prepare an attached terminal".into(),
            source,
        })?;
        self.shared.add_watcher(to);
        Ok(())
    }

    /// The last [`TAIL_BYTES`] of output.
    pub fn tail(&self) -> Vec<u8> {
        self.shared.tail()
    }
}

impl Drop for Agent {
    /// The emergency path: no grace. The whole group is killed so nothing the agent
    /// started outlives its handle, then the reader finishes the recording.
    fn drop(&mut self) {
        if !self.reaped {
            let _ = proc::signal_group(self.pid, Signal::SIGKILL);
            let _ = self.reap();
        }
        self.shared.closing.store(true, Ordering::Release);
        if let Some(h) = self.reader.take() {
            let _ = h.join();
        }
    }
}

/// Opens the PTY and starts the command in it.
fn launch(spec: &LaunchSpec) -> Result<(std::process::Child, Box<dyn MasterPty + Send>)> {
    let name = &spec.argv[0];
    let pair = portable_pty::native_pty_system()
        .openpty(PtySize {
            rows: spec.rows,
            cols: spec.cols,
            pixel_width: 0,
            pixel_height: 0,
        })
        .map_err(|e| Error::Other(format!("failed to open a PTY for `{name}`: {e:#}")))?;
    // from_argv seeds the builder with the supervisor's environment: clear it.
    let mut cmd = CommandBuilder::from_argv(spec.argv.iter().map(Into::into).collect());
    cmd.env_clear();
    for (k, v) in &spec.env {
        cmd.env(k, v);
    }
    cmd.cwd(&spec.cwd);
    let child = pair.slave.spawn_command(cmd).map_err(|e| {
        let why = format!("{e:#}").replace('\n', "; ");
        Error::Other(format!("failed to start agent `{name}`: {why}"))
    })?;
    // Our copy of the slave side must go, or the reader would never see end of file.
    drop(pair.slave);
    let child: Box<dyn portable_pty::Child> = child;
    let child = child.downcast::<std::process::Child>().map_err(|_| {
        Error::Other("portable-pty returned an unknown kind of child process".into())
    })?;
    Ok((*child, pair.master))
}

/// The exit of child `pid` if it has ended, leaving it unreaped (`WNOWAIT`).
fn peek_exit(pid: u32) -> Result<Option<ExitStatus>> {
    // SAFETY: zeroed siginfo is valid; waitid fills it or leaves si_pid 0.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    let flags = libc::WEXITED | libc::WNOHANG | libc::WNOWAIT;
    // SAFETY: a valid id type, pid and out-pointer.
    let rc = unsafe { libc::waitid(libc::P_PID, pid as libc::id_t, &mut info, flags) };
    if rc != 0 {
        let e = Errno::last();
        return Err(Error::Other(format!("failed to wait for agent {pid}: {e}")));
    }
    // SAFETY: waitid filled a SIGCHLD siginfo, whose pid and status fields are valid.
    let (si_pid, status) = unsafe { (info.si_pid(), info.si_status()) };
    Ok(match (si_pid, info.si_code) {
        (0, _) => None,
        (_, libc::CLD_EXITED) => Some(ExitStatus::Code(status)),
        (_, _) => Some(ExitStatus::Signal(status)),
    })
}

/// The text of terminal output with escape sequences (CSI, OSC, DCS and the rest)
/// and controls removed and whitespace collapsed: the last `max_chars` characters.
pub fn visible_words(bytes: &[u8], max_chars: usize) -> String {
    let text = String::from_utf8_lossy(bytes);
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\u{1b}' => match chars.next() {
                // CSI: parameters and intermediates up to a final byte in @..~. A
                // style (`m`) sits inside words; anything else (cursor moves, which
                // TUIs use for spaces; erasures) separates them.
                Some('[') => {
                    for c in chars.by_ref() {
                        if ('@'..='~').contains(&c) {
                            if c != 'm' {
                                out.push(' ');
                            }
                            break;
                        }
                    }
                }
                // OSC, DCS, SOS, PM, APC: up to BEL or ST (ESC \).
                Some(']' | 'P' | 'X' | '^' | '_') => {
                    while let Some(c) = chars.next() {
                        if c == '\u{7}' || (c == '\u{1b}' && chars.next_if_eq(&'\\').is_some()) {
                            break;
                        }
                    }
                }
                // A character-set designation takes one more character.
                Some('(' | ')' | '*' | '+') => {
                    chars.next();
                }
                _ => {}
            },
            c if c.is_control() || crate::sanitize::is_bidi(c) => out.push(' '),
            c => out.push(c),
        }
    }
    let words = out.split_whitespace().collect::<Vec<_>>().join(" ");
    let n = words.chars().count();
    if n <= max_chars {
        return words;
    }
    // Cut at a word boundary: no half word at the start.
    let cut = n - max_chars;
    let tail: String = words.chars().skip(cut).collect();
    if words.chars().nth(cut - 1) == Some(' ') {
        return tail;
    }
    match tail.split_once(' ') {
        Some((_, rest)) if !rest.is_empty() => rest.to_string(),
        _ => tail,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn visible_words_drop_escapes_and_keep_the_end() {
        let screen =
            b"\x1b[?25l\x1b[2J\x1b]0;title\x07\x1b(B Do you \x1b[1mtrust\x1b[0m the files\r\n\
            in this folder?\x1bP+q\x1b\\ \xe2\x9d\xaf 1. Yes\r\n";
        assert_eq!(
            visible_words(screen, 200),
            "Do you trust the files in this folder? \u{276f} 1. Yes"
        );
        assert_eq!(visible_words(screen, 8), "❯ 1. Yes");
        assert_eq!(visible_words(screen, 7), "1. Yes");
        assert_eq!(visible_words(b"\x1b[", 10), "");
        // Ink moves the cursor instead of writing spaces.
        assert_eq!(
            visible_words(b"Yes,\x1b[1CI\x1b[1Ctrust", 20),
            "Yes, I trust"
        );
    }

    #[test]
    fn an_agent_can_be_shared_between_threads() {
        fn shareable<T: Send + Sync>() {}
        shareable::<Agent>();
    }
}
