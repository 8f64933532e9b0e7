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

fn size(b: u64) -> String {
    format!("{:.1} MiB", b as f64 / (1 << 20) as f64)
}

/// Evicts what must go for the repository's beds to fit its budget (module
/// invariants); `in_use` are the task worktrees whose beds live tasks use.
pub fn gc(git: &Git, cfg: &BedConfig, in_use: &[PathBuf]) -> Result<Vec<Evicted>> {
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
    let Some(budget) = cfg.disk_budget else {
        return Ok(evicted);
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
            Candidate::Template(t) if t.state == "ready" && !beds.busy(&t.id) => {
                beds.remove(git, t)?;
                Some(Evicted {
                    kind: "template",
                    id: t.id.clone(),
                    why,
                })
            }
            Candidate::Pooled(p) => {
                pool.remove(git, p)?;
                Some(Evicted {
                    kind: "pooled",
                    id: p.id.clone(),
                    why,
                })
            }
            Candidate::Template(_) => None,
        };
        match gone {
            Some(e) => {
                evicted.push(e);
                candidates.remove(i);
                real = total(&candidates)?;
            }
            None => i += 1,
        }
    }
    Ok(evicted)
}
