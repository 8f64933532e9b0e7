//! Tokens from a transcript's [`EventKind::TokenUsage`] events, counted exactly once.
//!
//! The rules, one per agent:
//! - **Claude** writes one line per content block of an API message and repeats the
//!   message's `usage` on each (early lines with provisional figures). One API call is
//!   named by its message id and request id: the first line of it counts its figures,
//!   a later line with other figures replaces them (the change, up or down, is the
//!   delta), a repeat counts nothing. A line without a message id is its own call.
//! - **Sub-agents** count where their API calls are recorded: 1.0.x inline sidechain
//!   lines in the parent's file, 2.x `agent-*.jsonl` files (sibling or under
//!   `<session>/subagents/`). The parent's `progress` records (which echo the
//!   sub-agent's lines) and Task results' `toolUseResult.usage`/`totalTokens` (a
//!   summary) are never counted, so nothing counts twice; calls seen in several
//!   files read with one [`Calls`] (a transcript copied into another, a sub-agent
//!   file read twice) count once.
//! - **Codex** `token_count` totals are cumulative: each total less the last is the
//!   delta; a total any figure of which went down (a new session in the same file, a
//!   reset after compaction) starts a new baseline and counts from zero, never a
//!   negative delta. Codex's `input_tokens` include the cached ones: input here is
//!   what was not read from the cache, as Claude counts it. `codex exec --json`
//!   turn usage is per turn: each counts once.
//!
//! Memory: one 8-byte key and its figures per API call (not per line or byte).

use super::event::{Agent, Event, EventKind};
use crate::store::{Delta, Tokens};
use serde::{Deserialize, Serialize};
use std::collections::{HashMap, VecDeque};

/// The API calls already counted, by key: shared by the files of one reading.
#[derive(Debug, Default)]
pub struct Calls {
    seen: HashMap<u64, Tokens>,
    /// Keys in the order first seen, for [`Meter::carry`]'s window.
    order: VecDeque<u64>,
}

impl Calls {
    pub fn len(&self) -> usize {
        self.seen.len()
    }
    pub fn is_empty(&self) -> bool {
        self.seen.is_empty()
    }
}

/// How many recent calls a carry keeps: the lines of one message sit close together,
/// so only the last few can straddle a checkpoint.
const CARRY_CALLS: usize = 256;

/// One counted change: the delta, when the line says, and which model answered.
#[derive(Debug, Clone, PartialEq)]
pub struct Counted {
    pub delta: Delta,
    pub model: Option<String>,
    pub timestamp: Option<crate::clock::Micros>,
    pub subagent: bool,
}

/// Reads one file's usage events (one meter per file; [`Calls`] may be shared).
#[derive(Debug)]
pub struct Meter {
    agent: Agent,
    /// Codex: the last cumulative total, as the file wrote it.
    total: Option<Tokens>,
}

/// What a meter and its calls remember across a restart (see [`Meter::carry`]).
#[derive(Debug, Default, Serialize, Deserialize)]
struct Carry {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    total: Option<Tokens>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    calls: Vec<(u64, Tokens)>,
}

impl Meter {
    pub fn new(agent: Agent) -> Meter {
        Meter { agent, total: None }
    }

    /// What `e` adds to the tokens counted so far (`None`: not a usage event, or
    /// nothing new).
    pub fn observe(&mut self, e: &Event, calls: &mut Calls) -> Option<Counted> {
        let EventKind::TokenUsage {
            message_id,
            request_id,
            model,
            input_tokens,
            output_tokens,
            cache_read_tokens,
            cache_creation_tokens,
            cumulative,
        } = &e.kind
        else {
            return None;
        };
        let raw = Tokens {
            input: *input_tokens,
            output: *output_tokens,
            cache_read: *cache_read_tokens,
            cache_creation: *cache_creation_tokens,
        };
        let delta = match (self.agent, cumulative) {
            (Agent::Codex, true) => {
                let now = codex(&raw);
                let last = self.total.replace(raw);
                match last {
                    Some(l) if !went_down(&l, &raw) => Delta::between(&codex(&l), &now),
                    _ => Delta::between(&Tokens::default(), &now),
                }
            }
            (Agent::Codex, false) => Delta::between(&Tokens::default(), &codex(&raw)),
            // Per-message figures, keyed by message (a terminal records none).
            (Agent::Claude | Agent::Gemini | Agent::Qwen | Agent::Terminal, _) => {
                match message_id {
                    Some(id) => {
                        let key = key(id, request_id.as_deref());
                        let old = match calls.seen.insert(key, raw) {
                            Some(old) => old,
                            None => {
                                calls.order.push_back(key);
                                Tokens::default()
                            }
                        };
                        Delta::between(&old, &raw)
                    }
                    None => Delta::between(&Tokens::default(), &raw),
                }
            }
        };
        (!delta.is_zero()).then(|| Counted {
            delta,
            model: model.clone(),
            timestamp: e.timestamp,
            subagent: e.subagent.is_some(),
        })
    }

