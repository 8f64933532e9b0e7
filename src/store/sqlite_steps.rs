//! The SQLite steps of the rules both backends share, each over one `BEGIN IMMEDIATE`
//! transaction ([`SqlTx`]): the operator's graph edits ([`TaskTx`], `super::edits`:
//! `task dep`, `task import`), a held claim's renewal, hold, worktree, release and
//! takeover ([`LeaseTx`], `super::leases`), completing a phase, moving to one and
//! finishing a task ([`PhaseTx`], `super::phases`), and an agent's ACK or NACK on a
//! steering item ([`AckTx`], `super::acks`). SQLite has one writer, so a row read
//! inside the transaction is as good as locked.

use super::acks::{AckTx, NewAck};
use super::authority::Cell;
use super::claims::{claim_of, next_fence, successor_of};
use super::edits::{self, ImportReport, TaskTx};
use super::leases::{self, Handover, LeaseTx};
use super::ledger::append;
use super::phases::{flow_of, PhaseTx};
use super::resolve::resolve;
use super::target::{Target, TargetKind};
use super::tasks::{handles, insert_dep, insert_task};
use super::vocab::Checkpoint;
use super::{Claim, Holder, Store, Takeover};
use crate::clock::Micros;
use crate::error::{Error, Result};
use crate::task::taskwarrior::TwTask;
use crate::task::{NewTask, Priority, Status};
use rusqlite::{params, OptionalExtension, Transaction};
use std::time::Duration;

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

impl LeaseTx for SqlTx<'_, '_> {
    fn resolve(&mut self, input: &str) -> Result<String> {
        resolve(self.tx, input)
    }
    fn lock_claim(&mut self, id: &str) -> Result<Option<Claim>> {
        claim_of(self.tx, id)
    }
    fn now(&mut self) -> Result<Micros> {
        Ok(self.now)
    }
    fn cell_of(&mut self, id: &str) -> Result<Cell> {
        super::claims::cell_of(self.tx, id)
    }
    fn successor_of(&mut self, id: &str, claimant: &str) -> Result<Option<String>> {
        successor_of(self.tx, id, claimant)
    }
    fn extend(&mut self, id: &str, fence: i64, until: Micros, now: Micros) -> Result<()> {
        self.tx.execute(
            "UPDATE claims SET lease_until = ?3, renewed_at = ?4 WHERE task_id = ?1 AND fence = ?2",
            params![id, fence, until, now],
        )?;
        Ok(())
    }
    fn set_worktree(&mut self, id: &str, fence: i64, worktree: &str) -> Result<()> {
        self.tx.execute(
            "UPDATE claims SET worktree = ?3 WHERE task_id = ?1 AND fence = ?2",
            params![id, fence, worktree],
        )?;
        Ok(())
    }
    fn hand_over(&mut self, id: &str, fence: i64, to: &Handover<'_>, now: Micros) -> Result<i64> {
        let new = next_fence(self.tx)?;
        self.tx.execute(
            "UPDATE claims SET claimant = ?3, lane = ?4, worktree = ?5, fence = ?6,
               lease_until = ?7, renewed_at = ?8,
               claimed_at = CASE WHEN ?9 THEN ?8 ELSE claimed_at END
             WHERE task_id = ?1 AND fence = ?2",
            params![
                id,
                fence,
                to.claimant,
                to.lane,
                to.worktree,
                new,
                to.until,
                now,
                to.afresh
            ],
        )?;
        Ok(new)
    }
    fn drop_claim(
        &mut self,
        id: &str,
        _fence: i64,
        now: Micros,
        kind: &str,
        actor: Option<&str>,
    ) -> Result<()> {
        super::claims::drop_claim(self.tx, id, now, kind, actor)
    }
    fn append(
        &mut self,
        id: &str,
        now: Micros,
        (kind, actor, fence): (&str, Option<&str>, Option<i64>),
        detail: serde_json::Value,
    ) -> Result<()> {
        append(self.tx, id, now, kind, actor, fence, detail)
    }
    fn claim(&mut self, id: &str) -> Result<Claim> {
        claim_of(self.tx, id)?.ok_or_else(|| Error::Other(format!("claim on {id} vanished")))
    }
}

