//! Input into an agent's terminal: raw keys and bracketed paste, written to a
//! non-blocking descriptor of the PTY master.
//!
//! Invariants: a write never waits longer than [`INPUT_STALL`] for an agent that does
//! not read its input (a hung agent must not hang the supervisor); pasted text can
//! never end its own paste early, so it cannot type keys the agent would act on.

use crate::error::{Error, Result};
use nix::errno::Errno;
use nix::fcntl::{fcntl, FcntlArg, OFlag};
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::time::{Duration, Instant};

/// How long a write into the PTY may wait for the agent to read its input before it
/// is reported as failed.
pub const INPUT_STALL: Duration = Duration::from_secs(10);
/// The pause between a bracketed paste and its Enter. Codex's composer treats an
/// Enter that follows typed text within ~100 ms as part of a paste burst and does not
/// submit (`shared/AGENTS_OFFLINE.md` §5, gotcha 2).
pub const ENTER_AFTER_PASTE: Duration = Duration::from_millis(150);

const PASTE_START: &[u8] = b"\x1b[200~";
const PASTE_END: &[u8] = b"\x1b[201~";

/// `text` as one bracketed paste. Line feeds become carriage returns, as terminals
/// paste them, and end-of-paste markers inside the text are removed.
pub(super) fn bracketed(text: &str) -> Vec<u8> {
    let body = text.replace("\r\n", "\r").replace('\n', "\r");
    let body = strip(body.as_bytes(), PASTE_END);
    [PASTE_START, &body, PASTE_END].concat()
}

/// Writes all of `bytes` to the PTY master `fd` of agent `pid`.
pub(super) fn write_all(fd: &OwnedFd, pid: u32, mut bytes: &[u8]) -> Result<()> {
    let deadline = Instant::now() + INPUT_STALL;
    while !bytes.is_empty() {
        match nix::unistd::write(fd, bytes) {
            Ok(n) => bytes = &bytes[n..],
            Err(Errno::EINTR) => {}
            Err(Errno::EAGAIN) => {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return Err(Error::Other(format!(
                        "agent {pid} has not read its input for {}s; {} bytes not delivered",
                        INPUT_STALL.as_secs(),
                        bytes.len()
                    )));
                }
                let timeout = PollTimeout::try_from(left).unwrap_or(PollTimeout::MAX);
                let mut fds = [PollFd::new(fd.as_fd(), PollFlags::POLLOUT)];
                match poll(&mut fds, timeout) {
                    Ok(_) | Err(Errno::EINTR) => {}
                    Err(e) => return Err(input_err(pid, e)),
                }
            }
            Err(e) => return Err(input_err(pid, e)),
        }
    }
    Ok(())
}

/// Sets `O_NONBLOCK`. The flag belongs to the open file, so it holds for every
/// duplicate of the master: the reader's too.
pub(super) fn set_nonblocking(fd: &OwnedFd) -> Result<()> {
    let err = |e: Errno| Error::Other(format!("failed to make the PTY non-blocking: {e}"));
    let flags = OFlag::from_bits_truncate(fcntl(fd.as_raw_fd(), FcntlArg::F_GETFL).map_err(err)?);
    fcntl(fd.as_raw_fd(), FcntlArg::F_SETFL(flags | OFlag::O_NONBLOCK)).map_err(err)?;
    Ok(())
}

fn input_err(pid: u32, e: Errno) -> Error {
    Error::Other(format!("failed to write input to agent {pid}: {e}"))
}

/// `bytes` without any occurrence of `needle`.
fn strip(bytes: &[u8], needle: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes.len());
    let mut rest = bytes;
    while let Some(i) = memchr::memmem::find(rest, needle) {
        out.extend_from_slice(&rest[..i]);
        rest = &rest[i + needle.len()..];
    }
    out.extend_from_slice(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_paste_cannot_end_itself_early() {
        assert_eq!(
            bracketed("a\x1b[201~\rb\x1b[201~"),
            b"\x1b[200~a\rb\x1b[201~"
        );
        assert_eq!(strip(b"plain", PASTE_END), b"plain");
    }

    #[test]
    fn pasted_line_feeds_become_carriage_returns() {
        assert_eq!(bracketed("a\nb\r\nc"), b"\x1b[200~a\rb\rc\x1b[201~");
    }
}
