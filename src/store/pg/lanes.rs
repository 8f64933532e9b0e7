//! Lane rows on PostgreSQL, by the SQLite store's rules ([`crate::store::lanes`]): the
//! supervisor that runs a lane writes its row whole (`updated` stamped by the
//! server's clock); the operator only lifts a hold, refused by the rule both backends
//! share (`judge_lift`). A row is read with its runner's host and whether that host is
//! lost, judged by the server's clock ([`super::supervisors`]). Lane rows neither
//! notify nor move the generation: they change nothing a waiter or a ranking reads.

use super::{PgContext, PgStore};
use crate::error::{Error, Result};
use crate::store::lanes::judge_lift;
use crate::store::supervisors::host_lost_sql;
use crate::store::{LaneRow, LaneState};
use postgres::{GenericClient, Row};

const COLUMNS: &str =
    "name, state, profile, session, conversation, task_id, pid, pid_start, transcript, \
     recording, lineage, restarts, hold_until, hold_reason, last_error, last_activity, updated, \
     state_note";

/// The lanes with their runners' hosts, judged at one reading of the server's clock.
fn select() -> String {
    let cols = COLUMNS
        .split(", ")
        .map(|c| format!("l.{}", c.trim()))
        .collect::<Vec<_>>()
        .join(", ");
    format!(
        "WITH n AS (SELECT spice_now() AS now)
         SELECT {cols}, s.host, {} FROM n CROSS JOIN lanes l
         LEFT JOIN lane_runners r ON r.lane = l.name
         LEFT JOIN supervisors s ON s.id = r.supervisor",
        host_lost_sql("n.now")
    )
}

fn row(r: &Row) -> LaneRow {
    let lineage: String = r.get(10);
    let state: String = r.get(1);
    LaneRow {
        name: r.get(0),
        state: LaneState::parse(&state),
        profile: r.get(2),
        session: r.get(3),
        conversation: r.get(4),
        task_id: r.get(5),
        pid: r.get::<_, Option<i64>>(6).map(|v| v as u32),
        pid_start: r.get::<_, Option<i64>>(7).map(|v| v as u64),
        transcript: r.get(8),
        recording: r.get(9),
        lineage: serde_json::from_str(&lineage).unwrap_or_default(),
        restarts: r.get::<_, i64>(11) as u32,
        hold_until: r.get(12),
        hold_reason: r.get(13),
        last_error: r.get(14),
        last_activity: r.get(15),
        updated: r.get(16),
        state_note: r.get(17),
        host: r.get(18),
        host_lost: r.get(19),
    }
}

fn lane_in(c: &mut impl GenericClient, at: &str, name: &str) -> Result<Option<LaneRow>> {
    let r = c
        .query_opt(&format!("{} WHERE l.name = $1", select()), &[&name])
        .ctx("to read a lane", at)?;
    Ok(r.as_ref().map(row))
}

pub(super) fn all(s: &mut PgStore) -> Result<Vec<LaneRow>> {
    let rows = s
        .client
        .query(&format!("{} ORDER BY l.name", select()), &[])
        .ctx("to list lanes", &s.at)?;
    Ok(rows.iter().map(row).collect())
}

pub(super) fn one(s: &mut PgStore, name: &str) -> Result<Option<LaneRow>> {
    lane_in(&mut s.client, &s.at, name)
}

/// Writes the row whole (its runner is not part of it), `updated` by the server's
/// clock; the row as stored. With `runner`, only while that supervisor runs the lane
/// ([`super::supervisors::fence_lane`]): the runner row is share-locked, so a take
/// that moves the lane waits for this write and every later write is judged anew.
pub(super) fn put(s: &mut PgStore, lane: &LaneRow, runner: Option<i64>) -> Result<LaneRow> {
    let at = s.at.as_str();
    let mut tx = s.client.transaction().ctx("to record a lane", at)?;
    if let Some(id) = runner {
        super::supervisors::fence_lane(&mut tx, at, &lane.name, id)?;
    }
    let lineage = serde_json::to_string(&lane.lineage).expect("strings serialise");
    let set = COLUMNS
        .split(", ")
        .map(str::trim)
        .filter(|c| *c != "name")
        .map(|c| format!("{c} = EXCLUDED.{c}"))
        .collect::<Vec<_>>()
        .join(", ");
    tx.execute(
        &format!(
            "INSERT INTO lanes ({COLUMNS})
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16,
                     spice_now(), $17)
             ON CONFLICT (name) DO UPDATE SET {set}"
        ),
        &[
            &lane.name,
            &lane.state.as_str(),
            &lane.profile,
            &lane.session,
            &lane.conversation,
            &lane.task_id,
            &lane.pid.map(i64::from),
            &lane.pid_start.map(|v| v as i64),
            &lane.transcript,
            &lane.recording,
            &lineage,
            &i64::from(lane.restarts),
            &lane.hold_until,
            &lane.hold_reason,
            &lane.last_error,
            &lane.last_activity,
            &lane.state_note,
        ],
    )
    .ctx("to record a lane", at)?;
    let out = lane_in(&mut tx, at, &lane.name)?
        .ok_or_else(|| Error::Other(format!("lane {} vanished", lane.name)))?;
    tx.commit().ctx("to commit a lane", at)?;
    Ok(out)
}

/// Lifts a crash-loop hold, the lane's row locked while it is judged.
pub(super) fn lift_hold(s: &mut PgStore, name: &str) -> Result<()> {
    let at = s.at.as_str();
    let mut tx = s.client.transaction().ctx("to lift a hold", at)?;
    let row = tx
        .query_opt(
            "SELECT state, hold_reason, task_id FROM lanes WHERE name = $1 FOR UPDATE",
            &[&name],
        )
        .ctx("to lock a lane", at)?
        .map(|r| (r.get(0), r.get(1), r.get(2)));
    judge_lift(name, row, &mut |id| {
        let project: Option<Option<String>> = tx
            .query_opt("SELECT project FROM tasks WHERE id = $1", &[&id])
            .ctx("to read a task", at)?
            .map(|r| r.get(0));
        Ok(match project.flatten() {
            Some(p) => format!("{p}-{id}"),
            None => id.to_string(),
        })
    })?;
    tx.execute(
        "UPDATE lanes SET hold_until = NULL, hold_reason = NULL WHERE name = $1",
        &[&name],
    )
    .ctx("to lift a hold", at)?;
    tx.commit().ctx("to commit a lifted hold", at)
}