impl PhaseTx for SqlTx<'_, '_> {
    fn lock_task(&mut self, id: &str) -> Result<(Option<String>, String, String)> {
        Ok(self
            .tx
            .prepare_cached("SELECT project, phase, status FROM tasks WHERE id = ?1")?
            .query_row([id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?)
    }
    fn flow_of(&mut self, project: Option<&str>) -> Result<Vec<String>> {
        flow_of(self.tx, project)
    }
    fn set_task_phase(&mut self, id: &str, phase: &str, now: Micros) -> Result<()> {
        self.tx.execute(
            "UPDATE tasks SET phase = ?2, modified = ?3 WHERE id = ?1",
            params![id, phase, now],
        )?;
        Ok(())
    }
    fn end_task(&mut self, id: &str, status: Status, now: Micros) -> Result<()> {
        self.tx.execute(
            "UPDATE tasks SET status = ?2, end_at = ?3, modified = ?3 WHERE id = ?1",
            params![id, status.as_str(), now],
        )?;
        Ok(())
    }
}

impl AckTx for SqlTx<'_, '_> {
    fn sweep(&mut self, now: Micros) -> Result<()> {
        self.tx
            .prepare_cached(
                "UPDATE steering SET state = 'expired', closed_at = expires
                 WHERE state = 'pending' AND expires <= ?1",
            )?
            .execute([now])?;
        Ok(())
    }
    fn lock_item(&mut self, key: &str) -> Result<Option<(String, Micros, Target)>> {
        Ok(self
            .tx
            .prepare_cached(
                "SELECT state, expires, target_kind, target FROM steering WHERE key = ?1",
            )?
            .query_row([key], |r| {
                let kind: String = r.get(2)?;
                let target = Target {
                    kind: TargetKind::parse(&kind),
                    name: r.get(3)?,
                };
                Ok((r.get(0)?, r.get(1)?, target))
            })
            .optional()?)
    }
    fn seen(&mut self, key: &str, polarity: &str, source: &str, line: i64) -> Result<bool> {
        Ok(self
            .tx
            .prepare_cached(
                "SELECT 1 FROM acks WHERE key = ?1 AND polarity = ?2 AND source = ?3 AND line = ?4",
            )?
            .exists(params![key, polarity, source, line])?)
    }
    fn retire(&mut self, key: &str, state: &str, now: Micros) -> Result<()> {
        self.tx
            .prepare_cached(
                "UPDATE steering SET state = ?2, closed_at = ?3, problem = NULL
                 WHERE key = ?1 AND state = 'pending'",
            )?
            .execute(params![key, state, now])?;
        Ok(())
    }
    fn set_problem(&mut self, key: &str, problem: &str) -> Result<()> {
        self.tx
            .prepare_cached("UPDATE steering SET problem = ?2 WHERE key = ?1")?
            .execute(params![key, problem])?;
        Ok(())
    }
    fn record(&mut self, a: &NewAck<'_>, now: Micros) -> Result<bool> {
        let n = self
            .tx
            .prepare_cached(
                "INSERT INTO acks (key, polarity, body, source, line, at, effect)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) ON CONFLICT DO NOTHING",
            )?
            .execute(params![
                a.key,
                a.polarity,
                a.body,
                a.source,
                a.line,
                now,
                a.effect.as_str()
            ])?;
        Ok(n == 1)
    }
    fn move_checkpoint(&mut self, path: &str, cp: Checkpoint, now: Micros) -> Result<()> {
        self.tx
            .prepare_cached(
                "INSERT INTO transcript_checkpoints (path, offset, line, hash, updated)
                 VALUES (?1, ?2, ?3, ?4, ?5)
                 ON CONFLICT (path) DO UPDATE SET offset = excluded.offset, line = excluded.line,
                 hash = excluded.hash, updated = excluded.updated",
            )?
            .execute(params![
                path,
                cp.offset as i64,
                cp.line as i64,
                cp.hash as i64,
                now
            ])?;
        Ok(())
    }
}

impl Store {
    /// Extends the holder's lease (never shortening it); with `successor`, passes the
    /// claim to the successor session under a new fence without releasing it.
    pub fn renew(
        &mut self,
        input: &str,
        holder: &Holder,
        successor: Option<&str>,
        lease: Duration,
    ) -> Result<Claim> {
        self.write("renewing a claim", |tx, now| {
            leases::renew(&mut SqlTx { tx, now }, input, holder, successor, lease)
        })
    }

    /// A renewal before the holder acts outside the store: [`leases::hold`].
    pub fn hold(
        &mut self,
        input: &str,
        holder: &Holder,
        lease: Duration,
        verb: &str,
    ) -> Result<Claim> {
        self.write("renewing a claim", |tx, now| {
            leases::hold(&mut SqlTx { tx, now }, input, holder, lease, verb)
        })
    }

    /// Records where the holder works on the task.
    pub fn set_claim_worktree(
        &mut self,
        input: &str,
        holder: &Holder,
        worktree: &str,
    ) -> Result<()> {
        self.write("recording a worktree", |tx, now| {
            leases::set_worktree(&mut SqlTx { tx, now }, input, holder, worktree)
        })
    }

    /// Gives the task back: it becomes ready again for anyone.
    pub fn release(&mut self, input: &str, holder: &Holder) -> Result<String> {
        self.write("releasing a claim", |tx, now| {
            leases::release(&mut SqlTx { tx, now }, input, holder)
        })
    }

    /// Takes over a claim whose lease has lapsed (or any, with `force`), but only the
    /// exact holding the caller saw: [`leases::takeover`].
    pub fn takeover(&mut self, input: &str, t: &Takeover) -> Result<Claim> {
        self.write("taking over a claim", |tx, now| {
            leases::takeover(&mut SqlTx { tx, now }, input, t)
        })
    }

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
