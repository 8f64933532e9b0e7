//! The decoder on every real Codex sample under `$SPICE_TRANSCRIPTS` (the
//! `fixtures/transcripts` dir); each test is ignored unless asked for, and then fails
//! without it. Every count
//! asserted here was taken from the file with jq/python, not from the decoder.

use super::tests::{
    assistant_texts, calls, changes, compactions, count, decode_bytes, meta, prompts, results,
    turn_ends,
};
use crate::transcript::event::{ChangeKind, Event, EventKind, EXCERPT};
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

fn fixtures() -> PathBuf {
    // Only run when asked (`--include-ignored`, as .ci/run does): then a missing
    // directory is a failure, never a silent pass.
    std::env::var_os("SPICE_TRANSCRIPTS")
        .map(PathBuf::from)
        .expect("SPICE_TRANSCRIPTS must name the real transcripts (.ci/run sets it to ../shared/fixtures/transcripts)")
}

/// Decodes `rel` under the fixtures dir: no malformed line, and the per-call-id
/// invariants hold (one result, after its call; one set of file changes).
fn decode(dir: &Path, rel: &str) -> Vec<Event> {
    let bytes = std::fs::read(dir.join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"));
    let (events, malformed) = decode_bytes(&bytes);
    assert_eq!(malformed, 0, "{rel}: malformed lines");
    let mut called = HashSet::new();
    let mut answered = HashSet::new();
    let mut changed_at: HashMap<&str, u64> = HashMap::new();
    let mut line = 0;
    for e in &events {
        assert!(
            e.line >= line,
            "{rel}: events out of file order at line {}",
            e.line
        );
        line = e.line;
        match &e.kind {
            EventKind::ToolCall { id, .. } => {
                assert!(called.insert(id.as_str()), "{rel}: call {id} twice")
            }
            EventKind::ToolResult { id, output, .. } => {
                assert!(
                    called.contains(id.as_str()),
                    "{rel}: result before call {id}"
                );
                assert!(answered.insert(id.as_str()), "{rel}: two results for {id}");
                assert!(output.len() <= EXCERPT + '…'.len_utf8());
            }
            EventKind::FileChange {
                call_id: Some(id), ..
            } => {
                let at = *changed_at.entry(id).or_insert(e.line);
                assert_eq!(at, e.line, "{rel}: two sets of file changes for {id}");
            }
            _ => {}
        }
    }
    events
}

#[test]
#[ignore = "needs the real transcripts: SPICE_TRANSCRIPTS (set by .ci/run)"]
fn every_codex_fixture_decodes() {
    let dir = fixtures();
    let mut files = Vec::new();
    for sub in ["codex", "current"] {
        for entry in std::fs::read_dir(dir.join(sub)).unwrap() {
            let name = entry.unwrap().file_name().into_string().unwrap();
            if name.ends_with(".jsonl") && (sub == "codex" || name.starts_with("codex-")) {
                files.push(format!("{sub}/{name}"));
            }
        }
    }
    assert!(files.len() >= 15, "found only {files:?}");
    for rel in files {
        let events = decode(&dir, &rel);
        let m = meta(&events);
        assert!(m.session_id.is_some(), "{rel}: no session id");
        assert_eq!(m.agent, Some(crate::transcript::event::Agent::Codex));
    }
}

#[test]
#[ignore = "needs the real transcripts: SPICE_TRANSCRIPTS (set by .ci/run)"]
fn legacy_bare_format() {
    let dir = fixtures();
    let ev = decode(&dir, "codex/legacy-2025-09-bare-format.jsonl");
    let m = meta(&ev);
    assert_eq!(
        m.session_id.as_deref(),
        Some("cf4def41-21e0-4b91-adb4-5397c1492084")
    );
    assert_eq!(m.git_branch.as_deref(), Some("main"));
    assert_eq!(
        m.cwd.as_deref(),
        Some("/home/user/projects/codex-session-viewer")
    );
    assert_eq!((m.model, m.version), (None, None));
    // No per-line timestamps in this era: only the header's.
    assert!(ev.iter().all(|e| e.line == 1 || e.timestamp.is_none()));

    let shell = calls(&ev, "shell");
    assert_eq!(shell.len(), 196);
    assert!(shell.iter().all(|(_, c, _)| c.is_some()));
    assert_eq!(shell[0].1, Some("ls -la"));
    let res = results(&ev);
    let mut failed: Vec<(u64, Option<i32>)> = shell
        .iter()
        .filter_map(|(id, ..)| res.get(id))
        .filter(|r| r.2)
        .map(|r| (r.0, r.1))
        .collect();
    failed.sort();
    // 13 plain-text outputs (8 apply_patch verification errors, 5 sandbox denials that
    // name the exit code) and one JSON output with exit_code 2 (line 186).
    assert_eq!(
        failed,
        vec![
            (170, None),
            (182, None),
            (186, Some(2)),
            (267, Some(1)),
            (313, Some(2)),
            (436, None),
            (462, Some(2)),
            (598, None),
            (711, None),
            (779, None),
            (897, None),
            (1094, None),
            (1184, Some(2)),
            (1298, Some(2)),
        ]
    );
    // MCP tools keep their `server__tool` names; 7 of 10 memory calls errored.
    let memory = calls(&ev, "memory__add_observations");
    assert_eq!(memory.len(), 10);
    assert_eq!(memory.iter().filter(|(id, ..)| res[id].2).count(), 7);

    // 91 apply_patch runs (heredoc and argv forms), 82 succeeded with one file each.
    let ch = changes(&ev);
    assert_eq!(ch.len(), 82);
    let adds: Vec<&str> = ch
        .iter()
        .filter(|c| *c.1 == ChangeKind::Add)
        .map(|c| c.0)
        .collect();
    assert_eq!(
        adds,
        [
            "src/scanner/diffIndex.ts",
            "tests/diffIndex.test.ts",
            "src/scanner/__tests__/diffIndex.test.ts",
            "docs/scanner-poc.md",
            "src/utils/fs-io.ts",
            "src/scanner/diffProvider.ts",
            "src/utils/dir-enum.ts",
            "src/utils/__tests__/functionFiltersGeneric.test.ts",
            "scripts/log-server.mjs",
            ".env.example",
            "tools/log-server.mjs",
        ]
    );
    let deletes: Vec<&str> = ch
        .iter()
        .filter(|c| *c.1 == ChangeKind::Delete)
        .map(|c| c.0)
        .collect();
    assert_eq!(
        deletes,
        ["tests/diffIndex.test.ts", "scripts/log-server.mjs"]
    );
    assert_eq!(ch.iter().filter(|c| c.0 == "src/App.tsx").count(), 40);

    let p = prompts(&ev);
    assert_eq!(p.len(), 45);
    assert!(p[0].starts_with("What's the next task I should work on?"));
    assert_eq!(
        count(&ev, |k| matches!(k, EventKind::InjectedContext { .. })),
        2
    );
    assert_eq!(turn_ends(&ev), 0);
}

#[test]
#[ignore = "needs the real transcripts: SPICE_TRANSCRIPTS (set by .ci/run)"]
fn v0_58_shell_and_ghost_snapshot() {
    let dir = fixtures();
    let ev = decode(&dir, "codex/v0.58.0-shell-ghost-snapshot.jsonl");
    let m = meta(&ev);
    assert_eq!(
        m.session_id.as_deref(),
        Some("019a93b9-f380-7600-98ff-940e6b99603c")
    );
    assert_eq!(m.version.as_deref(), Some("0.58.0"));
    assert_eq!(m.model.as_deref(), Some("gpt-5.1-codex"));
    assert_eq!(
        m.cwd.as_deref(),
        Some("/home/user/projects/temp/chatbot-ui")
    );
    assert_eq!(m.git_branch.as_deref(), Some("main"));
    let shell = calls(&ev, "shell");
    assert_eq!(shell.len(), 37);
    assert_eq!(shell[0].1, Some("ls"));
    assert_eq!(shell[0].2, Some("/home/user/projects/temp/chatbot-ui"));
    let res = results(&ev);
    let exits: Vec<i32> = shell
        .iter()
        .filter(|(id, ..)| res[id].2)
        .filter_map(|(id, ..)| res[id].1)
        .collect();
    assert_eq!(exits, [2, 2, 1]);
    let ch = changes(&ev);
    assert_eq!(
        ch,
        [("components/chat/chat-helpers/index.ts", &ChangeKind::Update); 2]
    );
    // The ghost_snapshot is Codex's undo commit, not the agent's.
    assert_eq!(count(&ev, |k| matches!(k, EventKind::Commit { .. })), 0);
    assert!(prompts(&ev)[0].starts_with("finish up the users work"));
    assert_eq!(turn_ends(&ev), 0);
}

#[test]
#[ignore = "needs the real transcripts: SPICE_TRANSCRIPTS (set by .ci/run)"]
fn v0_77_shell_small() {
    let dir = fixtures();
    let ev = decode(&dir, "codex/v0.77.0-shell-small.jsonl");
    let m = meta(&ev);
    assert_eq!(m.model.as_deref(), Some("gpt-5-1-codex-2025-11-13"));
    assert_eq!(m.git_branch.as_deref(), Some("codex"));
    let shell = calls(&ev, "shell");
    let commands: Vec<_> = shell.iter().map(|c| c.1.unwrap()).collect();
    assert_eq!(
        commands,
        [
            "ls",
            "rg --files -g 'AGENTS.md'",
            "sed -n '1,160p' README.md"
        ]
    );
    let res = results(&ev);
    assert!(shell
        .iter()
        .all(|(id, ..)| res[id].1 == Some(0) && !res[id].2));
    assert_eq!(
        prompts(&ev),
        ["what is current repository about? summarize purpuse and explain goals"]
    );
    assert_eq!(
        count(&ev, |k| matches!(k, EventKind::InjectedContext { .. })),
        2
    );
}

#[test]
#[ignore = "needs the real transcripts: SPICE_TRANSCRIPTS (set by .ci/run)"]
fn v0_104_remote_compaction_and_unified_exec() {
    let dir = fixtures();
    let ev = decode(
        &dir,
        "codex/v0.104.0a1-desktop-compacted-image-redacted.jsonl",
    );
    assert_eq!(meta(&ev).model.as_deref(), Some("gpt-5.3-codex"));
    let exec = calls(&ev, "exec_command");
    assert_eq!(exec.len(), 212);
    let res = results(&ev);
    assert!(exec.iter().all(|(id, ..)| res.contains_key(id)));
    assert_eq!(calls(&ev, "write_stdin").len(), 70);
    assert_eq!(calls(&ev, "apply_patch").len(), 49);
    assert_eq!(
        calls(&ev, "mcp__supabase_right_aim_ops__execute_sql").len(),
        22
    );
    // Redacted patches name no files.
    assert!(changes(&ev).is_empty());
    // One `compacted` (line 1788, encrypted remote summary); context_compacted adds none.
    assert_eq!(compactions(&ev), [(1788, Some("remote"))]);
    assert_eq!(turn_ends(&ev), 33);
    assert_eq!(prompts(&ev).len(), 38);
}

#[test]
#[ignore = "needs the real transcripts: SPICE_TRANSCRIPTS (set by .ci/run)"]
fn v0_104_unfinished_call() {
    let dir = fixtures();
    let ev = decode(&dir, "codex/v0.104.0a1-unfinished-call-redacted.jsonl");
    let exec = calls(&ev, "exec_command");
    assert_eq!(exec.len(), 1);
    assert!(results(&ev).is_empty());
    assert_eq!(prompts(&ev).len(), 1);
    assert_eq!(turn_ends(&ev), 0);
}

#[test]
#[ignore = "needs the real transcripts: SPICE_TRANSCRIPTS (set by .ci/run)"]
fn v0_125_exec_events_and_apply_patch() {
    let dir = fixtures();
    let ev = decode(&dir, "codex/v0.125.0-exec-events-apply-patch.jsonl");
    let m = meta(&ev);
    assert_eq!(m.version.as_deref(), Some("0.125.0"));
    assert_eq!(m.model.as_deref(), Some("gpt-5.5"));
    assert_eq!(m.git_branch.as_deref(), Some("feat/codex-agent-plugin"));
    let exec = calls(&ev, "exec_command");
    assert_eq!(exec.len(), 43);
    let res = results(&ev);
    // Every command went to the background first; each still gets one final result.
    assert!(exec.iter().all(|(id, ..)| res[id].1.is_some()));
    let mut failed: Vec<(i32, &str)> = exec
        .iter()
        .filter(|(id, ..)| res[id].2)
        .map(|(id, c, _)| (res[id].1.unwrap(), c.unwrap().split(' ').next().unwrap()))
        .collect();
    failed.sort();
    assert_eq!(failed, [(1, "npm"), (1, "rg"), (1, "rg"), (2, "rg")]);
    let stdin = calls(&ev, "write_stdin");
    assert_eq!(stdin.len(), 54);
    // One poll hit a closed stdin: a failure without an exit code.
    assert_eq!(
        stdin
            .iter()
            .filter(|(id, ..)| res[id].2 && res[id].1.is_none())
            .count(),
        1
    );
    assert_eq!(calls(&ev, "apply_patch").len(), 3);
    let ch = changes(&ev);
    assert_eq!(
        ch,
        [
            (
                "src/agents/plugins/__tests__/codemie-code-reasoning.test.ts",
                &ChangeKind::Update
            ),
            (
                "src/agents/plugins/codemie-code.plugin.ts",
                &ChangeKind::Update
            ),
            (
                "src/agents/plugins/opencode/opencode.plugin.ts",
                &ChangeKind::Update
            ),
        ]
    );
    assert_eq!(
        prompts(&ev),
        [
            "show tools",
            "let's update the defailt context compart to 90 in env var"
        ]
    );
    assert_eq!(turn_ends(&ev), 2);
    assert_eq!(assistant_texts(&ev).len(), 13);
}

#[test]
#[ignore = "needs the real transcripts: SPICE_TRANSCRIPTS (set by .ci/run)"]
fn v0_128_desktop_without_turn_context() {
    let dir = fixtures();
    let ev = decode(&dir, "codex/v0.128.0a1-desktop-dynamic-tools.jsonl");
    let m = meta(&ev);
    assert_eq!(m.model, None);
    assert_eq!(m.cwd.as_deref(), Some("/Users/Sample_User/naya"));
    let exec = calls(&ev, "exec_command");
    assert_eq!(exec.len(), 35);
    // No workdir and no turn_context: the session's cwd.
    assert_eq!(exec[0].2, Some("/Users/Sample_User/naya"));
    assert_eq!(calls(&ev, "mcp__node_repl__js").len(), 3);
    let res = results(&ev);
    let failed: Vec<_> = exec.iter().filter(|(id, ..)| res[id].2).collect();
    assert_eq!(failed.len(), 1);
    assert!(failed[0].1.unwrap().starts_with("ps -ef"));
    assert_eq!(res[failed[0].0].1, Some(1));
    let p = prompts(&ev);
    assert_eq!(p.len(), 3);
    assert!(p[0]
        .trim_start()
        .starts_with("# Files mentioned by the user"));
    // No task events in this file: the three final answers end the turns.
    assert_eq!(turn_ends(&ev), 3);
}

#[test]
#[ignore = "needs the real transcripts: SPICE_TRANSCRIPTS (set by .ci/run)"]
fn v0_135_exec() {
    let dir = fixtures();
    let ev = decode(&dir, "codex/v0.135.0-exec-redacted.jsonl");
    assert_eq!(meta(&ev).model.as_deref(), Some("gpt-5.5"));
    assert_eq!(
        meta(&ev).cwd.as_deref(),
        Some("/tmp/agent-history-real-agent/codex/workspace")
    );
    assert_eq!(count(&ev, |k| matches!(k, EventKind::ToolCall { .. })), 0);
    assert_eq!(prompts(&ev).len(), 1);
    assert_eq!(assistant_texts(&ev).len(), 1);
    assert_eq!(turn_ends(&ev), 1);
    let usage: Vec<_> = ev
        .iter()
        .filter_map(|e| match e.kind {
            EventKind::TokenUsage {
                input_tokens,
                output_tokens,
                cache_read_tokens,
                cumulative,
                ..
            } => Some((input_tokens, output_tokens, cache_read_tokens, cumulative)),
            _ => None,
        })
        .collect();
    assert_eq!(usage, [(22539, 10, 20864, true)]);
}

/// The 0.171 runs of `echo out; echo err 1>&2; exit 3` (AGENTS_OFFLINE.md, section 4).
#[test]
#[ignore = "needs the real transcripts: SPICE_TRANSCRIPTS (set by .ci/run)"]
fn current_exit3_runs() {
    let dir = fixtures();
    for (rel, cwd) in [
        (
            "current/codex-exec-command-exit3.jsonl",
            "/tmp/work/c2a/proj",
        ),
        (
            "current/codex-interactive-tui-exec-command.jsonl",
            "/tmp/work/ci1/proj",
        ),
        (
            "current/codex-interactive-tui-no-daemon.jsonl",
            "/tmp/work/ci2/proj",
        ),
    ] {
        let ev = decode(&dir, rel);
        let m = meta(&ev);
        assert_eq!(m.version.as_deref(), Some("0.171.0"), "{rel}");
        assert_eq!(m.model.as_deref(), Some("mock-model"), "{rel}");
        assert_eq!(m.cwd.as_deref(), Some(cwd), "{rel}");
        let exec = calls(&ev, "exec_command");
        assert_eq!(
            exec,
            [(
                exec[0].0,
                Some("echo out; echo err 1>&2; exit 3"),
                Some(cwd)
            )],
            "{rel}"
        );
        let res = results(&ev);
        assert_eq!(res.len(), 1, "{rel}");
        assert_eq!(
            (res[exec[0].0].1, res[exec[0].0].2),
            (Some(3), true),
            "{rel}"
        );
        // Only item_completed/UserMessage carries the prompt in 0.171.
        assert_eq!(prompts(&ev), ["run it"], "{rel}");
        assert_eq!(assistant_texts(&ev), ["ACK abcdEFGhj: done"], "{rel}");
        assert_eq!(turn_ends(&ev), 1, "{rel}");
    }
}

#[test]
#[ignore = "needs the real transcripts: SPICE_TRANSCRIPTS (set by .ci/run)"]
fn current_large_output() {
    let dir = fixtures();
    let ev = decode(&dir, "current/codex-exec-command-large-output.jsonl");
    let out = ev.iter().find_map(|e| match &e.kind {
        EventKind::ToolResult {
            exit_code,
            failed,
            output,
            ..
        } => Some((*exit_code, *failed, output)),
        _ => None,
    });
    let (exit, failed, output) = out.unwrap();
    assert_eq!((exit, failed), (Some(0), false));
    assert!(output.starts_with("STEER-START\n1\n2\n"));
    assert!(output.ends_with('…'));
}

#[test]
#[ignore = "needs the real transcripts: SPICE_TRANSCRIPTS (set by .ci/run)"]
fn current_resume_compaction() {
    let dir = fixtures();
    let ev = decode(&dir, "current/codex-resume-compaction.jsonl");
    assert_eq!(
        prompts(&ev),
        [
            "first prompt",
            "second prompt",
            "third prompt",
            "fourth prompt (should compact)"
        ]
    );
    let exec = calls(&ev, "exec_command");
    assert_eq!(exec.len(), 4);
    let res = results(&ev);
    assert!(exec
        .iter()
        .all(|(id, ..)| res[id].1 == Some(3) && res[id].2));
    assert_eq!(compactions(&ev), [(56, Some("local")), (73, Some("local"))]);
    let summaries: Vec<_> = ev
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::CompactionSummary { text } => Some((e.line, text.as_str())),
            _ => None,
        })
        .collect();
    assert_eq!(summaries.len(), 2);
    assert!(summaries
        .iter()
        .all(|(_, t)| t.starts_with("Another language model") && t.ends_with("Mock side reply")));
    // The compaction's own model output is not a reply.
    assert_eq!(assistant_texts(&ev), ["ACK abcdEFGhj: done"; 4]);
    assert_eq!(turn_ends(&ev), 4);
}

