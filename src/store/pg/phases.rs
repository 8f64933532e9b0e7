//! A task's phase and its end on PostgreSQL: completing a phase, moving to a named
//! one, finishing a task as completed or deleted. Each is one transaction that locks
//! the task's row, then its claim (the order a claim takes them), reads the server's
//! clock after the locks, judges the holder by the rule shared with SQLite
//! ([`crate::store::claims`]'s `judge_holder`) and releases the claim under its fence
//! where SQLite's store releases it. Only the default flow is on PostgreSQL yet.

use super::claims::{drop_claim, locked_claim};
use super::tasks::{append, flow, resolve, server_now};
use super::{PgContext, PgStore};
use crate::clock::Micros;
use crate::error::{Error, Result};
use crate::store::claims::judge_holder;
use crate::store::phases::{check_finishable, check_phase_in, finish_words};
use crate::store::{Holder, PhaseOutcome};
use crate::task::{Status, DEFAULT_FLOW};
use postgres::Transaction;

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
    check_phase_in(&id, project.as_deref(), phase, &flow())?;
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

/// Completes the task's phase in the default flow (the only one on PostgreSQL yet),
/// releasing its claim under the holder's fence.
pub(super) fn complete_phase(
    s: &mut PgStore,
    input: &str,
    holder: Option<&Holder>,
) -> Result<PhaseOutcome> {
    let at = s.at.as_str();
    let mut tx = s.client.transaction().ctx("to complete a phase", at)?;
    let id = resolve(&mut tx, at, input)?;
    let Locked {
        phase,
        status,
        fence,
        now,
        ..
    } = lock(&mut tx, at, &id, holder, "complete the phase of")?;
    if !Status::parse(&status).is_ok_and(Status::is_open) {
        return Err(Error::conflict(format!("task {id} is {status}, not open")));
    }
    let pos = DEFAULT_FLOW
        .iter()
        .position(|p| *p == phase)
        .ok_or_else(|| {
            Error::input(format!(
                "task {id} is in phase '{phase}', which is not in its flow ({})",
                DEFAULT_FLOW.join(" → ")
            ))
        })?;
    let next = DEFAULT_FLOW.get(pos + 1).map(|p| p.to_string());
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
