//! The append-only ledger of what happened to each task.
//!
//! Kinds: `added`, `imported`, `modified`, `dep_added`, `dep_removed`, `claimed`,
//! `successor` (a claim renewed to a successor session), `takeover`, `displaced` (the
//! claimant a takeover removed), `released`, `phase_set`, `phase_completed`, `done`,
//! `deleted`, and what the supervisor reports ([`SUPERVISOR_KINDS`]). Rows are never
//! updated or deleted; `detail` is a JSON object.

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

/// What the supervisor records about a task's sessions: an agent launched, the
/// conversation its transcript names (and where that transcript is), an agent ended
/// (with how), steering typed into an idle agent, a compaction seen in its
/// transcript, a lane held after repeated quick deaths, a worktree that could not be
/// prepared yet (`worktree_wait`), a branch passed on from an earlier worktree
/// (`handoff`), a phase's merge the gate refused (`gate_refused`), a way round the
/// gate seen on a task's branch (`gate_bypass`), a commit hook's gate run in the
/// task's worktree (`gate_run`, clean or not), a test bed seeded into a task's
/// worktree, or why it stayed cold (`bed`), a repository's stage hook run at one of
/// the fleet's boundaries (`stage_hook`: stage, argv, outcome, exit code, duration,
/// the end of its output), a finished task's worktree put in the repository's pool
/// or taken from it for a new task (`pool`: with the ref its leftovers were saved
/// under, or why it was not), a lane paused at its token budget, resumed after a
/// raise, or stopped by the operator (`budget`), a conversation's transcript copied
/// to where a successor on this host resumes it (`transcript_restored`), or a
/// successor that starts afresh because it cannot be (`resume_unavailable`), or a
/// directive in the agent's prose that named no key (`keyless_ack`: nothing retired),
/// or the console's operator taking a lane's keyboard in its terminal view and giving
/// it back (`keyboard_taken`, `keyboard_released`: `web::terminal`), or a phase's
/// branch merged into its base (`merged`: base before and after, so the review of a
/// merged phase still shows what it changed).
pub const SUPERVISOR_KINDS: [&str; 23] = [
    "launched",
    "conversation",
    "exited",
    "delivered",
    "compacted",
    "held",
    "worktree_wait",
    "handoff",
    "gate_refused",
    "gate_bypass",
    "gate_run",
    "bed",
    "stage_hook",
    "pool",
    "budget",
    "archived",
    "gc",
    "transcript_restored",
    "resume_unavailable",
    "keyless_ack",
    "keyboard_taken",
    "keyboard_released",
    "merged",
];

/// Refuses a note of a kind the supervisor does not report (both backends).
pub(super) fn check_note(kind: &str) -> Result<()> {
    if !SUPERVISOR_KINDS.contains(&kind) {
        return Err(crate::error::Error::input(format!(
            "ledger kind {kind:?} is not one the supervisor reports"
        )));
    }
    Ok(())
}

impl Store {
    /// Appends a supervisor report (one of [`SUPERVISOR_KINDS`]) to a task's ledger.
    pub fn note(
        &mut self,
        task_id: &str,
        kind: &str,
        actor: &str,
        detail: serde_json::Value,
    ) -> Result<()> {
        check_note(kind)?;
        self.write("recording in the ledger", |tx, now| {
            append(tx, task_id, now, kind, Some(actor), None, detail)
        })
    }

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

    /// Every ledger entry after `seq`, oldest first (at most `limit`): how a watcher
    /// follows what happens to all tasks.
    pub fn ledger_since(&mut self, seq: i64, limit: usize) -> Result<Vec<LedgerEntry>> {
        self.read("reading the ledger", |tx, _| {
            let mut stmt = tx.prepare_cached(
                "SELECT seq, task_id, at, kind, actor, fence, detail FROM ledger
                 WHERE seq > ?1 ORDER BY seq LIMIT ?2",
            )?;
            let rows = stmt.query_map(params![seq, limit as i64], row_to_entry)?;
            Ok(rows.collect::<std::result::Result<Vec<_>, _>>()?)
        })
    }

    /// A task's entries of the given kinds, oldest first (at most the newest `limit`).
    pub fn ledger_of_kinds(
        &mut self,
        task_id: &str,
        kinds: &[&str],
        limit: usize,
    ) -> Result<Vec<LedgerEntry>> {
        let kinds = serde_json::to_string(kinds).expect("serialisable");
        self.read("reading the ledger", |tx, _| {
            let mut stmt = tx.prepare_cached(
                "SELECT seq, task_id, at, kind, actor, fence, detail FROM ledger
                 WHERE task_id = ?1 AND kind IN (SELECT value FROM json_each(?2))
                 ORDER BY seq DESC LIMIT ?3",
            )?;
            let rows = stmt.query_map(params![task_id, kinds, limit as i64], row_to_entry)?;
            let mut v = rows.collect::<std::result::Result<Vec<_>, _>>()?;
            v.reverse();
            Ok(v)
        })
    }

    /// The newest entries of the given kinds across every task, newest first (at most
    /// `limit`).
    pub fn ledger_recent_of_kinds(
        &mut self,
        kinds: &[&str],
        limit: usize,
    ) -> Result<Vec<LedgerEntry>> {
        let kinds = serde_json::to_string(kinds).expect("serialisable");
        self.read("reading the ledger", |tx, _| {
            let mut stmt = tx.prepare_cached(
                "SELECT seq, task_id, at, kind, actor, fence, detail FROM ledger
                 WHERE kind IN (SELECT value FROM json_each(?1))
                 ORDER BY seq DESC LIMIT ?2",
            )?;
            let rows = stmt.query_map(params![kinds, limit as i64], row_to_entry)?;
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
