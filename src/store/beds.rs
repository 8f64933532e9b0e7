//! Bed slots: each live worktree with a test bed holds a slot number and a set of TCP
//! ports no other live bed holds, so parallel test suites never collide on ports or
//! database names; a slot also says which template the bed was seeded from, and how.
//!
//! Invariants:
//! - Slot numbers and ports are unique among rows; a row is live while a claim holds
//!   its task with that worktree. Rows that are not live are dropped by the next
//!   reservation (in the same transaction), so a crashed lane never leaks a slot.
//! - The ports a caller offers were free when it bound them; the transaction refuses
//!   any another live row holds, and the caller offers others.

use super::Store;
use crate::clock::Micros;
use crate::error::{Error, Result};
use rusqlite::{params, OptionalExtension, Transaction};
use serde::Serialize;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BedSlot {
    pub slot: u32,
    pub worktree: String,
    pub task_id: Option<String>,
    pub template: Option<String>,
    /// How the bed was seeded (`reflink`, `copy_file_range`, `copy`, `hard_link`), or
    /// `cold` when no template matched.
    pub method: Option<String>,
    pub ports: Vec<u16>,
    pub at: Micros,
}

/// What a reservation asks for.
#[derive(Debug, Clone)]
pub struct SlotRequest<'a> {
    pub worktree: &'a str,
    pub task_id: &'a str,
    pub template: Option<&'a str>,
    pub method: Option<&'a str>,
    /// Ports found free by binding them; as many as the bed reserves.
    pub ports: &'a [u16],
    /// The holding the reservation is made under: with one, the reservation is refused
    /// (a conflict, nothing written) unless the task's claim still has this fence, so
    /// a holder that lost the claim (a host frozen past its lease) cannot take the
    /// worktree's slot from the one that holds it now.
    pub fence: Option<i64>,
}

/// The fence on a slot's reservation (every backend's): `current` is the fence the
/// task's claim has now, if it is claimed.
pub(crate) fn judge_reservation(req: &SlotRequest<'_>, current: Option<i64>) -> Result<()> {
    match (req.fence, current) {
        (None, _) => Ok(()),
        (Some(f), Some(c)) if f == c => Ok(()),
        (Some(f), Some(c)) => Err(super::refusals::slot_stale(req.task_id, f, c).into()),
        (Some(f), None) => Err(super::refusals::slot_unclaimed(req.task_id, f).into()),
    }
}

fn row(r: &rusqlite::Row<'_>) -> rusqlite::Result<BedSlot> {
    let ports: String = r.get(5)?;
    Ok(BedSlot {
        slot: r.get(0)?,
        worktree: r.get(1)?,
        task_id: r.get(2)?,
        template: r.get(3)?,
        method: r.get(4)?,
        ports: serde_json::from_str(&ports).unwrap_or_default(),
        at: r.get(6)?,
    })
}

/// The offered ports among those other live beds hold (`held`, bed by bed, by slot).
pub(super) fn clashes(held: impl IntoIterator<Item = Vec<u16>>, offered: &[u16]) -> Vec<u16> {
    held.into_iter()
        .flatten()
        .filter(|p| offered.contains(p))
        .collect()
}

/// The slot number for a bed: the worktree's own number (`before`) again when no other
/// live bed holds it, else the smallest free one.
pub(super) fn pick_slot(before: Option<u32>, used: &[u32]) -> u32 {
    before
        .filter(|n| !used.contains(n))
        .or_else(|| (0u32..).find(|n| !used.contains(n)))
        .expect("a free number")
}

impl BedSlot {
    /// The row a reservation of `req` under `slot` writes at `at`.
    pub(super) fn reserved(req: &SlotRequest<'_>, slot: u32, at: Micros) -> BedSlot {
        BedSlot {
            slot,
            worktree: req.worktree.to_string(),
            task_id: Some(req.task_id.to_string()),
            template: req.template.map(str::to_string),
            method: req.method.map(str::to_string),
            ports: req.ports.to_vec(),
            at,
        }
    }
}

const COLUMNS: &str = "slot, worktree, task_id, template, method, ports, at";

/// Drops rows whose task no claim holds with that worktree.
fn drop_dead(tx: &Transaction<'_>) -> Result<()> {
    tx.execute(
        "DELETE FROM bed_slots WHERE NOT EXISTS (
            SELECT 1 FROM claims c WHERE c.task_id = bed_slots.task_id
            AND c.worktree = bed_slots.worktree)",
        [],
    )?;
    Ok(())
}

