//! The append-only ledger of what happened to each task.
//!
//! Kinds: `added`, `imported`, `modified`, `dep_added`, `dep_removed`, `claimed`,
//! `successor` (a claim renewed to a successor session), `takeover`, `displaced` (the
//! claimant a takeover removed), `released`, `phase_set`, `phase_completed`, `done`,
//! `deleted`. Rows are never updated or deleted; `detail` is a JSON object.

use super::Store;
use crate::clock::Micros;
use crate::error::Result;
use rusqlite::{params, Transaction};
use serde::Serialize;

#[derive(Debug, Clone, Serialize)]
pub struct LedgerEntry {
    pub seq: i64,
    pub task_id: String,
    pub at: Micros,
    pub kind: String,
    pub actor: Option<String>,
    pub fence: Option<i64>,
    pub detail: serde_json::Value,
}

pub(super) fn append(
    tx: &Transaction<'_>,
    task_id: &str,
    at: Micros,
    kind: &str,
    actor: Option<&str>,
    fence: Option<i64>,
    detail: serde_json::Value,
) -> Result<()> {
    tx.prepare_cached(
        "INSERT INTO ledger (task_id, at, kind, actor, fence, detail) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )?
    .execute(params![task_id, at, kind, actor, fence, detail.to_string()])?;
    Ok(())
}

impl Store {
    /// The ledger of one task, oldest first.
    pub fn ledger(&mut self, input: &str) -> Result<Vec<LedgerEntry>> {
        self.read("reading the ledger", |tx, _| {
            let id = super::resolve::resolve(tx, input)?;
            let mut stmt = tx.prepare_cached(
                "SELECT seq, task_id, at, kind, actor, fence, detail FROM ledger
                 WHERE task_id = ?1 ORDER BY seq",
            )?;
            let rows = stmt.query_map([&id], row_to_entry)?;
            Ok(rows.collect::<std::result::Result<Vec<_>, _>>()?)
        })
    }

    /// Ledger entries addressed to `actor` of the given kind (e.g. `displaced`).
    pub fn ledger_for_actor(&mut self, actor: &str, kind: &str) -> Result<Vec<LedgerEntry>> {
        self.read("reading the ledger", |tx, _| {
            let mut stmt = tx.prepare_cached(
                "SELECT seq, task_id, at, kind, actor, fence, detail FROM ledger
                 WHERE actor = ?1 AND kind = ?2 ORDER BY seq",
            )?;
            let rows = stmt.query_map(params![actor, kind], row_to_entry)?;
            Ok(rows.collect::<std::result::Result<Vec<_>, _>>()?)
        })
    }
}

fn row_to_entry(r: &rusqlite::Row<'_>) -> rusqlite::Result<LedgerEntry> {
    let detail: String = r.get(6)?;
    Ok(LedgerEntry {
        seq: r.get(0)?,
        task_id: r.get(1)?,
        at: r.get(2)?,
        kind: r.get(3)?,
        actor: r.get(4)?,
        fence: r.get(5)?,
        detail: serde_json::from_str(&detail).unwrap_or(serde_json::Value::Null),
    })
}
