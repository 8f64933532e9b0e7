//! `spice fleet up --detach`: the supervisor in the background.
//!
//! This process checks what `fleet up` would refuse at once (no repository, no lane to
//! run, a supervisor already running), then starts this same binary as `spice fleet up
//! --log-only` in a session of its own (`setsid`: no controlling terminal, so closing
//! this one sends it no SIGHUP), stdin from /dev/null, stdout and stderr appended to
//! `<state>/logs/supervisor.out` (`hangup::OUT`). Its lane events go to the fleet log
//! only, which rotates by size; what it prints besides them is rare.
//!
//! It then waits, up to `--wait`, until every lane that can run has started or failed,
//! judged from the lane rows the new supervisor writes (a row counts once its
//! `updated` differs from what it was before the start, so no clock is compared):
//! started is an agent launched (a pid) or a settled state (`idle`, `waiting`, …);
//! failed is `held`, `errored` or `stopped`. A lane line is printed as each settles.
//! The wait wakes on the store's change token, looking again at least every
//! [`LOOK_EVERY`].
//!
//! Exit status: 0 while the supervisor runs (a lane that failed is said on its line,
//! and `--wait` running out is said on stderr: the supervisor runs on); if the
//! supervisor exits before every lane settled, what it printed is shown and its exit
//! code is this command's (0 for a `--until-idle` run that finished).

use super::super::Env;
use crate::error::{Error, Result};
use crate::store::{LaneRow, LaneState};
use std::collections::HashMap;
use std::io::{Read, Seek};
use std::time::{Duration, Instant};

/// The longest the wait goes without looking at the lane rows and the child.
const LOOK_EVERY: Duration = Duration::from_millis(250);
/// How often the wait says which lanes it still waits for.
const PROGRESS_EVERY: Duration = Duration::from_secs(5);

pub(super) fn run(env: &Env, until_idle: bool, wait: Duration) -> Result<()> {
    super::super::launch_depth()?;
    let (repo, fleet) = super::load(env)?;
    super::runnable(&repo, &fleet)?;
    if let Some((pid, _)) = crate::fleet::running(&env.state_dir) {
        return Err(Error::conflict(format!(
            "a supervisor already runs here (pid {pid}): follow it with `spice fleet logs -f`, stop it with `spice fleet down`"
        )));
    }
    for (l, e) in fleet.unavailable() {
        if l.lane.enabled {
            eprintln!("spice: lane {} will not run: {e}", l.name);
        }
    }
    let mut pending: Vec<String> = fleet
        .lanes
        .iter()
        .filter(|l| l.lane.enabled && l.program.is_ok())
        .map(|l| l.name.clone())
        .collect();
    let mut store = env.authority()?;
    let before: HashMap<String, i64> = store
        .lanes()?
        .into_iter()
        .map(|r| (r.name, r.updated))
        .collect();

    let (out, start) = super::hangup::open_out(&env.state_dir).map_err(|source| Error::Io {
        context: format!(
            "failed to open {}",
            super::hangup::out_path(&env.state_dir).display()
        ),
        source,
    })?;
    let mut child = spawn(out, until_idle)?;
    let pid = child.id();
    let deadline = Instant::now() + wait;
    let mut said = Instant::now();
    let mut token = store.change_token().unwrap_or(0);
    while !pending.is_empty() {
        if let Some(status) = child.try_wait().map_err(|source| Error::Io {
            context: format!("failed to wait for the supervisor (pid {pid})"),
            source,
        })? {
            return ended_early(env, store.as_mut(), &pending, &before, status, start);
        }
        let rows = store.lanes()?;
        pending.retain(|name| {
            let row = rows.iter().find(|r| &r.name == name);
            match row.filter(|r| before.get(name) != Some(&r.updated)) {
                Some(r) => match settled(r, store.as_mut()) {
                    Some(line) => {
                        println!("lane {name}: {line}");
                        false
                    }
                    None => true,
                },
                None => true,
            }
        });
        if pending.is_empty() {
            break;
        }
        if Instant::now() > deadline {
            eprintln!(
                "spice: lane(s) {} not started after {}; the supervisor runs on",
                pending.join(", "),
                humantime::format_duration(wait)
            );
            break;
        }
        if said.elapsed() >= PROGRESS_EVERY {
            eprintln!("spice: waiting for lane(s) {} to start", pending.join(", "));
            said = Instant::now();
        }
        token = store.wait_change(token, LOOK_EVERY).unwrap_or_else(|_| {
            std::thread::sleep(LOOK_EVERY);
            token
        });
    }
    println!(
        "the supervisor runs in the background (pid {pid}); its log is {}",
        env.state_dir.join("logs").join("fleet.log").display()
    );
    println!("follow it:  spice fleet logs -f");
    println!("stop it:    spice fleet down");
    Ok(())
}

