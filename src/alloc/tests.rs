use super::*;
use crate::task::{Priority, Status};
use proptest::prelude::*;

const NOW: Micros = 1_800_000_000_000_000;

fn task(id: &str, project: &str, phase: &str, prio: Option<Priority>, deps: &[&str]) -> Task {
    Task {
        id: id.into(),
        uuid: String::new(),
        title: format!("task {id}"),
        body: String::new(),
        project: Some(project.into()),
        phase: phase.into(),
        priority: prio,
        due: None,
        wait: None,
        tags: vec![],
        status: Status::Pending,
        entry: NOW - 1_000_000,
        end: None,
        modified: NOW,
        depends: deps.iter().map(|d| d.to_string()).collect(),
        annotations: vec![],
    }
}

fn input(tasks: &[Task]) -> Input<'_> {
    Input {
        tasks,
        claimed: HashSet::new(),
        peer_cells: HashMap::new(),
        last_cell: None,
        filter: Filter::default(),
        now: NOW,
    }
}

fn order(tasks: &[Task], inp: &Input<'_>) -> Vec<String> {
    rank(inp)
        .iter()
        .map(|c| tasks[c.index].id.clone())
        .collect()
}

#[test]
fn low_prerequisite_of_high_task_ranks_first() {
    let tasks = vec![
        task("a", "p", "todo", Some(Priority::M), &[]),
        task("b", "p", "todo", Some(Priority::L), &[]),
        task("c", "p", "todo", Some(Priority::H), &["b"]),
    ];
    let ranked = rank(&input(&tasks));
    let ids: Vec<_> = ranked.iter().map(|c| tasks[c.index].id.as_str()).collect();
    assert_eq!(ids, ["b", "a"], "c is blocked; b inherits H from c");
    assert_eq!(ranked[0].inherited_priority, Some(Priority::H));
    assert_eq!(ranked[0].inherited_from, "c");
    let why = explain(&tasks, &ranked[0], &ranked[1]);
    assert!(
        why.contains("inherited priority") && why.contains("p-c"),
        "{why}"
    );
}

#[test]
fn release_count_breaks_priority_ties() {
    let tasks = vec![
        task("a", "p", "todo", None, &[]),
        task("b", "p", "todo", None, &[]),
        task("c", "p", "todo", None, &["b"]),
        task("d", "p", "todo", None, &["c"]),
    ];
    let inp = input(&tasks);
    assert_eq!(order(&tasks, &inp), ["b", "a"]);
    let r = rank(&inp);
    assert_eq!(r[0].releases, 2);
    assert!(explain(&tasks, &r[0], &r[1]).contains("downstream release"));
}

#[test]
fn finished_and_claimed_tasks_are_not_ready() {
    // "gone" is not among the open tasks: a dependency on it no longer blocks.
    let tasks = vec![
        task("a", "p", "todo", None, &["gone"]),
        task("b", "p", "todo", Some(Priority::H), &[]),
    ];
    let mut inp = input(&tasks);
    inp.claimed.insert("b");
    assert_eq!(order(&tasks, &inp), ["a"]);
}

#[test]
fn waiting_tasks_wake_at_their_wait_date() {
    let mut t = task("a", "p", "todo", None, &[]);
    t.status = Status::Waiting;
    t.wait = Some(NOW + 1);
    let tasks = vec![t];
    assert!(order(&tasks, &input(&tasks)).is_empty());
    let mut inp = input(&tasks);
    inp.now = NOW + 1;
    assert_eq!(order(&tasks, &inp), ["a"]);
}

#[test]
fn filter_limits_candidates_but_not_inheritance() {
    let tasks = vec![
        task("a", "infra", "todo", None, &[]),
        task("b", "app", "todo", Some(Priority::H), &["a"]),
        task("c", "infra", "review", Some(Priority::M), &[]),
    ];
    let mut inp = input(&tasks);
    inp.filter.projects = vec!["infra".into()];
    let r = rank(&inp);
    assert_eq!(tasks[r[0].index].id, "a");
    assert_eq!(r[0].inherited_priority, Some(Priority::H));
    inp.filter.phases = vec!["review".into()];
    assert_eq!(order(&tasks, &inp), ["c"]);
}

