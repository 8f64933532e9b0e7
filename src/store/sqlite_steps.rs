//! The SQLite steps of the edits both backends share ([`super::edits`]): one
//! `BEGIN IMMEDIATE` transaction as a [`TaskTx`], so `task dep` and `task import` run
//! the same rules here as on PostgreSQL.

use super::edits::{self, ImportReport, TaskTx};
use super::ledger::append;
use super::phases::flow_of;
use super::resolve::resolve;
use super::tasks::{handles, insert_dep, insert_task};
use super::{Claim, Store};
use crate::clock::Micros;
use crate::error::Result;
use crate::task::taskwarrior::TwTask;
use crate::task::{NewTask, Priority};
use rusqlite::{params, OptionalExtension, Transaction};

/// One writing transaction and the time it writes at.
pub(super) struct SqlTx<'a, 'c> {
    pub tx: &'a Transaction<'c>,
    pub now: Micros,
}

impl TaskTx for SqlTx<'_, '_> {
    fn resolve(&mut self, input: &str) -> Result<String> {
        resolve(self.tx, input)
    }
    fn id_of_uuid(&mut self, uuid: &str) -> Result<Option<String>> {
        Ok(self
            .tx
            .prepare_cached("SELECT id FROM tasks WHERE uuid = ?1")?
            .query_row([uuid], |r| r.get(0))
            .optional()?)
    }
    fn claim_on(&mut self, id: &str) -> Result<Option<Claim>> {
        super::claims::claim_of(self.tx, id)
    }
    fn insert_task(&mut self, new: &NewTask) -> Result<String> {
        insert_task(self.tx, new, self.now)
    }
    fn overwrite_task(&mut self, id: &str, tw: &TwTask) -> Result<()> {
        let (tx, n) = (self.tx, &tw.new);
        let current: String =
            tx.query_row("SELECT phase FROM tasks WHERE id = ?1", [id], |r| r.get(0))?;
        let phase = edits::imported_phase(tw, current, &flow_of(tx, n.project.as_deref())?)?;
        tx.execute(
            "UPDATE tasks SET title = ?2, body = ?3, project = ?4, phase = ?5, priority = ?6, due = ?7,
             wait = ?8, status = ?9, end_at = ?10, modified = ?11 WHERE id = ?1",
            params![
                id,
                n.title,
                n.body,
                n.project,
                phase,
                n.priority.map(Priority::as_str),
                n.due,
                n.wait,
                n.status.unwrap_or(crate::task::Status::Pending).as_str(),
                n.end,
                self.now
            ],
        )?;
        tx.execute("DELETE FROM tags WHERE task_id = ?1", [id])?;
        for t in &n.tags {
            tx.execute(
                "INSERT OR IGNORE INTO tags (task_id, tag) VALUES (?1, ?2)",
                params![id, t],
            )?;
        }
        tx.execute("DELETE FROM annotations WHERE task_id = ?1", [id])?;
        for a in &n.annotations {
            tx.execute(
                "INSERT INTO annotations (task_id, entry, description) VALUES (?1, ?2, ?3)",
                params![id, a.entry, a.description],
            )?;
        }
        Ok(())
    }
    fn waits_on(&mut self, id: &str) -> Result<Vec<String>> {
        let mut stmt = self
            .tx
            .prepare_cached("SELECT dep_id FROM deps WHERE task_id = ?1 ORDER BY dep_id")?;
        let deps = stmt
            .query_map([id], |r| r.get(0))?
            .collect::<std::result::Result<_, _>>()?;
        Ok(deps)
    }
    fn insert_dep(&mut self, id: &str, dep: &str) -> Result<()> {
        insert_dep(self.tx, id, dep)
    }
    fn delete_dep(&mut self, id: &str, dep: &str) -> Result<bool> {
        let n = self.tx.execute(
            "DELETE FROM deps WHERE task_id = ?1 AND dep_id = ?2",
            params![id, dep],
        )?;
        Ok(n > 0)
    }
    fn clear_deps(&mut self, id: &str) -> Result<()> {
        self.tx
            .execute("DELETE FROM deps WHERE task_id = ?1", [id])?;
        Ok(())
    }
    fn edges(&mut self) -> Result<Vec<(String, String)>> {
        // In key order, as PostgreSQL reads them: the cycle named is the same.
        let mut stmt = self
            .tx
            .prepare("SELECT task_id, dep_id FROM deps ORDER BY task_id, dep_id")?;
        let edges = stmt
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
            .collect::<std::result::Result<_, _>>()?;
        Ok(edges)
    }
    fn handles(&mut self, ids: &[String]) -> Result<Vec<String>> {
        handles(self.tx, ids)
    }
    fn note(&mut self, id: &str, kind: &str, detail: serde_json::Value) -> Result<()> {
        append(self.tx, id, self.now, kind, None, None, detail)
    }
}

impl Store {
    /// Imports a Taskwarrior export in one transaction: all of it or none of it.
    pub fn import(&mut self, tasks: &[TwTask], source: &str) -> Result<ImportReport> {
        self.write("importing tasks", |tx, now| {
            edits::import(&mut SqlTx { tx, now }, tasks, source)
        })
    }

    /// Makes `task` wait on each of `add` and stop waiting on each of `remove`, all in
    /// one transaction: an edge that would close a cycle refuses the whole change and
    /// the message names the cycle.
    pub fn change_deps(&mut self, task: &str, add: &[String], remove: &[String]) -> Result<()> {
        self.write("changing dependencies", |tx, now| {
            edits::change_deps(&mut SqlTx { tx, now }, task, add, remove)
        })
    }
}
