//! What wakes `spice exec`'s wait loop when the store changes: inotify on the SQLite
//! store's directory (every commit touches the WAL), or on PostgreSQL a thread that
//! `LISTEN`s on a connection of its own and writes a byte to a socket pair per change.
//! Either way the loop polls one more descriptor beside its signalfd and never blocks
//! on the store.
//!
//! Invariants: the listener says once that it listens (whatever was committed before
//! made no notification, so the loop reads the store then); a lost listening
//! connection is made again (said once, paused between tries), so a command outlives
//! a server restart with live delivery; a watch that ended reports [`Drained::Gone`]
//! instead of waking the loop forever.

use super::exec::warn;
use crate::store::Location;
use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify};
use std::io::{Read, Write};
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::net::UnixStream;
use std::sync::Arc;
use std::time::Duration;

/// What tells the wait loop the store changed.
pub enum Watch {
    /// inotify on the SQLite store's directory.
    Dir(Inotify),
    /// The end of a socket pair a `LISTEN`ing thread writes a byte to per change.
    Listener(UnixStream),
}

impl Watch {
    pub fn fd(&self) -> BorrowedFd<'_> {
        match self {
            Watch::Dir(i) => i.as_fd(),
            Watch::Listener(s) => s.as_fd(),
        }
    }

    /// Reads what woke the loop.
    pub fn drain(&mut self) -> Drained {
        match self {
            Watch::Dir(i) => {
                let _ = i.read_events();
                Drained::Settle
            }
            Watch::Listener(s) => {
                let mut buf = [0u8; 64];
                loop {
                    match s.read(&mut buf) {
                        Ok(0) => return Drained::Gone,
                        Ok(_) => {}
                        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                            return Drained::Visible
                        }
                        Err(_) => return Drained::Gone,
                    }
                }
            }
        }
    }
}

/// What a wake-up of the watch said.
pub enum Drained {
    /// A change whose commit may not be visible yet: read the store once more after
    /// [`super::exec`]'s `SETTLE` (an inotify event can precede SQLite's commit).
    Settle,
    /// Changes already committed (a notification comes after PostgreSQL's commit).
    Visible,
    /// The watch ended: it can never wake the loop again, and would wake it forever.
    Gone,
}

/// Starts a thread that listens for the store's change notifications on a connection
/// of its own and writes a byte to the returned socket once it listens (whatever was
/// committed before was made without it: the loop reads the store then) and after
/// each change. The loop never blocks on the server. A connection that cannot be made
/// or is lost (the server restarted, the backend was ended) is said once and made
/// again after a pause (250 ms, doubling to 5 s), the safety poll covering the gap;
/// each new connection writes its byte, so what was committed meanwhile is read. The
/// thread ends with the process, or as soon as the loop's end of the socket is gone.
pub fn listen(url: &str) -> Option<UnixStream> {
    let (ours, theirs) = UnixStream::pair().ok()?;
    ours.set_nonblocking(true).ok()?;
    let loc = Location::Postgres(url.to_string());
    let spawned = std::thread::Builder::new()
        .name("spice-exec-listen".into())
        .spawn(move || {
            let mut theirs = theirs;
            let mut warned = false;
            let mut pause = FIRST_PAUSE;
            loop {
                let mut listened = false;
                let heard = crate::store::connect(&loc, Arc::new(crate::clock::SystemClock))
                    .and_then(|mut store| {
                        let mut seen = store.change_token()?;
                        loop {
                            if theirs.write_all(&[1]).is_err() {
                                return Ok(());
                            }
                            listened = true;
                            seen = loop {
                                let now = store.wait_change(seen, Duration::from_secs(3600))?;
                                if now != seen {
                                    break now;
                                }
                            };
                        }
                    });
                let e = match heard {
                    Ok(()) => return,
                    Err(e) => e,
                };
                if !warned {
                    warn(&format!(
                        "not listening for new steering ({e}); trying again meanwhile"
                    ));
                    warned = true;
                }
                if listened {
                    pause = FIRST_PAUSE;
                }
                if peer_gone(&theirs, pause) {
                    return;
                }
                pause = (pause * 2).min(LAST_PAUSE);
            }
        });
    spawned.ok().map(|_| ours)
}

/// The first pause before a lost listener connects again, and the longest.
const FIRST_PAUSE: Duration = Duration::from_millis(250);
const LAST_PAUSE: Duration = Duration::from_secs(5);

/// Waits up to `pause` for the loop's end of the socket to close: true if it did. The
/// loop never writes to the listener, so anything readable is the end of the stream.
fn peer_gone(theirs: &UnixStream, pause: Duration) -> bool {
    let mut fds = [nix::poll::PollFd::new(
        theirs.as_fd(),
        nix::poll::PollFlags::POLLIN,
    )];
    let timeout = nix::poll::PollTimeout::try_from(pause).unwrap_or(nix::poll::PollTimeout::MAX);
    matches!(nix::poll::poll(&mut fds, timeout), Ok(n) if n > 0)
}

pub fn watch_dir(dir: &std::path::Path) -> Option<Inotify> {
    let ino = Inotify::init(InitFlags::IN_NONBLOCK | InitFlags::IN_CLOEXEC).ok()?;
    ino.add_watch(
        dir,
        AddWatchFlags::IN_MODIFY
            | AddWatchFlags::IN_CLOSE_WRITE
            | AddWatchFlags::IN_CREATE
            | AddWatchFlags::IN_MOVED_TO,
    )
    .ok()?;
    Some(ino)
}
