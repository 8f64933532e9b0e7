//! `spice session briefing` and `spice watch` on the issue #14 defects, through the
//! real binary: transcripts this file writes in the shapes Claude Code writes
//! (1.0.x inline sidechains, 2.x `Exit code N` failures), and properties of the
//! public samples under `$SPICE_TRANSCRIPTS`.

use crate::common;
use common::TestEnv;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

/// A Claude Code transcript built line by line: the main chain and one inline
/// sidechain, each threaded by `parentUuid`.
struct Transcript {
    version: &'static str,
    lines: Vec<String>,
    next: u32,
    main_parent: Option<String>,
    side_parent: Option<String>,
}

impl Transcript {
    fn new(version: &'static str) -> Self {
        Transcript {
            version,
            lines: vec![],
            next: 0,
            main_parent: None,
            side_parent: None,
        }
    }

    fn push(&mut self, side: bool, kind: &str, message: Value, extra: Value) {
        self.next += 1;
        let uuid = format!("00000000-0000-4000-8000-{:012}", self.next);
        let parent = if side {
            self.side_parent.replace(uuid.clone())
        } else {
            self.main_parent.replace(uuid.clone())
        };
        let mut line = json!({
            "parentUuid": parent, "isSidechain": side, "userType": "external",
            "cwd": "/work/app", "sessionId": "5e55-briefing-test", "version": self.version,
            "gitBranch": "main", "type": kind, "message": message, "uuid": uuid,
            "timestamp": format!("2026-11-30T10:{:02}:{:02}.000Z", self.next / 60, self.next % 60),
        });
        if let (Value::Object(l), Value::Object(e)) = (&mut line, extra) {
            l.extend(e);
        }
        self.lines.push(line.to_string());
    }

    fn prompt(&mut self, side: bool, text: &str) -> &mut Self {
        if side {
            self.side_parent = None;
        }
        self.push(
            side,
            "user",
            json!({"role": "user", "content": text}),
            json!({}),
        );
        self
    }

    fn say(&mut self, side: bool, text: &str, stop: Option<&str>) -> &mut Self {
        let id = format!("msg_{}", self.next + 1);
        self.push(
            side,
            "assistant",
            json!({"id": id, "role": "assistant", "model": "claude-test", "stop_reason": stop,
                   "content": [{"type": "text", "text": text}],
                   "usage": {"input_tokens": 1, "output_tokens": 1}}),
            json!({}),
        );
        self
    }

    fn call(&mut self, side: bool, id: &str, name: &str, input: Value) -> &mut Self {
        let msg = format!("msg_{}", self.next + 1);
        self.push(
            side,
            "assistant",
            json!({"id": msg, "role": "assistant", "model": "claude-test", "stop_reason": "tool_use",
                   "content": [{"type": "tool_use", "id": id, "name": name, "input": input}],
                   "usage": {"input_tokens": 1, "output_tokens": 1}}),
            json!({}),
        );
        self
    }

    fn result(
        &mut self,
        side: bool,
        id: &str,
        content: &str,
        is_error: bool,
        tur: Value,
    ) -> &mut Self {
        self.push(
            side,
            "user",
            json!({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": id, "content": content, "is_error": is_error}]}),
            json!({ "toolUseResult": tur }),
        );
        self
    }

    fn write(&self, dir: &Path, name: &str) -> PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, self.lines.join("\n") + "\n").unwrap();
        p
    }
}

fn ok_bash() -> Value {
    json!({"stdout": "", "stderr": "", "interrupted": false, "isImage": false})
}

fn briefing(env: &TestEnv, path: &Path) -> (Value, String) {
    let p = path.to_str().unwrap();
    let json = env.run(&["session", "briefing", p, "--json"]).json();
    let md = env.run(&["session", "briefing", p]).ok().to_string();
    (json, md)
}

/// A 1.0.x session whose work all ran in an inline sidechain, a Task answered once
/// the sidechain was done.
fn inline_sidechain_session() -> Transcript {
    let task_prompt = "Create the data model files under src/model";
    let mut t = Transcript::new("1.0.98");
    t.prompt(false, "build the data model")
        .call(
            false,
            "toolu_task1",
            "Task",
            json!({"description": "Create data models", "prompt": task_prompt, "subagent_type": "general-purpose"}),
        )
        .prompt(true, task_prompt)
        .call(true, "toolu_s1", "Bash", json!({"command": "mkdir -p src/model"}))
        .result(true, "toolu_s1", "", false, ok_bash())
        .call(true, "toolu_s2", "Bash", json!({"command": "ls src/modle"}))
        .result(
            true,
            "toolu_s2",
            "ls: cannot access 'src/modle': No such file or directory",
            true,
            json!("Error: ls: cannot access 'src/modle': No such file or directory"),
        )
        .call(
            true,
            "toolu_s3",
            "Write",
            json!({"file_path": "/work/app/src/model/todo.ts", "content": "export {}"}),
        )
        .result(
            true,
            "toolu_s3",
            "File created successfully",
            false,
            json!({"type": "create", "filePath": "/work/app/src/model/todo.ts", "content": "export {}"}),
        )
        .say(true, "The model files are in place.", Some("end_turn"))
        .result(
            false,
            "toolu_task1",
            "The model files are in place.",
            false,
            json!({"content": [{"type": "text", "text": "The model files are in place."}],
                   "totalDurationMs": 1000, "totalTokens": 10, "totalToolUseCount": 3}),
        )
        .say(false, "Done: the data model is in src/model.", Some("end_turn"));
    t
}

