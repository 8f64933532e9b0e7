//! The public samples under `claude/`: every Claude Code era and subagent layout.

use super::{decode, fixtures, is_injected, is_prompt};
use crate::transcript::event::{ChangeKind, Event, EventKind};

#[test]
#[ignore = "needs the real transcripts: SPICE_TRANSCRIPTS (set by .ci/run)"]
fn v1_0_98_inline_sidechains_and_background_shells() {
    let dir = fixtures();
    let d = decode(&dir, "claude/v1.0.98-todo-app-inline-sidechains.jsonl");
    assert_eq!(d.bash_commands().len(), 61);
    assert_eq!(d.bash_result("ls -la types/"), (None, true));
    let results = d.bash_results();
    assert_eq!(results.iter().filter(|r| r.1).count(), 9);
    // 1.0.x: no "Exit code" prefix, BashOutput exitCode null while running.
    assert!(results.iter().all(|r| r.0.is_none()));
    let files = d.files();
    assert_eq!(files.len(), 31);
    assert_eq!(
        files.last(),
        Some(&("/path/to/Demo/CLAUDE.md", &ChangeKind::Add))
    );
    let links = d.links();
    assert_eq!(links.len(), 5);
    assert_eq!(
        links[0],
        (
            "6690d10e-f521-4ac0-800d-e5eb7a2d8072",
            Some("Build TODO components")
        )
    );
    let mut labels = d.labels();
    labels.retain(Option::is_some);
    let mut roots: Vec<Option<&str>> = links.iter().map(|l| Some(l.0)).collect();
    roots.sort();
    assert_eq!(labels, roots, "each chain's lines carry its root uuid");
    assert_eq!(
        d.prompts(),
        [
            "/orchestrator create TODO app by Next.js",
            "Thanks! Please update CLAUDE.md for current changes"
        ]
    );
    let mut cwds: Vec<&str> = d
        .events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::SessionMeta(m) => m.cwd.as_deref(),
            _ => None,
        })
        .collect();
    cwds.dedup();
    let demo = "/path/to/Demo";
    let app = "/path/to/Demo/todo-app";
    let types = "/path/to/Demo/todo-app/types";
    assert_eq!(cwds, [demo, app, types, demo, app, demo]);
    let meta = d.meta();
    assert_eq!(meta.version.as_deref(), Some("1.0.98"));
    assert_eq!(meta.model.as_deref(), Some("claude-sonnet-4-20250514"));
    assert_eq!(
        meta.git_branch, None,
        "gitBranch is \"\" outside a repository"
    );
}

#[test]
#[ignore = "needs the real transcripts: SPICE_TRANSCRIPTS (set by .ci/run)"]
fn v1_0_108_multiedit_and_rejected_task() {
    let dir = fixtures();
    let d = decode(&dir, "claude/v1.0.108-inline-sidechain-multiedit.jsonl");
    assert_eq!(d.bash_commands().len(), 5);
    assert_eq!(d.bash_result("tree /path/to/Demo"), (None, true));
    // The Edit failed ("File has not been read yet"); the MultiEdit after it did not.
    assert_eq!(
        d.files(),
        [("/path/to/Demo/CLAUDE.md", &ChangeKind::Update)]
    );
    assert_eq!(
        d.links(),
        [
            (
                "6340ddef-f656-4b72-a065-82390f637678",
                Some("Check package configuration")
            ),
            (
                "83e2917c-8940-4df6-a5a5-f2514f0d08c5",
                Some("Analyze current project structure")
            ),
        ]
    );
    assert!(d.prompts()[0].starts_with("/orchestrator @CLAUDE.md "));
    assert_eq!(
        d.turn_ends(),
        [] as [u64; 0],
        "the only end_turn is a sidechain's"
    );
}

