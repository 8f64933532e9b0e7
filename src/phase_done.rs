//! Landing a phase: proving the holding, merging the task branch into `base`, and
//! completing the phase, as one operation (git boundary 2 with the store around it).
//! `spice task phase ID --done` is a call to [`complete_phase`].
//!
//! The order, for a claimed task with a worktree:
//!
//! 1. the claim is read, to find the worktree and so the repository;
//! 2. the repository's merge lock is taken ([`Git::lock_merges`]), so merges into it
//!    run one at a time, across processes;
//! 3. the holding is proved by a renewal of the lease ([`Store::hold`]) under the
//!    caller's fence, or under the current one for a claimant that named none, which
//!    is then pinned; the lease is extended so it cannot lapse, and be taken over,
//!    during the merge. A refused holder has merged nothing and pushed nothing;
//! 4. the gate runs over what the branch changed since it left `base`, under the
//!    rules `base` carries ([`crate::gate::phase`]); findings refuse the merge (the
//!    agent sees them; its claim and lease stay) and are recorded in the task's
//!    ledger (`gate_refused`), as are bypasses (`gate_bypass`: commits that never
//!    passed the pre-commit gate, a `[gate]` the branch changed);
//!    then the repository's `on_phase_done` hook runs in the worktree (`[hooks]` as
//!    `base` carries it, [`crate::stage::hooks`]): a failure, a timeout or a hook
//!    that cannot run refuses the merge the same way, with its output; then the
//!    branch is merged into `base` ([`Merging::complete_phase`]);
//! 5. the phase is completed under that same fence, releasing the claim;
//! 6. `base` is pushed where the lane says, still under the lock, so the remote sees
//!    `base` move in the order it moved here;
//! 7. the lock let go, the repository's `on_release` hook runs in the worktree (the
//!    agent's command is still running there, so no other lane takes the worktree
//!    meanwhile); its failure is reported and changes nothing: the release stands.
//!
//! A failure after the merge leaves the merge in place (committed work, never
//! undone) and says so in its message. A task that is unclaimed, or has no worktree,
//! only has its phase completed: the store alone checks the holder then.
//!
//! Where it merges: for a claim the fleet launched, where its supervisor recorded it
//! launched the claimant's session (the `launched` ledger entry's `base` and `push`:
//! the lane as the supervisor runs it, `fleet up --base` included); otherwise the
//! lane file of the task repository's main work tree, else of the repository the
//! caller runs in (a lane whose `repo` is another one), never the copy in the task's
//! own worktree, which may be stale or absent. The caller's environment never
//! decides it: `SPICE_BASE` is the agent's to read, and an agent can set it. Without a lane `base`,
//! `base` is the branch checked out in the main work tree (else `main`). Nothing is
//! pushed unless the lane names a `push` remote.

use crate::error::{Error, Result};
use crate::git::{Git, Merge, Merging, Runner};
use crate::stage::config::{HooksConfig, Stage};
use crate::stage::hooks::{self, HookRun};
use crate::store::{Authority, Claim, Holder, PhaseOutcome};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How long the proof of step 3 keeps the lease live at least: far longer than a
/// merge takes, so the claim cannot lapse mid-merge. Completing the phase releases
/// the claim anyway; after a refused merge the holder keeps a live lease.
pub const MERGE_LEASE: Duration = Duration::from_secs(10 * 60);

/// What completing a phase needs besides the store.
#[derive(Debug, Clone)]
pub struct PhaseDone<'a> {
    /// The task (id, id prefix or handle).
    pub task: &'a str,
    /// The caller, when the task is claimed.
    pub holder: Option<&'a Holder>,
    /// How git is run.
    pub runner: &'a Runner,
    /// The lanes directory of the repository the caller runs in, if any.
    pub lanes_dir: Option<&'a Path>,
    /// The state directory, which a stage hook's `spice` commands use (`SPICE_HOME`).
    pub home: Option<&'a Path>,
    /// The repository the claim's worktree belongs to, when the caller knows it (the
    /// supervisor, completing a phase for its agent): then the worktree must be one
    /// of its worktrees, on the task's own branch, or nothing is completed. Without
    /// it (the operator's own command) the repository is found from the worktree.
    pub repo: Option<&'a Path>,
    /// The lane's sandbox, for the stage hooks run in the agent's worktree (the
    /// supervisor, completing a phase for its confined agent), and the variables it
    /// comes with; `None`: they run with the caller's rights.
    pub confine: Option<crate::sandbox::Entry>,
    pub sandbox_env: &'a [(String, String)],
}

