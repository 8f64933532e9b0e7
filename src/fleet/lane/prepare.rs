//! A claim's worktree, prepared at claim time (git boundary 1), including the
//! hand-off of a task's branch from the lane that worked on its previous phase.
//!
//! Invariants:
//! - A branch still checked out in another lane's worktree is waited for, with the
//!   claim held and renewed, while anything runs there (a live claim on that worktree,
//!   or another lane's agent on this task); once nothing does, that worktree lets go
//!   of the branch (`git::Git::free_branch`: removed when clean, else its changes
//!   saved under `refs/spice/saved/…` and detached), and the ledger says so
//!   (`handoff`). The claim is never released and re-taken meanwhile.
//! - The operator's main work tree is never touched: a branch checked out there is a
//!   failure with that reason.
//! - Any other failure is returned to the lane, which releases the claim and backs off
//!   (doubling, see [`BACKOFF_MAX`]) instead of claiming again at once.

use super::machine::{self, Handoff, Renewer};
use super::{Lane, TICK};
use crate::error::{Error, Result};
use crate::fleet::launch;
use crate::store::{Claim, Holder, LaneState};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The longest pause after a worktree could not be prepared.
pub const BACKOFF_MAX: Duration = Duration::from_secs(5 * 60);
/// The first pause.
pub const BACKOFF_FIRST: Duration = Duration::from_secs(1);

/// What became of preparing a worktree.
pub(super) enum Prepared {
    Ready(PathBuf),
    /// It could not be prepared (nothing was started; the claim is still held).
    Failed(Error),
    /// The supervisor is stopping, or the claim left our hands while waiting.
    Over,
}

impl Lane<'_> {
    /// Prepares the worktree of `claim` (held as `holder`), waiting for and taking over
    /// the task's branch from an earlier lane's worktree (module invariants).
    pub(super) fn prepare(
        &mut self,
        git: &crate::git::Git,
        claim: &Claim,
        holder: &Holder,
    ) -> Result<Prepared> {
        let target = launch::worktree_path(self.cfg, self.opts, &claim.handle);
        let branch = crate::git::task_branch(&claim.handle);
        if let Err(e) = git.upgrade_task_branch(&branch) {
            return Ok(Prepared::Failed(e));
        }
        let mut waited: Option<String> = None;
        let mut renewer = Renewer::new(self.cfg.renew, Instant::now());
        let since = Instant::now();
        loop {
            if self.stopping() {
                return Ok(Prepared::Over);
            }
            let holder_wt = match git.branch_holder(&branch, &target) {
                Ok(h) => h,
                Err(e) => return Ok(Prepared::Failed(e)),
            };
            let user = match &holder_wt {
                Some(h) if !h.main => {
                    self.worktree_user(&claim.task_id, &holder.claimant, &h.path)?
                }
                _ => None,
            };
            match machine::handoff(holder_wt.as_ref().map(|h| h.main), user.as_deref()) {
                Handoff::Make => {}
                Handoff::Wait(user) => {
                    let h = holder_wt.as_ref().expect("a wait names the worktree");
                    let reason = format!(
                        "waiting for {user} to finish with {} (branch {branch}) before \
                         preparing {}",
                        h.path.display(),
                        claim.handle
                    );
                    if waited.as_deref() != Some(reason.as_str()) {
                        self.store.note(
                            &claim.task_id,
                            "worktree_wait",
                            &holder.claimant,
                            json!({ "lane": self.cfg.name, "reason": reason }),
                        )?;
                        // A hand-off between phases is a state, not an error: the
                        // operator is not paged for it (`worktree_wait` events).
                        self.row.state = LaneState::Starting;
                        self.row.task_id = Some(claim.task_id.clone());
                        self.row.state_note = Some(reason.clone());
                        self.publish(false)?;
                        waited = Some(reason);
                    }
                    if renewer.due(Instant::now())
                        && self.renew_claim(&claim.task_id, holder)?.is_some()
                    {
                        return Ok(Prepared::Over);
                    }
                    std::thread::sleep(TICK);
                    continue;
                }
                Handoff::Free => {
                    let h = holder_wt.as_ref().expect("freeing names the worktree");
                    // The lane that finished with it may be recycling it right now
                    // (under the pool's lock): look again once that is over.
                    let _pool = crate::bed::pool::Pool::of(git).lock();
                    if !matches!(git.branch_holder(&branch, &target), Ok(Some(ref again)) if again.path == h.path)
                    {
                        continue;
                    }
                    let tag = crate::stamp::encode(self.now().max(0) as u64);
                    match git.free_branch(&branch, &h.path, &tag) {
                        Ok(freed) => self.store.note(
                            &claim.task_id,
                            "handoff",
                            &holder.claimant,
                            json!({
                                "lane": self.cfg.name, "branch": branch, "from": h.path,
                                "freed": freed, "waited_ms": since.elapsed().as_millis() as u64,
                            }),
                        )?,
                        Err(e) => return Ok(Prepared::Failed(e)),
                    }
                }
            }
            // A finished task's worktree from the pool, with its bed, when there is one.
            self.take_pooled(git, claim, holder, &target)?;
            let made = launch::worktree(
                &mut *self.store,
                git,
                self.cfg,
                self.opts,
                &self.base,
                claim,
                holder,
            );
            if waited.is_some() && self.row.last_error == waited {
                self.row.last_error = None;
            }
            return Ok(match made {
                Ok(path) => {
                    // A bed is help, never a condition of the claim.
                    if let Err(e) = self.seed_bed(git, claim, holder, &path) {
                        let detail = json!({ "lane": self.cfg.name, "seeded": false,
                            "method": "cold", "error": e.to_string() });
                        let _ = self
                            .store
                            .note(&claim.task_id, "bed", &holder.claimant, detail);
                    }
                    Prepared::Ready(path)
                }
                Err(e) => Prepared::Failed(e),
            });
        }
    }

    /// Who still works in the worktree at `path` on `task`, other than `me`: a live
    /// claim recorded there, or another lane whose agent (alive, by pid and start
    /// time) runs on the task.
    fn worktree_user(&mut self, task: &str, me: &str, path: &Path) -> Result<Option<String>> {
        let same = |w: &str| {
            let w = Path::new(w);
            w == path || std::fs::canonicalize(w).is_ok_and(|c| c == path)
        };
        let now = self.now();
        for c in self.store.claims()? {
            if c.claimant != me && c.is_live(now) && c.worktree.as_deref().is_some_and(same) {
                return Ok(Some(format!("claimant {} of {}", c.claimant, c.handle)));
            }
        }
        for l in self.store.lanes()? {
            if l.name == self.cfg.name || l.task_id.as_deref() != Some(task) {
                continue;
            }
            if let (Some(pid), Some(start)) = (l.pid, l.pid_start) {
                if crate::agent::start_time(pid).ok().flatten() == Some(start) {
                    return Ok(Some(format!("lane {}'s agent (pid {pid})", l.name)));
                }
            }
        }
        Ok(None)
    }
}
