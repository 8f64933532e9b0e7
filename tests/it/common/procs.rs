//! Processes of a test's fleet: finding every one that carries its state directory,
//! and killing the supervisor the way a crash would.

use super::TestEnv;
use std::process::Child;

/// Every live process that carries this test's state directory in its environment
/// (the supervisor's agents and everything they started) or works in a directory
/// under it (a command that cleared its environment, in a worktree).
pub fn fleet_processes(env: &TestEnv) -> Vec<(u32, String)> {
    processes_of(&env.home)
}

/// Every live process that carries state directory `home` in its environment or
/// works in a directory under it.
pub fn processes_of(home: &std::path::Path) -> Vec<(u32, String)> {
    let needle = format!("SPICE_HOME={}", home.display());
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let state = stat
            .rsplit(')')
            .next()
            .and_then(|r| r.split_whitespace().next());
        if state.is_none() || state == Some("Z") {
            continue;
        }
        let ours = environ.split(|b| *b == 0).any(|v| v == needle.as_bytes())
            || std::fs::read_link(format!("/proc/{pid}/cwd")).is_ok_and(|c| c.starts_with(home));
        if ours {
            let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            out.push((pid, String::from_utf8_lossy(&cmd).replace('\0', " ")));
        }
    }
    out
}

pub fn kill9(child: &mut Child) {
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    child.wait().unwrap();
}
