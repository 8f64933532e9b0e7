//! What a fleet's supervisor keeps in the store, one test body run against both
//! backends through [`Authority`]: SQLite (on a manual clock) and PostgreSQL (the
//! server's clock). Lane rows and the refusals of lifting a hold; holds and a claim's
//! worktree, fenced; the generation moving on exactly the writes that change what a
//! lane may claim, and a wait on it woken by another connection (on PostgreSQL by
//! `NOTIFY`, at once), ended at its time or given up; supervisor rows on two hosts
//! sharing one store's lanes, a lapsed host shown lost and its lane taken over.

use crate::common;
use common::clocked::{both, Fleet, HOUR, T0};
use spice::clock::Micros;
use spice::store::{
    Authority, BudgetScope, ClaimRequest, Holder, LaneRow, LaneState, LaneTake, Takeover, Target,
    TargetKind, Waited,
};
use spice::task::NewTask;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

both!(a_lane_row_round_trips);
both!(only_a_held_lane_can_be_lifted);
both!(a_budget_pause_is_not_lifted_and_the_refusal_names_the_budget_commands);
both!(a_hold_and_a_worktree_come_only_from_the_holder_under_its_fence);
both!(reports_do_not_move_the_generation_and_what_can_make_work_does);
both!(the_next_awakening_is_the_earliest_wait_date_ahead_of_an_open_task);
both!(a_wait_ends_at_its_time_or_when_given_up);
both!(a_wait_ends_on_another_connections_graph_change_only);
both!(a_wait_wakes_promptly_on_another_connections_new_task);
both!(a_wait_ends_on_another_connections_claim);
both!(two_hosts_share_a_lane_and_a_lost_host_is_shown_and_taken_over);
both!(a_supervisor_ends_and_its_host_registers_again);
both!(concurrent_supervisors_never_run_one_lane_twice);
both!(only_the_supervisor_running_a_lane_writes_its_row);

fn add(a: &mut dyn Authority, title: &str, project: Option<&str>, wait: Option<Micros>) -> String {
    a.add_task(
        NewTask {
            title: title.into(),
            project: project.map(str::to_string),
            wait,
            ..NewTask::default()
        },
        &[],
    )
    .unwrap()
    .id
}

fn req(who: &str, lease: Duration) -> ClaimRequest {
    ClaimRequest {
        claimant: who.into(),
        lane: Some("a".into()),
        worktree: None,
        lease,
    }
}

fn lane(name: &str, state: LaneState) -> LaneRow {
    LaneRow {
        name: name.into(),
        state,
        ..LaneRow::default()
    }
}

fn a_lane_row_round_trips(f: &Fleet) {
    let mut a = f.authority();
    assert_eq!(a.lane("a").unwrap(), None);
    let before = a.now().unwrap();
    let row = LaneRow {
        name: "a".into(),
        state: LaneState::Asking,
        profile: Some("claude".into()),
        session: Some("s2".into()),
        conversation: Some("c1".into()),
        task_id: Some("t1".into()),
        lineage: vec!["s0".into(), "3f2b8c9e-1d4a-4b6f-9c2e-7a1b2c3d4e5f".into()],
        pid: Some(u32::MAX),
        pid_start: Some(u64::MAX >> 1),
        transcript: Some("/t.jsonl".into()),
        recording: Some("/r.cast".into()),
        restarts: 3,
        hold_until: Some(T0 + 5),
        hold_reason: Some("r".into()),
        last_error: Some("e".into()),
        last_activity: Some(T0 + 7),
        state_note: Some("which file?".into()),
        updated: 1,
        // Read from the lane's runner, never written with the row.
        host: Some("not written".into()),
        host_lost: true,
    };
    let stored = a.put_lane(&row).unwrap();
    assert!(stored.updated >= before, "stamped by the authority's clock");
    assert_eq!(
        stored,
        LaneRow {
            updated: stored.updated,
            host: None,
            host_lost: false,
            ..row.clone()
        }
    );
    assert_eq!(f.authority().lane("a").unwrap().unwrap(), stored);
    a.put_lane(&lane("b", LaneState::Idle)).unwrap();
    let names: Vec<String> = a.lanes().unwrap().into_iter().map(|l| l.name).collect();
    assert_eq!(names, ["a", "b"]);
    let json = serde_json::to_value(&stored).unwrap();
    assert_eq!(json["state"], "asking");
    assert_eq!(json["host"], serde_json::Value::Null);
    assert_eq!(json["host_lost"], false);
    // A session the lane rows name is one the store knows.
    assert_eq!(
        a.resolve_session("3f2b8c9e").unwrap(),
        "3f2b8c9e-1d4a-4b6f-9c2e-7a1b2c3d4e5f"
    );
}

