//! `spice watch` and `spice session` through the real binary: real public samples,
//! a growing file, hostile content, and "watch writes nothing".

use crate::common;
use common::TestEnv;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

fn samples() -> PathBuf {
    // Only run when asked (`--include-ignored`, as .ci/run does): then a missing
    // directory is a failure, never a silent pass.
    std::env::var_os("SPICE_TRANSCRIPTS")
        .map(PathBuf::from)
        .expect("SPICE_TRANSCRIPTS must name the real transcripts (.ci/run sets it to ../shared/fixtures/transcripts)")
}

fn all_jsonl(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            all_jsonl(&p, out);
        } else if p.extension().is_some_and(|x| x == "jsonl") {
            out.push(p);
        }
    }
}

/// A Claude Code line this project writes itself (not copied from any sample).
fn claude_line(kind: &str, cwd: &str, text: &str, uuid: u32) -> String {
    let content = match kind {
        "user" => serde_json::json!(text),
        _ => serde_json::json!([{ "type": "text", "text": text }]),
    };
    serde_json::json!({
        "type": kind, "uuid": format!("u{uuid}"), "parentUuid": null, "sessionId": "sess-spice-test",
        "cwd": cwd, "version": "2.1.0", "gitBranch": "main", "timestamp": "2026-11-29T12:00:00.000Z",
        "message": { "role": kind, "content": content, "id": format!("m{uuid}"), "model": "claude-test" },
    })
    .to_string()
}

#[test]
#[ignore = "needs the real transcripts: SPICE_TRANSCRIPTS (set by .ci/run)"]
fn every_public_sample_decodes_through_watch() {
    let dir = samples();
    let env = TestEnv::new();
    let mut files = Vec::new();
    all_jsonl(&dir, &mut files);
    assert!(files.len() > 25, "found {} samples", files.len());
    for f in files {
        let r = env.run(&["watch", "--once", "--json", f.to_str().unwrap()]);
        assert_eq!(r.code, 0, "{}: {}", f.display(), r.stderr);
        for line in r.stdout.lines() {
            let v: serde_json::Value =
                serde_json::from_str(line).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
            // Every record kind in the versions sampled is known: read, or skipped as
            // the CLI's bookkeeping (a kind said to be not understood is a new one).
            assert_ne!(v["kind"], "unread", "{}: {v}", f.display());
            assert!(
                v["event"]["type"].is_string() || v["kind"] == "malformed",
                "{}: {v}",
                f.display()
            );
        }
    }
}

#[test]
#[ignore = "needs the real transcripts: SPICE_TRANSCRIPTS (set by .ci/run)"]
fn briefing_json_has_the_contract_fields() {
    let dir = samples();
    let env = TestEnv::new();
    let f = dir.join("claude/v2.1.14-git-commit-bash-errors.jsonl");
    let b = env
        .run(&["session", "briefing", f.to_str().unwrap(), "--json"])
        .json();
    for k in [
        "agent",
        "session_id",
        "cwd",
        "model",
        "prompts",
        "commands",
        "files_changed",
        "commits",
        "compactions",
        "acks",
        "last_assistant_text",
    ] {
        assert!(b.get(k).is_some(), "missing {k}");
    }
    assert_eq!(b["agent"], "claude");
    assert!(b["commands"]
        .as_array()
        .unwrap()
        .iter()
        .any(|c| c["failed"] == true));
    let c = &b["commands"][0];
    assert!(
        c.get("command").is_some() && c.get("exit_code").is_some() && c.get("failed").is_some()
    );
    let md = env
        .run(&["session", "briefing", f.to_str().unwrap()])
        .ok()
        .to_string();
    assert!(md.starts_with("# Briefing: Claude Code session"), "{md}");
    let codex = dir.join("current/codex-exec-command-exit3.jsonl");
    let b = env
        .run(&["session", "briefing", codex.to_str().unwrap(), "--json"])
        .json();
    assert_eq!(b["agent"], "codex");
    assert!(
        b["commands"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["exit_code"] == 3 && c["failed"] == true),
        "{b}"
    );
}

