//! The steering contract, one test body run against both backends: SQLite (the
//! embedded default) and PostgreSQL (`[store] url` in the state directory's
//! `config.toml`). Items, the inbox, ACK and NACK with their records, a bare NACK's
//! problem, expiry kept distinct, an ACK outside its scope `not-addressed`, a re-read
//! line changing nothing, a transcript's directives and checkpoint in one transaction,
//! change notification. Steering across hosts on PostgreSQL: `tests/it/steer_hosts.rs`.

use crate::common;
use common::backend::{both, Fleet};
use common::TestEnv;
use spice::store::{Target, TargetKind};
use std::time::Duration;

both!(an_ack_retires_its_item_once_and_keeps_the_record);
both!(a_nack_refuses_and_a_bare_nack_leaves_a_problem_until_retired);
both!(items_expire_distinctly_and_a_late_ack_is_only_recorded);
both!(an_ack_outside_its_targets_is_not_addressed);
both!(exec_shows_pending_items_and_counts_each_showing);
both!(a_transcripts_directives_and_checkpoint_are_one_transaction);
both!(the_change_token_moves_when_another_writer_steers);
both!(a_session_target_is_completed_from_a_prefix_the_store_knows);
both!(the_claude_hook_shows_a_due_item_once);

fn pending(env: &TestEnv) -> Vec<String> {
    let p = env.run(&["inbox", "--json"]).json();
    p.as_array()
        .unwrap()
        .iter()
        .map(|i| i["key"].as_str().unwrap().to_string())
        .collect()
}

fn lane(name: &str) -> Target {
    Target {
        kind: TargetKind::Lane,
        name: name.into(),
    }
}

fn effects(f: &Fleet, key: &str) -> Vec<String> {
    f.authority()
        .acks_for(key)
        .unwrap()
        .into_iter()
        .map(|a| a.effect)
        .collect()
}

fn an_ack_retires_its_item_once_and_keeps_the_record(f: &Fleet) {
    let env = &f.env;
    let k = env.steer_forced("lane:core", "split the test file into three shards");
    let other = env.steer_forced("lane:core", "and keep the old name as an alias");
    assert!(other > k, "keys sort as they were made: {k} {other}");
    assert_eq!(pending(env), [k.clone(), other.clone()]);
    let first = env.item(&k);
    assert_eq!(first["state"], "pending");
    assert_eq!(first["target"], "core");
    assert_eq!(first["target_kind"], "lane");
    let text = format!("Done.\n\n- **ACK {k}:** split into shards a, b, c\n");
    let out = env
        .run_stdin(&["ack", "apply", "--source", "transcript.jsonl"], &text)
        .ok()
        .to_string();
    assert!(out.contains(&format!("{k} (line 3): acked")), "{out}");
    assert_eq!(pending(env), std::slice::from_ref(&other));
    let acked = env.item(&k);
    assert_eq!(acked["state"], "acked");
    assert_eq!(acked["reply"]["body"], "split into shards a, b, c");
    assert_eq!(acked["reply"]["source"], "transcript.jsonl");
    assert_eq!(acked["reply"]["line"], 3);
    // The same line read again changes nothing and records nothing new.
    let again = env
        .run_stdin(&["ack", "apply", "--source", "transcript.jsonl"], &text)
        .ok()
        .to_string();
    assert!(again.contains("seen before"), "{again}");
    assert_eq!(effects(f, &k), ["acked"]);
    assert_eq!(env.item(&k)["closed_at"], acked["closed_at"]);
    // An unknown key is recorded and retires nothing.
    let out = env
        .run_stdin(&["ack", "apply"], "ACK dMbnngX3j: done\n")
        .ok()
        .to_string();
    assert!(out.contains("dMbnngX3j (line 1): unknown key"), "{out}");
    assert_eq!(pending(env), [other]);
}

