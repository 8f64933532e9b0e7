//! The observer against a real store written the way a lane writes it (another
//! connection, a manual clock): each event once, in order, with its lane and task.

use super::*;
use crate::clock::ManualClock;
use crate::store::{
    ClaimRequest, Holder, LaneRow, LaneState, Store, Target, TargetKind, DEFAULT_TTL,
};
use crate::task::NewTask;
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;

struct World {
    _dir: tempfile::TempDir,
    clock: Arc<ManualClock>,
    lane: Store,
    observer: Observer,
}

fn world() -> World {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(1_000_000_000));
    let lane = Store::open_dir(dir.path(), clock.clone()).unwrap();
    let observer = Observer::new(Box::new(
        Store::open_dir(dir.path(), clock.clone()).unwrap(),
    ))
    .unwrap();
    World {
        _dir: dir,
        clock,
        lane,
        observer,
    }
}

impl World {
    fn tick(&self) {
        self.clock.advance(Duration::from_millis(10));
    }

    fn events(&mut self) -> Vec<(EventKind, String, Option<String>, Vec<String>)> {
        self.observer
            .poll()
            .unwrap()
            .into_iter()
            .map(|e| (e.event, e.lane, e.task, e.keys))
            .collect()
    }

    fn row(&mut self, f: impl FnOnce(&mut LaneRow)) {
        self.tick();
        let mut r = self.lane.lane("a").unwrap().unwrap_or(LaneRow {
            name: "a".into(),
            ..LaneRow::default()
        });
        f(&mut r);
        self.lane.put_lane(&r).unwrap();
    }
}

#[test]
fn a_lanes_store_writes_become_events_once_and_in_order() {
    let mut w = world();
    // Before the observer's start: history, not reported.
    let old = w
        .lane
        .add_task(
            NewTask {
                title: "Old".into(),
                ..NewTask::default()
            },
            &[],
        )
        .unwrap();
    let task = w
        .lane
        .add_task(
            NewTask {
                title: "Greet".into(),
                project: Some("demo".into()),
                ..NewTask::default()
            },
            &[],
        )
        .unwrap();
    let handle = task.handle();
    let early = w
        .lane
        .steer(
            &Target {
                kind: TargetKind::Lane,
                name: "a".into(),
            },
            "keep it short",
            DEFAULT_TTL,
        )
        .unwrap();
    assert!(w.events().is_empty(), "{old:?} was added before the start");

    let claim = w
        .lane
        .claim(
            &task.id,
            &ClaimRequest {
                claimant: "s1".into(),
                lane: Some("a".into()),
                worktree: None,
                lease: Duration::from_secs(300),
            },
        )
        .unwrap();
    let holder = Holder::fenced("s1", claim.fence);
    w.tick();
    w.lane
        .set_claim_worktree(&task.id, &holder, "/wt/greet")
        .unwrap();
    w.tick();
    w.lane
        .note(
            &task.id,
            "launched",
            "s1",
            json!({"lane": "a", "pid": 42, "turn": 1, "resume": false,
                   "steering_in_brief": [early.key]}),
        )
        .unwrap();
    w.lane.mark_shown(std::slice::from_ref(&early.key)).unwrap();
    w.row(|r| {
        r.state = LaneState::Starting;
        r.session = Some("s1".into());
        r.task_id = Some(task.id.clone());
        r.transcript = Some("/t/s1.jsonl".into());
    });
    assert_eq!(
        w.events(),
        [
            (EventKind::Claimed, "a".into(), Some(handle.clone()), vec![]),
            (
                EventKind::WorktreeReady,
                "a".into(),
                Some(handle.clone()),
                vec![]
            ),
            (
                EventKind::Launched,
                "a".into(),
                Some(handle.clone()),
                vec![]
            ),
            (
                EventKind::Delivered,
                "a".into(),
                Some(handle.clone()),
                vec![early.key.clone()]
            ),
        ]
    );
    assert!(w.events().is_empty(), "nothing twice");

    // Steering shown by `spice exec` is a delivery once it settles; the agent answers.
    let late = w
        .lane
        .steer(
            &Target {
                kind: TargetKind::Session,
                name: "s1".into(),
            },
            "and run the tests",
            DEFAULT_TTL,
        )
        .unwrap();
    w.tick();
    w.lane.mark_shown(std::slice::from_ref(&late.key)).unwrap();
    assert!(w.events().is_empty(), "a showing waits to settle");
    w.clock.advance(SETTLE);
    let got = w.events();
    assert_eq!(
        got,
        [(
            EventKind::Delivered,
            "a".into(),
            Some(handle.clone()),
            vec![late.key.clone()]
        )]
    );
    w.row(|r| r.state = LaneState::Working);
    w.tick();
    let text = format!(
        "ACK {}: short it is\nACK {}: they pass",
        early.key, late.key
    );
    w.lane
        .apply_acks(&crate::steer::grammar::parse(&text), "/t/s1.jsonl")
        .unwrap();
    w.row(|r| r.state = LaneState::Waiting);
    let mut kinds: Vec<EventKind> = w.events().into_iter().map(|e| e.0).collect();
    w.tick();
    w.lane.complete_phase(&task.id, Some(&holder)).unwrap();
    w.tick();
    w.lane
        .note(
            &task.id,
            "exited",
            "s1",
            json!({"how": "stopped: its task left its hands"}),
        )
        .unwrap();
    w.row(|r| {
        r.state = LaneState::Idle;
        r.session = None;
        r.task_id = None;
        r.last_error = Some("could not prepare a worktree".into());
    });
    w.row(|r| r.state = LaneState::Stopped);
    kinds.extend(w.events().into_iter().map(|e| e.0));
    assert_eq!(
        kinds,
        [
            EventKind::Acked,
            EventKind::Acked,
            EventKind::Waiting,
            EventKind::PhaseDone,
            EventKind::Exited,
            // One read sees only the row's last state: idle passed unseen.
            EventKind::Error,
            EventKind::Stopped,
        ]
    );
}

