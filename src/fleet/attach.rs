//! `spice fleet attach LANE`: the operator's terminal connected to a lane's PTY.
//!
//! The supervisor listens on `<state>/attach/<lane>.sock` (mode 0600) for each lane.
//! A client gets the agent's recent output and then everything it writes; what the
//! client sends is framed: `i` + length + bytes typed, `r` + length + cols and rows
//! (big-endian u16 each). Detaching (or a client that goes away) leaves the agent
//! running; a client that cannot keep up is dropped, never the agent slowed.
//!
//! Output never passes through this module: the terminal's reader writes it to the
//! client's socket itself, non-blocking, and shuts the socket down when it drops the
//! client (too slow, gone, or the session ended). That makes the socket non-blocking
//! for every descriptor of it, this module's too, so the thread serving a client waits
//! for its frames in poll(2), never in `read`: it wakes for input, a hang-up, or every
//! [`STOP_CHECK_MS`] to look at the stop flag, and costs nothing in between. The
//! listener itself waits for clients only, woken by the supervisor at its stop
//! ([`wake`]): an idle lane's socket costs no wake-ups.
//!
//! Invariants: the socket serves only the lane's current session (a successor's
//! terminal replaces it for new clients; attached clients see the old session end);
//! bad frames end that client's connection, nothing else; a lane's agent (any process
//! descending from a seated shim, `fleet::desk::Seats`, known by the kernel's peer
//! credentials) is refused: a confined agent can connect to a unix socket, and one
//! lane's agent must not type into another's terminal (or its own: ^C, a forged
//! reply).

use crate::agent::Terminal;
use crate::error::{Error, Result};
use nix::errno::Errno;
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use std::io::{Read, Write};
use std::os::fd::AsFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The largest frame a client may send.
const MAX_FRAME: usize = 64 * 1024;
/// How long (ms) the attach threads sleep in poll between looks at the stop flag:
/// four wake-ups a second each, and a stop is honoured within this.
const STOP_CHECK_MS: u8 = 250;
const STOP_CHECK: Duration = Duration::from_millis(STOP_CHECK_MS as u64);
/// How long (ms) a listener waits for a client between looks at the stop flag: the
/// supervisor wakes it at its stop ([`wake`]), so this only bounds a wake-up lost.
const LISTEN_WAIT_MS: u16 = 5_000;

/// What a client is told, before the connection ends, when the lane has no session
/// running: a following client (`spice fleet attach`) tells it from agent output and
/// tries again later.
pub const NO_AGENT: &[u8] = b"spice: the lane has no agent running right now\r\n";

/// What a lane's agent is told when it connects.
pub const AGENTS_REFUSED: &[u8] = b"spice: a lane's agent may not attach to a lane's terminal\r\n";

/// Where the lane's attach socket is.
pub fn socket_path(state_dir: &Path, lane: &str) -> PathBuf {
    state_dir.join("attach").join(format!("{lane}.sock"))
}

/// The lane's current terminal, shared between its loop and its attach listener.
#[derive(Clone, Default)]
pub struct Port(Arc<Mutex<Option<Arc<Terminal>>>>);

impl Port {
    pub fn set(&self, term: Option<Arc<Terminal>>) {
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) = term;
    }
    fn get(&self) -> Option<Arc<Terminal>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

/// Starts listening for `lane` until `stop` is set; removes the socket at the end.
pub fn serve(
    state_dir: &Path,
    lane: &str,
    port: Port,
    stop: Arc<AtomicBool>,
    seats: super::desk::Seats,
) -> Result<std::thread::JoinHandle<()>> {
    let path = socket_path(state_dir, lane);
    let dir = path.parent().expect("a socket path has a directory");
    std::fs::create_dir_all(dir).map_err(|source| Error::Io {
        context: format!("failed to create {}", dir.display()),
        source,
    })?;
    // Only the lock holder gets here, so a socket file left behind is stale.
    let _ = std::fs::remove_file(&path);
    let listener = UnixListener::bind(&path).map_err(|source| Error::Io {
        context: format!("failed to listen on {}", path.display()),
        source,
    })?;
    use std::os::unix::fs::PermissionsExt;
    let _ = std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600));
    listener.set_nonblocking(true).map_err(|source| Error::Io {
        context: format!("failed to listen on {}", path.display()),
        source,
    })?;
    let name = format!("attach-{lane}");
    std::thread::Builder::new()
        .name(name)
        .spawn(move || {
            while !stop.load(Ordering::SeqCst) {
                if !readable_within(&listener, LISTEN_WAIT_MS) {
                    continue;
                }
                // Non-blocking: a client that connected and left is no reason to hang.
                match listener.accept() {
                    // The supervisor's wake-up at its stop ([`wake`]).
                    Ok(_) if stop.load(Ordering::SeqCst) => break,
                    Ok((mut conn, _))
                        if super::desk::peer_pid(&conn)
                            .map_or(true, |pid| seats.of(pid).is_some()) =>
                    {
                        let _ = conn.write_all(AGENTS_REFUSED);
                    }
                    Ok((conn, _)) => {
                        let port = port.clone();
                        let stop = stop.clone();
                        std::thread::spawn(move || {
                            let _ = client(conn, &port, &stop);
                        });
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                    // Out of descriptors, say: the connection stays queued and poll
                    // reports it again at once, so back off instead of spinning.
                    Err(_) => std::thread::sleep(STOP_CHECK),
                }
            }
            let _ = std::fs::remove_file(&path);
        })
        .map_err(|source| Error::Io {
            context: "failed to start an attach listener".into(),
            source,
        })
}

