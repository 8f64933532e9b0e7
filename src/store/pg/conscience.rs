//! The conscience's record on PostgreSQL, by the SQLite store's rules
//! ([`crate::store::conscience`]: the reminder's target, the answers derived at read
//! time by `with_answers`), timed by the server's clock.
//!
//! Invariants:
//! - A maxim publishes at most once per lane per epoch, even with publishers racing on
//!   several connections: the item, the `conscience_fired` row and the `published`
//!   step are one transaction, and the row is inserted `ON CONFLICT DO NOTHING` on its
//!   primary key (lane, maxim, epoch). A second publisher's insert waits for the
//!   first's transaction; once it commits, the insert does nothing, and the second
//!   rolls back its item: no reminder without its record, none twice.
//! - A reminder's answer is its item's state, read in the same statement as the log.

use super::tasks::server_now;
use super::{PgContext, PgStore};
use crate::error::Result;
use crate::store::conscience::{reminder_target, with_answers, Answered};
use crate::store::inbox::check_new;
use crate::store::{ConscienceEntry, NewStep, Proposal};
use postgres::GenericClient;
use std::time::Duration;

pub(super) fn epoch(s: &mut PgStore, lane: &str) -> Result<i64> {
    let row = s
        .client
        .query_opt(
            "SELECT epoch FROM conscience_epochs WHERE lane = $1",
            &[&lane],
        )
        .ctx("to read a lane's epoch", &s.at)?;
    Ok(row.map_or(0, |r| r.get(0)))
}

/// Counts `n` compactions of the lane's context; its epoch now.
pub(super) fn compacted(s: &mut PgStore, lane: &str, n: u64) -> Result<i64> {
    Ok(s.client
        .query_one(
            "INSERT INTO conscience_epochs (lane, epoch) VALUES ($1, $2)
             ON CONFLICT (lane) DO UPDATE SET epoch = conscience_epochs.epoch + excluded.epoch
             RETURNING epoch",
            &[&lane, &(n as i64)],
        )
        .ctx("to count a compaction", &s.at)?
        .get(0))
}

pub(super) fn fired(
    s: &mut PgStore,
    lane: &str,
    maxim: &str,
    epoch: i64,
) -> Result<Option<String>> {
    let row = s
        .client
        .query_opt(
            "SELECT key FROM conscience_fired WHERE lane = $1 AND maxim = $2 AND epoch = $3",
            &[&lane, &maxim, &epoch],
        )
        .ctx("to read the conscience's firings", &s.at)?;
    Ok(row.map(|r| r.get(0)))
}

fn insert(c: &mut impl GenericClient, at: &str, s: &NewStep<'_>, key: Option<&str>) -> Result<()> {
    c.execute(
        "INSERT INTO conscience_log (at, lane, maxim, epoch, step, key, detail)
         VALUES (spice_now(), $1, $2, $3, $4, $5, $6::text::jsonb)",
        &[
            &s.lane,
            &s.maxim,
            &s.epoch,
            &s.step,
            &key,
            &s.detail.to_string(),
        ],
    )
    .ctx("to record a conscience step", at)?;
    Ok(())
}

pub(super) fn note(s: &mut PgStore, step: &NewStep<'_>) -> Result<()> {
    insert(&mut s.client, &s.at, step, None)
}

/// Publishes a reminder (its item, the `conscience_fired` row and the `published`
/// step, at once) unless the maxim already did in this epoch: then `None`, and
/// nothing is written.
pub(super) fn publish(
    s: &mut PgStore,
    step: &NewStep<'_>,
    text: &str,
    ttl: Duration,
) -> Result<Option<String>> {
    let target = reminder_target(step.lane);
    check_new(&target, text)?;
    let at = s.at.as_str();
    let mut tx = s
        .client
        .transaction()
        .ctx("to start recording a reminder", at)?;
    let seen = tx
        .query_opt(
            "SELECT 1 FROM conscience_fired WHERE lane = $1 AND maxim = $2 AND epoch = $3",
            &[&step.lane, &step.maxim, &step.epoch],
        )
        .ctx("to read the conscience's firings", at)?;
    if seen.is_some() {
        return Ok(None);
    }
    let now = server_now(&mut tx, at)?;
    let key = super::inbox::create(&mut tx, at, now, &target, text, ttl)?;
    let won = tx
        .query_opt(
            "INSERT INTO conscience_fired (lane, maxim, epoch, key, at) VALUES ($1, $2, $3, $4, $5)
             ON CONFLICT (lane, maxim, epoch) DO NOTHING RETURNING key",
            &[&step.lane, &step.maxim, &step.epoch, &key, &now],
        )
        .ctx("to record a reminder", at)?;
    if won.is_none() {
        // Another publisher committed first: its reminder stands, this item goes.
        return Ok(None);
    }
    insert(&mut tx, at, step, Some(&key))?;
    tx.commit().ctx("to commit a reminder", at)?;
    Ok(Some(key))
}

