//! The steering lifecycle through the real binary: items, the inbox, ACK/NACK
//! retirement with their records, expiry, and times shown.

use crate::common;
use common::TestEnv;

#[test]
fn ack_retires_and_keeps_the_record() {
    let env = TestEnv::new();
    let k = env.steer_forced("lane:core", "split the test file into three shards");
    let pending = env.run(&["inbox", "--json"]).json();
    assert_eq!(pending[0]["key"], k.as_str());
    assert_eq!(pending[0]["state"], "pending");
    assert_eq!(pending[0]["target"], "core");
    let text = format!("Done.\n\n- **ACK {k}:** split into shards a, b, c\n");
    let out = env
        .run_stdin(&["ack", "apply", "--source", "transcript.jsonl"], &text)
        .ok()
        .to_string();
    assert!(out.contains(&format!("{k} (line 3): acked")), "{out}");
    assert_eq!(env.item(&k)["state"], "acked");
    assert!(env
        .run(&["inbox", "--json"])
        .json()
        .as_array()
        .unwrap()
        .is_empty());
    let rec: (String, String, String, i64) = env
        .sql()
        .query_row(
            "SELECT polarity, body, source, line FROM acks WHERE key = ?1",
            [&k],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
        )
        .unwrap();
    assert_eq!(
        rec,
        (
            "ack".into(),
            "split into shards a, b, c".into(),
            "transcript.jsonl".into(),
            3
        )
    );
    // The same line applied again changes nothing and records nothing new.
    let again = env
        .run_stdin(&["ack", "apply", "--source", "transcript.jsonl"], &text)
        .ok()
        .to_string();
    assert!(again.contains("seen before"), "{again}");
    assert_eq!(env.count("SELECT count(*) FROM acks"), 1);
}

#[test]
fn nack_with_a_reason_refuses_and_without_one_stays_pending() {
    let env = TestEnv::new();
    let a = env.steer_forced("lane:core", "edit the generated file");
    let b = env.steer_forced("lane:core", "rename everything");
    let text = format!("NACK {a}: the file is generated; edits would be lost\nNACK {b}\n");
    env.run_stdin(&["ack", "apply"], &text).ok();
    assert_eq!(env.item(&a)["state"], "refused");
    let sb = env.item(&b);
    assert_eq!(sb["state"], "pending");
    assert!(
        sb["problem"].as_str().unwrap().contains("without a reason"),
        "{sb}"
    );
    let keyless = env
        .run_stdin(&["ack", "apply"], "ACK: will do\n")
        .ok()
        .to_string();
    assert!(keyless.contains("keyless"), "{keyless}");
}

#[test]
fn items_expire_distinctly_and_showing_is_counted_not_consumed() {
    let env = TestEnv::new();
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
    std::thread::sleep(std::time::Duration::from_millis(20));
    assert_eq!(env.item(&short)["state"], "expired");
    let pending = env.run(&["inbox", "--json"]).json();
    assert_eq!(pending.as_array().unwrap().len(), 1);
    // Listing does not count as showing; the wrapper's before and after blocks do.
    let r = env
        .cmd(&["exec", "--", "true"])
        .env("SPICE_LANE", "core")
        .output()
        .unwrap();
    assert!(r.status.success());
    let stderr = String::from_utf8_lossy(&r.stderr);
    assert!(stderr.contains(&k) && !stderr.contains(&short), "{stderr}");
    let s = env.item(&k);
    assert_eq!(s["shown"], 2, "{s}");
    assert_eq!(s["state"], "pending");
    // An ACK after expiry is kept but does not turn expired into acked.
    let out = env
        .run_stdin(&["ack", "apply"], &format!("ACK {short}: late\n"))
        .ok()
        .to_string();
    assert!(out.contains("already closed"), "{out}");
    assert_eq!(env.item(&short)["state"], "expired");
}

#[test]
fn targets_and_messages_from_stdin() {
    let env = TestEnv::new();
    std::fs::create_dir_all(env.repo.join("lanes")).unwrap();
    std::fs::write(env.repo.join("lanes/core.toml"), "profile = \"demo\"\n").unwrap();
    let k = env
        .run_stdin(&["steer", "core", "-"], "line one\nline two\n")
        .ok()
        .trim()
        .to_string();
    let item = env.item(&k);
    assert_eq!(item["target_kind"], "lane");
    assert_eq!(item["text"], "line one\nline two");
    let w = env.steer_forced(".", "for whoever works here");
    let canon = std::fs::canonicalize(&env.repo).unwrap();
    assert_eq!(env.item(&w)["target"], canon.display().to_string());
    assert_eq!(env.item(&w)["target_kind"], "worktree");
    let uuid = "3f2a0000-0000-4000-8000-000000000001";
    assert_eq!(
        env.item(&env.steer_forced(uuid, "hi"))["target_kind"],
        "session"
    );
    env.run(&["steer", "nosuchlane", "x"])
        .fails(2, "unknown target 'nosuchlane'");
    env.run(&["steer", "lane:../x", "x"])
        .fails(2, "invalid lane name");
    env.run(&["steer", "lane:core", " "])
        .fails(2, "needs some text");
    env.run(&["inbox", "lane:core"]).ok();
}

