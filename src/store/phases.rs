//! Phase flows and the life of a task past its creation: moving through phases,
//! completing them, finishing and deleting. The rules are written once for both
//! backends, over the steps of one transaction ([`PhaseTx`]); a flow's checks too.
//!
//! Invariants: a task's phase is always one of its project's flow; completing a phase
//! or finishing a task releases its claim, since the next phase may be another lane's;
//! only the claim's holder may do either while the task is claimed.

use super::claims::{judge_holder, Holder};
use super::leases::LeaseTx;
use super::sqlite_steps::SqlTx;
use super::tasks::PhaseOutcome;
use super::Store;
use crate::clock::Micros;
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

    /// Moves a task to `phase` of its flow directly (an operator's correction).
    pub fn set_phase(&mut self, input: &str, phase: &str, holder: Option<&Holder>) -> Result<()> {
        self.write("setting a phase", |tx, now| {
            set_phase(&mut SqlTx { tx, now }, input, phase, holder)
        })
    }

    /// Completes the task's current phase: [`complete_phase`].
    pub fn complete_phase(&mut self, input: &str, holder: Option<&Holder>) -> Result<PhaseOutcome> {
        self.write("completing a phase", |tx, now| {
            complete_phase(&mut SqlTx { tx, now }, input, holder)
        })
    }

    /// Marks a task completed, whatever its phase, releasing its claim.
    pub fn done(&mut self, input: &str, holder: Option<&Holder>) -> Result<String> {
        self.write("finishing a task", |tx, now| {
            finish(&mut SqlTx { tx, now }, input, holder, Status::Completed)
        })
    }

    /// Marks a task deleted (kept, like Taskwarrior, so an export still carries it).
    pub fn delete(&mut self, input: &str, holder: Option<&Holder>) -> Result<String> {
        self.write("finishing a task", |tx, now| {
            finish(&mut SqlTx { tx, now }, input, holder, Status::Deleted)
        })
    }
}

/// The steps of one open transaction the phase rules add to a claim's
/// ([`LeaseTx`]). A backend that locks rows locks the task's before its claim's, the
/// order a claim takes them.
pub(crate) trait PhaseTx: LeaseTx {
    /// The task's project, phase and status, its row locked until the transaction
    /// ends where the backend locks rows.
    fn lock_task(&mut self, id: &str) -> Result<(Option<String>, String, String)>;
    /// The flow of `project` (its own, else the default).
    fn flow_of(&mut self, project: Option<&str>) -> Result<Vec<String>>;
    /// Moves the task to `phase`.
    fn set_task_phase(&mut self, id: &str, phase: &str, now: Micros) -> Result<()>;
    /// Ends the task as `status` (completed or deleted).
    fn end_task(&mut self, id: &str, status: Status, now: Micros) -> Result<()>;
}

/// A task locked for a change of phase or status, its holder judged.
struct Judged {
    id: String,
    project: Option<String>,
    phase: String,
    status: String,
    /// The fence the holder acts under (`None`: the task is not claimed).
    fence: Option<i64>,
    /// The authority's time, read after the locks.
    now: Micros,
}

/// Locks the task's row, then its claim's, reads the clock, and judges the holder in
/// `verb`'s words ([`judge_holder`]).
fn judge(t: &mut impl PhaseTx, input: &str, holder: Option<&Holder>, verb: &str) -> Result<Judged> {
    let id = t.resolve(input)?;
    let (project, phase, status) = t.lock_task(&id)?;
    let claim = t.lock_claim(&id)?;
    let now = t.now()?;
    let fence = judge_holder(&id, claim.as_ref(), holder, now, verb)?;
    Ok(Judged {
        id,
        project,
        phase,
        status,
        fence,
        now,
    })
}

/// Releases the claim the holder acted under, if the task was claimed: the next phase
/// may be another lane's, and a finished task is nobody's.
fn release_after(t: &mut impl PhaseTx, j: &Judged, claimant: Option<&str>) -> Result<()> {
    match j.fence {
        Some(f) => t.drop_claim(&j.id, f, j.now, "released", claimant),
        None => Ok(()),
    }
}

/// Moves a task to `phase` of its flow (an operator's correction; a claim stays).
pub(crate) fn set_phase(
    t: &mut impl PhaseTx,
    input: &str,
    phase: &str,
    holder: Option<&Holder>,
) -> Result<()> {
    let j = judge(t, input, holder, "set the phase of")?;
    let flow = t.flow_of(j.project.as_deref())?;
    check_phase_in(&j.id, j.project.as_deref(), phase, &flow)?;
    t.set_task_phase(&j.id, phase, j.now)?;
    let claimant = holder.map(|h| h.claimant.as_str());
    let detail = serde_json::json!({ "phase": phase });
    t.append(&j.id, j.now, ("phase_set", claimant, None), detail)
}

/// Completes the task's current phase: it moves to the next phase of its flow (or is
/// completed after the last), and its claim is released, since the next phase may
/// belong to another lane.
pub(crate) fn complete_phase(
    t: &mut impl PhaseTx,
    input: &str,
    holder: Option<&Holder>,
) -> Result<PhaseOutcome> {
    let j = judge(t, input, holder, "complete the phase of")?;
    if !Status::parse(&j.status).is_ok_and(Status::is_open) {
        let (id, status) = (&j.id, &j.status);
        return Err(Error::conflict(format!("task {id} is {status}, not open")));
    }
    let flow = t.flow_of(j.project.as_deref())?;
    let next = next_in_flow(&j.id, &j.phase, &flow)?;
    match &next {
        Some(to) => t.set_task_phase(&j.id, to, j.now)?,
        None => t.end_task(&j.id, Status::Completed, j.now)?,
    }
    let claimant = holder.map(|h| h.claimant.as_str());
    let detail = serde_json::json!({ "from": j.phase, "to": next });
    t.append(&j.id, j.now, ("phase_completed", claimant, j.fence), detail)?;
    release_after(t, &j, claimant)?;
    Ok(PhaseOutcome {
        from: j.phase,
        to: next,
    })
}

/// Marks an open task completed or deleted (`to`), whatever its phase, releasing its
/// claim.
pub(crate) fn finish(
    t: &mut impl PhaseTx,
    input: &str,
    holder: Option<&Holder>,
    to: Status,
) -> Result<String> {
    let (verb, kind) = finish_words(to);
    let j = judge(t, input, holder, verb)?;
    check_finishable(&j.id, &j.status)?;
    t.end_task(&j.id, to, j.now)?;
    let claimant = holder.map(|h| h.claimant.as_str());
    t.append(
        &j.id,
        j.now,
        (kind, claimant, j.fence),
        serde_json::json!({}),
    )?;
    release_after(t, &j, claimant)?;
    Ok(j.id)
}

/// Refuses a phase not in `flow`, the flow of task `id` (of `project`).
fn check_phase_in(id: &str, project: Option<&str>, phase: &str, flow: &[String]) -> Result<()> {
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
fn finish_words(to: Status) -> (&'static str, &'static str) {
    if to == Status::Completed {
        ("complete", "done")
    } else {
        ("delete", "deleted")
    }
}

/// Refuses to finish a task that is not open (`status` as stored).
fn check_finishable(id: &str, status: &str) -> Result<()> {
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
