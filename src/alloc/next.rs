//! Allocation against the store: rank, then claim optimistically.
//!
//! A claim ranks outside the write lock, from the order kept for the graph's
//! generation ([`order`]) and one read of what changes between claims (the claims, the
//! clock, the claimant's last cell): the whole graph is read and measured only when it
//! changed since the order was kept. `task next` without `--claim` ranks a full
//! snapshot (it shows the figures and titles). The claim is one short
//! `BEGIN IMMEDIATE` transaction that re-checks the readiness of the ranked candidates
//! in order and takes the first still ready. A claimant that lost the race for the best
//! moves on to the next within the same transaction, and when a whole ranking has been
//! lost it ranks afresh, so concurrent claimers never take the same task and never
//! stop while ready work remains.

use super::order::{self, Moment, Order};
use super::{rank_top, Candidate, Cell, Filter, Input};
use crate::error::Result;
use crate::store::{Authority, Claim, ClaimRequest, Snapshot};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

/// Bound on re-rankings, so a pathological churn of releases cannot spin forever.
const MAX_ROUNDS: usize = 64;

/// How many candidates a claim ranks and then tries, best first, in one transaction
/// (ranking afresh when all of them were lost): enough that concurrent claimers
/// racing for the same best candidates rarely run out.
const CLAIM_BATCH: usize = 64;

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
    store: &mut dyn Authority,
    claimant: Option<&str>,
    filter: &Filter,
) -> Result<(Snapshot, Vec<Candidate>)> {
    ranked_top(store, claimant, filter, usize::MAX)
}

