//! Tokens spent and the budgets that bound them on PostgreSQL, decided by the SQLite
//! store's rules ([`crate::store::usage`]: `BudgetState::of`, `check_put`,
//! `counted_for`), so both backends say the same about the same usage.
//!
//! Invariants, besides the usage module's own:
//! - A transcript's directives, its checkpoint, what its reading remembers and the
//!   tokens it counted are one transaction ([`apply_transcript_metered`]): a restart
//!   reads on from the checkpoint and counts every line once.
//! - Tokens are added by one upsert per scan (`ON CONFLICT … DO UPDATE` adds to the
//!   row as it is at the write), so two writers to one session's row both count.
//! - A budget's row is locked (`FOR UPDATE`, inserted empty first when missing) before
//!   a raise compares against it, so two operators raising at once cannot let the
//!   lower raise land last.
//! - Reads that look at more than one row (a lane's and its task's budgets) see one
//!   snapshot, as SQLite's read transaction does.

use super::steps::in_transaction;
use super::tasks::server_now;
use super::{PgContext, PgStore};
use crate::clock::Micros;
use crate::error::Result;
use crate::store::acks;
use crate::store::usage::{check_put, counted_for, used_column, LAUNCH_KINDS};
use crate::store::vocab::{Checkpoint, Directive};
use crate::store::{
    Budget, BudgetRow, BudgetScope, BudgetState, Metered, Outcome, SessionUsage, Target, Tokens,
};
use postgres::{GenericClient, IsolationLevel, Transaction};

/// What the reading of `path` remembered when its checkpoint last moved.
pub(super) fn usage_carry(s: &mut PgStore, path: &str) -> Result<Option<String>> {
    let row = s
        .client
        .query_opt("SELECT carry FROM usage_carry WHERE path = $1", &[&path])
        .ctx("to read a transcript's usage", &s.at)?;
    Ok(row.map(|r| r.get(0)))
}

/// The directives up to `cp` applied, the checkpoint moved, and the tokens the scan
/// counted added to the writer's session, in one transaction.
pub(super) fn apply_transcript_metered(
    s: &mut PgStore,
    path: &str,
    cp: Checkpoint,
    directives: &[Directive],
    writer: &[Target],
    metered: &Metered,
) -> Result<Vec<Outcome>> {
    in_transaction(s, "to apply a transcript", |t| {
        let now = server_now(t.tx, t.at)?;
        let out = acks::apply_transcript(t, (path, cp), directives, writer, now)?;
        add_usage(t.tx, t.at, path, writer, metered, now)?;
        Ok(out)
    })
}

fn add_usage(
    tx: &mut Transaction<'_>,
    at: &str,
    path: &str,
    writer: &[Target],
    metered: &Metered,
    now: Micros,
) -> Result<()> {
    if let Some(carry) = &metered.carry {
        tx.execute(
            "INSERT INTO usage_carry (path, carry) VALUES ($1, $2)
             ON CONFLICT (path) DO UPDATE SET carry = excluded.carry",
            &[&path, carry],
        )
        .ctx("to record a transcript's usage", at)?;
    }
    if metered.delta.is_zero() {
        return Ok(());
    }
    let (session, lane) = counted_for(writer);
    let task: Option<String> = if session.is_empty() {
        None
    } else {
        tx.query_opt(
            &format!(
                "SELECT task_id FROM ledger WHERE actor = $1 AND kind IN ({LAUNCH_KINDS})
                 ORDER BY seq DESC LIMIT 1"
            ),
            &[&session],
        )
        .ctx("to find a session's task", at)?
        .map(|r| r.get(0))
    };
    let d = &metered.delta;
    // A row's figures never go below zero: a message's replaced figures only lower
    // what that same message added before.
    tx.execute(
        "INSERT INTO usage AS u (path, session, lane, task_id, input, output, cache_read,
           cache_creation, updated)
         VALUES ($1, $2, $3, $4, GREATEST($5::bigint, 0), GREATEST($6::bigint, 0),
           GREATEST($7::bigint, 0), GREATEST($8::bigint, 0), $9)
         ON CONFLICT (path, session) DO UPDATE SET
           lane = COALESCE(excluded.lane, u.lane), task_id = COALESCE(excluded.task_id, u.task_id),
           input = GREATEST(u.input + $5::bigint, 0), output = GREATEST(u.output + $6::bigint, 0),
           cache_read = GREATEST(u.cache_read + $7::bigint, 0),
           cache_creation = GREATEST(u.cache_creation + $8::bigint, 0),
           updated = excluded.updated",
        &[
            &path,
            &session,
            &lane,
            &task,
            &d.input,
            &d.output,
            &d.cache_read,
            &d.cache_creation,
            &now,
        ],
    )
    .ctx("to count a session's tokens", at)?;
    Ok(())
}

