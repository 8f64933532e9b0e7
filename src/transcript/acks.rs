//! Retiring steering items from a transcript: the agent's own replies are where
//! `ACK <key>: …` is written, so the transcript is read from its stored checkpoint,
//! every directive in the main conversation's assistant text is applied with the
//! transcript line it came from, and the checkpoint moves in the same transaction.
//!
//! A transcript speaks for its writer only: its directives retire the items addressed
//! to the session, lane and worktree that wrote it (the scanner's `writer`), and an
//! ACK of another lane's key is recorded as `not-addressed` and changes nothing.
//!
//! The scan also meters the tokens the transcript records ([`super::usage`]), and
//! adds them to the writer's session in the checkpoint's transaction.

use super::event::EventKind;
use super::follow::Follower;
use super::usage::{Calls, Meter};
use crate::error::{Error, Result};
use crate::steer::grammar;
use crate::store::{Authority, Delta, Metered, Outcome, Target};
use std::path::Path;

/// What one scan did.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ScanReport {
    pub path: String,
    pub outcomes: Vec<Outcome>,
    /// The lines read in this scan, `(first, last]`.
    pub from_line: u64,
    pub to_line: u64,
    /// The file no longer matched its checkpoint and was read from the start.
    pub rewritten: bool,
    /// Events of the main conversation read in this scan.
    pub events: u64,
    /// Whether the agent's turn had ended at the last of them (`None`: no event in
    /// this scan says either way).
    pub turn_ended: Option<bool>,
    /// Whether the last of them that moves a turn on was the agent's text (`None`:
    /// none in this scan). An agent's turn that ends in text, with nothing after it,
    /// has ended even when the transcript never says so (Claude Code writes its
    /// reply's `stop_reason` as null at times, and then no turn end at all).
    pub text_last: Option<bool>,
    /// Compaction boundaries read in this scan.
    pub compactions: u64,
    /// The tokens the lines read in this scan added (sub-agents' inline lines too).
    pub usage: Delta,
    /// The session id the transcript names for itself, when read in this scan.
    pub session_id: Option<String>,
    /// Whom its directives count for: the items addressed to these targets.
    pub counts_for: Vec<Target>,
    /// The transcript lines holding a keyless directive (`ACK:` naming no key): a
    /// failure of its own, matched to no item, reported so the writer learns of it.
    pub keyless: Vec<u64>,
    /// The main conversation's assistant messages read in this scan, in order: what
    /// the conscience hears.
    #[serde(skip)]
    pub said: Vec<Said>,
    /// Where the turn stands after this scan (open calls, the last text), from every
    /// scan of this scanner so far.
    #[serde(skip)]
    pub turn: super::turn::Turn,
}

/// One assistant message of the main conversation.
#[derive(Debug, Clone, PartialEq)]
pub struct Said {
    /// The transcript line it was read from.
    pub line: u64,
    pub text: String,
    /// The compactions read before it in the same scan.
    pub compactions_before: u64,
}

/// Reads `path` from where the store last left it and applies the ACK/NACK
/// directives found in assistant text to the items addressed to `writer` (the
/// session, lane and worktree that wrote it). Subagents' text is not the agent
/// answering.
pub fn scan(store: &mut dyn Authority, path: &Path, writer: Vec<Target>) -> Result<ScanReport> {
    Scanner::new(path, writer).scan(store)
}

/// A transcript being scanned repeatedly (the supervisor's lane loop): the follower
/// and its position are kept between scans, so each scan reads only new bytes instead
/// of re-detecting the format and re-hashing the whole prefix.
pub struct Scanner {
    path: std::path::PathBuf,
    writer: Vec<Target>,
    follower: Option<(String, Follower)>,
    turn: super::turn::Turn,
    /// When the last turn end was dated: a record dated before it that comes after it
    /// in the file (Claude Code writes some of a turn's records late, its first prompt
    /// among them) belongs to that turn and does not start another.
    ended_at: Option<crate::clock::Micros>,
    meter: Option<(Meter, Calls)>,
    /// Whether every line is the agent's text (a terminal recording): then quiet
    /// after text is no turn's end, only a prompt is.
    all_text: bool,
}

impl Scanner {
    /// A scanner of `path`, written by `writer` (whose items its ACKs retire).
    pub fn new(path: &Path, writer: Vec<Target>) -> Scanner {
        Scanner {
            path: path.to_path_buf(),
            writer,
            follower: None,
            turn: super::turn::Turn::default(),
            ended_at: None,
            meter: None,
            all_text: false,
        }
    }

    /// Reads what was appended since the last scan and records it. On an error (the
    /// store refused the write, the file could not be read) the lines read but not
    /// recorded are not lost: the next scan reads them again from the stored
    /// checkpoint.
    pub fn scan(&mut self, store: &mut dyn Authority) -> Result<ScanReport> {
        let (turn, ended_at) = (self.turn.clone(), self.ended_at);
        let scanned = self.scan_from_follower(store);
        if scanned.is_err() {
            self.follower = None;
            (self.turn, self.ended_at) = (turn, ended_at);
        }
        scanned
    }