#[test]
#[ignore = "needs the real transcripts: SPICE_TRANSCRIPTS (set by .ci/run)"]
fn v2_0_64_sibling_agent_files() {
    let dir = fixtures();
    let d = decode(
        &dir,
        "claude/v2.0.64-sibling-agent-files/4c2ddfdc-b619-4525-8d03-1950fb1b0257.jsonl",
    );
    assert_eq!(d.bash_commands(), ["rm hello.js"]);
    assert_eq!(
        d.bash_result("rm hello.js"),
        (None, false),
        "2.0: status unproven"
    );
    let add = &ChangeKind::Add;
    let update = &ChangeKind::Update;
    assert_eq!(
        d.files(),
        [
            ("/tmp/private/hello.py", add),
            ("/tmp/private/hello.md", add),
            ("/tmp/private/hello.js", add),
            ("/tmp/private/hello.py", update),
        ]
    );
    assert_eq!(
        d.prompts(),
        [
            "create hello.py, md and js",
            "update py with one liner comment",
            "delete js"
        ]
    );
    assert_eq!(d.turn_ends(), [25]);
    assert_eq!(d.meta().git_branch.as_deref(), Some("analytics-v2"));

    for (file, agent, model) in [
        (
            "agent-36541525.jsonl",
            "36541525",
            "claude-sonnet-4-5-20250929",
        ),
        (
            "agent-50243ee8.jsonl",
            "50243ee8",
            "converse/jp.anthropic.claude-haiku-4-5-20251001-v1:0",
        ),
    ] {
        let a = decode(&dir, &format!("claude/v2.0.64-sibling-agent-files/{file}"));
        assert_eq!(a.labels(), [Some(agent)]);
        assert_eq!(a.count(is_prompt), 0, "Warmup is not a prompt");
        assert_eq!(a.count(is_injected), 1);
        assert!(a.links().is_empty());
        let meta = a.meta();
        assert_eq!(meta.model.as_deref(), Some(model));
        assert_eq!(
            meta.session_id.as_deref(),
            Some("4c2ddfdc-b619-4525-8d03-1950fb1b0257"),
            "the parent's"
        );
    }
}

#[test]
#[ignore = "needs the real transcripts: SPICE_TRANSCRIPTS (set by .ci/run)"]
fn v2_0_76_compaction_and_thinking() {
    let dir = fixtures();
    let d = decode(&dir, "claude/v2.0.76-compact-boundary-thinking.jsonl");
    assert_eq!(d.compactions(), [(158, Some("auto"), Some(155979))]);
    assert_eq!(d.summaries(), [159]);
    assert_eq!(d.count(|k| matches!(k, EventKind::Reasoning { .. })), 55);
    assert_eq!(d.bash_commands().len(), 3);
    let files = d.files();
    assert_eq!(files.len(), 25);
    assert!(files.contains(&(
        "/Users/user/repo/UNIFIED-TRACKING-DESIGN.md",
        &ChangeKind::Add
    )));
    let prompts = d.prompts();
    assert_eq!(prompts[0], "/clear");
    assert!(prompts[1].starts_with("@src/providers/plugins/sso/ARCHITECTURE-REFACTORING.md"));
    // Five end_turn replies and three "[Request interrupted by user]".
    assert_eq!(d.turn_ends().len(), 8);
    assert!(d.turn_ends().contains(&67));
    assert_eq!(
        d.meta().model.as_deref(),
        Some("claude-sonnet-4-5-20250929")
    );
}

#[test]
#[ignore = "needs the real transcripts: SPICE_TRANSCRIPTS (set by .ci/run)"]
fn v2_1_4_task_links_rejection_and_turn_ends() {
    let dir = fixtures();
    let d = decode(&dir, "claude/v2.1.4-summary-records-task-rejected.jsonl");
    assert_eq!(
        d.links(),
        [
            ("a693a87", Some("Explore codemie-code repository structure")),
            ("a46b9c3", Some("Deep dive into uncovered areas")),
        ]
    );
    assert!(d.files().is_empty(), "the only Write was rejected");
    // Interrupt at 22, turn_duration at 31, end_turn at 39 (its turn_duration at 40
    // is the same turn).
    assert_eq!(d.turn_ends(), [22, 31, 39]);
    assert_eq!(
        d.prompts(),
        [
            "show tools and store response in file",
            "explore more of current repo",
            "what else?"
        ]
    );
}

#[test]
#[ignore = "needs the real transcripts: SPICE_TRANSCRIPTS (set by .ci/run)"]
fn v2_1_7_growth_prefix_decodes_the_same() {
    let dir = fixtures();
    let one = decode(&dir, "claude/v2.1.7-incremental-growth/turn-1.jsonl");
    let two = decode(&dir, "claude/v2.1.7-incremental-growth/turn-2.jsonl");
    let prefix: Vec<&Event> = two.events.iter().filter(|e| e.line <= 25).collect();
    assert_eq!(prefix, one.events.iter().collect::<Vec<_>>());
    assert_eq!(two.bash_commands().len(), 6);
    assert_eq!(
        two.links(),
        [("a485154", Some("Analyze CLI and spec new commands"))]
    );
    assert_eq!(
        two.files(),
        [(
            "/Users/User/repo/codemie-ai/codemie-code/SPEC-NEW-CLI-COMMANDS.md",
            &ChangeKind::Add
        )]
    );
    assert!(two.prompts()[0].starts_with("@\"solution-architect (agent)\" analyze"));
    assert_eq!(
        two.turn_ends(),
        [48],
        "turn_duration at 50 ends the same turn"
    );
    for turn in ["turn-1", "turn-2"] {
        let a = decode(
            &dir,
            &format!("claude/v2.1.7-incremental-growth/{turn}/subagents/agent-a485154.jsonl"),
        );
        assert_eq!(a.labels(), [Some("a485154")]);
        assert_eq!(a.bash_commands().len(), 3);
    }
}

