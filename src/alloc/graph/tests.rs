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

fn graph_of(prios: &[u8], edges: &[(usize, usize)]) -> (Vec<Option<Priority>>, Vec<Vec<usize>>) {
    let n = prios.len();
    let priority: Vec<Option<Priority>> = prios
        .iter()
        .map(|x| match x {
            0 => None,
            1 => p("L"),
            2 => p("M"),
            _ => p("H"),
        })
        .collect();
    let mut waits_on = vec![Vec::new(); n];
    for &(a, b) in edges {
        if a < n && b < n && !waits_on[a].contains(&b) {
            waits_on[a].push(b);
        }
    }
    (priority, waits_on)
}

#[test]
fn counts_come_out_of_many_blocks_and_planes() {
    // More targets than one word and counts needing many counter planes: a ladder of
    // 300 tasks where task i waits on i-1 and i-2.
    let n: usize = 300;
    let edges: Vec<(usize, usize)> = (1..n)
        .flat_map(|i| [(i, i - 1), (i, i.saturating_sub(2))])
        .collect();
    let (priority, waits_on) = graph_of(&vec![0; n], &edges);
    let shape = Shape::new(&priority, &waits_on);
    let all: Vec<usize> = (0..n).collect();
    let want: Vec<usize> = (0..n).map(|i| n - 1 - i).collect();
    assert_eq!(shape.releases(&all), want);
    // Blocks of one word (64 targets) each, forced: the same answer.
    let (comp, _) = components(&waits_on);
    let mut targets: Vec<u32> = all.iter().map(|&t| comp[t]).collect();
    targets.sort_unstable();
    let counts = release_counts(&shape.succ_at, &shape.succ, &shape.sizes, &targets, 8 * n);
    let by_comp: std::collections::HashMap<u32, u32> =
        targets.iter().copied().zip(counts).collect();
    for v in 0..n {
        assert_eq!(by_comp[&comp[v]] as usize, want[v]);
    }
}

proptest::proptest! {
    /// Counts asked for a few at a time, in any order, equal the naive definition, and
    /// asking again (from the kept table) gives the same.
    #[test]
    fn lazy_counts_match_the_naive_definition(
        prios in proptest::collection::vec(0u8..4, 1..70),
        edges in proptest::collection::vec((0usize..70, 0usize..70), 0..200),
        asks in proptest::collection::vec(proptest::collection::vec(0usize..70, 0..8), 1..6),
    ) {
        let (priority, waits_on) = graph_of(&prios, &edges);
        let n = priority.len();
        let (_, rel) = naive(&priority, &waits_on);
        let shape = Shape::new(&priority, &waits_on);
        for ask in &asks {
            let ask: Vec<usize> = ask.iter().map(|&t| t % n).collect();
            let got = shape.releases(&ask);
            let want: Vec<usize> = ask.iter().map(|&t| rel[t]).collect();
            proptest::prop_assert_eq!(got, want);
        }
        let all: Vec<usize> = (0..n).collect();
        proptest::prop_assert_eq!(shape.releases(&all), rel);
    }

    /// Where several dependents tie on the best priority, the one named is the oldest
    /// (lowest index) among those tied, whatever order the edges came in.
    #[test]
    fn inherited_from_names_the_oldest_of_tied_sources(
        prios in proptest::collection::vec(0u8..4, 1..40),
        edges in proptest::collection::vec((0usize..40, 0usize..40), 0..80),
    ) {
        let (priority, waits_on) = graph_of(&prios, &edges);
        let n = priority.len();
        let m = measure(&priority, &waits_on);
        let mut dependents = vec![Vec::new(); n];
        for (t, deps) in waits_on.iter().enumerate() {
            for &d in deps {
                if d != t { dependents[d].push(t); }
            }
        }
        for v in 0..n {
            let mut seen = HashSet::from([v]);
            let mut stack = vec![v];
            while let Some(x) = stack.pop() {
                for &y in &dependents[x] {
                    if seen.insert(y) { stack.push(y); }
                }
            }
            let want = if m.inherited[v] == priority[v] {
                v
            } else {
                *seen.iter().filter(|&&x| priority[x] == m.inherited[v]).min().unwrap()
            };
            proptest::prop_assert_eq!(m.inherited_from[v], want);
        }
    }
}
