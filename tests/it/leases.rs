//! Lease rules with an injectable clock: expiry, takeover by fence, renewal to a
//! successor, and fenced writes after a claim is lost. Time only moves when told.

use spice::clock::ManualClock;
use spice::store::{ClaimRequest, Holder, Store, Takeover};
use spice::task::NewTask;
use spice::Error;
use std::sync::Arc;
use std::time::Duration;

const MIN: Duration = Duration::from_secs(60);

fn setup() -> (tempfile::TempDir, Store, ManualClock, String) {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(1_800_000_000_000_000);
    let mut store = Store::open_dir(dir.path(), Arc::new(clock.clone())).unwrap();
    let task = store
        .add_task(
            NewTask {
                title: "work".into(),
                project: Some("p".into()),
                ..NewTask::default()
            },
            &[],
        )
        .unwrap();
    (dir, store, clock, task.id)
}

fn req(who: &str, lease: Duration) -> ClaimRequest {
    ClaimRequest {
        claimant: who.into(),
        lane: None,
        worktree: Some(format!("/wt/{who}")),
        lease,
    }
}

fn h(who: &str) -> Holder {
    Holder::new(who)
}

fn conflict(e: Error, needle: &str) {
    assert_eq!(e.exit_code(), 3, "{e}");
    assert!(
        e.to_string().contains(needle),
        "{e} should mention {needle}"
    );
}

#[test]
fn a_live_claim_excludes_others_and_a_lapsed_one_is_not_free() {
    let (_d, mut s, clock, id) = setup();
    let c = s.claim(&id, &req("a", 10 * MIN)).unwrap();
    conflict(s.claim(&id, &req("b", MIN)).unwrap_err(), "held by a");
    clock.advance(11 * MIN);
    // Lapsed: still not claimable, and the message says how to take it over.
    conflict(
        s.claim(&id, &req("b", MIN)).unwrap_err(),
        &format!("--stale {}", c.fence),
    );
    assert!(
        spice::alloc::next::claim_next(&mut s, &req("b", MIN), &Default::default())
            .unwrap()
            .is_none()
    );
}

#[test]
fn takeover_needs_the_exact_stale_fence() {
    let (_d, mut s, clock, id) = setup();
    let c = s.claim(&id, &req("a", 10 * MIN)).unwrap();
    let t = |fence, who: &str| Takeover {
        stale_fence: fence,
        claimant: who.into(),
        lane: None,
        worktree: None,
        lease: 10 * MIN,
        force: false,
    };
    conflict(s.takeover(&id, &t(c.fence, "b")).unwrap_err(), "still live");
    clock.advance(10 * MIN);
    conflict(
        s.takeover(&id, &t(c.fence + 100, "b")).unwrap_err(),
        "not current; it is held by a",
    );
    let taken = s.takeover(&id, &t(c.fence, "b")).unwrap();
    assert_eq!(taken.claimant, "b");
    assert!(taken.fence > c.fence);
    assert_eq!(
        taken.worktree.as_deref(),
        Some("/wt/a"),
        "the work stays where it is"
    );
    // A second operator who saw the same stale claim loses.
    conflict(s.takeover(&id, &t(c.fence, "c")).unwrap_err(), "held by b");
    // The displaced claimant learns of it.
    let displaced = s.ledger_for_actor("a", "displaced").unwrap();
    assert_eq!(displaced.len(), 1);
    assert_eq!(displaced[0].detail["by"], "b");
}

#[test]
fn renewal_extends_never_shortens_and_passes_to_a_successor() {
    let (_d, mut s, clock, id) = setup();
    let c = s.claim(&id, &req("s1", 60 * MIN)).unwrap();
    let r = s.renew(&id, &h("s1"), None, 5 * MIN).unwrap();
    assert_eq!(
        r.lease_until, c.lease_until,
        "a shorter renewal keeps the longer lease"
    );
    assert_eq!(r.fence, c.fence);
    clock.advance(59 * MIN);
    let r = s.renew(&id, &h("s1"), None, 30 * MIN).unwrap();
    assert!(r.lease_until > c.lease_until);
    let succ = s.renew(&id, &h("s1"), Some("s2"), 30 * MIN).unwrap();
    assert_eq!(succ.claimant, "s2");
    assert_ne!(succ.fence, c.fence);
    assert_eq!(
        succ.claimed_at, c.claimed_at,
        "passed on, not released and re-claimed"
    );
    // The predecessor's later renewals fail and say why.
    conflict(
        s.renew(&id, &h("s1"), None, MIN).unwrap_err(),
        "passed from s1 to s2",
    );
    s.renew(&id, &h("s2"), None, MIN).unwrap();
    let kinds: Vec<String> = s.ledger(&id).unwrap().into_iter().map(|e| e.kind).collect();
    assert_eq!(kinds, ["added", "claimed", "successor"]);
}