#[test]
#[ignore = "needs the real transcripts: SPICE_TRANSCRIPTS (set by .ci/run)"]
fn v2_1_14_git_commit_and_failures() {
    let dir = fixtures();
    let d = decode(&dir, "claude/v2.1.14-git-commit-bash-errors.jsonl");
    assert_eq!(d.bash_commands().len(), 5);
    assert_eq!(
        d.commits(),
        [(
            Some("6322cf4"),
            Some("Add multiply_numbers function with test")
        )]
    );
    assert_eq!(
        d.bash_result("git add .gitignore && git commit"),
        (Some(1), true)
    );
    assert_eq!(d.bash_result("git status"), (Some(0), false));
    let ok = d
        .bash_results()
        .iter()
        .filter(|r| **r == (Some(0), false))
        .count();
    assert_eq!(ok, 4);
    let paths: Vec<&str> = d.files().iter().map(|f| f.0).collect();
    assert_eq!(
        paths,
        [
            "/tmp/tmpw6sk2trg/src/math_utils.py",
            "/tmp/tmpw6sk2trg/tests/test_math_utils.py",
            "/tmp/tmpw6sk2trg/.gitignore",
        ]
    );
    assert!(d.prompts()[0].starts_with("Add a function called multiply_numbers"));
    assert_eq!(d.count(is_injected), 2, "two Stop hook feedback lines");
    // Headless 2.1.14 writes stop_reason null and no turn_duration.
    assert!(d.turn_ends().is_empty());
    let meta = d.meta();
    assert_eq!(meta.model.as_deref(), Some("claude-opus-4-5-20251101"));
    assert_eq!(meta.version.as_deref(), Some("2.1.14"));
    assert_eq!(meta.git_branch.as_deref(), Some("master"));
}

#[test]
#[ignore = "needs the real transcripts: SPICE_TRANSCRIPTS (set by .ci/run)"]
fn v2_1_14_port_writes_and_task() {
    let dir = fixtures();
    let d = decode(&dir, "claude/v2.1.14-python-to-rust-port.jsonl");
    assert_eq!(d.bash_commands().len(), 16);
    assert!(d.bash_results().iter().all(|r| *r == (Some(0), false)));
    assert_eq!(
        d.commits(),
        [(Some("7e2d976"), Some("Port Python utility library to Rust"))]
    );
    let files = d.files();
    assert_eq!(files.len(), 8);
    assert_eq!(files.iter().filter(|f| *f.1 == ChangeKind::Add).count(), 5);
    assert!(files.contains(&("/tmp/tmpqwh7888i/Cargo.toml", &ChangeKind::Update)));
    assert!(files.contains(&("/tmp/tmpqwh7888i/src/validation.rs", &ChangeKind::Add)));
    assert_eq!(
        d.links(),
        [("ab81802", Some("Explore Python project structure"))]
    );
    assert!(d.prompts()[0].starts_with("Port this Python project to Rust."));
}

#[test]
#[ignore = "needs the real transcripts: SPICE_TRANSCRIPTS (set by .ci/run)"]
fn v2_1_38_rejected_tool_and_local_command() {
    let dir = fixtures();
    let d = decode(&dir, "claude/v2.1.38-short-rejected-tool.jsonl");
    assert_eq!(d.bash_commands(), ["mix phx.server 2>&1 | head -80"]);
    assert_eq!(
        d.bash_result("mix phx.server"),
        (None, true),
        "rejected by the user"
    );
    assert_eq!(
        d.prompts(),
        ["mix phx.server doesnt seem to start", "/model"]
    );
    assert_eq!(d.turn_ends(), [13], "the interrupt after the rejection");
    assert_eq!(d.meta().model.as_deref(), Some("claude-opus-4-6"));
}

