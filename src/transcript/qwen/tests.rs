//! Records in the shapes Qwen Code 0.24 writes (checked against sessions it wrote
//! offline against the tests' mock server), with text of our own.

use super::*;
use serde_json::json;

fn rec(ty: &str, extra: Value) -> Value {
    let mut r = json!({"uuid": format!("u-{ty}-{}", extra.to_string().len()), "parentUuid": null,
        "sessionId": "5e5b1c2a-7f0d-4c3e-9a51-0a1b2c3d4e5f", "timestamp": "2026-12-07T02:36:42.123Z",
        "type": ty, "provenance": "real_user", "cwd": "/w/t", "version": "0.24.4", "gitBranch": "main"});
    for (k, v) in extra.as_object().unwrap() {
        r[k] = v.clone();
    }
    r
}

fn decode(lines: &[Value]) -> Vec<Event> {
    let mut d = QwenDecoder::new();
    let mut out = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        d.feed(l.to_string().as_bytes(), i as u64 + 1, &mut out);
    }
    out
}

fn kinds(events: &[Event]) -> Vec<&'static str> {
    events
        .iter()
        .map(|e| match &e.kind {
            EventKind::SessionMeta(_) => "meta",
            EventKind::UserPrompt { .. } => "prompt",
            EventKind::AssistantText { .. } => "text",
            EventKind::ToolCall { .. } => "call",
            EventKind::ToolResult { .. } => "result",
            EventKind::TokenUsage { .. } => "usage",
            EventKind::Commit { .. } => "commit",
            EventKind::Compaction { .. } => "compaction",
            EventKind::TurnEnd => "end",
            _ => "other",
        })
        .collect()
}

#[test]
fn a_turn_decodes_with_its_call_result_commit_and_end() {
    let usage = json!({"promptTokenCount": 1001, "candidatesTokenCount": 21, "thoughtsTokenCount": 5,
                       "totalTokenCount": 1027, "cachedContentTokenCount": 300});
    let events = decode(&[
        rec(
            "user",
            json!({"message": {"role": "user", "parts": [{"text": "Commit it"}]}}),
        ),
        rec(
            "system",
            json!({"subtype": "ui_telemetry", "systemPayload": {"uiEvent": {"response_text": "ACK bcdfghjkl: no"}}}),
        ),
        rec(
            "assistant",
            json!({"model": "mock-model", "usageMetadata": usage,
            "message": {"role": "model", "parts": [{"functionCall": {"id": "call_1", "name": "run_shell_command",
                "args": {"command": "git commit -qm x && git log --oneline -1", "is_background": false}}}]}}),
        ),
        rec(
            "tool_result",
            json!({
            "message": {"role": "user", "parts": [{"functionResponse": {"id": "call_1", "name": "run_shell_command",
                "response": {"output": "Command: git commit\nDirectory: (root)\nOutput: [main 1a2b3c4] x\nError: (none)\nExit Code: 0\nSignal: (none)\nProcess Group PGID: (none)"}}}]},
            "toolCallResult": {"callId": "call_1", "status": "success",
                "resultDisplay": {"type": "shell_result", "exitCode": 0, "output": "[main 1a2b3c4] x"}}}),
        ),
        rec(
            "user",
            json!({"subtype": "mid_turn_user_message", "message": {"role": "user", "parts": [{"text": "also this [bcdfghjkl]"}]}}),
        ),
        rec(
            "assistant",
            json!({"model": "mock-model", "message": {"role": "model", "parts": [{"text": "ACK bcdfghjkl: done"}]}}),
        ),
        rec(
            "system",
            json!({"subtype": "chat_compression", "systemPayload": {}}),
        ),
    ]);
    assert_eq!(
        kinds(&events),
        [
            "meta",
            "prompt",
            "meta",
            "call",
            "usage",
            "result",
            "commit",
            "prompt",
            "text",
            "end",
            "compaction"
        ]
    );
    let EventKind::SessionMeta(m) = &events[0].kind else {
        panic!()
    };
    assert_eq!(
        (
            m.agent,
            m.session_id.as_deref(),
            m.cwd.as_deref(),
            m.version.as_deref()
        ),
        (
            Some(Agent::Qwen),
            Some("5e5b1c2a-7f0d-4c3e-9a51-0a1b2c3d4e5f"),
            Some("/w/t"),
            Some("0.24.4")
        )
    );
    let EventKind::TokenUsage {
        input_tokens,
        output_tokens,
        cache_read_tokens,
        ..
    } = &events[4].kind
    else {
        panic!()
    };
    assert_eq!(
        (*input_tokens, *output_tokens, *cache_read_tokens),
        (701, 26, 300)
    );
    let EventKind::ToolResult {
        exit_code,
        failed,
        output,
        ..
    } = &events[5].kind
    else {
        panic!()
    };
    assert_eq!(
        (*exit_code, *failed, output.as_str()),
        (Some(0), false, "[main 1a2b3c4] x")
    );
    let EventKind::Commit { sha, .. } = &events[6].kind else {
        panic!()
    };
    assert_eq!(sha.as_deref(), Some("1a2b3c4"));
}

#[test]
fn a_killed_call_stays_open_and_a_failure_is_read_from_the_text() {
    let events = decode(&[rec(
        "assistant",
        json!({"message": {"role": "model", "parts": [{"functionCall": {"id": "c9",
            "name": "run_shell_command", "args": {"command": "sleep 120"}}}]}}),
    )]);
    let mut turn = crate::transcript::turn::Turn::default();
    events.iter().for_each(|e| turn.observe(e));
    assert_eq!(turn.open.len(), 1, "a call with no result is open");
    assert!(!kinds(&events).contains(&"end"));
    assert_eq!(
        shell_output("Command: false\nOutput: (empty)\nError: (none)\nExit Code: 1\n"),
        ("(empty)".to_string(), Some(1))
    );
    let mut d = QwenDecoder::new();
    d.feed(b"[1,2]", 1, &mut Vec::new());
    assert_eq!(d.malformed(), 1);
}

#[test]
fn an_unknown_record_type_is_noted_once_with_its_first_line() {
    let mut d = QwenDecoder::new();
    let mut out = Vec::new();
    let lines = [
        rec(
            "user",
            json!({"message": {"role": "user", "parts": [{"text": "go"}]}}),
        ),
        rec(
            "hologram",
            json!({"payload": {"text": "ACK bcdfghjk: not an ACK"}}),
        ),
        rec("system", json!({"subtype": "ui_telemetry"})),
        rec("hologram", json!({})),
    ];
    for (i, l) in lines.iter().enumerate() {
        d.feed(l.to_string().as_bytes(), i as u64 + 1, &mut out);
    }
    let unread = d.unread();
    assert_eq!(unread.kinds().len(), 1, "{unread:?}");
    assert_eq!(unread.kinds()[0].kind, "hologram");
    assert_eq!(
        (unread.kinds()[0].first_line, unread.kinds()[0].count),
        (2, 2)
    );
    assert!(!out
        .iter()
        .any(|e| matches!(&e.kind, EventKind::AssistantText { .. })));
}
