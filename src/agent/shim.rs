//! The agent shim (`spice agent-shim --parent PID -- CMD …`): the process the
//! supervisor starts under each PTY, which starts the agent and outlives it by a
//! moment. It exists so that no agent process survives its supervisor.
//!
//! Invariants:
//! - The shim asks the kernel for a signal when its parent dies (`PR_SET_PDEATHSIG`)
//!   and checks the parent it was told about is still its parent, so a supervisor
//!   killed before the request still counts; it also re-checks every second.
//! - It is a child subreaper: every process the agent starts and orphans is
//!   re-parented to the shim, so its tree (plus anything left in its terminal
//!   session) is known and can be ended: SIGTERM, [`TREE_GRACE`], SIGKILL.
//! - On its parent's death it ends the whole tree and exits. When the agent exits it
//!   ends whatever the agent left behind and exits the way the agent did (the same
//!   code, or the same signal re-raised), so the supervisor sees the agent's status.
//! - Before ending the tree it records the `spice exec` commands still running in it
//!   (`agent::inflight`), so the next session learns what was cut off.
//! - Signals from the supervisor reach the agent directly (they share the shim's
//!   process group); the shim does not forward them again.

use super::proc;
use crate::error::{Error, Result};
use nix::sys::prctl;
use nix::sys::signal::{kill, SigSet, Signal};
use nix::sys::signalfd::{SfdFlags, SignalFd};
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::{getppid, getsid, Pid};
use std::ffi::OsString;
use std::os::fd::AsFd;
use std::time::{Duration, Instant};

/// How long what an agent leaves behind gets between SIGTERM and SIGKILL.
pub const TREE_GRACE: Duration = Duration::from_secs(3);
const CHECK_PARENT: Duration = Duration::from_secs(1);

/// Runs the agent `argv`, confined to writing the `confine` paths when given; returns
/// the code to exit with (having re-raised the agent's fatal signal if it died of
/// one). The ruleset is built here and entered by the agent's process between fork
/// and exec, so the agent and all it starts are in the sandbox while the shim stays
/// outside it: it still records the commands cut off (in the state directory) and
/// ends the whole tree. A sandbox that cannot be built or entered ends the shim
/// before the agent runs: asked to confine, it never runs the agent unconfined.
pub fn run(parent: u32, confine: Option<&[std::path::PathBuf]>, argv: &[OsString]) -> Result<i32> {
    if argv.is_empty() {
        return Err(Error::input("spice agent-shim needs a command after --"));
    }
    let refused = |e: String| Error::Exit(126, format!("sandbox not entered: {e}"));
    let prepared = match confine {
        Some(write) => Some(
            crate::sandbox::Policy {
                write: write.to_vec(),
            }
            .prepare()
            .map_err(|e| refused(e.to_string()))?,
        ),
        None => None,
    };
    let entry = prepared.as_ref().map(|p| p.entry());
    let _ = prctl::set_pdeathsig(Signal::SIGTERM);
    let _ = prctl::set_child_subreaper(true);
    let mut mask = SigSet::empty();
    for s in [
        Signal::SIGTERM,
        Signal::SIGINT,
        Signal::SIGHUP,
        Signal::SIGQUIT,
        Signal::SIGCHLD,
    ] {
        mask.add(s);
    }
    mask.thread_block()
        .map_err(|e| Error::Other(format!("failed to block signals: {e}")))?;
    let sfd = SignalFd::with_flags(&mask, SfdFlags::SFD_NONBLOCK | SfdFlags::SFD_CLOEXEC)
        .map_err(|e| Error::Other(format!("failed to open a signalfd: {e}")))?;
    let orphaned = || getppid().as_raw() as u32 != parent;
    if orphaned() {
        return Ok(128 + Signal::SIGTERM as i32);
    }
    let mut cmd = std::process::Command::new(&argv[0]);
    cmd.args(&argv[1..]);
    // SAFETY: between fork and exec only sigprocmask (the agent starts with no signal
    // blocked: a blocked mask is inherited across exec) and the sandbox's two system
    // calls, which allocate nothing.
    unsafe {
        use std::os::unix::process::CommandExt;
        cmd.pre_exec(move || {
            SigSet::all().thread_unblock()?;
            if let Some(entry) = entry {
                entry.enter()?;
            }
            Ok(())
        });
    }
    let child = cmd.spawn().map_err(|e| {
        let code = if e.kind() == std::io::ErrorKind::NotFound {
            127
        } else {
            126
        };
        let confined = if prepared.is_some() {
            " (or its sandbox)"
        } else {
            ""
        };
        Error::Exit(
            code,
            format!(
                "{}{confined}: {e}",
                std::path::Path::new(&argv[0]).display()
            ),
        )
    })?;
    drop(prepared);
    let agent = Pid::from_raw(child.id() as i32);
    let me = std::process::id();
    let session = getsid(None).map(|p| p.as_raw()).unwrap_or(me as i32);
    loop {
        let mut fds = [nix::poll::PollFd::new(
            sfd.as_fd(),
            nix::poll::PollFlags::POLLIN,
        )];
        let timeout =
            nix::poll::PollTimeout::try_from(CHECK_PARENT).unwrap_or(nix::poll::PollTimeout::MAX);
        let _ = nix::poll::poll(&mut fds, timeout);
        while let Ok(Some(_)) = sfd.read_signal() {}
        if orphaned() {
            end_tree(me, session);
            return Ok(128 + Signal::SIGTERM as i32);
        }
        // Reap everything that ended: the agent, and orphans re-parented to us.
        loop {
            match waitpid(None, Some(WaitPidFlag::WNOHANG)) {
                Ok(WaitStatus::Exited(pid, code)) if pid == agent => {
                    end_tree(me, session);
                    return Ok(code);
                }
                Ok(WaitStatus::Signaled(pid, sig, _)) if pid == agent => {
                    end_tree(me, session);
                    return Ok(reraise(sig));
                }
                Ok(WaitStatus::StillAlive) | Err(_) => break,
                Ok(_) => {}
            }
        }
    }
}

