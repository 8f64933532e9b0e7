//! Phase flows and the life of a task past its creation: moving through phases,
//! completing them, finishing and deleting.
//!
//! Invariants: a task's phase is always one of its project's flow; completing a phase
//! or finishing a task releases its claim, since the next phase may be another lane's;
//! only the claim's holder may do either while the task is claimed.

use super::claims::{check_holder, drop_claim, Holder};
use super::ledger::append;
use super::resolve::resolve;
use super::tasks::PhaseOutcome;
use super::Store;
use crate::error::{Error, Result};
use crate::task::{check_name, handle, Status, DEFAULT_FLOW};
use rusqlite::{params, OptionalExtension, Transaction};
use std::collections::HashSet;

impl Store {
    /// The phase flow of `project` (its own, else the default flow).
    pub fn flow(&mut self, project: Option<&str>) -> Result<Vec<String>> {
        self.read("reading a flow", |tx, _| flow_of(tx, project))
    }

    /// Sets the flow of `project` (`None` = the default for projects without one).
    /// Refused if open tasks sit in a phase the new flow drops.
    pub fn set_flow(&mut self, project: Option<&str>, phases: &[String]) -> Result<()> {
        check_flow(project, phases)?;
        self.write("setting a flow", |tx, _| {
            let mut stmt = tx.prepare(
                "SELECT id, phase FROM tasks WHERE status IN ('pending', 'waiting')
                 AND (?1 IS NULL OR project = ?1)
                 AND (?1 IS NOT NULL OR project IS NULL
                      OR project NOT IN (SELECT project FROM flows WHERE project != ''))",
            )?;
            let open: Vec<(String, String)> = stmt
                .query_map([project], |r| Ok((r.get(0)?, r.get(1)?)))?
                .collect::<std::result::Result<Vec<_>, _>>()?;
            check_stranded(&open, phases)?;
            tx.execute(
                "INSERT INTO flows (project, phases) VALUES (?1, ?2)
                 ON CONFLICT (project) DO UPDATE SET phases = excluded.phases",
                params![project.unwrap_or(""), phases.join(",")],
            )?;
            Ok(())
        })
    }

    /// Moves a task to `phase` directly (an operator's correction).
    pub fn set_phase(&mut self, input: &str, phase: &str, holder: Option<&Holder>) -> Result<()> {
        let claimant = holder.map(|h| h.claimant.as_str());
        self.write("setting a phase", |tx, now| {
            let id = resolve(tx, input)?;
            check_holder(tx, &id, holder, now, "set the phase of")?;
            let project: Option<String> =
                tx.query_row("SELECT project FROM tasks WHERE id = ?1", [&id], |r| {
                    r.get(0)
                })?;
            check_phase_in(
                &id,
                project.as_deref(),
                phase,
                &flow_of(tx, project.as_deref())?,
            )?;
            tx.execute(
                "UPDATE tasks SET phase = ?2, modified = ?3 WHERE id = ?1",
                params![id, phase, now],
            )?;
            append(
                tx,
                &id,
                now,
                "phase_set",
                claimant,
                None,
                serde_json::json!({ "phase": phase }),
            )?;
            Ok(())
        })
    }

    /// Completes the task's current phase: it moves to the next phase of its flow (or
    /// is completed after the last), and its claim is released, since the next phase
    /// may belong to another lane.
    pub fn complete_phase(&mut self, input: &str, holder: Option<&Holder>) -> Result<PhaseOutcome> {
        let claimant = holder.map(|h| h.claimant.as_str());
        self.write("completing a phase", |tx, now| {
            let id = resolve(tx, input)?;
            let fence = check_holder(tx, &id, holder, now, "complete the phase of")?;
            let (project, phase, status): (Option<String>, String, String) = tx.query_row(
                "SELECT project, phase, status FROM tasks WHERE id = ?1",
                [&id],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )?;
            if !Status::parse(&status).is_ok_and(Status::is_open) {
                return Err(Error::conflict(format!("task {id} is {status}, not open")));
            }
            let next = next_in_flow(&id, &phase, &flow_of(tx, project.as_deref())?)?;
            match &next {
                Some(to) => {
                    tx.execute(
                        "UPDATE tasks SET phase = ?2, modified = ?3 WHERE id = ?1",
                        params![id, to, now],
                    )?;
                }
                None => {
                    tx.execute(
                        "UPDATE tasks SET status = 'completed', end_at = ?2, modified = ?2 WHERE id = ?1",
                        params![id, now],
                    )?;
                }
            }
            append(
                tx,
                &id,
                now,
                "phase_completed",
                claimant,
                fence,
                serde_json::json!({ "from": phase, "to": next }),
            )?;
            if fence.is_some() {
                drop_claim(tx, &id, now, "released", claimant)?;
            }
            Ok(PhaseOutcome { from: phase, to: next })
        })
    }

    /// Marks a task completed, whatever its phase, releasing its claim.
    pub fn done(&mut self, input: &str, holder: Option<&Holder>) -> Result<String> {
        self.finish(input, holder, Status::Completed)
    }

