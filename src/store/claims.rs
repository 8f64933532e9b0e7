//! Claims are leases: claimant, lane, worktree, lease deadline and fence token,
//! written together in one `BEGIN IMMEDIATE` transaction.
//!
//! Invariants:
//! - A task has at most one claim; the claim is taken only if the task is ready
//!   (pending, every dependency finished, no claim at all) as checked inside the same
//!   transaction that writes it.
//! - A lapsed lease is not free work: the task stays claimed until the holder renews
//!   it or someone takes it over naming the exact fence they saw ([`super::leases`]).
//! - Every fence is new (a database-wide counter), so a fence names one holding of one
//!   claim: a claim, a takeover and a renewal to a successor each get a fresh one; a
//!   plain renewal keeps it.
//! - Every write on a claimed task must come from the current holder; anyone else's is
//!   refused with the holder named ([`judge_holder`]).
//! - A renewal never shortens a lease that is already longer.

use super::ledger::append;
use super::refusals;
use super::resolve::resolve;
use super::Store;
use crate::clock::Micros;
use crate::error::{ClaimError, Error, Result};
use crate::task::handle;
use crate::when;
use rusqlite::{params, OptionalExtension, Transaction};
use serde::Serialize;
use std::time::Duration;

/// The lease a claim gets when the caller names none.
pub const DEFAULT_LEASE: Duration = Duration::from_secs(30 * 60);

/// The claimant of a person's claim when they name none (`spice task claim`, `task
/// next --claim`, `task takeover`, and who `task renew`/`release` act for; the
/// console's takeover says the same).
pub const OPERATOR: &str = "operator";

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Claim {
    pub task_id: String,
    pub handle: String,
    pub title: String,
    pub claimant: String,
    pub lane: Option<String>,
    pub worktree: Option<String>,
    pub fence: i64,
    pub lease_until: Micros,
    pub claimed_at: Micros,
    pub renewed_at: Micros,
}

impl Claim {
    /// A lease is live until (not including) its deadline.
    pub fn is_live(&self, now: Micros) -> bool {
        self.lease_until > now
    }
}

/// What `claim` needs besides the task.
#[derive(Debug, Clone)]
pub struct ClaimRequest {
    pub claimant: String,
    pub lane: Option<String>,
    pub worktree: Option<String>,
    pub lease: Duration,
}

/// Who a write on a claimed task comes from: the claimant, and optionally the fence
/// of the holding it believes it has. With a fence, a claimant that lost the claim and
/// later regained it under a new fence cannot act on its old holding.
#[derive(Debug, Clone)]
pub struct Holder {
    pub claimant: String,
    pub fence: Option<i64>,
}

impl Holder {
    pub fn new(claimant: impl Into<String>) -> Holder {
        Holder {
            claimant: claimant.into(),
            fence: None,
        }
    }
    pub fn fenced(claimant: impl Into<String>, fence: i64) -> Holder {
        Holder {
            claimant: claimant.into(),
            fence: Some(fence),
        }
    }
}

/// What `takeover` needs: the fence the caller saw on the stale claim.
#[derive(Debug, Clone)]
pub struct Takeover {
    pub stale_fence: i64,
    pub claimant: String,
    pub lane: Option<String>,
    pub worktree: Option<String>,
    pub lease: Duration,
    /// Take it even though its lease is still live (the operator's explicit choice:
    /// the holder's lane stops its agent when its next renewal finds the fence gone).
    /// Still only under the exact fence seen.
    pub force: bool,
}

const CLAIM_SELECT: &str = "SELECT c.task_id, t.project, t.title, c.claimant, c.lane, c.worktree,
    c.fence, c.lease_until, c.claimed_at, c.renewed_at
    FROM claims c JOIN tasks t ON t.id = c.task_id";

fn row_to_claim(r: &rusqlite::Row<'_>) -> rusqlite::Result<Claim> {
    let id: String = r.get(0)?;
    let project: Option<String> = r.get(1)?;
    Ok(Claim {
        handle: handle(project.as_deref(), &id),
        task_id: id,
        title: r.get(2)?,
        claimant: r.get(3)?,
        lane: r.get(4)?,
        worktree: r.get(5)?,
        fence: r.get(6)?,
        lease_until: r.get(7)?,
        claimed_at: r.get(8)?,
        renewed_at: r.get(9)?,
    })
}