fn a_nack_refuses_and_a_bare_nack_leaves_a_problem_until_retired(f: &Fleet) {
    let env = &f.env;
    let a = env.steer_forced("lane:core", "edit the generated file");
    let b = env.steer_forced("lane:core", "rename everything");
    let text = format!("NACK {a}: the file is generated; edits would be lost\nNACK {b}\n");
    env.run_stdin(&["ack", "apply"], &text).ok();
    assert_eq!(env.item(&a)["state"], "refused");
    let sb = env.item(&b);
    assert_eq!(sb["state"], "pending");
    assert!(
        sb["problem"]
            .as_str()
            .is_some_and(|p| p.contains("without a reason at <stdin>:2")),
        "{sb}"
    );
    let keyless = env
        .run_stdin(&["ack", "apply"], "ACK: will do\n")
        .ok()
        .to_string();
    assert!(keyless.contains("keyless"), "{keyless}");
    env.run_stdin(&["ack", "apply"], &format!("ACK {b}: renamed after all\n"))
        .ok();
    let after = env.item(&b);
    assert_eq!(after["state"], "acked", "{after}");
    assert!(
        after["problem"].is_null(),
        "retiring clears the problem: {after}"
    );
    assert_eq!(effects(f, &b), ["no-reason", "acked"]);
}

fn items_expire_distinctly_and_a_late_ack_is_only_recorded(f: &Fleet) {
    let env = &f.env;
    let short = env
        .run(&[
            "steer",
            "--force",
            "lane:core",
            "--ttl",
            "1ms",
            "soon stale",
        ])
        .ok()
        .trim()
        .to_string();
    let k = env.steer_forced("lane:core", "keep going");
    common::wait_for("the short item to expire", 10, || {
        (env.item(&short)["state"] == "expired").then_some(())
    });
    assert_eq!(pending(env), std::slice::from_ref(&k));
    let out = env
        .run_stdin(&["ack", "apply"], &format!("ACK {short}: late\n"))
        .ok()
        .to_string();
    assert!(out.contains("already closed"), "{out}");
    let s = env.item(&short);
    assert_eq!(s["state"], "expired", "{s}");
    assert!(
        !s["closed_at"].is_null(),
        "the write recorded the expiry: {s}"
    );
    assert_eq!(effects(f, &short), ["already-closed"]);
    assert_eq!(env.item(&k)["state"], "pending");
}

fn an_ack_outside_its_targets_is_not_addressed(f: &Fleet) {
    let env = &f.env;
    let a = env.steer_forced("lane:a", "first");
    let b = env.steer_forced("lane:b", "second");
    let text = format!("ACK {a}: done\nACK {b}: done too\n");
    let out = env
        .run_stdin(&["ack", "apply", "--target", "lane:a"], &text)
        .ok()
        .to_string();
    assert!(out.contains(&format!("{a} (line 1): acked")), "{out}");
    assert!(
        out.contains(&format!("{b} (line 2): addressed to another")),
        "{out}"
    );
    assert_eq!(env.item(&b)["state"], "pending");
    assert_eq!(effects(f, &b), ["not-addressed"]);
    // The operator's own word, from another source, counts for any item.
    env.run_stdin(&["ack", "apply", "--source", "notes.md"], &text)
        .ok();
    assert_eq!(env.item(&b)["state"], "acked");
}

fn exec_shows_pending_items_and_counts_each_showing(f: &Fleet) {
    let env = &f.env;
    let k = env.steer_forced("lane:core", "use the v2 API");
    let elsewhere = env.steer_forced("lane:other", "not for core");
    let r = env
        .cmd(&["exec", "--", "sh", "-c", "echo out; echo err >&2; exit 3"])
        .env("SPICE_LANE", "core")
        .output()
        .unwrap();
    assert_eq!(r.status.code(), Some(3), "the command's exit code is kept");
    assert_eq!(
        String::from_utf8_lossy(&r.stdout),
        "out\n",
        "stdout untouched"
    );
    let stderr = String::from_utf8_lossy(&r.stderr);
    assert!(
        stderr.contains(&k) && !stderr.contains(&elsewhere),
        "{stderr}"
    );
    assert_eq!(stderr.matches(&k).count(), 2, "before and after: {stderr}");
    let s = env.item(&k);
    assert_eq!(s["shown"], 2, "{s}");
    assert!(!s["last_shown"].is_null(), "{s}");
    assert_eq!(s["state"], "pending", "showing never retires");
}

