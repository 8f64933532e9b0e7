//! Clean-up that never loses work: `spice fleet gc` and the fleet's `[gc]` policy.
//! A task's worktree and branch go when its work is in `base` or the task is done or
//! deleted; whatever `base` lacks (commits, tracked changes, untracked files) is
//! first saved under `refs/spice/wip/<handle>` ([`crate::git::Git::save_wip`]).
//!
//! Invariants:
//! - Never touched: a checkout whose task has a claim (live or lapsed: a lapsed claim
//!   is still someone's) or a lane's live agent, a worktree a claim names, a pooled worktree, the main work
//!   tree, a task not finished whose branch holds work `base` lacks, and (under the
//!   policy) a task that ended less than `after` ago.
//! - A dry run reads only: it reports what would be saved and removed.
//! - A removal is recorded in the task's ledger (`gc`: worktree, branch, saved ref,
//!   bytes), and a failure leaves the checkout as it was and is reported, not fatal.

use super::FleetOptions;
use crate::clock::Micros;
use crate::config::fleet::FleetConfig;
use crate::config::housekeeping::GcPolicy;
use crate::error::Result;
use crate::git::{Git, TaskCheckout};
use crate::store::Authority;
use crate::task::Status;
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// What one run does, besides which repository and base.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    pub dry_run: bool,
    /// Only tasks whose work ended at least this long ago (the policy's `after`).
    pub older_than: Option<Duration>,
}

/// One task checkout and what became of it.
#[derive(Debug, Clone, Serialize)]
pub struct Item {
    pub repo: PathBuf,
    pub handle: String,
    pub task: Option<String>,
    pub branch: Option<String>,
    pub worktree: Option<PathBuf>,
    /// `removed`, `would-remove`, `kept`, `failed`.
    pub action: &'static str,
    pub why: String,
    /// The wip ref its work was (or would be) saved to.
    pub saved: Option<String>,
    /// The worktree's bytes on disk (freed when removed).
    pub bytes: u64,
}

/// What a run freed, and every checkout it looked at.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Report {
    pub dry_run: bool,
    pub freed_bytes: u64,
    pub worktrees_removed: usize,
    pub branches_removed: usize,
    /// Private object directories of worktrees removed without spice, whose objects
    /// were copied into their repository's store (`git::Git::retire_orphan_objects`).
    pub object_dirs_retired: usize,
    pub saved: Vec<String>,
    pub items: Vec<Item>,
}

impl Report {
    fn add(&mut self, item: Item) {
        if matches!(item.action, "removed" | "would-remove") {
            self.freed_bytes += item.bytes;
            self.worktrees_removed += usize::from(item.worktree.is_some());
            self.branches_removed += usize::from(item.branch.is_some());
            self.saved.extend(item.saved.clone());
        }
        self.items.push(item);
    }

    pub fn merge(&mut self, other: Report) {
        self.object_dirs_retired += other.object_dirs_retired;
        for i in other.items {
            self.add(i);
        }
    }
}

/// Why `c` must stay, or `None` when it may go (and whether its work needs saving).
struct Verdict {
    keep: Option<String>,
    save: bool,
    why: String,
}

/// Runs gc over one repository's task checkouts against `base`.
pub fn collect(
    store: &mut dyn Authority,
    git: &Git,
    base: &str,
    state_dir: &Path,
    opts: Options,
) -> Result<Report> {
    let mut report = Report {
        dry_run: opts.dry_run,
        ..Report::default()
    };
    let claims = store.claims()?;
    // A lane's agent still running on a task (its claim released by its phase, the
    // agent finishing its turn) is in its worktree: not to be pulled from under it.
    let running: Vec<String> = store
        .lanes()?
        .into_iter()
        .filter(|l| match (l.pid, l.pid_start) {
            (Some(pid), Some(start)) => crate::agent::start_time(pid).ok().flatten() == Some(start),
            _ => false,
        })
        .filter_map(|l| l.task_id)
        .collect();
    let claimed_paths: Vec<PathBuf> = claims
        .iter()
        .filter_map(|c| c.worktree.as_deref())
        .map(|w| std::fs::canonicalize(w).unwrap_or_else(|_| PathBuf::from(w)))
        .collect();
    let pool = std::fs::canonicalize(git.common_dir())
        .unwrap_or_else(|_| git.common_dir().to_path_buf())
        .join("spice")
        .join("pool");
    let now = store.now()?;
    for c in git.task_checkouts(&state_dir.join("worktrees"))? {
        let task = store.task(&c.handle).ok();
        let mut item = Item {
            repo: git.repo().to_path_buf(),
            handle: c.handle.clone(),
            task: task.as_ref().map(|t| t.id.clone()),
            branch: c.branch.clone(),
            worktree: c.worktree.clone(),
            action: "kept",
            why: String::new(),
            saved: None,
            bytes: 0,
        };
        let verdict = judge(
            git,
            base,
            &c,
            task.as_ref(),
            (&claims, &running),
            &claimed_paths,
            &pool,
            now,
            opts,
        );
        let v = match verdict {
            Ok(v) => v,
            Err(e) => {
                item.action = "failed";
                item.why = e.to_string();
                report.add(item);
                continue;
            }
        };
        if let Some(why) = v.keep {
            item.why = why;
            report.add(item);
            continue;
        }
        item.why = v.why;
        item.bytes = c
            .worktree
            .as_deref()
            .filter(|_| !c.prunable)
            .map(crate::git::disk_bytes)
            .unwrap_or(0);
        if v.save {
            item.saved = Some(format!("refs/spice/wip/{}", c.handle));
        }
        if opts.dry_run {
            item.action = "would-remove";
            report.add(item);
            continue;
        }
        let done = (|| -> Result<()> {
            if v.save {
                item.saved = Some(git.save_wip(&c)?);
            }
            git.remove_checkout(&c)
        })();
        match done {
            Ok(()) => {
                item.action = "removed";
                if let Some(t) = &task {
                    let _ = store.note(
                        &t.id,
                        "gc",
                        "spice fleet gc",
                        serde_json::json!({
                            "worktree": item.worktree, "branch": item.branch,
                            "saved": item.saved, "bytes": item.bytes, "why": item.why,
                        }),
                    );
                }
            }
            Err(e) => {
                item.action = "failed";
                item.why = format!("{}; left as it was", e);
            }
        }
        report.add(item);
    }
    if !opts.dry_run {
        report.object_dirs_retired = git.retire_orphan_objects()?;
    }
    Ok(report)
}

