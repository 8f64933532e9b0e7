//! The operator's edits of tasks on PostgreSQL: modify and annotate, and the edits
//! written once for both backends ([`crate::store::edits`]: dependencies, imports),
//! whose steps [`PgTx`] takes in one transaction.
//!
//! Invariants: a task's row is locked (`FOR UPDATE`) before it is judged, as a claim
//! locks it, so an import never rewrites a task a claim takes meanwhile; dependency
//! edits lock `deps` against each other (`SHARE ROW EXCLUSIVE`), so two edits that
//! each close half of a cycle cannot both pass their check, as SQLite's one writer
//! guarantees.

use super::claims::locked_claim;
use super::phases::flow_of;
use super::tasks::{
    annotate_row, append, handles, insert_dep, insert_task, one, resolve, server_now, tag_row,
};
use super::{PgContext, PgStore};
use crate::clock::Micros;
use crate::error::Result;
use crate::store::edits::{self, ImportReport, TaskTx};
use crate::store::tasks::check_update;
use crate::store::{Claim, TaskUpdate};
use crate::task::taskwarrior::TwTask;
use crate::task::{NewTask, Priority, Status, Task};
use postgres::types::ToSql;
use postgres::Transaction;

/// One transaction and the server's time it writes at.
struct PgTx<'a, 'b> {
    tx: &'a mut Transaction<'b>,
    at: &'a str,
    now: Micros,
}

impl TaskTx for PgTx<'_, '_> {
    fn resolve(&mut self, input: &str) -> Result<String> {
        resolve(self.tx, self.at, input)
    }
    fn id_of_uuid(&mut self, uuid: &str) -> Result<Option<String>> {
        let row = self
            .tx
            .query_opt("SELECT id FROM tasks WHERE uuid = $1", &[&uuid])
            .ctx("to look up a task", self.at)?;
        Ok(row.map(|r| r.get(0)))
    }
    fn claim_on(&mut self, id: &str) -> Result<Option<Claim>> {
        self.tx
            .execute("SELECT 1 FROM tasks WHERE id = $1 FOR UPDATE", &[&id])
            .ctx("to lock a task", self.at)?;
        locked_claim(self.tx, self.at, id)
    }
    fn insert_task(&mut self, new: &NewTask) -> Result<String> {
        insert_task(self.tx, self.at, new, self.now)
    }
    fn overwrite_task(&mut self, id: &str, tw: &TwTask) -> Result<()> {
        let (tx, at, n) = (&mut *self.tx, self.at, &tw.new);
        let current: String = tx
            .query_one("SELECT phase FROM tasks WHERE id = $1", &[&id])
            .ctx("to read a task", at)?
            .get(0);
        let flow = flow_of(tx, at, n.project.as_deref())?;
        let phase = edits::imported_phase(tw, current, &flow)?;
        tx.execute(
            "UPDATE tasks SET title = $2, body = $3, project = $4, phase = $5, priority = $6,
               due = $7, wait = $8, status = $9, end_at = $10, modified = $11 WHERE id = $1",
            &[
                &id,
                &n.title,
                &n.body,
                &n.project,
                &phase,
                &n.priority.map(Priority::as_str),
                &n.due,
                &n.wait,
                &n.status.unwrap_or(Status::Pending).as_str(),
                &n.end,
                &self.now,
            ],
        )
        .ctx("to import a task", at)?;
        tx.execute("DELETE FROM tags WHERE task_id = $1", &[&id])
            .ctx("to import a task", at)?;
        for t in &n.tags {
            tag_row(tx, at, id, t)?;
        }
        tx.execute("DELETE FROM annotations WHERE task_id = $1", &[&id])
            .ctx("to import a task", at)?;
        for a in &n.annotations {
            annotate_row(tx, at, id, a.entry, &a.description)?;
        }
        Ok(())
    }
    fn waits_on(&mut self, id: &str) -> Result<Vec<String>> {
        let rows = self
            .tx
            .query(
                "SELECT dep_id FROM deps WHERE task_id = $1 ORDER BY dep_id COLLATE \"C\"",
                &[&id],
            )
            .ctx("to read dependencies", self.at)?;
        Ok(rows.iter().map(|r| r.get(0)).collect())
    }
    fn insert_dep(&mut self, id: &str, dep: &str) -> Result<()> {
        insert_dep(self.tx, self.at, id, dep)
    }
    fn delete_dep(&mut self, id: &str, dep: &str) -> Result<bool> {
        let n = self
            .tx
            .execute(
                "DELETE FROM deps WHERE task_id = $1 AND dep_id = $2",
                &[&id, &dep],
            )
            .ctx("to remove a dependency", self.at)?;
        Ok(n > 0)
    }
    fn clear_deps(&mut self, id: &str) -> Result<()> {
        self.tx
            .execute("DELETE FROM deps WHERE task_id = $1", &[&id])
            .ctx("to remove dependencies", self.at)?;
        Ok(())
    }
    fn edges(&mut self) -> Result<Vec<(String, String)>> {
        let rows = self
            .tx
            .query(
                "SELECT task_id, dep_id FROM deps
                 ORDER BY task_id COLLATE \"C\", dep_id COLLATE \"C\"",
                &[],
            )
            .ctx("to read dependencies", self.at)?;
        Ok(rows.iter().map(|r| (r.get(0), r.get(1))).collect())
    }
    fn handles(&mut self, ids: &[String]) -> Result<Vec<String>> {
        handles(self.tx, self.at, ids)
    }
    fn note(&mut self, id: &str, kind: &str, detail: serde_json::Value) -> Result<()> {
        append(self.tx, self.at, (id, self.now, kind), None, None, detail)
    }
}

