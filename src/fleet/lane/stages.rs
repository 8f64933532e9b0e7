//! Stage hooks at the lane's boundaries: the repository's own commands run on a
//! claim (`on_claim`, `on_launch`, `on_release`), under the `[hooks]` base carries.
//! [`run_stage`] is the one way a lane's hook runs, whether the lane runs it or
//! `fleet down --release` does for a lane that has stopped ([`release_claims`]).

use super::machine::Renewer;
use super::{base_of, session, Lane};
use crate::error::Result;
use crate::fleet::FleetOptions;
use crate::stage::config::{self as stages, Stage};
use crate::stage::hooks;
use crate::store::{Authority, Claim, Holder};
use std::collections::HashSet;
use std::path::Path;
use std::time::{Duration, Instant};

/// Stage hooks: the repository's own commands at the lane's boundaries.
impl Lane<'_> {
    /// Runs the repository's hook for `stage` on `claim` in `worktree` ([`run_stage`]),
    /// renewing the claim while it runs: a long on_claim (installing dependencies)
    /// must not let the lease lapse.
    pub(super) fn stage(
        &mut self,
        stage: Stage,
        claim: &Claim,
        holder: &Holder,
        worktree: &Path,
    ) -> Result<Option<String>> {
        let confined = crate::fleet::confine::commands(
            self.cfg,
            self.opts,
            &self.repo,
            worktree,
            &claim.handle,
        );
        let site = Site {
            repo: &self.repo,
            base: &self.base,
            lane: &self.cfg.name,
            home: &self.opts.state_dir,
            confined: &confined,
        };
        let (row, lease) = (&mut self.row, self.cfg.lease);
        let mut renewer = Renewer::new(self.cfg.renew, Instant::now());
        let mut renew = |store: &mut dyn Authority| {
            if renewer.due(Instant::now()) {
                let _ = session::renew_claim(store, row, lease, &claim.task_id, holder);
            }
        };
        run_stage(
            &mut *self.store,
            &site,
            stage,
            claim,
            holder,
            worktree,
            &mut renew,
        )
    }
}

/// Where a lane's stage hooks run, besides the claim's worktree: the repository whose
/// `base` carries the `[hooks]`, the lane, and the state directory (`SPICE_HOME`).
pub struct Site<'a> {
    pub repo: &'a Path,
    pub base: &'a str,
    pub lane: &'a str,
    pub home: &'a Path,
    /// The lane's sandbox for commands in its worktree (`fleet::confine::commands`):
    /// a hook runs in the agent's files, so with no more than the agent may do.
    pub confined: &'a crate::fleet::confine::Confined,
}

/// Runs the repository's hook for `stage` on `claim` (held by `holder`) in
/// `worktree`, under the `[hooks]` that `site.base` carries (a task branch cannot
/// switch its hooks off); `beside` is handed the store every 20 ms while it runs.
/// `None`: no hook, or it passed; else why it refused, one line (a `[hooks]` that no
/// longer parses refuses too). Each run is in the task's ledger (`stage_hook`).
pub fn run_stage(
    store: &mut dyn Authority,
    site: &Site<'_>,
    stage: Stage,
    claim: &Claim,
    holder: &Holder,
    worktree: &Path,
    beside: &mut dyn FnMut(&mut dyn Authority),
) -> Result<Option<String>> {
    let cfg = match stages::at_rev(site.repo, site.base) {
        Ok(c) => c,
        Err(errs) => {
            let all: Vec<String> = errs.iter().map(|e| e.to_string()).collect();
            return Ok(Some(format!("{stage} not run: {}", all.join("; "))));
        }
    };
    let Some(hook) = cfg.get(stage) else {
        return Ok(None);
    };
    let phase = store.task(&claim.task_id)?.phase;
    let prepared = site.confined.prepare()?;
    let ev = hooks::Event {
        stage,
        task_id: &claim.task_id,
        handle: &claim.handle,
        phase: &phase,
        lane: Some(site.lane),
        session: &holder.claimant,
        worktree,
        base: site.base,
        home: Some(site.home.to_path_buf()),
        bed: crate::phase_done::bed_of(store, worktree),
        confine: prepared.as_ref().map(|p| p.entry()),
        sandbox_env: site.confined.env.clone(),
    };
    let run = std::thread::scope(|s| {
        let running = s.spawn(|| hooks::run_hook(hook, &ev, None));
        while !running.is_finished() {
            beside(&mut *store);
            std::thread::sleep(Duration::from_millis(20));
        }
        running.join()
    });
    let run = match run {
        Ok(r) => r,
        Err(_) => return Ok(Some(format!("the {stage} hook's runner panicked"))),
    };
    store.note(
        &claim.task_id,
        "stage_hook",
        &holder.claimant,
        run.detail(&ev),
    )?;
    Ok((!run.passed()).then(|| run.summary_with_output()))
}

/// A claim `fleet down --release` gave back: its `on_release` hook's complaint, if
/// it had one (`None`: no hook, no worktree, or it passed).
pub struct Released {
    pub claim: Claim,
    pub hook: Option<String>,
}

/// Releases every claim a lane of `fleet` holds (its supervisor has stopped, so no
/// lane will see the release) and ends each as the lane ends a claim released by
/// hand: the repository's `on_release` run in the claim's worktree, under the
/// `[hooks]` of the lane's base ([`run_stage`]). A hook that fails or cannot run is
/// reported; the release stands.
pub fn release_claims(
    store: &mut dyn Authority,
    fleet: &crate::config::fleet::FleetConfig,
    opts: &FleetOptions,
) -> Result<Vec<Released>> {
    let mut out = Vec::new();
    for claim in store.claims()? {
        let Some(cfg) = fleet
            .lanes
            .iter()
            .find(|l| claim.lane.as_deref() == Some(l.name.as_str()))
        else {
            continue;
        };
        let holder = Holder::fenced(claim.claimant.clone(), claim.fence);
        store.release(&claim.task_id, &holder)?;
        let hook = match claim.worktree.as_deref().map(Path::new) {
            Some(wt) if wt.is_dir() => release_hook(store, cfg, opts, &claim, &holder, wt)?,
            _ => None,
        };
        out.push(Released { claim, hook });
    }
    Ok(out)
}

