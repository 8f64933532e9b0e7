//! `spice fleet …`: the lanes of agents. `check` validates `lanes/*.toml` and
//! `profiles/*.toml` without starting anything; `up` runs the supervisor in the
//! foreground (its running report is [`up`]'s); `status` prints the lane-status
//! document (`crate::fleet::status`); `down`, `lift` and `attach` act on a running one.
//!
//! Output contract of `check`: one line per lane on stdout (or one JSON document with
//! `--json`); each configuration problem as its own complete `spice: file:line:col:
//! reason` line on stderr and exit code 2. A lane whose agent binary is missing is
//! shown as unavailable on stdout and does not change the exit code: the other lanes
//! could still run. This layer owns the `PATH` search the library is given.

mod gc;
mod up;

use super::render;
use super::Env;
use crate::config::fleet::{self, FleetConfig, LaneConfig};
use crate::config::profile::{Mode, Source};
use crate::error::{Error, Result};
use clap::Subcommand;
use serde_json::json;
use std::path::{Path, PathBuf};

#[derive(Debug, Subcommand)]
pub enum FleetCmd {
    /// Validate lanes/*.toml and profiles/*.toml without starting anything.
    Check {
        #[arg(long)]
        json: bool,
    },
    /// Each lane: its claims (task, session, lease left), pending steering, and whether
    /// a supervisor is running.
    Status {
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
    Lift { lane: String },
    /// Connect this terminal to a lane's agent (its PTY); Ctrl-] detaches and leaves
    /// the agent running.
    Attach { lane: String },
    /// Remove the worktrees and branches of tasks whose work merged into base (or
    /// whose task is done or deleted); work base lacks is saved to
    /// refs/spice/wip/<task> first. Never a claimed task's, nor a pooled worktree.
    Gc {
        /// Say what would be saved and removed; change nothing.
        #[arg(long)]
        dry_run: bool,
        #[arg(long)]
        json: bool,
    },
    /// Run the lanes in the foreground until interrupted (SIGINT/SIGTERM). Each lane
    /// event is printed on stderr as it happens (JSON Lines with --json) and logged to
    /// <state>/logs/fleet.log; the report at the end goes to stdout.
    Up {
        /// Stop each lane once nothing is ready for it.
        #[arg(long)]
        until_idle: bool,
        #[arg(long)]
        json: bool,
    },
}

pub fn run(cmd: FleetCmd, env: &Env) -> Result<()> {
    match cmd {
        FleetCmd::Check { json } => check(env, json),
        FleetCmd::Up { until_idle, json } => up(env, until_idle, json),
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
            attach(env, &lane)
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

fn up(env: &Env, until_idle: bool, json: bool) -> Result<()> {
    super::launch_depth()?;
    let (repo, fleet) = load(env)?;
    runnable(&repo, &fleet)?;
    for (l, e) in fleet.unavailable() {
        eprintln!("spice: lane {} will not run: {e}", l.name);
    }
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_default();
    let opts = options(env, repo, home, until_idle)?;
    // The stage hooks each lane's base carries: a bad [hooks] stops the fleet here.
    let mut hooks = crate::fleet::lane::check_hooks(&fleet, &opts);
    hooks.extend(crate::fleet::check_housekeeping(&fleet, &opts));
    if let Some(last) = hooks.pop() {
        for e in &hooks {
            eprintln!("spice: {e}");
        }
        return Err(Error::from(last));
    }
    for e in crate::fleet::lane::check_beds(&fleet, &opts) {
        eprintln!("spice: {e} (the fleet runs; its worktrees start without a test bed)");
    }
    // The operator's [notify]: a bad one stops the fleet here, like [hooks].
    let notify = match crate::fleet::notify::at_rev(&opts.repo, &opts.base) {
        Ok(n) => n.map(|n| (n, opts.repo.clone())),
        Err(mut errs) => {
            let last = errs.pop().expect("an error");
            for e in &errs {
                eprintln!("spice: {e}");
            }
            return Err(Error::from(last));
        }
    };
    let stop = stop_on_signals();
    let reporter = up::Reporter::start(env, json, &fleet.lanes, notify)?;
    let reports = crate::fleet::up(&fleet, &opts, stop);
    if let Some(r) = reporter {
        r.finish();
    }
    let reports = reports?;
    if json {
        render::print_json(&reports);
    } else {
        for r in &reports {
            println!(
                "{}: claimed {}; {} session(s){}",
                r.lane,
                if r.claimed.is_empty() {
                    "nothing".to_string()
                } else {
                    r.claimed.join(", ")
                },
                r.sessions.len(),
                r.error
                    .as_deref()
                    .map(|e| format!("; error: {e}"))
                    .unwrap_or_default()
            );
        }
    }
    // A run that was to end by itself did not do its work if a lane stopped on an
    // error: say so in the exit status, not only in the report.
    let failed: Vec<String> = reports
        .iter()
        .filter(|r| r.failed)
        .map(|r| format!("{}: {}", r.lane, r.error.as_deref().unwrap_or("failed")))
        .collect();
    if until_idle && !failed.is_empty() {
        return Err(Error::Other(format!(
            "{} of {} lane(s) stopped with an error ({})",
            failed.len(),
            reports.len(),
            failed.join("; ")
        )));
    }
    Ok(())
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
    })
}

fn check(env: &Env, json: bool) -> Result<()> {
    let (repo, fleet) = load(env)?;
    // What each lane's base carries in spice.toml: [hooks] (which `fleet up` refuses
    // to start with) and [testbed].
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_default();
    let opts = options(env, repo, home, false)?;
    let mut problems = crate::fleet::lane::check_hooks(&fleet, &opts);
    problems.extend(crate::fleet::lane::check_beds(&fleet, &opts));
    if let Err(e) = crate::fleet::notify::at_rev(&opts.repo, &opts.base) {
        problems.extend(e);
    }
    problems.extend(crate::fleet::check_housekeeping(&fleet, &opts));
    if json {
        let mut doc = check_json(&fleet);
        doc["repository_errors"] =
            json!(problems.iter().map(|e| e.to_string()).collect::<Vec<_>>());
        render::print_json(&doc);
    } else {
        print_table(&opts.repo, &fleet);
    }
    match problems.pop() {
        None => Ok(()),
        Some(last) => {
            if !json {
                for e in &problems {
                    eprintln!("spice: {e}");
                }
            }
            Err(Error::from(last))
        }
    }
}

fn source(l: &LaneConfig) -> String {
    match &l.profile.source {
        Source::Builtin => "built-in".to_string(),
        Source::File(f) => f.display().to_string(),
    }
}

fn mode(m: Mode) -> &'static str {
    match m {
        Mode::Pty => "pty",
        Mode::Headless => "headless",
    }
}

