//! `spice fleet check [--json]`: the lanes and profiles validated, nothing started.
//!
//! Output contract: one line per lane on stdout (or one JSON document with `--json`);
//! each configuration problem as its own complete `spice: file:line:col: reason` line
//! on stderr and exit code 2. A lane whose agent binary is missing is shown as
//! unavailable on stdout and does not change the exit code: the other lanes could
//! still run. Besides the lane and profile files, what each lane's base carries in
//! `spice.toml` is checked as `fleet up` would (`[hooks]`, `[testbed]`, `[notify]`,
//! `[archive]`, `[gc]`).

use super::super::{render, Env};
use crate::config::fleet::{FleetConfig, LaneConfig};
use crate::config::profile::{Mode, Source};
use crate::error::{Error, Result};
use serde_json::json;
use std::path::{Path, PathBuf};

pub(super) fn run(env: &Env, json: bool) -> Result<()> {
    let (repo, fleet) = super::load(env)?;
    // What each lane's base carries in spice.toml: [hooks] (which `fleet up` refuses
    // to start with) and [testbed].
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_default();
    let opts = super::options(env, repo, home, false)?;
    let mut problems = crate::fleet::lane::check_hooks(&fleet, &opts);
    problems.extend(crate::fleet::lane::check_beds(&fleet, &opts));
    if let Err(e) = crate::fleet::notify::at_rev(&opts.repo, &opts.base) {
        problems.extend(e);
    }
    problems.extend(crate::fleet::check_housekeeping(&fleet, &opts));
    let unborn = crate::fleet::lane::unborn_bases(&fleet, &opts);
    if json {
        let mut doc = check_json(&fleet, &unborn);
        doc["password_file"] = json!(password_file(env));
        doc["repository_errors"] =
            json!(problems.iter().map(|e| e.to_string()).collect::<Vec<_>>());
        render::print_json(&doc);
    } else {
        print_table(&opts.repo, &fleet, &unborn);
        if let Some(file) = password_file(env) {
            println!(
                "store: the password in {} is readable by every agent (reads are not confined); \
                 set SPICE_DATABASE_URL instead (docs/security.md)",
                file.display()
            );
        }
    }
    match problems.pop() {
        None if !unborn.is_empty() => Err(Error::input(no_base(&unborn))),
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

/// The state directory's `config.toml`, when the store's URL there carries a
/// password: a file every agent can read.
fn password_file(env: &Env) -> Option<PathBuf> {
    crate::config::state::location(&env.state_dir, None)
        .ok()
        .filter(|l| l.has_password())
        .map(|_| env.state_dir.join(crate::config::state::FILE))
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

/// The lanes whose base names no commit, in one line (the last of `fleet check`, and
/// why `fleet up` refuses to start).
pub(super) fn no_base(unborn: &[(String, String)]) -> String {
    let each: Vec<String> = unborn
        .iter()
        .map(|(lane, why)| format!("lane {lane}: {why}"))
        .collect();
    format!("{} lane(s) cannot start: {}", unborn.len(), each.join("; "))
}

fn print_table(repo: &Path, fleet: &FleetConfig, unborn: &[(String, String)]) {
    if fleet.lanes.is_empty() {
        println!("{}", super::super::lanes::none_defined(&repo.join("lanes")));
        return;
    }
    let offer = crate::sandbox::probe();
    let rows: Vec<[String; 6]> = fleet
        .lanes
        .iter()
        .map(|l| {
            let state = match (&l.program, l.lane.enabled) {
                (_, false) => "disabled",
                (_, true) if unborn.iter().any(|(n, _)| *n == l.name) => "no base",
                (Ok(_), true) => "ready",
                (Err(_), true) => "unavailable",
            };
            [
                l.name.clone(),
                format!("{} ({})", l.profile.name, source(l)),
                mode(l.profile.mode).to_string(),
                l.profile.programs()[0].to_string(),
                state.to_string(),
                crate::fleet::confine::describe(l, offer),
            ]
        })
        .collect();
    let width = |i: usize| rows.iter().map(|r| r[i].chars().count()).max().unwrap_or(0);
    let (w0, w1, w2, w3, w4) = (width(0), width(1), width(2), width(3), width(4));
    for [a, b, c, d, e, f] in &rows {
        println!("{a:w0$}  {b:w1$}  {c:w2$}  {d:w3$}  {e:w4$}  {f}");
    }
    println!("sandbox: {}", offer.describe());
    if fleet
        .lanes
        .iter()
        .any(|l| l.lane.sandbox == crate::config::lane::Confinement::Landlock)
        && offer.landlock.is_some()
    {
        println!("sandbox limits: {}", crate::fleet::confine::LIMITS);
    }
    for (l, e) in fleet.unavailable() {
        if l.lane.enabled {
            println!("unavailable: {e}");
        }
    }
    let (ready, missing, disabled) = counts(fleet, unborn);
    let mut summary = format!(
        "{} lane{}: {ready} ready",
        fleet.lanes.len(),
        if fleet.lanes.len() == 1 { "" } else { "s" }
    );
    if !unborn.is_empty() {
        summary.push_str(&format!(", {} with no base commit", unborn.len()));
    }
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

/// (ready, unavailable, disabled); a disabled lane counts only as disabled, and a
/// lane whose base names no commit is not ready.
fn counts(fleet: &FleetConfig, unborn: &[(String, String)]) -> (usize, usize, usize) {
    let enabled = || fleet.lanes.iter().filter(|l| l.lane.enabled);
    let based = |l: &&LaneConfig| !unborn.iter().any(|(n, _)| *n == l.name);
    let ready = enabled()
        .filter(|l| l.program.is_ok())
        .filter(based)
        .count();
    let missing = enabled().filter(|l| l.program.is_err()).count();
    let disabled = fleet.lanes.len() - enabled().count();
    (ready, missing, disabled)
}

fn check_json(fleet: &FleetConfig, unborn: &[(String, String)]) -> serde_json::Value {
    let (ready, missing, disabled) = counts(fleet, unborn);
    let offer = crate::sandbox::probe();
    json!({
        "sandbox": offer.describe(),
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
            "confinement": crate::fleet::confine::describe(l, offer),
            "no_base": unborn.iter().find(|(n, _)| *n == l.name).map(|(_, why)| why),
        })).collect::<Vec<_>>(),
        "ready": ready,
        "unavailable": missing,
        "disabled": disabled,
    })
}