pub(super) fn claim_of(tx: &Transaction<'_>, id: &str) -> Result<Option<Claim>> {
    Ok(tx
        .prepare_cached(&format!("{CLAIM_SELECT} WHERE c.task_id = ?1"))?
        .query_row([id], row_to_claim)
        .optional()?)
}

pub(super) fn all_claims(tx: &Transaction<'_>) -> Result<Vec<Claim>> {
    let mut stmt = tx.prepare_cached(&format!("{CLAIM_SELECT} ORDER BY c.claimed_at, c.fence"))?;
    let rows = stmt.query_map([], row_to_claim)?;
    Ok(rows.collect::<std::result::Result<Vec<_>, _>>()?)
}

pub(super) fn next_fence(tx: &Transaction<'_>) -> Result<i64> {
    Ok(tx.query_row(
        "UPDATE meta SET value = value + 1 WHERE key = 'fence' RETURNING value",
        [],
        |r| r.get(0),
    )?)
}

/// The deadline of a lease taken at `now`; a lease past [`when::MAX_DURATION`] is
/// refused (it would overflow the timestamp), whichever caller built it.
pub(super) fn lease_end(now: Micros, lease: Duration) -> Result<Micros> {
    when::check_duration(lease).map_err(|e| Error::input(format!("lease: {e}")))?;
    Ok(now.saturating_add(when::micros(lease)))
}

/// Describes a claim for an error message: holder, fence, and when its lease ends.
pub(super) fn describe(c: &Claim, now: Micros) -> String {
    let lease = if c.is_live(now) {
        format!("lease ends in {}", when::span(c.lease_until - now))
    } else {
        format!("lease lapsed {} ago", when::span(now - c.lease_until))
    };
    format!("{} (fence {}, {lease})", c.claimant, c.fence)
}

/// Refuses a write on `id` unless it comes from the holder of its claim (`claim`, as
/// read inside the writing transaction; every backend judges by this rule). Without a
/// holder the task must be unclaimed; with one, the claimant must hold it, under the
/// same fence if one is given. Returns the claim's fence when there is a claim.
pub(super) fn judge_holder(
    id: &str,
    claim: Option<&Claim>,
    holder: Option<&Holder>,
    now: Micros,
    verb: &str,
) -> Result<Option<i64>> {
    let refused = match (claim, holder) {
        (None, None) => return Ok(None),
        (None, Some(h)) => refusals::not_held(verb, id, &h.claimant),
        (Some(claim), Some(h)) if claim.claimant == h.claimant => match h.fence {
            Some(f) if f != claim.fence => {
                refusals::stale_holding(verb, id, &h.claimant, f, claim, now)
            }
            _ => return Ok(Some(claim.fence)),
        },
        (Some(claim), Some(h)) => refusals::held_by(verb, id, Some(&h.claimant), claim, now, None),
        (Some(claim), None) => refusals::held_by(verb, id, None, claim, now, None),
    };
    Err(refused.into())
}

/// Why `id` cannot be claimed now, or `None` if it is ready.
fn not_ready(tx: &Transaction<'_>, id: &str, now: Micros) -> Result<Option<ClaimError>> {
    let (status, wait): (String, Option<Micros>) = tx
        .prepare_cached("SELECT status, wait FROM tasks WHERE id = ?1")?
        .query_row([id], |r| Ok((r.get(0)?, r.get(1)?)))?;
    if let Some(refused) = refusals::unready(id, &status, wait, now) {
        return Ok(Some(refused));
    }
    if let Some(c) = claim_of(tx, id)? {
        return Ok(Some(refusals::claimed(id, &c, now)));
    }
    let blocker: Option<String> = tx
        .prepare_cached(
            "SELECT d.dep_id FROM deps d JOIN tasks t ON t.id = d.dep_id
             WHERE d.task_id = ?1 AND t.status IN ('pending', 'waiting') LIMIT 1",
        )?
        .query_row([id], |r| r.get(0))
        .optional()?;
    Ok(blocker.map(|b| refusals::blocked(id, &b)))
}

