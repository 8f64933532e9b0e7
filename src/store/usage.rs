//! Tokens spent, as the lanes read them from their transcripts, and the budgets that
//! bound them.
//!
//! `usage` holds one row per (transcript, session): the tokens that session's lines of
//! that transcript counted, with the session's lane and task. `usage_carry` holds
//! what the reading of each transcript must remember across a restart (opaque text
//! the transcript layer writes: the last API calls' figures, Codex's last total).
//! `budgets` holds the operator's budgets set from the CLI or the console (a lane's
//! `budget_tokens` in its file is the floor), and a stop asked for.
//!
//! Invariants:
//! - Usage moves only with the transcript's checkpoint, in the same transaction
//!   ([`Store::apply_transcript_metered`]): a restart counts every line exactly once.
//! - A lane's used tokens are its sessions' rows; a task's, the rows of every session
//!   that worked on it, whatever the lane.
//! - Raising a budget never lowers one; a stop is cleared by the next raise.

use super::inbox::{self, Outcome};
use super::target::{Target, TargetKind};
use super::vocab::{Checkpoint, Directive};
use super::Store;
use crate::clock::Micros;
use crate::error::{Error, Result};
use rusqlite::{params, OptionalExtension, Transaction};
use serde::{Deserialize, Serialize};

/// Token counts of one kind of work (a message, a session, a group).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tokens {
    /// Input not read from the cache.
    pub input: u64,
    pub output: u64,
    pub cache_read: u64,
    pub cache_creation: u64,
}

impl Tokens {
    /// Every token the model read or wrote.
    pub fn total(&self) -> u64 {
        self.input + self.output + self.cache_read + self.cache_creation
    }

    /// `self + d`, never below zero.
    pub fn apply(&mut self, d: &Delta) {
        let f = |v: &mut u64, by: i64| *v = v.saturating_add_signed(by);
        f(&mut self.input, d.input);
        f(&mut self.output, d.output);
        f(&mut self.cache_read, d.cache_read);
        f(&mut self.cache_creation, d.cache_creation);
    }
}

impl std::ops::AddAssign for Tokens {
    fn add_assign(&mut self, o: Tokens) {
        self.input += o.input;
        self.output += o.output;
        self.cache_read += o.cache_read;
        self.cache_creation += o.cache_creation;
    }
}

/// A change in tokens counted: a later line of a message replaces that message's
/// figures, so a field may go down.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Delta {
    pub input: i64,
    pub output: i64,
    pub cache_read: i64,
    pub cache_creation: i64,
}

impl Delta {
    /// `new - old`, field by field.
    pub fn between(old: &Tokens, new: &Tokens) -> Delta {
        let d = |a: u64, b: u64| b as i64 - a as i64;
        Delta {
            input: d(old.input, new.input),
            output: d(old.output, new.output),
            cache_read: d(old.cache_read, new.cache_read),
            cache_creation: d(old.cache_creation, new.cache_creation),
        }
    }
    pub fn is_zero(&self) -> bool {
        *self == Delta::default()
    }
    pub fn total(&self) -> i64 {
        self.input + self.output + self.cache_read + self.cache_creation
    }
}

impl std::ops::AddAssign for Delta {
    fn add_assign(&mut self, o: Delta) {
        self.input += o.input;
        self.output += o.output;
        self.cache_read += o.cache_read;
        self.cache_creation += o.cache_creation;
    }
}

/// What one scan of a transcript counted, for [`Store::apply_transcript_metered`].
#[derive(Debug, Clone, Default)]
pub struct Metered {
    pub delta: Delta,
    /// What the reading remembers (see the module doc); `None` leaves it as it was.
    pub carry: Option<String>,
}

/// One session's tokens in one transcript.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SessionUsage {
    pub path: String,
    pub session: String,
    pub lane: Option<String>,
    pub task_id: Option<String>,
    pub tokens: Tokens,
    pub updated: Micros,
}

/// What a budget is set on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BudgetScope {
    Lane(String),
    /// A task id (resolved).
    Task(String),
}

