//! `spice fleet attach LANE`: this terminal connected to a lane's agent, following the
//! lane from session to session.
//!
//! The supervisor's socket (`crate::fleet::attach`) serves one session: the connection
//! ends when that session does, and a connection made while no session runs is told
//! so ([`NO_AGENT`]) and closed. The client follows the lane over that: when its
//! connection ends it connects again, every [`RETRY`] backing off to [`RETRY_MAX`],
//! until a session is served, and says in one line which session it now shows. It
//! ends only when the operator detaches (Ctrl-], or the end of its input) or the fleet
//! is down: the socket does not answer and no supervisor holds the state directory's
//! lock.
//!
//! Invariants:
//! - The operator's terminal is in raw mode only while this runs, restored however it
//!   ends.
//! - Keys typed while no session is served are dropped, not kept for the next session:
//!   what was typed at one agent is never given to another.
//! - A socket that does not answer while a supervisor still holds the lock (starting,
//!   or stopping its lanes) is asked again, never taken for the fleet's end.

use super::super::Env;
use crate::error::{Error, Result};
use crate::fleet::attach::{frame, socket_path, NO_AGENT};
use std::io::{Read, Write};
use std::os::fd::AsFd;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The key that detaches (Ctrl-], as telnet uses).
const DETACH: u8 = 0x1d;
/// How soon a client whose session ended asks the socket again.
const RETRY: Duration = Duration::from_millis(250);
/// The longest wait between two asks while the lane runs no session.
const RETRY_MAX: Duration = Duration::from_secs(1);
/// How long a new connection is given to say it serves no session: the supervisor
/// writes [`NO_AGENT`] at once, while a quiet session may send nothing for longer.
const ANSWER_WAIT: Duration = Duration::from_millis(300);
/// How long the client waits for the store to name a new session (the lane publishes
/// its row just after the socket serves the session).
const SESSION_WAIT: Duration = Duration::from_secs(2);

/// Why following ended.
enum End {
    Detached,
    FleetDown,
}

/// What the socket answered.
enum Answer {
    /// Nobody listens: the fleet is down, or starting or stopping.
    Silent,
    /// The lane runs no session right now.
    NoSession,
    /// A session, with what it sent while the answer was told apart.
    Session(UnixStream, Vec<u8>),
}

pub(super) fn run(env: &Env, lane: &str) -> Result<()> {
    let path = socket_path(&env.state_dir, lane);
    let first = match ask(&path) {
        Answer::Silent => {
            return Err(Error::input(format!(
                "lane {lane} has no supervisor to attach to ({} is not listening): is `spice fleet up` running?",
                path.display()
            )))
        }
        answer => answer,
    };
    let raw = Raw::enter()?;
    say(&format!(
        "attached to lane {lane}; Ctrl-] detaches and leaves the agent running"
    ));
    let mut f = Follower {
        env,
        lane,
        path,
        link: None,
        session: None,
        next_ask: Instant::now(),
        backoff: RETRY,
        last_size: None,
    };
    f.take(first);
    if f.link.is_none() {
        say(&format!(
            "lane {lane} runs no session now; waiting for its next one"
        ));
    }
    let end = f.follow();
    if let Some(link) = f.link.take() {
        link.close();
    }
    drop(raw);
    match end {
        End::Detached => println!("\nspice: detached from lane {lane}; the agent keeps running"),
        End::FleetDown => println!("\nspice: the fleet is down; stopped following lane {lane}"),
    }
    Ok(())
}

/// One line of the client's own, between the agent's output (raw mode: `\r\n`).
fn say(line: &str) {
    let mut out = std::io::stdout();
    let _ = write!(out, "\r\nspice: {line}\r\n");
    let _ = out.flush();
}

