//! Input no agent writes on purpose: broken bytes, huge or deeply nested lines, wrong
//! types in known keys. The decoder must count, skip and go on, never panic.

use super::ClaudeDecoder;
use crate::transcript::event::{Decoder, Event, EventKind, EXCERPT};

fn feed(lines: &[&[u8]]) -> (Vec<Event>, u64) {
    let mut d = ClaudeDecoder::new();
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        d.feed(line, i as u64 + 1, &mut out);
    }
    (out, d.malformed())
}

const PROMPT: &[u8] =
    br#"{"type":"user","sessionId":"s","message":{"role":"user","content":"hello"}}"#;

fn prompts(events: &[Event]) -> usize {
    let prompts = events
        .iter()
        .filter(|e| matches!(e.kind, EventKind::UserPrompt { .. }));
    prompts.count()
}

#[test]
fn invalid_utf8_is_malformed() {
    let bad = b"{\"type\":\"user\",\"message\":{\"content\":\"caf\xe9\"}}";
    let (events, malformed) = feed(&[bad, PROMPT]);
    assert_eq!(malformed, 1);
    assert_eq!(prompts(&events), 1, "the next line still decodes");
}

#[test]
fn non_objects_and_broken_json_are_malformed() {
    let lines: &[&[u8]] = &[
        b"[1,2,3]",
        b"\"user\"",
        b"42",
        b"null",
        b"{\"type\":",
        b"{} {}",
    ];
    let (events, malformed) = feed(lines);
    assert_eq!(malformed, lines.len() as u64);
    assert!(events.is_empty());
}

#[test]
fn empty_and_blank_lines_are_skipped_not_counted() {
    let (events, malformed) = feed(&[b"", b"   ", b"\r", PROMPT]);
    assert_eq!(malformed, 0);
    assert_eq!(prompts(&events), 1);
}

#[test]
fn deep_nesting_is_malformed_not_a_stack_overflow() {
    let depth = 100_000;
    let array = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
    // Inside a key the decoder reads (tool input) and at the top.
    let nested_input = format!(
        r#"{{"type":"assistant","message":{{"content":[{{"type":"tool_use","id":"t","name":"X","input":{array}}}]}}}}"#
    );
    let nested_content = format!(
        r#"{{"type":"user","message":{{"content":{}"x"{}}}}}"#,
        r#"[{"type":"tool_result","content":"#.repeat(depth),
        "}]".repeat(depth)
    );
    let (events, malformed) = feed(&[
        array.as_bytes(),
        nested_input.as_bytes(),
        nested_content.as_bytes(),
    ]);
    assert_eq!(malformed, 3);
    assert!(events.is_empty());
}

#[test]
fn deep_nesting_in_an_unread_key_is_skipped() {
    let depth = 100_000;
    let line = format!(
        r#"{{"type":"user","extra":{}{},"message":{{"content":"hi"}}}}"#,
        "[".repeat(depth),
        "]".repeat(depth)
    );
    let (events, malformed) = feed(&[line.as_bytes()]);
    // serde_json skips an unread value with a loop, not recursion: no depth limit
    // applies and the rest of the line is read.
    assert_eq!((malformed, prompts(&events)), (0, 1));
}

#[test]
fn a_five_megabyte_line_decodes_and_is_excerpted() {
    let big = "x".repeat(5 << 20);
    let call = format!(
        r#"{{"type":"assistant","message":{{"content":[{{"type":"tool_use","id":"t1","name":"Write","input":{{"file_path":"/a","content":"{big}"}}}}]}}}}"#
    );
    let result = format!(
        r#"{{"type":"user","toolUseResult":{{"type":"create","filePath":"/a","content":"{big}"}},"message":{{"content":[{{"type":"tool_result","tool_use_id":"t1","content":"{big}"}}]}}}}"#
    );
    let (events, malformed) = feed(&[call.as_bytes(), result.as_bytes()]);
    assert_eq!(malformed, 0);
    let mut saw = 0;
    for e in &events {
        match &e.kind {
            EventKind::ToolCall { input, .. } | EventKind::ToolResult { output: input, .. } => {
                assert!(input.len() <= EXCERPT + '…'.len_utf8());
                assert!(input.ends_with('…'));
                saw += 1;
            }
            EventKind::FileChange { path, .. } => {
                assert_eq!(path, "/a");
                saw += 1;
            }
            _ => {}
        }
    }
    assert_eq!(saw, 3);
}

#[test]
fn input_excerpt_cuts_on_a_char_boundary() {
    let wide = "é".repeat(3000);
    let call = format!(
        r#"{{"type":"assistant","message":{{"content":[{{"type":"tool_use","id":"t","name":"X","input":{{"k":"{wide}"}}}}]}}}}"#
    );
    let (events, _) = feed(&[call.as_bytes()]);
    let Some(EventKind::ToolCall { input, .. }) = events.first().map(|e| &e.kind) else {
        panic!("no call");
    };
    let whole = format!(r#"{{"k":"{wide}"}}"#);
    assert_eq!(input, &crate::transcript::event::excerpt(&whole, EXCERPT));
}

#[test]
fn wrong_types_in_known_keys_read_as_absent() {
    let lines: &[&[u8]] = &[
        br#"{"type":"user","isSidechain":"yes","isMeta":1,"timestamp":5,"cwd":[1],"message":{"content":"typed"}}"#,
        br#"{"type":"assistant","message":{"id":7,"content":[3,"x",{"type":"text","text":{"a":1}}],"usage":"lots","stop_reason":false}}"#,
        br#"{"type":"user","toolUseResult":[1],"message":{"content":[{"type":"tool_result","tool_use_id":null,"is_error":"true","content":{"x":1}}]}}"#,
        br#"{"type":"system","subtype":"compact_boundary","compactMetadata":"auto"}"#,
        br#"{"type":"progress","data":[]}"#,
        br#"{"type":"user","message":"not an object"}"#,
        br#"{"type":7}"#,
        br#"{"type":"user","message":{"role":"user","content":"x"},"type":"assistant"}"#,
    ];
    let (events, malformed) = feed(lines);
    // Only the duplicated key makes a line unreadable.
    assert_eq!(malformed, 1);
    assert_eq!(prompts(&events), 1);
    let compaction = events
        .iter()
        .find(|e| matches!(e.kind, EventKind::Compaction { .. }));
    assert!(compaction.is_some());
}

#[test]
fn escape_sequences_and_bidi_controls_pass_through_unchanged() {
    // Neutralising terminal content is the renderer's job; the event keeps the text.
    let line = br#"{"type":"user","message":{"content":"a\u001b[31mred\u202e"}}"#;
    let (events, _) = feed(&[line]);
    let Some(EventKind::UserPrompt { text }) = events.last().map(|e| &e.kind) else {
        panic!("no prompt");
    };
    assert_eq!(text, "a\u{1b}[31mred\u{202e}");
}