fn insert_claim(tx: &Transaction<'_>, id: &str, req: &ClaimRequest, now: Micros) -> Result<Claim> {
    let fence = next_fence(tx)?;
    let until = lease_end(now, req.lease)?;
    tx.prepare_cached(
        "INSERT INTO claims (task_id, claimant, lane, worktree, fence, lease_until, claimed_at, renewed_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?7)",
    )?
    .execute(params![id, req.claimant, req.lane, req.worktree, fence, until, now])?;
    let (project, phase) = cell_of(tx, id)?;
    append(
        tx,
        id,
        now,
        "claimed",
        Some(&req.claimant),
        Some(fence),
        serde_json::json!({
            "lane": req.lane, "worktree": req.worktree, "lease_until": until,
            "project": project, "phase": phase,
        }),
    )?;
    claim_of(tx, id)?.ok_or_else(|| Error::Other(format!("claim on {id} vanished")))
}

/// Removes the claim on `id`, recording why in the ledger.
pub(super) fn drop_claim(
    tx: &Transaction<'_>,
    id: &str,
    now: Micros,
    kind: &str,
    actor: Option<&str>,
) -> Result<()> {
    let fence: Option<i64> = tx
        .query_row(
            "DELETE FROM claims WHERE task_id = ?1 RETURNING fence",
            [id],
            |r| r.get(0),
        )
        .optional()?;
    append(tx, id, now, kind, actor, fence, serde_json::json!({}))?;
    Ok(())
}

impl Store {
    /// Claims a ready task. Fails with a conflict naming the reason if it is not ready.
    pub fn claim(&mut self, input: &str, req: &ClaimRequest) -> Result<Claim> {
        check_claimant(&req.claimant)?;
        self.write("claiming a task", |tx, now| {
            let id = resolve(tx, input)?;
            if let Some(refused) = not_ready(tx, &id, now)? {
                return Err(refused.into());
            }
            insert_claim(tx, &id, req, now)
        })
    }

    /// Claims `id` if it is still ready and still in the caller's filter; `Ok(None)` if
    /// another claimant got there first or it changed since it was ranked.
    pub fn claim_if_ready(
        &mut self,
        id: &str,
        req: &ClaimRequest,
        filter: &super::vocab::Filter,
    ) -> Result<Option<Claim>> {
        check_claimant(&req.claimant)?;
        self.write("claiming a task", |tx, now| {
            let (project, phase) = cell_of(tx, id)?;
            if !filter.admits_cell(project.as_deref(), &phase) || not_ready(tx, id, now)?.is_some()
            {
                return Ok(None);
            }
            insert_claim(tx, id, req, now).map(Some)
        })
    }

    /// Claims the first of `ids` (best first) that is still ready and in the caller's
    /// filter, re-checking each inside one transaction; `Ok(None)` if none is. A
    /// claimant that lost the race for the first candidate takes the next in the same
    /// transaction, instead of a transaction (and a wait for the lock) per candidate.
    pub fn claim_first_ready(
        &mut self,
        ids: &[&str],
        req: &ClaimRequest,
        filter: &super::vocab::Filter,
    ) -> Result<Option<Claim>> {
        check_claimant(&req.claimant)?;
        self.write("claiming a task", |tx, now| {
            for id in ids {
                let (project, phase) = cell_of(tx, id)?;
                if filter.admits_cell(project.as_deref(), &phase)
                    && not_ready(tx, id, now)?.is_none()
                {
                    return insert_claim(tx, id, req, now).map(Some);
                }
            }
            Ok(None)
        })
    }

    /// Every claim, live and lapsed, oldest first.
    pub fn claims(&mut self) -> Result<Vec<Claim>> {
        self.read("listing claims", |tx, _| all_claims(tx))
    }

    /// The claim on one task, if any.
    pub fn claim_on(&mut self, input: &str) -> Result<Option<Claim>> {
        self.read("reading a claim", |tx, _| {
            let id = resolve(tx, input)?;
            claim_of(tx, &id)
        })
    }

    /// The (project, phase) cell of the task `claimant` last came to hold (by claim,
    /// takeover or succession), if any.
    pub fn last_cell(&mut self, claimant: &str) -> Result<Option<(Option<String>, String)>> {
        self.read("reading the ledger", |tx, _| last_cell_in(tx, claimant))
    }
}

