//! Decoder behaviour on hand-written lines (duplicates, held results, patches,
//! hostile input), and the helpers the fixture tests share.

use super::CodexDecoder;
use crate::transcript::event::{ChangeKind, Decoder, Event, EventKind, SessionMeta, EXCERPT};
use std::collections::HashMap;

pub(super) fn decode_bytes(bytes: &[u8]) -> (Vec<Event>, u64) {
    let mut d = CodexDecoder::new();
    let mut out = Vec::new();
    let (mut start, mut line) = (0, 1);
    for nl in memchr::memchr_iter(b'\n', bytes).chain([bytes.len()]) {
        d.feed(&bytes[start..nl], line, &mut out);
        (start, line) = (nl + 1, line + 1);
    }
    (out, d.malformed())
}

pub(super) fn decode_lines(lines: &[&str]) -> Vec<Event> {
    let (events, malformed) = decode_bytes(lines.join("\n").as_bytes());
    assert_eq!(malformed, 0);
    events
}

pub(super) fn meta(events: &[Event]) -> SessionMeta {
    let mut metas = events.iter().filter_map(|e| match &e.kind {
        EventKind::SessionMeta(m) => Some(m.clone()),
        _ => None,
    });
    metas.next_back().expect("a session meta")
}

/// `(id, command, cwd)` of each call to `name`.
pub(super) fn calls<'a>(
    events: &'a [Event],
    name: &str,
) -> Vec<(&'a str, Option<&'a str>, Option<&'a str>)> {
    events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::ToolCall {
                id,
                name: n,
                command,
                cwd,
                ..
            } if n == name => Some((id.as_str(), command.as_deref(), cwd.as_deref())),
            _ => None,
        })
        .collect()
}

/// `(line, exit_code, failed)` of the result for each call id, by id.
pub(super) fn results(events: &[Event]) -> HashMap<&str, (u64, Option<i32>, bool)> {
    events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::ToolResult {
                id,
                exit_code,
                failed,
                ..
            } => Some((id.as_str(), (e.line, *exit_code, *failed))),
            _ => None,
        })
        .collect()
}

pub(super) fn prompts(events: &[Event]) -> Vec<&str> {
    events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::UserPrompt { text } => Some(text.as_str()),
            _ => None,
        })
        .collect()
}

pub(super) fn assistant_texts(events: &[Event]) -> Vec<&str> {
    events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::AssistantText { text, .. } => Some(text.as_str()),
            _ => None,
        })
        .collect()
}

pub(super) fn changes(events: &[Event]) -> Vec<(&str, &ChangeKind)> {
    events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::FileChange { path, change, .. } => Some((path.as_str(), change)),
            _ => None,
        })
        .collect()
}

pub(super) fn count(events: &[Event], pred: impl Fn(&EventKind) -> bool) -> usize {
    events.iter().filter(|e| pred(&e.kind)).count()
}

pub(super) fn turn_ends(events: &[Event]) -> usize {
    count(events, |k| matches!(k, EventKind::TurnEnd))
}

pub(super) fn compactions(events: &[Event]) -> Vec<(u64, Option<&str>)> {
    events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::Compaction { trigger, .. } => Some((e.line, trigger.as_deref())),
            _ => None,
        })
        .collect()
}

const META: &str = r#"{"timestamp":"2026-01-01T00:00:00Z","type":"session_meta","payload":{"id":"s1","cwd":"/w","cli_version":"9"}}"#;

fn item(payload: &str) -> String {
    format!(
        r#"{{"timestamp":"2026-01-01T00:00:01.5Z","type":"response_item","payload":{payload}}}"#
    )
}

fn event(payload: &str) -> String {
    format!(r#"{{"timestamp":"2026-01-01T00:00:02Z","type":"event_msg","payload":{payload}}}"#)
}

#[test]
fn running_command_is_answered_once_when_its_process_exits() {
    let lines = [
        META.to_string(),
        item(
            r#"{"type":"function_call","name":"exec_command","arguments":"{\"cmd\":\"make\",\"workdir\":\"/w/sub\"}","call_id":"x"}"#,
        ),
        item(
            r#"{"type":"function_call_output","call_id":"x","output":"Chunk ID: a\nWall time: 1 seconds\nProcess running with session ID 7\nOriginal token count: 1\nOutput:\nbuilding\n"}"#,
        ),
        item(
            r#"{"type":"function_call","name":"write_stdin","arguments":"{\"session_id\":7,\"chars\":\"\"}","call_id":"y"}"#,
        ),
        item(
            r#"{"type":"function_call_output","call_id":"y","output":"Chunk ID: b\nWall time: 0 seconds\nProcess exited with code 4\nOriginal token count: 1\nOutput:\nboom\n"}"#,
        ),
        event(
            r#"{"type":"exec_command_end","call_id":"x","process_id":"7","exit_code":4,"aggregated_output":"building\nboom\n"}"#,
        ),
    ];
    let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
    let ev = decode_lines(&lines);
    assert_eq!(
        calls(&ev, "exec_command"),
        [("x", Some("make"), Some("/w/sub"))]
    );
    let got: Vec<_> = ev
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::ToolResult {
                id,
                exit_code,
                failed,
                output,
            } => Some((e.line, id.as_str(), *exit_code, *failed, output.as_str())),
            _ => None,
        })
        .collect();
    assert_eq!(
        got,
        [
            (5, "y", Some(4), true, "boom\n"),
            (5, "x", Some(4), true, "building\nboom\n")
        ]
    );
    assert_eq!(ev[1].timestamp, Some(1_767_225_601_500_000));
}