/// Connects and tells a session from the supervisor's "no session" answer.
fn ask(path: &Path) -> Answer {
    let Ok(mut conn) = UnixStream::connect(path) else {
        return Answer::Silent;
    };
    let _ = conn.set_read_timeout(Some(ANSWER_WAIT));
    let mut first = Vec::new();
    let mut buf = [0u8; 4096];
    let mut closed = false;
    while first.len() < NO_AGENT.len() && NO_AGENT.starts_with(&first) {
        match conn.read(&mut buf) {
            Ok(0) => {
                closed = true;
                break;
            }
            Ok(n) => first.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            // Nothing more within the wait: a session with nothing to show yet.
            Err(_) => break,
        }
    }
    // A connection closed unserved (the listener stopping) is no session either.
    if first == NO_AGENT || (closed && NO_AGENT.starts_with(&first)) {
        return Answer::NoSession;
    }
    let _ = conn.set_read_timeout(None);
    Answer::Session(conn, first)
}

/// A connection to one session, its output copied to stdout by a thread.
struct Link {
    conn: UnixStream,
    reader: std::thread::JoinHandle<()>,
    ended: Arc<AtomicBool>,
}

impl Link {
    fn start(conn: UnixStream, first: &[u8]) -> std::io::Result<Link> {
        let mut out = std::io::stdout();
        let _ = out.write_all(first).and_then(|()| out.flush());
        let ended = Arc::new(AtomicBool::new(false));
        let reader = {
            let mut conn = conn.try_clone()?;
            let ended = ended.clone();
            std::thread::spawn(move || {
                let mut out = std::io::stdout();
                let mut buf = [0u8; 16 * 1024];
                while let Ok(n) = conn.read(&mut buf) {
                    if n == 0 || out.write_all(&buf[..n]).and_then(|()| out.flush()).is_err() {
                        break;
                    }
                }
                ended.store(true, Ordering::SeqCst);
            })
        };
        Ok(Link {
            conn,
            reader,
            ended,
        })
    }

    fn ended(&self) -> bool {
        self.ended.load(Ordering::SeqCst)
    }

    fn close(self) {
        let _ = self.conn.shutdown(std::net::Shutdown::Both);
        let _ = self.reader.join();
    }
}

/// The client's state: the session it shows, if any, and when to ask again.
struct Follower<'a> {
    env: &'a Env,
    lane: &'a str,
    path: PathBuf,
    link: Option<Link>,
    /// The session last shown, as the store names it.
    session: Option<String>,
    next_ask: Instant,
    backoff: Duration,
    last_size: Option<(u16, u16)>,
}