/// What [`complete_phase`] did.
#[derive(Debug, Clone)]
pub struct Landed {
    pub phase: PhaseOutcome,
    /// The merge into `base`, when the task had a worktree.
    pub merge: Option<Merge>,
    /// The push of `base` after the merge, when the lane asks for one.
    pub push: Option<Pushed>,
    /// The repository's `on_release` run after the phase completed (or why it could
    /// not be run), when it has one: a failure changes nothing else.
    pub release_hook: Option<std::result::Result<HookRun, String>>,
}

impl Landed {
    /// What the caller is told, as lines for stdout and stderr: the merge (unless
    /// `json`), a failed push (the merge is kept locally), a failing `on_release`
    /// (the release stands), then the step, or its JSON document. One text for the
    /// command line and the supervisor's desk (`fleet::desk`).
    pub fn report(&self, json: bool) -> (Vec<String>, Vec<String>) {
        let (mut out, mut err) = (Vec::new(), Vec::new());
        if let Some(m) = self.merge.as_ref().filter(|_| !json) {
            out.push(format!(
                "merged {} into {} at {} ({:?})",
                m.branch, m.base, m.commit, m.kind
            ));
        }
        if let Some(p) = &self.push {
            if let Some(e) = &p.error {
                err.push(format!(
                    "spice: {e}; the merge into {} is kept locally",
                    p.base
                ));
            }
        }
        match &self.release_hook {
            Some(Ok(run)) if !run.passed() => err.push(format!(
                "spice: {}; the release stands",
                run.summary_with_output()
            )),
            Some(Err(why)) => err.push(format!(
                "spice: on_release not run: {why}; the release stands"
            )),
            _ => {}
        }
        let phase = &self.phase;
        out.push(if json {
            serde_json::to_string(phase).expect("JSON values serialise")
        } else {
            match &phase.to {
                Some(to) => format!("{} → {to}", phase.from),
                None => format!("{} → completed", phase.from),
            }
        });
        (out, err)
    }
}

/// A push of `base`: a failed one loses nothing (the merge is kept locally).
#[derive(Debug, Clone)]
pub struct Pushed {
    pub remote: String,
    pub base: String,
    /// Why the push failed, one line.
    pub error: Option<String>,
}

/// Completes the task's current phase, landing its branch first when it has a
/// worktree (see the module doc for the order and where it merges).
pub fn complete_phase(store: &mut dyn Authority, req: &PhaseDone<'_>) -> Result<Landed> {
    let only_phase = |store: &mut dyn Authority| {
        Ok(Landed {
            phase: store.complete_phase(req.task, req.holder)?,
            merge: None,
            push: None,
            release_hook: None,
        })
    };
    let (Some(holder), Some(claim)) = (req.holder, store.claim_on(req.task)?) else {
        return only_phase(store);
    };
    let Some(wt) = claim.worktree.as_deref().map(Path::new) else {
        return only_phase(store);
    };
    if claim.claimant != holder.claimant {
        return only_phase(store);
    }
    let main = match req.repo {
        Some(repo) => trusted_work_tree(repo, wt, &claim, req.runner)?,
        None if !wt.join(".git").exists() => return only_phase(store),
        None => main_work_tree(wt, req.runner)?,
    };
    let lock = main.lock_merges()?;
    let proof = store.hold(req.task, holder, MERGE_LEASE, "complete the phase of")?;
    if proof.worktree != claim.worktree {
        return Err(Error::conflict(format!(
            "the claim on task {} moved from worktree {} to {} meanwhile; nothing was \
             merged, retry",
            proof.task_id,
            wt.display(),
            proof.worktree.as_deref().unwrap_or("none")
        )));
    }
    let phase_now = store.task(req.task)?.phase;
    let (merge, base, push, hooks) = merge(store, &lock, &proof, wt, req, &phase_now)?;
    let pinned = Holder::fenced(&holder.claimant, proof.fence);
    let phase = store
        .complete_phase(req.task, Some(&pinned))
        .map_err(|e| after_merge(e, &merge))?;
    // For the review of a merged phase; the phase stands without it.
    let noted = store.note(
        req.task,
        "merged",
        &holder.claimant,
        serde_json::json!({
            "phase": phase.from, "base": merge.base, "branch": merge.branch,
            "previous": merge.previous, "commit": merge.commit,
            "fast_forward": merge.fast_forward(),
        }),
    );
    if let Err(e) = noted {
        tracing::warn!(
            task = req.task,
            "cannot record the merge in the ledger: {e}"
        );
    }
    let push = push.map(|remote| Pushed {
        error: main.push(&remote, &base).err().map(|e| e.to_string()),
        remote,
        base: base.clone(),
    });
    drop(lock);
    let release_hook = match hooks {
        Ok(cfg) => {
            let ev = event(store, req, Stage::OnRelease, &proof, wt, &base, &phase_now);
            hooks::run_and_record(store, &cfg, &ev)
                .map_err(|e| after_merge(e, &merge))?
                .map(Ok)
        }
        Err(why) => Some(Err(why)),
    };
    Ok(Landed {
        phase,
        merge: Some(merge),
        push,
        release_hook,
    })
}

