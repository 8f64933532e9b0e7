//! An agent's `ACK`/`NACK` acting on the steering item it names: the rule both
//! backends share, written once over the steps of one open transaction ([`AckTx`]).
//! Which effect a directive has ([`judge`]), what it writes, and how a transcript's
//! checkpoint moves with what was read from it live only here.
//!
//! Invariants (the inbox's, [`super::inbox`]): a directive is recorded once per
//! (key, polarity, source, line), so re-reading a source changes nothing; only an `ACK`
//! or a `NACK` with a reason retires a pending item, and only one addressed within the
//! directive's [`Scope`]; a bare `NACK` leaves the item pending with its problem
//! named; items past their TTL are expired before any directive is judged, in the same
//! transaction; a transcript's checkpoint moves in the transaction that applied what
//! it read, so a crash keeps both or neither.

use super::inbox::{Effect, ItemState, Outcome, Scope};
use super::target::Target;
use super::vocab::{Checkpoint, Directive, Polarity};
use crate::clock::Micros;
use crate::error::Result;

/// A directive as recorded, with its effect.
pub(crate) struct NewAck<'a> {
    pub key: &'a str,
    pub polarity: &'static str,
    pub body: &'a str,
    pub source: &'a str,
    pub line: i64,
    pub effect: Effect,
}

/// The steps of one open transaction of a backend that the acknowledgment rule is
/// made of.
pub(crate) trait AckTx {
    /// Turns pending items past their TTL into expired ones.
    fn sweep(&mut self, now: Micros) -> Result<()>;
    /// The item with `key` (its stored state, deadline and target), if any, locked
    /// until the transaction ends where the backend locks rows.
    fn lock_item(&mut self, key: &str) -> Result<Option<(String, Micros, Target)>>;
    /// Whether this directive (key, polarity, source, line) was recorded before.
    fn seen(&mut self, key: &str, polarity: &str, source: &str, line: i64) -> Result<bool>;
    /// Closes a pending item as `state` (`acked` or `refused`), clearing its problem.
    fn retire(&mut self, key: &str, state: &str, now: Micros) -> Result<()>;
    /// Names the problem that leaves an item pending.
    fn set_problem(&mut self, key: &str, problem: &str) -> Result<()>;
    /// Records a directive; `false` when the same one was recorded meanwhile.
    fn record(&mut self, ack: &NewAck<'_>, now: Micros) -> Result<bool>;
    /// Moves the checkpoint of the transcript at `path`.
    fn move_checkpoint(&mut self, path: &str, cp: Checkpoint, now: Micros) -> Result<()>;
}

/// Applies `directives` read in `source` to the items within `scope`: retires what
/// they acknowledge and records every one. Keyless directives are the caller's to
/// report.
pub(crate) fn apply(
    t: &mut impl AckTx,
    directives: &[Directive],
    source: &str,
    scope: Scope<'_>,
    now: Micros,
) -> Result<Vec<Outcome>> {
    t.sweep(now)?;
    let mut out = Vec::new();
    for d in directives {
        for key in &d.keys {
            let effect = apply_one(t, key, d, (source, scope), now)?;
            out.push(Outcome {
                key: key.clone(),
                polarity: d.polarity,
                line: d.line,
                effect,
            });
        }
    }
    Ok(out)
}

/// Applies the directives a transcript holds up to `cp` to the items addressed to
/// `writer` (the session, lane and worktree that wrote it), and moves its checkpoint
/// there.
pub(crate) fn apply_transcript(
    t: &mut impl AckTx,
    (path, cp): (&str, Checkpoint),
    directives: &[Directive],
    writer: &[Target],
    now: Micros,
) -> Result<Vec<Outcome>> {
    let out = apply(t, directives, path, Scope::Within(writer), now)?;
    t.move_checkpoint(path, cp, now)?;
    Ok(out)
}

fn apply_one(
    t: &mut impl AckTx,
    key: &str,
    d: &Directive,
    (source, scope): (&str, Scope<'_>),
    now: Micros,
) -> Result<Effect> {
    let body = d.body.as_deref().unwrap_or_default();
    let (polarity, line) = (polarity_str(d.polarity), d.line as i64);
    // The item first: where rows are locked, a second reader of the same line waits
    // here, then finds it recorded.
    let item = t.lock_item(key)?.map(|(stored, expires, target)| {
        (super::inbox::derive_state(&stored, expires, now), target)
    });
    if t.seen(key, polarity, source, line)? {
        return Ok(Effect::Duplicate);
    }
    let effect = judge(item.as_ref().map(|(s, t)| (*s, t)), scope, d.polarity, body);
    match effect {
        Effect::Acked => t.retire(key, "acked", now)?,
        Effect::Refused => t.retire(key, "refused", now)?,
        Effect::NoReason => t.set_problem(key, &no_reason(source, d.line))?,
        _ => {}
    }
    let ack = NewAck {
        key,
        polarity,
        body,
        source,
        line,
        effect,
    };
    Ok(if t.record(&ack, now)? {
        effect
    } else {
        Effect::Duplicate
    })
}

/// What a directive not applied before does to the item it names (`None`: no item
/// has the key), within `scope`.
fn judge(
    item: Option<(ItemState, &Target)>,
    scope: Scope<'_>,
    polarity: Polarity,
    body: &str,
) -> Effect {
    match item {
        None => Effect::UnknownKey,
        Some((_, target)) if !scope.admits(target) => Effect::NotAddressed,
        Some((state, _)) if state != ItemState::Pending => Effect::AlreadyClosed,
        Some(_) => match polarity {
            Polarity::Ack => Effect::Acked,
            Polarity::Nack if body.trim().is_empty() => Effect::NoReason,
            Polarity::Nack => Effect::Refused,
        },
    }
}

/// The problem a bare NACK leaves on its pending item.
fn no_reason(source: &str, line: usize) -> String {
    format!("NACK without a reason at {source}:{line}; still pending")
}

/// A polarity as stored.
fn polarity_str(p: Polarity) -> &'static str {
    match p {
        Polarity::Ack => "ack",
        Polarity::Nack => "nack",
    }
}