impl BudgetScope {
    /// The budget's row key: its kind (`lane`, `task`) and name.
    pub(super) fn parts(&self) -> (&'static str, &str) {
        match self {
            BudgetScope::Lane(n) => ("lane", n),
            BudgetScope::Task(t) => ("task", t),
        }
    }
}

/// The column of the usage rows a budget of `kind` counts: a lane's sessions, or every
/// session that worked on the task.
pub(super) fn used_column(kind: &str) -> &'static str {
    if kind == "lane" {
        "lane"
    } else {
        "task_id"
    }
}

/// Refuses a raise (`raise`) that would lower the budget set before (`old`); a set
/// may go either way.
pub(super) fn check_put(
    scope: &BudgetScope,
    old: Option<u64>,
    tokens: u64,
    raise: bool,
) -> Result<()> {
    let (kind, name) = scope.parts();
    match old.filter(|old| raise && tokens < *old) {
        Some(old) => Err(Error::input(format!(
            "the {kind} {name}'s budget is {old} tokens: a raise cannot lower it to {tokens}"
        ))),
        None => Ok(()),
    }
}

/// Whose tokens a scan counted: the writer's session (empty for a transcript read by
/// hand, `spice ack scan`, which still counts) and lane.
pub(super) fn counted_for(writer: &[Target]) -> (&str, Option<&str>) {
    (
        name_of(writer, TargetKind::Session).unwrap_or(""),
        name_of(writer, TargetKind::Lane),
    )
}

/// The ledger kinds that say which task a session was launched for (the newest wins).
pub(super) const LAUNCH_KINDS: &str = "'launched', 'claimed', 'successor', 'takeover'";

/// A budget as it stands: the limit (if any), what was used, and whether the operator
/// asked to stop.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Budget {
    pub limit: Option<u64>,
    pub used: u64,
    pub stop: bool,
}

impl Budget {
    /// The limit is reached.
    pub fn crossed(&self) -> bool {
        self.limit.is_some_and(|l| self.used >= l)
    }
}

/// The budgets a lane at work answers to: its own and its task's.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct BudgetState {
    pub lane: Budget,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub task: Option<Budget>,
}

impl BudgetState {
    /// The first budget crossed, said in a few words (`None`: none is).
    pub fn crossed(&self) -> Option<String> {
        let say = |what: &str, b: &Budget| {
            format!(
                "budget: {what} used {} of {} tokens",
                b.used,
                b.limit.unwrap_or(0)
            )
        };
        if self.lane.crossed() {
            return Some(say("lane", &self.lane));
        }
        self.task
            .as_ref()
            .filter(|t| t.crossed())
            .map(|t| say("task", t))
    }
    /// The operator asked to stop the lane or its task.
    pub fn stop(&self) -> bool {
        self.lane.stop || self.task.as_ref().is_some_and(|t| t.stop)
    }

    /// The state from the budgets as stored: the lane's limit is the higher of the
    /// operator's and its file's floor; the task's budget counts only when one was set
    /// or a stop asked for.
    pub(super) fn of(mut lane: Budget, lane_floor: Option<u64>, task: Option<Budget>) -> Self {
        lane.limit = match (lane.limit, lane_floor) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
        BudgetState {
            lane,
            task: task.filter(|b| b.limit.is_some() || b.stop),
        }
    }
}

fn name_of(writer: &[Target], kind: TargetKind) -> Option<&str> {
    writer
        .iter()
        .find(|t| t.kind == kind)
        .map(|t| t.name.as_str())
}

impl Store {
    /// What the reading of `path` remembered when its checkpoint last moved.
    pub fn usage_carry(&mut self, path: &str) -> Result<Option<String>> {
        self.read("reading a transcript's usage", |tx, _| {
            Ok(tx
                .prepare_cached("SELECT carry FROM usage_carry WHERE path = ?1")?
                .query_row([path], |r| r.get(0))
                .optional()?)
        })
    }