fn only_a_held_lane_can_be_lifted(f: &Fleet) {
    let mut a = f.authority();
    let e = a.lift_hold("a").unwrap_err();
    assert_eq!(e.exit_code(), 2, "{e}");
    assert_eq!(e.to_string(), "no lane named \"a\" has run");
    let mut row = lane("a", LaneState::Working);
    a.put_lane(&row).unwrap();
    let e = a.lift_hold("a").unwrap_err().to_string();
    assert_eq!(e, "lane a is not held (it is working)");
    row.state = LaneState::Held;
    row.hold_until = Some(T0 + 9_000);
    row.hold_reason = Some("three deaths".into());
    a.put_lane(&row).unwrap();
    a.lift_hold("a").unwrap();
    let got = a.lane("a").unwrap().unwrap();
    assert_eq!((got.hold_until, got.hold_reason), (None, None));
    assert_eq!(got.state, LaneState::Held, "the supervisor moves the state");
}

fn a_budget_pause_is_not_lifted_and_the_refusal_names_the_budget_commands(f: &Fleet) {
    let mut a = f.authority();
    let task = add(&mut *a, "t", Some("demo"), None);
    let mut row = LaneRow {
        task_id: Some(task.clone()),
        hold_reason: Some("budget: lane used 1200 of 1000 tokens".into()),
        ..lane("a", LaneState::Held)
    };
    a.put_lane(&row).unwrap();
    let e = a.lift_hold("a").unwrap_err().to_string();
    assert!(e.contains("`spice budget raise a +N`"), "{e}");
    assert!(e.contains("`spice budget stop a`"), "{e}");
    row.hold_reason = Some("budget: task used 50 of 40 tokens".into());
    a.put_lane(&row).unwrap();
    let e = a.lift_hold("a").unwrap_err().to_string();
    let handle = format!("demo-{task} --task");
    assert!(
        e.contains(&format!("`spice budget raise {handle} +N`")),
        "{e}"
    );
    assert!(e.contains(&format!("`spice budget stop {handle}`")), "{e}");
    let got = a.lane("a").unwrap().unwrap();
    assert_eq!(got.hold_reason, row.hold_reason, "the pause is kept");
}