#[test]
fn ack_parse_prints_json_lines_in_source_order() {
    let env = TestEnv::new();
    let text = "ACK dMbnngX3j: split the test file\nNACK dMbnq2HhR: generated\nACK: will do\n";
    let out = env
        .run_stdin(&["ack", "parse", "--json"], text)
        .ok()
        .to_string();
    let lines: Vec<serde_json::Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 3);
    assert_eq!(lines[0]["polarity"], "ack");
    assert_eq!(lines[0]["keys"][0], "dMbnngX3j");
    assert_eq!(lines[0]["line"], 1);
    assert_eq!(lines[0]["body"], "split the test file");
    assert_eq!(lines[1]["polarity"], "nack");
    assert_eq!(lines[2]["problem"], "keyless");
    assert_eq!(lines[2]["keys"].as_array().unwrap().len(), 0);
    // No store is needed to parse.
    let r = env
        .cmd(&["ack", "parse"])
        .env_remove("SPICE_HOME")
        .current_dir(env.dir.path())
        .output()
        .unwrap();
    assert!(r.status.success());
}

/// A Claude Code assistant line written by this test (not copied from any sample).
fn assistant(text: &str, n: u32) -> String {
    serde_json::json!({
        "type": "assistant", "uuid": format!("a{n}"), "parentUuid": null, "sessionId": "s1",
        "cwd": "/w", "timestamp": "2026-11-29T12:00:00.000Z",
        "message": { "role": "assistant", "id": format!("m{n}"), "model": "claude-test",
                     "content": [{ "type": "text", "text": text }] },
    })
    .to_string()
}