#[allow(clippy::too_many_arguments)]
fn judge(
    git: &Git,
    base: &str,
    c: &TaskCheckout,
    task: Option<&crate::task::Task>,
    (claims, running): (&[crate::store::Claim], &[String]),
    claimed_paths: &[PathBuf],
    pool: &Path,
    now: Micros,
    opts: Options,
) -> Result<Verdict> {
    let keep = |why: String| {
        Ok(Verdict {
            keep: Some(why),
            save: false,
            why: String::new(),
        })
    };
    if let Some(t) = task {
        if let Some(cl) = claims.iter().find(|cl| cl.task_id == t.id) {
            return keep(format!("claimed by {}", cl.claimant));
        }
        if running.contains(&t.id) {
            return keep("a lane's agent still runs on it".into());
        }
    }
    if let Some(w) = &c.worktree {
        if claimed_paths.iter().any(|p| p == w) {
            return keep("a claim names this worktree".into());
        }
        if w.starts_with(pool) {
            return keep("a pooled worktree".into());
        }
    }
    let merged = git.merged_into(&c.tip, base)?;
    let finished = task.is_some_and(|t| matches!(t.status, Status::Completed | Status::Deleted));
    let why = match (merged, finished, task) {
        (true, _, _) => format!("merged into {base}"),
        (false, true, Some(t)) => format!("task {:?}", t.status).to_lowercase(),
        (false, _, None) => {
            return keep(format!("not merged into {base}, and no task spice knows"))
        }
        (false, _, Some(_)) => {
            return keep(format!("not merged into {base}, and its task is open"))
        }
    };
    if let Some(after) = opts.older_than {
        let ended = task
            .map(|t| t.end.unwrap_or(t.modified))
            .or_else(|| {
                c.worktree
                    .as_deref()
                    .and_then(|w| std::fs::metadata(w).ok())
                    .and_then(|m| m.modified().ok())
                    .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                    .map(|d| d.as_micros() as Micros)
            })
            .unwrap_or(now);
        if now - ended < crate::when::micros(after) {
            return keep(format!(
                "ended {} ago, less than [gc] after",
                crate::when::span(now - ended)
            ));
        }
    }
    let dirty = match c.worktree.as_deref().filter(|_| !c.prunable) {
        Some(w) => !git.unsaved_paths(w)?.is_empty(),
        None => false,
    };
    Ok(Verdict {
        keep: None,
        save: dirty || !merged,
        why,
    })
}

/// The fleet's policy: gc every `every` (and once at the start) over each lane's
/// repository and base, for tasks that ended `after` ago; stops with the fleet.
pub(super) fn spawn(
    cfg: &FleetConfig,
    opts: &FleetOptions,
    policy: Option<GcPolicy>,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<()> {
    let places: Vec<(Git, String)> = match policy {
        Some(_) => super::lane::bases(cfg, opts)
            .into_iter()
            .map(|(_, git, base)| (git, base))
            .collect(),
        None => Vec::new(),
    };
    let opts = opts.clone();
    let state_dir = opts.state_dir.clone();
    std::thread::spawn(move || {
        let Some(policy) = policy else { return };
        loop {
            if let Ok(mut store) = opts.connect() {
                for (git, base) in &places {
                    let o = Options {
                        dry_run: false,
                        older_than: Some(policy.after),
                    };
                    match collect(&mut *store, git, base, &state_dir, o) {
                        Ok(r) if r.worktrees_removed + r.branches_removed > 0 => tracing::info!(
                            target: "spice", "gc in {}: removed {} worktree(s) and {} branch(es), {} bytes freed{}",
                            git.repo().display(),
                            r.worktrees_removed,
                            r.branches_removed,
                            r.freed_bytes,
                            if r.saved.is_empty() {
                                String::new()
                            } else {
                                format!(", work saved to {}", r.saved.join(", "))
                            }
                        ),
                        Ok(_) => {}
                        Err(e) => {
                            tracing::warn!(target: "spice", "gc in {}: {e}", git.repo().display())
                        }
                    }
                }
            }
            let mut waited = Duration::ZERO;
            while waited < policy.every {
                if stop.load(Ordering::SeqCst) {
                    return;
                }
                std::thread::sleep(Duration::from_millis(200));
                waited += Duration::from_millis(200);
            }
        }
    })
}
