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
        let bed = crate::land::bed_of(&mut self.store, worktree);
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

/// Every problem in the `[hooks]` each enabled lane's `base` carries (each repository
/// and base read once): the fleet does not start with one (exit 2), rather than have
/// every claim refused.
pub fn check_hooks(
    fleet: &crate::config::fleet::FleetConfig,
    opts: &FleetOptions,
) -> Vec<crate::config::ConfigError> {
    let mut seen = HashSet::new();
    let mut errors = Vec::new();
    for cfg in fleet.lanes.iter().filter(|l| l.lane.enabled) {
        let repo = match &cfg.lane.repo {
            Some(r) => opts.repo.join(r),
            None => opts.repo.clone(),
        };
        // A lane whose repository cannot be opened says so when it runs.
        let Ok(git) = crate::git::Git::open(&repo, crate::git::Runner::new(opts.vars.clone()))
        else {
            continue;
        };
        let Ok(base) = base_of(cfg, opts, &git, &repo) else {
            continue;
        };
        if seen.insert((repo.clone(), base.clone())) {
            if let Err(e) = stages::at_rev(&repo, &base) {
                errors.extend(e);
            }
            if let Err(e) = crate::conscience::maxim::at_rev(&repo, &base) {
                errors.extend(e);
            }
        }
    }
    errors
}
