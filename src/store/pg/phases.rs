//! A task's phase and its end on PostgreSQL: the steps ([`PhaseTx`]) of the rules
//! written once in [`crate::store::phases`] (completing a phase, moving to a named one,
//! finishing a task as completed or deleted), each in one transaction that locks the
//! task's row, then its claim (the order a claim takes them), and reads the server's
//! clock after the locks. A task's flow is its project's, else the default
//! one set for every project, else `todo → review` ([`flow_of`]); setting a flow
//! ([`set_flow`]) locks the flows table against every transaction that read it, so a
//! task is never added or moved into a phase by a flow that is being replaced.

use super::steps::{in_transaction, PgSteps};
use super::{PgContext, PgStore};
use crate::clock::Micros;
use crate::error::Result;
use crate::store::phases::{self, check_flow, check_stranded, parse_flow, PhaseTx};
use crate::store::{Holder, PhaseOutcome};
use crate::task::Status;
use postgres::GenericClient;

/// The flow of `project`: its own, else the default set for every project (stored
/// under `''`), else the built-in one. Reading it holds the flows table's weakest
/// lock until the transaction ends, which [`set_flow`] waits for.
pub(super) fn flow_of(
    c: &mut impl GenericClient,
    at: &str,
    project: Option<&str>,
) -> Result<Vec<String>> {
    let stored: Option<String> = c
        .query_opt(
            "SELECT phases FROM flows WHERE project = $1 UNION ALL
             SELECT phases FROM flows WHERE project = '' LIMIT 1",
            &[&project.unwrap_or("")],
        )
        .ctx("to read a flow", at)?
        .map(|r| r.get(0));
    Ok(parse_flow(stored))
}

pub(super) fn flow(s: &mut PgStore, project: Option<&str>) -> Result<Vec<String>> {
    flow_of(&mut s.client, &s.at, project)
}

/// Sets the flow of `project` (`None`: the default for projects without one),
/// refused as SQLite's store refuses it. The flows table is locked first (`ACCESS
/// EXCLUSIVE`): every transaction that read a flow to add or move a task has ended,
/// so the open tasks read next are all there are, and none reads the old flow
/// before this one commits.
pub(super) fn set_flow(s: &mut PgStore, project: Option<&str>, phases: &[String]) -> Result<()> {
    check_flow(project, phases)?;
    let at = s.at.as_str();
    let mut tx = s.client.transaction().ctx("to set a flow", at)?;
    tx.batch_execute("LOCK TABLE flows IN ACCESS EXCLUSIVE MODE")
        .ctx("to lock the flows", at)?;
    let open: Vec<(String, String)> = tx
        .query(
            "SELECT id, phase FROM tasks WHERE status IN ('pending', 'waiting')
             AND ($1::text IS NULL OR project = $1)
             AND ($1::text IS NOT NULL OR project IS NULL
                  OR project NOT IN (SELECT project FROM flows WHERE project <> ''))
             ORDER BY entry, id",
            &[&project],
        )
        .ctx("to read the open tasks", at)?
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    check_stranded(&open, phases)?;
    tx.execute(
        "INSERT INTO flows (project, phases) VALUES ($1, $2)
         ON CONFLICT (project) DO UPDATE SET phases = EXCLUDED.phases",
        &[&project.unwrap_or(""), &phases.join(",")],
    )
    .ctx("to set a flow", at)?;
    tx.commit().ctx("to commit a flow", at)
}

impl PhaseTx for PgSteps<'_, '_> {
    fn lock_task(&mut self, id: &str) -> Result<(Option<String>, String, String)> {
        let r = self
            .tx
            .query_one(
                "SELECT project, phase, status FROM tasks WHERE id = $1 FOR UPDATE",
                &[&id],
            )
            .ctx("to lock a task", self.at)?;
        Ok((r.get(0), r.get(1), r.get(2)))
    }
    fn flow_of(&mut self, project: Option<&str>) -> Result<Vec<String>> {
        flow_of(self.tx, self.at, project)
    }
    fn set_task_phase(&mut self, id: &str, phase: &str, now: Micros) -> Result<()> {
        self.tx
            .execute(
                "UPDATE tasks SET phase = $2, modified = $3 WHERE id = $1",
                &[&id, &phase, &now],
            )
            .ctx("to set a phase", self.at)?;
        Ok(())
    }
    fn end_task(&mut self, id: &str, status: Status, now: Micros) -> Result<()> {
        self.tx
            .execute(
                "UPDATE tasks SET status = $2, end_at = $3, modified = $3 WHERE id = $1",
                &[&id, &status.as_str(), &now],
            )
            .ctx("to finish a task", self.at)?;
        Ok(())
    }
}

pub(super) fn set_phase(
    s: &mut PgStore,
    input: &str,
    phase: &str,
    holder: Option<&Holder>,
) -> Result<()> {
    in_transaction(s, "to set a phase", |t| {
        phases::set_phase(t, input, phase, holder)
    })
}

pub(super) fn finish(
    s: &mut PgStore,
    input: &str,
    holder: Option<&Holder>,
    to: Status,
) -> Result<String> {
    in_transaction(s, "to finish a task", |t| {
        phases::finish(t, input, holder, to)
    })
}

pub(super) fn complete_phase(
    s: &mut PgStore,
    input: &str,
    holder: Option<&Holder>,
) -> Result<PhaseOutcome> {
    in_transaction(s, "to complete a phase", |t| {
        phases::complete_phase(t, input, holder)
    })
}
