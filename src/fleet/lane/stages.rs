//! Stage hooks at the lane's boundaries: the repository's own commands run on a
//! claim (`on_claim`, `on_launch`, `on_release`), under the `[hooks]` base carries.

use super::machine::Renewer;
use super::{base_of, Lane};
use crate::error::Result;
use crate::fleet::FleetOptions;
use crate::stage::config::{self as stages, Stage};
use crate::stage::hooks;
use crate::store::{Claim, Holder};
use std::collections::HashSet;
use std::path::Path;
use std::time::{Duration, Instant};

/// Stage hooks: the repository's own commands at the lane's boundaries.
impl Lane<'_> {
    /// Runs the repository's hook for `stage` on `claim` in `worktree`, under the
    /// `[hooks]` that `base` carries (a task branch cannot switch its hooks off),
    /// renewing the claim while it runs. `None`: no hook, or it passed; else why it
    /// refused, one line (a `[hooks]` that no longer parses refuses too). Each run
    /// is in the task's ledger (`stage_hook`).
    pub(super) fn stage(
        &mut self,
        stage: Stage,
        claim: &Claim,
        holder: &Holder,
        worktree: &Path,
    ) -> Result<Option<String>> {
        let cfg = match stages::at_rev(&self.repo, &self.base) {
            Ok(c) => c,
            Err(errs) => {
                let all: Vec<String> = errs.iter().map(|e| e.to_string()).collect();
                return Ok(Some(format!("{stage} not run: {}", all.join("; "))));
            }
        };
        let Some(hook) = cfg.get(stage) else {
            return Ok(None);
        };
        let phase = self.store.task(&claim.task_id)?.phase;
        let (lane, base, home) = (
            self.cfg.name.clone(),
            self.base.clone(),
            self.opts.state_dir.clone(),
        );
        let bed = crate::land::bed_of(&mut *self.store, worktree);
        let ev = hooks::Event {
            stage,
            task_id: &claim.task_id,
            handle: &claim.handle,
            phase: &phase,
            lane: Some(&lane),
            session: &holder.claimant,
            worktree,
            base: &base,
            home: Some(home),
            bed,
        };
        // The claim is renewed while the hook runs: a long on_claim (installing
        // dependencies) must not let the lease lapse.
        let mut renewer = Renewer::new(self.cfg.renew, Instant::now());
        let run = std::thread::scope(|s| {
            let running = s.spawn(|| hooks::run_hook(hook, &ev, None));
            while !running.is_finished() {
                if renewer.due(Instant::now()) {
                    let _ = self.renew_claim(&claim.task_id, holder);
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            running.join()
        });
        let run = match run {
            Ok(r) => r,
            Err(_) => return Ok(Some(format!("the {stage} hook's runner panicked"))),
        };
        self.store.note(
            &claim.task_id,
            "stage_hook",
            &holder.claimant,
            run.detail(&ev),
        )?;
        Ok((!run.passed()).then(|| run.summary_with_output()))
    }
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
