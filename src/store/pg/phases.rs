//! A task's phase and its end on PostgreSQL: completing a phase, moving to a named
//! one, finishing a task as completed or deleted. Each is one transaction that locks
//! the task's row, then its claim (the order a claim takes them), reads the server's
//! clock after the locks, judges the holder by the rule shared with SQLite
//! ([`crate::store::claims`]'s `judge_holder`) and releases the claim under its fence
//! where SQLite's store releases it. A task's flow is its project's, else the default
//! one set for every project, else `todo → review` ([`flow_of`]); setting a flow
//! ([`set_flow`]) locks the flows table against every transaction that read it, so a
//! task is never added or moved into a phase by a flow that is being replaced.

use super::claims::{drop_claim, locked_claim};
use super::tasks::{append, resolve, server_now};
use super::{PgContext, PgStore};
use crate::clock::Micros;
use crate::error::{Error, Result};
use crate::store::claims::judge_holder;
use crate::store::phases::{
    check_finishable, check_flow, check_phase_in, check_stranded, finish_words, next_in_flow,
    parse_flow,
};
use crate::store::{Holder, PhaseOutcome};
use crate::task::Status;
use postgres::{GenericClient, Transaction};

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

/// A task locked for a change of phase or status, as its row read.
struct Locked {
    project: Option<String>,
    phase: String,
    status: String,
    /// The fence the holder acts under (`None`: the task is not claimed).
    fence: Option<i64>,
    /// The server's clock, read after the locks.
    now: Micros,
}

/// Locks the task's row, then its claim's, and judges the holder in `verb`'s words.
fn lock(
    tx: &mut Transaction<'_>,
    at: &str,
    id: &str,
    holder: Option<&Holder>,
    verb: &str,
) -> Result<Locked> {
    let r = tx
        .query_one(
            "SELECT project, phase, status FROM tasks WHERE id = $1 FOR UPDATE",
            &[&id],
        )
        .ctx("to lock a task", at)?;
    let claim = locked_claim(tx, at, id)?;
    let now = server_now(tx, at)?;
    let fence = judge_holder(id, claim.as_ref(), holder, now, verb)?;
    Ok(Locked {
        project: r.get(0),
        phase: r.get(1),
        status: r.get(2),
        fence,
        now,
    })
}

/// Moves a task to `phase` of its flow (an operator's correction; the claim stays).
pub(super) fn set_phase(
    s: &mut PgStore,
    input: &str,
    phase: &str,
    holder: Option<&Holder>,
) -> Result<()> {
    let at = s.at.as_str();
    let mut tx = s.client.transaction().ctx("to set a phase", at)?;
    let id = resolve(&mut tx, at, input)?;
    let Locked { project, now, .. } = lock(&mut tx, at, &id, holder, "set the phase of")?;
    let flow = flow_of(&mut tx, at, project.as_deref())?;
    check_phase_in(&id, project.as_deref(), phase, &flow)?;
    tx.execute(
        "UPDATE tasks SET phase = $2, modified = $3 WHERE id = $1",
        &[&id, &phase, &now],
    )
    .ctx("to set a phase", at)?;
    append(
        &mut tx,
        at,
        (&id, now, "phase_set"),
        holder.map(|h| h.claimant.as_str()),
        None,
        serde_json::json!({ "phase": phase }),
    )?;
    tx.commit().ctx("to commit a phase", at)
}

/// Marks an open task completed or deleted (`to`), releasing its claim.
pub(super) fn finish(
    s: &mut PgStore,
    input: &str,
    holder: Option<&Holder>,
    to: Status,
) -> Result<String> {
    let at = s.at.as_str();
    let mut tx = s.client.transaction().ctx("to finish a task", at)?;
    let id = resolve(&mut tx, at, input)?;
    let (verb, kind) = finish_words(to);
    let Locked {
        status, fence, now, ..
    } = lock(&mut tx, at, &id, holder, verb)?;
    check_finishable(&id, &status)?;
    tx.execute(
        "UPDATE tasks SET status = $2, end_at = $3, modified = $3 WHERE id = $1",
        &[&id, &to.as_str(), &now],
    )
    .ctx("to finish a task", at)?;
    let claimant = holder.map(|h| h.claimant.as_str());
    append(
        &mut tx,
        at,
        (&id, now, kind),
        claimant,
        fence,
        serde_json::json!({}),
    )?;
    if let Some(f) = fence {
        drop_claim(&mut tx, at, &id, f, now, ("released", claimant))?;
    }
    tx.commit().ctx("to commit a finished task", at)?;
    Ok(id)
}

/// Completes the task's phase in its flow, releasing its claim under the holder's
/// fence.
pub(super) fn complete_phase(
    s: &mut PgStore,
    input: &str,
    holder: Option<&Holder>,
) -> Result<PhaseOutcome> {
    let at = s.at.as_str();
    let mut tx = s.client.transaction().ctx("to complete a phase", at)?;
    let id = resolve(&mut tx, at, input)?;
    let Locked {
        project,
        phase,
        status,
        fence,
        now,
    } = lock(&mut tx, at, &id, holder, "complete the phase of")?;
    if !Status::parse(&status).is_ok_and(Status::is_open) {
        return Err(Error::conflict(format!("task {id} is {status}, not open")));
    }
    let next = next_in_flow(&id, &phase, &flow_of(&mut tx, at, project.as_deref())?)?;
    match &next {
        Some(to) => tx.execute(
            "UPDATE tasks SET phase = $2, modified = $3 WHERE id = $1",
            &[&id, to, &now],
        ),
        None => tx.execute(
            "UPDATE tasks SET status = 'completed', end_at = $2, modified = $2 WHERE id = $1",
            &[&id, &now],
        ),
    }
    .ctx("to complete a phase", at)?;
    let claimant = holder.map(|h| h.claimant.as_str());
    append(
        &mut tx,
        at,
        (&id, now, "phase_completed"),
        claimant,
        fence,
        serde_json::json!({ "from": phase, "to": next }),
    )?;
    if let Some(f) = fence {
        drop_claim(&mut tx, at, &id, f, now, ("released", claimant))?;
    }
    tx.commit().ctx("to commit a phase", at)?;
    Ok(PhaseOutcome {
        from: phase,
        to: next,
    })
}
