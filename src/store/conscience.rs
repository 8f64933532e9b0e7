//! The conscience's record: every step it took (fired, suppressed, each judge's raw
//! answer, abandoned, dismissed, disputed, published), each lane's compaction epoch,
//! which maxim published in which epoch, and the proposals filed.
//!
//! Invariants:
//! - A maxim publishes at most once per lane per epoch: the `conscience_fired` row
//!   (lane, maxim, epoch) is the proof, written in the transaction that logs the
//!   publication; a second publication in the same epoch is refused.
//! - A reminder is an ordinary steering item: its ACK, NACK or expiry is the item's
//!   state, which the log shows as `acked`, `nacked` or `expired` entries derived at
//!   read time (one truth: the item), never a second copy written beside it.
//! - A lane that stops expires its own pending reminders ([`Store::expire_reminders`]):
//!   nobody will be there to answer them.

use super::target::{Target, TargetKind};
use super::Store;
use crate::clock::Micros;
use crate::error::Result;
use rusqlite::{params, OptionalExtension};
use serde::Serialize;
use std::time::Duration;

/// One step of the conscience's log.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ConscienceEntry {
    /// Order of writing; derived entries (acked, nacked, expired) take their
    /// publication's.
    pub seq: i64,
    pub at: Micros,
    pub lane: String,
    pub maxim: String,
    pub epoch: i64,
    /// `fired`, `suppressed`, `judge`, `abandoned`, `dismissed`, `disputed`,
    /// `unanswered`, `published`; derived: `acked`, `nacked`, `expired`.
    pub step: String,
    /// The reminder's steering key, from `published` on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    pub detail: serde_json::Value,
}

/// A step to record.
pub struct NewStep<'a> {
    pub lane: &'a str,
    pub maxim: &'a str,
    pub epoch: i64,
    pub step: &'a str,
    pub detail: serde_json::Value,
}

/// A reminder's item as it stands: state, closed at, expires, problem, answer.
pub(super) type Answered = (
    String,
    Option<Micros>,
    Micros,
    Option<String>,
    Option<String>,
);

/// A proposal filed before.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Proposal {
    pub theme: String,
    pub task_id: String,
    pub at: Micros,
}

impl Store {
    /// The lane's compaction epoch (0 until its first compaction).
    pub fn conscience_epoch(&mut self, lane: &str) -> Result<i64> {
        self.read("reading a lane's epoch", |tx, _| {
            Ok(tx
                .prepare_cached("SELECT epoch FROM conscience_epochs WHERE lane = ?1")?
                .query_row([lane], |r| r.get(0))
                .optional()?
                .unwrap_or(0))
        })
    }

    /// Counts `n` compactions of the lane's context; returns its epoch now.
    pub fn conscience_compacted(&mut self, lane: &str, n: u64) -> Result<i64> {
        self.write("counting a compaction", |tx, _| {
            tx.prepare_cached(
                "INSERT INTO conscience_epochs (lane, epoch) VALUES (?1, ?2)
                 ON CONFLICT (lane) DO UPDATE SET epoch = epoch + excluded.epoch",
            )?
            .execute(params![lane, n as i64])?;
            Ok(tx.query_row(
                "SELECT epoch FROM conscience_epochs WHERE lane = ?1",
                [lane],
                |r| r.get(0),
            )?)
        })
    }

    /// The key of the reminder `maxim` published for `lane` in `epoch`, if it did.
    pub fn conscience_fired(
        &mut self,
        lane: &str,
        maxim: &str,
        epoch: i64,
    ) -> Result<Option<String>> {
        self.read("reading the conscience's firings", |tx, _| {
            Ok(tx
                .prepare_cached(
                    "SELECT key FROM conscience_fired WHERE lane = ?1 AND maxim = ?2 AND epoch = ?3",
                )?
                .query_row(params![lane, maxim, epoch], |r| r.get(0))
                .optional()?)
        })
    }

    /// Records one step.
    pub fn conscience_note(&mut self, s: &NewStep<'_>) -> Result<()> {
        self.write("recording a conscience step", |tx, now| {
            insert(tx, now, s, None)?;
            Ok(())
        })
    }

    /// Publishes a reminder: a steering item for the lane with `text`, and the
    /// `published` step, unless the maxim already published in this epoch (then
    /// `None`, and nothing is written).
    pub fn conscience_publish(
        &mut self,
        s: &NewStep<'_>,
        text: &str,
        ttl: Duration,
    ) -> Result<Option<String>> {
        let target = reminder_target(s.lane);
        super::inbox::check_new(&target, text)?;
        // One write: the check, the item and its record commit together, and a second
        // publisher (another connection) waits for the write lock, then finds the row.
        self.write("recording a reminder", |tx, now| {
            let fired = tx
                .prepare_cached(
                    "SELECT 1 FROM conscience_fired WHERE lane = ?1 AND maxim = ?2 AND epoch = ?3",
                )?
                .exists(params![s.lane, s.maxim, s.epoch])?;
            if fired {
                return Ok(None);
            }
            let key = super::inbox::create(tx, now, &target, text, ttl)?;
            tx.prepare_cached(
                "INSERT INTO conscience_fired (lane, maxim, epoch, key, at) VALUES (?1, ?2, ?3, ?4, ?5)",
            )?
            .execute(params![s.lane, s.maxim, s.epoch, key, now])?;
            insert(tx, now, s, Some(&key))?;
            Ok(Some(key))
        })
    }