#[test]
#[ignore = "needs the real transcripts: SPICE_TRANSCRIPTS (set by .ci/run)"]
fn current_say_hi() {
    let dir = fixtures();
    let ev = decode(&dir, "current/codex-say-hi.jsonl");
    assert_eq!(prompts(&ev), ["say hi"]);
    assert_eq!(assistant_texts(&ev), ["hi from mock"]);
    assert_eq!(count(&ev, |k| matches!(k, EventKind::ToolCall { .. })), 0);
    assert_eq!(turn_ends(&ev), 1);
}

#[test]
#[ignore = "needs the real transcripts: SPICE_TRANSCRIPTS (set by .ci/run)"]
fn current_exec_json_stdout() {
    let dir = fixtures();
    let ev = decode(&dir, "current/codex-exec-json-stdout.jsonl");
    assert_eq!(
        meta(&ev).session_id.as_deref(),
        Some("01a22920-cd2e-7872-98bb-d1cb4b6b56b2")
    );
    let c = calls(&ev, "command_execution");
    assert_eq!(c.len(), 1);
    assert_eq!(
        c[0].1,
        Some("/bin/bash -lc 'echo out; echo err 1>&2; exit 3'")
    );
    assert_eq!(results(&ev)[c[0].0], (5, Some(3), true));
    assert_eq!(assistant_texts(&ev), ["ACK abcdEFGhj: done"]);
    assert_eq!(turn_ends(&ev), 1);
}

