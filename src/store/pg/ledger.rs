//! The ledger's and the acknowledgments' feeds on PostgreSQL (notes, the cursors a
//! watcher follows, the newest entries of some kinds), and the lane a session last
//! ran under.
//!
//! Invariant: a cursor never skips a row. SQLite writes one transaction at a time, so
//! its `seq` order is its commit order and "after seq N" is a sound cursor. A
//! `bigserial` is not: a value is drawn when a row is inserted, not when it commits,
//! so a reader following `seq > N` could hand out seq 6 while seq 5's transaction is
//! still open, move its cursor to 6, and never see 5.
//!
//! So each feed row records the transaction that wrote it (`xid`, the migration's
//! default `pg_current_xact_id()`), and the feeds run in (`xid`, `seq`) order, handing
//! out only rows whose `xid` is below the reading snapshot's horizon,
//! `pg_snapshot_xmin(pg_current_snapshot())`: every transaction below it has ended,
//! and every transaction that has not (or has not begun) has an `xid` at or above it.
//! Rows below the horizon are therefore final, and any row that commits later sorts
//! after every row handed out. The cursor stays the caller's `seq`: a feed looks up
//! that row's `xid` to resume from (a `seq` no row has resumes after the row before
//! it), so feed order is (`xid`, `seq`), not `seq` alone; a caller keeps the last
//! entry's `seq`, as it does on SQLite. The price: an open writing transaction holds
//! back the rows committed after it began until it ends (claims and notes are short);
//! rows are delayed, never lost. A head is the last row the feed would hand out now,
//! so rows already committed above the horizon when it is taken come after it: a
//! watcher starting then reports them (a moment early rather than never).

use super::{PgContext, PgStore};
use crate::error::Result;
use crate::store::ledger::check_note;
use crate::store::{AckRecord, LedgerEntry};
use postgres::Row;

const ENTRY: &str = "seq, task_id, at, kind, actor, fence, detail::text";

fn row_to_entry(r: &Row) -> LedgerEntry {
    LedgerEntry {
        seq: r.get(0),
        task_id: r.get(1),
        at: r.get(2),
        kind: r.get(3),
        actor: r.get(4),
        fence: r.get(5),
        detail: serde_json::from_str(r.get::<_, &str>(6)).unwrap_or(serde_json::Value::Null),
    }
}

/// Appends a supervisor report to a task's ledger, by the server's clock.
pub(super) fn note(
    s: &mut PgStore,
    task_id: &str,
    kind: &str,
    actor: &str,
    detail: serde_json::Value,
) -> Result<()> {
    check_note(kind)?;
    s.client
        .execute(
            "INSERT INTO ledger (task_id, at, kind, actor, detail)
             VALUES ($1, spice_now(), $2, $3, $4::text::jsonb)",
            &[&task_id, &kind, &actor, &detail.to_string()],
        )
        .ctx("to append to the ledger", &s.at)?;
    Ok(())
}

/// The (`xid`, `seq`) a feed resumes after: the row at `seq`, or the row before it.
/// `$1` is the caller's cursor. One statement, so one snapshot with the horizon.
fn feed(table: &str, columns: &str) -> String {
    format!(
        "WITH cursor AS (
           SELECT coalesce((SELECT xid FROM {table} WHERE seq <= $1 ORDER BY seq DESC LIMIT 1),
                           '0'::xid8) AS xid)
         SELECT {columns} FROM {table}, cursor
         WHERE ({table}.xid, {table}.seq) > (cursor.xid, $1)
           AND {table}.xid < pg_snapshot_xmin(pg_current_snapshot())
         ORDER BY {table}.xid, {table}.seq LIMIT $2"
    )
}

/// The last row a feed would hand out now (0 when none): a cursor from which the feed
/// yields only what comes next.
fn head(table: &str) -> String {
    format!(
        "SELECT coalesce((SELECT seq FROM {table}
                          WHERE xid < pg_snapshot_xmin(pg_current_snapshot())
                          ORDER BY xid DESC, seq DESC LIMIT 1), 0)"
    )
}

pub(super) fn ledger_since(s: &mut PgStore, seq: i64, limit: usize) -> Result<Vec<LedgerEntry>> {
    let rows = s
        .client
        .query(&feed("ledger", ENTRY), &[&seq, &(limit as i64)])
        .ctx("to read the ledger", &s.at)?;
    Ok(rows.iter().map(row_to_entry).collect())
}

pub(super) fn ledger_head(s: &mut PgStore) -> Result<i64> {
    Ok(s.client
        .query_one(&head("ledger"), &[])
        .ctx("to read the ledger", &s.at)?
        .get(0))
}

/// A task's entries of `kinds`, oldest first (at most the newest `limit`).
pub(super) fn ledger_of_kinds(
    s: &mut PgStore,
    task_id: &str,
    kinds: &[&str],
    limit: usize,
) -> Result<Vec<LedgerEntry>> {
    let rows = s
        .client
        .query(
            &format!(
                "SELECT {ENTRY} FROM ledger WHERE task_id = $1 AND kind = ANY($2)
                 ORDER BY seq DESC LIMIT $3"
            ),
            &[&task_id, &kinds, &(limit as i64)],
        )
        .ctx("to read the ledger", &s.at)?;
    let mut v: Vec<LedgerEntry> = rows.iter().map(row_to_entry).collect();
    v.reverse();
    Ok(v)
}

/// The newest entries of `kinds` across every task, newest first (at most `limit`).
pub(super) fn ledger_recent_of_kinds(
    s: &mut PgStore,
    kinds: &[&str],
    limit: usize,
) -> Result<Vec<LedgerEntry>> {
    let rows = s
        .client
        .query(
            &format!("SELECT {ENTRY} FROM ledger WHERE kind = ANY($1) ORDER BY seq DESC LIMIT $2"),
            &[&kinds, &(limit as i64)],
        )
        .ctx("to read the ledger", &s.at)?;
    Ok(rows.iter().map(row_to_entry).collect())
}

pub(super) fn acks_head(s: &mut PgStore) -> Result<i64> {
    Ok(s.client
        .query_one(&head("acks"), &[])
        .ctx("to read acknowledgments", &s.at)?
        .get(0))
}

/// Acknowledgment records after the cursor `seq`, in feed order (at most `limit`).
pub(super) fn acks_since(s: &mut PgStore, seq: i64, limit: usize) -> Result<Vec<(i64, AckRecord)>> {
    let rows = s
        .client
        .query(
            &feed("acks", "seq, key, polarity, body, source, line, at, effect"),
            &[&seq, &(limit as i64)],
        )
        .ctx("to read acknowledgments", &s.at)?;
    Ok(rows
        .iter()
        .map(|r| {
            (
                r.get(0),
                AckRecord {
                    key: r.get(1),
                    polarity: r.get(2),
                    body: r.get(3),
                    source: r.get(4),
                    line: r.get(5),
                    at: r.get(6),
                    effect: r.get(7),
                },
            )
        })
        .collect())
}

/// The lane of the claim `session` last came to hold (by claim, takeover or
/// succession), from the ledger, as on SQLite.
pub(super) fn session_lane(s: &mut PgStore, session: &str) -> Result<Option<String>> {
    let row = s
        .client
        .query_opt(
            "SELECT detail->>'lane' FROM ledger WHERE actor = $1
               AND kind IN ('claimed', 'takeover', 'successor')
               AND detail->>'lane' IS NOT NULL
             ORDER BY seq DESC LIMIT 1",
            &[&session],
        )
        .ctx("to read the ledger", &s.at)?;
    Ok(row.map(|r| r.get(0)))
}
