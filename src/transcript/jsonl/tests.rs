use super::*;
use crate::transcript::event::Agent;
use crate::transcript::sanitize::json_line;
use proptest::prelude::*;
use std::path::PathBuf;

/// The line `watch --json` printed through serde: `{"file":…,"event":…}`.
#[derive(serde::Serialize)]
struct FileEvent<'a> {
    file: &'a Path,
    event: &'a Event,
}

fn direct(path: &Path, e: &Event) -> String {
    let mut out = file_prefix(path).expect("a UTF-8 path");
    write_event(&mut out, e);
    out.push(b'}');
    String::from_utf8(out).expect("the writer writes UTF-8")
}

fn assert_same(path: &Path, e: &Event) {
    assert_eq!(
        direct(path, e),
        json_line(&FileEvent {
            file: path,
            event: e
        }),
        "{e:?}"
    );
}

const HOSTILE: &str = "ok \"q\" \\ \x1b[2J\x07\x00\x08\x0c\x7f\r\n\t \u{202E}txt\u{2066}\u{200f}\u{61c} é ✓ 𝄞 \u{2028} \u{2010}\u{d7ff}";

fn every_kind(s: &str) -> Vec<EventKind> {
    let text = || s.to_string();
    let some = || Some(s.to_string());
    vec![
        EventKind::SessionMeta(SessionMeta::default()),
        EventKind::SessionMeta(SessionMeta {
            session_id: some(),
            agent: Some(Agent::Codex),
            version: some(),
            cwd: some(),
            model: some(),
            git_branch: some(),
        }),
        EventKind::SessionMeta(SessionMeta {
            agent: Some(Agent::Claude),
            cwd: some(),
            ..SessionMeta::default()
        }),
        EventKind::UserPrompt { text: text() },
        EventKind::InjectedContext { text: text() },
        EventKind::CompactionSummary { text: text() },
        EventKind::AssistantText {
            text: text(),
            message_id: None,
        },
        EventKind::AssistantText {
            text: text(),
            message_id: some(),
        },
        EventKind::Reasoning { text: text() },
        EventKind::ToolCall {
            id: text(),
            name: text(),
            command: None,
            cwd: None,
            input: text(),
        },
        EventKind::ToolCall {
            id: text(),
            name: text(),
            command: some(),
            cwd: some(),
            input: String::new(),
        },
        EventKind::ToolResult {
            id: text(),
            exit_code: None,
            failed: false,
            output: text(),
        },
        EventKind::ToolResult {
            id: text(),
            exit_code: Some(-2_147_483_648),
            failed: true,
            output: text(),
        },
        EventKind::FileChange {
            path: text(),
            change: ChangeKind::Add,
            call_id: None,
        },
        EventKind::FileChange {
            path: text(),
            change: ChangeKind::Update,
            call_id: some(),
        },
        EventKind::FileChange {
            path: text(),
            change: ChangeKind::Delete,
            call_id: some(),
        },
        EventKind::FileChange {
            path: text(),
            change: ChangeKind::Move { to: text() },
            call_id: some(),
        },
        EventKind::Commit {
            sha: None,
            message: None,
            call_id: None,
        },
        EventKind::Commit {
            sha: some(),
            message: some(),
            call_id: some(),
        },
        EventKind::Compaction {
            trigger: None,
            pre_tokens: None,
        },
        EventKind::Compaction {
            trigger: some(),
            pre_tokens: Some(u64::MAX),
        },
        EventKind::SubagentLink {
            agent_id: text(),
            description: None,
            call_id: None,
        },
        EventKind::SubagentLink {
            agent_id: text(),
            description: some(),
            call_id: some(),
        },
        EventKind::TokenUsage {
            message_id: None,
            request_id: None,
            model: None,
            input_tokens: 0,
            output_tokens: 1,
            cache_read_tokens: 1234567890123,
            cache_creation_tokens: u64::MAX,
            cumulative: true,
        },
        EventKind::TokenUsage {
            message_id: some(),
            request_id: some(),
            model: some(),
            input_tokens: 5,
            output_tokens: 6,
            cache_read_tokens: 7,
            cache_creation_tokens: 8,
            cumulative: false,
        },
        EventKind::TurnEnd,
    ]
}

#[test]
fn every_variant_matches_serde() {
    let path = Path::new("/tmp/dir with \"quotes\"/\u{202E}x.jsonl");
    for s in ["", "plain", HOSTILE] {
        for (i, kind) in every_kind(s).into_iter().enumerate() {
            let e = Event {
                line: i as u64,
                timestamp: [None, Some(-1), Some(1_767_225_600_000_000)][i % 3],
                subagent: (i % 2 == 0).then(|| s.to_string()),
                kind,
            };
            assert_same(path, &e);
        }
    }
}

#[test]
fn a_path_that_is_not_utf8_has_no_prefix() {
    use std::os::unix::ffi::OsStrExt;
    let path = Path::new(std::ffi::OsStr::from_bytes(b"/tmp/\xff.jsonl"));
    assert_eq!(file_prefix(path), None);
    let e = Event {
        line: 1,
        timestamp: None,
        subagent: None,
        kind: EventKind::TurnEnd,
    };
    assert_eq!(
        json_line(&FileEvent {
            file: path,
            event: &e
        }),
        "null"
    );
}

fn strings_match_serde(s: &str) {
    let mut out = Vec::new();
    write_json_str(&mut out, s);
    assert_eq!(String::from_utf8(out).unwrap(), json_line(&s), "{s:?}");
}

#[test]
fn strings_at_every_offset_match_serde() {
    // Each special char at each position of an 8-byte word, and across words.
    let specials = [
        "\"", "\\", "\n", "\x00", "\x1f", "\x7f", " ", "\u{202A}", "\u{202E}", "\u{2066}",
        "\u{2069}", "\u{200E}", "\u{200F}", "\u{61C}", "\u{2000}", "\u{600}", "é", "𝄞",
    ];
    for sp in specials {
        for pad in 0..20 {
            let s = format!("{}{sp}{}", "a".repeat(pad), "b".repeat(20 - pad));
            strings_match_serde(&s);
            strings_match_serde(&sp.repeat(pad));
        }
    }
    strings_match_serde(HOSTILE);
}

proptest! {
    #[test]
    fn any_string_matches_serde(s in any::<String>()) {
        strings_match_serde(&s);
    }

    #[test]
    fn text_with_controls_and_bidi_matches_serde(
        s in "([a-z \"\\\\\\x00-\\x1f\u{202A}-\u{202E}\u{2066}-\u{2069}\u{200E}\u{200F}\u{61C}\u{2010}é]|𝄞){0,40}"
    ) {
        strings_match_serde(&s);
    }
}

/// Every event of every real sample (`$SPICE_TRANSCRIPTS`), both ways.
#[test]
#[ignore = "needs the real transcripts: SPICE_TRANSCRIPTS (set by .ci/run)"]
fn every_fixture_event_matches_serde() {
    let dir = std::env::var_os("SPICE_TRANSCRIPTS")
        .map(PathBuf::from)
        .expect("SPICE_TRANSCRIPTS must name the real transcripts (.ci/run sets it)");
    let mut stack = vec![dir];
    let mut events = 0;
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap().flatten() {
            let p = entry.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "jsonl") {
                let Ok((_, evs, _)) = crate::transcript::read_file(&p) else {
                    continue;
                };
                for e in &evs {
                    assert_same(&p, e);
                }
                events += evs.len();
            }
        }
    }
    assert!(
        events > 1000,
        "only {events} events: is the fixtures dir right?"
    );
}
