//! Graph measures over the open tasks: inherited priority and downstream release.
//!
//! Edges run from a prerequisite to the task that waits on it. Both measures are
//! computed over the condensation of the graph (strongly connected components, found
//! iteratively by Kosaraju so deep chains cannot overflow the stack), visiting
//! components so that every dependent is finished before its prerequisites. The store
//! refuses cycles, but a graph read from elsewhere may hold one; members of a cycle
//! are never ready, and the measures stay defined.
//!
//! Release counts are exact sizes of transitive-dependent sets, computed with bitsets
//! in blocks of target columns so memory stays bounded (about [`BLOCK_BYTES`]) however
//! large the graph: cost is O(V·E/64) word operations.

use crate::task::Priority;
use petgraph::graph::{DiGraph, NodeIndex};

/// Upper bound on the bitset memory used per block of release counting.
pub const BLOCK_BYTES: usize = 64 << 20;

/// What the ranking needs per open task, by index.
pub struct Measures {
    /// The highest priority among the task and everything that transitively waits on it.
    pub inherited: Vec<Option<Priority>>,
    /// The task that priority comes from (the task itself when it is its own best).
    pub inherited_from: Vec<usize>,
    /// How many distinct open tasks transitively wait on the task.
    pub releases: Vec<usize>,
}

/// `waits_on[i]` lists the prerequisites of task `i` (indices into the same slice).
pub fn measure(priority: &[Option<Priority>], waits_on: &[Vec<usize>]) -> Measures {
    let n = priority.len();
    let mut g: DiGraph<(), ()> = DiGraph::with_capacity(n, 0);
    for _ in 0..n {
        g.add_node(());
    }
    for (t, deps) in waits_on.iter().enumerate() {
        for &d in deps {
            if d < n && d != t {
                g.add_edge(NodeIndex::new(d), NodeIndex::new(t), ());
            }
        }
    }
    // Kosaraju yields components in reverse topological order: dependents first.
    let sccs = petgraph::algo::kosaraju_scc(&g);
    let mut comp = vec![0usize; n];
    for (c, members) in sccs.iter().enumerate() {
        for v in members {
            comp[v.index()] = c;
        }
    }
    // Component-level successor lists (dependents), deduplicated.
    let mut succ: Vec<Vec<usize>> = vec![Vec::new(); sccs.len()];
    for e in g.raw_edges() {
        let (a, b) = (comp[e.source().index()], comp[e.target().index()]);
        if a != b {
            succ[a].push(b);
        }
    }
    for s in &mut succ {
        s.sort_unstable();
        s.dedup();
    }

    // Inherited priority: best over own members, then over dependents' components.
    let mut best: Vec<(Option<Priority>, usize)> = Vec::with_capacity(sccs.len());
    for (c, members) in sccs.iter().enumerate() {
        let mut b = members
            .iter()
            .map(|v| (priority[v.index()], v.index()))
            .max_by(|x, y| x.0.cmp(&y.0).then(y.1.cmp(&x.1)))
            .unwrap_or((None, 0));
        for &s in &succ[c] {
            if best[s].0 > b.0 {
                b = best[s];
            }
        }
        best.push(b);
    }
    let mut inherited = vec![None; n];
    let mut inherited_from = vec![0; n];
    for v in 0..n {
        let (p, from) = best[comp[v]];
        // A task's own priority wins ties, so "inherited from" only names another
        // task when that task really raised it.
        if p == priority[v] {
            inherited[v] = p;
            inherited_from[v] = v;
        } else {
            inherited[v] = p;
            inherited_from[v] = from;
        }
    }

    let sizes: Vec<usize> = sccs.iter().map(Vec::len).collect();
    let comp_releases = release_counts(&succ, &sizes);
    let releases = (0..n)
        .map(|v| comp_releases[comp[v]] + sizes[comp[v]] - 1)
        .collect();
    Measures {
        inherited,
        inherited_from,
        releases,
    }
}