/// The test bed of the worktree `wt` as a stage hook's event names it.
pub fn bed_of(store: &mut dyn Authority, wt: &Path) -> Option<serde_json::Value> {
    let slot = store.bed_slot(&wt.display().to_string()).ok().flatten()?;
    Some(serde_json::to_value(slot).expect("serialisable"))
}

/// What a stage hook of `claim`'s task is told, in the worktree `wt`.
fn event<'a>(
    store: &mut dyn Authority,
    req: &PhaseDone<'_>,
    stage: Stage,
    claim: &'a Claim,
    wt: &'a Path,
    base: &'a str,
    phase: &'a str,
) -> hooks::Event<'a> {
    hooks::Event {
        stage,
        task_id: &claim.task_id,
        handle: &claim.handle,
        phase,
        lane: claim.lane.as_deref(),
        session: &claim.claimant,
        worktree: wt,
        base,
        home: req.home.map(Path::to_path_buf),
        // The worktree's test bed: its slot, ports, template and method (null: none).
        bed: bed_of(store, wt),
        confine: req.confine,
        sandbox_env: req.sandbox_env.to_vec(),
    }
}

/// The repository `repo` the supervisor runs the lane in, opened at its main work
/// tree, once `wt` is known to be one of its worktrees (its git directory under the
/// repository names it) checked out on the claim's own task branch. The agent can
/// write everything in its worktree, `.git` included, so git there is pointed at the
/// git directory the repository knows (`Git`'s pinning), whatever `.git` says; a
/// worktree that is gone, or is on another branch, refuses the completion, where the
/// phase would otherwise complete with nothing merged, no gate and no hook, or merge
/// a branch that is not the task's.
fn trusted_work_tree(repo: &Path, wt: &Path, claim: &Claim, runner: &Runner) -> Result<Git> {
    let git = Git::open(repo, runner.clone())?;
    let refuse = |why: String| {
        Error::conflict(format!(
            "task {}'s worktree {} {why}: nothing was merged and the phase is not complete",
            claim.handle,
            wt.display()
        ))
    };
    if crate::git::admin_dir(git.common_dir(), wt).is_none() {
        return Err(refuse(format!(
            "is gone, or no longer a worktree of {}",
            git.repo().display()
        )));
    }
    let on = git.launch_check(wt)?.branch;
    let want = crate::git::task_branch(&claim.handle);
    if on.as_deref() != Some(want.as_str()) {
        return Err(refuse(format!(
            "is on {}, not the task's branch {want}",
            on.as_deref().unwrap_or("a detached HEAD")
        )));
    }
    let common = git.common_dir().to_path_buf();
    Git::open(common.parent().unwrap_or(&common), runner.clone())
}

/// The repository of the task worktree `wt`, opened at its main work tree (where the
/// operator's lanes and checkout are).
fn main_work_tree(wt: &Path, runner: &Runner) -> Result<Git> {
    let task = Git::open(wt, runner.clone())?;
    let common = task.common_dir();
    Git::open(common.parent().unwrap_or(common), runner.clone())
}