/// Ends every process of the agent's tree and terminal session but the shim, first
/// recording the commands among them that still ran (`agent::inflight`) for the
/// session's successor, when the agent runs under a fleet (`SPICE_HOME`,
/// `SPICE_SESSION`).
fn end_tree(me: u32, session: i32) {
    let members = proc::tree(me, session);
    if let (Some(home), Ok(id)) = (
        std::env::var_os("SPICE_HOME"),
        std::env::var("SPICE_SESSION"),
    ) {
        let home = std::path::Path::new(&home);
        // Still running, and stopped by a signal to the whole group just now.
        let mut found = super::inflight::collect(&members);
        for (pid, command) in super::inflight::take_signalled(home, &id) {
            if !found.iter().any(|(p, _)| *p == pid) {
                found.push((pid, command));
            }
        }
        found.sort();
        let commands: Vec<String> = found.into_iter().map(|(_, c)| c).collect();
        let _ = super::inflight::write(home, &id, &commands);
    }
    if members.is_empty() {
        return;
    }
    for pid in &members {
        let _ = kill(Pid::from_raw(*pid as i32), Signal::SIGTERM);
    }
    let deadline = Instant::now() + TREE_GRACE;
    while Instant::now() < deadline {
        while let Ok(WaitStatus::Exited(..) | WaitStatus::Signaled(..)) =
            waitpid(None, Some(WaitPidFlag::WNOHANG))
        {}
        if proc::tree(me, session).is_empty() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    for pid in proc::tree(me, session) {
        let _ = kill(Pid::from_raw(pid as i32), Signal::SIGKILL);
    }
    while let Ok(WaitStatus::Exited(..) | WaitStatus::Signaled(..)) =
        waitpid(None, Some(WaitPidFlag::WNOHANG))
    {}
}

/// Dies of `sig` as the agent did, so the supervisor reads the same status; returns
/// the shell-style code only if that fails.
fn reraise(sig: Signal) -> i32 {
    use nix::sys::signal::{sigaction, SaFlags, SigAction, SigHandler};
    let dfl = SigAction::new(SigHandler::SigDfl, SaFlags::empty(), SigSet::empty());
    // SAFETY: restoring the default disposition has no handler to be unsafe in.
    unsafe {
        let _ = sigaction(sig, &dfl);
    }
    let mut one = SigSet::empty();
    one.add(sig);
    let _ = one.thread_unblock();
    let _ = nix::sys::signal::raise(sig);
    128 + sig as i32
}
