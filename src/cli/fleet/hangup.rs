//! A supervisor outlives its terminal. When the terminal of a foreground `spice fleet
//! up` closes, the kernel sends SIGHUP to its process group, whose default action
//! would end the supervisor at once, without stopping its agents or writing its lanes'
//! last rows. Instead the supervisor goes on: the handler points its stdout and stderr
//! (a terminal that is gone, where every write fails and `eprintln!` panics) at
//! `<state>/logs/supervisor.out`, and the terminal sink stops writing lane events there
//! (the fleet log has them). `spice fleet logs -f` follows it; `spice fleet down` ends
//! it.
//!
//! Invariants:
//! - The handler does only what is async-signal-safe: two `dup2` onto a descriptor
//!   opened beforehand, and an atomic store.
//! - It is a handler, not `SIG_IGN`, so the commands the supervisor starts (git,
//!   hooks, agents) get the default disposition back at `exec`.
//! - A detached supervisor (`fleet up --detach`, its own session, so no terminal's
//!   SIGHUP reaches it) keeps the same handler: a stray `kill -HUP` does not end it.
//! - Child processes of the supervisor in its process group (git, a hook) get the
//!   terminal's SIGHUP too and may end by it: that command fails and is reported;
//!   agents run in sessions of their own and never get it.

use std::io::Seek;
use std::os::fd::IntoRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

/// What a supervisor without a terminal prints (its stdout and stderr), in the logs
/// directory of the state directory.
pub(super) const OUT: &str = "supervisor.out";
/// [`OUT`] is moved aside to `supervisor.out.1` when a supervisor starts and finds it
/// this large: it holds only what a terminal would have shown besides the lane events.
const OUT_LIMIT: u64 = 1024 * 1024;

static HUNG_UP: AtomicBool = AtomicBool::new(false);
static OUT_FD: AtomicI32 = AtomicI32::new(-1);

extern "C" fn on_hangup(_: i32) {
    HUNG_UP.store(true, Ordering::SeqCst);
    let fd = OUT_FD.load(Ordering::SeqCst);
    if fd >= 0 {
        // SAFETY: dup2 is async-signal-safe; `fd` stays open for the process's life.
        unsafe {
            nix::libc::dup2(fd, 1);
            nix::libc::dup2(fd, 2);
        }
    }
}

/// Whether the supervisor's terminal has closed (it got SIGHUP).
pub(super) fn hung_up() -> bool {
    HUNG_UP.load(Ordering::SeqCst)
}

/// Where a supervisor without a terminal prints.
pub(super) fn out_path(state_dir: &Path) -> PathBuf {
    state_dir.join("logs").join(OUT)
}

/// Opens [`OUT`] for appending (moving a large one aside first); returns it and its
/// length, where what this supervisor prints will start.
pub(super) fn open_out(state_dir: &Path) -> std::io::Result<(std::fs::File, u64)> {
    let path = out_path(state_dir);
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    if std::fs::metadata(&path).is_ok_and(|m| m.len() > OUT_LIMIT) {
        let mut aside = path.clone().into_os_string();
        aside.push(".1");
        std::fs::rename(&path, aside)?;
    }
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)?;
    let start = file.seek(std::io::SeekFrom::End(0))?;
    Ok((file, start))
}

/// Keeps the supervisor running when its terminal closes (see the module's doc).
pub(super) fn survive(state_dir: &Path) {
    if let Ok((file, _)) = open_out(state_dir) {
        OUT_FD.store(file.into_raw_fd(), Ordering::SeqCst);
    }
    let action = nix::sys::signal::SigAction::new(
        nix::sys::signal::SigHandler::Handler(on_hangup),
        nix::sys::signal::SaFlags::SA_RESTART,
        nix::sys::signal::SigSet::empty(),
    );
    // SAFETY: the handler only calls dup2 and stores to atomics.
    unsafe {
        let _ = nix::sys::signal::sigaction(nix::sys::signal::Signal::SIGHUP, &action);
    }
}
