//! `spice watch` following real files that are rotated, truncated, renamed and
//! deleted while it runs (issue #14, "Transcript follower"), in text and `--json`,
//! and transcripts whose first line is longer than any fixed head.

use crate::common;
use common::TestEnv;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// A Claude Code line this project writes itself (not copied from any sample).
fn claude_line(kind: &str, cwd: &str, text: &str, uuid: u32) -> String {
    let content = match kind {
        "user" => serde_json::json!(text),
        _ => serde_json::json!([{ "type": "text", "text": text }]),
    };
    serde_json::json!({
        "type": kind, "uuid": format!("u{uuid}"), "parentUuid": null, "sessionId": "sess-watch-test",
        "cwd": cwd, "version": "2.1.0", "gitBranch": "main", "timestamp": "2026-11-29T12:00:00.000Z",
        "message": { "role": kind, "content": content, "id": format!("m{uuid}"), "model": "claude-test" },
    })
    .to_string()
}

fn prompts(cwd: &str, from: u32, to: u32, tag: &str) -> String {
    (from..=to)
        .map(|i| claude_line("user", cwd, &format!("{tag} {i}"), i) + "\n")
        .collect()
}

fn append(path: &Path, text: &str) {
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .unwrap();
    f.write_all(text.as_bytes()).unwrap();
}

/// A running `spice watch` whose stdout is read line by line.
struct Watch {
    child: Child,
    lines: mpsc::Receiver<String>,
    seen: Vec<String>,
    stderr: std::path::PathBuf,
}

impl Watch {
    fn start(env: &TestEnv, args: &[&str]) -> Watch {
        let stderr = env.dir.path().join(format!("watch-{}.err", args.len()));
        let mut argv = vec!["watch"];
        argv.extend_from_slice(args);
        let mut child = env
            .cmd(&argv)
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&stderr).unwrap())
            .spawn()
            .unwrap();
        let out = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for l in BufReader::new(out).lines() {
                let Ok(l) = l else { break };
                if tx.send(l).is_err() {
                    break;
                }
            }
        });
        Watch {
            child,
            lines,
            seen: Vec::new(),
            stderr,
        }
    }

    /// Reads lines until one satisfies `hit`, for at most 20 s.
    fn until(&mut self, what: &str, hit: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if let Ok(l) = self.lines.recv_timeout(Duration::from_millis(50)) {
                self.seen.push(l.clone());
                if hit(&l) {
                    return l;
                }
            }
        }
        panic!(
            "never saw {what}; saw:\n{}\nstderr: {}",
            self.seen.join("\n"),
            std::fs::read_to_string(&self.stderr).unwrap_or_default()
        );
    }

    fn until_json(
        &mut self,
        what: &str,
        hit: impl Fn(&serde_json::Value) -> bool,
    ) -> serde_json::Value {
        let l = self.until(what, |l| serde_json::from_str(l).is_ok_and(|v| hit(&v)));
        serde_json::from_str(&l).unwrap()
    }

    fn json(&self) -> Vec<serde_json::Value> {
        self.seen
            .iter()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
            .collect()
    }

    fn stop(mut self) -> (Vec<String>, String) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        while let Ok(l) = self.lines.try_recv() {
            self.seen.push(l);
        }
        let err = std::fs::read_to_string(&self.stderr).unwrap_or_default();
        (std::mem::take(&mut self.seen), err)
    }
}