fn a_hold_and_a_worktree_come_only_from_the_holder_under_its_fence(f: &Fleet) {
    let mut a = f.authority();
    let t = add(&mut *a, "t", None, None);
    let lease = Duration::from_millis(400);
    let e = a
        .hold(&t, &Holder::new("me"), lease, "merge")
        .unwrap_err()
        .to_string();
    assert!(e.contains("cannot merge task"), "{e}");
    assert!(e.contains("(it is not claimed)"), "{e}");
    let c = a.claim(&t, &req("me", lease)).unwrap();
    let mine = Holder::fenced("me", c.fence);
    let e = a
        .hold(&t, &Holder::new("other"), HOUR, "merge")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("cannot merge task") && e.contains("it is held by me"),
        "{e}"
    );
    let e = a
        .hold(&t, &Holder::fenced("me", c.fence + 100), HOUR, "merge")
        .unwrap_err()
        .to_string();
    assert!(e.contains("that holding ended"), "{e}");
    let e = a
        .set_claim_worktree(&t, &Holder::new("other"), "/w")
        .unwrap_err()
        .to_string();
    assert!(e.contains("cannot set the worktree of task"), "{e}");
    let e = a
        .set_claim_worktree(&t, &Holder::fenced("me", c.fence + 100), "/w")
        .unwrap_err()
        .to_string();
    assert!(e.contains("that holding ended"), "{e}");
    assert_eq!(a.claim_on(&t).unwrap().unwrap().worktree, None);

    // A lapsed lease nobody took over still counts; the hold extends it.
    f.pass(&mut *a, c.lease_until);
    let before = a.now().unwrap();
    let held = a.hold(&t, &mine, HOUR, "merge").unwrap();
    assert_eq!(held.fence, c.fence, "a hold keeps the holding");
    assert!(held.lease_until >= before + HOUR.as_micros() as i64);
    let again = a.hold(&t, &Holder::new("me"), lease, "merge").unwrap();
    assert_eq!(again.lease_until, held.lease_until, "never shortened");
    a.set_claim_worktree(&t, &mine, "/w/t").unwrap();
    let got = a.claim_on(&t).unwrap().unwrap();
    assert_eq!(
        (got.worktree.as_deref(), got.fence),
        (Some("/w/t"), c.fence)
    );
    let ledger = a.ledger(&t).unwrap();
    assert_eq!(
        ledger.iter().map(|e| e.kind.as_str()).collect::<Vec<_>>(),
        ["added", "claimed"],
        "no ledger entry for a hold or a worktree"
    );
}

/// What a supervisor writes all the time while its lanes work or sit idle moves
/// nothing an idle lane waits on; what can make work (or take it) does.
fn reports_do_not_move_the_generation_and_what_can_make_work_does(f: &Fleet) {
    let mut s = f.authority();
    let a = add(&mut *s, "a", None, None);
    let b = add(&mut *s, "b", None, None);
    let claim = s.claim(&a, &req("me", HOUR)).unwrap();
    let me = Holder::fenced("me", claim.fence);
    let sup = s
        .register_supervisor("h", 1, 1, Duration::from_secs(60))
        .unwrap();
    let before = s.generation().unwrap();
    for _ in 0..3 {
        s.put_lane(&lane("a", LaneState::Working)).unwrap();
        f.tick();
        s.renew(&a, &me, None, HOUR).unwrap();
        s.supervisor_heartbeat(sup, Duration::from_secs(60))
            .unwrap();
    }
    s.hold(&a, &me, Duration::from_secs(900), "merge").unwrap();
    s.take_lane("a", sup, &[]).unwrap();
    let at = spice::store::vocab::Checkpoint {
        offset: 10,
        line: 1,
        hash: 7,
    };
    s.apply_transcript("/t.jsonl", at, &[], &[]).unwrap();
    let lane_a = Target {
        kind: TargetKind::Lane,
        name: "a".into(),
    };
    s.steer(&lane_a, "look", HOUR).unwrap();
    f.sql(&format!(
        "UPDATE tasks SET modified = modified + 1 WHERE id = '{b}'"
    ));
    assert_eq!(
        s.generation().unwrap(),
        before,
        "a report moved the generation"
    );

    // Each of these can change what a lane may claim.
    let mut last = before;
    let mut moved = |s: &mut dyn Authority, what: &str| {
        let g = s.generation().unwrap();
        assert_ne!(g, last, "{what} did not move the generation");
        assert!(
            g.number() > last.number(),
            "{what}: the generation went back"
        );
        last = g;
    };
    let c = add(&mut *s, "c", None, None);
    moved(&mut *s, "a task added");
    f.sql(&format!(
        "INSERT INTO deps (task_id, dep_id) VALUES ('{c}', '{b}')"
    ));
    moved(&mut *s, "a dependency added");
    f.sql(&format!("DELETE FROM deps WHERE task_id = '{c}'"));
    moved(&mut *s, "a dependency removed");
    f.sql(&format!("UPDATE tasks SET title = 'b2' WHERE id = '{b}'"));
    moved(&mut *s, "a title");
    s.set_claim_worktree(&a, &me, "/w").unwrap();
    moved(&mut *s, "a claim's worktree");
    s.release(&a, &me).unwrap();
    moved(&mut *s, "a release");
    let c2 = s
        .claim(&a, &req("other", Duration::from_millis(1)))
        .unwrap();
    moved(&mut *s, "a claim");
    s.renew(&a, &Holder::fenced("other", c2.fence), Some("next"), HOUR)
        .unwrap();
    moved(&mut *s, "a claim passed to a successor");
    s.complete_phase(&a, Some(&Holder::new("next"))).unwrap();
    moved(&mut *s, "a phase completed");
    let c3 = s.claim(&b, &req("x", Duration::from_millis(1))).unwrap();
    moved(&mut *s, "a claim");
    f.pass(&mut *s, c3.lease_until);
    s.takeover(
        &b,
        &Takeover {
            stale_fence: c3.fence,
            claimant: "y".into(),
            lane: None,
            worktree: None,
            lease: HOUR,
            force: false,
        },
    )
    .unwrap();
    moved(&mut *s, "a takeover");
}