#[test]
fn exec_end_first_wins_and_commits_are_read() {
    let lines = [
        META.to_string(),
        item(
            r#"{"type":"function_call","name":"shell","arguments":"{\"command\":[\"bash\",\"-lc\",\"git commit -m 'fix: x'\"]}","call_id":"c"}"#,
        ),
        event(
            r#"{"type":"exec_command_end","call_id":"c","exit_code":0,"aggregated_output":"[main 1a2b3c4] fix: x\n"}"#,
        ),
        item(
            r#"{"type":"function_call_output","call_id":"c","output":"{\"output\":\"other\",\"metadata\":{\"exit_code\":1}}"}"#,
        ),
    ];
    let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
    let ev = decode_lines(&lines);
    assert_eq!(results(&ev)["c"], (3, Some(0), false));
    let commits: Vec<_> = ev
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::Commit { sha, message, .. } => Some((sha.as_deref(), message.as_deref())),
            _ => None,
        })
        .collect();
    assert_eq!(commits, [(Some("1a2b3c4"), Some("fix: x"))]);
    // The call's cwd falls back to the session's.
    assert_eq!(calls(&ev, "shell")[0].2, Some("/w"));
}

#[test]
fn patch_changes_are_reported_once_per_call() {
    let patch =
        r#"*** Begin Patch\n*** Update File: a.rs\n*** Move to: b.rs\n@@\n-x\n+y\n*** End Patch"#;
    let lines = [
        META.to_string(),
        item(&format!(
            r#"{{"type":"custom_tool_call","call_id":"p","name":"apply_patch","input":"{patch}"}}"#
        )),
        event(
            r#"{"type":"patch_apply_end","call_id":"p","success":true,"changes":{"/w/a.rs":{"type":"update","move_path":"/w/b.rs"}}}"#,
        ),
        item(
            r#"{"type":"custom_tool_call_output","call_id":"p","output":"{\"output\":\"Success. Updated the following files:\\nM b.rs\\n\",\"metadata\":{\"exit_code\":0}}"}"#,
        ),
        item(&format!(
            r#"{{"type":"custom_tool_call","call_id":"q","name":"apply_patch","input":"{patch}"}}"#
        )),
        item(
            r#"{"type":"custom_tool_call_output","call_id":"q","output":"apply_patch verification failed: no such file"}"#,
        ),
    ];
    let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
    let ev = decode_lines(&lines);
    assert_eq!(
        changes(&ev),
        [("a.rs", &ChangeKind::Move { to: "b.rs".into() })]
    );
    assert_eq!(results(&ev)["q"], (6, None, true));
}

