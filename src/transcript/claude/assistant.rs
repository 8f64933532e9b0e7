//! `assistant` lines: one content block per line (an API message with text and two
//! tool calls is three lines sharing `message.id`). Text, reasoning and tool calls
//! become events; every line's `usage` becomes a `TokenUsage` for its message id
//! (early lines carry provisional figures, so consumers keep the last per id); a
//! final `stop_reason` ends the turn after the line's blocks. Tool calls are
//! remembered until their result arrives (see [`super::results`]).

use super::record::{Block, Field, Flex, Loose, Message, Record};
use super::{Call, ClaudeDecoder, Origin};
use crate::transcript::event::{self, Event, EventKind, EXCERPT};

impl ClaudeDecoder {
    pub(super) fn assistant(
        &mut self,
        rec: &Record,
        msg: &Message,
        origin: &Origin,
        out: &mut Vec<Event>,
    ) {
        let message_id = msg.id.str().map(str::to_string);
        match &msg.content {
            Some(Flex::Str(text)) => origin.push(
                out,
                EventKind::AssistantText {
                    text: text.clone(),
                    message_id: message_id.clone(),
                },
            ),
            Some(Flex::List(blocks)) => {
                for block in blocks.iter().filter_map(Flex::obj) {
                    self.assistant_block(rec, block, &message_id, origin, out);
                }
            }
            _ => {}
        }
        let synthetic = msg.model.str() == Some("<synthetic>");
        if let (Some(usage), false) = (msg.usage.as_ref().and_then(Flex::obj), synthetic) {
            let n = |f: &Option<Loose>| f.int().and_then(|n| u64::try_from(n).ok()).unwrap_or(0);
            origin.push(
                out,
                EventKind::TokenUsage {
                    message_id,
                    request_id: rec.request_id.str().map(str::to_string),
                    model: msg.model.str().map(str::to_string),
                    input_tokens: n(&usage.input_tokens),
                    output_tokens: n(&usage.output_tokens),
                    cache_read_tokens: n(&usage.cache_read_input_tokens),
                    cache_creation_tokens: n(&usage.cache_creation_input_tokens),
                    cumulative: false,
                },
            );
        }
        if matches!(msg.stop_reason.str(), Some("end_turn" | "stop_sequence")) {
            self.turn_end(origin, out, false);
        }
    }

    fn assistant_block(
        &mut self,
        rec: &Record,
        b: &Block,
        message_id: &Option<String>,
        origin: &Origin,
        out: &mut Vec<Event>,
    ) {
        match b.kind.str() {
            // 2.1.x writes a lone "\n\n" text block before thinking: not something said.
            Some("text") => {
                if let Some(text) = b.text.str().filter(|t| !t.trim().is_empty()) {
                    origin.push(
                        out,
                        EventKind::AssistantText {
                            text: text.to_string(),
                            message_id: message_id.clone(),
                        },
                    )
                }
            }
            Some("thinking") => origin.push(
                out,
                EventKind::Reasoning {
                    text: b.thinking.str().unwrap_or("").to_string(),
                },
            ),
            Some("redacted_thinking") => origin.push(
                out,
                EventKind::Reasoning {
                    text: String::new(),
                },
            ),
            Some("tool_use") => {
                let id = b.id.str().unwrap_or("").to_string();
                let name = b.name.str().unwrap_or("").to_string();
                let input = b.input.as_ref();
                let arg = |key: &str| {
                    input
                        .and_then(|v| v.get(key))
                        .and_then(|v| v.as_str())
                        .map(str::to_string)
                };
                let shell = name == "Bash";
                let command = if shell { arg("command") } else { None };
                let subagent_call =
                    matches!(name.as_str(), "Task" | "Agent") || arg("subagent_type").is_some();
                let edits = matches!(
                    name.as_str(),
                    "Edit" | "Write" | "MultiEdit" | "NotebookEdit"
                );
                let path = match name.as_str() {
                    "NotebookEdit" => arg("notebook_path").or_else(|| arg("file_path")),
                    _ if edits => arg("file_path"),
                    _ => None,
                };
                origin.push(
                    out,
                    EventKind::ToolCall {
                        id: id.clone(),
                        name: name.clone(),
                        command: command.clone(),
                        // stream-json events carry no cwd: the session's is the best known.
                        cwd: if shell {
                            rec.cwd
                                .str()
                                .or(self.meta.cwd.as_deref())
                                .map(str::to_string)
                        } else {
                            None
                        },
                        input: input.map_or_else(String::new, json_excerpt),
                    },
                );
                let call = Call {
                    description: if subagent_call {
                        arg("description")
                    } else {
                        None
                    },
                    prompt: if subagent_call { arg("prompt") } else { None },
                    name,
                    edits,
                    path,
                    command,
                    chain: None,
                };
                self.calls.insert(id, call);
            }
            _ => {}
        }
    }
}

/// Compact JSON of a tool's input, cut to [`EXCERPT`] bytes without serialising
/// the whole of a large `Write`.
fn json_excerpt(v: &serde_json::Value) -> String {
    struct Capped(Vec<u8>);
    // A char is at most 4 bytes: with 4 spare bytes the valid prefix is longer than
    // EXCERPT whenever the whole is, so `excerpt` cuts where it would on the whole.
    const CAP: usize = EXCERPT + 4;
    impl std::io::Write for Capped {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            let room = CAP - self.0.len();
            if room == 0 {
                return Err(std::io::ErrorKind::WriteZero.into());
            }
            let n = room.min(buf.len());
            self.0.extend_from_slice(&buf[..n]);
            Ok(n)
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut w = Capped(Vec::new());
    let _ = serde_json::to_writer(&mut w, v);
    let text = match String::from_utf8(w.0) {
        Ok(s) => s,
        Err(e) => {
            let valid = e.utf8_error().valid_up_to();
            let mut bytes = e.into_bytes();
            bytes.truncate(valid);
            String::from_utf8(bytes).unwrap_or_default()
        }
    };
    event::excerpt(&text, EXCERPT)
}