fn the_next_awakening_is_the_earliest_wait_date_ahead_of_an_open_task(f: &Fleet) {
    let mut s = f.authority();
    assert_eq!(s.next_awakening().unwrap(), None);
    let now = s.now().unwrap();
    let hour = HOUR.as_micros() as i64;
    add(&mut *s, "past", None, Some(now - hour));
    add(&mut *s, "later", None, Some(now + 2 * hour));
    let soon = add(&mut *s, "soon", None, Some(now + hour));
    assert_eq!(s.next_awakening().unwrap(), Some(now + hour));
    f.sql(&format!(
        "UPDATE tasks SET status = 'completed' WHERE id = '{soon}'"
    ));
    assert_eq!(s.next_awakening().unwrap(), Some(now + 2 * hour));
    // Judged by the authority's clock: a date it has passed is no awakening.
    f.sql(&format!(
        "UPDATE tasks SET wait = {} WHERE title = 'later'",
        s.now().unwrap() + 300_000
    ));
    let w = s.next_awakening().unwrap().unwrap();
    f.pass(&mut *s, w);
    assert_eq!(s.next_awakening().unwrap(), None);
}

fn a_wait_ends_at_its_time_or_when_given_up(f: &Fleet) {
    let mut s = f.authority();
    let seen = s.generation().unwrap();
    let until = s.now().unwrap() + 300_000;
    let woke = s
        .wait_for_change(seen, Some(until), &|| {
            f.tick();
            false
        })
        .unwrap();
    assert_eq!(woke, Waited::Due);
    assert!(s.now().unwrap() >= until, "woken before its time");
    let asked = std::sync::atomic::AtomicUsize::new(0);
    let started = Instant::now();
    // Whoever changes what a give-up reads nudges the waiters (the SQLite backend's
    // waits sleep on the process's bell, and ask only when nudged or every 5 s;
    // PostgreSQL's ask at every look).
    let gave_up = std::sync::atomic::AtomicBool::new(false);
    let woke = std::thread::scope(|scope| {
        scope.spawn(|| {
            while !gave_up.load(Ordering::SeqCst) {
                spice::store::nudge();
                std::thread::sleep(Duration::from_millis(20));
            }
        });
        let woke = s
            .wait_for_change(seen, None, &|| asked.fetch_add(1, Ordering::SeqCst) == 2)
            .unwrap();
        gave_up.store(true, Ordering::SeqCst);
        woke
    });
    assert_eq!(woke, Waited::GaveUp);
    // Asked at the start and at each nudge or look.
    assert_eq!(asked.load(Ordering::SeqCst), 3);
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    // A change made before the call is seen at once.
    add(&mut *s, "t", None, None);
    let woke = s.wait_for_change(seen, None, &|| true).unwrap();
    assert!(matches!(woke, Waited::Changed(g) if g != seen), "{woke:?}");
}

