//! Graph measures over the open tasks: inherited priority and downstream release.
//!
//! Edges run from a prerequisite to the task that waits on it. Both measures are
//! computed over the condensation of the graph (strongly connected components), with
//! components numbered in topological order: every prerequisite's component before
//! its dependents'. An acyclic graph (the store refuses cycles) is sorted by Kahn's
//! algorithm, one component per task; a graph read from elsewhere may hold a cycle,
//! and then Kosaraju (iterative, so deep chains cannot overflow the stack) finds the
//! components. Members of a cycle are never ready, and the measures stay defined.
//!
//! Inherited priority is one pass over the components, dependents first. Release
//! counts, the exact sizes of transitive-dependent sets, are the expensive part and
//! are computed only for the components asked for ([`Shape::releases`]), once each
//! (they are kept in the shape): for a block of up to 64·W target components, one
//! pass in topological order carries each component's set of target ancestors (W
//! words; rows no target reaches are never touched, and a row is written whole the
//! first time it is reached, so nothing is cleared), and a bit-sliced counter adds
//! each row in: the count of every target comes out of word-level operations, never
//! bit by bit. Memory stays about [`BLOCK_BYTES`] however large the graph; the cost
//! is O(E·K/64) word operations for K targets.

use crate::task::Priority;
use petgraph::graph::{DiGraph, NodeIndex};
use std::cmp::Ordering;
use std::sync::Mutex;

/// Upper bound on the bitset memory used per block of release counting.
pub const BLOCK_BYTES: usize = 16 << 20;

/// Not yet computed, in [`Shape`]'s release table.
const UNKNOWN: u32 = u32::MAX;

/// What the ranking needs per open task, by index.
pub struct Measures {
    /// The highest priority among the task and everything that transitively waits on it.
    pub inherited: Vec<Option<Priority>>,
    /// The task that priority comes from (the task itself when it is its own best).
    pub inherited_from: Vec<usize>,
    /// How many distinct open tasks transitively wait on the task.
    pub releases: Vec<usize>,
}

/// The shape-derived measures of one graph: the condensation, inherited priority for
/// every task, and release counts filled in on demand. Shared (`Arc`) by every caller
/// that ranks the same graph; the release table is behind a lock, so concurrent
/// callers compute each count once.
pub struct Shape {
    /// Component of each task; components are in topological order.
    comp: Vec<u32>,
    /// Members per component.
    sizes: Vec<u32>,
    /// Dependent components of each component (all later), as offsets into `succ`.
    succ_at: Vec<u32>,
    succ: Vec<u32>,
    pub inherited: Vec<Option<Priority>>,
    pub inherited_from: Vec<usize>,
    /// Release count per component (tasks in other components that wait on it), or
    /// [`UNKNOWN`].
    comp_releases: Mutex<Vec<u32>>,
}

/// `waits_on[i]` lists the prerequisites of task `i` (indices into the same slice).
pub fn measure(priority: &[Option<Priority>], waits_on: &[Vec<usize>]) -> Measures {
    let shape = Shape::new(priority, waits_on);
    let all: Vec<usize> = (0..priority.len()).collect();
    let releases = shape.releases(&all);
    Measures {
        inherited: shape.inherited,
        inherited_from: shape.inherited_from,
        releases,
    }
}

/// Better of two (priority, task index) pairs: higher priority, then the lower index.
fn better(a: (Option<Priority>, usize), b: (Option<Priority>, usize)) -> (Option<Priority>, usize) {
    match a.0.cmp(&b.0).then(b.1.cmp(&a.1)) {
        Ordering::Less => b,
        _ => a,
    }
}