fn print_table(repo: &Path, fleet: &FleetConfig) {
    if fleet.lanes.is_empty() {
        println!("{}", super::lanes::none_defined(&repo.join("lanes")));
        return;
    }
    let rows: Vec<[String; 5]> = fleet
        .lanes
        .iter()
        .map(|l| {
            let state = match (&l.program, l.lane.enabled) {
                (_, false) => "disabled",
                (Ok(_), true) => "ready",
                (Err(_), true) => "unavailable",
            };
            [
                l.name.clone(),
                format!("{} ({})", l.profile.name, source(l)),
                mode(l.profile.mode).to_string(),
                l.profile.programs()[0].to_string(),
                state.to_string(),
            ]
        })
        .collect();
    let width = |i: usize| rows.iter().map(|r| r[i].chars().count()).max().unwrap_or(0);
    let (w0, w1, w2, w3) = (width(0), width(1), width(2), width(3));
    for [a, b, c, d, e] in &rows {
        println!("{a:w0$}  {b:w1$}  {c:w2$}  {d:w3$}  {e}");
    }
    for (l, e) in fleet.unavailable() {
        if l.lane.enabled {
            println!("unavailable: {e}");
        }
    }
    let (ready, missing, disabled) = counts(fleet);
    let mut summary = format!(
        "{} lane{}: {ready} ready",
        fleet.lanes.len(),
        if fleet.lanes.len() == 1 { "" } else { "s" }
    );
    if disabled > 0 {
        summary.push_str(&format!(", {disabled} disabled"));
    }
    if missing > 0 {
        let rest = if ready > 0 {
            "the other lanes can run"
        } else {
            "not a configuration error"
        };
        summary.push_str(&format!(
            ", {missing} unavailable (agent binary missing; {rest})"
        ));
    }
    println!("{summary}");
}

/// (ready, unavailable, disabled); a disabled lane counts only as disabled.
fn counts(fleet: &FleetConfig) -> (usize, usize, usize) {
    let enabled = || fleet.lanes.iter().filter(|l| l.lane.enabled);
    let ready = enabled().filter(|l| l.program.is_ok()).count();
    let missing = enabled().filter(|l| l.program.is_err()).count();
    (ready, missing, fleet.lanes.len() - ready - missing)
}