#[test]
fn a_growing_file_is_followed_line_by_line_exactly_once() {
    let env = TestEnv::new();
    let f = env.dir.path().join("live.jsonl");
    let cwd = env.repo.display().to_string();
    std::fs::write(
        &f,
        format!("{}\n", claude_line("user", &cwd, "first prompt", 1)),
    )
    .unwrap();
    let mut child = env
        .cmd(&["watch", "--json", f.to_str().unwrap()])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    std::thread::spawn(move || {
        let mut buf = [0u8; 65536];
        let mut acc = String::new();
        while let Ok(n) = stdout.read(&mut buf) {
            if n == 0 {
                break;
            }
            acc.push_str(&String::from_utf8_lossy(&buf[..n]));
            while let Some(i) = acc.find('\n') {
                let line: String = acc.drain(..=i).collect();
                let _ = tx.send(line);
            }
        }
    });
    let wait_for = |needle: &str| -> Vec<String> {
        let mut got = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(l) = rx.recv_timeout(Duration::from_millis(100)) {
                let hit = l.contains(needle);
                got.push(l);
                if hit {
                    return got;
                }
            }
        }
        panic!("never saw {needle}: {got:?}");
    };
    wait_for("first prompt");
    // Half a line, flushed: nothing may be decoded from it.
    let second = claude_line("assistant", &cwd, "second reply", 2);
    let (a, b) = second.split_at(second.len() / 2);
    let mut w = std::fs::OpenOptions::new().append(true).open(&f).unwrap();
    w.write_all(a.as_bytes()).unwrap();
    w.flush().unwrap();
    // Observed for a window (a half line must produce nothing), failing at once if it does.
    assert!(
        rx.recv_timeout(Duration::from_millis(700)).is_err(),
        "a half line must not produce events"
    );
    w.write_all(format!("{b}\n").as_bytes()).unwrap();
    w.flush().unwrap();
    let got = wait_for("second reply");
    assert_eq!(got.iter().filter(|l| l.contains("second reply")).count(), 1);
    // Truncate and rewrite: read again from the start, announced, no stale events.
    std::fs::write(
        &f,
        format!("{}\n", claude_line("user", &cwd, "rewritten prompt", 3)),
    )
    .unwrap();
    wait_for("rewritten prompt");
    child.kill().unwrap();
    child.wait().unwrap();
}

#[test]
fn hostile_content_is_neutralised_and_never_fatal() {
    let env = TestEnv::new();
    let f = env.dir.path().join("hostile.jsonl");
    let cwd = env.repo.display().to_string();
    let mut bytes = Vec::new();
    bytes.extend(claude_line("user", &cwd, "start", 1).bytes());
    bytes.push(b'\n');
    bytes.extend(
        claude_line(
            "assistant",
            &cwd,
            "evil \u{1b}[2J\u{1b}]0;title\u{7} \u{202E}cba",
            2,
        )
        .bytes(),
    );
    bytes.push(b'\n');
    bytes.extend(b"{\"type\":\"user\",\"bad\":\"\xff\xfe\"}\n"); // invalid UTF-8
    bytes.extend(b"[1,2,3]\n");
    bytes.extend("[".repeat(100_000).bytes()); // deeply nested
    bytes.push(b'\n');
    let big = "x".repeat(50 * 1024 * 1024);
    bytes.extend(claude_line("assistant", &cwd, &big, 3).bytes()); // a 50 MB line
    bytes.push(b'\n');
    bytes.extend(claude_line("assistant", &cwd, "still alive", 4).bytes());
    bytes.push(b'\n');
    std::fs::write(&f, &bytes).unwrap();
    let r = env.run(&["watch", "--once", f.to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("still alive"));
    assert!(
        !r.stdout.contains('\u{1b}') && !r.stdout.contains('\u{202E}'),
        "escapes must be neutralised"
    );
    let b = env
        .run(&["session", "briefing", f.to_str().unwrap(), "--json"])
        .json();
    assert_eq!(b["malformed_lines"], 3, "{}", b["malformed_lines"]);
}

#[test]
fn watch_and_session_need_no_store_and_write_nothing() {
    let env = TestEnv::new();
    let home = env.dir.path().join("home-claude");
    let cwd = std::fs::canonicalize(&env.repo).unwrap();
    let slug: String = cwd
        .to_string_lossy()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    let proj = home.join(".claude/projects").join(slug);
    std::fs::create_dir_all(&proj).unwrap();
    let c = cwd.display().to_string();
    std::fs::write(
        proj.join("sess-spice-test.jsonl"),
        format!(
            "{}\n{}\n",
            claude_line("user", &c, "list me", 1),
            claude_line("assistant", &c, "listed", 2)
        ),
    )
    .unwrap();
    let snapshot = |dir: &Path| {
        let mut v = Vec::new();
        all_files(dir, &mut v);
        v.sort();
        v
    };
    let before = snapshot(env.dir.path());
    let run = |args: &[&str]| {
        common::to_run(
            env.cmd(args)
                .env("HOME", &home)
                .env_remove("SPICE_HOME")
                .output()
                .unwrap(),
        )
    };
    let out = run(&["watch", "--once"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.contains("list me") && out.stdout.contains("listed"));
    let list = run(&["session", "list", "--json"]).json();
    assert_eq!(list[0]["session_id"], "sess-spice-test");
    assert_eq!(list[0]["first_prompt"], "list me");
    let b = run(&["session", "briefing", "--json"]).json();
    assert_eq!(b["last_assistant_text"], "listed");
    assert_eq!(snapshot(env.dir.path()), before, "nothing written anywhere");
    let none = common::to_run(
        env.cmd(&["watch", "--once"])
            .env("HOME", env.dir.path())
            .output()
            .unwrap(),
    );
    none.fails(
        2,
        "no Claude Code, Codex, Gemini CLI or Qwen Code session found",
    );
}

fn all_files(dir: &Path, out: &mut Vec<(PathBuf, u64)>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            all_files(&p, out);
        } else {
            let len = e.metadata().map(|m| m.len()).unwrap_or(0);
            out.push((p, len));
        }
    }
}