    /// What a reading resumed from a checkpoint must know: Codex's last total, and
    /// the most recent calls (a message whose lines straddle the checkpoint).
    pub fn carry(&self, calls: &Calls) -> String {
        let calls = calls
            .order
            .iter()
            .rev()
            .take(CARRY_CALLS)
            .filter_map(|k| calls.seen.get(k).map(|t| (*k, *t)))
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        serde_json::to_string(&Carry {
            total: self.total,
            calls,
        })
        .expect("numbers serialise")
    }

    /// A meter (and its calls) resumed from [`Meter::carry`]'s text; unreadable text
    /// resumes from nothing.
    pub fn resume(agent: Agent, carry: Option<&str>) -> (Meter, Calls) {
        let c: Carry = carry
            .and_then(|t| serde_json::from_str(t).ok())
            .unwrap_or_default();
        let mut calls = Calls::default();
        for (k, t) in c.calls {
            if calls.seen.insert(k, t).is_none() {
                calls.order.push_back(k);
            }
        }
        (
            Meter {
                agent,
                total: c.total,
            },
            calls,
        )
    }
}

/// Codex's figures as counted here: input less what came from the cache.
fn codex(raw: &Tokens) -> Tokens {
    Tokens {
        input: raw.input.saturating_sub(raw.cache_read),
        ..*raw
    }
}

fn went_down(last: &Tokens, now: &Tokens) -> bool {
    now.input < last.input
        || now.output < last.output
        || now.cache_read < last.cache_read
        || now.cache_creation < last.cache_creation
}

fn key(message: &str, request: Option<&str>) -> u64 {
    let mut h = xxhash_rust::xxh3::Xxh3::new();
    h.update(message.as_bytes());
    h.update(&[0]);
    h.update(request.unwrap_or("").as_bytes());
    h.digest()
}