/// Runs `edit` over the steps of one transaction that holds `deps` against other
/// dependency edits, and commits it.
fn graph_edit<T>(
    s: &mut PgStore,
    what: &str,
    edit: impl FnOnce(&mut PgTx<'_, '_>) -> Result<T>,
) -> Result<T> {
    let at = s.at.as_str();
    let mut tx = s.client.transaction().ctx(what, at)?;
    tx.batch_execute("LOCK TABLE deps IN SHARE ROW EXCLUSIVE MODE")
        .ctx(what, at)?;
    let now = server_now(&mut tx, at)?;
    let out = edit(&mut PgTx {
        tx: &mut tx,
        at,
        now,
    })?;
    tx.commit().ctx(what, at)?;
    Ok(out)
}

pub(super) fn change_deps(
    s: &mut PgStore,
    input: &str,
    add: &[String],
    remove: &[String],
) -> Result<()> {
    graph_edit(s, "to change dependencies", |t| {
        edits::change_deps(t, input, add, remove)
    })
}

pub(super) fn import(s: &mut PgStore, tasks: &[TwTask], source: &str) -> Result<ImportReport> {
    graph_edit(s, "to import tasks", |t| edits::import(t, tasks, source))
}

/// Changes a task's descriptive fields, each in a statement of its own as on SQLite,
/// so the same columns move the same generations.
pub(super) fn modify(s: &mut PgStore, input: &str, up: &TaskUpdate) -> Result<Task> {
    let at = s.at.as_str();
    let mut tx = s.client.transaction().ctx("to modify a task", at)?;
    let id = resolve(&mut tx, at, input)?;
    let phase: String = tx
        .query_one("SELECT phase FROM tasks WHERE id = $1 FOR UPDATE", &[&id])
        .ctx("to lock a task", at)?
        .get(0);
    check_update(up, &phase, |p| flow_of(&mut tx, at, p))?;
    let now = server_now(&mut tx, at)?;
    let priority = up.priority.map(|p| p.map(Priority::as_str));
    let fields: [(&str, Option<&(dyn ToSql + Sync)>); 5] = [
        ("title", up.title.as_ref().map(|v| v as _)),
        ("body", up.body.as_ref().map(|v| v as _)),
        ("project", up.project.as_ref().map(|v| v as _)),
        ("priority", priority.as_ref().map(|v| v as _)),
        ("due", up.due.as_ref().map(|v| v as _)),
    ];
    for (column, value) in fields {
        if let Some(value) = value {
            let sql = format!("UPDATE tasks SET {column} = $2 WHERE id = $1");
            tx.execute(sql.as_str(), &[&id, value])
                .ctx("to modify a task", at)?;
        }
    }
    for t in &up.add_tags {
        tag_row(&mut tx, at, &id, t)?;
    }
    for t in &up.remove_tags {
        tx.execute(
            "DELETE FROM tags WHERE task_id = $1 AND tag = $2",
            &[&id, t],
        )
        .ctx("to untag a task", at)?;
    }
    tx.execute("UPDATE tasks SET modified = $2 WHERE id = $1", &[&id, &now])
        .ctx("to modify a task", at)?;
    append(
        &mut tx,
        at,
        (&id, now, "modified"),
        None,
        None,
        serde_json::json!({}),
    )?;
    tx.commit().ctx("to commit a task's change", at)?;
    one(s, &id)
}

/// Adds a note to a task (no ledger entry, as on SQLite: a note is its own record).
pub(super) fn annotate(s: &mut PgStore, input: &str, text: &str) -> Result<Task> {
    let at = s.at.as_str();
    let mut tx = s.client.transaction().ctx("to annotate a task", at)?;
    let id = resolve(&mut tx, at, input)?;
    let now = server_now(&mut tx, at)?;
    annotate_row(&mut tx, at, &id, now, text)?;
    tx.execute("UPDATE tasks SET modified = $2 WHERE id = $1", &[&id, &now])
        .ctx("to annotate a task", at)?;
    tx.commit().ctx("to commit an annotation", at)?;
    one(s, &id)
}