/// [`Store::last_cell`] inside a transaction.
/// The detail of the claimant's last claim taken (by it, or passed to it), by
/// `ledger_claims_by_actor` (schema 13): one index entry, however many it took.
const LAST_CLAIMED: &str = "SELECT detail FROM ledger WHERE actor = ?1
    AND kind IN ('claimed', 'takeover', 'successor')
    ORDER BY seq DESC LIMIT 1";

pub(super) fn last_cell_in(
    tx: &Transaction<'_>,
    claimant: &str,
) -> Result<Option<(Option<String>, String)>> {
    let detail: Option<String> = tx
        .prepare_cached(LAST_CLAIMED)?
        .query_row([claimant], |r| r.get(0))
        .optional()?;
    Ok(detail.and_then(|d| {
        let v: serde_json::Value = serde_json::from_str(&d).ok()?;
        let phase = v.get("phase")?.as_str()?.to_string();
        let project = v
            .get("project")
            .and_then(|p| p.as_str())
            .map(str::to_string);
        Some((project, phase))
    }))
}

pub(super) fn cell_of(tx: &Transaction<'_>, id: &str) -> Result<(Option<String>, String)> {
    Ok(tx
        .prepare_cached("SELECT project, phase FROM tasks WHERE id = ?1")?
        .query_row([id], |r| Ok((r.get(0)?, r.get(1)?)))?)
}

/// The session the claim passed to from `claimant`, if it did.
pub(super) fn successor_of(
    tx: &Transaction<'_>,
    id: &str,
    claimant: &str,
) -> Result<Option<String>> {
    Ok(tx
        .prepare_cached(
            "SELECT actor FROM ledger WHERE task_id = ?1 AND kind = 'successor'
             AND json_extract(detail, '$.from') = ?2 ORDER BY seq DESC LIMIT 1",
        )?
        .query_row(params![id, claimant], |r| r.get(0))
        .optional()?)
}

pub(super) fn check_claimant(c: &str) -> Result<()> {
    if c.trim().is_empty() || c.chars().any(char::is_control) {
        return Err(Error::input(format!(
            "invalid claimant '{c}': must be non-empty text"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;
    use std::sync::Arc;

    /// The claimant's last cell, read before every next-claim, is one index entry: it
    /// once sorted every claim the claimant had taken (`USE TEMP B-TREE FOR ORDER BY`).
    #[test]
    fn the_last_claimed_cell_is_read_by_its_index() {
        let dir = tempfile::tempdir().unwrap();
        let clock = Arc::new(ManualClock::new(1_790_000_000_000_000));
        let store = Store::open_dir(dir.path(), clock).unwrap();
        let plan: Vec<String> = store
            .conn
            .prepare(&format!("EXPLAIN QUERY PLAN {LAST_CLAIMED}"))
            .unwrap()
            .query_map(["me"], |r| r.get::<_, String>(3))
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap();
        assert_eq!(
            plan,
            ["SEARCH ledger USING INDEX ledger_claims_by_actor (actor=?)"],
            "{plan:?}"
        );
    }

    /// Regression (#14): a lease past the timestamp range saturated to `i64::MAX`, which
    /// reads as 1970; the store refuses it whichever caller built it.
    #[test]
    fn a_lease_beyond_the_maximum_is_refused_by_the_store() {
        let dir = tempfile::tempdir().unwrap();
        let clock = Arc::new(ManualClock::new(1_790_000_000_000_000));
        let mut store = Store::open_dir(dir.path(), clock).unwrap();
        let t = store
            .add_task(
                crate::task::NewTask {
                    title: "t".into(),
                    ..Default::default()
                },
                &[],
            )
            .unwrap();
        let req = |lease| ClaimRequest {
            claimant: "me".into(),
            lane: None,
            worktree: None,
            lease,
        };
        let too_long = when::MAX_DURATION + Duration::from_secs(1);
        let e = store.claim(&t.id, &req(too_long)).unwrap_err();
        assert_eq!(e.exit_code(), 2, "{e}");
        assert!(e.to_string().starts_with("lease: "), "{e}");
        assert!(
            e.to_string()
                .contains("exceeds the maximum duration of 10 years"),
            "{e}"
        );
        let c = store.claim(&t.id, &req(when::MAX_DURATION)).unwrap();
        assert!(c.lease_until > store.now());
    }
}
