//! The conscience's record, one test body run against both backends: each lane's
//! compaction epoch, a maxim publishing at most once per lane per epoch (also with two
//! publishers racing on two connections), the log with each reminder's answer derived
//! from its item, a stopping lane's reminders expired, proposals filed once per theme.

use crate::common;
use common::backend::{both, Fleet};
use spice::store::{NewStep, Scope};
use std::sync::{Arc, Barrier};
use std::time::Duration;

both!(once_per_epoch_answers_derived_and_expiry_on_stop);
both!(epochs_count_compactions_per_lane);
both!(two_publishers_racing_publish_once);
both!(the_log_keeps_a_lanes_newest_steps);
both!(a_reminder_unanswered_past_its_ttl_reads_expired);
both!(a_reminder_needs_text);

fn step<'a>(lane: &'a str, maxim: &'a str, epoch: i64, step: &'a str) -> NewStep<'a> {
    NewStep {
        lane,
        maxim,
        epoch,
        step,
        detail: serde_json::json!({ "line": 3 }),
    }
}

const MINUTE: Duration = Duration::from_secs(60);

/// The SQLite store's unit test (src/store/conscience.rs), on both backends.
fn once_per_epoch_answers_derived_and_expiry_on_stop(f: &Fleet) {
    let mut s = f.authority();
    assert_eq!(s.conscience_epoch("a").unwrap(), 0);
    s.conscience_note(&step("a", "polling", 0, "fired"))
        .unwrap();
    let published = step("a", "polling", 0, "published");
    let k1 = s
        .conscience_publish(&published, "[MAXIM polling] x", MINUTE)
        .unwrap()
        .unwrap();
    assert!(s
        .conscience_publish(&published, "[MAXIM polling] x", MINUTE)
        .unwrap()
        .is_none());
    assert_eq!(
        s.conscience_fired("a", "polling", 0).unwrap().as_deref(),
        Some(k1.as_str())
    );
    assert_eq!(s.conscience_fired("a", "polling", 1).unwrap(), None);
    assert_eq!(s.conscience_fired("b", "polling", 0).unwrap(), None);
    // The reminder is an ordinary item for the lane.
    let item = s.item(&k1).unwrap();
    assert_eq!(item.target.name, "a");
    assert_eq!(item.text, "[MAXIM polling] x");
    assert_eq!(s.conscience_compacted("a", 1).unwrap(), 1);
    let k2 = s
        .conscience_publish(
            &step("a", "polling", 1, "published"),
            "[MAXIM polling] y",
            MINUTE,
        )
        .unwrap()
        .unwrap();
    let k3 = s
        .conscience_publish(
            &step("a", "shims", 1, "published"),
            "[MAXIM shims] z",
            MINUTE,
        )
        .unwrap()
        .unwrap();
    // Another lane's reminder is not expired with this one's.
    let other = s
        .conscience_publish(
            &step("b", "shims", 0, "published"),
            "[MAXIM shims] w",
            MINUTE,
        )
        .unwrap()
        .unwrap();
    std::thread::sleep(Duration::from_millis(5));
    let text = format!("ACK {k1}: removed the loop\nNACK {k2}: it is a real poll of a device");
    s.apply_acks_in(&spice::steer::grammar::parse(&text), "t", Scope::Any)
        .unwrap();
    assert_eq!(
        s.expire_reminders("a", "the supervisor stopped").unwrap(),
        vec![k3.clone()]
    );
    assert!(s.expire_reminders("a", "again").unwrap().is_empty());
    assert_eq!(s.item(&k3).unwrap().state, spice::store::ItemState::Expired);
    assert_eq!(
        s.item(&other).unwrap().state,
        spice::store::ItemState::Pending
    );
    let log = s.conscience_log(Some("a"), 100).unwrap();
    let steps: Vec<(&str, Option<&str>)> = log
        .iter()
        .map(|e| (e.step.as_str(), e.key.as_deref()))
        .collect();
    assert_eq!(
        steps,
        [
            ("fired", None),
            ("published", Some(k1.as_str())),
            ("acked", Some(k1.as_str())),
            ("published", Some(k2.as_str())),
            ("nacked", Some(k2.as_str())),
            ("published", Some(k3.as_str())),
            ("expired", Some(k3.as_str())),
        ]
    );
    assert_eq!(log[0].detail["line"], 3);
    assert_eq!(log[1].maxim, "polling");
    assert_eq!(log[3].epoch, 1);
    assert_eq!(log[2].detail["body"], "removed the loop");
    assert_eq!(log[4].detail["body"], "it is a real poll of a device");
    assert_eq!(log[6].detail["why"], "the supervisor stopped");
    // A derived entry takes its publication's seq, and its answer's time.
    assert_eq!(log[2].seq, log[1].seq);
    assert!(log[2].at > log[1].at, "{log:?}");
    // Every lane: lane b's reminder too, still pending (nothing derived).
    let all = s.conscience_log(None, 100).unwrap();
    assert_eq!(all.len(), 8);
    assert_eq!(all.last().unwrap().key.as_deref(), Some(other.as_str()));
    assert!(s.proposal("retry").unwrap().is_none());
    assert!(s.record_proposal("retry", "T1").unwrap());
    assert!(!s.record_proposal("retry", "T2").unwrap());
    let p = s.proposal("retry").unwrap().unwrap();
    assert_eq!((p.theme.as_str(), p.task_id.as_str()), ("retry", "T1"));
    assert!(p.at > 0);
}

