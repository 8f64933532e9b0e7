//! The usage and budget contract, one test body run against both backends: SQLite (the
//! embedded default) and PostgreSQL. Metered usage adds per session and moves only
//! with its transcript's checkpoint (a failed write applies nothing, so the lines read
//! again count once), what the reading remembers round-trips, and budgets are raised,
//! set, stopped and read with the same refusals; writers on connections of their own
//! lose neither tokens nor a raise. Bed slots: `tests/it/store_beds.rs`.

use crate::common;
use common::backend::{both, Fleet};
use spice::clock::SystemClock;
use spice::store::vocab::Checkpoint;
use spice::store::{
    Authority, BudgetScope, ClaimRequest, Delta, Holder, Metered, Target, TargetKind,
};
use std::sync::{Arc, Barrier};
use std::time::Duration;

both!(usage_moves_with_the_checkpoint_and_adds_per_session);
both!(a_sessions_tokens_count_for_the_task_it_was_launched_for);
both!(directives_checkpoint_and_usage_are_one_transaction);
both!(a_raise_lifts_the_budget_and_clears_a_stop_but_never_lowers_it);
both!(a_set_goes_either_way_and_keeps_a_stop);
both!(budgets_list_every_budget_with_its_usage);
both!(writers_on_connections_of_their_own_lose_no_tokens_and_no_raise);

fn target(kind: TargetKind, name: &str) -> Target {
    Target {
        kind,
        name: name.into(),
    }
}

fn writer(session: &str, lane: &str) -> Vec<Target> {
    vec![
        target(TargetKind::Session, session),
        target(TargetKind::Lane, lane),
    ]
}

fn delta(input: i64, output: i64) -> Metered {
    Metered {
        delta: Delta {
            input,
            output,
            ..Delta::default()
        },
        carry: Some(format!("{input}/{output}")),
    }
}

fn at(line: u64) -> Checkpoint {
    Checkpoint {
        offset: line * 10,
        line,
        hash: u64::MAX - line,
    }
}

/// A new task claimed by `claimant` working in `worktree`: its id and holder.
fn claim(s: &mut dyn Authority, claimant: &str, worktree: &str) -> (String, Holder) {
    let t = s
        .add_task(
            spice::task::NewTask {
                title: claimant.into(),
                ..Default::default()
            },
            &[],
        )
        .unwrap();
    let req = ClaimRequest {
        claimant: claimant.to_string(),
        lane: None,
        worktree: Some(worktree.to_string()),
        lease: Duration::from_secs(600),
    };
    let c = s.claim(&t.id, &req).unwrap();
    (t.id, Holder::fenced(claimant.to_string(), c.fence))
}

fn usage_moves_with_the_checkpoint_and_adds_per_session(f: &Fleet) {
    let mut s = f.authority();
    let w = writer("s1", "a");
    assert_eq!(s.usage_carry("/t.jsonl").unwrap(), None);
    s.apply_transcript_metered("/t.jsonl", at(2), &[], &w, &delta(10, 5))
        .unwrap();
    s.apply_transcript_metered("/t.jsonl", at(4), &[], &w, &delta(-2, 7))
        .unwrap();
    assert_eq!(s.transcript_checkpoint("/t.jsonl").unwrap(), Some(at(4)));
    assert_eq!(s.usage_carry("/t.jsonl").unwrap().as_deref(), Some("-2/7"));
    let rows = s.session_usage().unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(
        (rows[0].tokens.input, rows[0].tokens.output),
        (8, 12),
        "a replaced figure lowers what its message added"
    );
    assert_eq!(rows[0].lane.as_deref(), Some("a"));
    assert_eq!(
        (rows[0].path.as_str(), rows[0].session.as_str()),
        ("/t.jsonl", "s1")
    );
    // No row goes below zero, whatever a replaced figure says.
    s.apply_transcript_metered("/t.jsonl", at(5), &[], &w, &delta(-100, 0))
        .unwrap();
    assert_eq!(s.session_usage().unwrap()[0].tokens.input, 0);
    s.apply_transcript_metered("/t.jsonl", at(5), &[], &w, &delta(8, 0))
        .unwrap();
    // A scan with nothing new leaves the carry as it was when it has none to write.
    let nothing = Metered {
        delta: Delta::default(),
        carry: None,
    };
    s.apply_transcript_metered("/t.jsonl", at(5), &[], &w, &nothing)
        .unwrap();
    assert_eq!(s.usage_carry("/t.jsonl").unwrap().as_deref(), Some("8/0"));
    // A successor on the same transcript has its own row; a transcript read by hand
    // counts under no session, and toward no lane.
    s.apply_transcript_metered("/t.jsonl", at(6), &[], &writer("s2", "a"), &delta(1, 1))
        .unwrap();
    s.apply_transcript_metered("/u.jsonl", at(1), &[], &[], &delta(100, 0))
        .unwrap();
    let rows = s.session_usage().unwrap();
    assert_eq!(rows.len(), 3);
    assert!(rows
        .iter()
        .any(|r| r.session.is_empty() && r.lane.is_none()));
    assert!(
        rows.windows(2).all(|w| w[0].updated >= w[1].updated),
        "newest first: {rows:?}"
    );
    let b = s.budget_state("a", None, Some(20)).unwrap();
    assert_eq!(b.lane.used, 22);
    assert!(b.lane.crossed());
    assert_eq!(b.crossed().unwrap(), "budget: lane used 22 of 20 tokens");
    // What one connection wrote, another reads (a restart resumes from it).
    let mut again = f.authority();
    assert_eq!(
        again.usage_carry("/t.jsonl").unwrap().as_deref(),
        Some("1/1")
    );
    assert_eq!(again.budget_state("a", None, None).unwrap().lane.used, 22);
}

