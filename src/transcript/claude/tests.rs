//! The real transcripts under `$SPICE_TRANSCRIPTS` (`claude/` and `current/claude-*`),
//! decoded whole: this file is the harness and the every-file check; [`archive`]
//! holds the public samples' facts (1.0.98 to 2.1.152), [`current`] those of the
//! captures made with today's CLI. Each expected fact was read off the file by hand
//! (jq/python on the raw JSON), not off the decoder's output.

mod archive;
mod current;

use std::path::{Path, PathBuf};

use super::ClaudeDecoder;
use crate::transcript::event::{ChangeKind, Decoder, Event, EventKind, SessionMeta};

fn fixtures() -> PathBuf {
    // Only run when asked (`--include-ignored`, as .ci/run does): then a missing
    // directory is a failure, never a silent pass.
    std::env::var_os("SPICE_TRANSCRIPTS")
        .map(PathBuf::from)
        .expect("SPICE_TRANSCRIPTS must name the real transcripts (.ci/run sets it to ../shared/fixtures/transcripts)")
}

/// Everything one file decodes to, with the questions the tests ask of it.
struct Decoded {
    events: Vec<Event>,
}

fn decode_bytes(bytes: &[u8], name: &str) -> Decoded {
    let mut decoder = ClaudeDecoder::new();
    let mut events = Vec::new();
    let mut lines = bytes.split(|b| *b == b'\n').peekable();
    let mut n = 0;
    while let Some(line) = lines.next() {
        n += 1;
        // The piece after the final newline is not a line.
        if lines.peek().is_some() || !line.is_empty() {
            decoder.feed(line, n, &mut events);
        }
    }
    assert_eq!(decoder.malformed(), 0, "{name}: malformed lines");
    Decoded { events }
}