#[test]
fn urgency_then_spread_then_locality() {
    let mut due = task("due", "p", "todo", None, &[]);
    due.due = Some(NOW);
    let tasks = vec![
        due,
        task("x", "q", "todo", None, &[]),
        task("y", "r", "todo", None, &[]),
    ];
    let mut inp = input(&tasks);
    assert_eq!(order(&tasks, &inp)[0], "due");
    // Without the due date, x and y tie; peers in q push x down.
    let tasks = vec![
        task("x", "q", "todo", None, &[]),
        task("y", "r", "todo", None, &[]),
    ];
    inp = input(&tasks);
    inp.peer_cells.insert((Some("q".into()), "todo".into()), 2);
    assert_eq!(order(&tasks, &inp), ["y", "x"]);
    let r = rank(&inp);
    assert!(explain(&tasks, &r[0], &r[1]).contains("peer spread"));
    // With no peers, locality decides.
    inp.peer_cells.clear();
    inp.last_cell = Some((Some("r".into()), "todo".into()));
    assert_eq!(order(&tasks, &inp), ["y", "x"]);
    let r = rank(&inp);
    assert!(explain(&tasks, &r[0], &r[1]).contains("locality"));
    inp.last_cell = None;
    assert_eq!(
        order(&tasks, &inp),
        ["x", "y"],
        "a full tie falls to the older id"
    );
}

fn arb_tasks() -> impl Strategy<Value = Vec<Task>> {
    (1usize..40).prop_flat_map(|n| {
        proptest::collection::vec(
            (
                0u8..4,
                proptest::collection::vec(0usize..n, 0..4),
                0u8..3,
                0u8..2,
                any::<bool>(),
            ),
            n,
        )
        .prop_map(move |specs| {
            specs
                .into_iter()
                .enumerate()
                .map(|(i, (p, deps, proj, phase, has_due))| {
                    let prio = [
                        None,
                        Some(Priority::L),
                        Some(Priority::M),
                        Some(Priority::H),
                    ][p as usize];
                    let deps: Vec<String> = deps.iter().map(|d| format!("t{d:02}")).collect();
                    let refs: Vec<&str> = deps.iter().map(String::as_str).collect();
                    let mut t = task(
                        &format!("t{i:02}"),
                        &format!("p{proj}"),
                        ["todo", "review"][phase as usize],
                        prio,
                        &refs,
                    );
                    if has_due {
                        t.due = Some(NOW + (i as i64) * 86_400_000_000);
                    }
                    t
                })
                .collect()
        })
    })
}

proptest! {
    /// Any graph, cycles and self-loops included: no panic, only ready tasks, sorted.
    #[test]
    fn rank_is_sound_on_any_graph(tasks in arb_tasks(), claimed in proptest::collection::vec(0usize..40, 0..5)) {
        let mut inp = input(&tasks);
        for c in &claimed {
            if let Some(t) = tasks.get(*c) {
                inp.claimed.insert(t.id.as_str());
            }
        }
        let ranked = rank(&inp);
        let ids: HashSet<&str> = tasks.iter().map(|t| t.id.as_str()).collect();
        for c in &ranked {
            let t = &tasks[c.index];
            prop_assert!(!inp.claimed.contains(t.id.as_str()));
            prop_assert!(t.depends.iter().all(|d| !ids.contains(d.as_str())));
            prop_assert!(c.inherited_priority >= t.priority);
        }
        for w in ranked.windows(2) {
            prop_assert!(compare(&w[0], &w[1]) != Ordering::Greater);
            let _ = explain(&tasks, &w[0], &w[1]);
        }
    }
}

/// The ranking by its definition: every measure by search from each task, then one
/// sort on the five criteria and the id.
fn naive_rank(inp: &Input<'_>) -> Vec<(String, Option<Priority>, usize)> {
    let tasks = inp.tasks;
    let ids: HashMap<&str, usize> = tasks
        .iter()
        .enumerate()
        .map(|(i, t)| (t.id.as_str(), i))
        .collect();
    let mut dependents = vec![Vec::new(); tasks.len()];
    for (i, t) in tasks.iter().enumerate() {
        for d in &t.depends {
            if let Some(&j) = ids.get(d.as_str()) {
                if j != i {
                    dependents[j].push(i);
                }
            }
        }
    }
    let mut out: Vec<Candidate> = Vec::new();
    for (i, t) in tasks.iter().enumerate() {
        let blocked = t.depends.iter().any(|d| ids.contains_key(d.as_str()));
        let awake = t.wait.is_none_or(|w| w <= inp.now);
        if blocked || !awake || inp.claimed.contains(t.id.as_str()) || !inp.filter.admits(t) {
            continue;
        }
        let mut seen = HashSet::new();
        let mut stack = vec![i];
        while let Some(x) = stack.pop() {
            for &y in &dependents[x] {
                if seen.insert(y) {
                    stack.push(y);
                }
            }
        }
        seen.remove(&i);
        let cell = (t.project.clone(), t.phase.clone());
        out.push(Candidate {
            index: i,
            inherited_priority: seen
                .iter()
                .map(|&x| tasks[x].priority)
                .chain([t.priority])
                .max()
                .flatten(),
            inherited_from: String::new(),
            releases: seen.len(),
            urgency: urgency::urgency(t, inp.now),
            peers: inp.peer_cells.get(&cell).copied().unwrap_or(0),
            local: inp.last_cell.as_ref() == Some(&cell),
        });
    }
    out.sort_by(|a, b| compare(a, b).then_with(|| tasks[a.index].id.cmp(&tasks[b.index].id)));
    out.iter()
        .map(|c| (tasks[c.index].id.clone(), c.inherited_priority, c.releases))
        .collect()
}

