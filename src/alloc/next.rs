//! Allocation against the store: rank a snapshot, then claim optimistically.
//!
//! Ranking runs outside the write lock (it reads one snapshot); each claim attempt is
//! its own short `BEGIN IMMEDIATE` transaction that re-checks readiness. A claimant that
//! loses a race moves on to the next candidate, and when a whole ranking has been lost
//! it ranks afresh, so concurrent claimers never take the same task and never stop
//! while ready work remains.

use super::{rank, Candidate, Cell, Filter, Input};
use crate::error::Result;
use crate::store::{Claim, ClaimRequest, Snapshot, Store};
use std::collections::{HashMap, HashSet};

/// Bound on re-rankings, so a pathological churn of releases cannot spin forever.
const MAX_ROUNDS: usize = 64;

/// Builds the ranking input for `claimant` from a snapshot.
pub fn input<'a>(
    snap: &'a Snapshot,
    claimant: Option<&str>,
    last_cell: Option<Cell>,
    filter: Filter,
) -> Input<'a> {
    let cell_of: HashMap<&str, Cell> = snap
        .tasks
        .iter()
        .map(|t| (t.id.as_str(), (t.project.clone(), t.phase.clone())))
        .collect();
    let mut peer_cells: HashMap<Cell, usize> = HashMap::new();
    for c in &snap.claims {
        if c.is_live(snap.now) && Some(c.claimant.as_str()) != claimant {
            if let Some(cell) = cell_of.get(c.task_id.as_str()) {
                *peer_cells.entry(cell.clone()).or_default() += 1;
            }
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
    let last = match claimant {
        Some(c) => store.last_cell(c)?,
        None => None,
    };
    let snap = store.snapshot()?;
    let ranking = rank(&input(&snap, claimant, last, filter.clone()));
    Ok((snap, ranking))
}

/// Claims the best ready task for `req.claimant`, or returns `None` when nothing
/// matching `filter` is ready.
pub fn claim_next(store: &mut Store, req: &ClaimRequest, filter: &Filter) -> Result<Option<Claim>> {
    for _ in 0..MAX_ROUNDS {
        let (snap, ranking) = ranked(store, Some(&req.claimant), filter)?;
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
