//! The claim writes a supervisor makes besides claiming, renewing and releasing, by the
//! SQLite store's rules ([`crate::store::claims`]): a hold (a renewal before the holder
//! acts outside the store) and the claim's worktree. Each is one transaction that locks
//! the claim (`FOR UPDATE`), reads the server's clock after the lock, judges the holder
//! by the shared rule (`judge_holder`), and writes under `WHERE fence = $f`.

use super::claims::{claim_of, locked_claim};
use super::tasks::{resolve, server_now};
use super::{PgContext, PgStore};
use crate::error::{Error, Result};
use crate::store::claims::{judge_holder, lease_end};
use crate::store::{Claim, Holder};
use std::time::Duration;

/// Refused in `verb`'s words unless `holder` holds the task (under its fence, if it
/// names one; a lapsed lease nobody took over still counts); the lease extended to at
/// least `lease` from now, never shortened. No ledger entry, like any plain renewal.
pub(super) fn hold(
    s: &mut PgStore,
    input: &str,
    holder: &Holder,
    lease: Duration,
    verb: &str,
) -> Result<Claim> {
    let at = s.at.as_str();
    let mut tx = s.client.transaction().ctx("to renew a claim", at)?;
    let id = resolve(&mut tx, at, input)?;
    let claim = locked_claim(&mut tx, at, &id)?;
    let now = server_now(&mut tx, at)?;
    judge_holder(&id, claim.as_ref(), Some(holder), now, verb)?;
    let claim = claim.ok_or_else(|| Error::Other(format!("claim on {id} vanished")))?;
    let until = claim.lease_until.max(lease_end(now, lease)?);
    tx.execute(
        "UPDATE claims SET lease_until = $3, renewed_at = $4 WHERE task_id = $1 AND fence = $2",
        &[&id, &claim.fence, &until, &now],
    )
    .ctx("to renew a claim", at)?;
    let out = claim_of(&mut tx, at, &id)?;
    tx.commit().ctx("to commit a renewal", at)?;
    Ok(out)
}

/// Records where the holder works on the task.
pub(super) fn set_worktree(
    s: &mut PgStore,
    input: &str,
    holder: &Holder,
    worktree: &str,
) -> Result<()> {
    let at = s.at.as_str();
    let mut tx = s.client.transaction().ctx("to record a worktree", at)?;
    let id = resolve(&mut tx, at, input)?;
    let claim = locked_claim(&mut tx, at, &id)?;
    let now = server_now(&mut tx, at)?;
    let fence = judge_holder(
        &id,
        claim.as_ref(),
        Some(holder),
        now,
        "set the worktree of",
    )?;
    tx.execute(
        "UPDATE claims SET worktree = $3 WHERE task_id = $1 AND fence = $2",
        &[&id, &fence, &worktree],
    )
    .ctx("to record a worktree", at)?;
    tx.commit().ctx("to commit a worktree", at)
}
