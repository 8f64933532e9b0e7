//! What a next-claim reads of the claims (`Authority::claim_view`) on a long-lived
//! connection, against what a new connection reads, after every kind of change to the
//! claims made through another connection: taken, renewed, moved to another cell,
//! released, lapsed and taken over, passed to a successor, completed, deleted. On
//! PostgreSQL a long-lived connection reads only the claims written since its last
//! read; these are the writes that must still show. PostgreSQL only: a claim
//! committed late by a transaction that began before others that committed first.

use crate::common;
use common::clocked::{both, postgres, Fleet, HOUR};
use spice::alloc::Filter;
use spice::clock::Micros;
use spice::store::{Authority, ClaimRequest, Holder, Takeover, TaskUpdate};
use spice::task::NewTask;
use std::time::Duration;

both!(a_long_lived_view_sees_every_change_to_the_claims);

type Seen = Vec<(String, String, Micros, Option<String>, String)>;

/// The claims as `a` reads them for a next-claim, in task order.
fn seen(a: &mut dyn Authority) -> Seen {
    let mut v: Seen = a
        .claim_view("viewer", None)
        .unwrap()
        .claims
        .iter()
        .map(|c| {
            let c = c.clone();
            (c.task_id, c.claimant, c.lease_until, c.project, c.phase)
        })
        .collect();
    v.sort();
    v
}

/// The long-lived connection reads what a new one reads.
#[track_caller]
fn same(f: &Fleet, long: &mut dyn Authority, step: &str) -> Seen {
    let fresh = seen(f.authority().as_mut());
    assert_eq!(seen(long), fresh, "after {step}");
    fresh
}

fn req(who: &str, lease: Duration) -> ClaimRequest {
    ClaimRequest {
        claimant: who.into(),
        lane: None,
        worktree: None,
        lease,
    }
}

/// `n` ready tasks; their ids.
fn add(a: &mut dyn Authority, n: usize) -> Vec<String> {
    (0..n)
        .map(|i| {
            let t = NewTask {
                title: format!("t{i}"),
                ..Default::default()
            };
            a.add_task(t, &[]).unwrap().id
        })
        .collect()
}

fn a_long_lived_view_sees_every_change_to_the_claims(f: &Fleet) {
    let mut long = f.authority();
    let mut other = f.authority();
    let ids = add(other.as_mut(), 6);
    assert!(same(f, long.as_mut(), "nothing claimed").is_empty());

    let a = other.claim(&ids[0], &req("one", HOUR)).unwrap();
    let all: Vec<&str> = ids.iter().map(String::as_str).collect();
    let b = other
        .claim_first_ready(&all, &req("two", HOUR), &Filter::default())
        .unwrap()
        .unwrap();
    assert_eq!(same(f, long.as_mut(), "two claims").len(), 2);

    let one = Holder::fenced("one", a.fence);
    let renewed = other.renew(&a.task_id, &one, None, 2 * HOUR).unwrap();
    let now = same(f, long.as_mut(), "a renewal");
    assert!(now.iter().any(|c| c.2 == renewed.lease_until), "{now:?}");

    other
        .modify(
            &b.task_id,
            &TaskUpdate {
                project: Some(Some("elsewhere".into())),
                ..Default::default()
            },
        )
        .unwrap();
    let now = same(f, long.as_mut(), "a claimed task moved to another project");
    assert!(now.iter().any(|c| c.3.as_deref() == Some("elsewhere")));

    other.release(&a.task_id, &one).unwrap();
    assert_eq!(same(f, long.as_mut(), "a release").len(), 1);

    // A claim lapses and is taken over; then passed to a successor.
    let short = other
        .claim(&ids[2], &req("brief", Duration::from_millis(200)))
        .unwrap();
    same(f, long.as_mut(), "a short claim");
    f.pass(other.as_mut(), short.lease_until);
    same(f, long.as_mut(), "its lapse");
    let taken = other
        .takeover(
            &short.task_id,
            &Takeover {
                stale_fence: short.fence,
                claimant: "heir".into(),
                lane: None,
                worktree: None,
                lease: HOUR,
                force: false,
            },
        )
        .unwrap();
    let now = same(f, long.as_mut(), "a takeover");
    assert!(now.iter().any(|c| c.1 == "heir"), "{now:?}");
    let passed = other
        .renew(
            &taken.task_id,
            &Holder::fenced("heir", taken.fence),
            Some("successor"),
            HOUR,
        )
        .unwrap();
    let now = same(f, long.as_mut(), "a successor");
    assert!(now.iter().any(|c| c.1 == "successor"), "{now:?}");

    other
        .done(
            &passed.task_id,
            Some(&Holder::fenced("successor", passed.fence)),
        )
        .unwrap();
    same(f, long.as_mut(), "a claimed task done");
    let d = other.claim(&ids[3], &req("three", HOUR)).unwrap();
    same(f, long.as_mut(), "another claim");
    other
        .delete(&d.task_id, Some(&Holder::fenced("three", d.fence)))
        .unwrap();
    let now = same(f, long.as_mut(), "a claimed task deleted");
    assert_eq!(now.len(), 1, "{now:?}");
}