proptest! {
    /// The lazy ranking (release counts only for the tiers it places) gives the naive
    /// model's order, ties on priority and release included, for the whole ranking and
    /// for any prefix of it.
    #[test]
    fn rank_matches_the_naive_model(
        tasks in arb_tasks(),
        claimed in proptest::collection::vec(0usize..40, 0..5),
        peers in proptest::collection::vec((0u8..3, 0u8..2, 1usize..3), 0..3),
        last in proptest::option::of((0u8..3, 0u8..2)),
        limit in 1usize..12,
    ) {
        let mut inp = input(&tasks);
        for c in &claimed {
            if let Some(t) = tasks.get(*c) {
                inp.claimed.insert(t.id.as_str());
            }
        }
        let cell = |p: u8, ph: u8| (Some(format!("p{p}")), ["todo", "review"][ph as usize].to_string());
        for (p, ph, n) in peers {
            inp.peer_cells.insert(cell(p, ph), n);
        }
        inp.last_cell = last.map(|(p, ph)| cell(p, ph));
        let want = naive_rank(&inp);
        let got: Vec<_> = rank(&inp)
            .iter()
            .map(|c| (tasks[c.index].id.clone(), c.inherited_priority, c.releases))
            .collect();
        prop_assert_eq!(&got, &want);
        let top: Vec<_> = rank_top(&inp, limit)
            .iter()
            .map(|c| (tasks[c.index].id.clone(), c.inherited_priority, c.releases))
            .collect();
        prop_assert!(top.len() >= limit.min(want.len()));
        prop_assert_eq!(&top[..], &want[..top.len()]);
    }
}

proptest! {
    /// The order kept between claims ranks as `rank_top` does, at any moment after it
    /// was made, for any claims, peers, last cell, filter and limit; and it reads back
    /// from its bytes unchanged.
    #[test]
    fn the_kept_order_ranks_as_rank_top(
        tasks in arb_tasks(),
        extra in proptest::collection::vec((0u8..4, 0u8..3, any::<bool>(), 0i64..30), 40),
        claimed in proptest::collection::vec(0usize..40, 0..8),
        peers in proptest::collection::vec((0u8..3, 0u8..2, 1usize..3), 0..3),
        last in proptest::option::of((0u8..3, 0u8..2)),
        projects in proptest::collection::vec(0u8..3, 0..2),
        phases in proptest::collection::vec(0u8..2, 0..2),
        later in 0i64..40,
        limit in 1usize..12,
    ) {
        let day = 86_400_000_000i64;
        let mut tasks = tasks;
        for (t, (tags, notes, waits, age)) in tasks.iter_mut().zip(extra) {
            t.tags = ["next", "a", "b"].iter().take(tags as usize).map(|s| s.to_string()).collect();
            t.annotations = (0..notes)
                .map(|i| crate::task::Annotation { entry: NOW, description: format!("n{i}") })
                .collect();
            if waits {
                t.wait = Some(NOW + age * day / 2);
            }
            t.entry = NOW - age * 13 * day;
        }
        let kept = order::Order::of(&tasks);
        let kept = order::Order::decode(&kept.encode()).expect("its own bytes");
        prop_assert_eq!(&kept, &order::Order::of(&tasks));
        let mut inp = input(&tasks);
        inp.now = NOW + later * day / 3;
        for c in &claimed {
            if let Some(t) = tasks.get(*c) {
                inp.claimed.insert(t.id.as_str());
            }
        }
        let cell = |p: u8, ph: u8| (Some(format!("p{p}")), ["todo", "review"][ph as usize].to_string());
        for (p, ph, n) in peers {
            inp.peer_cells.insert(cell(p, ph), n);
        }
        inp.last_cell = last.map(|(p, ph)| cell(p, ph));
        inp.filter = Filter {
            projects: projects.iter().map(|p| format!("p{p}")).collect(),
            phases: phases.iter().map(|p| ["todo", "review"][*p as usize].to_string()).collect(),
        };
        let want: Vec<&str> = rank_top(&inp, limit)
            .iter()
            .map(|c| tasks[c.index].id.as_str())
            .collect();
        let peers: Vec<((Option<&str>, &str), usize)> = inp
            .peer_cells
            .iter()
            .map(|((p, ph), n)| ((p.as_deref(), ph.as_str()), *n))
            .collect();
        let at = order::Moment {
            claimed: &inp.claimed,
            peers: &peers,
            last: inp.last_cell.as_ref().map(|(p, ph)| (p.as_deref(), ph.as_str())),
            filter: &inp.filter,
            now: inp.now,
        };
        prop_assert_eq!(kept.top(&at, limit), want);
    }
}
