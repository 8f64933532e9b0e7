//! Supervisor rows and lane runners on PostgreSQL, by the rules both backends share
//! ([`crate::store::supervisors`]: `judge_take`, `refuse_ended`), each operation one
//! transaction judged by the server's clock read after its row locks.
//!
//! A take locks the lane's runner row, then the supervisor rows it judges in id order
//! (so two takes never wait on each other in a cycle); a lane without a runner is
//! inserted with `ON CONFLICT DO NOTHING`, and a take that lost that race judges again
//! the runner that won it. Registering supersedes the host's earlier rows in force; two
//! supervisors registering on one host at the same instant are not serialised here
//! (the host's state-directory lock admits one).

use super::tasks::server_now;
use super::{PgContext, PgStore};
use crate::clock::Micros;
use crate::error::Result;
use crate::store::claims::lease_end;
use crate::store::supervisors::{check_host, judge_lane_write, judge_take, refuse_ended, unknown};
use crate::store::{LaneTake, SupervisorRow};
use postgres::{GenericClient, Row};
use std::time::Duration;

const COLUMNS: &str =
    "id, host, pid, started, registered, heartbeat, lease_until, ended, superseded_by";

fn row(r: &Row, now: Micros) -> SupervisorRow {
    let mut s = SupervisorRow {
        id: r.get(0),
        host: r.get(1),
        pid: r.get::<_, i64>(2) as u32,
        started: r.get::<_, i64>(3) as u64,
        registered: r.get(4),
        heartbeat: r.get(5),
        lease_until: r.get(6),
        ended: r.get(7),
        superseded_by: r.get(8),
        live: false,
    };
    s.live = s.is_live(now);
    s
}

/// The rows `ids`, locked in id order.
fn locked(c: &mut impl GenericClient, at: &str, ids: &[i64]) -> Result<Vec<Row>> {
    c.query(
        &format!("SELECT {COLUMNS} FROM supervisors WHERE id = ANY($1) ORDER BY id FOR UPDATE"),
        &[&ids],
    )
    .ctx("to lock a supervisor", at)
}

pub(super) fn register(
    s: &mut PgStore,
    host: &str,
    pid: u32,
    started: u64,
    lease: Duration,
) -> Result<i64> {
    check_host(host)?;
    let at = s.at.as_str();
    let mut tx = s.client.transaction().ctx("to register a supervisor", at)?;
    let now = server_now(&mut tx, at)?;
    let until = lease_end(now, lease)?;
    let id: i64 = tx
        .query_one(
            "INSERT INTO supervisors (host, pid, started, registered, heartbeat, lease_until)
             VALUES ($1, $2, $3, $4, $4, $5) RETURNING id",
            &[&host, &i64::from(pid), &(started as i64), &now, &until],
        )
        .ctx("to register a supervisor", at)?
        .get(0);
    tx.execute(
        "UPDATE supervisors SET superseded_by = $2
         WHERE host = $1 AND id < $2 AND ended IS NULL AND superseded_by IS NULL",
        &[&host, &id],
    )
    .ctx("to register a supervisor", at)?;
    tx.commit().ctx("to commit a supervisor", at)?;
    Ok(id)
}

pub(super) fn heartbeat(s: &mut PgStore, id: i64, lease: Duration) -> Result<()> {
    let at = s.at.as_str();
    let mut tx = s.client.transaction().ctx("to record a heartbeat", at)?;
    let rows = locked(&mut tx, at, &[id])?;
    let now = server_now(&mut tx, at)?;
    let me = rows
        .first()
        .map(|r| row(r, now))
        .ok_or_else(|| unknown(id))?;
    refuse_ended(&me)?;
    let until = me.lease_until.max(lease_end(now, lease)?);
    tx.execute(
        "UPDATE supervisors SET heartbeat = $2, lease_until = $3 WHERE id = $1",
        &[&id, &now, &until],
    )
    .ctx("to record a heartbeat", at)?;
    tx.commit().ctx("to commit a heartbeat", at)
}

pub(super) fn end(s: &mut PgStore, id: i64) -> Result<()> {
    let at = s.at.as_str();
    let found = s
        .client
        .query_opt(
            "WITH e AS (UPDATE supervisors SET ended = spice_now()
                        WHERE id = $1 AND ended IS NULL AND superseded_by IS NULL)
             SELECT 1 FROM supervisors WHERE id = $1",
            &[&id],
        )
        .ctx("to end a supervisor", at)?;
    found.map(|_| ()).ok_or_else(|| unknown(id))
}