fn a_transcripts_directives_and_checkpoint_are_one_transaction(f: &Fleet) {
    let env = &f.env;
    let mine = env.steer_forced("lane:core", "mine");
    let theirs = env.steer_forced("lane:other", "theirs");
    let directives =
        spice::steer::grammar::parse(&format!("ACK {mine}: done\nACK {theirs}: done too\n"));
    let cp = spice::store::vocab::Checkpoint {
        offset: 120,
        line: 2,
        hash: u64::MAX - 7,
    };
    let path = "/transcripts/core.jsonl";
    let mut store = f.authority();
    assert_eq!(store.transcript_checkpoint(path).unwrap(), None);
    f.break_writes("transcript_checkpoints", true);
    let e = store
        .apply_transcript(path, cp, &directives, &[lane("core")])
        .unwrap_err()
        .to_string();
    assert!(e.contains("injected failure"), "{e}");
    // The checkpoint could not move, so neither did the item nor its record.
    assert_eq!(store.transcript_checkpoint(path).unwrap(), None);
    assert_eq!(env.item(&mine)["state"], "pending");
    assert!(effects(f, &mine).is_empty());
    f.break_writes("transcript_checkpoints", false);
    let out = store
        .apply_transcript(path, cp, &directives, &[lane("core")])
        .unwrap();
    let got: Vec<(String, String)> = out
        .iter()
        .map(|o| (o.key.clone(), format!("{:?}", o.effect)))
        .collect();
    assert_eq!(
        got,
        [
            (mine.clone(), "Acked".to_string()),
            (theirs.clone(), "NotAddressed".to_string())
        ]
    );
    assert_eq!(store.transcript_checkpoint(path).unwrap(), Some(cp));
    // Read again after a restart: every line a duplicate, nothing changes.
    let mut restarted = f.authority();
    let again = restarted
        .apply_transcript(path, cp, &directives, &[lane("core")])
        .unwrap();
    assert!(
        again
            .iter()
            .all(|o| o.effect == spice::store::Effect::Duplicate),
        "{again:?}"
    );
    assert_eq!(effects(f, &mine), ["acked"]);
    assert_eq!(effects(f, &theirs), ["not-addressed"]);
    assert_eq!(env.item(&theirs)["state"], "pending");
}

fn the_change_token_moves_when_another_writer_steers(f: &Fleet) {
    let mut store = f.authority();
    store.inbox(&[], false).unwrap();
    let seen = store.change_token().unwrap();
    // Nothing changes: the wait ends at its timeout with the token where it was.
    assert_eq!(
        store.wait_change(seen, Duration::from_millis(300)).unwrap(),
        seen
    );
    let env = &f.env;
    let key = std::thread::scope(|s| {
        let writer = s.spawn(|| env.steer_forced("lane:core", "wake up"));
        let moved = store.wait_change(seen, Duration::from_secs(20)).unwrap();
        assert_ne!(moved, seen, "a steer by another process moves the token");
        writer.join().unwrap()
    });
    let keys: Vec<String> = store
        .inbox(&[lane("core")], false)
        .unwrap()
        .into_iter()
        .map(|i| i.key)
        .collect();
    assert_eq!(keys, [key], "the change is visible once the token moved");
}

fn a_session_target_is_completed_from_a_prefix_the_store_knows(f: &Fleet) {
    let env = &f.env;
    let session = "3f2a0000-0000-4000-8000-000000000001";
    let id = env.add(&["work"]);
    env.run(&["task", "claim", &id, "--claimant", session]).ok();
    let k = env.steer_forced("session:3f2a0000", "hello, session");
    let it = env.item(&k);
    assert_eq!(it["target_kind"], "session");
    assert_eq!(it["target"], session, "the prefix was completed: {it}");
    // A prefix of no known session is kept as typed (a session not seen yet).
    let k = env.steer_forced("session:9e9e9e9e", "for later");
    assert_eq!(env.item(&k)["target"], "9e9e9e9e");
}

fn the_claude_hook_shows_a_due_item_once(f: &Fleet) {
    let env = &f.env;
    let k = env.steer_forced("lane:core", "use the v2 API");
    let hook = || {
        let r = env
            .cmd(&["hook", "claude-post-tool-use"])
            .env("SPICE_LANE", "core")
            .output()
            .unwrap();
        assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
        String::from_utf8(r.stdout).unwrap()
    };
    let first = hook();
    let v: serde_json::Value = serde_json::from_str(&first).unwrap();
    let ctx = v["hookSpecificOutput"]["additionalContext"]
        .as_str()
        .unwrap();
    assert!(ctx.contains(&k) && ctx.contains("use the v2 API"), "{ctx}");
    assert_eq!(hook(), "", "shown once until its re-show gap passes");
    assert_eq!(env.item(&k)["shown"], 1);
}
