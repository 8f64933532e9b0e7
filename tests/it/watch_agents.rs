//! `spice watch` with no path finds Gemini CLI and Qwen Code sessions for the current
//! directory as it does Claude Code's and Codex's, and says which records of a file it
//! did not understand (issue #42). The files are written here in the shapes the
//! pinned CLIs write, with text of our own.

use crate::common;
use common::TestEnv;
use serde_json::json;
use std::path::Path;
use std::process::Command;

/// SHA-256 of a path in hex, by coreutils (not spice's own code): Gemini CLI's
/// `projectHash`.
fn sha256(p: &Path) -> String {
    let out = Command::new("sh")
        .arg("-c")
        .arg("printf %s \"$1\" | sha256sum")
        .arg("sh")
        .arg(p)
        .output()
        .unwrap();
    String::from_utf8(out.stdout).unwrap()[..64].to_string()
}

fn gemini_file(dir: &Path, name: &str, hash: &str, said: &str) {
    std::fs::create_dir_all(dir).unwrap();
    let lines = [
        json!({"sessionId": format!("{name}-0000-4000-8000-000000000001"), "projectHash": hash,
               "startTime": "2026-12-07T02:36:39.228Z", "lastUpdated": "2026-12-07T02:36:39.228Z", "kind": "main"}),
        json!({"id": "u1", "timestamp": "2026-12-07T02:36:39.300Z", "type": "user", "content": [{"text": "make it so"}]}),
        json!({"id": "m1", "timestamp": "2026-12-07T02:36:40.000Z", "type": "gemini", "content": said,
               "thoughts": [], "model": "mock-model", "tokens": {"input": 10, "output": 2, "cached": 0}}),
    ];
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(
        dir.join(format!("session-2026-12-07T02-36-{name}.jsonl")),
        text,
    )
    .unwrap();
}