    /// [`Store::apply_transcript`], and the tokens the scan counted added to the
    /// writer's session (with its lane, and the task its launch was for), in the same
    /// transaction as the checkpoint.
    pub fn apply_transcript_metered(
        &mut self,
        path: &str,
        at: Checkpoint,
        directives: &[Directive],
        writer: &[Target],
        metered: &Metered,
    ) -> Result<Vec<Outcome>> {
        self.write("applying a transcript", |tx, now| {
            let out = inbox::apply_in(tx, path, at, directives, writer, now)?;
            add_usage(tx, path, writer, metered, now)?;
            Ok(out)
        })
    }

    /// Every session's usage, newest first.
    pub fn session_usage(&mut self) -> Result<Vec<SessionUsage>> {
        self.read("reading usage", |tx, _| {
            let mut stmt = tx.prepare_cached(
                "SELECT path, session, lane, task_id, input, output, cache_read,
                 cache_creation, updated FROM usage ORDER BY updated DESC, session",
            )?;
            let rows = stmt.query_map([], |r| {
                Ok(SessionUsage {
                    path: r.get(0)?,
                    session: r.get(1)?,
                    lane: r.get(2)?,
                    task_id: r.get(3)?,
                    tokens: Tokens {
                        input: r.get::<_, i64>(4)? as u64,
                        output: r.get::<_, i64>(5)? as u64,
                        cache_read: r.get::<_, i64>(6)? as u64,
                        cache_creation: r.get::<_, i64>(7)? as u64,
                    },
                    updated: r.get(8)?,
                })
            })?;
            Ok(rows.collect::<std::result::Result<Vec<_>, _>>()?)
        })
    }

    /// The budgets `lane` answers to while it works on `task`: the lane's own (its
    /// file's `budget_tokens`, raised by the operator) and the task's.
    pub fn budget_state(
        &mut self,
        lane: &str,
        task: Option<&str>,
        lane_floor: Option<u64>,
    ) -> Result<BudgetState> {
        self.read("reading budgets", |tx, _| {
            let lane_b = budget(tx, "lane", lane)?;
            let task_b = task.map(|t| budget(tx, "task", t)).transpose()?;
            Ok(BudgetState::of(lane_b, lane_floor, task_b))
        })
    }

    /// Sets the budget of `scope` to `tokens` (never lower than the one set before)
    /// and clears a stop asked for. Returns the budget as it stands.
    pub fn budget_raise(&mut self, scope: &BudgetScope, tokens: u64) -> Result<Budget> {
        self.budget_put(scope, tokens, true)
    }

    /// Sets the budget of `scope` to `tokens`, higher or lower (`task modify
    /// --budget-tokens`); a stop asked for stays.
    pub fn budget_set(&mut self, scope: &BudgetScope, tokens: u64) -> Result<Budget> {
        self.budget_put(scope, tokens, false)
    }

    fn budget_put(&mut self, scope: &BudgetScope, tokens: u64, raise: bool) -> Result<Budget> {
        let (kind, name) = scope.parts();
        self.write("setting a budget", |tx, now| {
            check_put(scope, budget(tx, kind, name)?.limit, tokens, raise)?;
            tx.prepare_cached(
                "INSERT INTO budgets (kind, name, tokens, stop, updated) VALUES (?1, ?2, ?3, 0, ?4)
                 ON CONFLICT (kind, name) DO UPDATE SET tokens = excluded.tokens,
                 stop = CASE WHEN ?5 THEN 0 ELSE stop END, updated = excluded.updated",
            )?
            .execute(params![kind, name, tokens as i64, now, raise])?;
            budget(tx, kind, name)
        })
    }

    /// Asks the lane working under `scope` to stop (its session ends as on `fleet
    /// down`, the claim kept); the next raise clears it.
    pub fn budget_stop(&mut self, scope: &BudgetScope) -> Result<()> {
        let (kind, name) = scope.parts();
        self.write("stopping on a budget", |tx, now| {
            tx.prepare_cached(
                "INSERT INTO budgets (kind, name, tokens, stop, updated) VALUES (?1, ?2, NULL, 1, ?3)
                 ON CONFLICT (kind, name) DO UPDATE SET stop = 1, updated = excluded.updated",
            )?
            .execute(params![kind, name, now])?;
            Ok(())
        })
    }