/// Another connection's lane rows and renewals do not end a wait; its new task does.
fn a_wait_ends_on_another_connections_graph_change_only(f: &Fleet) {
    let mut waiter = f.authority();
    let a = add(&mut *waiter, "a", None, None);
    let claim = waiter.claim(&a, &req("me", HOUR)).unwrap();
    let seen = waiter.generation().unwrap();
    let done = AtomicBool::new(false);
    let woke = std::thread::scope(|scope| {
        scope.spawn(|| {
            // Connections are not shared across threads: each opens its own.
            let mut writer = f.authority();
            for _ in 0..4 {
                writer.put_lane(&lane("a", LaneState::Working)).unwrap();
                writer
                    .renew(&a, &Holder::fenced("me", claim.fence), None, HOUR)
                    .unwrap();
                std::thread::sleep(Duration::from_millis(125));
            }
            done.store(true, Ordering::SeqCst);
            spice::store::nudge();
        });
        waiter
            .wait_for_change(seen, None, &|| done.load(Ordering::SeqCst))
            .unwrap()
    });
    assert_eq!(woke, Waited::GaveUp, "woken by a lane row or a renewal");
    assert_eq!(waiter.generation().unwrap(), seen);
    let added = std::thread::scope(|scope| {
        scope.spawn(|| add(&mut *f.authority(), "b", None, None));
        waiter.wait_for_change(seen, None, &|| false).unwrap()
    });
    assert!(
        matches!(added, Waited::Changed(g) if g != seen),
        "{added:?}"
    );
}

/// A claim taken by another connection moves the generation and ends a wait. On
/// PostgreSQL a claim taken sends no notification (a notifying commit waits for every
/// other one's flush), so the waiter finds it by reading the generation every second.
fn a_wait_ends_on_another_connections_claim(f: &Fleet) {
    let mut waiter = f.authority();
    let a = add(&mut *waiter, "a", None, None);
    let seen = waiter.generation().unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let woke = std::thread::scope(|scope| {
        scope.spawn(|| f.authority().claim(&a, &req("other", HOUR)).unwrap());
        waiter
            .wait_for_change(seen, None, &|| std::time::Instant::now() > deadline)
            .unwrap()
    });
    assert!(matches!(woke, Waited::Changed(g) if g != seen), "{woke:?}");
}

/// The waiter blocks first; the writer adds a task once it does. On PostgreSQL the
/// commit's notification wakes the waiter at once, not at its next look.
fn a_wait_wakes_promptly_on_another_connections_new_task(f: &Fleet) {
    let mut waiter = f.authority();
    let seen = waiter.generation().unwrap();
    let waiting = AtomicBool::new(false);
    let (woke, latency) = std::thread::scope(|scope| {
        let added = scope.spawn(|| {
            let mut writer = f.authority();
            while !waiting.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(5));
            }
            add(&mut *writer, "new", None, None);
            Instant::now()
        });
        let deadline = Instant::now() + Duration::from_secs(30);
        let woke = waiter
            .wait_for_change(seen, None, &|| {
                waiting.store(true, Ordering::SeqCst);
                Instant::now() > deadline
            })
            .unwrap();
        let at = Instant::now();
        (woke, at.saturating_duration_since(added.join().unwrap()))
    });
    assert!(matches!(woke, Waited::Changed(g) if g != seen), "{woke:?}");
    if f.is_pg() {
        assert!(
            latency < Duration::from_millis(150),
            "woken after {latency:?}"
        );
    }
}

