//! Steering items and acknowledgments: the inbox.
//!
//! Invariants:
//! - An item is pending until its key is acknowledged in the agent's prose: `ACK` makes
//!   it acked, `NACK` with a reason makes it refused, a `NACK` without a reason records
//!   the problem and leaves it pending. Pending items past their TTL become expired,
//!   kept distinct from acked and refused.
//! - Showing an item never changes its state; it only counts (`shown`, `last_shown`).
//! - Every directive found is kept as an acknowledgment record (key, polarity, body,
//!   source and line), once: re-reading the same source line records nothing new, so a
//!   transcript can be re-scanned after a restart without double effects.
//! - A directive acts only within its [`Scope`]: an agent's transcript retires the items
//!   addressed to the lane, session or worktree that wrote it, never another lane's
//!   (recorded as `not-addressed`, the item unchanged).
//! - An item's `problem` describes its pending state: retiring it clears the problem
//!   (the NACK that raised it stays in the acknowledgment records).

use super::acks::{self, AckTx};
use super::sqlite_steps::SqlTx;
use super::target::{Target, TargetKind};
use super::vocab::{Checkpoint, Directive, Polarity};
use super::Store;
use crate::clock::Micros;
use crate::error::{Error, Result};
use crate::stamp;
use rusqlite::{params, OptionalExtension, Transaction};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// How long an item waits for an answer unless told otherwise.
pub const DEFAULT_TTL: Duration = Duration::from_secs(24 * 3600);

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ItemState {
    Pending,
    Acked,
    Refused,
    Expired,
}

impl ItemState {
    pub fn as_str(self) -> &'static str {
        match self {
            ItemState::Pending => "pending",
            ItemState::Acked => "acked",
            ItemState::Refused => "refused",
            ItemState::Expired => "expired",
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Item {
    pub key: String,
    pub target: Target,
    pub text: String,
    pub state: ItemState,
    pub created: Micros,
    pub expires: Micros,
    pub shown: i64,
    pub last_shown: Option<Micros>,
    pub closed_at: Option<Micros>,
    /// The last problem recorded for it (a NACK without a reason).
    pub problem: Option<String>,
}

/// Whose items a source's directives may act on.
#[derive(Debug, Clone, Copy)]
pub enum Scope<'a> {
    /// Any item: prose the operator vouches for (`spice ack apply` without `--target`).
    Any,
    /// Only items addressed to one of these targets: the session, lane and worktree
    /// that wrote the text (see [`super::agent_targets`]).
    Within(&'a [Target]),
}

impl Scope<'_> {
    pub(super) fn admits(&self, target: &Target) -> bool {
        match self {
            Scope::Any => true,
            Scope::Within(targets) => targets.contains(target),
        }
    }
}

/// What one directive did to one key.
#[derive(Debug, Clone, Serialize)]
pub struct Outcome {
    pub key: String,
    pub polarity: Polarity,
    pub line: usize,
    pub effect: Effect,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Effect {
    /// The item is now acked.
    Acked,
    /// The item is now refused.
    Refused,
    /// A NACK without a reason: recorded as a problem, the item stays pending.
    NoReason,
    /// The item was already acked, refused or expired; the record is kept.
    AlreadyClosed,
    /// No item has this key; the record is kept.
    UnknownKey,
    /// The item is addressed to a lane, session or worktree outside the directive's
    /// scope (another agent's item); the record is kept, the item unchanged.
    NotAddressed,
    /// This source line was applied before; nothing new happened.
    Duplicate,
}

impl Effect {
    pub(super) fn as_str(self) -> &'static str {
        match self {
            Effect::Acked => "acked",
            Effect::Refused => "refused",
            Effect::NoReason => "no-reason",
            Effect::AlreadyClosed => "already-closed",
            Effect::UnknownKey => "unknown-key",
            Effect::NotAddressed => "not-addressed",
            Effect::Duplicate => "duplicate",
        }
    }
}

/// One acknowledgment as recorded.
#[derive(Debug, Clone, Serialize)]
pub struct AckRecord {
    pub key: String,
    pub polarity: String,
    pub body: String,
    pub source: String,
    pub line: i64,
    pub at: Micros,
    pub effect: String,
}

/// An item's columns, in the order both backends read them.
pub(super) const ITEM_COLUMNS: &str =
    "key, target_kind, target, text, state, created, expires, shown, last_shown, closed_at, problem";

/// An item's state as read at `now`: a read does not write, so a pending item past
/// its TTL reads as expired until a write records it.
pub(super) fn derive_state(stored: &str, expires: Micros, now: Micros) -> ItemState {
    match stored {
        "pending" if expires <= now => ItemState::Expired,
        "pending" => ItemState::Pending,
        "acked" => ItemState::Acked,
        "refused" => ItemState::Refused,
        _ => ItemState::Expired,
    }
}

/// Refuses a steering item without text or target (both backends).
pub(super) fn check_new(target: &Target, text: &str) -> Result<()> {
    if text.trim().is_empty() {
        return Err(Error::input("a steering item needs some text"));
    }
    if target.name.is_empty() {
        return Err(Error::input("a steering item needs a target"));
    }
    Ok(())
}

/// The refusal of a lookup by a key no item has (both backends).
pub(super) fn unknown_key(key: &str) -> Error {
    Error::input(format!("unknown steering key '{key}'"))
}

fn row_to_item(r: &rusqlite::Row<'_>, now: Micros) -> rusqlite::Result<Item> {
    let state: String = r.get(4)?;
    let expires: Micros = r.get(6)?;
    let state = derive_state(&state, expires, now);
    let kind: String = r.get(1)?;
    Ok(Item {
        key: r.get(0)?,
        target: Target {
            kind: TargetKind::parse(&kind),
            name: r.get(2)?,
        },
        text: r.get(3)?,
        state,
        created: r.get(5)?,
        expires,
        shown: r.get(7)?,
        last_shown: r.get(8)?,
        closed_at: r.get(9)?,
        // Rows retired before retiring cleared the problem may still hold one.
        problem: match state {
            ItemState::Acked | ItemState::Refused => None,
            _ => r.get(10)?,
        },
    })
}

/// Creates a pending item (already checked by [`check_new`]) inside the caller's
/// write; its key. A reminder's item and its record are one transaction this way.
pub(super) fn create(
    tx: &Transaction<'_>,
    now: Micros,
    target: &Target,
    text: &str,
    ttl: Duration,
) -> Result<String> {
    SqlTx { tx, now }.sweep(now)?;
    let key = fresh_key(tx, now)?;
    tx.execute(
        "INSERT INTO steering (key, target_kind, target, text, created, expires)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        params![
            key,
            target.kind.as_str(),
            target.name,
            text,
            now,
            now.saturating_add(crate::when::micros(ttl))
        ],
    )?;
    Ok(key)
}