impl Drop for Watch {
    /// A failed assertion leaves no `spice watch` running.
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn prompt_of(v: &serde_json::Value) -> Option<&str> {
    (v["event"]["type"] == "user_prompt").then(|| v["event"]["text"].as_str().unwrap_or(""))
}

/// Issue #14: rotation lost the lines written just before the rename (15 of 36).
#[test]
fn a_rotated_file_is_read_to_its_end_before_the_new_one() {
    let env = TestEnv::new();
    let cwd = env.repo.display().to_string();
    let f = env.dir.path().join("live.jsonl");
    append(&f, &prompts(&cwd, 1, 1, "old"));
    let mut w = Watch::start(&env, &["--json", f.to_str().unwrap()]);
    w.until_json("the first line", |v| prompt_of(v) == Some("old 1"));
    // Written and rotated at once, as a logger does: nothing waits for the watcher.
    append(&f, &prompts(&cwd, 2, 36, "old"));
    std::fs::rename(&f, env.dir.path().join("live.jsonl.1")).unwrap();
    append(&f, &prompts(&cwd, 1, 3, "new"));
    w.until_json("the new file's last line", |v| {
        prompt_of(v) == Some("new 3")
    });
    let seen = w.json();
    let got: Vec<&str> = seen.iter().filter_map(prompt_of).collect();
    let mut want: Vec<String> = (1..=36).map(|i| format!("old {i}")).collect();
    want.extend((1..=3).map(|i| format!("new {i}")));
    assert_eq!(got, want, "every line of both files, once, in order");
    let rotated = seen
        .iter()
        .position(|v| v["kind"] == "rotated")
        .expect("a rotated record");
    assert_eq!(seen[rotated]["file"], f.to_str().unwrap());
    let after: Vec<&serde_json::Value> = seen[rotated..]
        .iter()
        .filter(|v| prompt_of(v).is_some())
        .collect();
    assert_eq!(
        prompt_of(after[0]),
        Some("new 1"),
        "the record comes before the new file"
    );
    assert_eq!(after[0]["event"]["line"], 1);
    let (_, err) = w.stop();
    assert!(err.is_empty(), "{err}");
}

/// Issue #14: a file shrunk to a shorter prefix re-emitted the kept prefix, and
/// `--json` carried no reset record.
#[test]
fn a_file_shrunk_to_a_prefix_is_a_reset_and_nothing_kept_repeats() {
    let env = TestEnv::new();
    let cwd = env.repo.display().to_string();
    let f = env.dir.path().join("live.jsonl");
    let body = prompts(&cwd, 1, 10, "p");
    append(&f, &body);
    let mut w = Watch::start(&env, &["--json", f.to_str().unwrap()]);
    w.until_json("line 10", |v| prompt_of(v) == Some("p 10"));
    let six: usize = body.split_inclusive('\n').take(6).map(str::len).sum();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&f)
        .unwrap()
        .set_len(six as u64)
        .unwrap();
    let reset = w.until_json("a reset record", |v| v["kind"] == "reset");
    assert_eq!(
        reset,
        serde_json::json!({"file": f.to_str().unwrap(), "kind": "reset", "reason": "truncated",
            "line": 6, "offset": six})
    );
    append(&f, &prompts(&cwd, 7, 7, "after"));
    let next = w.until_json("the line after the cut", |v| {
        prompt_of(v) == Some("after 7")
    });
    assert_eq!(next["event"]["line"], 7);
    let seen = w.json();
    let got: Vec<&str> = seen.iter().filter_map(prompt_of).collect();
    let mut want: Vec<String> = (1..=10).map(|i| format!("p {i}")).collect();
    want.push("after 7".into());
    assert_eq!(got, want, "the kept lines are not emitted again");
    w.stop();

    // The same in text: said once, in words.
    std::fs::write(&f, &body).unwrap();
    let mut w = Watch::start(&env, &[f.to_str().unwrap()]);
    w.until("line 10", |l| l.ends_with("p 10"));
    std::fs::OpenOptions::new()
        .write(true)
        .open(&f)
        .unwrap()
        .set_len(six as u64)
        .unwrap();
    w.until("the reset", |l| {
        l.contains("live.jsonl was truncated after line 6: reading on from there")
    });
    append(&f, &prompts(&cwd, 7, 7, "after"));
    w.until("the line after the cut", |l| l.ends_with("after 7"));
    let (seen, _) = w.stop();
    assert_eq!(
        seen.iter().filter(|l| l.ends_with("p 3")).count(),
        1,
        "{seen:?}"
    );
}

/// Issue #14: in a followed directory, a file renamed to another name was read again
/// from its start.
#[test]
fn a_file_renamed_in_a_followed_directory_goes_on_under_its_new_name() {
    let env = TestEnv::new();
    let cwd = env.repo.display().to_string();
    let dir = env.dir.path().join("project");
    std::fs::create_dir(&dir).unwrap();
    let (a, b) = (dir.join("a.jsonl"), dir.join("b.jsonl"));
    append(&a, &prompts(&cwd, 1, 3, "a"));
    let mut w = Watch::start(&env, &["--json", dir.to_str().unwrap()]);
    w.until_json("a's last line", |v| prompt_of(v) == Some("a 3"));
    std::fs::rename(&a, &b).unwrap();
    append(&b, &prompts(&cwd, 4, 4, "a"));
    let next = w.until_json("the line written after the rename", |v| {
        prompt_of(v) == Some("a 4")
    });
    assert_eq!(next["file"], b.to_str().unwrap());
    assert_eq!(next["event"]["line"], 4);
    let seen = w.json();
    let renamed: Vec<&serde_json::Value> = seen.iter().filter(|v| v["kind"] == "renamed").collect();
    assert_eq!(
        renamed,
        [
            &serde_json::json!({"file": b.to_str().unwrap(), "kind": "renamed", "from": a.to_str().unwrap()})
        ]
    );
    let got: Vec<&str> = seen.iter().filter_map(prompt_of).collect();
    assert_eq!(got, ["a 1", "a 2", "a 3", "a 4"], "nothing read again");
    let (_, err) = w.stop();
    assert!(err.is_empty(), "{err}");
}