#[test]
fn transcript_scans_retire_acks_once_from_a_checkpoint() {
    let env = TestEnv::new();
    // Addressed to the session the transcript names for itself.
    let a = env.steer_forced("session:s1", "first");
    let b = env.steer_forced("session:s1", "second");
    let t = env.dir.path().join("session.jsonl");
    std::fs::write(
        &t,
        format!(
            "{}\n",
            assistant(&format!("Done.\n\nACK {a}: did the first"), 1)
        ),
    )
    .unwrap();
    let out = env
        .run(&["ack", "scan", t.to_str().unwrap()])
        .ok()
        .to_string();
    assert!(out.contains(&format!("{a} (line 1): acked")), "{out}");
    assert_eq!(env.item(&a)["state"], "acked");
    let rec: (String, i64) = env
        .sql()
        .query_row("SELECT source, line FROM acks WHERE key = ?1", [&a], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .unwrap();
    assert!(rec.0.ends_with("session.jsonl") && rec.1 == 1, "{rec:?}");
    // A half-written reply is not read; the next scan starts where this one stopped.
    let line2 = assistant(&format!("NACK {b}: it would break the build"), 2);
    let (x, y) = line2.split_at(40);
    let mut f = std::fs::OpenOptions::new().append(true).open(&t).unwrap();
    std::io::Write::write_all(&mut f, x.as_bytes()).unwrap();
    let out = env
        .run(&["ack", "scan", t.to_str().unwrap(), "--json"])
        .json();
    assert_eq!(out["outcomes"].as_array().unwrap().len(), 0, "{out}");
    std::io::Write::write_all(&mut f, format!("{y}\n").as_bytes()).unwrap();
    let out = env
        .run(&["ack", "scan", t.to_str().unwrap(), "--json"])
        .json();
    assert_eq!(out["from_line"], 1);
    assert_eq!(
        out["outcomes"].as_array().unwrap().len(),
        1,
        "only the new line: {out}"
    );
    assert_eq!(env.item(&b)["state"], "refused");
    assert_eq!(env.count("SELECT count(*) FROM acks"), 2);
    assert_eq!(env.count("SELECT line FROM transcript_checkpoints"), 2);
}

/// The supervisor keeps one scanner per transcript: later scans see only new lines.
#[test]
fn a_kept_scanner_reads_only_what_was_appended() {
    let env = TestEnv::new();
    let a = env.steer_forced("lane:core", "first");
    let b = env.steer_forced("lane:core", "second");
    let t = env.dir.path().join("kept.jsonl");
    std::fs::write(&t, format!("{}\n", assistant(&format!("ACK {a}: done"), 1))).unwrap();
    let mut store =
        spice::store::Store::open(&env.db(), std::sync::Arc::new(spice::clock::SystemClock))
            .unwrap();
    let writer = spice::store::agent_targets(None, Some("core"), None);
    let mut scanner = spice::transcript::acks::Scanner::new(&t, writer);
    assert_eq!(scanner.scan(&mut store).unwrap().outcomes.len(), 1);
    assert!(
        scanner.scan(&mut store).unwrap().outcomes.is_empty(),
        "nothing new, nothing applied"
    );
    let mut f = std::fs::OpenOptions::new().append(true).open(&t).unwrap();
    std::io::Write::write_all(
        &mut f,
        format!("{}\n", assistant(&format!("ACK {b}: done"), 2)).as_bytes(),
    )
    .unwrap();
    let r = scanner.scan(&mut store).unwrap();
    assert_eq!((r.from_line, r.to_line, r.outcomes.len()), (1, 2, 1));
    assert_eq!(env.item(&b)["state"], "acked");
}

/// A scan whose write the store refused (another connection held the write lock
/// past the busy timeout) loses nothing: the lines it read are read again, and
/// their ACK and turn end count, on the next scan.
#[test]
fn regression_a_scan_the_store_refused_is_read_again() {
    let env = TestEnv::new();
    let a = env.steer_forced("lane:core", "first");
    let t = env.dir.path().join("refused.jsonl");
    let end = serde_json::json!({"type": "system", "subtype": "turn_duration", "durationMs": 5,
        "sessionId": "s1", "timestamp": "2026-11-29T12:00:01.000Z"});
    std::fs::write(
        &t,
        format!("{}\n{end}\n", assistant(&format!("ACK {a}: done"), 1)),
    )
    .unwrap();
    let mut store =
        spice::store::Store::open(&env.db(), std::sync::Arc::new(spice::clock::SystemClock))
            .unwrap();
    store
        .set_busy_timeout(std::time::Duration::from_millis(50))
        .unwrap();
    let writer = spice::store::agent_targets(None, Some("core"), None);
    let mut scanner = spice::transcript::acks::Scanner::new(&t, writer);
    let holder = rusqlite::Connection::open(env.db()).unwrap();
    holder.execute_batch("BEGIN IMMEDIATE").unwrap();
    assert!(scanner.scan(&mut store).is_err(), "the write lock is held");
    holder.execute_batch("ROLLBACK").unwrap();
    let r = scanner.scan(&mut store).unwrap();
    assert_eq!(r.outcomes.len(), 1, "the ACK read before counts: {r:?}");
    assert_eq!(r.turn_ended, Some(true), "{r:?}");
    assert_eq!(r.text_last, Some(true), "{r:?}");
    assert_eq!(env.item(&a)["state"], "acked");
}

/// What a scan says about the agent's turn: a turn end survives the reminders and
/// usage lines that trail it; a reply in text with no stated end is reported as the
/// last thing said (the lane treats it as the end after a quiet spell); a tool call is
/// not.
#[test]
fn scans_report_the_turn_end_and_whether_text_came_last() {
    let env = TestEnv::new();
    env.steer_forced("lane:core", "creates the store");
    let mut store =
        spice::store::Store::open(&env.db(), std::sync::Arc::new(spice::clock::SystemClock))
            .unwrap();
    let line = |v: serde_json::Value| format!("{v}\n");
    let base = |kind: &str, n: u32| {
        serde_json::json!({"type": kind, "uuid": format!("u{n}"), "sessionId": "s1",
            "cwd": "/w", "timestamp": "2026-11-29T12:00:00.000Z"})
    };
    let with = |mut v: serde_json::Value, k: &str, x: serde_json::Value| {
        v[k] = x;
        v
    };
    let t = env.dir.path().join("turns.jsonl");
    let prompt = with(
        base("user", 1),
        "message",
        serde_json::json!({"role": "user", "content": "go"}),
    );
    let reply = |stop: serde_json::Value, n: u32| {
        with(
            base("assistant", n),
            "message",
            serde_json::json!({"role": "assistant",
            "id": format!("m{n}"), "model": "claude-test", "stop_reason": stop,
            "content": [{"type": "text", "text": "Done."}]}),
        )
    };
    let reminder = with(
        with(base("user", 9), "isMeta", serde_json::json!(true)),
        "message",
        serde_json::json!({"role": "user", "content": "<system-reminder>\nnote\n</system-reminder>"}),
    );
    let ended = [
        line(prompt.clone()),
        line(reply(serde_json::json!("end_turn"), 2)),
        line(with(
            base("system", 3),
            "subtype",
            serde_json::json!("turn_duration"),
        )),
        line(reminder),
    ]
    .concat();
    std::fs::write(&t, ended).unwrap();
    let mut scanner = spice::transcript::acks::Scanner::new(&t, Vec::new());
    let r = scanner.scan(&mut store).unwrap();
    assert_eq!((r.turn_ended, r.text_last), (Some(true), Some(true)));

    // Claude Code writes some of a turn's records late: its prompt can land after the
    // turn's end. Dated before that end, it belongs to the ended turn; a prompt dated
    // after it starts a new one.
    let at = |v: serde_json::Value, ms: u32| {
        with(
            v,
            "timestamp",
            serde_json::json!(format!("2026-11-29T12:00:00.{ms:03}Z")),
        )
    };
    let late = env.dir.path().join("late.jsonl");
    let ended_then = |prompt_ms: u32| {
        [
            line(at(reply(serde_json::json!("end_turn"), 2), 100)),
            line(at(
                with(
                    base("system", 3),
                    "subtype",
                    serde_json::json!("turn_duration"),
                ),
                200,
            )),
            line(at(prompt.clone(), prompt_ms)),
        ]
        .concat()
    };
    std::fs::write(&late, ended_then(50)).unwrap();
    let r = spice::transcript::acks::Scanner::new(&late, Vec::new())
        .scan(&mut store)
        .unwrap();
    assert_eq!(
        (r.turn_ended, r.text_last),
        (Some(true), Some(true)),
        "a late prompt"
    );
    // Nor does it clear the reply the turn ended on (a question there asks the
    // operator; cleared, the lane read as merely waiting).
    assert_eq!(
        r.turn.last_text.as_deref(),
        Some("Done."),
        "a late prompt kept the reply"
    );
    let next = env.dir.path().join("next.jsonl");
    std::fs::write(&next, ended_then(300)).unwrap();
    let r = spice::transcript::acks::Scanner::new(&next, Vec::new())
        .scan(&mut store)
        .unwrap();
    assert_eq!(r.turn_ended, Some(false), "a new prompt");

    // A reply whose end is never stated: the turn is not over as far as the
    // transcript says, but text came last.
    let u = env.dir.path().join("unstated.jsonl");
    std::fs::write(
        &u,
        [
            line(prompt.clone()),
            line(reply(serde_json::Value::Null, 2)),
        ]
        .concat(),
    )
    .unwrap();
    let r = spice::transcript::acks::Scanner::new(&u, Vec::new())
        .scan(&mut store)
        .unwrap();
    assert_eq!((r.turn_ended, r.text_last), (Some(false), Some(true)));

    // A tool call came last: the agent is working.
    let c = env.dir.path().join("call.jsonl");
    let call = with(
        base("assistant", 2),
        "message",
        serde_json::json!({"role": "assistant",
        "id": "m2", "model": "claude-test", "stop_reason": null,
        "content": [{"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "ls"}}]}),
    );
    std::fs::write(
        &c,
        [
            line(prompt),
            line(reply(serde_json::Value::Null, 1)),
            line(call),
        ]
        .concat(),
    )
    .unwrap();
    let r = spice::transcript::acks::Scanner::new(&c, Vec::new())
        .scan(&mut store)
        .unwrap();
    assert_eq!((r.turn_ended, r.text_last), (Some(false), Some(false)));
}

#[test]
fn the_claude_hook_shows_due_items_once_and_never_fails_the_tool_call() {
    let env = TestEnv::new();
    let key = env.steer_forced("lane:a", "use the v2 endpoint");
    let hook = |lane: &str| {
        let out = env
            .cmd(&["hook", "claude-post-tool-use"])
            .env("SPICE_LANE", lane)
            .env("SPICE_SESSION", "s-1")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .and_then(|mut c| {
                use std::io::Write;
                // What Claude Code writes on the hook's stdin.
                c.stdin
                    .take()
                    .unwrap()
                    .write_all(br#"{"hook_event_name":"PostToolUse","tool_name":"Read"}"#)?;
                c.wait_with_output()
            })
            .unwrap();
        common::to_run(out)
    };
    let first = hook("a");
    let v: serde_json::Value = serde_json::from_str(first.ok().trim()).unwrap();
    let ctx = v["hookSpecificOutput"]["additionalContext"]
        .as_str()
        .unwrap();
    assert!(ctx.starts_with("┌── spice: 1 steering item"), "{ctx}");
    assert!(ctx.contains(&format!("[{key}]")) && ctx.contains("use the v2 endpoint"));
    assert_eq!(env.item(&key)["shown"], 1);
    // Shown moments ago: not repeated on the next tool call.
    assert_eq!(hook("a").ok(), "");
    // Another lane's agent sees nothing.
    assert_eq!(hook("b").ok(), "");
    // A broken store is reported on stderr; the tool call still succeeds.
    std::fs::write(env.db(), b"not a database at all, not even close......").unwrap();
    let broken = hook("a");
    assert_eq!(broken.ok(), "");
    assert!(
        broken.stderr.contains("steering unavailable"),
        "{}",
        broken.stderr
    );
}