/// Every session's usage, newest first.
pub(super) fn session_usage(s: &mut PgStore) -> Result<Vec<SessionUsage>> {
    let rows = s
        .client
        .query(
            "SELECT path, session, lane, task_id, input, output, cache_read, cache_creation,
               updated FROM usage ORDER BY updated DESC, session COLLATE \"C\"",
            &[],
        )
        .ctx("to read usage", &s.at)?;
    Ok(rows
        .iter()
        .map(|r| SessionUsage {
            path: r.get(0),
            session: r.get(1),
            lane: r.get(2),
            task_id: r.get(3),
            tokens: Tokens {
                input: r.get::<_, i64>(4) as u64,
                output: r.get::<_, i64>(5) as u64,
                cache_read: r.get::<_, i64>(6) as u64,
                cache_creation: r.get::<_, i64>(7) as u64,
            },
            updated: r.get(8),
        })
        .collect())
}

/// The budget of (`kind`, `name`) as it stands, with the tokens used against it.
fn budget(c: &mut impl GenericClient, at: &str, kind: &str, name: &str) -> Result<Budget> {
    let column = used_column(kind);
    let row = c
        .query_one(
            &format!(
                "SELECT (SELECT tokens FROM budgets WHERE kind = $1 AND name = $2),
                   COALESCE((SELECT stop FROM budgets WHERE kind = $1 AND name = $2), false),
                   (SELECT COALESCE(SUM(input + output + cache_read + cache_creation), 0)::bigint
                    FROM usage WHERE {column} = $2)"
            ),
            &[&kind, &name],
        )
        .ctx("to read a budget", at)?;
    Ok(Budget {
        limit: row.get::<_, Option<i64>>(0).map(|l| l as u64),
        stop: row.get(1),
        used: row.get::<_, i64>(2) as u64,
    })
}

/// The budgets `lane` answers to while it works on `task`, from one snapshot.
pub(super) fn budget_state(
    s: &mut PgStore,
    lane: &str,
    task: Option<&str>,
    lane_floor: Option<u64>,
) -> Result<BudgetState> {
    let at = s.at.as_str();
    let mut tx = s
        .client
        .build_transaction()
        .isolation_level(IsolationLevel::RepeatableRead)
        .read_only(true)
        .start()
        .ctx("to read budgets", at)?;
    let lane_b = budget(&mut tx, at, "lane", lane)?;
    let task_b = task.map(|t| budget(&mut tx, at, "task", t)).transpose()?;
    tx.commit().ctx("to read budgets", at)?;
    Ok(BudgetState::of(lane_b, lane_floor, task_b))
}

