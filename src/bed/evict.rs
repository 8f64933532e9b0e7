//! Keeping every bed of a repository within `[testbed] disk_budget`: templates,
//! pooled worktrees and the beds of task worktrees in use, measured together in real
//! blocks (shared extents counted once, `bed::usage`).
//!
//! Invariants:
//! - Failed warms go first (they are never used); then ready templates and pooled
//!   worktrees, least recently used first, one at a time, measuring again after each,
//!   until everything fits or nothing more may go.
//! - Never evicted: a template being warmed or seeded from (its lock is held), and
//!   the bed of a task worktree in use (the caller names those; they only count).
//! - A collection that cannot meet the budget says why ([`Outcome::standing`]): what
//!   is left over it is only what may not go.

use super::config::BedConfig;
use super::pool::{Pool, Pooled};
use super::template::{self, Beds, Template};
use crate::error::Result;
use crate::git::Git;
use serde::Serialize;
use std::path::{Path, PathBuf};

/// One bed evicted, and why.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Evicted {
    /// `template` or `pooled`.
    pub kind: &'static str,
    pub id: String,
    pub why: String,
}

/// Every bed path under each of `roots` (templates' trees, worktrees).
pub fn bed_paths(cfg: &BedConfig, roots: &[PathBuf]) -> Vec<PathBuf> {
    roots
        .iter()
        .flat_map(|r| cfg.seed_paths().into_iter().map(move |p| r.join(p.path)))
        .collect()
}

/// The real disk of the beds under `roots`, shared extents counted once.
pub fn real_of(cfg: &BedConfig, roots: &[PathBuf]) -> Result<u64> {
    let paths = bed_paths(cfg, roots);
    let refs: Vec<&Path> = paths.iter().map(PathBuf::as_path).collect();
    Ok(template::total_usage(&refs)?.real)
}

enum Candidate {
    Template(Template),
    Pooled(Pooled),
}

impl Candidate {
    fn used(&self) -> i64 {
        let at = match self {
            Candidate::Template(t) => &t.last_used,
            Candidate::Pooled(p) => &p.pooled_at,
        };
        chrono::DateTime::parse_from_rfc3339(at)
            .map(|d| d.timestamp_micros())
            .unwrap_or(0)
    }

    fn root(&self) -> PathBuf {
        match self {
            Candidate::Template(t) => t.tree.clone(),
            Candidate::Pooled(p) => p.path.clone(),
        }
    }
}

/// `b` bytes in the largest binary unit that leaves a whole part (`512 B`, `1.5 MiB`).
pub fn size(b: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = b as f64;
    let mut i = 0;
    while v >= 1024.0 && i < UNITS.len() - 1 {
        v /= 1024.0;
        i += 1;
    }
    if i == 0 {
        format!("{b} B")
    } else {
        format!("{v:.1} {}", UNITS[i])
    }
}

/// What a collection evicted, and where the beds stand after it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Outcome {
    pub evicted: Vec<Evicted>,
    /// `[testbed] disk_budget`; without one only failed warms are evicted.
    pub budget: Option<u64>,
    /// The real disk of every bed after the evictions (measured only under a budget).
    pub real: u64,
    /// Of which the beds of the task worktrees in use, which never go (measured only
    /// when the beds stay over the budget).
    pub in_use: u64,
    pub in_use_worktrees: usize,
    /// The templates kept over the budget, each with why it may not go.
    pub kept: Vec<Kept>,
}

/// A template over the budget that may not go, and why.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Kept {
    /// `template` or `pooled`.
    pub kind: &'static str,
    pub id: String,
    pub why: String,
}

