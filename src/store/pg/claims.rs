//! Claiming on PostgreSQL, and the claim rows every other claim write reads: each
//! operation one transaction that locks the rows it judges (`FOR UPDATE`; next-claim
//! `FOR UPDATE SKIP LOCKED`), reads the server's clock after the locks, and refuses in
//! the words shared with SQLite (`store::refusals`). What happens to a claim once held
//! (renew, hold, release, takeover) is written once, in [`crate::store::leases`], over
//! the steps of `pg::leases`.
//!
//! Next-claim is one statement that locks one candidate, the best ranked that is ready
//! and that no other claimer has locked, and claims it: claimers ranking the same
//! order take its first, second, third … side by side. (Locking every ready candidate
//! at once, as it first did, left each other claimer nothing to lock until that
//! transaction ended: they re-ranked from a fresh snapshot again and again, and gave up
//! after `alloc::next`'s bound of rounds with work still ready.)

use super::tasks::{append, resolve, server_now};
use super::{PgContext, PgStore, Prepared};
use crate::clock::Micros;
use crate::error::{ClaimError, Result};
use crate::store::claims::{check_claimant, lease_end};
use crate::store::refusals;
use crate::store::vocab::Filter;
use crate::store::{Claim, ClaimRequest};
use crate::task::handle;
use postgres::{GenericClient, Row, Transaction};

const CLAIM_SELECT: &str = "SELECT c.task_id, t.project, t.title, c.claimant, c.lane, c.worktree,
    c.fence, c.lease_until, c.claimed_at, c.renewed_at
    FROM claims c JOIN tasks t ON t.id = c.task_id";

pub(super) fn row_to_claim(r: &Row) -> Claim {
    let id: String = r.get(0);
    let project: Option<String> = r.get(1);
    Claim {
        handle: handle(project.as_deref(), &id),
        task_id: id,
        title: r.get(2),
        claimant: r.get(3),
        lane: r.get(4),
        worktree: r.get(5),
        fence: r.get(6),
        lease_until: r.get(7),
        claimed_at: r.get(8),
        renewed_at: r.get(9),
    }
}

/// The claim on `id`, its row locked until the transaction ends.
pub(super) fn locked_claim(tx: &mut Transaction<'_>, at: &str, id: &str) -> Result<Option<Claim>> {
    let row = tx
        .query_opt(
            &format!("{CLAIM_SELECT} WHERE c.task_id = $1 FOR UPDATE OF c"),
            &[&id],
        )
        .ctx("to lock a claim", at)?;
    Ok(row.as_ref().map(row_to_claim))
}

pub(super) fn claim_of(c: &mut impl GenericClient, at: &str, id: &str) -> Result<Claim> {
    let row = c
        .query_one(&format!("{CLAIM_SELECT} WHERE c.task_id = $1"), &[&id])
        .ctx("to read a claim", at)?;
    Ok(row_to_claim(&row))
}

pub(super) fn all_in(c: &mut impl GenericClient, at: &str) -> Result<Vec<Claim>> {
    let rows = c
        .query(
            &format!("{CLAIM_SELECT} ORDER BY c.claimed_at, c.fence"),
            &[],
        )
        .ctx("to list claims", at)?;
    Ok(rows.iter().map(row_to_claim).collect())
}

pub(super) fn all(s: &mut PgStore) -> Result<Vec<Claim>> {
    all_in(&mut s.client, &s.at)
}

pub(super) fn on(s: &mut PgStore, input: &str) -> Result<Option<Claim>> {
    let at = s.at.as_str();
    let id = resolve(&mut s.client, at, input)?;
    let row = s
        .client
        .query_opt(&format!("{CLAIM_SELECT} WHERE c.task_id = $1"), &[&id])
        .ctx("to read a claim", at)?;
    Ok(row.as_ref().map(row_to_claim))
}

/// A task locked for claiming, as its row read.
struct Locked {
    id: String,
    project: Option<String>,
    phase: String,
    title: String,
}

/// The claim and its `claimed` ledger entry, one statement: no row when a claim on the
/// task appeared meanwhile.
const INSERT_CLAIM: &str = "WITH c AS (
    INSERT INTO claims (task_id, claimant, lane, worktree, fence, lease_until, claimed_at, renewed_at)
    VALUES ($1, $2, $3, $4, nextval('fences'), $5, $6, $6)
    ON CONFLICT (task_id) DO NOTHING RETURNING task_id, fence)
  INSERT INTO ledger (task_id, at, kind, actor, fence, detail)
  SELECT c.task_id, $6, 'claimed', $2, c.fence, $7::text::jsonb FROM c RETURNING fence";