#[test]
fn prompts_are_read_once_and_context_is_told_apart() {
    let lines = [
        META.to_string(),
        item(
            r#"{"type":"message","role":"user","content":[{"type":"input_text","text":"<environment_context>\n<cwd>/w</cwd>\n</environment_context>"}]}"#,
        ),
        item(
            r#"{"type":"message","role":"user","content":[{"type":"input_text","text":"do it"}]}"#,
        ),
        event(r#"{"type":"user_message","message":"do it"}"#),
        event(
            r#"{"type":"item_completed","item":{"type":"UserMessage","content":[{"type":"text","text":"do it"}]}}"#,
        ),
        item(
            r#"{"type":"message","role":"developer","content":[{"type":"input_text","text":"<permissions instructions>x"}]}"#,
        ),
        event(
            r#"{"type":"token_count","info":{"total_token_usage":{"input_tokens":5,"output_tokens":1}}}"#,
        ),
        event(
            r#"{"type":"token_count","info":{"total_token_usage":{"input_tokens":5,"output_tokens":1}}}"#,
        ),
        event(r#"{"type":"token_count","info":null}"#),
        item(
            r#"{"type":"message","role":"assistant","content":[{"type":"output_text","text":"done"}],"phase":"final_answer"}"#,
        ),
        event(r#"{"type":"agent_message","message":"done"}"#),
    ];
    let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
    let ev = decode_lines(&lines);
    assert_eq!(prompts(&ev), ["do it"]);
    assert_eq!(
        count(&ev, |k| matches!(k, EventKind::InjectedContext { .. })),
        2
    );
    assert_eq!(count(&ev, |k| matches!(k, EventKind::TokenUsage { .. })), 1);
    assert_eq!(assistant_texts(&ev), ["done"]);
    // No task events were seen, so the final answer ends the turn.
    assert_eq!(turn_ends(&ev), 1);
}

#[test]
fn spawned_agents_are_linked() {
    let lines = [
        META.to_string(),
        item(
            r#"{"type":"function_call","name":"spawn_agent","arguments":"{\"task\":\"write tests\"}","call_id":"s"}"#,
        ),
        item(r#"{"type":"function_call_output","call_id":"s","output":"{\"agent_id\":\"a-1\"}"}"#),
    ];
    let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
    let ev = decode_lines(&lines);
    let link = ev.iter().find_map(|e| match &e.kind {
        EventKind::SubagentLink {
            agent_id,
            description,
            call_id,
        } => Some((
            agent_id.as_str(),
            description.as_deref(),
            call_id.as_deref(),
        )),
        _ => None,
    });
    assert_eq!(link, Some(("a-1", Some("write tests"), Some("s"))));
}

#[test]
fn hostile_lines_are_counted_not_fatal() {
    let mut bad_utf8 =
        br#"{"type":"event_msg","payload":{"type":"user_message","message":"x"#.to_vec();
    bad_utf8.extend_from_slice(&[0xff, 0xfe]);
    bad_utf8.extend_from_slice(br#""}}"#);
    let deep_array = "[".repeat(100_000) + &"]".repeat(100_000);
    // Nesting inside a value that is read whole stops at serde_json's depth limit.
    let deep_object = r#"{"type":"event_msg","payload":{"type":"patch_apply_end","changes":"#
        .to_string()
        + &r#"{"a":"#.repeat(50_000)
        + "1"
        + &"}".repeat(50_002);
    // Records inside records past `payload.item` are skipped, however deep.
    let deep_records = r#"{"payload":"#.repeat(50_000) + "{}" + &"}".repeat(50_000);
    // Under a key nobody reads, nesting is skipped iteratively: no events, no overflow.
    let deep_unread = r#"{"type":"event_msg","x":"#.to_string()
        + &"[".repeat(200_000)
        + &"]".repeat(200_000)
        + "}";
    let wrong_types = item(r#"{"type":"function_call_output","call_id":7,"output":{"a":[]}}"#);
    let odd_call = item(r#"{"type":"function_call","name":7,"call_id":{},"arguments":[1]}"#);
    let cases: [&[u8]; 8] = [
        &bad_utf8,
        deep_array.as_bytes(),
        deep_object.as_bytes(),
        b"[1,2]",
        b"\"a string\"",
        b"42",
        b"null",
        br#"{"type":"response_item","payload":{"#,
    ];
    let mut d = CodexDecoder::new();
    let mut out = Vec::new();
    for (i, c) in cases.iter().enumerate() {
        d.feed(c, i as u64 + 1, &mut out);
    }
    assert_eq!(d.malformed(), cases.len() as u64);
    for (i, c) in [
        &b""[..],
        b"   ",
        b"{}",
        wrong_types.as_bytes(),
        br#"{"type":"future_thing","payload":{"x":1}}"#,
        br#"{"type":"event_msg","payload":{"type":"token_count","info":{"total_token_usage":7}}}"#,
        deep_unread.as_bytes(),
        deep_records.as_bytes(),
    ]
    .iter()
    .enumerate()
    {
        d.feed(c, 100 + i as u64, &mut out);
    }
    assert_eq!(d.malformed(), cases.len() as u64);
    assert!(out.is_empty());
    // A call without a usable id or name is still shown, named by its line.
    d.feed(odd_call.as_bytes(), 200, &mut out);
    assert!(
        matches!(&out[..], [Event { kind: EventKind::ToolCall { id, .. }, .. }] if id == "line-200")
    );
}

#[test]
fn a_five_megabyte_line_decodes() {
    let big = "y\\n".repeat(5 * 1024 * 1024 / 3);
    let lines = [
        META.to_string(),
        item(
            r#"{"type":"function_call","name":"exec_command","arguments":"{\"cmd\":\"yes\"}","call_id":"b"}"#,
        ),
        item(&format!(
            r#"{{"type":"function_call_output","call_id":"b","output":"Chunk ID: a\nProcess exited with code 0\nOutput:\n{big}"}}"#
        )),
    ];
    assert!(lines[2].len() > 5_000_000);
    let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
    let ev = decode_lines(&lines);
    let (_, output) = ev
        .iter()
        .find_map(|e| match &e.kind {
            EventKind::ToolResult {
                exit_code, output, ..
            } => Some((*exit_code, output)),
            _ => None,
        })
        .unwrap();
    assert!(output.starts_with("y\ny\n") && output.len() <= EXCERPT + '…'.len_utf8());
}
