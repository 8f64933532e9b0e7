//! Records in the shapes Gemini CLI 0.61 writes (checked against sessions it wrote
//! offline against the tests' mock server), with text of our own.

use super::*;
use serde_json::json;

fn decode(lines: &[Value]) -> (Vec<Event>, u64) {
    let mut d = GeminiDecoder::new();
    let mut out = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        d.feed(l.to_string().as_bytes(), i as u64 + 1, &mut out);
    }
    (out, d.malformed())
}

fn header() -> Value {
    json!({"sessionId": "0a1b2c3d-0000-4000-8000-000000000001", "projectHash": "ab12",
           "startTime": "2026-12-07T02:36:39.228Z", "lastUpdated": "2026-12-07T02:36:39.228Z", "kind": "main"})
}

fn call_message(with_calls: bool) -> Value {
    let mut m = json!({"id": "m1", "timestamp": "2026-12-07T02:36:39.504Z", "type": "gemini",
        "content": "", "thoughts": [], "model": "mock-model",
        "tokens": {"input": 1000, "output": 20, "cached": 300, "thoughts": 5, "tool": 3, "total": 1025}});
    if with_calls {
        m["toolCalls"] = json!([{"id": "c1", "name": "run_shell_command",
            "args": {"command": "git commit -m 'add x'", "description": "commit"},
            "result": [{"functionResponse": {"id": "c1", "name": "run_shell_command",
                "response": {"output": "<untrusted_context>\nOutput: [main 1a2b3c4] add x\n 1 file changed\nProcess Group PGID: 9233\n</untrusted_context>"}}}],
            "status": "success"}]);
    }
    m
}

fn kinds(events: &[Event]) -> Vec<&'static str> {
    events
        .iter()
        .map(|e| match &e.kind {
            EventKind::SessionMeta(_) => "meta",
            EventKind::UserPrompt { .. } => "prompt",
            EventKind::InjectedContext { .. } => "context",
            EventKind::AssistantText { .. } => "text",
            EventKind::ToolCall { .. } => "call",
            EventKind::ToolResult { .. } => "result",
            EventKind::TokenUsage { .. } => "usage",
            EventKind::Commit { .. } => "commit",
            EventKind::Compaction { .. } => "compaction",
            EventKind::Reasoning { .. } => "reasoning",
            _ => "other",
        })
        .collect()
}

#[test]
fn a_turn_with_a_call_written_twice_decodes_once() {
    let result = json!({"id": "u2", "type": "user", "content": [{"functionResponse": {"id": "c1",
        "name": "run_shell_command", "response": {"output": "<untrusted_context>\nOutput: again\n</untrusted_context>"}}}]});
    let (events, malformed) = decode(&[
        header(),
        json!({"$set": {"messages": [{"id": "old", "type": "gemini", "content": "ACK bcdfghjkl: old"}]}}),
        json!({"id": "ctx", "type": "user", "content": [{"text": "<session_context>\nsetup\n</session_context>"}]}),
        json!({"id": "u1", "timestamp": "2026-12-07T02:36:39.250Z", "type": "user", "content": [{"text": "Do the task"}]}),
        json!({"$set": {"lastUpdated": "2026-12-07T02:36:39.250Z"}}),
        call_message(false),
        call_message(true),
        result,
        json!({"id": "m2", "type": "gemini", "content": "ACK bcdfghjkl: committed",
               "tokens": {"input": 1100, "output": 10, "cached": 0, "total": 1110}, "model": "mock-model"}),
    ]);
    assert_eq!(malformed, 0);
    assert_eq!(
        kinds(&events),
        [
            "meta", "context", "prompt", "meta", "usage", "usage", "call", "result", "commit",
            "text", "usage"
        ]
    );
    let call = events
        .iter()
        .find(|e| matches!(e.kind, EventKind::ToolCall { .. }))
        .unwrap();
    let EventKind::ToolCall { command, .. } = &call.kind else {
        unreachable!()
    };
    assert_eq!(command.as_deref(), Some("git commit -m 'add x'"));
    let EventKind::ToolResult {
        output,
        exit_code,
        failed,
        ..
    } = &events[7].kind
    else {
        panic!("{:?}", events[7])
    };
    assert_eq!(
        (output.as_str(), *exit_code, *failed),
        ("[main 1a2b3c4] add x\n 1 file changed", Some(0), false)
    );
    let EventKind::TokenUsage {
        input_tokens,
        output_tokens,
        cache_read_tokens,
        message_id,
        ..
    } = &events[4].kind
    else {
        panic!()
    };
    assert_eq!(
        (*input_tokens, *output_tokens, *cache_read_tokens),
        (700, 25, 300)
    );
    assert_eq!(message_id.as_deref(), Some("m1"));
    // The meter counts the message written twice once.
    let mut meter = crate::transcript::usage::Meter::new(Agent::Gemini);
    let mut calls = crate::transcript::usage::Calls::default();
    let total = events
        .iter()
        .filter_map(|e| meter.observe(e, &mut calls))
        .map(|c| c.delta.output)
        .sum::<i64>();
    assert_eq!(total, 25 + 10);
}

#[test]
fn a_failed_command_states_its_exit_code_and_compression_is_a_compaction() {
    let (events, _) = decode(&[
        json!({"id": "m1", "type": "gemini", "content": "", "toolCalls": [{"id": "c1", "name": "run_shell_command",
            "args": {"command": "false"}, "status": "success",
            "result": [{"functionResponse": {"id": "c1", "name": "run_shell_command",
                "response": {"output": "<untrusted_context>\nOutput: (empty)\nExit Code: 1\nProcess Group PGID: 1\n</untrusted_context>"}}}]}]}),
        json!({"id": "i1", "type": "info", "content": "Context compressed from 94% to 0%."}),
        json!("not an object"),
    ]);
    let EventKind::ToolResult {
        exit_code, failed, ..
    } = &events[1].kind
    else {
        panic!("{events:?}")
    };
    assert_eq!((*exit_code, *failed), (Some(1), true));
    assert!(matches!(events[2].kind, EventKind::Compaction { .. }));
}

#[test]
fn shell_output_without_an_envelope_is_kept_as_is() {
    assert_eq!(shell_output("plain"), ("plain".to_string(), None));
    assert_eq!(
        shell_output("Output: a\nb\nExit Code: 2"),
        ("a\nb".to_string(), Some(2))
    );
}

#[test]
fn an_unknown_record_type_is_noted_and_the_clis_notices_are_not() {
    let mut d = GeminiDecoder::new();
    let mut out = Vec::new();
    let lines = [
        header(),
        json!({"id": "e1", "type": "error", "content": "quota"}),
        json!({"id": "w1", "type": "warning", "content": "slow"}),
        json!({"id": "x1", "type": "hologram", "content": "ACK bcdfghjk: no"}),
        json!({"id": "x2", "content": "no type at all"}),
    ];
    for (i, l) in lines.iter().enumerate() {
        d.feed(l.to_string().as_bytes(), i as u64 + 1, &mut out);
    }
    let kinds: Vec<(&str, u64)> = d
        .unread()
        .kinds()
        .iter()
        .map(|k| (k.kind.as_str(), k.first_line))
        .collect();
    assert_eq!(kinds, [("hologram", 4), ("(no type)", 5)]);
}