/// `on_release` for `claim` of the lane `cfg`, in its worktree `wt`.
fn release_hook(
    store: &mut dyn Authority,
    cfg: &crate::config::fleet::LaneConfig,
    opts: &FleetOptions,
    claim: &Claim,
    holder: &Holder,
    wt: &Path,
) -> Result<Option<String>> {
    let repo = match &cfg.lane.repo {
        Some(r) => opts.repo.join(r),
        None => opts.repo.clone(),
    };
    let base = crate::git::Git::open(&repo, crate::git::Runner::new(opts.vars.clone()))
        .and_then(|git| base_of(cfg, opts, &git, &repo));
    let base = match base {
        Ok(b) => b,
        Err(e) => return Ok(Some(format!("{} not run: {e}", Stage::OnRelease))),
    };
    let confined = crate::fleet::confine::commands(cfg, opts, &repo, wt, &claim.handle);
    let site = Site {
        repo: &repo,
        base: &base,
        lane: &cfg.name,
        home: &opts.state_dir,
        confined: &confined,
    };
    run_stage(
        store,
        &site,
        Stage::OnRelease,
        claim,
        holder,
        wt,
        &mut |_| {},
    )
}

/// Each repository the enabled lanes of `fleet` work in, once per base they name,
/// with its repository path opened (a lane whose repository cannot be opened, or
/// whose base cannot be told or names no commit, says so when it runs).
pub fn bases(
    fleet: &crate::config::fleet::FleetConfig,
    opts: &FleetOptions,
) -> Vec<(std::path::PathBuf, crate::git::Git, String)> {
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for cfg in fleet.lanes.iter().filter(|l| l.lane.enabled) {
        let repo = match &cfg.lane.repo {
            Some(r) => opts.repo.join(r),
            None => opts.repo.clone(),
        };
        let Ok(git) = crate::git::Git::open(&repo, crate::git::Runner::new(opts.vars.clone()))
        else {
            continue;
        };
        let Ok(base) = base_of(cfg, opts, &git, &repo) else {
            continue;
        };
        // A base with no commit yet carries nothing (the lane says so if it runs).
        if git.resolve_commit(&base).is_err() {
            continue;
        }
        if seen.insert((git.common_dir().to_path_buf(), base.clone())) {
            out.push((repo, git, base));
        }
    }
    out
}

/// Each enabled lane whose base names no commit, with why in one line: a repository
/// with no commit yet (or a base branch that does not exist) cannot give a lane a
/// worktree, so `fleet check` says so and `fleet up` refuses to start rather than
/// claim, release and retry forever.
pub fn unborn_bases(
    fleet: &crate::config::fleet::FleetConfig,
    opts: &FleetOptions,
) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for cfg in fleet.lanes.iter().filter(|l| l.lane.enabled) {
        let repo = match &cfg.lane.repo {
            Some(r) => opts.repo.join(r),
            None => opts.repo.clone(),
        };
        let git = match crate::git::Git::open(&repo, crate::git::Runner::new(opts.vars.clone())) {
            Ok(g) => g,
            Err(e) => {
                out.push((cfg.name.clone(), e.to_string()));
                continue;
            }
        };
        let base = match base_of(cfg, opts, &git, &repo) {
            Ok(b) => b,
            Err(e) => {
                out.push((cfg.name.clone(), e.to_string()));
                continue;
            }
        };
        if git.resolve_commit(&base).is_err() {
            let why = if git.resolve_commit("HEAD").is_err() {
                format!(
                    "{} has no commit yet, so base {base} has nothing to branch from: \
                     make a first commit (git commit --allow-empty -m init)",
                    repo.display()
                )
            } else {
                format!(
                    "base branch {base} does not exist in {}: create it or set `base` in {}",
                    repo.display(),
                    cfg.file.display()
                )
            };
            out.push((cfg.name.clone(), why));
        }
    }
    out
}

/// Every problem in the `[hooks]` and the maxims each enabled lane's `base` carries (each repository
/// and base read once): the fleet does not start with one (exit 2), rather than have
/// every claim refused.
pub fn check_hooks(
    fleet: &crate::config::fleet::FleetConfig,
    opts: &FleetOptions,
) -> Vec<crate::config::ConfigError> {
    let mut errors = Vec::new();
    for (repo, _, base) in bases(fleet, opts) {
        if let Err(e) = stages::at_rev(&repo, &base) {
            errors.extend(e);
        }
        if let Err(e) = crate::conscience::maxim::at_rev(&repo, &base) {
            errors.extend(e);
        }
    }
    errors
}

/// Every problem in the `[testbed]` each enabled lane's `base` carries. A bed is help,
/// not a condition: the fleet runs with one (its claims start cold, and say why), but
/// `spice fleet check` refuses it.
pub fn check_beds(
    fleet: &crate::config::fleet::FleetConfig,
    opts: &FleetOptions,
) -> Vec<crate::config::ConfigError> {
    use crate::bed::config;
    let mut errors = Vec::new();
    for (_, git, base) in bases(fleet, opts) {
        let Ok(Some(text)) = git.file_at(&base, config::FILE) else {
            continue;
        };
        let shown = format!("{} (at {base})", config::FILE);
        if let Err(e) = config::parse(Path::new(&shown), &text) {
            errors.extend(e);
        }
    }
    errors
}