/// Regression (issue #14): a Claude 1.0.x session whose work ran in inline sidechains
/// briefed as `Commands (0, 0 failed)`.
#[test]
fn inline_sidechain_work_counts_in_the_briefing_marked_as_the_subagents() {
    let env = TestEnv::new();
    let f = inline_sidechain_session().write(env.dir.path(), "inline.jsonl");
    let (b, md) = briefing(&env, &f);
    let cmds = b["commands"].as_array().unwrap();
    assert_eq!(cmds.len(), 2, "{b}");
    assert!(
        cmds.iter().all(|c| c["subagent"].is_string()),
        "every command is the subagent's: {b}"
    );
    assert_eq!(cmds[1]["failed"], true);
    assert_eq!(
        cmds[1]["error"],
        "ls: cannot access 'src/modle': No such file or directory"
    );
    let files = b["files_changed"].as_array().unwrap();
    assert_eq!(files.len(), 1, "{b}");
    assert_eq!(files[0]["by_subagents"], 1);
    assert_eq!(b["subagents"][0]["description"], "Create data models");
    assert!(
        md.contains("## Commands (2, 1 failed; 2 by subagents)"),
        "{md}"
    );
    assert!(
        md.contains("- `mkdir -p src/model` (ok, line 4, by subagent Create data models)"),
        "{md}"
    );
    assert!(
        md.contains(
            "- `/work/app/src/model/todo.ts` added (1 change, by subagent Create data models)"
        ),
        "{md}"
    );
    // The main conversation's own reply is still where it stopped.
    assert_eq!(
        b["last_assistant_text"],
        "Done: the data model is in src/model."
    );
    assert_eq!(b["prompts"], json!(["build the data model"]));
}

/// A 2.x session: the same file edited three times, a failed commit, then a call that
/// never got a result but was followed by more turns.
fn later_session() -> Transcript {
    let mut t = Transcript::new("2.1.14");
    let edit = |old: &str, new: &str| json!({"file_path": "/work/app/src/lib.rs", "old_string": old, "new_string": new});
    let edited = json!({"filePath": "/work/app/src/lib.rs", "oldString": "a", "newString": "b",
                        "structuredPatch": [], "userModified": false, "replaceAll": false});
    t.prompt(false, "edit src/lib.rs three times, then commit")
        .call(false, "toolu_e1", "Edit", edit("a", "b"))
        .result(false, "toolu_e1", "The file has been updated.", false, edited.clone())
        .call(false, "toolu_e2", "Edit", edit("b", "c"))
        .result(false, "toolu_e2", "The file has been updated.", false, edited.clone())
        .call(false, "toolu_e3", "Edit", edit("c", "d"))
        .result(false, "toolu_e3", "The file has been updated.", false, edited)
        .call(false, "toolu_c1", "Bash", json!({"command": "git commit -am fix"}))
        .result(
            false,
            "toolu_c1",
            "Exit code 128\nfatal: not a git repository (or any of the parent directories): .git",
            true,
            json!("Error: Exit code 128\nfatal: not a git repository (or any of the parent directories): .git"),
        )
        // Never answered, yet the session went on: two more turns.
        .call(false, "toolu_stale", "Bash", json!({"command": "cargo build --release"}))
        .say(false, "I could not commit: this is not a repository.", Some("end_turn"))
        .prompt(false, "fine, leave it uncommitted")
        .say(false, "Left uncommitted.", Some("end_turn"));
    t
}