    /// The log, oldest first, for one lane or all (`None`), the last `limit` steps,
    /// with each reminder's answer (or expiry) as the item now says.
    pub fn conscience_log(
        &mut self,
        lane: Option<&str>,
        limit: usize,
    ) -> Result<Vec<ConscienceEntry>> {
        self.read("reading the conscience's log", |tx, now| {
            let mut stmt = tx.prepare_cached(
                "SELECT seq, at, lane, maxim, epoch, step, key, detail FROM conscience_log
                 WHERE ?1 IS NULL OR lane = ?1 ORDER BY seq DESC LIMIT ?2",
            )?;
            let rows = stmt.query_map(params![lane, limit as i64], |r| {
                let detail: String = r.get(7)?;
                Ok(ConscienceEntry {
                    seq: r.get(0)?,
                    at: r.get(1)?,
                    lane: r.get(2)?,
                    maxim: r.get(3)?,
                    epoch: r.get(4)?,
                    step: r.get(5)?,
                    key: r.get(6)?,
                    detail: serde_json::from_str(&detail).unwrap_or_default(),
                })
            })?;
            let mut out: Vec<ConscienceEntry> = rows.collect::<std::result::Result<_, _>>()?;
            out.reverse();
            let mut answered = tx.prepare_cached(
                "SELECT state, closed_at, expires, problem,
                   (SELECT body FROM acks WHERE acks.key = steering.key
                      AND effect IN ('acked', 'refused') ORDER BY seq DESC LIMIT 1)
                 FROM steering WHERE key = ?1",
            )?;
            let mut answers = Vec::new();
            for e in out.iter().filter(|e| e.step == "published") {
                let Some(key) = &e.key else { continue };
                let row: Option<Answered> = answered
                    .query_row([key], |r| {
                        Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
                    })
                    .optional()?;
                if let Some(row) = row {
                    answers.push((e.seq, row));
                }
            }
            Ok(with_answers(out, answers, now))
        })
    }

    /// Expires the lane's pending reminders (its supervisor is stopping: the agent
    /// will never see them), saying `why`; returns their keys.
    pub fn expire_reminders(&mut self, lane: &str, why: &str) -> Result<Vec<String>> {
        self.write("expiring reminders", |tx, now| {
            let keys: Vec<String> = tx
                .prepare_cached(
                    "SELECT s.key FROM steering s JOIN conscience_fired f ON f.key = s.key
                     WHERE f.lane = ?1 AND s.state = 'pending'",
                )?
                .query_map([lane], |r| r.get(0))?
                .collect::<std::result::Result<_, _>>()?;
            let mut up = tx.prepare_cached(
                "UPDATE steering SET state = 'expired', closed_at = ?2, problem = ?3
                 WHERE key = ?1 AND state = 'pending'",
            )?;
            for k in &keys {
                up.execute(params![k, now, why])?;
            }
            Ok(keys)
        })
    }

    /// The proposal filed for `theme`, if one was.
    pub fn proposal(&mut self, theme: &str) -> Result<Option<Proposal>> {
        self.read("reading proposals", |tx, _| {
            Ok(tx
                .prepare_cached(
                    "SELECT theme, task_id, at FROM conscience_proposals WHERE theme = ?1",
                )?
                .query_row([theme], |r| {
                    Ok(Proposal {
                        theme: r.get(0)?,
                        task_id: r.get(1)?,
                        at: r.get(2)?,
                    })
                })
                .optional()?)
        })
    }

    /// Records that `task_id` is the proposal for `theme` (false: one was already).
    pub fn record_proposal(&mut self, theme: &str, task_id: &str) -> Result<bool> {
        self.write("recording a proposal", |tx, now| {
            Ok(tx
                .prepare_cached(
                    "INSERT OR IGNORE INTO conscience_proposals (theme, task_id, at) VALUES (?1, ?2, ?3)",
                )?
                .execute(params![theme, task_id, now])?
                == 1)
        })
    }
}

/// A reminder's target: the lane it is for.
pub(super) fn reminder_target(lane: &str) -> Target {
    Target {
        kind: TargetKind::Lane,
        name: lane.to_string(),
    }
}