    fn scan_from_follower(&mut self, store: &mut dyn Authority) -> Result<ScanReport> {
        if self.follower.is_none() {
            let canonical = std::fs::canonicalize(&self.path)
                .map_err(|e| Error::input(format!("{}: {e}", self.path.display())))?;
            let key = canonical.display().to_string();
            let agent = super::detect_file(&canonical)?;
            self.all_text = agent == super::event::Agent::Terminal;
            let from = store.transcript_checkpoint(&key)?;
            let carry = store.usage_carry(&key)?;
            self.meter = Some(Meter::resume(agent, carry.as_deref()));
            self.follower = Some((
                key,
                Follower::new(&canonical, super::decoder_fn(agent), from),
            ));
        }
        let (key, follower) = self.follower.as_mut().expect("set above");
        let (meter, calls) = self.meter.as_mut().expect("set with the follower");
        let mut report = ScanReport {
            path: key.clone(),
            outcomes: Vec::new(),
            from_line: follower.checkpoint().line,
            to_line: follower.checkpoint().line,
            rewritten: false,
            events: 0,
            turn_ended: None,
            text_last: None,
            compactions: 0,
            usage: Delta::default(),
            session_id: None,
            counts_for: self.writer.clone(),
            keyless: Vec::new(),
            said: Vec::new(),
            turn: super::turn::Turn::default(),
        };
        loop {
            let mut events = Vec::new();
            let restart = follower
                .poll(&mut events)
                .map_err(|e| Error::input(format!("{key}: {e}")))?;
            if let Some(kept) = restart.kept_lines() {
                report.rewritten = true;
                report.from_line = kept;
                // What was open before the rewrite is read again or gone.
                self.turn = super::turn::Turn::default();
                self.ended_at = None;
            }
            let mut directives = Vec::new();
            let mut metered = Delta::default();
            for e in &events {
                if let Some(c) = meter.observe(e, calls) {
                    metered += c.delta;
                }
            }
            report.usage += metered;
            for e in events.iter().filter(|e| e.subagent.is_none()) {
                report.events += 1;
                // A record dated before the last turn end but written after it belongs
                // to that turn: a late prompt must not clear the reply it was answered by.
                let late =
                    matches!((e.timestamp, self.ended_at), (Some(at), Some(end)) if at < end);
                if !late {
                    self.turn.observe(e);
                }
                match &e.kind {
                    EventKind::AssistantText { text, .. } => {
                        for mut d in grammar::parse(text) {
                            if d.problem.is_some() {
                                report.keyless.push(e.line);
                            } else {
                                d.line = e.line as usize;
                                directives.push(d);
                            }
                        }
                        report.said.push(Said {
                            line: e.line,
                            text: text.clone(),
                            compactions_before: report.compactions,
                        });
                    }
                    EventKind::SessionMeta(m) if m.session_id.is_some() => {
                        report.session_id.clone_from(&m.session_id);
                    }
                    EventKind::Compaction { .. } => report.compactions += 1,
                    _ => {}
                }
                // Usage and identity lines, injected context (reminders, hook output),
                // compactions and subagent links can trail a turn's end without
                // restarting it: only the agent's and the user's own events do.
                let neutral = late
                    || matches!(
                        e.kind,
                        EventKind::TokenUsage { .. }
                            | EventKind::SessionMeta(_)
                            | EventKind::InjectedContext { .. }
                            | EventKind::Compaction { .. }
                            | EventKind::CompactionSummary { .. }
                            | EventKind::SubagentLink { .. }
                    );
                if matches!(e.kind, EventKind::TurnEnd) {
                    self.ended_at = e.timestamp.or(self.ended_at);
                }
                report.turn_ended = match &e.kind {
                    EventKind::TurnEnd => Some(true),
                    _ if neutral => report.turn_ended,
                    _ => Some(false),
                };
                if !neutral && !self.all_text && !matches!(e.kind, EventKind::TurnEnd) {
                    report.text_last = Some(matches!(e.kind, EventKind::AssistantText { .. }));
                }
            }
            let at = follower.checkpoint();
            if !directives.is_empty() || at.line != report.to_line || report.rewritten {
                let metered = Metered {
                    delta: metered,
                    carry: Some(meter.carry(calls)),
                };
                report.outcomes.extend(store.apply_transcript_metered(
                    key,
                    at,
                    &directives,
                    &self.writer,
                    &metered,
                )?);
            }
            report.to_line = at.line;
            if follower.caught_up() {
                report.turn = self.turn.clone();
                return Ok(report);
            }
        }
    }
}