    /// Clears a stop asked for (the lane acted on it); with `by`, only while that
    /// supervisor runs that lane ([`super::supervisors::fence_lane`]).
    pub fn budget_stopped(&mut self, scope: &BudgetScope, by: Option<(&str, i64)>) -> Result<()> {
        let (kind, name) = scope.parts();
        self.write("clearing a budget stop", |tx, now| {
            if let Some((lane, id)) = by {
                super::supervisors::fence_lane(tx, lane, id, now)?;
            }
            tx.prepare_cached("UPDATE budgets SET stop = 0 WHERE kind = ?1 AND name = ?2")?
                .execute(params![kind, name])?;
            Ok(())
        })
    }
}

/// A budget set in the store, with the tokens used against it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BudgetRow {
    pub kind: String,
    pub name: String,
    pub limit: Option<u64>,
    pub used: u64,
    pub stop: bool,
}

impl Store {
    /// Every budget set or stop asked for from the CLI or the console (a lane file's
    /// `budget_tokens` alone is not here).
    pub fn budgets(&mut self) -> Result<Vec<BudgetRow>> {
        self.read("reading budgets", |tx, _| {
            let names: Vec<(String, String)> = tx
                .prepare_cached("SELECT kind, name FROM budgets ORDER BY kind, name")?
                .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
                .collect::<std::result::Result<_, _>>()?;
            names
                .into_iter()
                .map(|(kind, name)| {
                    let b = budget(tx, &kind, &name)?;
                    Ok(BudgetRow {
                        kind,
                        name,
                        limit: b.limit,
                        used: b.used,
                        stop: b.stop,
                    })
                })
                .collect()
        })
    }
}