impl Store {
    /// Reserves a slot for the bed in `req.worktree` (replacing its earlier row, whose
    /// slot number it keeps when that is still free), or says which offered ports
    /// another live bed holds (`Ok(Err(ports))`).
    pub fn reserve_bed_slot(
        &mut self,
        req: &SlotRequest<'_>,
    ) -> Result<std::result::Result<BedSlot, Vec<u16>>> {
        self.write("reserving a bed slot", |tx, now| {
            if req.fence.is_some() {
                let current: Option<i64> = tx
                    .query_row(
                        "SELECT fence FROM claims WHERE task_id = ?1",
                        [req.task_id],
                        |r| r.get(0),
                    )
                    .optional()?;
                judge_reservation(req, current)?;
            }
            let before: Option<u32> = tx
                .query_row(
                    "SELECT slot FROM bed_slots WHERE worktree = ?1",
                    [req.worktree],
                    |r| r.get(0),
                )
                .optional()?;
            drop_dead(tx)?;
            tx.execute("DELETE FROM bed_slots WHERE worktree = ?1", [req.worktree])?;
            let held: Vec<Vec<u16>> = tx
                .prepare_cached("SELECT ports FROM bed_slots ORDER BY slot")?
                .query_map([], |r| r.get::<_, String>(0))?
                .map(|r| r.map(|p| serde_json::from_str(&p).unwrap_or_default()))
                .collect::<rusqlite::Result<_>>()?;
            let taken = clashes(held, req.ports);
            if !taken.is_empty() {
                return Ok(Err(taken));
            }
            let used: Vec<u32> = tx
                .prepare_cached("SELECT slot FROM bed_slots ORDER BY slot")?
                .query_map([], |r| r.get(0))?
                .collect::<rusqlite::Result<_>>()?;
            let slot = pick_slot(before, &used);
            let ports = serde_json::to_string(req.ports).expect("serialisable");
            tx.execute(
                "INSERT INTO bed_slots (slot, worktree, task_id, template, method, ports, at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                params![
                    slot,
                    req.worktree,
                    req.task_id,
                    req.template,
                    req.method,
                    ports,
                    now
                ],
            )?;
            Ok(Ok(BedSlot::reserved(req, slot, now)))
        })
    }

    /// Every live slot, by number.
    pub fn bed_slots(&mut self) -> Result<Vec<BedSlot>> {
        self.read("listing bed slots", |tx, _| {
            let mut stmt = tx.prepare_cached(&format!(
                "SELECT {COLUMNS} FROM bed_slots s WHERE EXISTS (
                    SELECT 1 FROM claims c WHERE c.task_id = s.task_id
                    AND c.worktree = s.worktree) ORDER BY slot"
            ))?;
            let rows = stmt.query_map([], row)?;
            Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
        })
    }

    /// The slot of the bed in `worktree`, live or not.
    pub fn bed_slot(&mut self, worktree: &str) -> Result<Option<BedSlot>> {
        self.read("reading a bed slot", |tx, _| {
            let mut stmt = tx.prepare_cached(&format!(
                "SELECT {COLUMNS} FROM bed_slots WHERE worktree = ?1"
            ))?;
            let mut rows = stmt.query_map([worktree], row)?;
            rows.next().transpose().map_err(Error::from)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{ClaimRequest, Holder};

    fn claim(s: &mut Store, title: &str, wt: &str) -> (String, Holder) {
        let t = s
            .add_task(
                crate::task::NewTask {
                    title: title.into(),
                    ..Default::default()
                },
                &[],
            )
            .unwrap();
        let req = ClaimRequest {
            claimant: title.to_string(),
            lane: None,
            worktree: Some(wt.to_string()),
            lease: std::time::Duration::from_secs(600),
        };
        let c = s.claim(&t.id, &req).unwrap();
        (t.id, Holder::fenced(title.to_string(), c.fence))
    }

    fn req<'a>(wt: &'a str, task: &'a str, ports: &'a [u16]) -> SlotRequest<'a> {
        SlotRequest {
            worktree: wt,
            task_id: task,
            template: None,
            method: Some("cold"),
            ports,
            fence: None,
        }
    }

    #[test]
    fn slots_and_ports_are_unique_among_live_beds() {
        let dir = tempfile::tempdir().unwrap();
        let clock = std::sync::Arc::new(crate::clock::SystemClock);
        let mut s = Store::open_dir(dir.path(), clock).unwrap();
        let (a, _) = claim(&mut s, "a", "/w/a");
        let (b, hb) = claim(&mut s, "b", "/w/b");
        let sa = s.reserve_bed_slot(&req("/w/a", &a, &[4000, 4001])).unwrap();
        assert_eq!(sa.unwrap().slot, 0);
        let clash = s.reserve_bed_slot(&req("/w/b", &b, &[4001, 4002])).unwrap();
        assert_eq!(clash, Err(vec![4001]));
        let sb = s.reserve_bed_slot(&req("/w/b", &b, &[4002, 4003])).unwrap();
        assert_eq!(sb.unwrap().slot, 1);
        assert_eq!(s.bed_slots().unwrap().len(), 2);
        // Released: its slot and ports are free for the next bed.
        s.release(&b, &hb).unwrap();
        assert_eq!(s.bed_slots().unwrap().len(), 1);
        let (c, _) = claim(&mut s, "c", "/w/c");
        let sc = s.reserve_bed_slot(&req("/w/c", &c, &[4002])).unwrap();
        assert_eq!(sc.unwrap().slot, 1);
    }

    #[test]
    fn a_worktree_made_again_keeps_its_slot_number() {
        let dir = tempfile::tempdir().unwrap();
        let clock = std::sync::Arc::new(crate::clock::SystemClock);
        let mut s = Store::open_dir(dir.path(), clock).unwrap();
        let (a, ha) = claim(&mut s, "a", "/w/a");
        let (b, _) = claim(&mut s, "b", "/w/b");
        s.reserve_bed_slot(&req("/w/a", &a, &[4000]))
            .unwrap()
            .unwrap();
        let sb = s
            .reserve_bed_slot(&req("/w/b", &b, &[4001]))
            .unwrap()
            .unwrap();
        assert_eq!(sb.slot, 1);
        // Slot 0 comes free; b's worktree is made again: it keeps 1.
        s.release(&a, &ha).unwrap();
        let again = s
            .reserve_bed_slot(&req("/w/b", &b, &[4001]))
            .unwrap()
            .unwrap();
        assert_eq!(again.slot, 1);
    }
}