fn decode(dir: &Path, rel: &str) -> Decoded {
    let bytes = std::fs::read(dir.join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"));
    decode_bytes(&bytes, rel)
}

impl Decoded {
    fn main(&self) -> impl Iterator<Item = &Event> {
        self.events.iter().filter(|e| e.subagent.is_none())
    }

    fn bash_commands(&self) -> Vec<&str> {
        let calls = self.events.iter().filter_map(|e| match &e.kind {
            EventKind::ToolCall { name, command, .. } if name == "Bash" => command.as_deref(),
            _ => None,
        });
        calls.collect()
    }

    /// `(exit_code, failed)` of the first Bash call whose command starts so.
    fn bash_result(&self, prefix: &str) -> (Option<i32>, bool) {
        let id = self
            .events
            .iter()
            .find_map(|e| match &e.kind {
                EventKind::ToolCall {
                    id,
                    command: Some(c),
                    ..
                } if c.starts_with(prefix) => Some(id),
                _ => None,
            })
            .unwrap_or_else(|| panic!("no Bash call {prefix:?}"));
        self.result(id)
    }

    fn result(&self, call: &str) -> (Option<i32>, bool) {
        self.events
            .iter()
            .find_map(|e| match &e.kind {
                EventKind::ToolResult {
                    id,
                    exit_code,
                    failed,
                    ..
                } if id == call => Some((*exit_code, *failed)),
                _ => None,
            })
            .unwrap_or_else(|| panic!("no result for {call}"))
    }

    /// `(exit_code, failed)` of every result of a Bash call.
    fn bash_results(&self) -> Vec<(Option<i32>, bool)> {
        let ids = self.events.iter().filter_map(|e| match &e.kind {
            EventKind::ToolCall { id, name, .. } if name == "Bash" => Some(id),
            _ => None,
        });
        ids.map(|id| self.result(id)).collect()
    }

    fn prompts(&self) -> Vec<&str> {
        let prompts = self.main().filter_map(|e| match &e.kind {
            EventKind::UserPrompt { text } => Some(text.as_str()),
            _ => None,
        });
        prompts.collect()
    }

    fn files(&self) -> Vec<(&str, &ChangeKind)> {
        let files = self.events.iter().filter_map(|e| match &e.kind {
            EventKind::FileChange { path, change, .. } => Some((path.as_str(), change)),
            _ => None,
        });
        files.collect()
    }

    fn commits(&self) -> Vec<(Option<&str>, Option<&str>)> {
        let commits = self.events.iter().filter_map(|e| match &e.kind {
            EventKind::Commit { sha, message, .. } => Some((sha.as_deref(), message.as_deref())),
            _ => None,
        });
        commits.collect()
    }

    /// `(line, trigger, pre_tokens)`.
    fn compactions(&self) -> Vec<(u64, Option<&str>, Option<u64>)> {
        let found = self.events.iter().filter_map(|e| match &e.kind {
            EventKind::Compaction {
                trigger,
                pre_tokens,
            } => Some((e.line, trigger.as_deref(), *pre_tokens)),
            _ => None,
        });
        found.collect()
    }

    fn summaries(&self) -> Vec<u64> {
        let lines = self.events.iter().filter_map(|e| match &e.kind {
            EventKind::CompactionSummary { .. } => Some(e.line),
            _ => None,
        });
        lines.collect()
    }

    /// `(agent_id, description)`.
    fn links(&self) -> Vec<(&str, Option<&str>)> {
        let links = self.events.iter().filter_map(|e| match &e.kind {
            EventKind::SubagentLink {
                agent_id,
                description,
                ..
            } => Some((agent_id.as_str(), description.as_deref())),
            _ => None,
        });
        links.collect()
    }

    fn meta(&self) -> &SessionMeta {
        let last = self.events.iter().rev().find_map(|e| match &e.kind {
            EventKind::SessionMeta(m) => Some(m),
            _ => None,
        });
        last.expect("a session meta")
    }

    fn turn_ends(&self) -> Vec<u64> {
        let ends = self.main().filter(|e| e.kind == EventKind::TurnEnd);
        ends.map(|e| e.line).collect()
    }

    fn count(&self, pred: impl Fn(&EventKind) -> bool) -> usize {
        self.events.iter().filter(|e| pred(&e.kind)).count()
    }

    fn labels(&self) -> Vec<Option<&str>> {
        let mut labels: Vec<Option<&str>> =
            self.events.iter().map(|e| e.subagent.as_deref()).collect();
        labels.sort();
        labels.dedup();
        labels
    }
}

fn is_injected(k: &EventKind) -> bool {
    matches!(k, EventKind::InjectedContext { .. })
}

fn is_prompt(k: &EventKind) -> bool {
    matches!(k, EventKind::UserPrompt { .. })
}

fn jsonl_under(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("a directory entry").path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            jsonl_under(&path, out);
        } else if path.extension().is_some_and(|x| x == "jsonl") {
            out.push(path);
        }
    }
}

#[test]
#[ignore = "needs the real transcripts: SPICE_TRANSCRIPTS (set by .ci/run)"]
fn every_claude_file_decodes_without_malformed_lines() {
    let dir = fixtures();
    let mut files = Vec::new();
    jsonl_under(&dir.join("claude"), &mut files);
    let current = std::fs::read_dir(dir.join("current")).expect("current/");
    files.extend(current.map(|e| e.expect("an entry").path()).filter(|p| {
        p.file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with("claude-") && n.ends_with(".jsonl"))
    }));
    // 19 files in claude/ (sibling and subagents/ layouts included), 9 in current/.
    assert!(files.len() >= 28, "found only {} files", files.len());
    for path in &files {
        let bytes = std::fs::read(path).expect("readable");
        let decoded = decode_bytes(&bytes, &path.display().to_string());
        assert!(!decoded.events.is_empty(), "{}: no events", path.display());
        assert!(
            decoded.meta().session_id.is_some(),
            "{}: no session id",
            path.display()
        );
    }
}