impl Follower<'_> {
    /// Shows a session the socket answered with; says which, after the first.
    fn take(&mut self, answer: Answer) {
        let Answer::Session(conn, first) = answer else {
            return;
        };
        let before = self.session.take();
        let (session, task) = self.current(before.as_deref());
        if before.is_some() {
            let on = task.map(|t| format!(" (task {t})")).unwrap_or_default();
            let line = match session.as_deref() {
                Some(s) if Some(s) == before.as_deref() => format!("back on session {s}{on}"),
                Some(s) => format!("lane {} switched to session {s}{on}", self.lane),
                None => format!("lane {} switched to its next session{on}", self.lane),
            };
            say(&line);
        }
        self.session = session.or(before);
        self.last_size = None;
        self.link = Link::start(conn, &first).ok();
        self.backoff = RETRY;
    }

    /// The lane's session and task as the store has them, waiting a moment for a
    /// session other than `before` to be named.
    fn current(&self, before: Option<&str>) -> (Option<String>, Option<String>) {
        let Ok(mut store) = self.env.authority() else {
            return (None, None);
        };
        let deadline = Instant::now() + SESSION_WAIT;
        loop {
            let row = store.lane(self.lane).ok().flatten();
            let (session, task) = row.map(|r| (r.session, r.task_id)).unwrap_or_default();
            if before.is_none() || session.as_deref() != before || Instant::now() > deadline {
                return (session, task);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Copies keys to the session shown and follows the lane until the operator
    /// detaches or the fleet is down.
    fn follow(&mut self) -> End {
        let stdin = std::io::stdin();
        let mut buf = [0u8; 4096];
        loop {
            if self.link.as_ref().is_some_and(Link::ended) {
                if let Some(link) = self.link.take() {
                    link.close();
                }
                let was = self.session.as_deref().map(|s| format!(" ({s})"));
                say(&format!(
                    "the session on lane {} ended{}; waiting for its next one (Ctrl-] detaches)",
                    self.lane,
                    was.unwrap_or_default()
                ));
                self.next_ask = Instant::now() + RETRY;
            }
            if self.link.is_none() && Instant::now() >= self.next_ask {
                match ask(&self.path) {
                    Answer::Silent
                        if crate::fleet::probe(&self.env.state_dir)
                            == crate::fleet::Probe::None =>
                    {
                        return End::FleetDown
                    }
                    answer => self.take(answer),
                }
                if self.link.is_none() {
                    self.next_ask = Instant::now() + self.backoff;
                    self.backoff = (self.backoff * 2).min(RETRY_MAX);
                }
            }
            self.pass_size();
            let mut fds = [nix::poll::PollFd::new(
                stdin.as_fd(),
                nix::poll::PollFlags::POLLIN,
            )];
            match nix::poll::poll(&mut fds, nix::poll::PollTimeout::from(200u8)) {
                Ok(0) | Err(nix::errno::Errno::EINTR) => continue,
                Ok(_) => {}
                Err(_) => return End::Detached,
            }
            // Unbuffered: what poll saw is exactly what is read.
            let n = match nix::unistd::read(0, &mut buf) {
                Ok(0) => return End::Detached, // end of input
                Ok(n) => n,
                Err(nix::errno::Errno::EINTR | nix::errno::Errno::EAGAIN) => continue,
                Err(_) => return End::Detached,
            };
            let keys = &buf[..n];
            let (keys, detach) = match keys.iter().position(|b| *b == DETACH) {
                Some(at) => (&keys[..at], true),
                None => (keys, false),
            };
            if let Some(link) = &mut self.link {
                if !keys.is_empty() && link.conn.write_all(&frame(b'i', keys)).is_err() {
                    // The session is ending: its reader sees the end and says so.
                    let _ = link.conn.shutdown(std::net::Shutdown::Write);
                }
            }
            if detach {
                return End::Detached;
            }
        }
    }

    /// Sends the terminal's size to the session shown when it changed (or the session
    /// is new). Polled: a resize is rare, and this needs no signal handler.
    fn pass_size(&mut self) {
        let Some(link) = &mut self.link else {
            return;
        };
        let mut ws: nix::libc::winsize = unsafe { std::mem::zeroed() };
        // SAFETY: TIOCGWINSZ fills a winsize; the pointer is valid.
        let rc = unsafe { nix::libc::ioctl(1, nix::libc::TIOCGWINSZ, &mut ws) };
        let now = (rc == 0 && ws.ws_col > 0 && ws.ws_row > 0).then_some((ws.ws_col, ws.ws_row));
        if let Some((c, r)) = now.filter(|_| now != self.last_size) {
            self.last_size = now;
            let body = [c.to_be_bytes(), r.to_be_bytes()].concat();
            let _ = link.conn.write_all(&frame(b'r', &body));
        }
    }
}

/// The operator's terminal in raw mode, restored when dropped.
struct Raw(Option<nix::sys::termios::Termios>);

impl Raw {
    fn enter() -> Result<Raw> {
        let stdin = std::io::stdin();
        if !nix::unistd::isatty(0).unwrap_or(false) {
            return Ok(Raw(None));
        }
        let saved = nix::sys::termios::tcgetattr(stdin.as_fd())
            .map_err(|e| Error::Other(format!("failed to read the terminal's mode: {e}")))?;
        let mut raw = saved.clone();
        nix::sys::termios::cfmakeraw(&mut raw);
        nix::sys::termios::tcsetattr(stdin.as_fd(), nix::sys::termios::SetArg::TCSANOW, &raw)
            .map_err(|e| Error::Other(format!("failed to set the terminal's mode: {e}")))?;
        Ok(Raw(Some(saved)))
    }
}

impl Drop for Raw {
    fn drop(&mut self) {
        if let Some(t) = &self.0 {
            let _ = nix::sys::termios::tcsetattr(
                std::io::stdin().as_fd(),
                nix::sys::termios::SetArg::TCSANOW,
                t,
            );
        }
    }
}