impl Shape {
    pub fn new(priority: &[Option<Priority>], waits_on: &[Vec<usize>]) -> Shape {
        let n = priority.len();
        let (comp, ncomp) = components(waits_on);
        let mut sizes = vec![0u32; ncomp];
        for &c in &comp {
            sizes[c as usize] += 1;
        }
        // Component-level dependent lists, deduplicated, in CSR form.
        let mut pairs: Vec<(u32, u32)> = Vec::new();
        for (t, deps) in waits_on.iter().enumerate() {
            for &d in deps {
                if d < n && d != t && comp[d] != comp[t] {
                    pairs.push((comp[d], comp[t]));
                }
            }
        }
        pairs.sort_unstable();
        pairs.dedup();
        let mut succ_at = vec![0u32; ncomp + 1];
        for &(a, _) in &pairs {
            succ_at[a as usize + 1] += 1;
        }
        for c in 0..ncomp {
            succ_at[c + 1] += succ_at[c];
        }
        let succ: Vec<u32> = pairs.iter().map(|&(_, b)| b).collect();

        // Inherited priority: best over own members, then over dependents, last first.
        let mut best: Vec<(Option<Priority>, usize)> = vec![(None, usize::MAX); ncomp];
        for v in 0..n {
            let c = comp[v] as usize;
            best[c] = if best[c].1 == usize::MAX {
                (priority[v], v)
            } else {
                better(best[c], (priority[v], v))
            };
        }
        for c in (0..ncomp).rev() {
            let mut b = best[c];
            for &s in &succ[succ_at[c] as usize..succ_at[c + 1] as usize] {
                b = better(b, best[s as usize]);
            }
            best[c] = b;
        }
        let mut inherited = vec![None; n];
        let mut inherited_from = vec![0; n];
        for v in 0..n {
            let (p, from) = best[comp[v] as usize];
            inherited[v] = p;
            // A task's own priority wins ties, so "inherited from" only names another
            // task when that task really raised it.
            inherited_from[v] = if p == priority[v] { v } else { from };
        }
        Shape {
            comp,
            sizes,
            succ_at,
            succ,
            inherited,
            inherited_from,
            comp_releases: Mutex::new(vec![UNKNOWN; ncomp]),
        }
    }

    /// How many distinct tasks transitively wait on each of `tasks` (indices), computing
    /// only the counts not already known.
    pub fn releases(&self, tasks: &[usize]) -> Vec<usize> {
        let mut known = self.comp_releases.lock().unwrap_or_else(|e| e.into_inner());
        let mut missing: Vec<u32> = tasks
            .iter()
            .map(|&t| self.comp[t])
            .filter(|&c| known[c as usize] == UNKNOWN)
            .collect();
        missing.sort_unstable();
        missing.dedup();
        if !missing.is_empty() {
            let counts = release_counts(
                &self.succ_at,
                &self.succ,
                &self.sizes,
                &missing,
                BLOCK_BYTES,
            );
            for (c, r) in missing.iter().zip(counts) {
                known[*c as usize] = r;
            }
        }
        tasks
            .iter()
            .map(|&t| {
                let c = self.comp[t] as usize;
                known[c] as usize + self.sizes[c] as usize - 1
            })
            .collect()
    }
}

/// Component of every task, components numbered in topological order (prerequisites
/// first), and the number of components.
fn components(waits_on: &[Vec<usize>]) -> (Vec<u32>, usize) {
    let n = waits_on.len();
    let edge = |t: usize, d: usize| d < n && d != t;
    // Kahn: repeatedly take tasks whose prerequisites are all taken.
    let mut missing = vec![0u32; n];
    let mut dep_at = vec![0u32; n + 1];
    for (t, deps) in waits_on.iter().enumerate() {
        for &d in deps {
            if edge(t, d) {
                missing[t] += 1;
                dep_at[d + 1] += 1;
            }
        }
    }
    for i in 0..n {
        dep_at[i + 1] += dep_at[i];
    }
    let mut fill = dep_at.clone();
    let mut dependents = vec![0u32; dep_at[n] as usize];
    for (t, deps) in waits_on.iter().enumerate() {
        for &d in deps {
            if edge(t, d) {
                dependents[fill[d] as usize] = t as u32;
                fill[d] += 1;
            }
        }
    }
    let mut order: Vec<u32> = (0..n as u32)
        .filter(|&t| missing[t as usize] == 0)
        .collect();
    let mut head = 0;
    while head < order.len() {
        let d = order[head] as usize;
        head += 1;
        for &t in &dependents[dep_at[d] as usize..dep_at[d + 1] as usize] {
            missing[t as usize] -= 1;
            if missing[t as usize] == 0 {
                order.push(t);
            }
        }
    }
    let mut comp = vec![0u32; n];
    if order.len() == n {
        for (c, &t) in order.iter().enumerate() {
            comp[t as usize] = c as u32;
        }
        return (comp, n);
    }
    // A cycle: Kosaraju yields components dependents first, so number them backwards.
    let mut g: DiGraph<(), ()> = DiGraph::with_capacity(n, dependents.len());
    for _ in 0..n {
        g.add_node(());
    }
    for (t, deps) in waits_on.iter().enumerate() {
        for &d in deps {
            if edge(t, d) {
                g.add_edge(NodeIndex::new(d), NodeIndex::new(t), ());
            }
        }
    }
    let sccs = petgraph::algo::kosaraju_scc(&g);
    let m = sccs.len();
    for (i, members) in sccs.iter().enumerate() {
        for v in members {
            comp[v.index()] = (m - 1 - i) as u32;
        }
    }
    (comp, m)
}