impl Outcome {
    /// Why the beds stand as they do, in one line: no budget, within it, or over it
    /// with what is left and why none of it may go.
    pub fn standing(&self) -> String {
        let Some(budget) = self.budget else {
            return "[testbed] sets no disk_budget, so only failed warms are evicted".into();
        };
        let (over, real, budget) = (self.real > budget, size(self.real), size(budget));
        if !over {
            return format!("all beds use {real} of real disk, within the budget of {budget}");
        }
        let mut left = Vec::new();
        if self.in_use_worktrees > 0 {
            left.push(format!(
                "the beds of {} task worktree(s) in use ({})",
                self.in_use_worktrees,
                size(self.in_use)
            ));
        }
        left.extend(
            self.kept
                .iter()
                .map(|k| format!("{} {} ({})", k.kind, k.id, k.why)),
        );
        if left.is_empty() {
            left.push("nothing".into());
        }
        format!(
            "all beds use {real} of real disk, over the budget of {budget}, and none of \
             what is left may go: {}",
            left.join(", ")
        )
    }
}

/// Evicts what must go for the repository's beds to fit its budget (module
/// invariants); `in_use` are the task worktrees whose beds live tasks use.
pub fn gc(git: &Git, cfg: &BedConfig, in_use: &[PathBuf]) -> Result<Vec<Evicted>> {
    Ok(evict(git, cfg, in_use)?.evicted)
}

/// [`gc`], and where the beds stand after it.
pub fn evict(git: &Git, cfg: &BedConfig, in_use: &[PathBuf]) -> Result<Outcome> {
    let beds = Beds::of(git);
    let pool = Pool::of(git);
    let mut evicted = Vec::new();
    let mut candidates = Vec::new();
    for t in beds.list().0 {
        if t.state == "failed" && !beds.busy(&t.id) {
            beds.remove(git, &t)?;
            evicted.push(Evicted {
                kind: "template",
                id: t.id,
                why: "failed warm".into(),
            });
        } else if t.state != "failed" {
            candidates.push(Candidate::Template(t));
        }
    }
    let mut outcome = Outcome {
        evicted,
        budget: cfg.disk_budget,
        real: 0,
        in_use: 0,
        in_use_worktrees: in_use.len(),
        kept: Vec::new(),
    };
    let Some(budget) = cfg.disk_budget else {
        return Ok(outcome);
    };
    candidates.extend(pool.list().into_iter().map(Candidate::Pooled));
    candidates.sort_by_key(Candidate::used);
    let total = |cs: &[Candidate]| -> Result<u64> {
        let roots: Vec<PathBuf> = cs
            .iter()
            .map(Candidate::root)
            .chain(in_use.iter().cloned())
            .collect();
        real_of(cfg, &roots)
    };
    let mut i = 0;
    let mut real = total(&candidates)?;
    while i < candidates.len() && real > budget {
        let why = format!(
            "all beds used {} of real disk, over the budget of {}",
            size(real),
            size(budget)
        );
        let gone = match &candidates[i] {
            // A removal refused (`bed::owned`: the path no longer resolves under the
            // beds' root) keeps that bed, says why, and goes on with the next.
            Candidate::Template(t) if t.state == "ready" && !beds.busy(&t.id) => {
                match beds.remove(git, t) {
                    Ok(()) => Some(Evicted {
                        kind: "template",
                        id: t.id.clone(),
                        why,
                    }),
                    Err(e) => {
                        outcome.kept.push(Kept {
                            kind: "template",
                            id: t.id.clone(),
                            why: e.to_string(),
                        });
                        None
                    }
                }
            }
            Candidate::Pooled(p) => match pool.remove(git, p) {
                Ok(()) => Some(Evicted {
                    kind: "pooled",
                    id: p.id.clone(),
                    why,
                }),
                Err(e) => {
                    outcome.kept.push(Kept {
                        kind: "pooled",
                        id: p.id.clone(),
                        why: e.to_string(),
                    });
                    None
                }
            },
            Candidate::Template(t) => {
                outcome.kept.push(Kept {
                    kind: "template",
                    id: t.id.clone(),
                    why: if beds.busy(&t.id) {
                        "being warmed or seeded from".into()
                    } else {
                        format!("{}, not ready", t.state)
                    },
                });
                None
            }
        };
        match gone {
            Some(e) => {
                outcome.evicted.push(e);
                candidates.remove(i);
                real = total(&candidates)?;
            }
            None => i += 1,
        }
    }
    outcome.real = real;
    if real > budget && !in_use.is_empty() {
        outcome.in_use = real_of(cfg, in_use)?;
    }
    Ok(outcome)
}
