//! The thread that drains an agent's PTY master: every byte the agent writes is read
//! at once, appended to the screen tail and to the recording, so the agent never
//! blocks on a full terminal buffer, whatever the supervisor is doing.
//!
//! Invariants:
//! - The reader never waits on anything but the PTY and its own short-held locks; a
//!   failing recording is dropped (the error kept for [`Shared::recording_error`]) and
//!   draining goes on.
//! - Memory is bounded: one read buffer, the [`TAIL_BYTES`] ring and the recorder's
//!   buffer.
//! - It ends at end of file (every holder of the terminal's slave side is gone), or,
//!   once the agent is being dropped, when output pauses or [`CLOSE_DRAIN`] has passed,
//!   so an escaped process that keeps the terminal open cannot hold the supervisor.

use super::record::Recorder;
use nix::errno::Errno;
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use std::collections::VecDeque;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// How much recent output the screen tail keeps for diagnostics.
pub const TAIL_BYTES: usize = 64 * 1024;
/// The longest the reader keeps draining after the agent is dropped.
const CLOSE_DRAIN: Duration = Duration::from_secs(2);
const READ_CHUNK: usize = 64 * 1024;
/// How long the reader sleeps in poll when nothing waits to be flushed: a silent
/// agent costs one wake-up a second, and a drop is noticed within it.
const IDLE_WAKE: Duration = Duration::from_secs(1);

/// State the reader shares with its [`Agent`](super::Agent).
#[derive(Default)]
pub struct Shared {
    tail: Mutex<VecDeque<u8>>,
    /// `None` once the recording is finished or failed.
    pub(super) recorder: Mutex<Option<Recorder>>,
    recording_error: Mutex<Option<String>>,
    /// Set by the agent's drop: stop at the next pause in output.
    pub(super) closing: AtomicBool,
    /// Set by the reader when it has stopped and the recording is closed.
    done: AtomicBool,
    /// Attached operators' sockets, each sent every byte read from now on.
    watchers: Mutex<Vec<UnixStream>>,
}

impl Shared {
    pub fn new(recorder: Option<Recorder>) -> Shared {
        Shared {
            recorder: Mutex::new(recorder),
            ..Shared::default()
        }
    }

    /// The last [`TAIL_BYTES`] of output.
    pub fn tail(&self) -> Vec<u8> {
        lock(&self.tail).iter().copied().collect()
    }

    /// Why the recording stopped early, if it did.
    pub fn recording_error(&self) -> Option<String> {
        lock(&self.recording_error).clone()
    }

    /// True once the reader has stopped (end of file, or the agent was dropped) and
    /// the recording is complete on disk.
    pub fn done(&self) -> bool {
        self.done.load(Ordering::Acquire)
    }

    /// Adds a watcher (non-blocking): it gets the current tail at once, then every
    /// byte read.
    pub fn add_watcher(&self, mut to: UnixStream) {
        let tail = self.tail();
        if write_all_now(&mut to, &tail) {
            lock(&self.watchers).push(to);
        } else {
            hang_up(&to);
        }
    }

    /// Copies `bytes` to every watcher; one that would block or failed is dropped.
    fn copy_to_watchers(&self, bytes: &[u8]) {
        let mut w = lock(&self.watchers);
        if !w.is_empty() {
            w.retain_mut(|s| write_all_now(s, bytes) || hang_up(s));
        }
    }

    fn push_tail(&self, bytes: &[u8]) {
        let mut tail = lock(&self.tail);
        let keep = bytes.len().min(TAIL_BYTES);
        let overflow = (tail.len() + keep).saturating_sub(TAIL_BYTES);
        tail.drain(..overflow);
        tail.extend(&bytes[bytes.len() - keep..]);
    }

    /// Runs `f` on the recorder; a failure ends the recording but not the reader.
    pub(super) fn record<T>(&self, f: impl FnOnce(&mut Recorder) -> crate::Result<T>) -> Option<T> {
        let mut slot = lock(&self.recorder);
        let rec = slot.as_mut()?;
        match f(rec) {
            Ok(v) => Some(v),
            Err(e) => {
                *lock(&self.recording_error) = Some(e.to_string());
                *slot = None;
                None
            }
        }
    }
}