/// Inserts the claim unless one appeared meanwhile (`None`: a lost race), with its
/// fence from the sequence and its `claimed` ledger entry; the claim is built from
/// what was written, not read back.
fn insert_claim(
    tx: &mut Transaction<'_>,
    prepared: &mut Prepared,
    at: &str,
    task: &Locked,
    req: &ClaimRequest,
    now: Micros,
) -> Result<Option<Claim>> {
    let until = lease_end(now, req.lease)?;
    let detail = serde_json::json!({
        "lane": req.lane, "worktree": req.worktree, "lease_until": until,
        "project": task.project, "phase": task.phase,
    })
    .to_string();
    let st = prepared.get(tx, INSERT_CLAIM, at)?;
    let fence: Option<i64> = tx
        .query_opt(
            &st,
            &[
                &task.id,
                &req.claimant,
                &req.lane,
                &req.worktree,
                &until,
                &now,
                &detail,
            ],
        )
        .ctx("to claim a task", at)?
        .map(|r| r.get(0));
    Ok(fence.map(|fence| Claim {
        handle: handle(task.project.as_deref(), &task.id),
        task_id: task.id.clone(),
        title: task.title.clone(),
        claimant: req.claimant.clone(),
        lane: req.lane.clone(),
        worktree: req.worktree.clone(),
        fence,
        lease_until: until,
        claimed_at: now,
        renewed_at: now,
    }))
}

/// Why the locked task `id` cannot be claimed at `now`, or `None` if it is ready.
fn not_ready(
    tx: &mut Transaction<'_>,
    at: &str,
    id: &str,
    now: Micros,
) -> Result<Option<ClaimError>> {
    let r = tx
        .query_one(
            "SELECT status, wait FROM tasks WHERE id = $1 FOR UPDATE",
            &[&id],
        )
        .ctx("to lock a task", at)?;
    let (status, wait): (String, Option<Micros>) = (r.get(0), r.get(1));
    if let Some(refused) = refusals::unready(id, &status, wait, now) {
        return Ok(Some(refused));
    }
    if let Some(c) = tx
        .query_opt(&format!("{CLAIM_SELECT} WHERE c.task_id = $1"), &[&id])
        .ctx("to read a claim", at)?
    {
        return Ok(Some(refusals::claimed(id, &row_to_claim(&c), now)));
    }
    let blocker = tx
        .query_opt(
            "SELECT d.dep_id FROM deps d JOIN tasks t ON t.id = d.dep_id
             WHERE d.task_id = $1 AND t.status IN ('pending', 'waiting') LIMIT 1",
            &[&id],
        )
        .ctx("to read dependencies", at)?;
    Ok(blocker.map(|b| refusals::blocked(id, &b.get::<_, String>(0))))
}

pub(super) fn claim(s: &mut PgStore, input: &str, req: &ClaimRequest) -> Result<Claim> {
    check_claimant(&req.claimant)?;
    let PgStore {
        client,
        at,
        prepared,
        ..
    } = s;
    let at = at.as_str();
    let mut tx = client.transaction().ctx("to claim a task", at)?;
    let id = resolve(&mut tx, at, input)?;
    // The task's row lock first, then the clock: a claimer that waited reads it after.
    let r = tx
        .query_one(
            "SELECT project, phase, title FROM tasks WHERE id = $1 FOR UPDATE",
            &[&id],
        )
        .ctx("to lock a task", at)?;
    let task = Locked {
        id: id.clone(),
        project: r.get(0),
        phase: r.get(1),
        title: r.get(2),
    };
    let now = server_now(&mut tx, at)?;
    if let Some(refused) = not_ready(&mut tx, at, &id, now)? {
        return Err(refused.into());
    }
    let claim = insert_claim(&mut tx, prepared, at, &task, req, now)?
        .ok_or_else(|| refusals::taken(&id))?;
    tx.commit().ctx("to commit a claim", at)?;
    Ok(claim)
}