#[test]
#[ignore = "needs the real transcripts: SPICE_TRANSCRIPTS (set by .ci/run)"]
fn v2_1_38_subagent_linked_from_progress() {
    let dir = fixtures();
    let d = decode(&dir, "claude/v2.1.38-task-subagent-progress.jsonl");
    let link = d
        .events
        .iter()
        .find(|e| matches!(e.kind, EventKind::SubagentLink { .. }))
        .expect("a link");
    assert_eq!(
        link.line, 37,
        "the first agent_progress line, before the result"
    );
    assert_eq!(
        d.links(),
        [("afb92ff", Some("Draft beads for linting setup"))]
    );
    assert_eq!(d.bash_commands().len(), 4);
    // ExitPlanMode's result names a plan file: not a change.
    assert_eq!(
        d.files(),
        [("/home/marco/projects/spotter/plan.md", &ChangeKind::Add)]
    );
    assert!(d.prompts()[0].starts_with("/handgemacht:create-beads websearch"));
}

#[test]
#[ignore = "needs the real transcripts: SPICE_TRANSCRIPTS (set by .ci/run)"]
fn v2_1_39_compaction_commits_and_subagents() {
    let dir = fixtures();
    let base = "claude/v2.1.39-compaction-with-subagents/4d5611e5-241a-462a-8d15-5122611a9569";
    let d = decode(&dir, &format!("{base}.jsonl"));
    assert_eq!(d.bash_commands().len(), 67);
    assert_eq!(d.bash_result("git push"), (Some(128), true));
    assert_eq!(
        d.bash_result("git add .beads/issues.jsonl assets/js/app.js"),
        (Some(1), true)
    );
    let results = d.bash_results();
    assert_eq!(
        results.iter().filter(|r| **r == (Some(0), false)).count(),
        60
    );
    // Three pre-commit vetoes: failed, no status, no commit.
    assert_eq!(results.iter().filter(|r| **r == (None, true)).count(), 3);
    // One grep with "No matches found" and one backgrounded command.
    assert_eq!(results.iter().filter(|r| **r == (None, false)).count(), 2);
    let commits = d.commits();
    assert_eq!(commits.len(), 1);
    assert_eq!(commits[0].0, Some("64f1b9a"));
    assert_eq!(d.compactions(), [(754, Some("auto"), Some(170251))]);
    assert_eq!(d.summaries(), [755]);
    assert_eq!(
        d.links(),
        [("a2898e3", Some("Explore transcript rendering codebase"))]
    );
    assert_eq!(d.files().len(), 39);
    assert_eq!(d.turn_ends(), [278, 1501]);
    assert_eq!(d.prompts().len(), 2);
    assert!(d.prompts()[0].starts_with("Work on bead spotter-dov."));
    let meta = d.meta();
    assert_eq!(meta.version.as_deref(), Some("2.1.39"));
    assert_eq!(meta.model.as_deref(), Some("claude-opus-4-6"));
    assert_eq!(meta.git_branch.as_deref(), Some("spotter-dov"));

    let explore = decode(&dir, &format!("{base}/subagents/agent-a2898e3.jsonl"));
    assert_eq!(explore.labels(), [Some("a2898e3")]);
    assert_eq!(explore.bash_commands().len(), 5);
    // No toolUseResult in subagent files: statuses unknown.
    assert!(explore.bash_results().iter().all(|r| r.0.is_none()));
    assert_eq!(
        explore.meta().model.as_deref(),
        Some("claude-sonnet-4-5-20250929")
    );

    let summarizer = decode(
        &dir,
        &format!("{base}/subagents/agent-acompact-e1f845.jsonl"),
    );
    assert_eq!(summarizer.labels(), [Some("acompact-e1f845")]);
    assert_eq!(summarizer.count(is_injected), 3);
    let prompt = summarizer.events.iter().find_map(|e| match &e.kind {
        EventKind::UserPrompt { text } => Some(text.as_str()),
        _ => None,
    });
    assert!(prompt.is_some_and(|p| p.starts_with("Your task is to create a detailed summary")));
}

#[test]
#[ignore = "needs the real transcripts: SPICE_TRANSCRIPTS (set by .ci/run)"]
fn v2_1_152_newest_layout() {
    let dir = fixtures();
    let d = decode(&dir, "claude/v2.1.152-sdk-cli-redacted.jsonl");
    assert_eq!(d.prompts(), ["[REDACTED_PROMPT]"]);
    assert_eq!(d.turn_ends().len(), 1);
    let meta = d.meta();
    assert_eq!(meta.model.as_deref(), Some("claude-opus-4-7"));
    assert_eq!(meta.version.as_deref(), Some("2.1.152"));
    assert_eq!(
        meta.session_id.as_deref(),
        Some("06090cb1-3e64-433a-bc7e-a621c0f596d2")
    );
}
