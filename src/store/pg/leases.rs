//! The lease rules both backends share ([`crate::store::leases`]: renewing a held
//! claim or passing it to a successor, holding it across an act outside the store,
//! recording its worktree, releasing it, taking it over) on PostgreSQL: each one
//! transaction whose steps [`PgSteps`] takes. The claim's row is locked (`FOR UPDATE`)
//! before the server's clock is read, and every write says `WHERE fence = $f`, the
//! holding the rule judged; a new fence comes from the `fences` sequence.

use super::claims::{claim_of, drop_claim, locked_claim};
use super::steps::{in_transaction, PgSteps};
use super::tasks::{append, cell_of, resolve, server_now};
use super::{PgContext, PgStore};
use crate::clock::Micros;
use crate::error::Result;
use crate::store::authority::Cell;
use crate::store::leases::{self, Handover, LeaseTx};
use crate::store::{Claim, Holder, Takeover};
use std::time::Duration;

impl LeaseTx for PgSteps<'_, '_> {
    fn resolve(&mut self, input: &str) -> Result<String> {
        resolve(self.tx, self.at, input)
    }
    fn lock_claim(&mut self, id: &str) -> Result<Option<Claim>> {
        locked_claim(self.tx, self.at, id)
    }
    fn now(&mut self) -> Result<Micros> {
        server_now(self.tx, self.at)
    }
    fn cell_of(&mut self, id: &str) -> Result<Cell> {
        cell_of(self.tx, self.at, id)
    }
    fn successor_of(&mut self, id: &str, claimant: &str) -> Result<Option<String>> {
        let row = self
            .tx
            .query_opt(
                "SELECT actor FROM ledger WHERE task_id = $1 AND kind = 'successor'
                   AND detail->>'from' = $2 ORDER BY seq DESC LIMIT 1",
                &[&id, &claimant],
            )
            .ctx("to read the ledger", self.at)?;
        Ok(row.and_then(|r| r.get(0)))
    }
    fn extend(&mut self, id: &str, fence: i64, until: Micros, now: Micros) -> Result<()> {
        self.tx
            .execute(
                "UPDATE claims SET lease_until = $3, renewed_at = $4 WHERE task_id = $1 AND fence = $2",
                &[&id, &fence, &until, &now],
            )
            .ctx("to renew a claim", self.at)?;
        Ok(())
    }
    fn set_worktree(&mut self, id: &str, fence: i64, worktree: &str) -> Result<()> {
        self.tx
            .execute(
                "UPDATE claims SET worktree = $3 WHERE task_id = $1 AND fence = $2",
                &[&id, &fence, &worktree],
            )
            .ctx("to record a worktree", self.at)?;
        Ok(())
    }
    fn hand_over(&mut self, id: &str, fence: i64, to: &Handover<'_>, now: Micros) -> Result<i64> {
        let row = self
            .tx
            .query_one(
                "UPDATE claims SET claimant = $3, lane = $4, worktree = $5,
                   fence = nextval('fences'), lease_until = $6, renewed_at = $7,
                   claimed_at = CASE WHEN $8 THEN $7 ELSE claimed_at END
                 WHERE task_id = $1 AND fence = $2 RETURNING fence",
                &[
                    &id,
                    &fence,
                    &to.claimant,
                    &to.lane,
                    &to.worktree,
                    &to.until,
                    &now,
                    &to.afresh,
                ],
            )
            .ctx("to pass a claim on", self.at)?;
        Ok(row.get(0))
    }
    fn drop_claim(
        &mut self,
        id: &str,
        fence: i64,
        now: Micros,
        kind: &str,
        actor: Option<&str>,
    ) -> Result<()> {
        drop_claim(self.tx, self.at, id, fence, now, (kind, actor))
    }
    fn append(
        &mut self,
        id: &str,
        now: Micros,
        (kind, actor, fence): (&str, Option<&str>, Option<i64>),
        detail: serde_json::Value,
    ) -> Result<()> {
        append(self.tx, self.at, (id, now, kind), actor, fence, detail)
    }
    fn claim(&mut self, id: &str) -> Result<Claim> {
        claim_of(self.tx, self.at, id)
    }
}

pub(super) fn renew(
    s: &mut PgStore,
    input: &str,
    holder: &Holder,
    successor: Option<&str>,
    lease: Duration,
) -> Result<Claim> {
    in_transaction(s, "to renew a claim", |t| {
        leases::renew(t, input, holder, successor, lease)
    })
}

pub(super) fn hold(
    s: &mut PgStore,
    input: &str,
    holder: &Holder,
    lease: Duration,
    verb: &str,
) -> Result<Claim> {
    in_transaction(s, "to renew a claim", |t| {
        leases::hold(t, input, holder, lease, verb)
    })
}

pub(super) fn set_worktree(
    s: &mut PgStore,
    input: &str,
    holder: &Holder,
    worktree: &str,
) -> Result<()> {
    in_transaction(s, "to record a worktree", |t| {
        leases::set_worktree(t, input, holder, worktree)
    })
}

pub(super) fn release(s: &mut PgStore, input: &str, holder: &Holder) -> Result<String> {
    in_transaction(s, "to release a claim", |t| {
        leases::release(t, input, holder)
    })
}

pub(super) fn takeover(s: &mut PgStore, input: &str, t: &Takeover) -> Result<Claim> {
    in_transaction(s, "to take over a claim", |tx| {
        leases::takeover(tx, input, t)
    })
}