/// Next-claim in one statement (one round trip, its own transaction): the best
/// ranked of `$1` (task ids, best first; each looked up by its key, `OFFSET 0` keeping
/// the lookup a nested loop: a plan scanning `tasks` for `id = ANY($1)` compared every
/// task with every candidate, most of the server's time per claim at 1,000 tasks) that
/// is ready, inside the filter (`$6`
/// projects, `$7` phases; empty: any) and not locked by another claimer is locked
/// (`LIMIT 1` under `FOR UPDATE … SKIP LOCKED` locks rows in the sorted order until
/// one is had, so the others stay free for other claimers); then the server's clock
/// is read, and the claim and its `claimed` ledger entry are inserted. The row comes
/// back with a null fence when a claim on the task committed meanwhile (a lost race:
/// the caller tries the rest), and no row comes back when none is ready.
const CLAIM_NEXT: &str = "WITH pick AS (
    SELECT t.id, t.project, t.phase, t.title
      FROM unnest($1::text[]) WITH ORDINALITY AS w (id, pos),
      LATERAL (SELECT t.id, t.project, t.phase, t.title FROM tasks t
                WHERE t.id = w.id AND t.status IN ('pending', 'waiting')
                  AND (t.wait IS NULL OR t.wait <= spice_now())
                  AND (cardinality($6::text[]) = 0 OR t.project = ANY($6))
                  AND (cardinality($7::text[]) = 0 OR t.phase = ANY($7))
                  AND NOT EXISTS (SELECT 1 FROM claims c WHERE c.task_id = t.id)
                  AND NOT EXISTS (SELECT 1 FROM deps d JOIN tasks u ON u.id = d.dep_id
                                  WHERE d.task_id = t.id AND u.status IN ('pending', 'waiting'))
               OFFSET 0) t
     ORDER BY w.pos LIMIT 1
     FOR UPDATE OF t SKIP LOCKED),
  clock AS (SELECT spice_now() AS now FROM pick),
  c AS (
    INSERT INTO claims (task_id, claimant, lane, worktree, fence, lease_until, claimed_at,
                        renewed_at)
    SELECT pick.id, $2, $3, $4, nextval('fences'), clock.now + $5, clock.now, clock.now
      FROM pick, clock
    ON CONFLICT (task_id) DO NOTHING
    RETURNING task_id, fence, lease_until, claimed_at),
  l AS (
    INSERT INTO ledger (task_id, at, kind, actor, fence, detail)
    SELECT c.task_id, c.claimed_at, 'claimed', $2, c.fence,
           jsonb_build_object('lane', $3::text, 'worktree', $4::text,
                              'lease_until', c.lease_until, 'project', pick.project,
                              'phase', pick.phase)
      FROM c JOIN pick ON pick.id = c.task_id)
  SELECT pick.id, pick.project, pick.phase, pick.title, c.fence, c.lease_until, c.claimed_at
    FROM pick LEFT JOIN c ON c.task_id = pick.id";

/// Next-claim: the best ranked of `ids` that is ready, in `filter` and not locked by
/// another claimer, claimed by [`CLAIM_NEXT`]; a candidate lost to a claim that
/// committed meanwhile is dropped and the rest tried.
pub(super) fn claim_first_ready(
    s: &mut PgStore,
    ids: &[&str],
    req: &ClaimRequest,
    filter: &Filter,
) -> Result<Option<Claim>> {
    check_claimant(&req.claimant)?;
    let lease = lease_end(0, req.lease)?;
    let PgStore {
        client,
        at,
        prepared,
        ..
    } = s;
    let at = at.as_str();
    let st = prepared.get(client, CLAIM_NEXT, at)?;
    let mut left: Vec<&str> = ids.to_vec();
    while !left.is_empty() {
        let Some(r) = client
            .query_opt(
                &st,
                &[
                    &left,
                    &req.claimant,
                    &req.lane,
                    &req.worktree,
                    &lease,
                    &filter.projects,
                    &filter.phases,
                ],
            )
            .ctx("to claim a task", at)?
        else {
            return Ok(None);
        };
        let id: String = r.get(0);
        let project: Option<String> = r.get(1);
        let Some(fence) = r.get::<_, Option<i64>>(4) else {
            left.retain(|i| *i != id);
            continue;
        };
        let claimed_at: Micros = r.get(6);
        return Ok(Some(Claim {
            handle: handle(project.as_deref(), &id),
            task_id: id,
            title: r.get(3),
            claimant: req.claimant.clone(),
            lane: req.lane.clone(),
            worktree: req.worktree.clone(),
            fence,
            lease_until: r.get(5),
            claimed_at,
            renewed_at: claimed_at,
        }));
    }
    Ok(None)
}

/// Deletes the claim under its fence, with the ledger entry `kind`.
pub(super) fn drop_claim(
    tx: &mut Transaction<'_>,
    at: &str,
    id: &str,
    fence: i64,
    now: Micros,
    (kind, actor): (&str, Option<&str>),
) -> Result<()> {
    tx.execute(
        "DELETE FROM claims WHERE task_id = $1 AND fence = $2",
        &[&id, &fence],
    )
    .ctx("to release a claim", at)?;
    append(
        tx,
        at,
        (id, now, kind),
        actor,
        Some(fence),
        serde_json::json!({}),
    )
}