/// `spice fleet up --log-only [--until-idle]` in a session of its own, printing to `out`.
fn spawn(out: std::fs::File, until_idle: bool) -> Result<std::process::Child> {
    use std::os::unix::process::CommandExt;
    let exe = std::env::current_exe().map_err(|source| Error::Io {
        context: "failed to locate the spice binary".into(),
        source,
    })?;
    let mut cmd = std::process::Command::new(exe);
    cmd.args(["fleet", "up", "--log-only"]);
    if until_idle {
        cmd.arg("--until-idle");
    }
    let err = out.try_clone().map_err(|source| Error::Io {
        context: "failed to start the supervisor".into(),
        source,
    })?;
    cmd.stdin(std::process::Stdio::null())
        .stdout(out)
        .stderr(err);
    // SAFETY: only setsid(2), async-signal-safe, between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            nix::unistd::setsid().map_err(std::io::Error::from)?;
            Ok(())
        });
    }
    cmd.spawn().map_err(|source| Error::Io {
        context: "failed to start the supervisor".into(),
        source,
    })
}

/// What a lane row the new supervisor wrote says: `None` while it is still starting.
fn settled(r: &LaneRow, store: &mut dyn crate::store::Authority) -> Option<String> {
    let session = r.session.as_deref().map(|s| format!(" session {s}"));
    let task = r.task_id.as_deref().map(|t| {
        let handle = store.task(t).map(|t| t.handle());
        format!(" on {}", handle.unwrap_or_else(|_| t.to_string()))
    });
    let at = format!(
        "{}{}",
        session.unwrap_or_default(),
        task.unwrap_or_default()
    );
    let note = r
        .state_note
        .as_deref()
        .or(r.last_error.as_deref())
        .map(|n| format!(": {n}"))
        .unwrap_or_default();
    Some(match r.state {
        LaneState::Starting if r.pid.is_none() => return None,
        LaneState::Starting => format!("started,{at} (agent pid {})", r.pid.unwrap_or(0)),
        LaneState::Idle => "idle: nothing is ready for it".to_string(),
        LaneState::Held | LaneState::Errored | LaneState::Stopped => {
            format!("failed ({}){note}", r.state)
        }
        s => format!("started,{at} ({s})"),
    })
}

/// The supervisor exited before every lane settled: says how each lane stands and
/// what it printed, and ends with its exit code.
fn ended_early(
    env: &Env,
    store: &mut dyn crate::store::Authority,
    pending: &[String],
    before: &HashMap<String, i64>,
    status: std::process::ExitStatus,
    start: u64,
) -> Result<()> {
    let rows = store.lanes().unwrap_or_default();
    for name in pending {
        match rows
            .iter()
            .find(|r| &r.name == name && before.get(name) != Some(&r.updated))
        {
            Some(r) => println!("lane {name}: {}", r.state),
            None => println!("lane {name}: never started"),
        }
    }
    let path = super::hangup::out_path(&env.state_dir);
    let printed = std::fs::File::open(&path)
        .and_then(|mut f| {
            f.seek(std::io::SeekFrom::Start(start))?;
            let mut s = String::new();
            f.read_to_string(&mut s)?;
            Ok(s)
        })
        .unwrap_or_default();
    for line in printed.lines().filter(|l| !l.trim().is_empty()) {
        eprintln!("{line}");
    }
    match status.code() {
        Some(0) => {
            println!("the supervisor ran to its end (it printed to {})", path.display());
            Ok(())
        }
        code => Err(Error::Exit(
            code.unwrap_or(1),
            format!(
                "the supervisor exited ({status}) before its lanes started; what it printed is in {}",
                path.display()
            ),
        )),
    }
}
