//! Captures made with Claude Code 2.1.197 against a mock server (`current/`),
//! including the stream-json stdout of headless runs.

use super::{decode, fixtures};
use crate::transcript::event::{EventKind, EXCERPT};

#[test]
#[ignore = "needs the real transcripts: SPICE_TRANSCRIPTS (set by .ci/run)"]
fn current_bash_exit_codes() {
    let dir = fixtures();
    let cmd = "echo out; echo err 1>&2; exit 3";
    for file in [
        "claude-bash-tool-exit3.jsonl",
        "claude-interactive-bash-tool.jsonl",
    ] {
        let d = decode(&dir, &format!("current/{file}"));
        assert_eq!(d.bash_commands(), [cmd]);
        assert_eq!(d.bash_result(cmd), (Some(3), true), "{file}");
        assert_eq!(d.prompts(), ["run it"]);
        assert_eq!(d.meta().model.as_deref(), Some("claude-opus-4-8"));
        assert_eq!(d.meta().version.as_deref(), Some("2.1.197"));
    }
    let interactive = decode(&dir, "current/claude-interactive-bash-tool.jsonl");
    assert_eq!(
        interactive.turn_ends(),
        [10],
        "end_turn then turn_duration: one end"
    );

    let d = decode(&dir, "current/claude-bash-tool-exit0.jsonl");
    assert_eq!(d.bash_result("echo err1"), (Some(0), false));

    let d = decode(&dir, "current/claude-bash-tool-large-output.jsonl");
    assert_eq!(d.bash_result("seq 1 40000"), (Some(0), false));
    let output = d.events.iter().find_map(|e| match &e.kind {
        EventKind::ToolResult { output, .. } => Some(output),
        _ => None,
    });
    let output = output.expect("a result");
    assert!(output.starts_with("<persisted-output>"));
    assert!(output.len() <= EXCERPT + '…'.len_utf8());
}

#[test]
#[ignore = "needs the real transcripts: SPICE_TRANSCRIPTS (set by .ci/run)"]
fn current_prompts_turns_and_compaction() {
    let dir = fixtures();
    for (file, end) in [
        ("claude-say-hi.jsonl", 6),
        ("claude-interactive-say-hi.jsonl", 7),
    ] {
        let d = decode(&dir, &format!("current/{file}"));
        assert_eq!(d.prompts(), ["say hi"]);
        assert_eq!(d.turn_ends(), [end], "{file}");
    }
    let d = decode(&dir, "current/claude-session-resume-continue-compact.jsonl");
    assert_eq!(
        d.prompts(),
        [
            "first prompt",
            "second prompt",
            "third prompt",
            "/compact",
            "after compact"
        ]
    );
    assert_eq!(d.compactions(), [(22, Some("manual"), Some(22))]);
    assert_eq!(d.summaries(), [23]);
    assert_eq!(d.turn_ends().len(), 5);
    assert_eq!(
        d.meta().session_id.as_deref(),
        Some("11111111-2222-4333-8444-555555555555")
    );
}

/// stream-json stdout is not a transcript, but its events are the transcript's
/// shapes plus `system/init` and `result`: it decodes to the same model.
#[test]
#[ignore = "needs the real transcripts: SPICE_TRANSCRIPTS (set by .ci/run)"]
fn current_stream_json_stdout() {
    let dir = fixtures();
    let d = decode(&dir, "current/claude-stream-json-bash-tool-stdout.jsonl");
    let meta = d.meta();
    assert_eq!(meta.model.as_deref(), Some("mock-model-x"));
    assert_eq!(meta.version.as_deref(), Some("2.1.197"));
    assert_eq!(meta.cwd.as_deref(), Some("/tmp/work/t3b/proj"));
    let cmd = "echo out; echo err 1>&2; exit 3";
    assert_eq!(d.bash_result(cmd), (Some(3), true));
    let cwd = d.events.iter().find_map(|e| match &e.kind {
        EventKind::ToolCall { cwd, .. } => cwd.as_deref(),
        _ => None,
    });
    assert_eq!(cwd, Some("/tmp/work/t3b/proj"), "from system/init");
    assert_eq!(d.turn_ends(), [6], "the result event");

    let d = decode(&dir, "current/claude-stream-json-stdout.jsonl");
    assert_eq!(d.turn_ends(), [3]);
    assert_eq!(
        d.meta().session_id.as_deref(),
        Some("11111111-2222-4333-8444-555555555555")
    );
}