#[test]
fn phase_done_names_the_merge_and_a_released_claim_is_told_apart() {
    let mut w = world();
    let mut add = |title: &str| {
        w.lane
            .add_task(
                NewTask {
                    title: title.into(),
                    ..NewTask::default()
                },
                &[],
            )
            .unwrap()
    };
    let (one, two) = (add("One"), add("Two"));
    let req = |s: &str| ClaimRequest {
        claimant: s.into(),
        lane: Some("a".into()),
        worktree: None,
        lease: Duration::from_secs(300),
    };
    let c1 = w.lane.claim(&one.id, &req("s1")).unwrap();
    let h1 = Holder::fenced("s1", c1.fence);
    w.lane.set_claim_worktree(&one.id, &h1, "/wt/one").unwrap();
    // The worktree is seen while the claim stands (the phase takes the agent a while).
    let mut events = w.observer.poll().unwrap();
    w.tick();
    w.lane.complete_phase(&one.id, Some(&h1)).unwrap();
    let c2 = w.lane.claim(&two.id, &req("s2")).unwrap();
    w.tick();
    w.lane
        .release(&two.id, &Holder::fenced("s2", c2.fence))
        .unwrap();
    // A claim made by hand, for no lane, is nobody's lane event.
    w.lane
        .claim(
            &two.id,
            &ClaimRequest {
                lane: None,
                ..req("me")
            },
        )
        .unwrap();
    events.extend(w.observer.poll().unwrap());
    let got: Vec<(EventKind, &str)> = events
        .iter()
        .map(|e| (e.event, e.detail.as_str()))
        .collect();
    assert_eq!(
        got,
        [
            (EventKind::Claimed, "phase todo, session s1"),
            (EventKind::WorktreeReady, "/wt/one"),
            (EventKind::PhaseDone, "todo → review, branch merged"),
            (EventKind::Claimed, "phase todo, session s2"),
            (EventKind::Released, "claim released"),
        ]
    );
}

#[test]
fn a_successors_brief_is_a_delivery_even_of_an_item_shown_before() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(1_000_000_000));
    let mut lane = Store::open_dir(dir.path(), clock.clone()).unwrap();
    let task = lane
        .add_task(
            NewTask {
                title: "T".into(),
                ..NewTask::default()
            },
            &[],
        )
        .unwrap();
    let c = lane
        .claim(
            &task.id,
            &ClaimRequest {
                claimant: "s1".into(),
                lane: Some("a".into()),
                worktree: None,
                lease: Duration::from_secs(300),
            },
        )
        .unwrap();
    let item = lane
        .steer(
            &Target {
                kind: TargetKind::Lane,
                name: "a".into(),
            },
            "update the changelog",
            DEFAULT_TTL,
        )
        .unwrap();
    // Shown to the first session (by `spice exec`) before this observer began.
    lane.mark_shown(std::slice::from_ref(&item.key)).unwrap();
    let mut observer = Observer::new(Box::new(
        Store::open_dir(dir.path(), clock.clone()).unwrap(),
    ))
    .unwrap();
    clock.advance(SETTLE * 2);
    lane.renew(
        &task.id,
        &Holder::fenced("s1", c.fence),
        Some("s2"),
        Duration::from_secs(300),
    )
    .unwrap();
    lane.note(
        &task.id,
        "launched",
        "s2",
        json!({"lane": "a", "pid": 7, "turn": 1, "resume": true, "steering_in_brief": [item.key]}),
    )
    .unwrap();
    lane.mark_shown(std::slice::from_ref(&item.key)).unwrap();
    clock.advance(SETTLE * 2);
    let got: Vec<(EventKind, Vec<String>)> = observer
        .poll()
        .unwrap()
        .into_iter()
        .map(|e| (e.event, e.keys))
        .collect();
    assert_eq!(
        got,
        [
            (EventKind::Successor, vec![]),
            (EventKind::Launched, vec![]),
            (EventKind::Delivered, vec![item.key.clone()]),
        ]
    );
}