/// Regression: `session list` printed a session's first prompt as it was, so a brief
/// of several lines (every spice lane's) spread one row over many.
#[test]
fn regression_session_list_keeps_each_session_on_one_row() {
    let env = TestEnv::new();
    let dir = env.dir.path().join("transcripts");
    std::fs::create_dir_all(&dir).unwrap();
    let prompt = "You are working on task t1.\n\nPhase: todo.\n\nSteering: ACK each item.";
    let text = format!(
        "{}\n{}\n",
        claude_line("user", "/work/proj", prompt, 1),
        claude_line("assistant", "/work/proj", "done", 2)
    );
    std::fs::write(dir.join("s.jsonl"), text).unwrap();
    let out = env
        .run(&["session", "list", dir.to_str().unwrap()])
        .ok()
        .to_string();
    assert_eq!(out.lines().count(), 1, "{out}");
    assert!(
        out.contains("You are working on task t1. Phase: todo. Steering: ACK each item."),
        "{out}"
    );
}

/// Regression (#40): `session list DIR` was refused (an unexpected argument) though
/// `watch` and `session briefing` take paths. It lists the sessions under a directory
/// (not their sub-agents' files, nor files that are not transcripts) or in a file.
#[test]
fn regression_session_list_takes_directories_and_files() {
    let env = TestEnv::new();
    let dir = env.dir.path().join("transcripts");
    let proj = dir.join("-work-proj");
    std::fs::create_dir_all(proj.join("sess-a/subagents")).unwrap();
    let session = |id: &str, prompt: &str| {
        format!(
            "{}\n{}\n",
            claude_line("user", "/work/proj", prompt, 1),
            claude_line("assistant", "/work/proj", "done", 2)
        )
        .replace("sess-spice-test", id)
    };
    std::fs::write(proj.join("sess-a.jsonl"), session("sess-a", "first ask")).unwrap();
    std::fs::write(proj.join("sess-b.jsonl"), session("sess-b", "second ask")).unwrap();
    std::fs::write(proj.join("agent-1.jsonl"), session("sess-a", "sub")).unwrap();
    std::fs::write(
        proj.join("sess-a/subagents/agent-2.jsonl"),
        session("sess-a", "sub"),
    )
    .unwrap();
    std::fs::write(dir.join("notes.jsonl"), "{\"not\": \"a transcript\"}\n").unwrap();
    let run = |args: &[&str]| {
        common::to_run(
            env.cmd(args)
                .env("HOME", env.dir.path())
                .env_remove("SPICE_HOME")
                .output()
                .unwrap(),
        )
    };
    let d = dir.to_str().unwrap();
    let list = run(&["session", "list", d, "--json"]).json();
    let ids: Vec<&str> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["session_id"].as_str().unwrap())
        .collect();
    let mut sorted = ids.clone();
    sorted.sort();
    assert_eq!(sorted, ["sess-a", "sess-b"], "{list:#}");
    assert!(list
        .as_array()
        .unwrap()
        .iter()
        .any(|s| s["first_prompt"] == "second ask"));
    let text = run(&["session", "list", d]).ok().to_string();
    assert!(
        text.contains("sess-a") && text.contains("second ask"),
        "{text}"
    );
    let file = proj.join("sess-b.jsonl");
    let one = run(&["session", "list", file.to_str().unwrap(), "--json"]).json();
    assert_eq!(one.as_array().unwrap().len(), 1, "{one:#}");
    assert_eq!(one[0]["session_id"], "sess-b");
    let empty = env.dir.path().join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let none = run(&["session", "list", empty.to_str().unwrap()]);
    assert!(none.ok().starts_with("no sessions in "), "{}", none.stdout);
    run(&["session", "list", "/nonexistent/spice"]).fails(2, "no such file or directory");
}