/// The first `limit` (at least) of [`ranked`]'s order, computing release counts only
/// where they decide it ([`rank_top`]).
pub fn ranked_top(
    store: &mut dyn Authority,
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

/// The ids of [`ranked_top`]'s first `limit` for a claim, ranked from the order kept
/// for the graph's generation ([`order`]): this process's, else the store's, else
/// ranked afresh from the open graph and kept in both. What changes between claims
/// (the claims, the clock, the claimant's last cell) is read each time.
fn claim_candidates(
    store: &mut dyn Authority,
    claimant: &str,
    filter: &Filter,
    limit: usize,
) -> Result<Vec<String>> {
    let key = store.describe();
    let have = order::latest(&key);
    let view = store.claim_view(claimant, have.as_ref().map(|h| h.0))?;
    let ranking = match have.filter(|h| h.0 == view.graph) {
        Some((_, o)) => o,
        None => match view.kept.as_deref().and_then(Order::decode) {
            Some(o) => {
                let o = Arc::new(o);
                order::keep(&key, view.graph, o.clone());
                o
            }
            None => {
                let (graph, tasks) = store.ranking_graph()?;
                let o = Arc::new(Order::of(&tasks));
                // A cache: a store that declines to keep it (busy) costs nothing.
                let _ = store.keep_ranking(graph, &o.encode());
                order::keep(&key, graph, o.clone());
                o
            }
        },
    };
    // Few cells hold claims: a list searched in place, no hashing per claim.
    let mut peers: Vec<((Option<&str>, &str), usize)> = Vec::new();
    for c in view.claims.iter() {
        if c.lease_until > view.now && c.claimant != claimant {
            let cell = (c.project.as_deref(), c.phase.as_str());
            match peers.iter_mut().find(|(k, _)| *k == cell) {
                Some((_, n)) => *n += 1,
                None => peers.push((cell, 1)),
            }
        }
    }
    let at = Moment {
        claimed: view.claims.as_ref(),
        peers: &peers,
        last: view
            .last_cell
            .as_ref()
            .map(|(p, ph)| (p.as_deref(), ph.as_str())),
        filter,
        now: view.now,
    };
    Ok(ranking
        .top(&at, limit)
        .into_iter()
        .map(str::to_string)
        .collect())
}

/// Claims the best ready task for `req.claimant`, or returns `None` when nothing
/// matching `filter` is ready.
pub fn claim_next(
    store: &mut dyn Authority,
    req: &ClaimRequest,
    filter: &Filter,
) -> Result<Option<Claim>> {
    for _ in 0..MAX_ROUNDS {
        let ranked = claim_candidates(store, &req.claimant, filter, CLAIM_BATCH)?;
        if ranked.is_empty() {
            return Ok(None);
        }
        let ids: Vec<&str> = ranked.iter().map(String::as_str).collect();
        if let Some(claim) = store.claim_first_ready(&ids, req, filter)? {
            return Ok(Some(claim));
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::alloc::shape;
    use crate::clock::ManualClock;
    use crate::store::{Store, DEFAULT_LEASE};
    use crate::task::{NewTask, Priority};
    use std::sync::Arc;

    fn open(dir: &std::path::Path) -> Store {
        Store::open_dir(dir, Arc::new(ManualClock::new(1_790_000_000_000_000))).unwrap()
    }

    fn add(s: &mut Store, title: &str, prio: Option<Priority>, deps: &[String]) -> String {
        s.add_task(
            NewTask {
                title: title.into(),
                priority: prio,
                ..Default::default()
            },
            deps,
        )
        .unwrap()
        .id
    }

    fn req(who: &str) -> ClaimRequest {
        ClaimRequest {
            claimant: who.into(),
            lane: None,
            worktree: None,
            lease: DEFAULT_LEASE,
        }
    }

    fn top(s: &mut Store) -> Vec<String> {
        let (snap, ranking) = ranked_top(s, None, &Filter::default(), 10).unwrap();
        ranking
            .iter()
            .map(|c| snap.tasks[c.index].id.clone())
            .collect()
    }

    /// A claim does not change the graph's shape: the ranking after it reuses the
    /// shape (and its release counts) instead of measuring the graph again.
    #[test]
    fn a_claim_reuses_the_shape() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = open(dir.path());
        let a = add(&mut s, "a", None, &[]);
        let b = add(&mut s, "b", None, &[]);
        add(&mut s, "c", Some(Priority::H), std::slice::from_ref(&b));
        let before = shape::of(&s.snapshot().unwrap().tasks);
        let claim = claim_next(&mut s, &req("me"), &Filter::default())
            .unwrap()
            .unwrap();
        assert_eq!(claim.task_id, b, "b inherits H from c");
        let after = shape::of(&s.snapshot().unwrap().tasks);
        assert!(
            Arc::ptr_eq(&before, &after),
            "a claim re-measured the graph"
        );
        assert_eq!(top(&mut s), vec![a]);
    }

    /// Another connection (another process, to SQLite) changes the graph: the next
    /// ranking here sees the new shape, not the cached one.
    #[test]
    fn a_graph_change_elsewhere_is_seen_by_the_next_ranking() {
        let dir = tempfile::tempdir().unwrap();
        let mut here = open(dir.path());
        let mut there = open(dir.path());
        let a = add(&mut here, "a", None, &[]);
        let b = add(&mut here, "b", None, &[]);
        assert_eq!(top(&mut here), vec![a.clone(), b.clone()]);
        // b now releases a high-priority task, and a waits on b.
        add(&mut there, "c", Some(Priority::H), std::slice::from_ref(&b));
        there
            .change_deps(&a, std::slice::from_ref(&b), &[])
            .unwrap();
        let (snap, ranking) = ranked_top(&mut here, None, &Filter::default(), 10).unwrap();
        let ids: Vec<&str> = ranking
            .iter()
            .map(|c| snap.tasks[c.index].id.as_str())
            .collect();
        assert_eq!(ids, [b.as_str()]);
        assert_eq!(ranking[0].releases, 2);
        assert_eq!(ranking[0].inherited_priority, Some(Priority::H));
    }

    /// The ranking kept between claims (this process's and the store's) is the
    /// graph's: a claim does not move the graph's generation, a change made through
    /// another connection does, and the next claim ranks the new graph.
    #[test]
    fn a_kept_ranking_is_used_only_at_its_generation() {
        let dir = tempfile::tempdir().unwrap();
        let mut here = open(dir.path());
        let mut there = open(dir.path());
        let a = add(&mut here, "a", None, &[]);
        let b = add(&mut here, "b", None, &[]);
        let c = add(&mut here, "c", None, &[]);
        let first = claim_next(&mut here, &req("me"), &Filter::default())
            .unwrap()
            .unwrap();
        assert_eq!(first.task_id, a, "the oldest of equals");
        let view = here.claim_view("me", None).unwrap();
        assert!(view.kept.is_some(), "the first claim kept its ranking");
        let kept = view.graph;
        assert_eq!(here.claim_view("me", Some(kept)).unwrap().kept, None);
        // c now releases a high-priority task: it ranks first.
        add(&mut there, "d", Some(Priority::H), std::slice::from_ref(&c));
        assert_ne!(there.claim_view("me", None).unwrap().graph, kept);
        let second = claim_next(&mut here, &req("me"), &Filter::default())
            .unwrap()
            .unwrap();
        assert_eq!(second.task_id, c, "ranked from the old graph");
        assert_eq!(
            here.claim_view("me", None).unwrap().graph,
            there.claim_view("you", None).unwrap().graph,
            "a claim moved the graph's generation"
        );
        let third = claim_next(&mut there, &req("you"), &Filter::default())
            .unwrap()
            .unwrap();
        assert_eq!(third.task_id, b);
    }

    /// A claim racing a graph change: the ranking was read before another connection
    /// made the best candidate wait on a new task; the claim, re-checking readiness in
    /// its own transaction, does not take it, and claim_next takes what is ready now.
    #[test]
    fn a_claim_racing_a_graph_change_never_takes_a_task_no_longer_ready() {
        let dir = tempfile::tempdir().unwrap();
        let mut here = open(dir.path());
        let mut there = open(dir.path());
        let a = add(&mut here, "a", Some(Priority::H), &[]);
        let b = add(&mut here, "b", None, &[]);
        let (snap, ranking) = ranked_top(&mut here, Some("me"), &Filter::default(), 10).unwrap();
        assert_eq!(snap.tasks[ranking[0].index].id, a);
        let blocker = add(&mut there, "blocker", None, &[]);
        there
            .change_deps(&a, std::slice::from_ref(&blocker), &[])
            .unwrap();
        let stale = here
            .claim_if_ready(&a, &req("me"), &Filter::default())
            .unwrap();
        assert!(stale.is_none(), "claimed a task that waits on another");
        let stale = here
            .claim_first_ready(&[a.as_str()], &req("me"), &Filter::default())
            .unwrap();
        assert!(stale.is_none(), "claimed a task that waits on another");
        let claim = claim_next(&mut here, &req("me"), &Filter::default())
            .unwrap()
            .unwrap();
        assert_eq!(claim.task_id, blocker, "the blocker inherits H from a");
        assert_ne!(claim.task_id, b);
    }
}
