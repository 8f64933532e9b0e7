//! Allocation against the store: rank a snapshot, then claim optimistically.
//!
//! Ranking runs outside the write lock (it reads one snapshot); each claim attempt is
//! its own short `BEGIN IMMEDIATE` transaction that re-checks readiness. A claimant that
//! loses a race moves on to the next candidate, and when a whole ranking has been lost
//! it ranks afresh, so concurrent claimers never take the same task and never stop
//! while ready work remains.

use super::{rank_top, Candidate, Cell, Filter, Input};
use crate::error::Result;
use crate::store::{Claim, ClaimRequest, Snapshot, Store};
use std::collections::{HashMap, HashSet};

/// Bound on re-rankings, so a pathological churn of releases cannot spin forever.
const MAX_ROUNDS: usize = 64;

/// How many candidates a claim ranks before trying them (more are ranked when a whole
/// tier of inherited priority ties, and afresh when all of them were lost).
const CLAIM_BATCH: usize = 8;

/// Builds the ranking input for `claimant` from a snapshot.
pub fn input<'a>(
    snap: &'a Snapshot,
    claimant: Option<&str>,
    last_cell: Option<Cell>,
    filter: Filter,
) -> Input<'a> {
    // Only the claimed tasks' cells are needed: index those, not the whole graph.
    let peers: Vec<&str> = snap
        .claims
        .iter()
        .filter(|c| c.is_live(snap.now) && Some(c.claimant.as_str()) != claimant)
        .map(|c| c.task_id.as_str())
        .collect();
    let wanted: HashSet<&str> = peers.iter().copied().collect();
    let cell_of: HashMap<&str, Cell> = snap
        .tasks
        .iter()
        .filter(|t| wanted.contains(t.id.as_str()))
        .map(|t| (t.id.as_str(), (t.project.clone(), t.phase.clone())))
        .collect();
    let mut peer_cells: HashMap<Cell, usize> = HashMap::new();
    for id in peers {
        if let Some(cell) = cell_of.get(id) {
            *peer_cells.entry(cell.clone()).or_default() += 1;
        }
    }
    Input {
        tasks: &snap.tasks,
        claimed: snap
            .claims
            .iter()
            .map(|c| c.task_id.as_str())
            .collect::<HashSet<_>>(),
        peer_cells,
        last_cell,
        filter,
        now: snap.now,
    }
}

/// Ranks the ready tasks for `claimant` (best first).
pub fn ranked(
    store: &mut Store,
    claimant: Option<&str>,
    filter: &Filter,
) -> Result<(Snapshot, Vec<Candidate>)> {
    ranked_top(store, claimant, filter, usize::MAX)
}

/// The first `limit` (at least) of [`ranked`]'s order, computing release counts only
/// where they decide it ([`rank_top`]).
pub fn ranked_top(
    store: &mut Store,
    claimant: Option<&str>,
    filter: &Filter,
    limit: usize,
) -> Result<(Snapshot, Vec<Candidate>)> {
    let last = match claimant {
        Some(c) => store.last_cell(c)?,
        None => None,
    };
    let snap = store.snapshot()?;
    let ranking = rank_top(&input(&snap, claimant, last, filter.clone()), limit);
    Ok((snap, ranking))
}

/// Claims the best ready task for `req.claimant`, or returns `None` when nothing
/// matching `filter` is ready.
pub fn claim_next(store: &mut Store, req: &ClaimRequest, filter: &Filter) -> Result<Option<Claim>> {
    for _ in 0..MAX_ROUNDS {
        let (snap, ranking) = ranked_top(store, Some(&req.claimant), filter, CLAIM_BATCH)?;
        if ranking.is_empty() {
            return Ok(None);
        }
        for c in &ranking {
            if let Some(claim) = store.claim_if_ready(&snap.tasks[c.index].id, req, filter)? {
                return Ok(Some(claim));
            }
        }
    }
    Ok(None)
}
