//! Bed slots on PostgreSQL, decided by the SQLite store's rules
//! ([`crate::store::beds`]: `clashes`, `pick_slot`), so both backends hand out the
//! same numbers for the same requests.
//!
//! Invariants, besides the bed slots' own (a row is live while a claim holds its task
//! with that worktree; the next reservation drops the rows that are not):
//! - A reservation locks the table (`SHARE ROW EXCLUSIVE`: reservers queue on each
//!   other, readers do not wait) before it reads a row, so it decides on every
//!   reservation committed before it, as SQLite's write lock makes it: two reservers
//!   never share a slot number or a port. The lock is the transaction's, released at
//!   commit or rollback, never an advisory lock. Row locks alone would not do: the
//!   clash to prevent is between two rows not yet written.
//! - The slot number and the worktree are unique in the table besides.

use super::tasks::server_now;
use super::{PgContext, PgStore};
use crate::error::Result;
use crate::store::beds::{clashes, judge_reservation, pick_slot};
use crate::store::{BedSlot, SlotRequest};
use postgres::Row;

const COLUMNS: &str = "slot, worktree, task_id, template, method, ports, at";

fn row(r: &Row) -> BedSlot {
    let ports: Vec<i32> = r.get(5);
    BedSlot {
        slot: r.get::<_, i32>(0) as u32,
        worktree: r.get(1),
        task_id: r.get(2),
        template: r.get(3),
        method: r.get(4),
        ports: ports.into_iter().map(|p| p as u16).collect(),
        at: r.get(6),
    }
}

/// Reserves a slot for the bed in `req.worktree` (replacing its earlier row, whose
/// slot number it keeps when that is still free), or says which offered ports another
/// live bed holds (`Ok(Err(ports))`).
pub(super) fn reserve(
    s: &mut PgStore,
    req: &SlotRequest<'_>,
) -> Result<std::result::Result<BedSlot, Vec<u16>>> {
    let at = s.at.as_str();
    let mut tx = s
        .client
        .transaction()
        .ctx("to start reserving a bed slot", at)?;
    tx.batch_execute("LOCK TABLE bed_slots IN SHARE ROW EXCLUSIVE MODE")
        .ctx("to lock the bed slots", at)?;
    let now = server_now(&mut tx, at)?;
    if req.fence.is_some() {
        // Share-locked: a takeover (which moves the fence) waits for this reservation.
        let current: Option<i64> = tx
            .query_opt(
                "SELECT fence FROM claims WHERE task_id = $1 FOR SHARE",
                &[&req.task_id],
            )
            .ctx("to read the claim a bed slot is reserved under", at)?
            .map(|r| r.get(0));
        judge_reservation(req, current)?;
    }
    let before: Option<u32> = tx
        .query_opt(
            "SELECT slot FROM bed_slots WHERE worktree = $1",
            &[&req.worktree],
        )
        .ctx("to read a bed slot", at)?
        .map(|r| r.get::<_, i32>(0) as u32);
    tx.execute(
        "DELETE FROM bed_slots s WHERE s.worktree = $1 OR NOT EXISTS (
           SELECT 1 FROM claims c WHERE c.task_id = s.task_id AND c.worktree = s.worktree)",
        &[&req.worktree],
    )
    .ctx("to drop dead bed slots", at)?;
    let rows = tx
        .query("SELECT slot, ports FROM bed_slots ORDER BY slot", &[])
        .ctx("to read the bed slots", at)?;
    let held = rows.iter().map(|r| {
        let ports: Vec<i32> = r.get(1);
        ports.into_iter().map(|p| p as u16).collect::<Vec<u16>>()
    });
    let taken = clashes(held, req.ports);
    if !taken.is_empty() {
        // Committed, as on SQLite: the dead rows and the worktree's own are gone.
        tx.commit().ctx("to commit dropping bed slots", at)?;
        return Ok(Err(taken));
    }
    let used: Vec<u32> = rows.iter().map(|r| r.get::<_, i32>(0) as u32).collect();
    let slot = pick_slot(before, &used);
    let ports: Vec<i32> = req.ports.iter().map(|&p| i32::from(p)).collect();
    tx.execute(
        "INSERT INTO bed_slots (slot, worktree, task_id, template, method, ports, at)
         VALUES ($1, $2, $3, $4, $5, $6, $7)",
        &[
            &(slot as i32),
            &req.worktree,
            &req.task_id,
            &req.template,
            &req.method,
            &ports,
            &now,
        ],
    )
    .ctx("to reserve a bed slot", at)?;
    tx.commit().ctx("to commit a bed slot", at)?;
    Ok(Ok(BedSlot::reserved(req, slot, now)))
}

/// Every live slot, by number.
pub(super) fn live(s: &mut PgStore) -> Result<Vec<BedSlot>> {
    let rows = s
        .client
        .query(
            &format!(
                "SELECT {COLUMNS} FROM bed_slots s WHERE EXISTS (
                   SELECT 1 FROM claims c WHERE c.task_id = s.task_id
                   AND c.worktree = s.worktree) ORDER BY slot"
            ),
            &[],
        )
        .ctx("to list bed slots", &s.at)?;
    Ok(rows.iter().map(row).collect())
}

/// The slot of the bed in `worktree`, live or not.
pub(super) fn of(s: &mut PgStore, worktree: &str) -> Result<Option<BedSlot>> {
    let row_ = s
        .client
        .query_opt(
            &format!("SELECT {COLUMNS} FROM bed_slots WHERE worktree = $1"),
            &[&worktree],
        )
        .ctx("to read a bed slot", &s.at)?;
    Ok(row_.as_ref().map(row))
}