/// The log (oldest first) with each reminder's answer as its item stands (`answers`:
/// a `published` entry's seq and its item), derived at `now` and placed right after
/// its publication: the one rule both backends read the log by.
pub(super) fn with_answers(
    mut out: Vec<ConscienceEntry>,
    answers: Vec<(i64, Answered)>,
    now: Micros,
) -> Vec<ConscienceEntry> {
    let mut derived = Vec::new();
    for (seq, (state, closed, expires, problem, body)) in answers {
        let Some(e) = out
            .iter()
            .find(|e| e.seq == seq && e.step == "published" && e.key.is_some())
        else {
            continue;
        };
        let (step, at, detail) = match state.as_str() {
            "acked" => ("acked", closed, serde_json::json!({ "body": body })),
            "refused" => ("nacked", closed, serde_json::json!({ "body": body })),
            "expired" => ("expired", closed, serde_json::json!({ "why": problem })),
            "pending" if expires <= now => (
                "expired",
                Some(expires),
                serde_json::json!({ "why": "unanswered within its TTL" }),
            ),
            _ => continue,
        };
        derived.push(ConscienceEntry {
            step: step.into(),
            at: at.unwrap_or(e.at),
            detail,
            ..e.clone()
        });
    }
    out.extend(derived);
    out.sort_by_key(|e| (e.seq, e.step != "published" && e.key.is_some()));
    out
}

fn insert(
    tx: &rusqlite::Transaction<'_>,
    now: Micros,
    s: &NewStep<'_>,
    key: Option<&str>,
) -> Result<()> {
    tx.prepare_cached(
        "INSERT INTO conscience_log (at, lane, maxim, epoch, step, key, detail)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    )?
    .execute(params![
        now,
        s.lane,
        s.maxim,
        s.epoch,
        s.step,
        key,
        s.detail.to_string()
    ])?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::clock::ManualClock;
    use crate::steer::grammar;
    use crate::store::Store;
    use std::sync::Arc;
    use std::time::Duration;

    use super::NewStep;

    fn step<'a>(maxim: &'a str, epoch: i64, step: &'a str) -> NewStep<'a> {
        NewStep {
            lane: "a",
            maxim,
            epoch,
            step,
            detail: serde_json::json!({ "line": 3 }),
        }
    }

    #[test]
    fn once_per_epoch_answers_derived_and_expiry_on_stop() {
        let dir = tempfile::tempdir().unwrap();
        let clock = Arc::new(ManualClock::new(1_000_000));
        let mut s = Store::open_dir(dir.path(), clock.clone()).unwrap();
        assert_eq!(s.conscience_epoch("a").unwrap(), 0);
        s.conscience_note(&step("polling", 0, "fired")).unwrap();
        let k1 = s
            .conscience_publish(
                &step("polling", 0, "published"),
                "[MAXIM polling] x",
                Duration::from_secs(60),
            )
            .unwrap()
            .unwrap();
        assert!(s
            .conscience_publish(
                &step("polling", 0, "published"),
                "[MAXIM polling] x",
                Duration::from_secs(60)
            )
            .unwrap()
            .is_none());
        assert_eq!(s.conscience_compacted("a", 1).unwrap(), 1);
        let k2 = s
            .conscience_publish(
                &step("polling", 1, "published"),
                "[MAXIM polling] y",
                Duration::from_secs(60),
            )
            .unwrap()
            .unwrap();
        let k3 = s
            .conscience_publish(
                &step("shims", 1, "published"),
                "[MAXIM shims] z",
                Duration::from_secs(60),
            )
            .unwrap()
            .unwrap();
        clock.advance(Duration::from_secs(1));
        let text = format!("ACK {k1}: removed the loop\nNACK {k2}: it is a real poll of a device");
        s.apply_acks(&grammar::parse(&text), "t").unwrap();
        assert_eq!(
            s.expire_reminders("a", "the supervisor stopped").unwrap(),
            vec![k3.clone()]
        );
        let log = s.conscience_log(None, 100).unwrap();
        let steps: Vec<(&str, Option<&str>)> = log
            .iter()
            .map(|e| (e.step.as_str(), e.key.as_deref()))
            .collect();
        assert_eq!(
            steps,
            [
                ("fired", None),
                ("published", Some(k1.as_str())),
                ("acked", Some(k1.as_str())),
                ("published", Some(k2.as_str())),
                ("nacked", Some(k2.as_str())),
                ("published", Some(k3.as_str())),
                ("expired", Some(k3.as_str())),
            ]
        );
        assert_eq!(log[2].detail["body"], "removed the loop");
        assert_eq!(log[6].detail["why"], "the supervisor stopped");
        assert!(s.record_proposal("retry", "T1").unwrap());
        assert!(!s.record_proposal("retry", "T2").unwrap());
        assert_eq!(s.proposal("retry").unwrap().unwrap().task_id, "T1");
    }
}