fn fresh_key(tx: &Transaction<'_>, now: Micros) -> Result<String> {
    let base = stamp::MINTER.mint(now.max(0) as u64);
    let mut exists = tx.prepare_cached("SELECT 1 FROM steering WHERE key = ?1")?;
    if !exists.exists([&base])? {
        return Ok(base);
    }
    (1..)
        .map(|n| stamp::with_suffix(&base, n))
        .find(|k| !exists.exists([k]).unwrap_or(true))
        .ok_or_else(|| Error::Other("no free steering key".into()))
}

impl Store {
    /// Creates a pending item for `target`.
    pub fn steer(&mut self, target: &Target, text: &str, ttl: Duration) -> Result<Item> {
        check_new(target, text)?;
        let key = self.write("creating a steering item", |tx, now| {
            create(tx, now, target, text, ttl)
        })?;
        self.item(&key)
    }

    /// One item by its key.
    pub fn item(&mut self, key: &str) -> Result<Item> {
        self.read("reading a steering item", |tx, now| {
            tx.query_row(
                &format!("SELECT {ITEM_COLUMNS} FROM steering WHERE key = ?1"),
                [key],
                |r| row_to_item(r, now),
            )
            .optional()?
            .ok_or_else(|| unknown_key(key))
        })
    }

    /// Items for any of `targets` (all targets when empty), oldest first: only pending
    /// ones unless `all`.
    pub fn inbox(&mut self, targets: &[Target], all: bool) -> Result<Vec<Item>> {
        self.read("reading the inbox", |tx, now| {
            let mut stmt = tx.prepare_cached(&format!(
                "SELECT {ITEM_COLUMNS} FROM steering
                 WHERE (?1 OR (state = 'pending' AND expires > ?2)) ORDER BY key"
            ))?;
            let rows = stmt.query_map(params![all, now], |r| row_to_item(r, now))?;
            let items = rows.collect::<std::result::Result<Vec<_>, _>>()?;
            Ok(items
                .into_iter()
                .filter(|i| targets.is_empty() || targets.contains(&i.target))
                .collect())
        })
    }