/// For each component (in reverse topological order, `succ` pointing at earlier
/// ones), the number of tasks in components reachable from it, itself excluded.
fn release_counts(succ: &[Vec<usize>], sizes: &[usize]) -> Vec<usize> {
    let m = succ.len();
    let mut counts = vec![0usize; m];
    if m == 0 {
        return counts;
    }
    let words_total = m.div_ceil(64);
    // Columns per block: as many 64-bit words per row as the memory bound allows.
    let words_per_block = (BLOCK_BYTES / 8 / m).clamp(1, words_total);
    let mut rows = vec![0u64; m * words_per_block];
    for first_word in (0..words_total).step_by(words_per_block) {
        let w = words_per_block.min(words_total - first_word);
        let lo = first_word * 64;
        let hi = ((first_word + w) * 64).min(m);
        rows.iter_mut().for_each(|x| *x = 0);
        for c in 0..m {
            // Every successor s < c (already complete): row[c] |= row[s] | {s}.
            let (done, rest) = rows.split_at_mut(c * words_per_block);
            let row = &mut rest[..w];
            for &s in &succ[c] {
                let srow = &done[s * words_per_block..s * words_per_block + w];
                for (a, b) in row.iter_mut().zip(srow) {
                    *a |= *b;
                }
                if (lo..hi).contains(&s) {
                    let bit = s - lo;
                    row[bit / 64] |= 1u64 << (bit % 64);
                }
            }
            let mut total = 0usize;
            for (k, word) in row.iter().enumerate() {
                let mut x = *word;
                while x != 0 {
                    let bit = x.trailing_zeros() as usize;
                    total += sizes[lo + k * 64 + bit];
                    x &= x - 1;
                }
            }
            counts[c] += total;
        }
    }
    counts
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    fn p(s: &str) -> Option<Priority> {
        Priority::parse(s).unwrap()
    }

    /// The obvious definition, for comparison: search from every node.
    fn naive(
        priority: &[Option<Priority>],
        waits_on: &[Vec<usize>],
    ) -> (Vec<Option<Priority>>, Vec<usize>) {
        let n = priority.len();
        let mut dependents = vec![Vec::new(); n];
        for (t, deps) in waits_on.iter().enumerate() {
            for &d in deps {
                if d != t {
                    dependents[d].push(t);
                }
            }
        }
        let mut inh = Vec::new();
        let mut rel = Vec::new();
        for v in 0..n {
            let mut seen = HashSet::new();
            let mut stack = vec![v];
            while let Some(x) = stack.pop() {
                for &y in &dependents[x] {
                    if seen.insert(y) {
                        stack.push(y);
                    }
                }
            }
            seen.remove(&v);
            inh.push(
                seen.iter()
                    .map(|&x| priority[x])
                    .chain([priority[v]])
                    .max()
                    .flatten(),
            );
            rel.push(seen.len());
        }
        (inh, rel)
    }

    #[test]
    fn chain_inherits_from_the_far_end() {
        // 0 <- 1 <- 2 (2 waits on 1 waits on 0); 2 is H.
        let m = measure(&[p("L"), None, p("H")], &[vec![], vec![0], vec![1]]);
        assert_eq!(m.inherited, vec![p("H"), p("H"), p("H")]);
        assert_eq!(m.inherited_from, vec![2, 2, 2]);
        assert_eq!(m.releases, vec![2, 1, 0]);
    }

    #[test]
    fn diamond_counts_shared_dependents_once() {
        // 3 waits on 1 and 2; both wait on 0.
        let m = measure(
            &[None, p("M"), None, p("L")],
            &[vec![], vec![0], vec![0], vec![1, 2]],
        );
        assert_eq!(m.releases, vec![3, 1, 1, 0]);
        assert_eq!(m.inherited[0], p("M"));
        assert_eq!(m.inherited_from[0], 1);
        assert_eq!(m.inherited[2], p("L"));
    }

    #[test]
    fn cycles_do_not_hang() {
        let m = measure(&[None, p("H"), None], &[vec![2], vec![0], vec![1]]);
        assert_eq!(m.inherited, vec![p("H"); 3]);
        assert_eq!(m.releases, vec![2, 2, 2]);
    }

    #[test]
    fn deep_chain_does_not_overflow_the_stack() {
        let n = 30_000;
        let prio: Vec<_> = (0..n)
            .map(|i| if i == n - 1 { p("H") } else { None })
            .collect();
        let deps: Vec<Vec<usize>> = (0..n)
            .map(|i| if i == 0 { vec![] } else { vec![i - 1] })
            .collect();
        let m = measure(&prio, &deps);
        assert_eq!(m.inherited[0], p("H"));
        assert_eq!(m.releases[0], n - 1);
    }

    proptest::proptest! {
        #[test]
        fn matches_the_naive_definition(
            prios in proptest::collection::vec(0u8..4, 1..60),
            edges in proptest::collection::vec((0usize..60, 0usize..60), 0..150),
        ) {
            let n = prios.len();
            let priority: Vec<Option<Priority>> = prios.iter().map(|x| match x {
                0 => None, 1 => p("L"), 2 => p("M"), _ => p("H"),
            }).collect();
            let mut waits_on = vec![Vec::new(); n];
            for (a, b) in edges {
                if a < n && b < n && !waits_on[a].contains(&b) {
                    waits_on[a].push(b);
                }
            }
            let m = measure(&priority, &waits_on);
            let (inh, rel) = naive(&priority, &waits_on);
            proptest::prop_assert_eq!(&m.inherited, &inh);
            for v in 0..n {
                // Members of a cycle reach themselves; the naive search excludes v
                // only once, so compare on what both define identically.
                proptest::prop_assert_eq!(m.releases[v], rel[v]);
                proptest::prop_assert_eq!(priority[m.inherited_from[v]].max(priority[v]), m.inherited[v]);
            }
        }
    }
}
