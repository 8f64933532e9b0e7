//! `spice fleet gc [--dry-run] [--json]`: removes the worktrees and branches of tasks
//! whose work merged into their lane's base (or whose task is done or deleted), work
//! `base` lacks saved under `refs/spice/wip/<handle>` first (`crate::fleet::gc`).
//! Prints what it removed and kept and what it freed; `--json` one document.

use super::super::{render, Env};
use crate::error::Result;
use crate::fleet::gc::{self, Options, Report};

pub(super) fn run(env: &Env, dry_run: bool, json: bool) -> Result<()> {
    let (repo, fleet) = super::load(env)?;
    let home = std::env::var_os("HOME")
        .map(std::path::PathBuf::from)
        .unwrap_or_default();
    let opts = super::options(env, repo.clone(), home, false)?;
    let mut places: Vec<(crate::git::Git, String)> = crate::fleet::lane::bases(&fleet, &opts)
        .into_iter()
        .map(|(_, git, base)| (git, base))
        .collect();
    if places.is_empty() {
        let git = crate::git::Git::open(&repo, crate::git::Runner::new(opts.vars.clone()))?;
        places.push((git, opts.base.clone()));
    }
    let mut store = env.authority()?;
    let mut report = Report {
        dry_run,
        ..Report::default()
    };
    let o = Options {
        dry_run,
        older_than: None,
    };
    for (i, (git, base)) in places.iter().enumerate() {
        if !json {
            eprintln!(
                "spice: gc {}/{}: {} against {base}",
                i + 1,
                places.len(),
                git.repo().display()
            );
        }
        report.merge(gc::collect(&mut *store, git, base, &env.state_dir, o)?);
    }
    if json {
        render::print_json(&report);
        return Ok(());
    }
    for it in &report.items {
        let place = it
            .worktree
            .as_ref()
            .map(|w| w.display().to_string())
            .or(it.branch.clone())
            .unwrap_or_default();
        let saved = it
            .saved
            .as_deref()
            .map(|s| format!(" (work saved to {s})"))
            .unwrap_or_default();
        println!(
            "{:<12} {:<24} {place}: {}{saved}",
            it.action, it.handle, it.why
        );
    }
    let verb = if dry_run { "would free" } else { "freed" };
    println!(
        "{verb} {} in {} worktree(s) and {} branch(es){}",
        size(report.freed_bytes),
        report.worktrees_removed,
        report.branches_removed,
        if report.saved.is_empty() {
            String::new()
        } else {
            format!("; work saved to {}", report.saved.join(", "))
        }
    );
    if report.object_dirs_retired > 0 {
        println!(
            "copied {} removed worktree(s)' objects into the repository",
            report.object_dirs_retired
        );
    }
    Ok(())
}

fn size(b: u64) -> String {
    match b {
        b if b >= 1 << 30 => format!("{:.1} GiB", b as f64 / (1u64 << 30) as f64),
        b if b >= 1 << 20 => format!("{:.1} MiB", b as f64 / (1u64 << 20) as f64),
        b if b >= 1 << 10 => format!("{:.1} KiB", b as f64 / 1024.0),
        b => format!("{b} B"),
    }
}