/// Sets the budget of `scope` to `tokens`; a raise (`raise`) never lowers it and
/// clears a stop asked for, a set keeps the stop. Returns the budget as it stands.
pub(super) fn budget_put(
    s: &mut PgStore,
    scope: &BudgetScope,
    tokens: u64,
    raise: bool,
) -> Result<Budget> {
    let (kind, name) = scope.parts();
    let at = s.at.as_str();
    let mut tx = s
        .client
        .transaction()
        .ctx("to start setting a budget", at)?;
    let now = server_now(&mut tx, at)?;
    // An empty row first, so there is always one to lock (it is filled below, in the
    // same transaction, or rolled back with the refusal).
    tx.execute(
        "INSERT INTO budgets (kind, name, tokens, stop, updated) VALUES ($1, $2, NULL, false, $3)
         ON CONFLICT (kind, name) DO NOTHING",
        &[&kind, &name, &now],
    )
    .ctx("to set a budget", at)?;
    let old: Option<i64> = tx
        .query_one(
            "SELECT tokens FROM budgets WHERE kind = $1 AND name = $2 FOR UPDATE",
            &[&kind, &name],
        )
        .ctx("to lock a budget", at)?
        .get(0);
    check_put(scope, old.map(|o| o as u64), tokens, raise)?;
    tx.execute(
        "UPDATE budgets SET tokens = $3, stop = CASE WHEN $4 THEN false ELSE stop END,
           updated = $5 WHERE kind = $1 AND name = $2",
        &[&kind, &name, &(tokens as i64), &raise, &now],
    )
    .ctx("to set a budget", at)?;
    let b = budget(&mut tx, at, kind, name)?;
    tx.commit().ctx("to commit a budget", at)?;
    Ok(b)
}

/// Asks the lane working under `scope` to stop; the next raise clears it.
pub(super) fn budget_stop(s: &mut PgStore, scope: &BudgetScope) -> Result<()> {
    let (kind, name) = scope.parts();
    s.client
        .execute(
            "INSERT INTO budgets (kind, name, tokens, stop, updated)
             VALUES ($1, $2, NULL, true, spice_now())
             ON CONFLICT (kind, name) DO UPDATE SET stop = true, updated = excluded.updated",
            &[&kind, &name],
        )
        .ctx("to stop on a budget", &s.at)?;
    Ok(())
}

/// Clears a stop asked for (the lane acted on it); with `by`, only while that
/// supervisor runs that lane ([`super::supervisors::fence_lane`], whose share lock on
/// the runner row makes a take wait for this clear).
pub(super) fn budget_stopped(
    s: &mut PgStore,
    scope: &BudgetScope,
    by: Option<(&str, i64)>,
) -> Result<()> {
    let (kind, name) = scope.parts();
    let at = s.at.as_str();
    let mut tx = s.client.transaction().ctx("to clear a budget stop", at)?;
    if let Some((lane, id)) = by {
        super::supervisors::fence_lane(&mut tx, at, lane, id)?;
    }
    tx.execute(
        "UPDATE budgets SET stop = false WHERE kind = $1 AND name = $2",
        &[&kind, &name],
    )
    .ctx("to clear a budget stop", at)?;
    tx.commit().ctx("to clear a budget stop", at)?;
    Ok(())
}

/// Every budget set or stop asked for, by kind and name, with the tokens used.
pub(super) fn budgets(s: &mut PgStore) -> Result<Vec<BudgetRow>> {
    let rows = s
        .client
        .query(
            "SELECT b.kind, b.name, b.tokens, b.stop, COALESCE(CASE b.kind
               WHEN 'lane' THEN (SELECT SUM(input + output + cache_read + cache_creation)
                                 FROM usage WHERE lane = b.name)
               ELSE (SELECT SUM(input + output + cache_read + cache_creation)
                     FROM usage WHERE task_id = b.name) END, 0)::bigint
             FROM budgets b ORDER BY b.kind COLLATE \"C\", b.name COLLATE \"C\"",
            &[],
        )
        .ctx("to read budgets", &s.at)?;
    Ok(rows
        .iter()
        .map(|r| BudgetRow {
            kind: r.get(0),
            name: r.get(1),
            limit: r.get::<_, Option<i64>>(2).map(|l| l as u64),
            stop: r.get(3),
            used: r.get::<_, i64>(4) as u64,
        })
        .collect())
}