fn budget(tx: &Transaction<'_>, kind: &str, name: &str) -> Result<Budget> {
    let column = used_column(kind);
    let row: Option<(Option<i64>, bool)> = tx
        .prepare_cached("SELECT tokens, stop FROM budgets WHERE kind = ?1 AND name = ?2")?
        .query_row(params![kind, name], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()?;
    let used: i64 = tx
        .prepare_cached(&format!(
            "SELECT COALESCE(SUM(input + output + cache_read + cache_creation), 0) FROM usage
             WHERE {column} = ?1"
        ))?
        .query_row([name], |r| r.get(0))?;
    let (limit, stop) = row.unwrap_or((None, false));
    Ok(Budget {
        limit: limit.map(|l| l as u64),
        used: used as u64,
        stop,
    })
}

fn add_usage(
    tx: &Transaction<'_>,
    path: &str,
    writer: &[Target],
    metered: &Metered,
    now: Micros,
) -> Result<()> {
    if let Some(carry) = &metered.carry {
        tx.prepare_cached(
            "INSERT INTO usage_carry (path, carry) VALUES (?1, ?2)
             ON CONFLICT (path) DO UPDATE SET carry = excluded.carry",
        )?
        .execute(params![path, carry])?;
    }
    if metered.delta.is_zero() {
        return Ok(());
    }
    let (session, lane) = counted_for(writer);
    let task: Option<String> = if session.is_empty() {
        None
    } else {
        tx.prepare_cached(&format!(
            "SELECT task_id FROM ledger WHERE actor = ?1 AND kind IN ({LAUNCH_KINDS})
             ORDER BY seq DESC LIMIT 1"
        ))?
        .query_row([session], |r| r.get(0))
        .optional()?
    };
    let d = &metered.delta;
    // A row's figures never go below zero: a message's replaced figures only lower
    // what that same message added before.
    tx.prepare_cached(
        "INSERT INTO usage (path, session, lane, task_id, input, output, cache_read,
         cache_creation, updated)
         VALUES (?1, ?2, ?3, ?4, MAX(?5, 0), MAX(?6, 0), MAX(?7, 0), MAX(?8, 0), ?9)
         ON CONFLICT (path, session) DO UPDATE SET
           lane = COALESCE(excluded.lane, lane), task_id = COALESCE(excluded.task_id, task_id),
           input = MAX(input + ?5, 0), output = MAX(output + ?6, 0),
           cache_read = MAX(cache_read + ?7, 0), cache_creation = MAX(cache_creation + ?8, 0),
           updated = excluded.updated",
    )?
    .execute(params![
        path,
        session,
        lane,
        task,
        d.input,
        d.output,
        d.cache_read,
        d.cache_creation,
        now
    ])?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;
    use std::sync::Arc;

    fn store() -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().unwrap();
        let s = Store::open_dir(dir.path(), Arc::new(ManualClock::new(1_000))).unwrap();
        (dir, s)
    }

    fn writer(session: &str, lane: &str) -> Vec<Target> {
        vec![
            Target {
                kind: TargetKind::Session,
                name: session.into(),
            },
            Target {
                kind: TargetKind::Lane,
                name: lane.into(),
            },
        ]
    }

    fn delta(input: i64, output: i64) -> Metered {
        Metered {
            delta: Delta {
                input,
                output,
                ..Delta::default()
            },
            carry: Some(format!("{input}/{output}")),
        }
    }

    fn at(line: u64) -> Checkpoint {
        Checkpoint {
            offset: line * 10,
            line,
            hash: line,
        }
    }

    #[test]
    fn usage_moves_with_the_checkpoint_and_adds_per_session() {
        let (_d, mut s) = store();
        let w = writer("s1", "a");
        s.apply_transcript_metered("/t.jsonl", at(2), &[], &w, &delta(10, 5))
            .unwrap();
        s.apply_transcript_metered("/t.jsonl", at(4), &[], &w, &delta(-2, 7))
            .unwrap();
        assert_eq!(s.transcript_checkpoint("/t.jsonl").unwrap(), Some(at(4)));
        assert_eq!(s.usage_carry("/t.jsonl").unwrap().as_deref(), Some("-2/7"));
        let rows = s.session_usage().unwrap();
        assert_eq!(rows.len(), 1);
        assert_eq!(
            (rows[0].tokens.input, rows[0].tokens.output),
            (8, 12),
            "a replaced figure lowers what its message added"
        );
        assert_eq!(rows[0].lane.as_deref(), Some("a"));
        // A successor on the same transcript has its own row.
        s.apply_transcript_metered("/t.jsonl", at(5), &[], &writer("s2", "a"), &delta(1, 1))
            .unwrap();
        assert_eq!(s.session_usage().unwrap().len(), 2);
        let b = s.budget_state("a", None, Some(20)).unwrap();
        assert_eq!(b.lane.used, 22);
        assert!(b.lane.crossed());
        assert_eq!(b.crossed().unwrap(), "budget: lane used 22 of 20 tokens");
    }

    #[test]
    fn a_raise_lifts_the_budget_and_clears_a_stop_but_never_lowers_it() {
        let (_d, mut s) = store();
        s.apply_transcript_metered("/t.jsonl", at(1), &[], &writer("s1", "a"), &delta(30, 0))
            .unwrap();
        let lane = BudgetScope::Lane("a".into());
        assert!(s.budget_state("a", None, Some(20)).unwrap().lane.crossed());
        s.budget_stop(&lane).unwrap();
        assert!(s.budget_state("a", None, Some(20)).unwrap().stop());
        let b = s.budget_raise(&lane, 50).unwrap();
        assert_eq!((b.limit, b.used, b.stop), (Some(50), 30, false));
        let st = s.budget_state("a", None, Some(20)).unwrap();
        assert!(!st.lane.crossed() && !st.stop());
        // The file's floor still counts when it is the higher.
        assert_eq!(
            s.budget_state("a", None, Some(80)).unwrap().lane.limit,
            Some(80)
        );
        let e = s.budget_raise(&lane, 40).unwrap_err().to_string();
        assert!(e.contains("cannot lower it to 40"), "{e}");
    }
}
