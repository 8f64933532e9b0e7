//! Steering items, their acknowledgments and transcript checkpoints on PostgreSQL:
//! the steps ([`AckTx`]) of the acknowledgment rule written once in
//! [`crate::store::acks`], and the inbox's reads by its shared checks
//! ([`crate::store::inbox`]: `derive_state`, `check_new`), so both backends say the
//! same about the same directives.
//!
//! Invariants, besides the inbox's own (state changes only by ACK, NACK with a reason,
//! or TTL; showing only counts; one record per (key, polarity, source, line)):
//! - A key is a stamp from the server's clock, inserted `ON CONFLICT DO NOTHING`: two
//!   hosts minting the same stamp at once cannot both have it; the loser takes the
//!   next `-N`, as a collision does on SQLite.
//! - A directive locks its item (`FOR UPDATE`) before it looks for an earlier record of
//!   its line, so two scanners applying one line queue on the item and the second
//!   finds the first's record (`duplicate`); a record for an unknown key, which has no
//!   row to lock, is inserted `ON CONFLICT DO NOTHING` for the same reason.
//! - Expiry is lazy as on SQLite: reads derive it, writes record it (the sweep skips
//!   rows another transaction holds, so sweepers never wait on each other), and a
//!   directive judges its item by the TTL whether or not a sweep wrote it yet.
//! - A transcript's directives and its checkpoint are one transaction.

use super::steps::{in_transaction, PgSteps};
use super::tasks::server_now;
use super::{PgContext, PgStore};
use crate::clock::Micros;
use crate::error::Result;
use crate::stamp;
use crate::store::acks::{self, AckTx, NewAck};
use crate::store::inbox::{
    check_new, derive_state, unknown_key, AckRecord, ItemState, Outcome, Scope, ITEM_COLUMNS,
};
use crate::store::target::TargetKind;
use crate::store::vocab::{Checkpoint, Directive};
use crate::store::{Item, Target};
use postgres::{GenericClient, Row, Transaction};
use std::time::Duration;

fn row_to_item(r: &Row, now: Micros) -> Item {
    let stored: String = r.get(4);
    let expires: Micros = r.get(6);
    let state = derive_state(&stored, expires, now);
    let kind: String = r.get(1);
    Item {
        key: r.get(0),
        target: Target {
            kind: TargetKind::parse(&kind),
            name: r.get(2),
        },
        text: r.get(3),
        state,
        created: r.get(5),
        expires,
        shown: r.get(7),
        last_shown: r.get(8),
        closed_at: r.get(9),
        problem: match state {
            ItemState::Acked | ItemState::Refused => None,
            _ => r.get(10),
        },
    }
}

impl AckTx for PgSteps<'_, '_> {
    /// Skips rows another transaction holds, so sweepers never wait on each other.
    fn sweep(&mut self, now: Micros) -> Result<()> {
        self.tx
            .execute(
                "UPDATE steering SET state = 'expired', closed_at = expires
                 WHERE key IN (SELECT key FROM steering WHERE state = 'pending' AND expires <= $1
                               FOR UPDATE SKIP LOCKED)",
                &[&now],
            )
            .ctx("to expire steering items", self.at)?;
        Ok(())
    }
    fn lock_item(&mut self, key: &str) -> Result<Option<(String, Micros, Target)>> {
        let row = self
            .tx
            .query_opt(
                "SELECT state, expires, target_kind, target FROM steering WHERE key = $1 FOR UPDATE",
                &[&key],
            )
            .ctx("to lock a steering item", self.at)?;
        Ok(row.map(|r| {
            let kind: String = r.get(2);
            let target = Target {
                kind: TargetKind::parse(&kind),
                name: r.get(3),
            };
            (r.get(0), r.get(1), target)
        }))
    }
    fn seen(&mut self, key: &str, polarity: &str, source: &str, line: i64) -> Result<bool> {
        let row = self
            .tx
            .query_opt(
                "SELECT 1 FROM acks WHERE key = $1 AND polarity = $2 AND source = $3 AND line = $4",
                &[&key, &polarity, &source, &line],
            )
            .ctx("to read acknowledgments", self.at)?;
        Ok(row.is_some())
    }
    fn retire(&mut self, key: &str, state: &str, now: Micros) -> Result<()> {
        self.tx
            .execute(
                "UPDATE steering SET state = $2, closed_at = $3, problem = NULL
                 WHERE key = $1 AND state = 'pending'",
                &[&key, &state, &now],
            )
            .ctx("to retire a steering item", self.at)?;
        Ok(())
    }
    fn set_problem(&mut self, key: &str, problem: &str) -> Result<()> {
        self.tx
            .execute(
                "UPDATE steering SET problem = $2 WHERE key = $1",
                &[&key, &problem],
            )
            .ctx("to record a steering problem", self.at)?;
        Ok(())
    }
    /// `ON CONFLICT DO NOTHING`: a directive for an unknown key has no item row to
    /// queue on, so a second scanner of its line may get this far.
    fn record(&mut self, a: &NewAck<'_>, now: Micros) -> Result<bool> {
        let n = self
            .tx
            .execute(
                "INSERT INTO acks (key, polarity, body, source, line, at, effect)
                 VALUES ($1, $2, $3, $4, $5, $6, $7)
                 ON CONFLICT (key, polarity, source, line) DO NOTHING",
                &[
                    &a.key,
                    &a.polarity,
                    &a.body,
                    &a.source,
                    &a.line,
                    &now,
                    &a.effect.as_str(),
                ],
            )
            .ctx("to record an acknowledgment", self.at)?;
        Ok(n == 1)
    }
    fn move_checkpoint(&mut self, path: &str, cp: Checkpoint, now: Micros) -> Result<()> {
        self.tx
            .execute(
                "INSERT INTO transcript_checkpoints (path, byte_offset, line, hash, updated)
                 VALUES ($1, $2, $3, $4, $5)
                 ON CONFLICT (path) DO UPDATE SET byte_offset = excluded.byte_offset,
                   line = excluded.line, hash = excluded.hash, updated = excluded.updated",
                &[
                    &path,
                    &(cp.offset as i64),
                    &(cp.line as i64),
                    &(cp.hash as i64),
                    &now,
                ],
            )
            .ctx("to move a transcript checkpoint", self.at)?;
        Ok(())
    }
}