fn two_hosts_share_a_lane_and_a_lost_host_is_shown_and_taken_over(f: &Fleet) {
    let mut a = f.authority();
    let mut b = f.authority();
    let short = Duration::from_millis(500);
    let sa = a.register_supervisor("host-a", 100, 11, short).unwrap();
    let sb = b.register_supervisor("host-b", 200, 22, HOUR).unwrap();
    assert_ne!(sa, sb);
    assert_eq!(
        a.take_lane("x", sa, &[]).unwrap(),
        LaneTake::Taken { from: None }
    );
    assert_eq!(
        a.take_lane("x", sa, &[]).unwrap(),
        LaneTake::Taken { from: None },
        "taking a lane it runs is a no-op"
    );
    match b.take_lane("x", sb, &[]).unwrap() {
        LaneTake::Held { by } => {
            assert_eq!(
                (by.id, by.host.as_str(), by.pid, by.started),
                (sa, "host-a", 100, 11)
            );
            assert!(by.live);
        }
        other => panic!("{other:?}"),
    }
    let only_a = vec!["host-a".to_string()];
    assert_eq!(
        b.take_lane("y", sb, &only_a).unwrap(),
        LaneTake::NotAllowed {
            host: "host-b".into(),
            hosts: only_a.clone()
        }
    );
    assert_eq!(
        b.take_lane("y", sb, &[]).unwrap(),
        LaneTake::Taken { from: None }
    );

    // The lane's agent works under a claim from host a.
    a.put_lane(&lane("x", LaneState::Working)).unwrap();
    let t = add(&mut *a, "t", None, None);
    let c = a.claim(&t, &req("sess-a", short)).unwrap();
    let x = b.lane("x").unwrap().unwrap();
    assert_eq!((x.host.as_deref(), x.host_lost), (Some("host-a"), false));
    let live: Vec<bool> = b.supervisors().unwrap().iter().map(|s| s.live).collect();
    assert_eq!(live, [true, true]);

    // Host a goes silent: its lease lapses by the authority's clock.
    let lease_until = b.supervisors().unwrap()[0].lease_until;
    f.pass(&mut *b, lease_until.max(c.lease_until));
    let rows = b.supervisors().unwrap();
    assert_eq!((rows[0].id, rows[0].live), (sa, false));
    let x = b.lane("x").unwrap().unwrap();
    assert_eq!((x.host.as_deref(), x.host_lost), (Some("host-a"), true));
    let json = serde_json::to_value(b.lanes().unwrap()).unwrap();
    assert_eq!(json[0]["host"], "host-a");
    assert_eq!(json[0]["host_lost"], true);
    b.put_lane(&lane("y", LaneState::Idle)).unwrap();
    let y = b.lane("y").unwrap().unwrap();
    assert_eq!((y.host.as_deref(), y.host_lost), (Some("host-b"), false));

    // Host b may run it, and takes it from the lost host.
    let both = vec!["host-a".to_string(), "host-b".to_string()];
    match b.take_lane("x", sb, &both).unwrap() {
        LaneTake::Taken { from: Some(from) } => assert_eq!((from.id, from.live), (sa, false)),
        other => panic!("{other:?}"),
    }
    let x = b.lane("x").unwrap().unwrap();
    assert_eq!((x.host.as_deref(), x.host_lost), (Some("host-b"), false));
    let e = a.supervisor_heartbeat(sa, HOUR).unwrap_err().to_string();
    assert!(e.contains(&format!("superseded by supervisor {sb}")), "{e}");
    assert!(
        a.take_lane("z", sa, &[]).is_err(),
        "a superseded supervisor takes nothing"
    );
    assert_eq!(b.supervisors().unwrap()[0].superseded_by, Some(sb));

    // Its claim lapsed too, and is not free work: it is taken over explicitly.
    let e = b.claim(&t, &req("sess-b", HOUR)).unwrap_err().to_string();
    assert!(e.contains("spice task takeover"), "{e}");
    let took = b
        .takeover(
            &t,
            &Takeover {
                stale_fence: c.fence,
                claimant: "sess-b".into(),
                lane: None,
                worktree: None,
                lease: HOUR,
                force: false,
            },
        )
        .unwrap();
    assert_eq!(
        (took.claimant.as_str(), took.lane.as_deref()),
        ("sess-b", Some("a"))
    );
}