#[test]
fn writes_after_losing_the_claim_are_refused() {
    let (_d, mut s, clock, id) = setup();
    let c = s.claim(&id, &req("a", MIN)).unwrap();
    clock.advance(2 * MIN);
    let t = Takeover {
        stale_fence: c.fence,
        claimant: "b".into(),
        lane: None,
        worktree: None,
        lease: MIN,
        force: false,
    };
    s.takeover(&id, &t).unwrap();
    conflict(s.renew(&id, &h("a"), None, MIN).unwrap_err(), "held by b");
    conflict(s.release(&id, &h("a")).unwrap_err(), "held by b");
    conflict(
        s.complete_phase(&id, Some(&h("a"))).unwrap_err(),
        "held by b",
    );
    conflict(s.done(&id, Some(&h("a"))).unwrap_err(), "held by b");
    conflict(s.done(&id, None).unwrap_err(), "pass --claimant b");
    // The holder's writes go through; after release, the old holder still cannot act.
    s.complete_phase(&id, Some(&h("b"))).unwrap();
    conflict(
        s.done(&id, Some(&h("a"))).unwrap_err(),
        "a does not hold it",
    );
    assert_eq!(s.task(&id).unwrap().phase, "review");
}

#[test]
fn blocked_and_finished_tasks_cannot_be_claimed() {
    let (_d, mut s, _clock, id) = setup();
    let later = s
        .add_task(
            NewTask {
                title: "later".into(),
                ..NewTask::default()
            },
            std::slice::from_ref(&id),
        )
        .unwrap();
    conflict(
        s.claim(&later.id, &req("a", MIN)).unwrap_err(),
        &format!("waits on {id}"),
    );
    s.done(&id, None).unwrap();
    conflict(s.claim(&id, &req("a", MIN)).unwrap_err(), "is completed");
    s.claim(&later.id, &req("a", MIN)).unwrap();
}

/// Regression: writes were checked by claimant name only, so a leftover worker of an
/// earlier holding by the same claimant could still act after the claim was re-taken.
#[test]
fn a_fenced_write_from_an_ended_holding_is_refused() {
    let (_d, mut s, _clock, id) = setup();
    let first = s.claim(&id, &req("a", MIN)).unwrap();
    s.release(&id, &h("a")).unwrap();
    let second = s.claim(&id, &req("a", MIN)).unwrap();
    assert_ne!(first.fence, second.fence);
    let old = Holder::fenced("a", first.fence);
    conflict(
        s.renew(&id, &old, None, MIN).unwrap_err(),
        "that holding ended",
    );
    conflict(
        s.complete_phase(&id, Some(&old)).unwrap_err(),
        "that holding ended",
    );
    conflict(s.release(&id, &old).unwrap_err(), "that holding ended");
    s.renew(&id, &Holder::fenced("a", second.fence), None, MIN)
        .unwrap();
}

/// Regression: takeover replaced the lane with NULL when none was named.
#[test]
fn takeover_keeps_lane_and_worktree_and_moves_locality() {
    let (_d, mut s, clock, id) = setup();
    let mut r = req("a", MIN);
    r.lane = Some("core".into());
    let c = s.claim(&id, &r).unwrap();
    clock.advance(2 * MIN);
    let t = Takeover {
        stale_fence: c.fence,
        claimant: "b".into(),
        lane: None,
        worktree: None,
        lease: MIN,
        force: false,
    };
    let taken = s.takeover(&id, &t).unwrap();
    assert_eq!(taken.lane.as_deref(), Some("core"));
    assert_eq!(
        s.last_cell("b").unwrap(),
        Some((Some("p".into()), "todo".into()))
    );
}

/// Regression: the claim did not re-check the caller's filter, so a task that moved
/// to another phase after ranking could be claimed by a lane that does not take it.
#[test]
fn a_task_that_left_the_filter_after_ranking_is_not_claimed() {
    let (_d, mut s, _clock, id) = setup();
    let filter = spice::alloc::Filter {
        projects: vec![],
        phases: vec!["todo".into()],
    };
    s.set_phase(&id, "review", None).unwrap();
    assert!(s
        .claim_if_ready(&id, &req("a", MIN), &filter)
        .unwrap()
        .is_none());
    s.set_phase(&id, "todo", None).unwrap();
    assert!(s
        .claim_if_ready(&id, &req("a", MIN), &filter)
        .unwrap()
        .is_some());
}

/// Regression: a waiting task past its wait date was claimable but its phase could
/// not be completed ("is waiting, not pending").
#[test]
fn a_woken_waiting_task_can_finish_its_phase() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(1_800_000_000_000_000);
    let mut s = Store::open_dir(dir.path(), Arc::new(clock.clone())).unwrap();
    let t = s
        .add_task(
            NewTask {
                title: "later".into(),
                status: Some(spice::task::Status::Waiting),
                wait: Some(1_800_000_000_000_000 + 1),
                ..NewTask::default()
            },
            &[],
        )
        .unwrap();
    conflict(s.claim(&t.id, &req("a", MIN)).unwrap_err(), "waits until");
    clock.advance(MIN);
    s.claim(&t.id, &req("a", MIN)).unwrap();
    s.complete_phase(&t.id, Some(&h("a"))).unwrap();
}