pub(super) fn steer(s: &mut PgStore, target: &Target, text: &str, ttl: Duration) -> Result<Item> {
    check_new(target, text)?;
    let at = s.at.as_str();
    let mut tx = s
        .client
        .transaction()
        .ctx("to start creating a steering item", at)?;
    let now = server_now(&mut tx, at)?;
    let key = create(&mut tx, at, now, target, text, ttl)?;
    let item = one(&mut tx, at, &key, now)?;
    tx.commit().ctx("to commit a steering item", at)?;
    Ok(item)
}

/// Creates a pending item (already checked by `check_new`) inside the caller's
/// transaction, at `now`; its key. A reminder's item and its record are one
/// transaction this way.
pub(super) fn create(
    tx: &mut Transaction<'_>,
    at: &str,
    now: Micros,
    target: &Target,
    text: &str,
    ttl: Duration,
) -> Result<String> {
    PgSteps { tx, at }.sweep(now)?;
    let base = stamp::MINTER.mint(now.max(0) as u64);
    let expires = now.saturating_add(crate::when::micros(ttl));
    let kind = target.kind.as_str();
    let mut n = 0;
    loop {
        let key = match n {
            0 => base.clone(),
            n => stamp::with_suffix(&base, n),
        };
        let made = tx
            .query_opt(
                "INSERT INTO steering (key, target_kind, target, text, created, expires)
                 VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (key) DO NOTHING RETURNING key",
                &[&key, &kind, &target.name, &text, &now, &expires],
            )
            .ctx("to create a steering item", at)?;
        if made.is_some() {
            return Ok(key);
        }
        n += 1;
    }
}

fn one(c: &mut impl GenericClient, at: &str, key: &str, now: Micros) -> Result<Item> {
    let row = c
        .query_opt(
            &format!("SELECT {ITEM_COLUMNS} FROM steering WHERE key = $1"),
            &[&key],
        )
        .ctx("to read a steering item", at)?;
    row.map(|r| row_to_item(&r, now))
        .ok_or_else(|| unknown_key(key))
}

/// One item by its key, its state as of the server's clock.
pub(super) fn item(s: &mut PgStore, key: &str) -> Result<Item> {
    let at = s.at.as_str();
    let now = server_now(&mut s.client, at)?;
    one(&mut s.client, at, key, now)
}

/// Items for any of `targets` (every target when empty), oldest first; only pending
/// ones unless `all`.
pub(super) fn inbox(s: &mut PgStore, targets: &[Target], all: bool) -> Result<Vec<Item>> {
    let at = s.at.as_str();
    let now = server_now(&mut s.client, at)?;
    // A kind never holds ':', so "kind:name" names a target unambiguously.
    let wanted: Vec<String> = targets
        .iter()
        .map(|t| format!("{}:{}", t.kind.as_str(), t.name))
        .collect();
    let rows = s
        .client
        .query(
            &format!(
                "SELECT {ITEM_COLUMNS} FROM steering
                 WHERE ($1 OR (state = 'pending' AND expires > $2))
                   AND (cardinality($3::text[]) = 0 OR target_kind || ':' || target = ANY($3))
                 ORDER BY key COLLATE \"C\""
            ),
            &[&all, &now, &wanted],
        )
        .ctx("to read the inbox", at)?;
    Ok(rows.iter().map(|r| row_to_item(r, now)).collect())
}

