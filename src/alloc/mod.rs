//! The allocator: which ready task a claimant should take next.
//!
//! Ready = open (pending or waiting) and past its wait date if it has one, every dependency finished, no
//! claim on it (a lapsed lease still holds the task until it is taken over), and inside
//! the caller's project/phase filter. Ready tasks are ranked by, in order:
//! 1. inherited priority: the highest priority among the task and every open task that
//!    transitively waits on it (over the whole graph, not just the filter);
//! 2. downstream release: how many open tasks transitively wait on it;
//! 3. urgency ([`urgency`]), higher first;
//! 4. peer spread: fewer live claims by other claimants in its (project, phase) cell;
//! 5. locality: the cell of the claimant's last claimed task first;
//!
//! and finally the older id, so the order is total and deterministic.

pub mod graph;
pub mod next;
pub mod order;
pub mod shape;
pub mod urgency;

use crate::clock::Micros;
use crate::task::{priority_str, Priority, Task};
use serde::Serialize;
use std::cmp::Ordering;
use std::collections::{HashMap, HashSet};

/// A (project, phase) cell.
pub type Cell = (Option<String>, String);

pub use crate::store::vocab::Filter;

/// Everything the ranking looks at, gathered by the caller from the store.
pub struct Input<'a> {
    /// Every open (pending or waiting) task.
    pub tasks: &'a [Task],
    /// Ids of tasks under any claim, live or lapsed.
    pub claimed: HashSet<&'a str>,
    /// Live claims held by claimants other than the caller, per cell.
    pub peer_cells: HashMap<Cell, usize>,
    /// The cell of the caller's last claimed task.
    pub last_cell: Option<Cell>,
    pub filter: Filter,
    pub now: Micros,
}

/// One ranked ready task with the figures that placed it.
#[derive(Debug, Clone, Serialize)]
pub struct Candidate {
    /// Index into [`Input::tasks`].
    #[serde(skip)]
    pub index: usize,
    pub inherited_priority: Option<Priority>,
    /// The task whose priority this one inherits (its own id when not raised).
    pub inherited_from: String,
    pub releases: usize,
    pub urgency: f64,
    pub peers: usize,
    pub local: bool,
}

/// The graph measures of `tasks` (inherited priority, release counts) and, for each
/// task, the indices of the tasks it waits on. Only tasks in the slice count: a
/// snapshot holds the open ones, so finished prerequisites no longer block or inherit.
/// Computes every release count; [`rank`] computes only those it needs.
pub fn measure(tasks: &[Task]) -> (Vec<Vec<usize>>, graph::Measures) {
    let g = shape::of(tasks);
    let all: Vec<usize> = (0..tasks.len()).collect();
    let releases = g.shape.releases(&all);
    let m = graph::Measures {
        inherited: g.shape.inherited.clone(),
        inherited_from: g.shape.inherited_from.clone(),
        releases,
    };
    (g.waits_on.clone(), m)
}

/// Ranks the ready tasks, best first.
pub fn rank(input: &Input<'_>) -> Vec<Candidate> {
    rank_top(input, usize::MAX)
}