/// The Python harness's Codex fixtures: wrapped records without session_meta or prompt
/// events, calls without ids, Claude-style compaction summaries, a truncated tail.
#[test]
#[ignore = "needs the real transcripts: SPICE_TRANSCRIPTS (set by .ci/run)"]
fn spice_reference_codex_fixtures() {
    let dir = fixtures();
    let read = |rel: &str| decode_bytes(&std::fs::read(dir.join(rel)).unwrap());

    let (ev, malformed) = read("spice-reference/session/supervised_codex.jsonl");
    assert_eq!(malformed, 0);
    let p = prompts(&ev);
    assert_eq!(p.len(), 5);
    assert!(p[0].starts_with("The linked skill below"));
    assert_eq!(
        p[1..],
        [
            "please recover the briefing from the supervised lane",
            "drain the allocator queue after re-injection",
            "[$spice](.agents/skills/spice/SKILL.md)",
            "finish by rendering the recovery slices",
        ]
    );
    let lines_of = |pred: fn(&EventKind) -> bool| -> Vec<u64> {
        ev.iter()
            .filter(|e| pred(&e.kind))
            .map(|e| e.line)
            .collect()
    };
    assert_eq!(
        lines_of(|k| matches!(k, EventKind::Compaction { .. })),
        [7, 16, 25]
    );
    assert_eq!(
        lines_of(|k| matches!(k, EventKind::CompactionSummary { .. })),
        [9, 18, 27]
    );
    assert_eq!(
        lines_of(|k| matches!(k, EventKind::InjectedContext { .. })),
        [10, 19]
    );
    assert_eq!(turn_ends(&ev), 4);
    let texts = assistant_texts(&ev);
    assert_eq!(texts.len(), 6);
    assert!(texts[0].starts_with("ACK d1jN54zgX:") && texts[1].starts_with("NACK d1jN552dN:"));
    assert_eq!(calls(&ev, "exec_command").len(), 2);
    assert_eq!(calls(&ev, "apply_patch").len(), 1);
    assert!(changes(&ev).is_empty());

    // Line 9 is cut short; line 10 has no newline yet (a follower would hold it).
    let (ev, malformed) = read("spice-reference/transcript/parity_codex.jsonl");
    assert_eq!(malformed, 2);
    assert_eq!(prompts(&ev), ["replay the parity corpus"]);
    assert_eq!(results(&ev)["call-parity"], (5, None, false));
    assert_eq!(compactions(&ev), [(7, Some("local"))]);
    assert_eq!(turn_ends(&ev), 0);

    let (ev, malformed) = read("spice-reference/transcript/assembled_codex.jsonl");
    assert_eq!(malformed, 0);
    assert_eq!(
        calls(&ev, "exec_command"),
        [("call-assembly", Some("spice task status"), None)]
    );
    assert_eq!(compactions(&ev), [(4, Some("local"))]);
    assert_eq!(turn_ends(&ev), 1);
}