/// Writes all of `bytes` to a non-blocking socket, or reports that it could not (it
/// would block, or the peer is gone). A local socket's buffer holds far more than a
/// terminal shows, so only a stuck reader hits this.
fn write_all_now(s: &mut UnixStream, mut bytes: &[u8]) -> bool {
    use std::io::Write;
    while !bytes.is_empty() {
        match s.write(bytes) {
            Ok(0) => return false,
            Ok(n) => bytes = &bytes[n..],
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return false,
        }
    }
    true
}

/// Ends a dropped watcher's connection, not just this descriptor of it: whoever holds
/// another (the attach thread serving it, waiting in poll) wakes to an end of file,
/// and so does the operator's client. Returns false, for `retain_mut`.
fn hang_up(s: &UnixStream) -> bool {
    let _ = s.shutdown(std::net::Shutdown::Both);
    false
}

/// A poisoned lock only means another thread panicked mid-update of plain bytes;
/// the data is still usable for diagnostics, so carry on with it.
pub(super) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Drains `master` (a non-blocking descriptor of the PTY master) until the end.
pub fn run(master: OwnedFd, shared: &Shared) {
    let mut buf = vec![0u8; READ_CHUNK];
    let mut closing_since: Option<Instant> = None;
    loop {
        if closing_since.is_none() && shared.closing.load(Ordering::Acquire) {
            closing_since = Some(Instant::now());
        }
        if closing_since.is_some_and(|t| t.elapsed() >= CLOSE_DRAIN) {
            break;
        }
        let flush_in = shared
            .record(|r| r.flush_if_due(Instant::now()))
            .flatten()
            .unwrap_or(IDLE_WAKE);
        let timeout =
            PollTimeout::try_from(flush_in.as_millis().max(1) as u64).unwrap_or(PollTimeout::MAX);
        let mut fds = [PollFd::new(master.as_fd(), PollFlags::POLLIN)];
        match poll(&mut fds, timeout) {
            Ok(0) => {
                // A pause in output: after a drop, that is the end of what matters.
                if closing_since.is_some() {
                    break;
                }
                continue;
            }
            Ok(_) => {}
            Err(Errno::EINTR) => continue,
            Err(_) => break,
        }
        match nix::unistd::read(master.as_raw_fd(), &mut buf) {
            Ok(0) => break,
            Ok(n) => {
                shared.push_tail(&buf[..n]);
                shared.record(|r| r.output(&buf[..n]));
                shared.copy_to_watchers(&buf[..n]);
            }
            Err(Errno::EAGAIN | Errno::EINTR) => {}
            // EIO: the slave side has no holder left; the kernel hands over all
            // buffered output before reporting it.
            Err(_) => break,
        }
    }
    if let Some(mut rec) = lock(&shared.recorder).take() {
        if let Err(e) = rec.finish() {
            *lock(&shared.recording_error) = Some(e.to_string());
        }
    }
    // Attached terminals see the end of the session.
    for s in lock(&shared.watchers).drain(..) {
        hang_up(&s);
    }
    shared.done.store(true, Ordering::Release);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tail_keeps_only_the_most_recent_bytes() {
        let s = Shared::new(None);
        s.push_tail(b"abc");
        assert_eq!(s.tail(), b"abc");
        s.push_tail(&vec![b'x'; TAIL_BYTES - 1]);
        let t = s.tail();
        assert_eq!(t.len(), TAIL_BYTES);
        assert_eq!(&t[..2], b"cx");
        let big: Vec<u8> = (0..TAIL_BYTES * 2).map(|i| (i % 251) as u8).collect();
        s.push_tail(&big);
        assert_eq!(s.tail(), &big[TAIL_BYTES..]);
    }

    #[test]
    fn a_watcher_that_cannot_keep_up_is_dropped_and_its_connection_ended() {
        use std::io::Read;
        let s = Shared::new(None);
        let (ours, mut theirs) = UnixStream::pair().unwrap();
        ours.set_nonblocking(true).unwrap();
        s.add_watcher(ours);
        let chunk = vec![b'x'; READ_CHUNK];
        let mut sent = 0;
        while !lock(&s.watchers).is_empty() {
            assert!(
                sent < 1 << 30,
                "a watcher that never reads was never dropped"
            );
            s.copy_to_watchers(&chunk);
            sent += chunk.len();
        }
        // The other end gets what fitted, then the end: not a connection left hanging.
        let mut got = Vec::new();
        theirs.read_to_end(&mut got).unwrap();
        assert!(!got.is_empty() && got.len() <= sent);
    }
}
