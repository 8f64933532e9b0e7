//! Process identity and signalling for agents: a pid is only meaningful together with
//! its start time (`/proc/<pid>/stat` field 22, clock ticks since boot), because pids
//! are reused. Everything here that sends a signal checks that pair first, so a
//! record that outlived its process (a supervisor restarted after a crash) can never
//! hit an unrelated process that happens to have the same number.
//!
//! Invariants:
//! - A signal to a recorded pid goes through a pidfd opened *before* the start time is
//!   read, so the check and the signal concern the same process (where the kernel has
//!   no pidfds, the fallback has the classic microsecond race, documented below).
//! - A group is signalled only while its leader is alive and verified; a process
//!   group id cannot be handed out again while the group has members or its leader
//!   is unreaped.

use crate::error::{Error, Result};
use nix::errno::Errno;
use nix::libc;
use nix::sys::signal::{kill, killpg, Signal};
use nix::unistd::Pid;
use std::os::fd::{FromRawFd, OwnedFd};

/// The fields of `/proc/<pid>/stat` an agent's identity needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcStat {
    /// One-letter state (`R`, `S`, `Z`, …).
    pub state: char,
    pub ppid: i32,
    pub pgrp: i32,
    pub session: i32,
    /// The foreground process group of the controlling terminal (field 8; -1 if none).
    pub tpgid: i32,
    /// Clock ticks after boot at which the process started (field 22).
    pub start_time: u64,
}

/// Reads `/proc/<pid>/stat`; `Ok(None)` if there is no such process.
pub fn proc_stat(pid: u32) -> Result<Option<ProcStat>> {
    let path = format!("/proc/{pid}/stat");
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        // A process that exits between open and read yields ESRCH on some kernels.
        Err(e) if e.raw_os_error() == Some(libc::ESRCH) => return Ok(None),
        Err(source) => {
            return Err(Error::Io {
                context: format!("failed to read {path}"),
                source,
            })
        }
    };
    parse_stat(&text)
        .map(Some)
        .ok_or_else(|| Error::Other(format!("unexpected format of {path}: {text:?}")))
}

/// Parses a stat line. The command name (field 2) is in parentheses and may itself
/// contain spaces and parentheses, so fields are counted after the *last* `)`.
fn parse_stat(text: &str) -> Option<ProcStat> {
    let rest = &text[text.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // fields[0] is field 3 (state), so field N is fields[N - 3].
    Some(ProcStat {
        state: fields.first()?.chars().next()?,
        ppid: fields.get(1)?.parse().ok()?,
        pgrp: fields.get(2)?.parse().ok()?,
        session: fields.get(3)?.parse().ok()?,
        tpgid: fields.get(5)?.parse().ok()?,
        start_time: fields.get(19)?.parse().ok()?,
    })
}

/// The start time of `pid`, or `None` if it does not exist.
pub fn start_time(pid: u32) -> Result<Option<u64>> {
    Ok(proc_stat(pid)?.map(|s| s.start_time))
}

/// Signals a recorded pid only if its start time still matches (a reused pid is never
/// signalled). `Ok(false)` when the process is gone or the pid now names another one.
pub fn signal_if_same(pid: u32, start_time: u64, sig: Signal) -> Result<bool> {
    let Some(pidfd) = pidfd_open(pid)? else {
        return Ok(false);
    };
    if self::start_time(pid)? != Some(start_time) {
        return Ok(false);
    }
    match pidfd {
        // The pidfd was opened before the check: if the check saw our process, the
        // pidfd names it too (it was alive throughout), and a pidfd never follows a
        // reused pid, so the signal reaches it or fails with ESRCH.
        Pidfd::Fd(fd) => match pidfd_send_signal(&fd, sig) {
            Ok(()) => Ok(true),
            Err(Errno::ESRCH) => Ok(false),
            Err(e) => Err(sig_err(sig, pid, e)),
        },
        // No pidfds (kernel < 5.3): the pid could be reused between the check and
        // kill(2), which needs a full pid wrap-around in that window.
        Pidfd::Unsupported => match kill(Pid::from_raw(pid as i32), sig) {
            Ok(()) => Ok(true),
            Err(Errno::ESRCH) => Ok(false),
            Err(e) => Err(sig_err(sig, pid, e)),
        },
    }
}

/// Signals the whole process group led by a recorded pid, only if that leader is
/// still alive, still has the recorded start time and still leads its group (agents
/// are session leaders, so their pgid is their pid). `Ok(false)` otherwise: a group
/// whose leader is gone cannot be told apart from a newer group with the same id.
pub fn signal_group_if_same(pid: u32, start_time: u64, sig: Signal) -> Result<bool> {
    match proc_stat(pid)? {
        Some(s) if s.start_time == start_time && s.pgrp == pid as i32 && s.state != 'Z' => {
            // The leader is alive, so its pid, and with it the group id, cannot be
            // reallocated before the signal lands.
            match killpg(Pid::from_raw(pid as i32), sig) {
                Ok(()) => Ok(true),
                Err(Errno::ESRCH) => Ok(false),
                Err(e) => Err(sig_err(sig, pid, e)),
            }
        }
        _ => Ok(false),
    }
}

/// The live (not zombie) processes in group `pgid`, found by scanning `/proc`.
/// A zombie cannot act any more and goes when its parent (or init) reaps it.
pub fn group_members(pgid: u32) -> Result<Vec<u32>> {
    let dir = std::fs::read_dir("/proc").map_err(|source| Error::Io {
        context: "failed to list /proc".into(),
        source,
    })?;
    let mut pids = Vec::new();
    for entry in dir.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse().ok()) else {
            continue;
        };
        // A process that exits mid-scan is simply not a member any more.
        if let Ok(Some(s)) = proc_stat(pid) {
            if s.pgrp == pgid as i32 && s.state != 'Z' {
                pids.push(pid);
            }
        }
    }
    Ok(pids)
}