    /// Marks a task deleted (kept, like Taskwarrior, so an export still carries it).
    pub fn delete(&mut self, input: &str, holder: Option<&Holder>) -> Result<String> {
        self.finish(input, holder, Status::Deleted)
    }

    fn finish(&mut self, input: &str, holder: Option<&Holder>, to: Status) -> Result<String> {
        let claimant = holder.map(|h| h.claimant.as_str());
        self.write("finishing a task", |tx, now| {
            let id = resolve(tx, input)?;
            let (verb, kind) = finish_words(to);
            let fence = check_holder(tx, &id, holder, now, verb)?;
            let status: String =
                tx.query_row("SELECT status FROM tasks WHERE id = ?1", [&id], |r| {
                    r.get(0)
                })?;
            check_finishable(&id, &status)?;
            tx.execute(
                "UPDATE tasks SET status = ?2, end_at = ?3, modified = ?3 WHERE id = ?1",
                params![id, to.as_str(), now],
            )?;
            append(tx, &id, now, kind, claimant, fence, serde_json::json!({}))?;
            if fence.is_some() {
                drop_claim(tx, &id, now, "released", claimant)?;
            }
            Ok(id)
        })
    }
}

/// Refuses a phase not in `flow`, the flow of task `id` (of `project`).
pub(super) fn check_phase_in(
    id: &str,
    project: Option<&str>,
    phase: &str,
    flow: &[String],
) -> Result<()> {
    if flow.iter().any(|p| p == phase) {
        return Ok(());
    }
    Err(Error::input(format!(
        "phase '{phase}' is not in the flow of {} ({})",
        handle(project, id),
        flow.join(" → ")
    )))
}

/// The verb refusals use and the ledger's kind for finishing a task as `to`
/// (completed or deleted).
pub(super) fn finish_words(to: Status) -> (&'static str, &'static str) {
    if to == Status::Completed {
        ("complete", "done")
    } else {
        ("delete", "deleted")
    }
}

/// Refuses to finish a task that is not open (`status` as stored).
pub(super) fn check_finishable(id: &str, status: &str) -> Result<()> {
    if Status::parse(status).is_ok_and(Status::is_open) {
        return Ok(());
    }
    Err(Error::conflict(format!("task {id} is already {status}")))
}

/// A flow's own checks (every backend's): a valid project name, at least one phase,
/// each a valid name and none twice.
pub(crate) fn check_flow(project: Option<&str>, phases: &[String]) -> Result<()> {
    if let Some(p) = project {
        check_name("project", p).map_err(Error::input)?;
    }
    if phases.is_empty() {
        return Err(Error::input("a flow needs at least one phase"));
    }
    let mut seen = HashSet::new();
    for p in phases {
        check_name("phase", p).map_err(Error::input)?;
        if !seen.insert(p) {
            return Err(Error::input(format!(
                "phase '{p}' appears twice in the flow"
            )));
        }
    }
    Ok(())
}

/// Refuses a new flow `phases` that drops a phase one of the `open` tasks (id, phase)
/// the flow governs is in (every backend's rule and words).
pub(crate) fn check_stranded(open: &[(String, String)], phases: &[String]) -> Result<()> {
    let stranded: Vec<&(String, String)> =
        open.iter().filter(|(_, ph)| !phases.contains(ph)).collect();
    match stranded.first() {
        Some((id, ph)) => Err(Error::input(format!(
            "the new flow drops phase '{ph}', which {} open task(s) are in (first: {id})",
            stranded.len()
        ))),
        None => Ok(()),
    }
}

/// The phase after `phase` in task `id`'s `flow` (`None`: it was the last, so the
/// task completes); refused when the task's phase is not in its flow (every backend's
/// rule and words).
pub(crate) fn next_in_flow(id: &str, phase: &str, flow: &[String]) -> Result<Option<String>> {
    let pos = flow.iter().position(|p| p == phase).ok_or_else(|| {
        Error::input(format!(
            "task {id} is in phase '{phase}', which is not in its flow ({}): move it with `spice task phase {id} PHASE`",
            flow.join(" → ")
        ))
    })?;
    Ok(flow.get(pos + 1).cloned())
}

/// The phases of a flow as stored (comma-separated), else the default flow.
pub(crate) fn parse_flow(stored: Option<String>) -> Vec<String> {
    match stored {
        Some(p) => p.split(',').map(str::to_string).collect(),
        None => DEFAULT_FLOW.iter().map(|s| s.to_string()).collect(),
    }
}

pub(super) fn flow_of(tx: &Transaction<'_>, project: Option<&str>) -> Result<Vec<String>> {
    let mut stmt = tx.prepare_cached(
        "SELECT phases FROM flows WHERE project = ?1 UNION ALL
         SELECT phases FROM flows WHERE project = '' LIMIT 1",
    )?;
    let phases: Option<String> = stmt
        .query_row([project.unwrap_or("")], |r| r.get(0))
        .optional()?;
    Ok(parse_flow(phases))
}