/// The tokens of a whole file's events (a briefing's figure).
pub fn total(agent: Agent, events: &[Event]) -> Tokens {
    let mut meter = Meter::new(agent);
    let mut calls = Calls::default();
    let mut t = Tokens::default();
    for e in events {
        if let Some(c) = meter.observe(e, &mut calls) {
            t.apply(&c.delta);
        }
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claude(lines: &[&str]) -> Vec<Event> {
        decode(Agent::Claude, lines)
    }

    fn decode(agent: Agent, lines: &[&str]) -> Vec<Event> {
        let mut d = crate::transcript::decoder(agent);
        let mut out = Vec::new();
        for (i, l) in lines.iter().enumerate() {
            d.feed(l.as_bytes(), i as u64 + 1, &mut out);
        }
        out
    }

    fn line(id: &str, req: &str, input: u64, output: u64, extra: &str) -> String {
        format!(
            r#"{{"type":"assistant","sessionId":"s","requestId":"{req}"{extra},"message":{{"id":"{id}","model":"claude-x","content":[{{"type":"text","text":"hi"}}],"usage":{{"input_tokens":{input},"output_tokens":{output},"cache_read_input_tokens":100,"cache_creation_input_tokens":10}}}}}}"#
        )
    }

    fn sum(agent: Agent, lines: &[String]) -> Tokens {
        let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
        total(agent, &decode(agent, &refs))
    }

    #[test]
    fn a_message_repeated_on_each_line_counts_once() {
        let l = line("m1", "r1", 5, 3, "");
        let t = sum(Agent::Claude, &[l.clone(), l.clone(), l]);
        assert_eq!(
            t,
            Tokens {
                input: 5,
                output: 3,
                cache_read: 100,
                cache_creation: 10
            }
        );
    }

    #[test]
    fn a_later_line_with_new_figures_replaces_never_adds() {
        let t = sum(
            Agent::Claude,
            &[line("m1", "r1", 5, 3, ""), line("m1", "r1", 5, 172, "")],
        );
        assert_eq!((t.input, t.output, t.cache_read), (5, 172, 100));
        // Lower figures replace too (the delta is negative).
        let t = sum(
            Agent::Claude,
            &[line("m1", "r1", 5, 172, ""), line("m1", "r1", 5, 3, "")],
        );
        assert_eq!(t.output, 3);
    }

    #[test]
    fn interleaved_messages_and_tool_results_keep_each_message_once() {
        let result = r#"{"type":"user","sessionId":"s","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"ok"}]}}"#;
        let t = sum(
            Agent::Claude,
            &[
                line("m1", "r1", 1, 1, ""),
                result.to_string(),
                line("m2", "r2", 2, 2, ""),
                line("m1", "r1", 1, 9, ""),
                line("m2", "r2", 2, 2, ""),
            ],
        );
        assert_eq!((t.input, t.output, t.cache_read), (3, 11, 200));
    }

    #[test]
    fn the_same_message_id_under_another_request_is_another_call() {
        let t = sum(
            Agent::Claude,
            &[line("m1", "r1", 1, 1, ""), line("m1", "r2", 1, 1, "")],
        );
        assert_eq!(t.input, 2);
    }

    #[test]
    fn inline_sidechain_lines_count_and_progress_echoes_and_task_summaries_do_not() {
        let side = line("m9", "r9", 7, 7, r#","isSidechain":true,"uuid":"u1""#);
        let echo = r#"{"type":"progress","sessionId":"s","parentToolUseID":"t1","data":{"type":"agent_progress","agentId":"a1","message":{"type":"assistant","message":{"id":"m9","usage":{"input_tokens":7,"output_tokens":7}}}}}"#;
        let summary = r#"{"type":"user","sessionId":"s","toolUseResult":{"status":"completed","agentId":"a1","totalTokens":999,"usage":{"input_tokens":900,"output_tokens":99}},"message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"done"}]}}"#;
        let t = sum(
            Agent::Claude,
            &[
                line("m1", "r1", 1, 1, ""),
                side,
                echo.to_string(),
                summary.to_string(),
            ],
        );
        assert_eq!((t.input, t.output), (8, 8));
    }

    #[test]
    fn calls_shared_across_files_count_a_copied_message_once() {
        let mut calls = Calls::default();
        let mut t = Tokens::default();
        for _ in 0..2 {
            let mut m = Meter::new(Agent::Claude);
            for e in claude(&[&line("m1", "r1", 4, 4, "")]) {
                if let Some(c) = m.observe(&e, &mut calls) {
                    t.apply(&c.delta);
                }
            }
        }
        assert_eq!(t.input, 4);
    }

    fn codex_total(input: u64, cached: u64, output: u64) -> String {
        format!(
            r#"{{"timestamp":"2026-01-01T00:00:00Z","type":"event_msg","payload":{{"type":"token_count","info":{{"total_token_usage":{{"input_tokens":{input},"cached_input_tokens":{cached},"output_tokens":{output}}}}}}}}}"#
        )
    }

    #[test]
    fn codex_totals_become_deltas_and_a_total_that_goes_down_is_a_new_baseline() {
        let t = sum(
            Agent::Codex,
            &[
                codex_total(100, 40, 10),
                codex_total(100, 40, 10),
                codex_total(250, 140, 30),
                // A reset: counts from zero, never negative.
                codex_total(50, 0, 5),
                codex_total(80, 20, 9),
            ],
        );
        // input = uncached: (250-140) + 80-20; cached 140 + 20; output 30 + 9.
        assert_eq!(
            t,
            Tokens {
                input: 110 + 60,
                output: 39,
                cache_read: 160,
                cache_creation: 0
            }
        );
    }

    #[test]
    fn a_resumed_meter_does_not_count_a_straddling_message_or_total_twice() {
        let first = claude(&[&line("m1", "r1", 5, 3, "")]);
        let mut calls = Calls::default();
        let mut m = Meter::new(Agent::Claude);
        let mut t = Tokens::default();
        for e in &first {
            if let Some(c) = m.observe(e, &mut calls) {
                t.apply(&c.delta);
            }
        }
        let carry = m.carry(&calls);
        let (mut m, mut calls) = Meter::resume(Agent::Claude, Some(&carry));
        for e in claude(&[&line("m1", "r1", 5, 90, ""), &line("m2", "r2", 1, 1, "")]) {
            if let Some(c) = m.observe(&e, &mut calls) {
                t.apply(&c.delta);
            }
        }
        assert_eq!((t.input, t.output), (6, 91));

        let lines = [codex_total(100, 0, 10)];
        let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
        let mut calls = Calls::default();
        let mut m = Meter::new(Agent::Codex);
        for e in decode(Agent::Codex, &refs) {
            m.observe(&e, &mut calls);
        }
        let (mut m, mut calls) = Meter::resume(Agent::Codex, Some(&m.carry(&calls)));
        let more = [codex_total(130, 0, 12)];
        let refs: Vec<&str> = more.iter().map(String::as_str).collect();
        let got: Vec<Counted> = decode(Agent::Codex, &refs)
            .iter()
            .filter_map(|e| m.observe(e, &mut calls))
            .collect();
        assert_eq!(got.len(), 1);
        assert_eq!((got[0].delta.input, got[0].delta.output), (30, 2));
    }

    #[test]
    fn synthetic_error_messages_cost_nothing() {
        let l = r#"{"type":"assistant","sessionId":"s","message":{"id":"m1","model":"<synthetic>","content":[{"type":"text","text":"API Error"}],"usage":{"input_tokens":0,"output_tokens":0}}}"#;
        assert_eq!(total(Agent::Claude, &claude(&[l])), Tokens::default());
    }
}
