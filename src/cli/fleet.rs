//! `spice fleet …`: the lanes of agents. `check` validates `lanes/*.toml` and
//! `profiles/*.toml` without starting anything; `up` runs the supervisor in the
//! foreground (its running report is [`up`]'s), or in the background with `--detach`
//! ([`detach`]); `status` prints the lane-status document (`crate::fleet::status`);
//! `down`, `lift`, `attach` ([`attach`]) and `logs` ([`logs`]) act on a running one;
//! `service` writes a systemd user unit that runs it ([`service`]); `check` is
//! [`check`]'s. This layer owns the `PATH` search the library is given.

mod attach;
mod check;
mod detach;
mod gc;
mod hangup;
mod logs;
mod service;
mod up;

use super::render;
use super::Env;
use crate::config::fleet::{self, FleetConfig};
use crate::error::{Error, Result};
use clap::Subcommand;
use std::path::{Path, PathBuf};

#[derive(Debug, Subcommand)]
pub enum FleetCmd {
    /// Validate lanes/*.toml and profiles/*.toml without starting anything.
    Check {
        /// Print one JSON document (each lane, counts, problems) instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Each lane: its claims (task, session, lease left), pending steering, and whether
    /// a supervisor is running.
    Status {
        /// Print the lane-status document as JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Stop the running supervisor: its agents get SIGTERM, a grace period, then
    /// SIGKILL; their claims stay leased for successor sessions.
    Down {
        /// How long to wait for the supervisor to exit.
        #[arg(long, value_parser = super::task::duration, default_value = "30s")]
        wait: std::time::Duration,
        /// Also release the lanes' claims, so their tasks are free for anyone; each
        /// claim's worktree gets the repository's on_release hook, as on a release
        /// by hand.
        #[arg(long)]
        release: bool,
    },
    /// Lift a lane's crash-loop hold now.
    Lift {
        /// The lane to release from its hold.
        lane: String,
    },
    /// Connect this terminal to a lane's agent (its PTY) and follow the lane from
    /// session to session; Ctrl-] detaches and leaves the agent running. Ends by
    /// itself only when the fleet is down.
    Attach {
        /// The lane whose agent to attach to.
        lane: String,
    },
    /// Print the fleet's log (<state>/logs/fleet.log and its rotated files, oldest
    /// first), as `fleet up` shows its events.
    Logs {
        /// Only this lane's events.
        lane: Option<String>,
        /// Keep printing events as they are logged, across rotations, until
        /// interrupted.
        #[arg(short, long)]
        follow: bool,
        /// Only the last N events (with --follow: 10 unless given).
        #[arg(short = 'n', long, value_name = "N")]
        lines: Option<usize>,
        /// Print the log's JSON objects as they are, one a line.
        #[arg(long)]
        json: bool,
    },
    /// A systemd user unit that runs this repository's fleet and restarts it on
    /// failure.
    #[command(subcommand)]
    Service(service::ServiceCmd),
    /// Remove the worktrees and branches of tasks whose work merged into base (or
    /// whose task is done or deleted); work base lacks is saved to
    /// refs/spice/wip/<task> first. Never a claimed task's, nor a pooled worktree.
    Gc {
        /// Say what would be saved and removed; change nothing.
        #[arg(long)]
        dry_run: bool,
        /// Print what was saved and removed as JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Run the lanes in the foreground until interrupted (SIGINT/SIGTERM). Each lane
    /// event is printed on stderr as it happens (JSON Lines with --json) and logged to
    /// <state>/logs/fleet.log; the report at the end goes to stdout. Closing the
    /// terminal (SIGHUP) does not stop it: it runs on, printing to
    /// <state>/logs/supervisor.out, until `spice fleet down`. With --detach it runs in
    /// the background from the start.
    Up {
        /// Stop each lane once nothing is ready for it.
        #[arg(long)]
        until_idle: bool,
        /// Print lane events as JSON Lines on stderr, and the report as JSON.
        #[arg(long)]
        json: bool,
        /// Run the supervisor in the background, detached from this terminal: return
        /// once every lane has started or failed, with its pid and how to follow and
        /// stop it (`spice fleet logs -f`, `spice fleet down`).
        #[arg(long, conflicts_with = "json")]
        detach: bool,
        /// With --detach: how long to wait for the lanes to start before returning
        /// anyway (the supervisor runs on).
        #[arg(long, requires = "detach", value_parser = super::task::duration, default_value = "60s")]
        wait: std::time::Duration,
        /// Write lane events only to the fleet log, not to stderr (what --detach runs).
        #[arg(long, hide = true)]
        log_only: bool,
    },
}

pub fn run(cmd: FleetCmd, env: &Env) -> Result<()> {
    match cmd {
        FleetCmd::Check { json } => check::run(env, json),
        FleetCmd::Up {
            detach: true,
            until_idle,
            wait,
            ..
        } => detach::run(env, until_idle, wait),
        FleetCmd::Up {
            until_idle,
            json,
            log_only,
            ..
        } => up::run(env, until_idle, json, log_only),
        FleetCmd::Logs {
            lane,
            follow,
            lines,
            json,
        } => logs::run(env, lane.as_deref(), follow, lines, json),
        FleetCmd::Service(cmd) => service::run(cmd, env),
        FleetCmd::Status { json } => status(env, json),
        FleetCmd::Gc { dry_run, json } => gc::run(env, dry_run, json),
        FleetCmd::Down { wait, release } => {
            match crate::fleet::down(&env.state_dir, wait)? {
                Some(pid) => println!("stopped the supervisor (pid {pid})"),
                None => println!("no supervisor running"),
            }
            if release {
                let (repo, fleet) = load(env)?;
                let home = std::env::var_os("HOME")
                    .map(PathBuf::from)
                    .unwrap_or_default();
                let opts = options(env, repo, home, false)?;
                let mut store = env.authority()?;
                for r in crate::fleet::lane::release_claims(store.as_mut(), &fleet, &opts)? {
                    println!("released {} (was {})", r.claim.handle, r.claim.claimant);
                    if let Some(why) = r.hook {
                        eprintln!("spice: {why}; the release of {} stands", r.claim.handle);
                    }
                }
            }
            Ok(())
        }
        FleetCmd::Attach { lane } => {
            super::lanes::require(env, &lane)?;
            attach::run(env, &lane)
        }
        FleetCmd::Lift { lane } => {
            super::lanes::require(env, &lane)?;
            env.authority()?.lift_hold(&lane)?;
            println!("lifted the hold on lane {lane}");
            Ok(())
        }
    }
}

/// The repository and its lanes and profiles, or every configuration problem: all but
/// the last are printed here, each a full `spice: file:line:col: reason` line, and the
/// last travels as the command's error (exit 2).
pub(super) fn load(env: &Env) -> Result<(PathBuf, FleetConfig)> {
    let repo = env.repo_top.clone().ok_or_else(|| {
        Error::input("spice fleet needs a git work tree (lanes live in its lanes/ directory)")
    })?;
    let probes = fleet::Probes {
        which: &which,
        remotes: &remotes,
    };
    let fleet = fleet::load(&repo, &repo.join("lanes"), &repo.join("profiles"), &probes).map_err(
        |mut errors| {
            let last = errors.pop().expect("an Err holds at least one problem");
            for e in &errors {
                eprintln!("spice: {e}");
            }
            Error::from(last)
        },
    )?;
    Ok((repo, fleet))
}

fn status(env: &Env, json: bool) -> Result<()> {
    let (repo, fleet) = load(env)?;
    let supervisor = crate::fleet::running(&env.state_dir).map(|(pid, _)| pid);
    let mut store = env.authority()?;
    let doc =
        crate::fleet::status::status(store.as_mut(), Some(&fleet.lanes), &env.host, supervisor)?;
    if json {
        render::print_json(&doc);
    } else {
        render::fleet_status_table(&doc, &store.short_ids()?);
        if doc.lanes.is_empty() {
            println!("{}", super::lanes::none_defined(&repo.join("lanes")));
        }
    }
    Ok(())
}

static STOP: std::sync::OnceLock<std::sync::Arc<std::sync::atomic::AtomicBool>> =
    std::sync::OnceLock::new();

extern "C" fn on_stop(_: i32) {
    if let Some(s) = STOP.get() {
        s.store(true, std::sync::atomic::Ordering::SeqCst);
    }
    // Idle lanes wait on the store's bell, not on a timer: wake them to see the flag.
    crate::store::nudge_from_signal();
}

/// A flag SIGINT and SIGTERM set: the supervisor's lanes stop their agents and end.
pub(super) fn stop_on_signals() -> std::sync::Arc<std::sync::atomic::AtomicBool> {
    let stop = STOP.get_or_init(Default::default).clone();
    crate::store::prepare_signal_nudge();
    let action = nix::sys::signal::SigAction::new(
        nix::sys::signal::SigHandler::Handler(on_stop),
        nix::sys::signal::SaFlags::empty(),
        nix::sys::signal::SigSet::empty(),
    );
    for sig in [
        nix::sys::signal::Signal::SIGINT,
        nix::sys::signal::Signal::SIGTERM,
    ] {
        // SAFETY: the handler only stores to an atomic.
        unsafe {
            let _ = nix::sys::signal::sigaction(sig, &action);
        }
    }
    stop
}

/// Refuses a fleet with no lane to run (no lane file, or every lane disabled): a
/// supervisor with nothing to run would exit at once and say nothing.
fn runnable(repo: &Path, fleet: &FleetConfig) -> Result<()> {
    if fleet.lanes.is_empty() {
        return Err(Error::input(super::lanes::none_defined(
            &repo.join("lanes"),
        )));
    }
    if fleet.lanes.iter().all(|l| !l.lane.enabled) {
        let files: Vec<String> = fleet
            .lanes
            .iter()
            .map(|l| l.file.display().to_string())
            .collect();
        return Err(Error::input(format!(
            "no lane to run: every lane sets enabled = false ({}); set it to true in one",
            files.join(", ")
        )));
    }
    Ok(())
}

/// The lanes of a run that stopped on an error, in one line: `2 of 3 lane(s) stopped
/// with an error (a: why; b: why)`; `None` when none did. `fleet up --until-idle` and
/// `spice demo` both fail with it, so a run that did not do its work says so in its
/// exit status and in the same words.
pub(super) fn lanes_failed(reports: &[crate::fleet::LaneReport]) -> Option<String> {
    let failed: Vec<String> = reports
        .iter()
        .filter(|r| r.failed)
        .map(|r| format!("{}: {}", r.lane, r.error.as_deref().unwrap_or("failed")))
        .collect();
    (!failed.is_empty()).then(|| {
        format!(
            "{} of {} lane(s) stopped with an error ({})",
            failed.len(),
            reports.len(),
            failed.join("; ")
        )
    })
}

/// What the supervisor needs from this process: the spice binary, the shell
/// redirector written into the state directory, the base branch (the repository's
/// current branch), and the environment agents and git get.
pub(super) fn options(
    env: &Env,
    repo: PathBuf,
    home: PathBuf,
    until_idle: bool,
) -> Result<crate::fleet::FleetOptions> {
    let spice = std::env::current_exe().map_err(|source| Error::Io {
        context: "failed to locate the spice binary".into(),
        source,
    })?;
    let shell = env.state_dir.join("shell");
    std::fs::create_dir_all(&shell).map_err(|source| Error::Io {
        context: format!("failed to create {}", shell.display()),
        source,
    })?;
    let bash_env = shell.join("bashenv");
    std::fs::write(
        &bash_env,
        super::steer::shell_init_text(super::steer::Shell::Bash, &spice),
    )
    .map_err(|source| Error::Io {
        context: format!("failed to write {}", bash_env.display()),
        source,
    })?;
    let base = std::process::Command::new("git")
        .args(["symbolic-ref", "--short", "HEAD"])
        .current_dir(&repo)
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|| "main".into());
    Ok(crate::fleet::FleetOptions {
        state_dir: env.state_dir.clone(),
        location: env.location.clone(),
        repo,
        base,
        spice,
        home,
        path: std::env::var("PATH").unwrap_or_default(),
        vars: std::env::vars_os().collect(),
        bash_env,
        until_idle,
        clock: std::sync::Arc::new(crate::clock::SystemClock),
        archive: None,
        host: env.host.clone(),
        supervisor: None,
        seats: Default::default(),
    })
}

/// Resolves a profile's program: `{spice}` is this binary, a path is checked as is, a
/// bare name is searched on `PATH`. Empty `PATH` entries (the current directory to a
/// shell) are skipped: agents run in their worktree, not where `fleet` was started.
fn which(program: &str) -> Option<PathBuf> {
    if program == "{spice}" {
        return std::env::current_exe().ok();
    }
    if program.contains('/') {
        let p = PathBuf::from(program);
        return executable(&p).then_some(p);
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .filter(|d| !d.as_os_str().is_empty())
        .map(|d| d.join(program))
        .find(|p| executable(p))
}

/// The remotes of the repository whose top is `dir`, asked of git as a lane will
/// open it (`git::Git::open`: the top of a work tree, or a bare repository).
fn remotes(dir: &Path) -> std::result::Result<Vec<String>, String> {
    if !dir.exists() {
        return Err("no such directory".into());
    }
    if !dir.is_dir() {
        return Err("not a directory".into());
    }
    let runner = crate::git::Runner::new(std::env::vars_os());
    let git = crate::git::Git::open(dir, runner.clone()).map_err(|e| e.to_string())?;
    let out = runner
        .run(git.repo(), &["remote"])
        .map_err(|e| format!("cannot run git: {e}"))?;
    if !out.ok() {
        return Err(out.first_line());
    }
    Ok(out.stdout.lines().map(str::to_string).collect())
}

fn executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}
