//! Warming in the background: while the fleet runs, each repository's `base` is
//! watched, and when it names a commit no template matches by key (a dependency
//! changed, or there never was one), a template is warmed there beside the lanes, so
//! the next claims seed from it. A lane never waits for it: until it is ready, claims
//! seed from the nearest ancestor's template, or start cold.
//!
//! Invariants:
//! - One warm at a time per supervisor, in this thread; the template's own lock
//!   keeps it apart from `spice bed warm` and from seedings.
//! - A commit with a template in any state but a stale `warming` one is not warmed
//!   again: a failed warm is reported once, not retried at every look (the operator
//!   fixes the commands, and the next commit is warmed).
//! - The supervisor stopping stops the warm (its commands' process group killed), and
//!   a stopped warm leaves nothing behind.
//! - What happens is said on the supervisor's stderr as it happens: warming, ready
//!   (with the time taken), failed (with why), beds evicted after it.

use super::FleetOptions;
use crate::bed::config::{self, BedConfig};
use crate::bed::template::Beds;
use crate::config::fleet::FleetConfig;
use crate::git::{Git, RefStamp};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How often each repository's base is looked at: its ref files' stamps, and git
/// when they changed.
const LOOK_EVERY: Duration = Duration::from_secs(2);
/// How often git resolves a base whose ref files look unchanged (a symbolic loose ref
/// moves with its target, which no stamp covers).
const ASK_GIT_EVERY: Duration = Duration::from_secs(30);

/// Starts the warmer for the repositories of `cfg`'s enabled lanes.
pub(super) fn spawn(
    cfg: &FleetConfig,
    opts: &FleetOptions,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<()> {
    let places: Vec<(PathBuf, String)> = super::lane::bases(cfg, opts)
        .into_iter()
        .map(|(repo, _, base)| (repo, base))
        .collect();
    let vars = opts.vars.clone();
    let opts = opts.clone();
    std::thread::spawn(move || {
        let gits: Vec<(Git, String)> = places
            .into_iter()
            .filter_map(|(repo, base)| {
                Git::open(&repo, crate::git::Runner::new(vars.clone()))
                    .ok()
                    .map(|g| (g, base))
            })
            .collect();
        let in_use = || -> Vec<PathBuf> {
            let Ok(mut store) = opts.connect() else {
                return Vec::new();
            };
            let Ok(now) = store.now() else {
                return Vec::new();
            };
            store
                .claims()
                .unwrap_or_default()
                .into_iter()
                .filter(|c| c.is_live(now))
                .filter_map(|c| c.worktree.map(PathBuf::from))
                .collect()
        };
        let mut looked: Vec<Option<Looked>> = vec![None; gits.len()];
        while !stop.load(Ordering::SeqCst) {
            for (i, (git, base)) in gits.iter().enumerate() {
                // Taken before git reads the refs: a move while it runs changes the
                // next stamp, so it is never mistaken for the commit read here.
                let stamp = git.ref_stamp(base);
                if looked[i].as_ref().is_some_and(|l| l.current(&stamp)) {
                    continue;
                }
                let Ok(commit) = git.resolve_commit(base) else {
                    continue;
                };
                let moved = looked[i].as_ref().map(|l| &l.commit) != Some(&commit);
                looked[i] = Some(Looked {
                    commit: commit.clone(),
                    stamp,
                    at: Instant::now(),
                });
                if moved {
                    look(git, base, &commit, &stop, &in_use);
                }
                if stop.load(Ordering::SeqCst) {
                    return;
                }
            }
            // Woken early by the supervisor's stop (fleet::up unparks this thread).
            let until = Instant::now() + LOOK_EVERY;
            while !stop.load(Ordering::SeqCst) && Instant::now() < until {
                std::thread::park_timeout(until.saturating_duration_since(Instant::now()));
            }
        }
    })
}

/// A repository's base as last resolved.
#[derive(Clone)]
struct Looked {
    commit: String,
    /// The refs' files then ([`Git::ref_stamp`]).
    stamp: Option<RefStamp>,
    at: Instant,
}

impl Looked {
    /// Whether the base certainly still names `commit`: the ref files are as they were
    /// and git was asked less than [`ASK_GIT_EVERY`] ago.
    fn current(&self, stamp: &Option<RefStamp>) -> bool {
        stamp.is_some() && *stamp == self.stamp && self.at.elapsed() < ASK_GIT_EVERY
    }
}

/// The repository's `[testbed]` at `commit`, when it has one that parses (a lane
/// reports one that does not, at its next claim).
fn bed_config(git: &Git, commit: &str) -> Option<BedConfig> {
    let text = git.file_at(commit, config::FILE).ok()??;
    config::parse(Path::new(config::FILE), &text).ok()?
}

/// Warms a template at `commit` (base) when none matches it (module invariants).
fn look(git: &Git, base: &str, commit: &str, stop: &AtomicBool, in_use: &dyn Fn() -> Vec<PathBuf>) {
    let Some(cfg) = bed_config(git, commit) else {
        return;
    };
    if cfg.warm.is_empty() {
        return;
    }
    let beds = Beds::of(git);
    let id = &commit[..commit.len().min(12)];
    let here = beds.list().0.into_iter().find(|t| t.commit == commit);
    if here.is_some_and(|t| t.state != "warming" || beds.busy(&t.id)) {
        return;
    }
    match beds.choose(git, &cfg, commit) {
        Ok(Some(c)) if c.matched == "exact" => return,
        Ok(_) => {}
        Err(_) => return,
    }
    tracing::info!(
        target: "spice", "warming a test bed at {id} ({base} in {}) in the background: no template \
         matches its {}",
        git.common_dir().display(),
        if cfg.key.is_empty() {
            "commit".to_string()
        } else {
            cfg.key.join(", ")
        }
    );
    let mut last = String::new();
    let mut keep = |l: &str| last = l.to_string();
    match beds.warm(git, &cfg, commit, &mut keep, stop) {
        Ok(t) => {
            tracing::info!(
                target: "spice", "test bed {} ready, warmed in {:.1}s",
                t.id, t.warm_seconds
            );
            if cfg.disk_budget.is_some() {
                match crate::bed::evict::gc(git, &cfg, &in_use()) {
                    Ok(ev) => {
                        for e in ev {
                            tracing::info!(target: "spice", "evicted {} {} ({})", e.kind, e.id, e.why);
                        }
                    }
                    Err(e) => tracing::warn!(target: "spice", "evicting test beds failed: {e}"),
                }
            }
        }
        Err(_) if stop.load(Ordering::SeqCst) => {}
        Err(e) => tracing::warn!(target: "spice", "{e} (last output: {last})"),
    }
}