fn a_sessions_tokens_count_for_the_task_it_was_launched_for(f: &Fleet) {
    let mut s = f.authority();
    let (task, _) = claim(&mut *s, "s1", "/w/a");
    s.apply_transcript_metered("/t.jsonl", at(1), &[], &writer("s1", "a"), &delta(30, 0))
        .unwrap();
    let rows = s.session_usage().unwrap();
    assert_eq!(rows[0].task_id.as_deref(), Some(task.as_str()));
    // Without a budget of its own, the task does not answer to one.
    assert_eq!(s.budget_state("a", Some(&task), None).unwrap().task, None);
    let t = BudgetScope::Task(task.clone());
    s.budget_set(&t, 25).unwrap();
    let st = s.budget_state("b", Some(&task), None).unwrap();
    let tb = st.task.clone().unwrap();
    assert_eq!((tb.limit, tb.used), (Some(25), 30));
    assert_eq!(st.lane.used, 0, "lane b spent nothing");
    assert_eq!(
        st.crossed().as_deref(),
        Some("budget: task used 30 of 25 tokens")
    );
}

fn directives_checkpoint_and_usage_are_one_transaction(f: &Fleet) {
    let mut s = f.authority();
    let ttl = Duration::from_secs(3600);
    let mine = s
        .steer(&target(TargetKind::Lane, "core"), "mine", ttl)
        .unwrap()
        .key;
    let directives = spice::steer::grammar::parse(&format!("ACK {mine}: done\n"));
    let path = "/transcripts/core.jsonl";
    let w = writer("s1", "core");
    f.break_writes("usage", true);
    let e = s
        .apply_transcript_metered(path, at(2), &directives, &w, &delta(40, 2))
        .unwrap_err()
        .to_string();
    assert!(e.contains("injected failure"), "{e}");
    // The usage could not be written, so neither was anything else.
    assert_eq!(s.transcript_checkpoint(path).unwrap(), None);
    assert_eq!(s.usage_carry(path).unwrap(), None);
    assert!(s.acks_for(&mine).unwrap().is_empty());
    assert_eq!(
        s.inbox(&[], false).unwrap().len(),
        1,
        "the item is still pending"
    );
    f.break_writes("usage", false);
    // The lines are read again from the old checkpoint: counted once.
    let out = s
        .apply_transcript_metered(path, at(2), &directives, &w, &delta(40, 2))
        .unwrap();
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].effect, spice::store::Effect::Acked);
    assert_eq!(s.transcript_checkpoint(path).unwrap(), Some(at(2)));
    let rows = s.session_usage().unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].tokens.total(), 42);
    // A restart reads on from the checkpoint: nothing new, nothing added.
    let mut restarted = f.authority();
    let cp = restarted.transcript_checkpoint(path).unwrap().unwrap();
    let carry = restarted.usage_carry(path).unwrap();
    assert_eq!((cp, carry.as_deref()), (at(2), Some("40/2")));
    let again = restarted
        .apply_transcript_metered(path, cp, &directives, &w, &Metered::default())
        .unwrap();
    assert_eq!(again[0].effect, spice::store::Effect::Duplicate);
    assert_eq!(restarted.session_usage().unwrap()[0].tokens.total(), 42);
    assert_eq!(restarted.acks_for(&mine).unwrap().len(), 1);
}

