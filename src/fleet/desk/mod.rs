//! The supervisor's desk: a Unix socket in the state directory (`desk.sock`) where a
//! lane's agent reaches the store through its supervisor: it reads and marks the
//! steering addressed to it, records its gate's runs, watches for new steering, and
//! completes its task's phase (which merges into base, pushes and moves the
//! operator's checkout). A confined agent can write none of the store's files and
//! never sees its credentials; the protocol is [`crate::steer::desk`]'s.
//!
//! Theory: the desk never believes who a caller says it is. The kernel tells it the
//! caller's pid (`SO_PEERCRED`); the desk walks that pid's parents up to the agent
//! shim of a running session ([`Seats`]), and the session found is the caller: its
//! lane, task, worktree and fence. A request names only the operation (and for a
//! phase, the task it means, which must be the seat's own); whose items, whose
//! ledger and which holder come from the seat. An agent can therefore act only for
//! its own lane and claim, whatever it writes into its environment or its request.
//!
//! Invariants:
//! - A caller that is no descendant of a seated shim is refused, and nothing runs.
//! - The operation runs in the supervisor, unconfined, with the supervisor's store;
//!   the store's credentials never pass to the agent.
//! - Every request and every watch has a thread of its own, so a slow merge never
//!   holds up another lane's steering.

mod ops;

use super::FleetOptions;
use crate::error::{Error, Result};
use crate::steer::desk::{failure, Request};
use serde_json::json;
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub use crate::steer::desk::{socket, VAR};

/// Longest request line read.
const MAX_REQUEST: u64 = 64 * 1024;

/// A running session, known by its shim's pid.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seat {
    pub lane: String,
    pub session: String,
    pub task: String,
    pub fence: i64,
    pub worktree: PathBuf,
    /// The repository the lane runs in, as the supervisor knows it: where the task
    /// worktree's branch merges, never found through the worktree's own `.git`.
    pub repo: PathBuf,
    /// The branch the task merges into (the lane's base as the supervisor runs it):
    /// whose `spice.toml` gates the agent's commits.
    pub base: String,
    /// The sandbox of the repository's commands run in this worktree (the stage
    /// hooks of the phase the agent completes: `fleet::confine::commands`).
    pub hooks: crate::fleet::confine::Confined,
}

#[cfg(test)]
impl Seat {
    /// Lane `a`'s session `s` on task `t`, fence 1, worktree `/w` of repository `/r`.
    pub(crate) fn for_test() -> Seat {
        Seat {
            lane: "a".into(),
            session: "s".into(),
            task: "t".into(),
            fence: 1,
            worktree: "/w".into(),
            repo: "/r".into(),
            base: "main".into(),
            hooks: Default::default(),
        }
    }
}

/// The sessions running now, by the pid of their agent shim.
#[derive(Debug, Clone, Default)]
pub struct Seats(Arc<Mutex<HashMap<u32, Seat>>>);

impl Seats {
    /// Seats a session whose shim runs as `pid`; [`Seated`] unseats it when dropped.
    pub fn sit(&self, pid: u32, seat: Seat) -> Seated {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(pid, seat);
        Seated {
            seats: self.clone(),
            pid,
        }
    }

    /// The seat of the nearest seated ancestor of `pid` (or `pid` itself).
    pub fn of(&self, pid: u32) -> Option<Seat> {
        let seats = self.0.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let mut at = pid;
        for _ in 0..256 {
            if let Some(s) = seats.get(&at) {
                return Some(s.clone());
            }
            at = parent(at)?;
            if at <= 1 {
                return None;
            }
        }
        None
    }
}

/// A session's place at the desk, given up when dropped.
pub struct Seated {
    seats: Seats,
    pid: u32,
}

impl Drop for Seated {
    fn drop(&mut self) {
        self.seats
            .0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&self.pid);
    }
}

/// A process's parent, from `/proc/PID/stat` (the field after the parenthesised name,
/// which may itself hold spaces and parentheses).
fn parent(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = &stat[stat.rfind(')')? + 1..];
    after.split_whitespace().nth(1)?.parse().ok()
}

