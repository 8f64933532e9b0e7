//! What a next-claim reads: the graph's generation, the claims, the claimant's last
//! cell and the clock in one read, and the ranking the store keeps for that
//! generation, so a claim need not read and rank the whole open graph
//! (`alloc::order` computes the ranking; the store only keeps its bytes).
//!
//! The graph's generation (`meta.graph`, schema 12) is moved by triggers on every
//! write to tasks, dependencies, tags and annotations that can change how the open
//! tasks rank, by any writer; claims never move it. A kept ranking is used only at
//! the generation it was made at, and is only ever a ranking: every claim re-checks
//! readiness inside its own transaction.

use super::snapshot::OPEN;
use super::tasks::list_ranked_tasks;
use super::Store;
use crate::clock::Micros;
use crate::error::Result;
use crate::task::Task;
use rusqlite::OptionalExtension;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

/// A claim on a task, with only what a ranking reads of it.
#[derive(Debug, Clone, PartialEq)]
pub struct LeanClaim {
    pub task_id: String,
    pub claimant: String,
    pub lease_until: Micros,
    pub project: Option<String>,
    pub phase: String,
}

/// Every claim, live or lapsed, by task id: what a next-claim ranks around. Shared
/// (`Arc`) between a store that keeps it up to date between claims (PostgreSQL reads
/// only what changed) and the ranking that reads it, so neither copies it per claim.
#[derive(Debug, Clone, Default)]
pub struct ClaimSet {
    by_task: HashMap<String, LeanClaim, xxhash_rust::xxh3::Xxh3Builder>,
}

impl ClaimSet {
    /// Adds `claim`, or replaces the claim on its task.
    pub fn insert(&mut self, claim: LeanClaim) {
        match self.by_task.get_mut(&claim.task_id) {
            Some(had) => *had = claim,
            None => {
                self.by_task.insert(claim.task_id.clone(), claim);
            }
        }
    }

    /// Whether the task with id `id` is claimed.
    pub fn contains(&self, id: &str) -> bool {
        self.by_task.contains_key(id)
    }

    pub fn iter(&self) -> impl Iterator<Item = &LeanClaim> {
        self.by_task.values()
    }

    pub fn len(&self) -> usize {
        self.by_task.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_task.is_empty()
    }
}

impl FromIterator<LeanClaim> for ClaimSet {
    fn from_iter<I: IntoIterator<Item = LeanClaim>>(iter: I) -> ClaimSet {
        let mut set = ClaimSet::default();
        for c in iter {
            set.insert(c);
        }
        set
    }
}

/// What a next-claim ranks from, read at one moment.
#[derive(Debug, Clone)]
pub struct ClaimView {
    /// The graph's generation (tasks, dependencies, tags, annotations; not claims).
    pub graph: i64,
    pub now: Micros,
    /// Every claim, live or lapsed.
    pub claims: Arc<ClaimSet>,
    /// The cell of the task the claimant last came to hold.
    pub last_cell: Option<(Option<String>, String)>,
    /// The ranking kept for `graph`, if the store has one and the caller does not
    /// (it said it has the ranking of that generation).
    pub kept: Option<Vec<u8>>,
}

/// How long keeping a ranking waits for the write lock: a claimer that cannot have
/// it at once leaves the keeping to another (the claim itself does not wait on it).
const KEEP_WAIT: Duration = Duration::from_millis(20);

impl Store {
    /// The claims, clock, graph generation and `claimant`'s last cell, in one read;
    /// with the kept ranking unless its generation is `have`.
    pub fn claim_view(&mut self, claimant: &str, have: Option<i64>) -> Result<ClaimView> {
        self.read("reading the claims", |tx, now| {
            let graph: i64 = tx
                .prepare_cached("SELECT value FROM meta WHERE key = 'graph'")?
                .query_row([], |r| r.get(0))?;
            let kept: Option<Vec<u8>> = if have == Some(graph) {
                None
            } else {
                tx.prepare_cached("SELECT data FROM rankings WHERE one = 1 AND graph = ?1")?
                    .query_row([graph], |r| r.get(0))
                    .optional()?
            };
            let mut st = tx.prepare_cached(
                "SELECT c.task_id, c.claimant, c.lease_until, t.project, t.phase
                 FROM claims c JOIN tasks t ON t.id = c.task_id",
            )?;
            let claims = st
                .query_map([], |r| {
                    Ok(LeanClaim {
                        task_id: r.get(0)?,
                        claimant: r.get(1)?,
                        lease_until: r.get(2)?,
                        project: r.get(3)?,
                        phase: r.get(4)?,
                    })
                })?
                .collect::<rusqlite::Result<ClaimSet>>()?;
            let claims = Arc::new(claims);
            let last_cell = super::claims::last_cell_in(tx, claimant)?;
            Ok(ClaimView {
                graph,
                now,
                claims,
                last_cell,
                kept,
            })
        })
    }

    /// The open tasks as a ranking reads them ([`Store::ranking_snapshot`]'s tasks),
    /// with the graph's generation they are at.
    pub fn ranking_graph(&mut self) -> Result<(i64, Vec<Task>)> {
        self.read("reading the task graph", |tx, _| {
            let graph: i64 = tx
                .prepare_cached("SELECT value FROM meta WHERE key = 'graph'")?
                .query_row([], |r| r.get(0))?;
            Ok((graph, list_ranked_tasks(tx, &OPEN)?))
        })
    }

    /// Keeps `data` as the ranking of generation `graph`, unless the graph has moved
    /// on since or the write lock is not free within [`KEEP_WAIT`]; says whether it
    /// was kept. A ranking is a cache: not keeping one loses nothing.
    pub fn keep_ranking(&mut self, graph: i64, data: &[u8]) -> Result<bool> {
        if self.read_only.is_some() {
            return Ok(false);
        }
        self.set_busy_timeout(KEEP_WAIT)?;
        let kept = self.write("keeping a ranking", |tx, _| {
            let now: i64 = tx
                .prepare_cached("SELECT value FROM meta WHERE key = 'graph'")?
                .query_row([], |r| r.get(0))?;
            if now != graph {
                return Ok(false);
            }
            tx.prepare_cached(
                "INSERT INTO rankings (one, graph, data) VALUES (1, ?1, ?2)
                 ON CONFLICT (one) DO UPDATE SET graph = excluded.graph, data = excluded.data",
            )?
            .execute(rusqlite::params![graph, data])?;
            Ok(true)
        });
        self.set_busy_timeout(super::BUSY_TIMEOUT)?;
        Ok(kept.unwrap_or(false))
    }
}
