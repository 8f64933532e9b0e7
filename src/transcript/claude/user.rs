//! `user` lines: tool results, and text that is a prompt, injected context or a
//! compaction summary (the flags are read here, the text itself in
//! [`super::speaker`]). Also where a 1.0.x inline sidechain is tied to the Task call
//! that started it: its root prompt is that call's prompt, verbatim.

use super::record::{Block, Field, Flex, Message, Record};
use super::{speaker, ClaudeDecoder, Origin};
use crate::transcript::event::{Event, EventKind};

impl ClaudeDecoder {
    pub(super) fn user(
        &mut self,
        rec: &Record,
        msg: &Message,
        origin: &Origin,
        out: &mut Vec<Event>,
    ) {
        let meta = rec.is_meta.truthy();
        let summary = rec.is_compact_summary.truthy();
        match &msg.content {
            Some(Flex::Str(text)) => self.user_text(rec, text, meta, summary, origin, out),
            Some(Flex::List(blocks)) => {
                let blocks: Vec<&Block> = blocks.iter().filter_map(Flex::obj).collect();
                let results = blocks
                    .iter()
                    .filter(|b| b.kind.str() == Some("tool_result"))
                    .count();
                // One structured result per line; with several results it is ambiguous.
                let structured = if results == 1 {
                    rec.tool_use_result
                        .as_ref()
                        .or(rec.tool_use_result_snake.as_ref())
                        .and_then(Flex::obj)
                } else {
                    None
                };
                let mut typed: Vec<&str> = Vec::new();
                for b in &blocks {
                    match b.kind.str() {
                        Some("tool_result") => self.tool_result(rec, b, structured, origin, out),
                        // Text beside a tool result is the harness's (hook context).
                        Some("text") if results > 0 => origin.push(
                            out,
                            EventKind::InjectedContext {
                                text: b.text.str().unwrap_or("").to_string(),
                            },
                        ),
                        Some("text") => typed.extend(b.text.str()),
                        _ => {}
                    }
                }
                if !typed.is_empty() {
                    self.user_text(rec, &typed.join("\n"), meta, summary, origin, out);
                }
            }
            _ => {}
        }
    }

    fn user_text(
        &mut self,
        rec: &Record,
        text: &str,
        meta: bool,
        summary: bool,
        origin: &Origin,
        out: &mut Vec<Event>,
    ) {
        if summary {
            return origin.push(
                out,
                EventKind::CompactionSummary {
                    text: text.to_string(),
                },
            );
        }
        if meta {
            return origin.push(
                out,
                EventKind::InjectedContext {
                    text: text.to_string(),
                },
            );
        }
        let root = rec.is_sidechain.truthy() && rec.parent_uuid.str().is_none();
        if root {
            // 2.0.x cache-warming agents: no Task call starts them, nothing links them;
            // their one prompt is the harness's.
            if text == "Warmup" {
                return origin.push(
                    out,
                    EventKind::InjectedContext {
                        text: text.to_string(),
                    },
                );
            }
            if rec.agent_id.str().is_none() {
                self.match_inline_chain(text, origin);
            }
        }
        let said = speaker::classify(text);
        if let Some(prompt) = said.prompt {
            origin.push(out, EventKind::UserPrompt { text: prompt });
        }
        if let Some(injected) = said.injected {
            origin.push(out, EventKind::InjectedContext { text: injected });
        }
        if said.interrupted {
            self.turn_end(origin, out, true);
        }
    }

    /// 1.0.x: an inline chain's root prompt is its Task call's prompt, verbatim.
    fn match_inline_chain(&mut self, text: &str, origin: &Origin) {
        let Some(label) = &origin.subagent else {
            return;
        };
        if let Some(call) = self
            .calls
            .values_mut()
            .find(|c| c.chain.is_none() && c.prompt.as_deref() == Some(text))
        {
            call.chain = Some(label.clone());
        }
    }
}
