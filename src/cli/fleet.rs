//! `spice fleet …`: the lanes of agents. Only `check` exists so far: it validates
//! `lanes/*.toml` and `profiles/*.toml` of the repository without starting anything.
//!
//! Output contract of `check`: one line per lane on stdout (or one JSON document with
//! `--json`); each configuration problem as its own complete `spice: file:line:col:
//! reason` line on stderr and exit code 2. A lane whose agent binary is missing is
//! shown as unavailable on stdout and does not change the exit code: the other lanes
//! could still run. This layer owns the `PATH` search the library is given.

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
}

pub fn run(cmd: FleetCmd, env: &Env) -> Result<()> {
    match cmd {
        FleetCmd::Check { json } => check(env, json),
    }
}

fn check(env: &Env, json: bool) -> Result<()> {
    let repo = env.repo_top.as_deref().ok_or_else(|| {
        Error::input("spice fleet needs a git work tree (lanes live in its lanes/ directory)")
    })?;
    let fleet = fleet::load(repo, &repo.join("lanes"), &repo.join("profiles"), &which).map_err(
        |mut errors| {
            // The last problem travels as the command's error (main prints it and exits
            // 2); the others are printed here first, so each is its own full line.
            let last = errors.pop().expect("an Err holds at least one problem");
            for e in &errors {
                eprintln!("spice: {e}");
            }
            Error::from(last)
        },
    )?;
    if json {
        render::print_json(&check_json(&fleet));
    } else {
        print_table(&fleet);
    }
    Ok(())
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

fn print_table(fleet: &FleetConfig) {
    if fleet.lanes.is_empty() {
        println!("no lanes (a lane is a file lanes/NAME.toml)");
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

fn executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}