/// For each of `targets` (distinct component indices, ascending), the number of tasks
/// in other components that transitively depend on it, with rows of at most
/// `block_bytes` in all.
fn release_counts(
    succ_at: &[u32],
    succ: &[u32],
    sizes: &[u32],
    targets: &[u32],
    block_bytes: usize,
) -> Vec<u32> {
    let m = sizes.len();
    let k = targets.len();
    let mut out = vec![0u32; k];
    if k == 0 {
        return out;
    }
    let total: u64 = sizes.iter().map(|&s| s as u64).sum();
    // Planes of the bit-sliced counter: enough bits for any count.
    let planes_n = (64 - total.leading_zeros() as usize).max(1);
    let words_total = k.div_ceil(64);
    let wb = (block_bytes / 8 / m.max(1)).clamp(1, words_total);
    let mut rows = vec![0u64; m * wb];
    // Which block last wrote each row (a row is valid only for its own block).
    let mut stamp = vec![u32::MAX; m];
    let mut planes = vec![0u64; planes_n * wb];
    let mut bit_of = vec![u32::MAX; m];
    for (b, first_word) in (0..words_total).step_by(wb).enumerate() {
        let w = wb.min(words_total - first_word);
        let lo = first_word * 64;
        let hi = (lo + w * 64).min(k);
        for (j, &c) in targets[lo..hi].iter().enumerate() {
            bit_of[c as usize] = j as u32;
        }
        planes.iter_mut().for_each(|x| *x = 0);
        let b = b as u32;
        // Targets are ascending and rows only flow to later components.
        for c in targets[lo] as usize..m {
            let is_target = bit_of[c] != u32::MAX;
            if stamp[c] != b {
                if !is_target {
                    continue;
                }
                rows[c * wb..c * wb + w].iter_mut().for_each(|x| *x = 0);
                stamp[c] = b;
            } else {
                // Row c holds the targets c depends on: c counts toward each of them.
                for _ in 0..sizes[c] {
                    add(&mut planes, planes_n, &rows[c * wb..c * wb + w]);
                }
            }
            if is_target {
                let j = bit_of[c] as usize;
                rows[c * wb + j / 64] |= 1u64 << (j % 64);
            }
            let (head, tail) = rows.split_at_mut((c + 1) * wb);
            let row = &head[c * wb..c * wb + w];
            for &s in &succ[succ_at[c] as usize..succ_at[c + 1] as usize] {
                let s = s as usize;
                let at = (s - c - 1) * wb;
                let dst = &mut tail[at..at + w];
                if stamp[s] == b {
                    dst.iter_mut().zip(row).for_each(|(a, x)| *a |= *x);
                } else {
                    dst.copy_from_slice(row);
                    stamp[s] = b;
                }
            }
        }
        for (j, &c) in targets[lo..hi].iter().enumerate() {
            let mut count = 0u64;
            for p in 0..planes_n {
                count |= ((planes[(j / 64) * planes_n + p] >> (j % 64)) & 1) << p;
            }
            out[lo + j] = count as u32;
            bit_of[c as usize] = u32::MAX;
        }
    }
    out
}

/// Adds one bit per column (`row`) into the bit-sliced counter `planes`: for word i
/// of the row, `planes[i * depth + p]` holds bit p of the counts of its 64 columns.
fn add(planes: &mut [u64], depth: usize, row: &[u64]) {
    for (x, counter) in row.iter().zip(planes.chunks_exact_mut(depth)) {
        let mut carry = *x;
        for p in counter {
            if carry == 0 {
                break;
            }
            let was = *p;
            *p = was ^ carry;
            carry &= was;
        }
    }
}

#[cfg(test)]
mod tests;
