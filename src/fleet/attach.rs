//! `spice fleet attach LANE`: the operator's terminal connected to a lane's PTY.
//!
//! The supervisor listens on `<state>/attach/<lane>.sock` (mode 0600) for each lane.
//! A client gets the agent's recent output and then everything it writes; what the
//! client sends is framed: `i` + length + bytes typed, `r` + length + cols and rows
//! (big-endian u16 each). Detaching (or a client that goes away) leaves the agent
//! running; a client that cannot keep up is dropped, never the agent slowed.
//!
//! Invariants: the socket serves only the lane's current session (a successor's
//! terminal replaces it for new clients; attached clients see the old session end);
//! bad frames end that client's connection, nothing else.

use crate::agent::Terminal;
use crate::error::{Error, Result};
use std::io::{Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The largest frame a client may send.
const MAX_FRAME: usize = 64 * 1024;

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
                match listener.accept() {
                    Ok((conn, _)) => {
                        let port = port.clone();
                        let stop = stop.clone();
                        std::thread::spawn(move || {
                            let _ = client(conn, &port, &stop);
                        });
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(100)),
                }
            }
            let _ = std::fs::remove_file(&path);
        })
        .map_err(|source| Error::Io {
            context: "failed to start an attach listener".into(),
            source,
        })
}

fn client(mut conn: UnixStream, port: &Port, stop: &AtomicBool) -> std::io::Result<()> {
    let Some(term) = port.get() else {
        conn.write_all(b"spice: the lane has no agent running right now\r\n")?;
        return Ok(());
    };
    if term.watch(conn.try_clone()?).is_err() {
        return Ok(());
    }
    conn.set_read_timeout(Some(Duration::from_millis(250)))?;
    let mut pending: Vec<u8> = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match conn.read(&mut buf) {
            Ok(0) => return Ok(()), // detached
            Ok(n) => pending.extend_from_slice(&buf[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock
                        | std::io::ErrorKind::TimedOut
                        | std::io::ErrorKind::Interrupted
                ) =>
            {
                if stop.load(Ordering::SeqCst) {
                    return Ok(());
                }
                continue;
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