/// Every live process descended from `root` (by parent links) or in session
/// `session`, found by scanning `/proc`; `root` itself is not included.
pub fn tree(root: u32, session: i32) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let procs: Vec<(u32, ProcStat)> = dir
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| Some((pid, proc_stat(pid).ok()??)))
        .filter(|(_, s)| s.state != 'Z')
        .collect();
    let mut out: Vec<u32> = Vec::new();
    let mut frontier = vec![root as i32];
    while let Some(parent) = frontier.pop() {
        for (pid, s) in &procs {
            if s.ppid == parent && *pid != root && !out.contains(pid) {
                out.push(*pid);
                frontier.push(*pid as i32);
            }
        }
    }
    for (pid, s) in &procs {
        if s.session == session && *pid != root && !out.contains(pid) {
            out.push(*pid);
        }
    }
    out
}

/// Signals group `pgid`; a group that is already empty is not an error.
pub(crate) fn signal_group(pgid: u32, sig: Signal) -> Result<()> {
    match killpg(Pid::from_raw(pgid as i32), sig) {
        Ok(()) | Err(Errno::ESRCH) => Ok(()),
        Err(e) => Err(sig_err(sig, pgid, e)),
    }
}

fn sig_err(sig: Signal, pid: u32, e: Errno) -> Error {
    Error::Other(format!("failed to send {sig} to {pid}: {e}"))
}

enum Pidfd {
    Fd(OwnedFd),
    Unsupported,
}

/// `Ok(None)` if the process does not exist.
fn pidfd_open(pid: u32) -> Result<Option<Pidfd>> {
    let pid = libc::pid_t::try_from(pid)
        .map_err(|_| Error::input(format!("pid {pid} is out of range")))?;
    // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if fd >= 0 {
        // SAFETY: the kernel just returned this descriptor and nothing else owns it.
        return Ok(Some(Pidfd::Fd(unsafe { OwnedFd::from_raw_fd(fd as i32) })));
    }
    match Errno::last() {
        Errno::ESRCH => Ok(None),
        // ENOSYS: an old kernel; EPERM: a seccomp filter that forbids it.
        Errno::ENOSYS | Errno::EPERM => Ok(Some(Pidfd::Unsupported)),
        e => Err(Error::Other(format!(
            "failed to open a pidfd for {pid}: {e}"
        ))),
    }
}

fn pidfd_send_signal(fd: &OwnedFd, sig: Signal) -> std::result::Result<(), Errno> {
    use std::os::fd::AsRawFd;
    // SAFETY: a valid pidfd, a signal number, no siginfo, no flags.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            fd.as_raw_fd(),
            sig as libc::c_int,
            std::ptr::null::<libc::siginfo_t>(),
            0,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(Errno::last())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_are_counted_after_the_last_parenthesis() {
        let line = "4242 (a (weird) name) S 1 4242 4242 0 -1 4194560 100 0 0 0 0 0 0 0 \
                    20 0 1 0 987654 1000 10 18446744073709551615";
        let s = parse_stat(line).unwrap();
        assert_eq!(s.state, 'S');
        assert_eq!(s.pgrp, 4242);
        assert_eq!(s.session, 4242);
        assert_eq!(s.tpgid, -1);
        assert_eq!(s.start_time, 987654);
    }

    #[test]
    fn own_start_time_is_readable_and_stable() {
        let me = std::process::id();
        let a = start_time(me).unwrap().unwrap();
        assert_eq!(start_time(me).unwrap(), Some(a));
    }
}
