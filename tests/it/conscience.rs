//! The conscience (issue #17) through the real binary: maxims heard in a synthetic
//! transcript (`spice conscience scan`) and logged; once per compaction epoch across a
//! real compaction record; scripted judges; a reminder delivered to a demo agent in a
//! fleet and ACKed; a stopping supervisor expiring its pending reminders; proposals
//! from a history of items and ACKs; bad maxim files located.

use crate::common;
use crate::common::console;
use common::{git, wait_for, TestEnv};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

const NO_MOCKS: &str = "message = \"Test against the real database, not a mock.\"\nwords = [\"mock\", \"mocks\"]\nphrases = [\"stub it out\"]\n";

/// A Claude Code-format transcript, one record at a time.
struct Transcript {
    path: PathBuf,
    n: u32,
}

impl Transcript {
    fn new(dir: &Path) -> Transcript {
        let mut t = Transcript {
            path: dir.join("s1.jsonl"),
            n: 0,
        };
        t.rec(json!({ "type": "user", "message": { "role": "user", "content": "Do the task." } }));
        t
    }

    fn rec(&mut self, mut v: Value) {
        self.n += 1;
        v["uuid"] = json!(format!("u{}", self.n));
        v["sessionId"] = json!("s1");
        v["cwd"] = json!("/tmp/x");
        v["timestamp"] = json!("2026-01-01T00:00:00.000Z");
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)
            .unwrap();
        writeln!(f, "{v}").unwrap();
    }

    fn say(&mut self, text: &str) {
        let id = format!("m{}", self.n);
        self.rec(
            json!({ "type": "assistant", "message": { "id": id, "role": "assistant",
            "content": [{ "type": "text", "text": text }], "stop_reason": "end_turn" } }),
        );
    }

    /// A compaction as Claude Code records it: the boundary and the summary after it.
    fn compact(&mut self) {
        self.rec(json!({ "type": "system", "subtype": "compact_boundary", "content": "Conversation compacted",
            "compactMetadata": { "trigger": "auto", "preTokens": 150_000 } }));
        self.rec(
            json!({ "type": "user", "isCompactSummary": true, "message": { "role": "user",
            "content": "This session is being continued from a previous conversation." } }),
        );
    }
}

fn maxims(env: &TestEnv, files: &[(&str, &str)]) {
    std::fs::create_dir_all(env.repo.join("maxims")).unwrap();
    for (name, text) in files {
        std::fs::write(env.repo.join("maxims").join(name), text).unwrap();
    }
}

fn log(env: &TestEnv) -> Vec<Value> {
    env.run(&["conscience", "log", "--json"])
        .json()
        .as_array()
        .unwrap()
        .clone()
}