/// The log, oldest first, for one lane or all, the last `limit` steps, with each
/// reminder's answer as its item now says (one statement: one snapshot).
pub(super) fn log(
    s: &mut PgStore,
    lane: Option<&str>,
    limit: usize,
) -> Result<Vec<ConscienceEntry>> {
    let at = s.at.as_str();
    let now = server_now(&mut s.client, at)?;
    let rows = s
        .client
        .query(
            "SELECT l.seq, l.at, l.lane, l.maxim, l.epoch, l.step, l.key, l.detail::text,
                    st.state, st.closed_at, st.expires, st.problem,
                    (SELECT body FROM acks WHERE acks.key = st.key
                       AND effect IN ('acked', 'refused') ORDER BY seq DESC LIMIT 1)
             FROM (SELECT * FROM conscience_log WHERE $1::text IS NULL OR lane = $1
                   ORDER BY seq DESC LIMIT $2) l
             LEFT JOIN steering st ON l.step = 'published' AND st.key = l.key
             ORDER BY l.seq",
            &[&lane, &(limit as i64)],
        )
        .ctx("to read the conscience's log", at)?;
    let mut out = Vec::with_capacity(rows.len());
    let mut answers = Vec::new();
    for r in &rows {
        let e = ConscienceEntry {
            seq: r.get(0),
            at: r.get(1),
            lane: r.get(2),
            maxim: r.get(3),
            epoch: r.get(4),
            step: r.get(5),
            key: r.get(6),
            detail: serde_json::from_str(r.get::<_, &str>(7)).unwrap_or_default(),
        };
        if let Some(state) = r.get::<_, Option<String>>(8) {
            let answered: Answered = (state, r.get(9), r.get(10), r.get(11), r.get(12));
            answers.push((e.seq, answered));
        }
        out.push(e);
    }
    Ok(with_answers(out, answers, now))
}

/// Expires the lane's pending reminders, saying `why`; their keys.
pub(super) fn expire_reminders(s: &mut PgStore, lane: &str, why: &str) -> Result<Vec<String>> {
    let at = s.at.as_str();
    let now = server_now(&mut s.client, at)?;
    let rows = s
        .client
        .query(
            "UPDATE steering st SET state = 'expired', closed_at = $3, problem = $2
             FROM conscience_fired f
             WHERE f.key = st.key AND f.lane = $1 AND st.state = 'pending'
             RETURNING st.key",
            &[&lane, &why, &now],
        )
        .ctx("to expire reminders", at)?;
    let mut keys: Vec<String> = rows.iter().map(|r| r.get(0)).collect();
    keys.sort();
    Ok(keys)
}

pub(super) fn proposal(s: &mut PgStore, theme: &str) -> Result<Option<Proposal>> {
    let row = s
        .client
        .query_opt(
            "SELECT theme, task_id, at FROM conscience_proposals WHERE theme = $1",
            &[&theme],
        )
        .ctx("to read proposals", &s.at)?;
    Ok(row.map(|r| Proposal {
        theme: r.get(0),
        task_id: r.get(1),
        at: r.get(2),
    }))
}

/// Records that `task_id` is the proposal for `theme` (false: one was already).
pub(super) fn record_proposal(s: &mut PgStore, theme: &str, task_id: &str) -> Result<bool> {
    Ok(s.client
        .execute(
            "INSERT INTO conscience_proposals (theme, task_id, at) VALUES ($1, $2, spice_now())
             ON CONFLICT (theme) DO NOTHING",
            &[&theme, &task_id],
        )
        .ctx("to record a proposal", &s.at)?
        == 1)
}