#[test]
fn watch_finds_gemini_and_qwen_sessions_for_this_directory() {
    let env = TestEnv::new();
    let home = env.dir.path().join("home");
    let cwd = std::fs::canonicalize(&env.repo).unwrap();
    let chats = home.join(".gemini/tmp/myproject/chats");
    gemini_file(&chats, "0a1b2c3d", &sha256(&cwd), "gemini here");
    // Another project's session beside it: not this directory's.
    gemini_file(
        &chats,
        "9f8e7d6c",
        &sha256(Path::new("/elsewhere")),
        "gemini elsewhere",
    );
    let qwen = home.join(".qwen/projects/any-slug/chats");
    std::fs::create_dir_all(&qwen).unwrap();
    let rec = |ty: &str, dir: &str, extra: serde_json::Value| {
        let mut v = json!({"uuid": format!("{ty}1"), "parentUuid": null, "sessionId": "5e5b1c2a-7f0d-4c3e-9a51-0a1b2c3d4e5f",
            "timestamp": "2026-12-07T02:40:00.000Z", "type": ty, "cwd": dir, "version": "0.24.4",
            "provenance": "real_user", "gitBranch": "main"});
        v.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        format!("{v}\n")
    };
    let here = cwd.display().to_string();
    std::fs::write(
        qwen.join("5e5b1c2a-7f0d-4c3e-9a51-0a1b2c3d4e5f.jsonl"),
        rec(
            "user",
            &here,
            json!({"message": {"role": "user", "parts": [{"text": "and you"}]}}),
        ) + &rec(
            "assistant",
            &here,
            json!({"model": "m", "message": {"role": "model", "parts": [{"text": "qwen here"}]}}),
        ),
    )
    .unwrap();
    std::fs::write(
        qwen.join("6e5b1c2a-7f0d-4c3e-9a51-0a1b2c3d4e5f.jsonl"),
        rec(
            "assistant",
            "/elsewhere",
            json!({"model": "m", "message": {"role": "model", "parts": [{"text": "qwen elsewhere"}]}}),
        ),
    )
    .unwrap();
    let run = |args: &[&str]| {
        common::to_run(
            env.cmd(args)
                .current_dir(&cwd)
                .env("HOME", &home)
                .output()
                .unwrap(),
        )
    };
    let out = run(&["watch", "--once"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    for want in ["gemini here", "qwen here", "make it so", "and you"] {
        assert!(out.stdout.contains(want), "{want}: {}", out.stdout);
    }
    assert!(!out.stdout.contains("elsewhere"), "{}", out.stdout);
    let list = run(&["session", "list", "--json"]).json();
    let agents: Vec<&str> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["agent"].as_str().unwrap())
        .collect();
    assert_eq!(agents.len(), 2, "{list}");
    assert!(
        agents.contains(&"gemini") && agents.contains(&"qwen"),
        "{list}"
    );
    // GEMINI_CLI_HOME and QWEN_HOME move them, as they move the CLIs' files.
    let moved = env.dir.path().join("moved");
    std::fs::create_dir_all(moved.join("g")).unwrap();
    std::fs::rename(home.join(".gemini"), moved.join("g/.gemini")).unwrap();
    std::fs::rename(home.join(".qwen"), moved.join("q")).unwrap();
    let out = common::to_run(
        env.cmd(&["watch", "--once"])
            .current_dir(&cwd)
            .env("HOME", &home)
            .env("GEMINI_CLI_HOME", moved.join("g"))
            .env("QWEN_HOME", moved.join("q"))
            .output()
            .unwrap(),
    );
    assert!(
        out.stdout.contains("gemini here") && out.stdout.contains("qwen here"),
        "{}{}",
        out.stdout,
        out.stderr
    );
}

#[test]
fn watch_says_which_records_it_did_not_understand() {
    let env = TestEnv::new();
    let f = env.dir.path().join("s.jsonl");
    let line = |v: serde_json::Value| format!("{v}\n");
    let base = json!({"uuid": "u1", "parentUuid": null, "sessionId": "s1", "cwd": "/w",
                      "version": "2.1.0", "timestamp": "2026-11-29T12:00:00.000Z"});
    let with = |extra: serde_json::Value| {
        let mut v = base.clone();
        v.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        line(v)
    };
    let text = with(json!({"type": "user", "message": {"role": "user", "content": "hello"}}))
        + &with(json!({"type": "brand-new-record", "data": 1}))
        + &with(json!({"type": "brand-new-record", "data": 2}))
        // The CLI's own bookkeeping: known, skipped without a word.
        + &with(json!({"type": "file-history-snapshot"}))
        + "not json at all\n"
        + &with(json!({"type": "assistant", "message": {"role": "assistant", "id": "m1",
              "content": [{"type": "text", "text": "hi there"}]}}));
    std::fs::write(&f, text).unwrap();
    let out = env.run(&["watch", "--once", f.to_str().unwrap()]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let said: Vec<&str> = out
        .stdout
        .lines()
        .filter(|l| l.contains("not one spice reads"))
        .collect();
    assert_eq!(said.len(), 1, "once per kind: {}", out.stdout);
    assert!(
        said[0].contains("line 2") && said[0].contains("\"brand-new-record\""),
        "{}",
        said[0]
    );
    assert!(
        !out.stdout.contains("file-history-snapshot"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout
            .contains("1 line(s) that are not JSON records skipped"),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains("hi there"), "{}", out.stdout);

    let json = env.run(&["watch", "--once", "--json", f.to_str().unwrap()]);
    let records: Vec<serde_json::Value> = json
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .filter(|v: &serde_json::Value| v.get("event").is_none())
        .collect();
    assert_eq!(records.len(), 2, "{}", json.stdout);
    assert_eq!(records[0]["kind"], "unread");
    assert_eq!(records[0]["record"], "brand-new-record");
    assert_eq!(records[0]["line"], 2);
    assert_eq!(records[1]["kind"], "malformed");
    assert_eq!(records[1]["total"], 1);
}