/// A claim written by a transaction that began before another claimer's, and committed
/// after it: a reader between the two commits sees the later claim only, and must
/// still see the earlier one once it commits (a reader that resumed after the newest
/// write it saw would not).
#[test]
#[ignore = "needs PostgreSQL (SPICE_TEST_POSTGRES)"]
fn a_claim_committed_late_is_still_seen() {
    let Some(f) = postgres("a_claim_committed_late_is_still_seen") else {
        return;
    };
    let mut long = f.authority();
    let mut other = f.authority();
    let ids = add(other.as_mut(), 3);
    assert!(seen(long.as_mut()).is_empty());
    let mut slow = f.db.as_ref().unwrap().client();
    let mut tx = slow.transaction().unwrap();
    tx.execute(
        "INSERT INTO claims (task_id, claimant, fence, lease_until, claimed_at, renewed_at)
           SELECT $1, 'slow', nextval('fences'), spice_now() + 3600000000, spice_now(),
                  spice_now()",
        &[&ids[0]],
    )
    .unwrap();
    assert!(seen(long.as_mut()).is_empty(), "an uncommitted claim seen");
    other.claim(&ids[1], &req("quick", HOUR)).unwrap();
    let now = seen(long.as_mut());
    assert_eq!(now.len(), 1, "{now:?}");
    assert_eq!(now[0].1, "quick");
    tx.commit().unwrap();
    let now = seen(long.as_mut());
    let mut who: Vec<&str> = now.iter().map(|c| c.1.as_str()).collect();
    who.sort();
    assert_eq!(
        who,
        ["quick", "slow"],
        "the late claim is not seen: {now:?}"
    );
    assert_eq!(seen(long.as_mut()), seen(f.authority().as_mut()));
}

both!(a_ranking_is_kept_only_for_the_graph_it_ranks);

/// The ranking a claimer keeps for the graph's generation is what the next claimer
/// reads at that generation, and only then: a ranking of a generation the graph moved
/// on from is not kept.
fn a_ranking_is_kept_only_for_the_graph_it_ranks(f: &Fleet) {
    let mut a = f.authority();
    let mut b = f.authority();
    a.add_task(
        NewTask {
            title: "one".into(),
            ..Default::default()
        },
        &[],
    )
    .unwrap();
    let graph = a.claim_view("x", None).unwrap().graph;
    assert_eq!(b.claim_view("x", None).unwrap().kept, None);
    assert!(a.keep_ranking(graph, b"ranked").unwrap());
    let view = b.claim_view("x", None).unwrap();
    assert_eq!(view.kept.as_deref(), Some(&b"ranked"[..]));
    assert_eq!(
        b.claim_view("x", Some(graph)).unwrap().kept,
        None,
        "asked for again"
    );
    a.add_task(
        NewTask {
            title: "two".into(),
            ..Default::default()
        },
        &[],
    )
    .unwrap();
    assert!(
        !b.keep_ranking(graph, b"stale").unwrap(),
        "a stale ranking kept"
    );
    let now = b.claim_view("x", None).unwrap();
    assert_ne!(now.graph, graph);
    assert_eq!(now.kept, None);
}

/// Keeping a ranking does not wait for another connection keeping one: it is a cache.
#[test]
#[ignore = "needs PostgreSQL (SPICE_TEST_POSTGRES)"]
fn keeping_a_ranking_does_not_wait_for_another() {
    let Some(f) = postgres("keeping_a_ranking_does_not_wait_for_another") else {
        return;
    };
    let mut a = f.authority();
    let graph = a.claim_view("x", None).unwrap().graph;
    let mut other = f.db.as_ref().unwrap().client();
    let mut tx = other.transaction().unwrap();
    tx.execute("SELECT 1 FROM spice_rankings FOR UPDATE", &[])
        .unwrap();
    let (done, kept) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = done.send(a.keep_ranking(graph, b"ranked").unwrap());
    });
    let kept = kept
        .recv_timeout(Duration::from_secs(20))
        .expect("keeping a ranking waited for another connection's lock");
    assert!(!kept);
    tx.rollback().unwrap();
    let mut b = f.authority();
    assert!(b.keep_ranking(graph, b"ranked").unwrap());
    assert!(!b.keep_ranking(graph, b"again").unwrap(), "kept twice");
}