/// Wakes `lane`'s listener after the stop flag was set, so it ends now rather than at
/// its next look ([`LISTEN_WAIT_MS`]): a connection it closes unserved.
pub fn wake(state_dir: &Path, lane: &str) {
    let _ = std::os::unix::net::UnixStream::connect(socket_path(state_dir, lane));
}

/// Waits up to [`STOP_CHECK_MS`] for `fd` to have something to read (or to hang up).
fn readable(fd: &impl AsFd) -> bool {
    readable_within(fd, STOP_CHECK_MS as u16)
}

/// Waits up to `ms` for `fd` to have something to read (or to hang up).
fn readable_within(fd: &impl AsFd, ms: u16) -> bool {
    let mut fds = [PollFd::new(fd.as_fd(), PollFlags::POLLIN)];
    match poll(&mut fds, PollTimeout::from(ms)) {
        Ok(n) => n > 0,
        Err(Errno::EINTR) => false,
        // Not expected for a descriptor we own; waiting out the interval keeps even a
        // poll that fails every time from becoming a busy loop.
        Err(_) => {
            std::thread::sleep(STOP_CHECK);
            false
        }
    }
}

fn client(mut conn: UnixStream, port: &Port, stop: &AtomicBool) -> std::io::Result<()> {
    let Some(term) = port.get() else {
        conn.write_all(NO_AGENT)?;
        return Ok(());
    };
    if term.watch(conn.try_clone()?).is_err() {
        return Ok(());
    }
    let served = keys_in(&mut conn, &term, stop);
    // The terminal's reader holds another descriptor of this socket: end the
    // connection itself, so the client sees it end now, not at the next output.
    let _ = conn.shutdown(std::net::Shutdown::Both);
    served
}

/// Reads the client's frames and applies them until it detaches or goes away, a frame
/// is bad, or `stop` is set.
fn keys_in(conn: &mut UnixStream, term: &Terminal, stop: &AtomicBool) -> std::io::Result<()> {
    let mut pending: Vec<u8> = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        if stop.load(Ordering::SeqCst) {
            return Ok(());
        }
        if !readable(conn) {
            continue;
        }
        match conn.read(&mut buf) {
            Ok(0) => return Ok(()), // detached, or dropped by the reader
            Ok(n) => pending.extend_from_slice(&buf[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::Interrupted
                ) =>
            {
                continue
            }
            Err(_) => return Ok(()),
        }
        // Every complete frame; a partial one waits for the rest.
        while pending.len() >= 5 {
            let len = u32::from_be_bytes([pending[1], pending[2], pending[3], pending[4]]) as usize;
            if len > MAX_FRAME {
                return Ok(());
            }
            if pending.len() < 5 + len {
                break;
            }
            let kind = pending[0];
            let body: Vec<u8> = pending.drain(..5 + len).skip(5).collect();
            match (kind, body.as_slice()) {
                (b'i', keys) => {
                    if term.write_input(keys).is_err() {
                        return Ok(());
                    }
                }
                (b'r', [c0, c1, r0, r1]) => {
                    let cols = u16::from_be_bytes([*c0, *c1]);
                    let _ = term.resize(cols, u16::from_be_bytes([*r0, *r1]));
                }
                _ => return Ok(()),
            }
        }
    }
}

/// One frame of the client's side of the protocol.
pub fn frame(kind: u8, body: &[u8]) -> Vec<u8> {
    let mut f = Vec::with_capacity(5 + body.len());
    f.push(kind);
    f.extend_from_slice(&(body.len() as u32).to_be_bytes());
    f.extend_from_slice(body);
    f
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fleet::desk::{Seat, Seats};

    fn said(state: &Path, lane: &str) -> Vec<u8> {
        let mut conn = UnixStream::connect(socket_path(state, lane)).unwrap();
        conn.set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let mut got = Vec::new();
        let _ = conn.read_to_end(&mut got);
        got
    }

    /// Regression (#39): a confined agent could connect to any lane's attach socket
    /// and type into that lane's terminal.
    #[test]
    fn a_lanes_agent_is_refused_and_anyone_else_served() {
        let d = tempfile::tempdir().unwrap();
        let seats = Seats::default();
        let stop = Arc::new(AtomicBool::new(false));
        let listener = serve(d.path(), "b", Port::default(), stop.clone(), seats.clone()).unwrap();
        assert_eq!(said(d.path(), "b"), NO_AGENT, "the operator is served");
        let seated = seats.sit(std::process::id(), Seat::for_test());
        assert_eq!(said(d.path(), "b"), AGENTS_REFUSED, "an agent is refused");
        drop(seated);
        assert_eq!(said(d.path(), "b"), NO_AGENT);
        stop.store(true, Ordering::SeqCst);
        wake(d.path(), "b");
        listener.join().unwrap();
    }
}