/// Opens the desk and answers on a thread until `stop` is set (then
/// [`wake`] it). A stale socket of a dead supervisor is replaced: the state
/// directory's lock says this supervisor is the only one.
pub fn serve(
    opts: &FleetOptions,
    seats: Seats,
    stop: Arc<AtomicBool>,
) -> Result<std::thread::JoinHandle<()>> {
    let path = socket(&opts.state_dir);
    let _ = std::fs::remove_file(&path);
    let listener = UnixListener::bind(&path).map_err(|source| Error::Io {
        context: format!("failed to open the desk at {}", path.display()),
        source,
    })?;
    let opts = opts.clone();
    let pool = ops::Pool::default();
    Ok(std::thread::spawn(move || {
        for conn in listener.incoming() {
            if stop.load(Ordering::SeqCst) {
                break;
            }
            let Ok(conn) = conn else { continue };
            let opts = opts.clone();
            let seats = seats.clone();
            let pool = pool.clone();
            std::thread::spawn(move || answer(conn, &opts, &seats, &pool));
        }
        let _ = std::fs::remove_file(&path);
    }))
}

/// Unblocks the desk's accept so its thread sees `stop`.
pub fn wake(state_dir: &Path) {
    let _ = UnixStream::connect(socket(state_dir));
}

fn answer(mut conn: UnixStream, opts: &FleetOptions, seats: &Seats, pool: &ops::Pool) {
    let _ = conn.set_read_timeout(Some(Duration::from_secs(10)));
    let request = caller(&conn, seats).and_then(|seat| {
        let mut line = String::new();
        BufReader::new((&conn).take(MAX_REQUEST))
            .read_line(&mut line)
            .map_err(|e| e.to_string())
            .and_then(|_| serde_json::from_str::<Request>(&line).map_err(|e| e.to_string()))
            .map(|req| (seat, req))
            .map_err(|e| Error::input(format!("the desk could not read the request: {e}")))
    });
    let reply = match request {
        Err(e) => failure(&e),
        Ok((_, Request::Watch)) => {
            let _ = conn.set_read_timeout(None);
            return ops::watch(conn, opts);
        }
        Ok((seat, req)) => match ops::perform(&req, &seat, opts, pool) {
            Ok(v) => json!({ "ok": v }),
            Err(e) => failure(&e),
        },
    };
    let _ = writeln!(conn, "{reply}");
}

/// Who is calling: the seat of the connecting process's nearest seated ancestor.
fn caller(conn: &UnixStream, seats: &Seats) -> Result<Seat> {
    let pid = peer_pid(conn)
        .map_err(|e| Error::Other(format!("the desk could not tell who called: {e}")))?;
    seats.of(pid).ok_or_else(|| {
        Error::input("the desk answers only a running lane's agent (this process is none)")
    })
}

/// The process at the other end of a connected unix socket, as the kernel says
/// (`SO_PEERCRED`): not something the peer can claim.
pub fn peer_pid(conn: &UnixStream) -> std::io::Result<u32> {
    use nix::libc;
    use std::os::fd::AsRawFd;
    let mut cred = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: SO_PEERCRED fills exactly one `ucred`, whose size is passed in `len`;
    // the descriptor is the connected socket `conn` owns.
    let rc = unsafe {
        libc::getsockopt(
            conn.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    u32::try_from(cred.pid)
        .ok()
        .filter(|p| *p > 0)
        .ok_or_else(|| std::io::Error::other("the kernel named no peer process"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seat_is_found_from_any_descendant_and_given_up_when_dropped() {
        let seats = Seats::default();
        let me = std::process::id();
        let seat = Seat::for_test();
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        {
            let _held = seats.sit(me, seat.clone());
            assert_eq!(seats.of(child.id()), Some(seat.clone()));
            assert_eq!(seats.of(me), Some(seat));
        }
        assert_eq!(seats.of(child.id()), None);
        child.kill().unwrap();
        child.wait().unwrap();
    }

    #[test]
    fn parent_reads_past_a_name_with_spaces_and_parentheses() {
        assert_eq!(
            parent(std::process::id()),
            Some(std::os::unix::process::parent_id())
        );
    }
}
