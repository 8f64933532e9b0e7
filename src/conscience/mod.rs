//! The conscience: maxims that watch the agents' prose, bounded judges, and reminders
//! delivered as ordinary steering.
//!
//! A finished assistant message of a lane's main conversation is heard
//! ([`Conscience::hits`], prose only, see [`matcher`]); each maxim in scope whose
//! trigger it contains is *fired* (logged with the sentence), unless it already
//! published in the lane's current compaction epoch (*suppressed*). A maxim without
//! judges publishes at once; one with judges publishes only when both judges say YES
//! ([`judge`]). Publishing is [`Store::conscience_publish`]: a steering item for the
//! lane, `[MAXIM name] message`, quoting the sentence, retired by ACK or NACK like any
//! other. A compaction starts a new epoch, in which every maxim is eligible again.
//!
//! In the fleet a [`watch::Watcher`] does this beside the lane, on its own thread
//! and its own store connection, so neither matching nor judging ever delays the
//! lane's loop; `spice conscience scan` does it in the foreground
//! ([`hear_now`]). Every step is in the store's log (`spice conscience log`).

pub mod judge;
pub mod matcher;
pub mod maxim;
pub mod propose;
pub mod scan;
pub mod watch;

use crate::error::Result;
use crate::store::{Authority, NewStep, DEFAULT_TTL};
use crate::transcript::acks::Said;
use judge::{Answer, Verdict};
use matcher::Matcher;
pub use maxim::{Book, Maxim, Scope};
use serde_json::json;
use std::collections::HashSet;
use std::path::{Path, PathBuf};

/// The maxims in force, compiled.
pub struct Conscience {
    pub book: Book,
    matcher: Matcher,
}

/// A trigger heard: the maxim's index in the book and the sentence that holds it.
#[derive(Debug, Clone, PartialEq)]
pub struct Heard {
    pub maxim: usize,
    pub sentence: String,
}

/// Where a message was read: the transcript and its line.
#[derive(Debug, Clone, PartialEq)]
pub struct Source {
    pub transcript: String,
    pub line: u64,
}

/// A fired maxim waiting for its judges.
#[derive(Debug, Clone)]
pub struct Check {
    pub maxim: usize,
    pub epoch: i64,
    pub sentence: String,
    pub source: Source,
}

impl Conscience {
    pub fn new(book: Book) -> Conscience {
        let lists: Vec<(&[String], &[String])> = book
            .maxims
            .iter()
            .map(|m| (m.words.as_slice(), m.phrases.as_slice()))
            .collect();
        let matcher = Matcher::new(&lists);
        Conscience { book, matcher }
    }

    pub fn maxim(&self, i: usize) -> &Maxim {
        &self.book.maxims[i]
    }

    /// The maxims in `scope` that `text` triggers, each with its sentence.
    pub fn hits(&self, scope: &Scope, text: &str) -> Vec<Heard> {
        self.matcher
            .find(text)
            .into_iter()
            .filter(|h| self.book.maxims[h.maxim].applies(scope))
            .map(|h| Heard {
                maxim: h.maxim,
                sentence: matcher::sentence(text, h.at),
            })
            .collect()
    }
}

/// The text of a reminder.
pub fn reminder_text(m: &Maxim, sentence: &str) -> String {
    format!("[MAXIM {}] {} You wrote: \"{sentence}\"", m.name, m.message)
}

fn step<'a>(
    lane: &'a str,
    maxim: &'a str,
    epoch: i64,
    step: &'a str,
    detail: serde_json::Value,
) -> NewStep<'a> {
    NewStep {
        lane,
        maxim,
        epoch,
        step,
        detail,
    }
}

fn where_(sentence: &str, source: &Source) -> serde_json::Value {
    json!({ "sentence": sentence, "transcript": source.transcript, "line": source.line })
}