/// The stage hooks `base` carries, or why they cannot be read.
type Hooks = std::result::Result<HooksConfig, String>;

/// Step 4: merges the task branch checked out at `wt` into the lane's `base`.
/// Returns the merge, `base`, the remote to push it to, and the stage hooks `base`
/// carries (or why they cannot be read).
fn merge(
    store: &mut dyn Authority,
    lock: &Merging<'_>,
    claim: &Claim,
    wt: &Path,
    req: &PhaseDone<'_>,
    phase: &str,
) -> Result<(Merge, String, Option<String>, Hooks)> {
    let git = lock.git();
    let branch = git.launch_check(wt)?.branch.ok_or_else(|| {
        Error::conflict(format!(
            "{} is on a detached HEAD: no task branch to merge",
            wt.display()
        ))
    })?;
    let (base, push) = policy(store, claim, req, git.repo(), wt);
    let base = match base {
        Some(b) => b,
        None => git
            .launch_check(git.repo())?
            .branch
            .unwrap_or_else(|| "main".into()),
    };
    // What merges must be in the repository's own store, not only in the agent's
    // object directory (`git::objects`): before the gate reads it, and once merged.
    git.adopt_objects(wt, &format!("refs/heads/{branch}"), &base)?;
    let at = Gated {
        common: git.common_dir(),
        base: &base,
        branch: &branch,
        phase,
    };
    gate(store, claim, wt, &at, req)?;
    let hooks = crate::stage::config::at_rev(git.repo(), &base).map_err(|errs| {
        let all: Vec<String> = errs.iter().map(|e| e.to_string()).collect();
        all.join("; ")
    });
    phase_hook(store, req, claim, wt, &base, phase, &hooks)?;
    let merge = lock.complete_phase(wt, &branch, &base)?;
    git.adopt_objects(wt, &merge.commit, &merge.previous)
        .map_err(|e| after_merge(e, &merge))?;
    Ok((merge, base, push, hooks))
}

/// Step 4's `on_phase_done`: refuses the merge, with the hook's output, unless it
/// passes.
fn phase_hook(
    store: &mut dyn Authority,
    req: &PhaseDone<'_>,
    claim: &Claim,
    wt: &Path,
    base: &str,
    phase: &str,
    hooks: &Hooks,
) -> Result<()> {
    let cfg = hooks.as_ref().map_err(|why| {
        Error::Other(format!(
            "cannot read the stage hooks: {why}; nothing was merged"
        ))
    })?;
    let ev = event(store, req, Stage::OnPhaseDone, claim, wt, base, phase);
    match hooks::run_and_record(store, cfg, &ev)? {
        Some(run) if !run.passed() => Err(Error::Refused(
            format!(
                "{}; nothing was merged: fix what it says, commit, and complete the phase again",
                run.summary()
            ),
            run.output_lines(),
        )),
        _ => Ok(()),
    }
}

/// What step 4's gate checks: `branch` against `base` of the repository whose common
/// git directory is `common`, completing `phase`.
#[derive(Clone, Copy)]
struct Gated<'a> {
    common: &'a Path,
    base: &'a str,
    branch: &'a str,
    phase: &'a str,
}

/// Step 4's gate: refuses the merge when the branch's changes break a rule. The
/// repository's checks run in the agent's sandbox when the request carries one.
fn gate(
    store: &mut dyn Authority,
    claim: &Claim,
    wt: &Path,
    at: &Gated<'_>,
    req: &PhaseDone<'_>,
) -> Result<()> {
    let Gated {
        common,
        base,
        branch,
        phase,
    } = *at;
    let opts = crate::gate::Options {
        actor: claim.claimant.clone(),
        phase: Some(phase.to_string()),
        record: false,
        defer_releases: false,
        now: claim.renewed_at,
        confine: req.confine,
        sandbox_env: req.sandbox_env.to_vec(),
    };
    let checked = crate::gate::phase::check(wt, common, base, branch, &opts).map_err(|e| {
        Error::Other(format!(
            "the gate could not check {branch} against {base}: {e}; nothing was merged"
        ))
    })?;
    for b in &checked.bypasses {
        let mut detail = serde_json::to_value(b).expect("serialisable");
        detail["lane"] = serde_json::json!(claim.lane);
        detail["branch"] = serde_json::json!(branch);
        store.note(&claim.task_id, "gate_bypass", &claim.claimant, detail)?;
    }
    if checked.report.clean() {
        return Ok(());
    }
    store.note(
        &claim.task_id,
        "gate_refused",
        &claim.claimant,
        serde_json::json!({
            "lane": claim.lane,
            "base": base,
            "branch": branch,
            "findings": checked.report.findings,
            "could_not_run": checked.report.could_not_run,
        }),
    )?;
    let lines: Vec<String> = crate::gate::render_text(&checked.report)
        .lines()
        .map(str::to_string)
        .collect();
    let n = checked.report.findings.len() + checked.report.could_not_run.len();
    Err(Error::Refused(
        format!(
            "the gate refused to merge {branch} into {base} ({n} finding(s)); nothing was \
             merged: fix them, commit, and complete the phase again"
        ),
        lines,
    ))
}

