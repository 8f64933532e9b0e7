//! Recycling: the worktree of a phase its session completed goes, with its bed, to
//! the repository's pool (`bed::pool`), and a new claim's worktree is taken from the
//! pool when it has one, so the next task starts with the last one's build output.
//! Neither is a condition of anything: a worktree that is not recycled stays where it
//! is, and a claim the pool cannot serve gets a fresh worktree; the task's ledger
//! says which (`pool`).

use super::{Holding, Lane, Work, Worked};
use crate::bed::pool::Pool;
use crate::error::Result;
use crate::stage::config::Stage;
use crate::store::{Claim, Holder};
use serde_json::{json, Value};
use std::path::Path;

impl Lane<'_> {
    /// [`Lane::work_on`], then what follows a claim that left the lane's hands: the
    /// worktree of a phase its session completed goes to the repository's pool for
    /// the next tasks; a claim released by hand, or taken over, has its on_release
    /// hook run in its worktree (what its on_claim began is undone), the worktree
    /// kept as it is.
    pub(super) fn work_then_recycle(
        &mut self,
        git: &crate::git::Git,
        program: &Path,
        work: Work,
    ) -> Result<Worked> {
        let (claim, wt) = (work.claim.clone(), work.worktree.clone());
        let worked = self.work_on(program, work)?;
        if self.stopping() {
            return Ok(worked);
        }
        match &worked {
            Worked::Finished(h) if self.completed_by(&claim.task_id, &h.claimant)? => {
                self.recycle(git, &claim, &h.claimant, &wt)?;
            }
            Worked::Finished(h) | Worked::Lost(h) if wt.is_dir() => {
                if let Some(why) = self.stage(Stage::OnRelease, &claim, h, &wt)? {
                    self.row.last_error = Some(why);
                    self.report.error = self.row.last_error.clone();
                }
            }
            _ => {}
        }
        Ok(worked)
    }

    /// Whether `session` completed a phase of `task` (its phase's completion
    /// released the claim, and ran on_release), rather than someone releasing it.
    fn completed_by(&mut self, task: &str, session: &str) -> Result<bool> {
        Ok(self.store.ledger(task)?.iter().any(|e| {
            matches!(e.kind.as_str(), "phase_completed" | "done")
                && e.actor.as_deref() == Some(session)
        }))
    }

    /// `Finished` when nobody holds the claim any more, `Lost` when someone else does.
    pub(super) fn released_or_done(&mut self, work: &Work) -> Result<Worked> {
        Ok(match self.holding(&work.claim.task_id, &work.session)? {
            Holding::Released => Worked::Finished(work.holder()),
            Holding::Other(_) => Worked::Lost(work.holder()),
            Holding::Ours => Worked::Done,
        })
    }

    /// Puts the worktree `wt` of `claim`'s task, whose phase its session completed,
    /// in the repository's pool for its next tasks (`bed::pool`), then keeps every
    /// bed within the disk budget. A worktree that is not recycled stays where it is;
    /// the ledger says why (`pool`).
    pub(super) fn recycle(
        &mut self,
        git: &crate::git::Git,
        claim: &Claim,
        session: &str,
        wt: &Path,
    ) -> Result<()> {
        let Some(Ok(cfg)) = self.bed_config(git)? else {
            return Ok(());
        };
        if cfg.pool == 0 || !wt.is_dir() {
            return Ok(());
        }
        let tag = crate::stamp::encode(self.now().max(0) as u64);
        let detail = match Pool::of(git).put(git, &cfg, wt, &claim.handle, &tag) {
            Ok(put) => json!({
                "action": "pooled", "pooled": put.entry.id, "path": put.entry.path,
                "saved": put.recycled.saved, "saved_files": put.recycled.files,
                "evicted": put.evicted.iter().map(|e| &e.id).collect::<Vec<_>>(),
            }),
            Err(e) => json!({ "action": "kept", "worktree": wt, "why": e.to_string() }),
        };
        self.note_pool(claim, session, detail)?;
        if cfg.disk_budget.is_some() {
            let in_use = self.beds_in_use()?;
            match crate::bed::evict::gc(git, &cfg, &in_use) {
                Ok(ev) if ev.is_empty() => {}
                Ok(ev) => self.note_pool(
                    claim,
                    session,
                    json!({ "action": "evicted", "evicted": ev }),
                )?,
                Err(e) => self.note_pool(
                    claim,
                    session,
                    json!({ "action": "evicted", "error": e.to_string() }),
                )?,
            }
        }
        Ok(())
    }

    /// The worktree a pooled one becomes for `claim` at `target` (moved there, on the
    /// task's branch), when the pool has one and nothing is at `target` yet.
    pub(super) fn take_pooled(
        &mut self,
        git: &crate::git::Git,
        claim: &Claim,
        holder: &Holder,
        target: &Path,
    ) -> Result<()> {
        if std::fs::symlink_metadata(target).is_ok() {
            return Ok(());
        }
        let Some(Ok(cfg)) = self.bed_config(git)? else {
            return Ok(());
        };
        if cfg.pool == 0 {
            return Ok(());
        }
        let branch = crate::git::task_branch(&claim.handle);
        let detail = match Pool::of(git).take(git, target, &branch, &self.base) {
            Ok(None) => return Ok(()),
            Ok(Some(e)) => json!({ "action": "taken", "pooled": e.id, "from_task": e.task,
                "worktree": e.path }),
            Err(e) => json!({ "action": "cold", "error": e.to_string() }),
        };
        self.note_pool(claim, &holder.claimant, detail)
    }

    /// The worktrees whose beds live tasks use (never evicted).
    fn beds_in_use(&mut self) -> Result<Vec<std::path::PathBuf>> {
        let now = self.now();
        Ok(self
            .store
            .claims()?
            .into_iter()
            .filter(|c| c.is_live(now))
            .filter_map(|c| c.worktree.map(std::path::PathBuf::from))
            .collect())
    }

    fn note_pool(&mut self, claim: &Claim, who: &str, mut detail: Value) -> Result<()> {
        detail["lane"] = json!(self.cfg.name);
        self.store.note(&claim.task_id, "pool", who, detail)
    }
}