/// Considers one trigger heard in `epoch`: suppressed (published this epoch already,
/// or being judged: `judging` holds those maxims), else fired and published at once,
/// or returned as a check for the judges.
pub fn consider(
    store: &mut dyn Authority,
    c: &Conscience,
    lane: &str,
    epoch: i64,
    heard: Heard,
    source: Source,
    judging: &HashSet<usize>,
) -> Result<Option<Check>> {
    let m = c.maxim(heard.maxim);
    let mut detail = where_(&heard.sentence, &source);
    if let Some(key) = store.conscience_fired(lane, &m.name, epoch)? {
        detail["why"] = json!(format!("published this epoch already ({key})"));
        store.conscience_note(&step(lane, &m.name, epoch, "suppressed", detail))?;
        return Ok(None);
    }
    if judging.contains(&heard.maxim) {
        detail["why"] = json!("being judged");
        store.conscience_note(&step(lane, &m.name, epoch, "suppressed", detail))?;
        return Ok(None);
    }
    store.conscience_note(&step(lane, &m.name, epoch, "fired", detail.clone()))?;
    let check = Check {
        maxim: heard.maxim,
        epoch,
        sentence: heard.sentence,
        source,
    };
    if m.judges && c.book.judge.is_some() {
        return Ok(Some(check));
    }
    publish(store, c, lane, &check)?;
    Ok(None)
}

fn publish(store: &mut dyn Authority, c: &Conscience, lane: &str, check: &Check) -> Result<()> {
    let m = c.maxim(check.maxim);
    let detail = where_(&check.sentence, &check.source);
    let text = reminder_text(m, &check.sentence);
    if store
        .conscience_publish(
            &step(lane, &m.name, check.epoch, "published", detail.clone()),
            &text,
            DEFAULT_TTL,
        )?
        .is_none()
    {
        let mut detail = detail;
        detail["why"] = json!("published this epoch already");
        store.conscience_note(&step(lane, &m.name, check.epoch, "suppressed", detail))?;
    }
    Ok(())
}

/// Asks the judges about a check (blocking: up to their timeout times attempts).
pub fn ask(c: &Conscience, check: &Check, cwd: PathBuf) -> (Verdict, Vec<Answer>) {
    let m = c.maxim(check.maxim);
    let cfg = c.book.judge.as_ref().expect("only judged checks are asked");
    judge::judge(
        cfg,
        cwd,
        &judge::Question {
            maxim: &m.name,
            message: &m.message,
            statement: &check.sentence,
        },
    )
}

/// Records the judges' answers and acts on their verdict.
pub fn conclude(
    store: &mut dyn Authority,
    c: &Conscience,
    lane: &str,
    check: &Check,
    verdict: Verdict,
    answers: &[Answer],
) -> Result<()> {
    let name = &c.maxim(check.maxim).name;
    for a in answers {
        let detail =
            json!({ "judge": a.judge, "attempt": a.attempt, "raw": a.raw, "reading": a.reading });
        store.conscience_note(&step(lane, name, check.epoch, "judge", detail))?;
    }
    let outcome = match verdict {
        Verdict::Confirmed => return publish(store, c, lane, check),
        Verdict::Dismissed => "dismissed",
        Verdict::Disputed => "disputed",
        Verdict::Abandoned => "abandoned",
        Verdict::Unanswered => "unanswered",
    };
    store.conscience_note(&step(
        lane,
        name,
        check.epoch,
        outcome,
        where_(&check.sentence, &check.source),
    ))
}

/// Hears the assistant messages of one scan of `transcript` in the foreground (the
/// judges asked in turn, in `cwd`): the compactions before each message move the
/// lane's epoch first, and `compactions` (the scan's total) is counted by the end.
pub fn hear_now(
    store: &mut dyn Authority,
    c: &Conscience,
    scope: &Scope,
    transcript: &str,
    said: &[Said],
    compactions: u64,
    cwd: &Path,
) -> Result<()> {
    let mut counted = 0;
    let mut epoch = store.conscience_epoch(&scope.lane)?;
    for s in said {
        if s.compactions_before > counted {
            epoch = store.conscience_compacted(&scope.lane, s.compactions_before - counted)?;
            counted = s.compactions_before;
        }
        for heard in c.hits(scope, &s.text) {
            let source = Source {
                transcript: transcript.to_string(),
                line: s.line,
            };
            if let Some(check) =
                consider(store, c, &scope.lane, epoch, heard, source, &HashSet::new())?
            {
                let (verdict, answers) = ask(c, &check, cwd.to_path_buf());
                conclude(store, c, &scope.lane, &check, verdict, &answers)?;
            }
        }
    }
    if compactions > counted {
        store.conscience_compacted(&scope.lane, compactions - counted)?;
    }
    Ok(())
}