fn epochs_count_compactions_per_lane(f: &Fleet) {
    let mut s = f.authority();
    assert_eq!(s.conscience_compacted("a", 2).unwrap(), 2);
    assert_eq!(s.conscience_compacted("a", 3).unwrap(), 5);
    assert_eq!(s.conscience_compacted("b", 1).unwrap(), 1);
    let mut other = f.authority();
    assert_eq!(other.conscience_epoch("a").unwrap(), 5);
    assert_eq!(other.conscience_epoch("b").unwrap(), 1);
    assert_eq!(other.conscience_epoch("c").unwrap(), 0);
}

/// Two supervisors (two connections) publish the same maxim in the same epoch at
/// once, many times over: each time one reminder, one record, one `published` step.
fn two_publishers_racing_publish_once(f: &Fleet) {
    const ROUNDS: i64 = 20;
    let barrier = Arc::new(Barrier::new(2));
    let won: Vec<Vec<Option<String>>> = std::thread::scope(|sc| {
        let racers: Vec<_> = (0..2)
            .map(|i| {
                let barrier = barrier.clone();
                sc.spawn(move || {
                    let mut s = f.authority();
                    (0..ROUNDS)
                        .map(|epoch| {
                            barrier.wait();
                            s.conscience_publish(
                                &step("a", "polling", epoch, "published"),
                                &format!("[MAXIM polling] from {i}"),
                                MINUTE,
                            )
                            .unwrap()
                        })
                        .collect()
                })
            })
            .collect();
        racers.into_iter().map(|r| r.join().unwrap()).collect()
    });
    let mut s = f.authority();
    for epoch in 0..ROUNDS {
        let keys: Vec<&String> = won
            .iter()
            .filter_map(|w| w[epoch as usize].as_ref())
            .collect();
        assert_eq!(keys.len(), 1, "epoch {epoch}: {won:?}");
        assert_eq!(
            s.conscience_fired("a", "polling", epoch).unwrap().as_ref(),
            Some(keys[0])
        );
    }
    let items = s.inbox(&[], true).unwrap();
    assert_eq!(items.len() as i64, ROUNDS, "no reminder without its record");
    let log = s.conscience_log(None, 1000).unwrap();
    assert_eq!(log.len() as i64, ROUNDS);
    assert!(log.iter().all(|e| e.step == "published"));
}

fn the_log_keeps_a_lanes_newest_steps(f: &Fleet) {
    let mut s = f.authority();
    for (lane, n) in [("a", 0), ("b", 1), ("a", 2), ("a", 3), ("b", 4)] {
        s.conscience_note(&NewStep {
            lane,
            maxim: "m",
            epoch: 0,
            step: "judge",
            detail: serde_json::json!({ "n": n, "answer": { "verdict": "yes" } }),
        })
        .unwrap();
    }
    let ns = |v: Vec<spice::store::ConscienceEntry>| -> Vec<i64> {
        v.iter().map(|e| e.detail["n"].as_i64().unwrap()).collect()
    };
    assert_eq!(ns(s.conscience_log(Some("a"), 2).unwrap()), [2, 3]);
    assert_eq!(ns(s.conscience_log(Some("a"), 10).unwrap()), [0, 2, 3]);
    assert_eq!(ns(s.conscience_log(None, 3).unwrap()), [2, 3, 4]);
    assert!(s.conscience_log(Some("c"), 10).unwrap().is_empty());
    let e = &s.conscience_log(Some("b"), 1).unwrap()[0];
    assert_eq!(e.detail["answer"]["verdict"], "yes");
    assert_eq!((e.step.as_str(), e.key.as_deref()), ("judge", None));
}

fn a_reminder_unanswered_past_its_ttl_reads_expired(f: &Fleet) {
    let mut s = f.authority();
    let k = s
        .conscience_publish(
            &step("a", "polling", 0, "published"),
            "[MAXIM polling] x",
            Duration::from_millis(1),
        )
        .unwrap()
        .unwrap();
    std::thread::sleep(Duration::from_millis(20));
    let log = s.conscience_log(Some("a"), 10).unwrap();
    let steps: Vec<&str> = log.iter().map(|e| e.step.as_str()).collect();
    assert_eq!(steps, ["published", "expired"]);
    assert_eq!(log[1].detail["why"], "unanswered within its TTL");
    assert_eq!(log[1].at, s.item(&k).unwrap().expires);
    // Already past its TTL, the stop still records why it will never be answered.
    assert_eq!(s.expire_reminders("a", "stopped").unwrap(), vec![k]);
    let log = s.conscience_log(Some("a"), 10).unwrap();
    assert_eq!(log[1].detail["why"], "stopped");
}

fn a_reminder_needs_text(f: &Fleet) {
    let mut s = f.authority();
    let err = s
        .conscience_publish(&step("a", "polling", 0, "published"), "  ", MINUTE)
        .unwrap_err()
        .to_string();
    assert!(err.contains("a steering item needs some text"), "{err}");
    assert_eq!(s.conscience_fired("a", "polling", 0).unwrap(), None);
    assert!(s.conscience_log(None, 10).unwrap().is_empty());
}