fn a_supervisor_ends_and_its_host_registers_again(f: &Fleet) {
    let mut s = f.authority();
    let e = s.supervisor_heartbeat(99, HOUR).unwrap_err();
    assert_eq!(e.exit_code(), 2, "{e}");
    assert!(s.register_supervisor(" ", 1, 1, HOUR).is_err());
    let first = s.register_supervisor("h", 1, 1, HOUR).unwrap();
    let before = s.supervisors().unwrap()[0].lease_until;
    f.tick();
    s.supervisor_heartbeat(first, HOUR).unwrap();
    let row = s.supervisors().unwrap()[0].clone();
    assert!(row.lease_until > before && row.heartbeat > row.registered);
    s.supervisor_heartbeat(first, Duration::from_secs(1))
        .unwrap();
    assert_eq!(
        s.supervisors().unwrap()[0].lease_until,
        row.lease_until,
        "a heartbeat never shortens the lease"
    );
    s.take_lane("x", first, &[]).unwrap();
    s.put_lane(&lane("x", LaneState::Stopped)).unwrap();
    s.end_supervisor(first).unwrap();
    let e = s.supervisor_heartbeat(first, HOUR).unwrap_err().to_string();
    assert!(e.contains("ended at"), "{e}");
    let x = s.lane("x").unwrap().unwrap();
    assert_eq!(
        (x.host.as_deref(), x.host_lost),
        (Some("h"), false),
        "stopped, not lost"
    );

    // A supervisor that ended runs nothing: the next one takes its lanes at once.
    let second = s.register_supervisor("h", 2, 2, HOUR).unwrap();
    assert_eq!(
        s.take_lane("x", second, &[]).unwrap(),
        LaneTake::Taken { from: None }
    );
    // One per host: a third start supersedes the second, whose lane it takes at once.
    let third = s.register_supervisor("h", 3, 3, HOUR).unwrap();
    assert!(s.supervisor_heartbeat(second, HOUR).is_err());
    assert_eq!(
        s.take_lane("x", third, &[]).unwrap(),
        LaneTake::Taken { from: None }
    );
    let live: Vec<(i64, bool)> = s
        .supervisors()
        .unwrap()
        .iter()
        .map(|r| (r.id, r.live))
        .collect();
    assert_eq!(live, [(first, false), (second, false), (third, true)]);
    assert!(third > second && second > first, "ids only grow");
}