/// The first `limit` of [`rank`]'s order (all of it when fewer are ready), computing
/// release counts only for the candidates that tie on inherited priority with one of
/// those: whole tiers of inherited priority are measured, best first, until `limit`
/// candidates are placed; of the last tier only the best are ordered and returned.
/// The shape-derived measures come from [`shape::of`], shared while the graph's
/// shape is unchanged.
pub fn rank_top(input: &Input<'_>, limit: usize) -> Vec<Candidate> {
    let tasks = input.tasks;
    let g = shape::of(tasks);
    let m = &g.shape;
    let mut ready: Vec<usize> = (0..tasks.len())
        .filter(|&i| {
            let t = &tasks[i];
            // Taskwarrior turns "waiting" into "pending" with a future wait date on
            // import, so the wait date decides, whatever the status says.
            let awake = t.status.is_open() && t.wait.is_none_or(|w| w <= input.now);
            awake
                && g.waits_on[i].is_empty()
                && !input.claimed.contains(t.id.as_str())
                && input.filter.admits(t)
        })
        .collect();
    ready.sort_by(|&a, &b| m.inherited[b].cmp(&m.inherited[a]).then(a.cmp(&b)));
    // Cells borrowed from the tasks, so that placing a candidate allocates nothing.
    let peers: HashMap<(Option<&str>, &str), usize> = input
        .peer_cells
        .iter()
        .map(|((p, ph), n)| ((p.as_deref(), ph.as_str()), *n))
        .collect();
    let last = input
        .last_cell
        .as_ref()
        .map(|(p, ph)| (p.as_deref(), ph.as_str()));
    let mut out: Vec<Candidate> = Vec::new();
    for tier in ready.chunk_by(|&a, &b| m.inherited[a] == m.inherited[b]) {
        let wanted = limit.saturating_sub(out.len());
        if wanted == 0 {
            break;
        }
        let releases = m.releases(tier);
        let mut placed: Vec<Candidate> = tier
            .iter()
            .zip(releases)
            .map(|(&i, releases)| {
                let t = &tasks[i];
                let cell = (t.project.as_deref(), t.phase.as_str());
                Candidate {
                    index: i,
                    inherited_priority: m.inherited[i],
                    // Filled in for the candidates returned.
                    inherited_from: String::new(),
                    releases,
                    urgency: urgency::urgency(t, input.now),
                    peers: peers.get(&cell).copied().unwrap_or(0),
                    local: last == Some(cell),
                }
            })
            .collect();
        let order = |a: &Candidate, b: &Candidate| {
            compare(a, b).then_with(|| tasks[a.index].id.cmp(&tasks[b.index].id))
        };
        if placed.len() > wanted {
            placed.select_nth_unstable_by(wanted - 1, order);
            placed.truncate(wanted);
        }
        placed.sort_by(order);
        for c in &mut placed {
            c.inherited_from = tasks[m.inherited_from[c.index]].id.clone();
        }
        out.extend(placed);
    }
    out
}

/// The ranking order on the five criteria (without the final id tie-break).
fn compare(a: &Candidate, b: &Candidate) -> Ordering {
    b.inherited_priority
        .cmp(&a.inherited_priority)
        .then(b.releases.cmp(&a.releases))
        .then(b.urgency.total_cmp(&a.urgency))
        .then(a.peers.cmp(&b.peers))
        .then(b.local.cmp(&a.local))
}

/// Says in words why `a` ranks above `b`.
pub fn explain(tasks: &[Task], a: &Candidate, b: &Candidate) -> String {
    let (ta, tb) = (&tasks[a.index], &tasks[b.index]);
    let (ha, hb) = (ta.handle(), tb.handle());
    let source = |c: &Candidate, t: &Task| {
        if c.inherited_from == t.id {
            "its own".to_string()
        } else {
            let from = tasks.iter().find(|x| x.id == c.inherited_from);
            format!(
                "inherited from {}, which waits on it",
                from.map(Task::handle)
                    .unwrap_or_else(|| c.inherited_from.clone())
            )
        }
    };
    if a.inherited_priority != b.inherited_priority {
        return format!(
            "{ha} ranks above {hb} on inherited priority: {} ({}) beats {} ({})",
            priority_str(a.inherited_priority),
            source(a, ta),
            priority_str(b.inherited_priority),
            source(b, tb)
        );
    }
    let same = format!(
        "both have inherited priority {}",
        priority_str(a.inherited_priority)
    );
    if a.releases != b.releases {
        return format!(
            "{ha} ranks above {hb} on downstream release: {same}, but {} task(s) wait on {ha} and {} on {hb}",
            a.releases, b.releases
        );
    }
    let same = format!("{same} and release {} task(s)", a.releases);
    if a.urgency != b.urgency {
        return format!(
            "{ha} ranks above {hb} on urgency: {same}, but urgency {:.1} beats {:.1}",
            a.urgency, b.urgency
        );
    }
    let same = format!("{same}, with urgency {:.1}", a.urgency);
    if a.peers != b.peers {
        return format!(
            "{ha} ranks above {hb} on peer spread: {same}, but other claimants hold {} live claim(s) in its cell and {} in {hb}'s",
            a.peers, b.peers
        );
    }
    if a.local != b.local {
        return format!(
            "{ha} ranks above {hb} on locality: {same}, but it is in the cell of the claimant's last task"
        );
    }
    format!(
        "{ha} ranks above {hb} only by age: they tie on every criterion ({same}) and {ha} is older"
    )
}

#[cfg(test)]
mod tests;