/// The lane's `base` and `push` for the claim (see the module doc): the supervisor's
/// own record of launching the claimant's session, else the lane file. Nothing the
/// caller's environment says counts: an agent can set any variable it likes.
fn policy(
    store: &mut dyn Authority,
    claim: &Claim,
    req: &PhaseDone<'_>,
    main: &Path,
    wt: &Path,
) -> (Option<String>, Option<String>) {
    let launched = store
        .ledger_of_kinds(&claim.task_id, &["launched"], 64)
        .unwrap_or_default()
        .into_iter()
        .find(|e| {
            e.actor.as_deref() == Some(claim.claimant.as_str())
                && e.detail["lane"].as_str() == claim.lane.as_deref()
        });
    if let Some(base) = launched
        .as_ref()
        .and_then(|e| e.detail["base"].as_str())
        .filter(|b| !b.is_empty())
    {
        let push = launched
            .as_ref()
            .and_then(|e| e.detail["push"].as_str())
            .map(String::from);
        return (Some(base.to_string()), push);
    }
    let lane = claim.lane.as_deref().and_then(|l| {
        let here = req.lanes_dir.filter(|d| !d.starts_with(wt));
        [Some(main.join("lanes")), here.map(PathBuf::from)]
            .into_iter()
            .flatten()
            .find(|d| d.join(format!("{l}.toml")).is_file())
            .and_then(|d| crate::config::lane::load(&d, l).ok())
    });
    (
        lane.as_ref().and_then(|l| l.base.clone()),
        lane.and_then(|l| l.push),
    )
}

/// An error after the merge landed: the same kind (and exit code), saying so first.
fn after_merge(e: Error, m: &Merge) -> Error {
    let landed = format!("merged {} into {} at {}, but ", m.branch, m.base, m.commit);
    match e {
        Error::Input(s) => Error::Input(landed + &s),
        Error::Conflict(s) => Error::Conflict(landed + &s),
        Error::Claim(c) => Error::Claim(crate::error::ClaimError {
            message: landed + &c.message,
            ..c
        }),
        Error::Store(s) => Error::Store(landed + &s),
        Error::Other(s) => Error::Other(landed + &s),
        Error::Unreachable(s) => Error::Unreachable(landed + &s),
        Error::Sqlite { context, source } => Error::Sqlite {
            context: landed + &context,
            source,
        },
        Error::Io { context, source } => Error::Io {
            context: landed + &context,
            source,
        },
        Error::Exit(code, s) => Error::Exit(code, landed + &s),
        Error::Refused(s, lines) => Error::Refused(landed + &s, lines),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::git::MergeKind;

    #[test]
    fn an_error_after_the_merge_keeps_its_kind_and_names_the_merge() {
        let m = Merge {
            base: "main".into(),
            branch: "spice/x".into(),
            previous: "a".into(),
            commit: "b".into(),
            kind: MergeKind::FastForward,
        };
        let e = after_merge(Error::conflict("cannot complete the phase of task x"), &m);
        assert_eq!(e.exit_code(), 3);
        assert_eq!(
            e.to_string(),
            "merged spice/x into main at b, but cannot complete the phase of task x"
        );
        assert_eq!(after_merge(Error::Store("bad".into()), &m).exit_code(), 4);
    }
}