/// Counts one more showing of each item, by the server's clock.
pub(super) fn mark_shown(s: &mut PgStore, keys: &[String]) -> Result<()> {
    if keys.is_empty() {
        return Ok(());
    }
    s.client
        .execute(
            "UPDATE steering SET shown = shown + 1, last_shown = spice_now()
             WHERE key = ANY($1)",
            &[&keys],
        )
        .ctx("to record shown items", &s.at)?;
    Ok(())
}

pub(super) fn apply_acks_in(
    s: &mut PgStore,
    directives: &[Directive],
    source: &str,
    scope: Scope<'_>,
) -> Result<Vec<Outcome>> {
    in_transaction(s, "to apply acknowledgments", |t| {
        let now = server_now(t.tx, t.at)?;
        acks::apply(t, directives, source, scope, now)
    })
}

pub(super) fn transcript_checkpoint(s: &mut PgStore, path: &str) -> Result<Option<Checkpoint>> {
    let row = s
        .client
        .query_opt(
            "SELECT byte_offset, line, hash FROM transcript_checkpoints WHERE path = $1",
            &[&path],
        )
        .ctx("to read a transcript checkpoint", &s.at)?;
    Ok(row.map(|r| Checkpoint {
        offset: r.get::<_, i64>(0) as u64,
        line: r.get::<_, i64>(1) as u64,
        // Stored signed; the bits are the hash.
        hash: r.get::<_, i64>(2) as u64,
    }))
}

/// The directives up to `cp` applied within `writer`'s items and the checkpoint moved
/// there, in one transaction: a crash keeps both or neither.
pub(super) fn apply_transcript(
    s: &mut PgStore,
    path: &str,
    cp: Checkpoint,
    directives: &[Directive],
    writer: &[Target],
) -> Result<Vec<Outcome>> {
    in_transaction(s, "to apply a transcript", |t| {
        let now = server_now(t.tx, t.at)?;
        acks::apply_transcript(t, (path, cp), directives, writer, now)
    })
}

/// Every acknowledgment recorded for `key`, oldest first.
pub(super) fn acks_for(s: &mut PgStore, key: &str) -> Result<Vec<AckRecord>> {
    let rows = s
        .client
        .query(
            "SELECT key, polarity, body, source, line, at, effect FROM acks
             WHERE key = $1 ORDER BY seq",
            &[&key],
        )
        .ctx("to read acknowledgments", &s.at)?;
    Ok(rows
        .iter()
        .map(|r| AckRecord {
            key: r.get(0),
            polarity: r.get(1),
            body: r.get(2),
            source: r.get(3),
            line: r.get(4),
            at: r.get(5),
            effect: r.get(6),
        })
        .collect())
}

/// A session as typed, by the SQLite store's rules ([`crate::store::resolve`]'s
/// `pick_session`) over the sessions PostgreSQL knows: claimants and the ledger's
/// actors, and the lanes' sessions and their lineages.
pub(super) fn resolve_session(s: &mut PgStore, typed: &str) -> Result<String> {
    if typed.chars().count() < crate::store::resolve::MIN_SHORT {
        return Ok(typed.to_string());
    }
    let upper = format!("{typed}\u{10ffff}");
    let rows = s
        .client
        .query(
            "SELECT claimant FROM claims
               WHERE claimant COLLATE \"C\" >= $1 AND claimant COLLATE \"C\" < $2
             UNION
             SELECT actor FROM ledger
               WHERE actor COLLATE \"C\" >= $1 AND actor COLLATE \"C\" < $2
             UNION
             SELECT session FROM lanes
               WHERE session COLLATE \"C\" >= $1 AND session COLLATE \"C\" < $2
             UNION
             SELECT s FROM lanes, jsonb_array_elements_text(lineage::jsonb) AS s
               WHERE s COLLATE \"C\" >= $1 AND s COLLATE \"C\" < $2",
            &[&typed, &upper],
        )
        .ctx("to look up a session", &s.at)?;
    let found: Vec<String> = rows
        .iter()
        .map(|r| r.get::<_, String>(0))
        .filter(|f| f.starts_with(typed))
        .collect();
    crate::store::resolve::pick_session(typed, found)
}
