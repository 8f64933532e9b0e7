//! Whose ACK counts (issue #14): a transcript's ACKs retire only the items addressed to
//! the session, lane or worktree that wrote it, through the lane loop and through
//! `spice ack scan`; `spice ack apply` counts for any item unless given `--target`;
//! retiring an item clears the problem an earlier bare NACK left on it.

use crate::common;
use common::{git, TestEnv};

fn effects(env: &TestEnv, key: &str) -> Vec<String> {
    let db = env.sql();
    let mut stmt = db
        .prepare("SELECT effect FROM acks WHERE key = ?1 ORDER BY seq")
        .unwrap();
    let rows = stmt.query_map([key], |r| r.get(0)).unwrap();
    rows.collect::<Result<_, _>>().unwrap()
}

/// A scripted headless agent (one turn per process): writes a Claude Code-format
/// transcript through the fixtures' helper, ACKs every key in `$ACK_KEYS` whether or
/// not it was given them, completes its task's phase and ends its turn.
const AGENT: &str = r#"#!/usr/bin/env bash
# usage: acks-agent.sh SPICE SESSION_ID BRIEF_FILE FIXTURES
set -u
spice=$1 id=$2
. "$4/claude-transcript.sh"
rec user '{"role":"user","content":"(the brief)"}'
text=""
for k in ${ACK_KEYS:-}; do text="${text}ACK $k: done\\n"; done
[ -n "$text" ] && say "$text"
"$spice" task phase "$SPICE_TASK" --done --claimant "$SPICE_SESSION" > /dev/null
say "Done."
"#;

/// Two lanes each have an item; lane a's agent ACKs its own key and lane b's. Only its
/// own is retired: lane b's item stays pending, the stray ACK is recorded as
/// `not-addressed`.
#[test]
fn one_lanes_transcript_cannot_retire_another_lanes_item() {
    let placeholder = "profile = \"demo\"\nphases = [\"todo\"]\n";
    let env = TestEnv::with_lanes(&[("a", placeholder), ("b", placeholder)]);
    let fixtures = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/agents");
    let script = env.dir.path().join("acks-agent.sh");
    std::fs::write(&script, AGENT).unwrap();
    std::fs::create_dir_all(env.repo.join("profiles")).unwrap();
    std::fs::write(
        env.repo.join("profiles/acker.toml"),
        format!(
            "command = [\"bash\", \"{s}\", \"{{spice}}\", \"{{session_id}}\", \"{{brief_file}}\", \"{f}\"]\n\
             resume = [\"bash\", \"{s}\", \"{{spice}}\", \"{{session_id}}\", \"{{brief_file}}\", \"{f}\"]\n\
             mode = \"headless\"\n[transcript]\nformat = \"claude\"\n\
             dir = \"{{home}}/.claude/projects/{{cwd_slug}}\"\nglob = \"{{session_id}}.jsonl\"\n",
            s = script.display(),
            f = fixtures.display(),
        ),
    )
    .unwrap();
    let ka = env.steer_forced("lane:a", "keep the greeting short");
    let kb = env.steer_forced("lane:b", "use the v2 client");
    let lane = |keys: &str| {
        format!("profile = \"acker\"\nphases = [\"todo\"]\n[env]\nACK_KEYS = \"{keys}\"\n")
    };
    std::fs::write(env.repo.join("lanes/a.toml"), lane(&format!("{ka} {kb}"))).unwrap();
    std::fs::write(env.repo.join("lanes/b.toml"), lane("")).unwrap();
    git(&env.repo, &["add", "lanes", "profiles"]);
    git(&env.repo, &["commit", "-q", "-m", "acker lanes"]);
    let first = env.add(&["First", "--project", "demo"]);
    let second = env.add(&["Second", "--project", "demo"]);

    let out = common::finished(env.fleet_up(&["--until-idle", "--json"]));
    for t in [&first, &second] {
        let s = env.run(&["task", "show", t, "--json"]).json();
        assert_eq!(s["phase"], "review", "{s}\n{}", out.stderr);
    }
    // Lane a's agent answered: its ACK of its own lane's key was read and counted.
    assert_eq!(env.item(&ka)["state"], "acked", "{}", out.stderr);
    let kb_effects = effects(&env, &kb);
    assert!(
        !kb_effects.is_empty(),
        "lane a's ACK of lane b's key was read and recorded"
    );
    assert!(
        kb_effects.iter().all(|e| e == "not-addressed"),
        "{kb_effects:?}"
    );
    let b = env.item(&kb);
    assert_eq!(b["state"], "pending", "{b}");
}

/// A Claude Code transcript line of session `s1` working in `cwd`, written by this test.
fn assistant(cwd: &std::path::Path, text: &str, n: u32) -> String {
    serde_json::json!({
        "type": "assistant", "uuid": format!("a{n}"), "parentUuid": null, "sessionId": "s1",
        "cwd": cwd, "timestamp": "2026-11-29T12:00:00.000Z",
        "message": { "role": "assistant", "id": format!("m{n}"), "model": "claude-test",
                     "content": [{ "type": "text", "text": text }] },
    })
    .to_string()
}