/// Supervisors of four hosts, each on its own connection, take the same lanes at once:
/// each lane gets one runner, and every other take names that runner.
fn concurrent_supervisors_never_run_one_lane_twice(f: &Fleet) {
    let lanes: Vec<String> = (0..12).map(|i| format!("lane-{i}")).collect();
    let got: Vec<(i64, Vec<LaneTake>)> = std::thread::scope(|scope| {
        let hosts: Vec<_> = (0..4)
            .map(|h| {
                let lanes = &lanes;
                scope.spawn(move || {
                    let mut a = f.authority();
                    let me = a
                        .register_supervisor(&format!("host-{h}"), h, h as u64, HOUR)
                        .unwrap();
                    let takes = lanes
                        .iter()
                        .map(|l| a.take_lane(l, me, &[]).unwrap())
                        .collect();
                    (me, takes)
                })
            })
            .collect();
        hosts.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut a = f.authority();
    let rows: std::collections::HashMap<i64, String> = a
        .supervisors()
        .unwrap()
        .into_iter()
        .map(|r| (r.id, r.host))
        .collect();
    for (i, lane) in lanes.iter().enumerate() {
        let runners: Vec<i64> = got
            .iter()
            .filter(|(_, t)| t[i] == LaneTake::Taken { from: None })
            .map(|(me, _)| *me)
            .collect();
        assert_eq!(runners.len(), 1, "{lane}: {runners:?}");
        for (me, takes) in &got {
            if *me != runners[0] {
                assert!(
                    matches!(&takes[i], LaneTake::Held { by } if by.id == runners[0]),
                    "{lane}: {:?}",
                    takes[i]
                );
            }
        }
        a.put_lane(&self::lane(lane, LaneState::Idle)).unwrap();
        assert_eq!(
            a.lane(lane).unwrap().unwrap().host,
            Some(rows[&runners[0]].clone())
        );
    }
}

/// A supervisor writes its lane's row only while it runs the lane: once another host
/// took the lane from it (its heartbeat lapsed), or a later supervisor of its host
/// superseded it, its late writes are refused and leave the new runner's row alone.
fn only_the_supervisor_running_a_lane_writes_its_row(f: &Fleet) {
    let mut a = f.authority();
    let mut b = f.authority();
    let short = Duration::from_millis(500);
    let sa = a.register_supervisor("host-a", 100, 11, short).unwrap();
    let sb = b.register_supervisor("host-b", 200, 22, HOUR).unwrap();

    // Not taken yet: nobody's row to write.
    let e = a.put_lane_as(&lane("x", LaneState::Idle), sa).unwrap_err();
    assert_eq!(e.exit_code(), 3, "{e}");
    assert!(e.to_string().contains("lane x has no runner"), "{e}");
    assert_eq!(a.lane("x").unwrap(), None, "nothing was written");
    let e = a.put_lane_as(&lane("x", LaneState::Idle), 999).unwrap_err();
    assert_eq!(e.exit_code(), 2, "an unknown supervisor: {e}");

    a.take_lane("x", sa, &[]).unwrap();
    let mut row = lane("x", LaneState::Working);
    row.pid = Some(4242);
    a.put_lane_as(&row, sa).unwrap();
    let e = b.put_lane_as(&lane("x", LaneState::Idle), sb).unwrap_err();
    assert!(
        e.to_string().contains(&format!(
            "lane x is run by supervisor {sa} (host host-a, pid 100) now"
        )),
        "{e}"
    );

    // Host a goes silent; host b takes the lane and reports its own agent.
    let lease_until = b.supervisors().unwrap()[0].lease_until;
    f.pass(&mut *b, lease_until);
    assert!(matches!(
        b.take_lane("x", sb, &[]).unwrap(),
        LaneTake::Taken { from: Some(_) }
    ));
    let mut mine = lane("x", LaneState::Working);
    mine.pid = Some(777);
    mine.session = Some("sess-b".into());
    b.put_lane_as(&mine, sb).unwrap();

    // Host a comes back and, before its heartbeat learns it was superseded, stops.
    let mut stopped = lane("x", LaneState::Stopped);
    stopped.pid = None;
    let e = a.put_lane_as(&stopped, sa).unwrap_err();
    assert_eq!(e.exit_code(), 3, "{e}");
    assert!(
        e.to_string()
            .contains(&format!("superseded by supervisor {sb}")),
        "{e}"
    );
    let x = a.lane("x").unwrap().unwrap();
    assert_eq!(
        (x.state, x.pid, x.session.as_deref(), x.host.as_deref()),
        (
            LaneState::Working,
            Some(777),
            Some("sess-b"),
            Some("host-b")
        ),
        "host b's row stands"
    );
    // Nor does host a act on the operator's stop meant for the lane's runner now: the
    // stop stays for host b to act on (and b clears it).
    let stop = BudgetScope::Lane("x".into());
    a.budget_stop(&stop).unwrap();
    let e = a.budget_stopped(&stop, Some(("x", sa))).unwrap_err();
    assert_eq!(e.exit_code(), 3, "{e}");
    let stopped_now = |s: &mut dyn Authority| s.budgets().unwrap().iter().any(|r| r.stop);
    assert!(stopped_now(&mut *a), "the stop stands for host b");
    b.budget_stopped(&stop, Some(("x", sb))).unwrap();
    assert!(!stopped_now(&mut *a), "host b acted on it");

    // A later supervisor of host b supersedes the first: the first writes nothing more,
    // and the new one writes once it took the lane.
    let sb2 = b.register_supervisor("host-b", 201, 23, HOUR).unwrap();
    let e = b.put_lane_as(&stopped, sb).unwrap_err();
    assert!(
        e.to_string()
            .contains(&format!("superseded by supervisor {sb2}")),
        "{e}"
    );
    b.take_lane("x", sb2, &[]).unwrap();
    b.put_lane_as(&stopped, sb2).unwrap();
    assert_eq!(b.lane("x").unwrap().unwrap().state, LaneState::Stopped);
}