/// Issue #14: a deleted file printed "failed to read" every 250 ms, forever.
#[test]
fn a_deleted_file_is_said_once_and_waited_for() {
    let env = TestEnv::new();
    let cwd = env.repo.display().to_string();
    let f = env.dir.path().join("live.jsonl");
    append(&f, &prompts(&cwd, 1, 2, "first"));
    let mut w = Watch::start(&env, &[f.to_str().unwrap()]);
    w.until("the first file", |l| l.ends_with("first 2"));
    append(&f, &prompts(&cwd, 3, 3, "first"));
    std::fs::remove_file(&f).unwrap();
    w.until("the line written before the deletion", |l| {
        l.ends_with("first 3")
    });
    w.until("the file said gone", |l| {
        l == "── live.jsonl is gone: waiting for it to come back ──"
    });
    append(&f, &prompts(&cwd, 1, 1, "second"));
    w.until("the file that came back", |l| l.ends_with("second 1"));
    let (seen, err) = w.stop();
    assert!(!err.contains("failed to read"), "{err}");
    assert_eq!(
        seen.iter().filter(|l| l.contains("is gone")).count(),
        1,
        "{seen:?}"
    );
    assert!(
        seen.contains(
            &"── live.jsonl was replaced by a new file: reading it from the start ──".into()
        ),
        "{seen:?}"
    );

    // In a directory, a deleted file is let go of, with a record.
    let dir = env.dir.path().join("project");
    std::fs::create_dir(&dir).unwrap();
    let (a, b) = (dir.join("a.jsonl"), dir.join("b.jsonl"));
    append(&a, &prompts(&cwd, 1, 1, "a"));
    append(&b, &prompts(&cwd, 1, 1, "b"));
    let mut w = Watch::start(&env, &["--json", dir.to_str().unwrap()]);
    w.until_json("both files", |v| prompt_of(v) == Some("b 1"));
    std::fs::remove_file(&a).unwrap();
    let removed = w.until_json("a removed record", |v| v["kind"] == "removed");
    assert_eq!(
        removed,
        serde_json::json!({"file": a.to_str().unwrap(), "kind": "removed", "waiting": false})
    );
    append(&b, &prompts(&cwd, 2, 2, "b"));
    w.until_json("b goes on", |v| prompt_of(v) == Some("b 2"));
    let (seen, err) = w.stop();
    assert!(!err.contains("failed to read"), "{err}");
    assert_eq!(
        seen.iter().filter(|l| l.contains("\"removed\"")).count(),
        1,
        "{seen:?}"
    );
}

/// Issue #14: a transcript whose first line is over 1 MiB (a large first prompt) was
/// "not a Claude Code or Codex transcript"; a Codex rollout whose first record is
/// longer than 8 MiB had no session id or cwd.
#[test]
fn a_first_line_of_many_mebibytes_is_detected_and_described() {
    let env = TestEnv::new();
    let cwd = env.repo.display().to_string();
    let big = "x".repeat(3 << 20);
    let claude = env.dir.path().join("big.jsonl");
    append(&claude, &(claude_line("user", &cwd, &big, 1) + "\n"));
    append(&claude, &prompts(&cwd, 2, 2, "small"));
    let r = env.run(&["watch", "--once", "--json", claude.to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let lines: Vec<serde_json::Value> = r
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let got: Vec<&str> = lines.iter().filter_map(prompt_of).collect();
    assert_eq!(got.len(), 2, "{got:.80?}");
    assert_eq!(got[0], big);
    assert_eq!(got[1], "small 2");

    let huge = "y".repeat(9 << 20);
    let day = env.dir.path().join(".codex/sessions/2026/11/29");
    std::fs::create_dir_all(&day).unwrap();
    let rollout = day.join("rollout-2026-11-29T12-00-00-0000.jsonl");
    let meta = serde_json::json!({
        "timestamp": "2026-11-29T12:00:00.000Z", "type": "session_meta",
        "payload": { "base_instructions": { "text": huge }, "id": "thread-big", "cwd": cwd,
                     "originator": "codex_cli_rs", "cli_version": "0.63.0" },
    });
    let prompt = serde_json::json!({
        "timestamp": "2026-11-29T12:00:01.000Z", "type": "event_msg",
        "payload": { "type": "user_message", "message": "codex prompt" },
    });
    append(&rollout, &format!("{meta}\n{prompt}\n"));
    let r = env.run(&["watch", "--once", "--json", rollout.to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("codex prompt"), "{}", r.stdout);
    let list = env.run(&["session", "list", "--json"]).json();
    let ids: Vec<&str> = list
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["session_id"].as_str())
        .collect();
    assert_eq!(ids, ["thread-big"], "{list}");
}