/// Regression (issue #14): a stale call was reported as unfinished, a file was listed
/// once per edit, and a failed command showed no reason.
#[test]
fn later_turns_retire_a_stale_call_files_are_listed_once_and_failures_say_why() {
    let env = TestEnv::new();
    let f = later_session().write(env.dir.path(), "later.jsonl");
    let (b, md) = briefing(&env, &f);
    assert!(b["unfinished_call"].is_null(), "{b}");
    assert!(!md.contains("unfinished"), "{md}");
    let files = b["files_changed"].as_array().unwrap();
    assert_eq!(files.len(), 1, "{b}");
    assert_eq!(files[0]["changes"], 3);
    assert_eq!(files[0]["change"]["kind"], "update");
    assert_eq!(md.matches("`/work/app/src/lib.rs`").count(), 1, "{md}");
    assert!(
        md.contains("- `/work/app/src/lib.rs` updated (3 changes)"),
        "{md}"
    );
    let commit = &b["commands"][0];
    assert_eq!(commit["command"], "git commit -am fix");
    assert_eq!(commit["exit_code"], 128);
    assert_eq!(
        commit["error"],
        "fatal: not a git repository (or any of the parent directories): .git"
    );
    assert!(
        md.contains("(FAILED, exit 128, line 8)\n  > fatal: not a git repository"),
        "{md}"
    );

    // The same session stopping in a call is where it stopped.
    let mut stopped = later_session();
    stopped.call(false, "toolu_last", "Bash", json!({"command": "sleep 600"}));
    let f = stopped.write(env.dir.path(), "stopped.jsonl");
    let (b, md) = briefing(&env, &f);
    assert_eq!(b["unfinished_call"]["command"], "sleep 600", "{b}");
    assert!(md.contains("- an unfinished `Bash` call at line"), "{md}");
}

/// Regression (issue #14): `watch` showed Claude 2.x's "Exit code N" prefix instead of
/// the error.
#[test]
fn watch_shows_the_error_not_the_exit_code_prefix() {
    let env = TestEnv::new();
    let f = later_session().write(env.dir.path(), "later.jsonl");
    let r = env.run(&["watch", "--once", f.to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stdout.contains(
            "✗ failed exit 128: fatal: not a git repository (or any of the parent directories): .git"
        ),
        "{}",
        r.stdout
    );
    assert!(!r.stdout.contains("Exit code"), "{}", r.stdout);
    let r = env.run(&["watch", "--once", "--json", f.to_str().unwrap()]);
    let result = r
        .stdout
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|v| v["event"]["type"] == "tool_result" && v["event"]["failed"] == true)
        .expect("a failed tool result");
    assert_eq!(result["event"]["exit_code"], 128);
    assert!(
        result["event"]["output"]
            .as_str()
            .unwrap()
            .starts_with("fatal: not a git repository"),
        "{result}"
    );
}

fn samples() -> PathBuf {
    let dir = std::env::var_os("SPICE_TRANSCRIPTS").map(PathBuf::from);
    let dir = dir.expect("SPICE_TRANSCRIPTS must name the public transcript samples (../shared/fixtures/transcripts)");
    assert!(
        dir.join("claude").is_dir(),
        "{}: no claude/ samples",
        dir.display()
    );
    dir
}

fn sample_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            sample_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "jsonl") {
            out.push(p);
        }
    }
}

/// Every Claude sample with inline sidechains (`isSidechain: true` lines without an
/// `agentId` in its main file) briefs sub-agent commands, each marked.
#[test]
#[ignore = "needs SPICE_TRANSCRIPTS (the public transcript samples)"]
fn sample_inline_sidechain_sessions_brief_their_subagent_commands() {
    let dir = samples();
    let env = TestEnv::new();
    let mut files = vec![];
    sample_files(&dir.join("claude"), &mut files);
    let inline: Vec<PathBuf> = files
        .into_iter()
        .filter(|f| {
            let text = std::fs::read_to_string(f).unwrap();
            let lines: Vec<Value> = text
                .lines()
                .filter_map(|l| serde_json::from_str(l).ok())
                .collect();
            lines.iter().any(|l| l["isSidechain"] == false)
                && lines
                    .iter()
                    .any(|l| l["isSidechain"] == true && l.get("agentId").is_none())
        })
        .collect();
    assert!(
        !inline.is_empty(),
        "no inline-sidechain sample under {}",
        dir.display()
    );
    for f in inline {
        let (b, md) = briefing(&env, &f);
        let by_subagents = b["commands"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| c["subagent"].is_string())
            .count();
        assert!(by_subagents > 0, "{}: no sub-agent command", f.display());
        assert!(
            md.contains(&format!("; {by_subagents} by subagents)")),
            "{}: {md}",
            f.display()
        );
    }
}

/// In every sample: a file is listed once; a failed command with any output has an
/// error, and a Claude one never shows the harness's `Exit code N` line as it.
#[test]
#[ignore = "needs SPICE_TRANSCRIPTS (the public transcript samples)"]
fn sample_briefings_list_files_once_and_say_why_commands_failed() {
    let dir = samples();
    let env = TestEnv::new();
    let mut files = vec![];
    sample_files(&dir, &mut files);
    let mut errors = 0;
    for f in files {
        let (b, _) = briefing(&env, &f);
        let paths: Vec<&str> = b["files_changed"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x["path"].as_str().unwrap())
            .collect();
        let mut unique = paths.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(
            unique.len(),
            paths.len(),
            "{}: a file listed twice",
            f.display()
        );
        for c in b["commands"].as_array().unwrap() {
            if let Some(e) = c["error"].as_str() {
                errors += 1;
                assert!(!e.starts_with("Exit code"), "{}: {c}", f.display());
            }
        }
    }
    assert!(errors > 0, "no failed command with an error in the samples");
}