/// (maxim, epoch, step) of each step.
fn steps(log: &[Value]) -> Vec<(String, i64, String)> {
    log.iter()
        .map(|e| {
            (
                e["maxim"].as_str().unwrap().to_string(),
                e["epoch"].as_i64().unwrap(),
                e["step"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

fn s(m: &str, e: i64, st: &str) -> (String, i64, String) {
    (m.into(), e, st.into())
}

/// `conscience scan` as lane `a`, whose lane file this writes when the repository
/// has none (the scan refuses a lane no lane file defines).
fn scan(env: &TestEnv, t: &Transcript) -> Value {
    let lane = env.repo.join("lanes/a.toml");
    if !lane.exists() {
        std::fs::create_dir_all(env.repo.join("lanes")).unwrap();
        std::fs::write(&lane, "profile = \"demo\"\n").unwrap();
    }
    let p = t.path.display().to_string();
    env.run(&["conscience", "scan", &p, "--lane", "a", "--json"])
        .json()
}

fn inbox(env: &TestEnv) -> Vec<Value> {
    env.run(&["inbox", "--all", "--json"])
        .json()
        .as_array()
        .unwrap()
        .clone()
}

#[test]
fn a_scanned_transcript_publishes_reminders_and_logs_every_step() {
    let env = TestEnv::new();
    maxims(&env, &[("no-mocks.toml", NO_MOCKS)]);
    let mut t = Transcript::new(env.dir.path());
    t.say("First I look. Then I'll MOCK the database for speed.");
    t.say("```rust\nlet mock = Mock::new();\n```\nThat code is shown, not said.");
    t.say("ACK 0000000ab: [MAXIM no-mocks] quoted back, mocks and all.");
    t.say("We can fall back to the cache if it is down.");
    let out = scan(&env, &t);
    assert_eq!(out["scans"][0]["messages"], 4, "{out}");
    let l = log(&env);
    assert_eq!(
        steps(&l),
        [
            s("no-mocks", 0, "fired"),
            s("no-mocks", 0, "published"),
            s("fallbacks", 0, "fired"),
            s("fallbacks", 0, "published"),
        ]
    );
    assert_eq!(
        l[0]["detail"]["sentence"],
        "Then I'll MOCK the database for speed."
    );
    assert_eq!(l[0]["detail"]["line"], 2);
    let items = inbox(&env);
    assert_eq!(items.len(), 2);
    assert_eq!(
        (
            items[0]["target_kind"].as_str(),
            items[0]["target"].as_str()
        ),
        (Some("lane"), Some("a"))
    );
    assert_eq!(
        items[0]["text"],
        "[MAXIM no-mocks] Test against the real database, not a mock. You wrote: \"Then I'll MOCK the database for speed.\""
    );
    assert_eq!(items[0]["key"], l[1]["key"]);
    // The file is heard once: a second scan reads nothing new.
    let again = scan(&env, &t);
    assert_eq!(again["scans"][0]["messages"], 0, "{again}");
    assert_eq!(log(&env).len(), 4);
    // The human-readable log names the step and the sentence.
    let text = env.run(&["conscience", "log"]).ok().to_string();
    assert!(text.contains("a no-mocks epoch 0 published"), "{text}");
}

#[test]
fn a_maxim_fires_once_per_compaction_epoch() {
    let env = TestEnv::new();
    maxims(&env, &[("no-mocks.toml", NO_MOCKS)]);
    let mut t = Transcript::new(env.dir.path());
    t.say("I'll mock it.");
    t.say("Another mock here.");
    t.compact();
    t.say("After the summary, a mock again.");
    scan(&env, &t);
    // Appended later, read by a later scan: same epoch, then a second compaction.
    t.say("Still mocks.");
    t.compact();
    scan(&env, &t);
    t.say("mock");
    scan(&env, &t);
    let got: Vec<_> = steps(&log(&env))
        .into_iter()
        .filter(|x| x.2 != "fired")
        .collect();
    assert_eq!(
        got,
        [
            s("no-mocks", 0, "published"),
            s("no-mocks", 0, "suppressed"),
            s("no-mocks", 1, "published"),
            s("no-mocks", 1, "suppressed"),
            s("no-mocks", 2, "published"),
        ]
    );
    assert_eq!(inbox(&env).len(), 3);
}

/// A judge script: judge 1 says `$1`, judge 2 says `$2` (written as given).
const JUDGE: &str = "#!/bin/sh\ncat > /dev/null\nif [ \"$SPICE_JUDGE\" = 1 ]; then printf '%s\\n' \"$1\"; else printf '%s\\n' \"$2\"; fi\n";

fn judged(env: &TestEnv, one: &str, two: &str) {
    let script = env.dir.path().join("judge.sh");
    std::fs::write(&script, JUDGE).unwrap();
    let settings = format!(
        "[judge]\nargv = [\"sh\", \"{}\", \"{one}\", \"{two}\"]\ntimeout = \"20s\"\nattempts = 2\n",
        script.display()
    );
    let judged = format!("{NO_MOCKS}judges = true\n");
    maxims(
        env,
        &[("conscience.toml", &settings), ("no-mocks.toml", &judged)],
    );
}

#[test]
fn judges_confirm_dismiss_dispute_or_abandon() {
    for (one, two, outcome, published) in [
        ("YES", "YES", "published", true),
        ("NO", "NO", "dismissed", false),
        ("YES", "NO", "disputed", false),
        ("Yes.", "YES", "abandoned", false),
    ] {
        let env = TestEnv::new();
        judged(&env, one, two);
        let mut t = Transcript::new(env.dir.path());
        t.say("I'll mock the clock.");
        scan(&env, &t);
        let l = log(&env);
        let judge: Vec<(i64, String)> = l
            .iter()
            .filter(|e| e["step"] == "judge")
            .map(|e| {
                (
                    e["detail"]["judge"].as_i64().unwrap(),
                    e["detail"]["raw"].as_str().unwrap().to_string(),
                )
            })
            .collect();
        let mut want = vec![(1, one.to_string())];
        if one == "Yes." {
            want.push((1, one.to_string()));
        }
        want.push((2, two.to_string()));
        assert_eq!(judge, want, "{one}/{two}: {l:#?}");
        assert_eq!(l.last().unwrap()["step"], outcome, "{one}/{two}: {l:#?}");
        assert_eq!(inbox(&env).len(), published as usize, "{one}/{two}");
    }
}

#[test]
fn bad_maxim_files_are_refused_with_their_place() {
    let env = TestEnv::with_lanes(&[("a", "profile = \"demo\"\nphases = [\"todo\"]\n")]);
    maxims(
        &env,
        &[("x.toml", "message = \"m\"\nwords = [\"two words\"]\n")],
    );
    env.run(&["conscience", "maxims"]).fails(
        2,
        "maxims/x.toml:2:10: words: \"two words\" is more than one word",
    );
    maxims(&env, &[("x.toml", "message = \"m\"\nword = [\"w\"]\n")]);
    env.run(&["conscience", "maxims"])
        .fails(2, "maxims/x.toml:2:1: unknown field `word`");
    // The fleet reads its base's maxims, and refuses to start on a bad one.
    git(&env.repo, &["add", "maxims"]);
    git(&env.repo, &["commit", "-q", "-m", "maxims"]);
    env.run(&["fleet", "up", "--until-idle"])
        .fails(2, "maxims (at main)/x.toml:2:1: unknown field `word`");
    // Fixed: the maxims in force, the built-ins among them.
    maxims(
        &env,
        &[
            ("x.toml", "message = \"m\"\nwords = [\"w\"]\n"),
            ("conscience.toml", "disable = [\"shims\"]\n"),
        ],
    );
    let book = env.run(&["conscience", "maxims", "--json"]).json();
    let names: Vec<&str> = book["maxims"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["polling", "fallbacks", "backwards-compatibility", "x"]
    );
    assert_eq!(book["disabled"], json!(["shims"]));
}

#[test]
fn recurring_corrections_are_proposed_once_as_tasks() {
    let env = TestEnv::new();
    maxims(&env, &[("no-mocks.toml", NO_MOCKS)]);
    let k1 = env.steer_forced("lane:a", "Use the real sqlite database in tests, no mock.");
    let k2 = env.steer_forced(
        "lane:b",
        "Again: run tests against sqlite, not a mock database.",
    );
    let k3 = env.steer_forced("lane:a", "Rename the module.");
    let k4 = env.steer_forced("lane:a", "The sqlite file stays in tmp.");
    let acks =
        format!("ACK {k1}: switched to sqlite\nACK {k2}: done, real database\nACK {k3}: renamed");
    env.run_stdin(&["ack", "apply", "--source", "t.jsonl"], &acks)
        .ok();
    // k4 is not acknowledged: no evidence.
    let _ = k4;
    let out = env.run(&["conscience", "propose", "--json"]).json();
    let p = out.as_array().unwrap();
    assert_eq!(p.len(), 1, "{out:#}");
    // "mock" is owned by no-mocks: not a trigger word of the draft.
    assert_eq!(
        p[0]["words"],
        json!(["database", "sqlite", "tests"]),
        "{out:#}"
    );
    assert_eq!(p[0]["items"], json!([k1, k2]));
    assert_eq!(p[0]["filed"], true);
    let task = p[0]["task"].as_str().unwrap().to_string();
    let shown = env.run(&["task", "show", &task, "--json"]).json();
    let body = shown["task"]["body"]
        .as_str()
        .or(shown["body"].as_str())
        .unwrap()
        .to_string();
    assert!(
        body.contains("ACK at t.jsonl:2: done, real database"),
        "{body}"
    );
    assert!(body.contains("```toml\n# maxims/database.toml\nmessage = \"Again: run tests against sqlite, not a mock database.\"\n"), "{body}");
    // Twice: the same proposal, not filed again.
    let again = env.run(&["conscience", "propose", "--json"]).json();
    assert_eq!(again[0]["filed"], false);
    assert_eq!(again[0]["task"], task.as_str());
    let tasks = env.run(&["task", "list", "--json"]).json();
    assert_eq!(tasks.as_array().unwrap().len(), 1, "{tasks:#}");
    // The maxims directory is untouched.
    let files: Vec<_> = std::fs::read_dir(env.repo.join("maxims"))
        .unwrap()
        .collect();
    assert_eq!(files.len(), 1);
    env.run(&["conscience", "propose", "--min", "3"]).ok();
}

const LANE: &str = "profile = \"demo\"\nphases = [\"todo\"]\nlease = \"5m\"\n";

#[test]
fn a_reminder_reaches_a_demo_agent_in_a_fleet_and_is_acked() {
    let env = TestEnv::with_lanes(&[("a", LANE)]);
    // The demo agent says "I'll look around, then do the task." before its first command.
    maxims(
        &env,
        &[(
            "no-wandering.toml",
            "message = \"Go straight to the task.\"\nphrases = [\"look around\"]\n",
        )],
    );
    git(&env.repo, &["add", "maxims"]);
    git(&env.repo, &["commit", "-q", "-m", "maxims"]);
    env.add(&["Write the file", "--project", "demo"]);
    common::finished(env.fleet_up(&["--until-idle"]));
    let l = log(&env);
    let got: Vec<_> = steps(&l).into_iter().map(|x| x.2).collect();
    assert_eq!(got, ["fired", "published", "acked"], "{l:#?}");
    let key = l[1]["key"].as_str().unwrap();
    assert_eq!(
        l[2]["detail"]["body"],
        "noted, and applied to the rest of this task"
    );
    let item = inbox(&env).into_iter().find(|i| i["key"] == key).unwrap();
    assert_eq!(item["state"], "acked", "{item}");
    assert_eq!(item["target"], "a");
    // The console's panel: the same steps, the reminder's answer last.
    let srv = console::Server::start(&env, &[]);
    let c = srv.get("/api/conscience").expect(200);
    let panel: Vec<&str> = c["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["step"].as_str().unwrap())
        .collect();
    assert_eq!(panel, ["fired", "published", "acked"], "{c:#}");
    assert_eq!(c["steps"][1]["key"], key);
}

/// A scripted agent that says something and then works on, never running a command
/// (so it never sees steering), until stopped.
const BUSY: &str = "#!/usr/bin/env bash\nset -u\nid=$1\n. \"$2/claude-transcript.sh\"\nrec user '{\"role\":\"user\",\"content\":\"(the brief)\"}'\nrec assistant \"{\\\"id\\\":\\\"m1\\\",\\\"role\\\":\\\"assistant\\\",\\\"content\\\":[{\\\"type\\\":\\\"text\\\",\\\"text\\\":\\\"I will add a shim for the old API.\\\"}],\\\"stop_reason\\\":null}\"\nexec sleep 600\n";

#[test]
fn a_stopping_supervisor_leaves_no_reminder_pending() {
    let env = TestEnv::with_lanes(&[(
        "a",
        "profile = \"busy\"\nphases = [\"todo\"]\nlease = \"5m\"\n",
    )]);
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/agents");
    let script = env.dir.path().join("busy.sh");
    std::fs::write(&script, BUSY).unwrap();
    std::fs::create_dir_all(env.repo.join("profiles")).unwrap();
    std::fs::write(
        env.repo.join("profiles/busy.toml"),
        format!(
            "command = [\"bash\", \"{s}\", \"{{session_id}}\", \"{f}\", \"{{brief_file}}\"]\nmode = \"headless\"\n[transcript]\nformat = \"claude\"\n\
             dir = \"{{home}}/.claude/projects/{{cwd_slug}}\"\nglob = \"{{session_id}}.jsonl\"\n",
            s = script.display(),
            f = fixtures.display(),
        ),
    )
    .unwrap();
    env.add(&["Work", "--project", "demo"]);
    let mut sup = env.fleet_up(&[]);
    let key = wait_for("the shims reminder", 60, || {
        log(&env)
            .iter()
            .find(|e| e["step"] == "published" && e["maxim"] == "shims")
            .and_then(|e| e["key"].as_str().map(String::from))
    });
    assert_eq!(
        inbox(&env)
            .iter()
            .find(|i| i["key"] == key.as_str())
            .unwrap()["state"],
        "pending"
    );
    env.run(&["fleet", "down"]).ok();
    let _ = sup.wait();
    let item = inbox(&env)
        .into_iter()
        .find(|i| i["key"] == key.as_str())
        .unwrap();
    assert_eq!(item["state"], "expired", "{item}");
    assert_eq!(
        item["problem"],
        "the supervisor stopped before the agent answered"
    );
    let last = log(&env).last().unwrap().clone();
    assert_eq!(
        (last["step"].as_str(), last["key"].as_str()),
        (Some("expired"), Some(key.as_str()))
    );
}