    /// Counts one more showing of each item (never changes its state).
    pub fn mark_shown(&mut self, keys: &[String]) -> Result<()> {
        if keys.is_empty() {
            return Ok(());
        }
        self.write("recording shown items", |tx, now| {
            let mut stmt = tx.prepare_cached(
                "UPDATE steering SET shown = shown + 1, last_shown = ?2 WHERE key = ?1",
            )?;
            for k in keys {
                stmt.execute(params![k, now])?;
            }
            Ok(())
        })
    }

    /// Applies parsed directives found in `source` to any item: retires what they
    /// acknowledge and records every one. Keyless directives are the caller's to report.
    pub fn apply_acks(&mut self, directives: &[Directive], source: &str) -> Result<Vec<Outcome>> {
        self.apply_acks_in(directives, source, Scope::Any)
    }

    /// [`Store::apply_acks`] for the items within `scope` only.
    pub fn apply_acks_in(
        &mut self,
        directives: &[Directive],
        source: &str,
        scope: Scope<'_>,
    ) -> Result<Vec<Outcome>> {
        self.write("applying acknowledgments", |tx, now| {
            acks::apply(&mut SqlTx { tx, now }, directives, source, scope, now)
        })
    }

    /// Where reading the transcript at `path` got to, if it was read before.
    pub fn transcript_checkpoint(&mut self, path: &str) -> Result<Option<Checkpoint>> {
        self.read("reading a transcript checkpoint", |tx, _| {
            Ok(tx
                .prepare_cached(
                    "SELECT offset, line, hash FROM transcript_checkpoints WHERE path = ?1",
                )?
                .query_row([path], |r| {
                    Ok(Checkpoint {
                        offset: r.get::<_, i64>(0)? as u64,
                        line: r.get::<_, i64>(1)? as u64,
                        // Stored as SQLite's signed integer; the bits are the hash.
                        hash: r.get::<_, i64>(2)? as u64,
                    })
                })
                .optional()?)
        })
    }

    /// Applies the directives found in a transcript up to `at` to the items addressed
    /// to `writer` (the session, lane and worktree that wrote it) and moves its
    /// checkpoint there, in one transaction: a crash either keeps both or neither, so
    /// a restart reads every line exactly once.
    pub fn apply_transcript(
        &mut self,
        path: &str,
        at: Checkpoint,
        directives: &[Directive],
        writer: &[Target],
    ) -> Result<Vec<Outcome>> {
        self.write("applying a transcript", |tx, now| {
            apply_in(tx, path, at, directives, writer, now)
        })
    }

    /// The lane of the claim `session` last came to hold (by claim, takeover or
    /// succession), from the ledger: the lane a transcript naming that session was
    /// written for, even after the claim was released.
    pub fn session_lane(&mut self, session: &str) -> Result<Option<String>> {
        self.read("reading the ledger", |tx, _| {
            Ok(tx
                .prepare_cached(
                    "SELECT json_extract(detail, '$.lane') FROM ledger WHERE actor = ?1
                     AND kind IN ('claimed', 'takeover', 'successor')
                     AND json_extract(detail, '$.lane') IS NOT NULL
                     ORDER BY seq DESC LIMIT 1",
                )?
                .query_row([session], |r| r.get(0))
                .optional()?)
        })
    }

    /// Every acknowledgment recorded for `key`, oldest first.
    pub fn acks_for(&mut self, key: &str) -> Result<Vec<AckRecord>> {
        self.read("reading acknowledgments", |tx, _| {
            let mut stmt = tx.prepare_cached(
                "SELECT key, polarity, body, source, line, at, effect FROM acks
                 WHERE key = ?1 ORDER BY seq",
            )?;
            let rows = stmt.query_map([key], |r| {
                Ok(AckRecord {
                    key: r.get(0)?,
                    polarity: r.get(1)?,
                    body: r.get(2)?,
                    source: r.get(3)?,
                    line: r.get(4)?,
                    at: r.get(5)?,
                    effect: r.get(6)?,
                })
            })?;
            Ok(rows.collect::<std::result::Result<Vec<_>, _>>()?)
        })
    }
}

/// The body of [`Store::apply_transcript`], inside the caller's transaction (the
/// metered scan adds its usage to the same one).
pub(super) fn apply_in(
    tx: &Transaction<'_>,
    path: &str,
    at: Checkpoint,
    directives: &[Directive],
    writer: &[Target],
    now: Micros,
) -> Result<Vec<Outcome>> {
    acks::apply_transcript(&mut SqlTx { tx, now }, (path, at), directives, writer, now)
}