/// `spice ack scan FILE` counts a transcript's ACKs for the session it names and the
/// worktree of its cwd (a subdirectory names its work tree), not for other sessions or
/// for a lane no record ties to the file.
#[test]
fn ack_scan_counts_for_the_transcripts_own_session_and_worktree() {
    let env = TestEnv::new();
    let sub = env.repo.join("src");
    std::fs::create_dir_all(&sub).unwrap();
    let mine = env.steer_forced("session:s1", "first");
    let here = env.steer_forced(&format!("worktree:{}", env.repo.display()), "second");
    let other = env.steer_forced("session:s2", "someone else's");
    let lane = env.steer_forced("lane:core", "the lane's");
    let t = env.dir.path().join("s1.jsonl");
    let text = format!(
        "Done.\n\nACK {mine}, {here}: both\nACK {other}: wrong agent\nACK {lane}: no lane ran this"
    );
    std::fs::write(&t, format!("{}\n", assistant(&sub, &text, 1))).unwrap();
    let out = env
        .run(&["ack", "scan", t.to_str().unwrap()])
        .ok()
        .to_string();
    let top = std::fs::canonicalize(&env.repo).unwrap();
    assert!(
        out.contains(&format!(
            "ACKs count for session s1, worktree {}",
            top.display()
        )),
        "{out}"
    );
    assert!(
        out.contains(&format!(
            "{other} (line 1): addressed to another lane, session or worktree"
        )),
        "{out}"
    );
    assert_eq!(env.item(&mine)["state"], "acked");
    assert_eq!(env.item(&here)["state"], "acked");
    assert_eq!(env.item(&other)["state"], "pending");
    assert_eq!(env.item(&lane)["state"], "pending");
    assert_eq!(effects(&env, &other), ["not-addressed"]);
    let json = env
        .run(&["ack", "scan", t.to_str().unwrap(), "--json"])
        .json();
    assert_eq!(json["counts_for"][0]["kind"], "session", "{json}");
    assert_eq!(json["counts_for"][0]["name"], "s1", "{json}");
}

/// `spice ack apply` takes the operator's word for any key; with `--target` it counts
/// like a scan of that target's transcript.
#[test]
fn ack_apply_counts_for_any_item_or_only_for_its_targets() {
    let env = TestEnv::new();
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
    // Without --target, from another source: the operator vouches for it.
    env.run_stdin(&["ack", "apply", "--source", "notes.md"], &text)
        .ok();
    assert_eq!(env.item(&b)["state"], "acked");
    env.run_stdin(&["ack", "apply", "--target", "lane:"], &text)
        .fails(2, "nothing after ':'");
}

/// A bare NACK leaves a problem on the pending item; the ACK that later retires it
/// clears the problem (the NACK stays in the records).
#[test]
fn retiring_an_item_clears_the_problem_a_bare_nack_left() {
    let env = TestEnv::new();
    let k = env.steer_forced("lane:core", "rename everything");
    env.run_stdin(&["ack", "apply"], &format!("NACK {k}\n"))
        .ok();
    let before = env.item(&k);
    assert!(
        before["problem"]
            .as_str()
            .is_some_and(|p| p.contains("without a reason")),
        "{before}"
    );
    env.run_stdin(&["ack", "apply"], &format!("ACK {k}: renamed after all\n"))
        .ok();
    let after = env.item(&k);
    assert_eq!(after["state"], "acked", "{after}");
    assert!(after["problem"].is_null(), "{after}");
    assert_eq!(effects(&env, &k), ["no-reason", "acked"]);
}

/// `spice ack scan` on PostgreSQL: an item steered through host A's state directory
/// is acknowledged by a transcript scanned through host B's, both on one database.
#[test]
#[ignore = "needs PostgreSQL (SPICE_TEST_POSTGRES)"]
fn ack_scan_on_postgres_counts_across_hosts() {
    let Some(db) = common::pg::Database::new("ack_scan_on_postgres") else {
        return;
    };
    let (a, b) = (db.host(), db.host());
    let key = a.steer_forced("session:s1", "mind the tests");
    let t = b.dir.path().join("s1.jsonl");
    let text = format!("Done.\n\nACK {key}: kept them green");
    std::fs::write(&t, format!("{}\n", assistant(&b.repo, &text, 1))).unwrap();
    let out = b
        .run(&["ack", "scan", t.to_str().unwrap(), "--json"])
        .json();
    assert_eq!(out["counts_for"][0]["name"], "s1", "{out}");
    assert_eq!(a.item(&key)["state"], "acked");
}

/// A keyless directive in a transcript (`ACK:` naming no key) retires nothing and is
/// reported as such by `spice ack scan`, with its line, in text and JSON (issue #37).
#[test]
fn ack_scan_reports_a_keyless_directive_and_retires_nothing() {
    let env = TestEnv::new();
    let mine = env.steer_forced("session:s1", "first");
    let t = env.dir.path().join("s1.jsonl");
    let lines = [
        assistant(&env.repo, "Looked at it.", 1),
        assistant(&env.repo, "ACK: done, all of it", 2),
        assistant(&env.repo, "I refuse to ACK {mine}: it conflicts", 3),
    ];
    let lines = lines.map(|l| l.replace("{mine}", &mine));
    std::fs::write(&t, format!("{}\n", lines.join("\n"))).unwrap();
    let out = env
        .run(&["ack", "scan", t.to_str().unwrap()])
        .ok()
        .to_string();
    assert!(
        out.contains("line 2: ACK without a key (keyless); nothing retired"),
        "{out}"
    );
    assert_eq!(env.item(&mine)["state"], "pending", "{out}");
    assert!(effects(&env, &mine).is_empty(), "{out}");
    // Read again from the start (a fresh state directory), as JSON.
    let env2 = TestEnv::new();
    let json = env2
        .run(&["ack", "scan", t.to_str().unwrap(), "--json"])
        .json();
    assert_eq!(json["keyless"], serde_json::json!([2]), "{json}");
}