fn a_raise_lifts_the_budget_and_clears_a_stop_but_never_lowers_it(f: &Fleet) {
    let mut s = f.authority();
    s.apply_transcript_metered("/t.jsonl", at(1), &[], &writer("s1", "a"), &delta(30, 0))
        .unwrap();
    let lane = BudgetScope::Lane("a".into());
    assert!(s.budget_state("a", None, Some(20)).unwrap().lane.crossed());
    s.budget_stop(&lane).unwrap();
    assert!(s.budget_state("a", None, Some(20)).unwrap().stop());
    let b = s.budget_raise(&lane, 50).unwrap();
    assert_eq!((b.limit, b.used, b.stop), (Some(50), 30, false));
    let st = s.budget_state("a", None, Some(20)).unwrap();
    assert!(!st.lane.crossed() && !st.stop());
    // The file's floor still counts when it is the higher.
    assert_eq!(
        s.budget_state("a", None, Some(80)).unwrap().lane.limit,
        Some(80)
    );
    let e = s.budget_raise(&lane, 40).unwrap_err().to_string();
    assert!(
        e.contains("the lane a's budget is 50 tokens: a raise cannot lower it to 40"),
        "{e}"
    );
    assert_eq!(
        s.budget_state("a", None, None).unwrap().lane.limit,
        Some(50)
    );
    // A raise to the same figure is no lowering.
    assert_eq!(s.budget_raise(&lane, 50).unwrap().limit, Some(50));
}

fn a_set_goes_either_way_and_keeps_a_stop(f: &Fleet) {
    let mut s = f.authority();
    let t = BudgetScope::Task("T1".into());
    s.budget_raise(&t, 100).unwrap();
    s.budget_stop(&t).unwrap();
    let b = s.budget_set(&t, 10).unwrap();
    assert_eq!(
        (b.limit, b.stop),
        (Some(10), true),
        "lowered, still stopped"
    );
    assert!(s.budget_state("x", Some("T1"), None).unwrap().stop());
    s.budget_stopped(&t, None).unwrap();
    let st = s.budget_state("x", Some("T1"), None).unwrap();
    assert!(!st.stop());
    assert_eq!(st.task.unwrap().limit, Some(10));
    // A stop alone makes a budget the task answers to, with no limit.
    let other = BudgetScope::Task("T2".into());
    s.budget_stop(&other).unwrap();
    let st = s.budget_state("x", Some("T2"), None).unwrap();
    assert_eq!(
        st.task.clone().map(|b| (b.limit, b.stop)),
        Some((None, true))
    );
    assert_eq!(st.crossed(), None);
    // Clearing a stop on a budget never set writes nothing.
    s.budget_stopped(&BudgetScope::Lane("ghost".into()), None)
        .unwrap();
    assert!(s.budgets().unwrap().iter().all(|b| b.name != "ghost"));
}

fn budgets_list_every_budget_with_its_usage(f: &Fleet) {
    let mut s = f.authority();
    let (task, _) = claim(&mut *s, "s1", "/w/a");
    s.apply_transcript_metered("/t.jsonl", at(1), &[], &writer("s1", "b"), &delta(7, 3))
        .unwrap();
    s.budget_raise(&BudgetScope::Lane("b".into()), 100).unwrap();
    s.budget_stop(&BudgetScope::Lane("a".into())).unwrap();
    s.budget_set(&BudgetScope::Task(task.clone()), 5).unwrap();
    let rows: Vec<_> = s
        .budgets()
        .unwrap()
        .into_iter()
        .map(|b| (b.kind, b.name, b.limit, b.used, b.stop))
        .collect();
    assert_eq!(
        rows,
        [
            ("lane".to_string(), "a".to_string(), None, 0, true),
            ("lane".to_string(), "b".to_string(), Some(100), 10, false),
            ("task".to_string(), task, Some(5), 10, false),
        ]
    );
}

fn writers_on_connections_of_their_own_lose_no_tokens_and_no_raise(f: &Fleet) {
    const N: usize = 4;
    const SCANS: u64 = 10;
    let loc = f.location();
    let start = Arc::new(Barrier::new(N));
    let handles: Vec<_> = (0..N)
        .map(|i| {
            let (loc, start) = (loc.clone(), start.clone());
            std::thread::spawn(move || {
                let mut s = spice::store::connect(&loc, Arc::new(SystemClock)).unwrap();
                start.wait();
                // Every writer's scans add to one session's row; each raises the lane.
                let w = writer("s1", "a");
                for n in 1..=SCANS {
                    s.apply_transcript_metered("/t.jsonl", at(n), &[], &w, &delta(1, 0))
                        .unwrap();
                }
                s.budget_raise(&BudgetScope::Lane("a".into()), 100 + i as u64)
                    .map(|b| b.limit)
            })
        })
        .collect();
    let raised: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    let mut s = f.authority();
    assert_eq!(
        s.budget_state("a", None, None).unwrap().lane.used,
        N as u64 * SCANS
    );
    // A raise is refused only below a raise committed before it: the highest stands.
    assert!(raised.iter().any(|r| r.is_ok()), "{raised:?}");
    assert_eq!(
        s.budget_state("a", None, None).unwrap().lane.limit,
        Some(100 + N as u64 - 1),
        "{raised:?}"
    );
}