fn check_json(fleet: &FleetConfig) -> serde_json::Value {
    let (ready, missing, disabled) = counts(fleet);
    json!({
        "lanes": fleet.lanes.iter().map(|l| json!({
            "name": l.name,
            "file": l.file,
            "profile": l.profile.name,
            "profile_source": source(l),
            "mode": mode(l.profile.mode),
            "enabled": l.lane.enabled,
            "model": l.lane.model,
            "lease_secs": l.lease.as_secs(),
            "renew_secs": l.renew.as_secs(),
            "start_timeout_secs": l.start_timeout.as_secs(),
            "program": l.program.as_ref().ok(),
            "unavailable": l.program.as_ref().err().map(|e| e.to_string()),
        })).collect::<Vec<_>>(),
        "ready": ready,
        "unavailable": missing,
        "disabled": disabled,
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

/// The key that detaches (Ctrl-], as telnet uses).
const DETACH: u8 = 0x1d;

fn attach(env: &Env, lane: &str) -> Result<()> {
    use crate::fleet::attach::{frame, socket_path};
    use std::io::{Read, Write};
    use std::os::fd::AsFd;
    let path = socket_path(&env.state_dir, lane);
    let mut conn = std::os::unix::net::UnixStream::connect(&path).map_err(|_| {
        Error::input(format!(
            "lane {lane} has no supervisor to attach to ({} is not listening): is `spice fleet up` running?",
            path.display()
        ))
    })?;
    let stdin = std::io::stdin();
    let tty = nix::unistd::isatty(0).unwrap_or(false);
    // Raw mode for the operator's terminal, restored however this ends.
    struct Restore(Option<nix::sys::termios::Termios>);
    impl Drop for Restore {
        fn drop(&mut self) {
            if let Some(t) = &self.0 {
                let _ = nix::sys::termios::tcsetattr(
                    std::io::stdin().as_fd(),
                    nix::sys::termios::SetArg::TCSANOW,
                    t,
                );
            }
        }
    }
    let _restore = if tty {
        let saved = nix::sys::termios::tcgetattr(stdin.as_fd())
            .map_err(|e| Error::Other(format!("failed to read the terminal's mode: {e}")))?;
        let mut raw = saved.clone();
        nix::sys::termios::cfmakeraw(&mut raw);
        nix::sys::termios::tcsetattr(stdin.as_fd(), nix::sys::termios::SetArg::TCSANOW, &raw)
            .map_err(|e| Error::Other(format!("failed to set the terminal's mode: {e}")))?;
        Restore(Some(saved))
    } else {
        Restore(None)
    };
    let mut out = std::io::stdout();
    let _ = write!(
        out,
        "spice: attached to lane {lane}; Ctrl-] detaches and leaves the agent running\r\n"
    );
    let _ = out.flush();
    // The agent's output, until its session ends or we detach.
    let ended = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let reader = {
        let mut conn = conn.try_clone().map_err(|source| Error::Io {
            context: "failed to attach".into(),
            source,
        })?;
        let ended = ended.clone();
        std::thread::spawn(move || {
            let mut out = std::io::stdout();
            let mut buf = [0u8; 16 * 1024];
            while let Ok(n) = conn.read(&mut buf) {
                if n == 0 || out.write_all(&buf[..n]).and_then(|()| out.flush()).is_err() {
                    break;
                }
            }
            ended.store(true, std::sync::atomic::Ordering::SeqCst);
        })
    };
    let size = || {
        let mut ws: nix::libc::winsize = unsafe { std::mem::zeroed() };
        // SAFETY: TIOCGWINSZ fills a winsize; the pointer is valid.
        let rc = unsafe { nix::libc::ioctl(1, nix::libc::TIOCGWINSZ, &mut ws) };
        (rc == 0 && ws.ws_col > 0 && ws.ws_row > 0).then_some((ws.ws_col, ws.ws_row))
    };
    let mut last_size = None;
    let mut buf = [0u8; 4096];
    let detached = loop {
        if ended.load(std::sync::atomic::Ordering::SeqCst) {
            break false;
        }
        // The size is polled: a resize is rare, and this needs no signal handler.
        let now = size();
        if let Some((c, r)) = now.filter(|_| now != last_size) {
            last_size = now;
            let body = [c.to_be_bytes(), r.to_be_bytes()].concat();
            if conn.write_all(&frame(b'r', &body)).is_err() {
                break false;
            }
        }
        let mut fds = [nix::poll::PollFd::new(
            stdin.as_fd(),
            nix::poll::PollFlags::POLLIN,
        )];
        match nix::poll::poll(&mut fds, nix::poll::PollTimeout::from(200u8)) {
            Ok(0) | Err(nix::errno::Errno::EINTR) => continue,
            Ok(_) => {}
            Err(_) => break false,
        }
        // Unbuffered: what poll saw is exactly what is read.
        let n = match nix::unistd::read(0, &mut buf) {
            Ok(0) => break true, // end of input: detach
            Ok(n) => n,
            Err(nix::errno::Errno::EINTR | nix::errno::Errno::EAGAIN) => continue,
            Err(_) => break true,
        };
        let keys = &buf[..n];
        let (keys, detach) = match keys.iter().position(|b| *b == DETACH) {
            Some(at) => (&keys[..at], true),
            None => (keys, false),
        };
        if !keys.is_empty() && conn.write_all(&frame(b'i', keys)).is_err() {
            break false;
        }
        if detach {
            break true;
        }
    };
    let _ = conn.shutdown(std::net::Shutdown::Both);
    let _ = reader.join();
    drop(_restore);
    if detached {
        println!("\nspice: detached from lane {lane}; the agent keeps running");
    } else {
        println!("\nspice: the session on lane {lane} ended");
    }
    Ok(())
}