pub(super) fn all(s: &mut PgStore) -> Result<Vec<SupervisorRow>> {
    let rows = s
        .client
        .query(
            &format!(
                "WITH n AS (SELECT spice_now() AS now)
                 SELECT {COLUMNS}, n.now FROM n CROSS JOIN supervisors ORDER BY id"
            ),
            &[],
        )
        .ctx("to list supervisors", &s.at)?;
    Ok(rows.iter().map(|r| row(r, r.get(9))).collect())
}

/// Refused (a conflict) unless supervisor `id` runs lane `name`
/// ([`judge_lane_write`]), inside the caller's transaction: the lane's runner row is
/// share-locked until it ends (a take locks it for update, so it waits), and the
/// supervisor rows read as they stand.
pub(super) fn fence_lane(c: &mut impl GenericClient, at: &str, name: &str, id: i64) -> Result<()> {
    let runner: Option<i64> = c
        .query_opt(
            "SELECT supervisor FROM lane_runners WHERE lane = $1 FOR SHARE",
            &[&name],
        )
        .ctx("to read a lane's runner", at)?
        .map(|r| r.get(0));
    let now = server_now(c, at)?;
    let ids: Vec<i64> = [Some(id), runner].into_iter().flatten().collect();
    let rows: Vec<SupervisorRow> = c
        .query(
            &format!("SELECT {COLUMNS} FROM supervisors WHERE id = ANY($1)"),
            &[&ids],
        )
        .ctx("to read a supervisor", at)?
        .iter()
        .map(|r| row(r, now))
        .collect();
    let me = rows
        .iter()
        .find(|r| r.id == id)
        .ok_or_else(|| unknown(id))?;
    let current = runner.and_then(|r| rows.iter().find(|s| s.id == r));
    judge_lane_write(name, me, current)
}

pub(super) fn take_lane(
    s: &mut PgStore,
    name: &str,
    supervisor: i64,
    hosts: &[String],
) -> Result<LaneTake> {
    let at = s.at.as_str();
    let mut tx = s.client.transaction().ctx("to take a lane", at)?;
    loop {
        let runner: Option<i64> = tx
            .query_opt(
                "SELECT supervisor FROM lane_runners WHERE lane = $1 FOR UPDATE",
                &[&name],
            )
            .ctx("to lock a lane's runner", at)?
            .map(|r| r.get(0));
        let ids: Vec<i64> = [Some(supervisor), runner].into_iter().flatten().collect();
        let rows = locked(&mut tx, at, &ids)?;
        let now = server_now(&mut tx, at)?;
        let rows: Vec<SupervisorRow> = rows.iter().map(|r| row(r, now)).collect();
        let me = rows
            .iter()
            .find(|r| r.id == supervisor)
            .cloned()
            .ok_or_else(|| unknown(supervisor))?;
        let current = runner.and_then(|id| rows.iter().find(|r| r.id == id).cloned());
        let take = judge_take(&me, current, hosts, now)?;
        let LaneTake::Taken { from } = &take else {
            return Ok(take);
        };
        if runner.is_none() {
            let inserted = tx
                .query_opt(
                    "INSERT INTO lane_runners (lane, supervisor, taken) VALUES ($1, $2, $3)
                     ON CONFLICT (lane) DO NOTHING RETURNING lane",
                    &[&name, &supervisor, &now],
                )
                .ctx("to take a lane", at)?;
            if inserted.is_none() {
                // Another take inserted the runner meanwhile: judge that one.
                continue;
            }
        } else {
            tx.execute(
                "UPDATE lane_runners SET supervisor = $2, taken = $3
                 WHERE lane = $1 AND supervisor <> $2",
                &[&name, &supervisor, &now],
            )
            .ctx("to take a lane", at)?;
        }
        if let Some(from) = from {
            tx.execute(
                "UPDATE supervisors SET superseded_by = $2 WHERE id = $1",
                &[&from.id, &supervisor],
            )
            .ctx("to supersede a supervisor", at)?;
        }
        tx.commit().ctx("to commit a lane's runner", at)?;
        return Ok(take);
    }
}
