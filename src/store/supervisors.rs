//! Supervisor rows: which supervisor (host, pid, start time) runs which lane, kept
//! alive by a heartbeat lease, so the supervisors of several hosts share one store's
//! lanes without a protocol of their own.
//!
//! Invariants (every backend keeps them; [`judge_take`] is the rule they share):
//! - A supervisor row is registered once per start and never reused: ids only grow,
//!   so an ended row's id never names a newer supervisor.
//! - One supervisor per host: registering one supersedes the host's earlier rows that
//!   are still in force (a host runs one supervisor; one that registers again is a
//!   restart, and the earlier one, if it still runs, must stop).
//! - A lane has at most one runner. [`Store::take_lane`] makes this supervisor the
//!   runner, in one transaction, only if its host may run the lane (no hosts named:
//!   any host) and no other supervisor in force runs it. A runner whose heartbeat
//!   lapsed is taken from, and is superseded by the taker: the lapsed supervisor's
//!   next heartbeat fails, so it stops every lane it ran. The lane's claims are not
//!   touched: they lapse and are taken over explicitly, exactly as on one machine.
//! - A heartbeat extends the lease (never shortening it), also after it lapsed if
//!   nobody superseded the row meanwhile (a late heartbeat is not a lost host until
//!   another supervisor acts on it); an ended or superseded row's heartbeat is refused.
//! - Leases are judged by the authority's clock, never the caller's.
//! - A lane row shows its runner's host, and that the host is lost when its runner
//!   neither ended nor is in force and no supervisor of that host is in force.

use super::claims::lease_end;
use super::Store;
use crate::clock::Micros;
use crate::error::{Error, Result};
use crate::when;
use rusqlite::{params, OptionalExtension, Row, Transaction};
use serde::Serialize;
use std::time::Duration;

/// One supervisor as the store knows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SupervisorRow {
    pub id: i64,
    pub host: String,
    pub pid: u32,
    /// The process's start time (as [`super::LaneRow::pid_start`]), so a reused pid is
    /// never taken for it.
    pub started: u64,
    pub registered: Micros,
    /// Its last heartbeat (registration counts as one).
    pub heartbeat: Micros,
    pub lease_until: Micros,
    /// When it ended itself, if it did.
    pub ended: Option<Micros>,
    /// The supervisor that superseded it: took a lane from it after its heartbeat
    /// lapsed, or registered on its host after it.
    pub superseded_by: Option<i64>,
    /// Neither ended nor superseded, and its lease not lapsed, by the authority's clock
    /// when read.
    pub live: bool,
}

impl SupervisorRow {
    /// Whether the row is in force at `now`: not ended, not superseded, lease ahead.
    pub fn is_live(&self, now: Micros) -> bool {
        self.ended.is_none() && self.superseded_by.is_none() && self.lease_until > now
    }
}

/// What [`Store::take_lane`] found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum LaneTake {
    /// This supervisor runs the lane now (or already did). `from` is the supervisor
    /// whose lapsed heartbeat it was taken from, which is superseded by the take.
    Taken { from: Option<SupervisorRow> },
    /// Another supervisor in force runs it.
    Held { by: SupervisorRow },
    /// This supervisor's host is not among the hosts the lane names.
    NotAllowed { host: String, hosts: Vec<String> },
}

/// The rule every backend's take follows, on rows read (and locked) in its
/// transaction: `me` must be in force (or only late), `runner` is the lane's current
/// runner if any. `Ok(Taken { from })` means: write the runner, and supersede `from`
/// when it is `Some`.
pub(crate) fn judge_take(
    me: &SupervisorRow,
    runner: Option<SupervisorRow>,
    hosts: &[String],
    now: Micros,
) -> Result<LaneTake> {
    refuse_ended(me)?;
    if !hosts.is_empty() && !hosts.contains(&me.host) {
        return Ok(LaneTake::NotAllowed {
            host: me.host.clone(),
            hosts: hosts.to_vec(),
        });
    }
    Ok(match runner {
        Some(r) if r.id == me.id => LaneTake::Taken { from: None },
        Some(r) if r.is_live(now) => LaneTake::Held { by: r },
        // Ended or already superseded: nothing to supersede.
        Some(r) if r.ended.is_some() || r.superseded_by.is_some() => LaneTake::Taken { from: None },
        Some(r) => LaneTake::Taken { from: Some(r) },
        None => LaneTake::Taken { from: None },
    })
}

/// Refuses a heartbeat or a take from a row that ended or was superseded: that
/// supervisor must stop its lanes (another may run them already).
pub(crate) fn refuse_ended(me: &SupervisorRow) -> Result<()> {
    let who = format!("supervisor {} ({}, pid {})", me.id, me.host, me.pid);
    if let Some(by) = me.superseded_by {
        return Err(Error::conflict(format!(
            "{who} was superseded by supervisor {by}: its lanes may run elsewhere now; \
             stop them and register again"
        )));
    }
    if let Some(at) = me.ended {
        return Err(Error::conflict(format!(
            "{who} ended at {}",
            when::rfc3339(at)
        )));
    }
    Ok(())
}

/// The fence on a lane's row (every backend's): supervisor `me` writes lane `name`'s
/// row only while it runs the lane (`runner`, from `lane_runners`) and was neither
/// superseded nor ended. Another supervisor that took the lane after `me`'s heartbeat
/// lapsed owns the row now; a late write from `me` would undo what that one reports.
pub(crate) fn judge_lane_write(
    name: &str,
    me: &SupervisorRow,
    runner: Option<&SupervisorRow>,
) -> Result<()> {
    refuse_ended(me)?;
    match runner {
        Some(r) if r.id == me.id => Ok(()),
        Some(r) => Err(Error::conflict(format!(
            "lane {name} is run by supervisor {} (host {}, pid {}) now, not by supervisor {}",
            r.id, r.host, r.pid, me.id
        ))),
        None => Err(Error::conflict(format!(
            "lane {name} has no runner: supervisor {} writes its row only once it took it",
            me.id
        ))),
    }
}

/// The refusal for an id no supervisor row has.
pub(crate) fn unknown(id: i64) -> Error {
    Error::input(format!("no supervisor {id} is registered"))
}

/// The SQL that says whether the runner `s` (a supervisors row joined to a lane) is a
/// lost host at `?now` / `$now`: it neither ended nor is in force, and no supervisor of
/// its host is. Shared by both backends' lane queries.
pub(crate) fn host_lost_sql(now: &str) -> String {
    format!(
        "(s.id IS NOT NULL AND s.ended IS NULL
          AND (s.superseded_by IS NOT NULL OR s.lease_until <= {now})
          AND NOT EXISTS (SELECT 1 FROM supervisors o WHERE o.host = s.host
                          AND o.ended IS NULL AND o.superseded_by IS NULL
                          AND o.lease_until > {now}))"
    )
}

const COLUMNS: &str =
    "id, host, pid, started, registered, heartbeat, lease_until, ended, superseded_by";

fn row(r: &Row<'_>, now: Micros) -> rusqlite::Result<SupervisorRow> {
    let mut s = SupervisorRow {
        id: r.get(0)?,
        host: r.get(1)?,
        pid: r.get(2)?,
        started: r.get::<_, i64>(3)? as u64,
        registered: r.get(4)?,
        heartbeat: r.get(5)?,
        lease_until: r.get(6)?,
        ended: r.get(7)?,
        superseded_by: r.get(8)?,
        live: false,
    };
    s.live = s.is_live(now);
    Ok(s)
}

fn one(tx: &Transaction<'_>, id: i64, now: Micros) -> Result<Option<SupervisorRow>> {
    Ok(tx
        .prepare_cached(&format!("SELECT {COLUMNS} FROM supervisors WHERE id = ?1"))?
        .query_row([id], |r| row(r, now))
        .optional()?)
}

/// Supervisor `id`'s row and the row of lane `name`'s runner (if it has one), judged
/// live at `now`.
fn me_and_runner(
    tx: &Transaction<'_>,
    name: &str,
    id: i64,
    now: Micros,
) -> Result<(SupervisorRow, Option<SupervisorRow>)> {
    let me = one(tx, id, now)?.ok_or_else(|| unknown(id))?;
    let runner: Option<i64> = tx
        .prepare_cached("SELECT supervisor FROM lane_runners WHERE lane = ?1")?
        .query_row([name], |r| r.get(0))
        .optional()?;
    let runner = match runner {
        Some(r) if r == id => Some(me.clone()),
        Some(r) => one(tx, r, now)?,
        None => None,
    };
    Ok((me, runner))
}

/// Refused (a conflict) unless supervisor `id` runs lane `name` ([`judge_lane_write`]).
pub(super) fn fence_lane(tx: &Transaction<'_>, name: &str, id: i64, now: Micros) -> Result<()> {
    let (me, runner) = me_and_runner(tx, name, id, now)?;
    judge_lane_write(name, &me, runner.as_ref())
}

pub(crate) fn check_host(host: &str) -> Result<()> {
    if host.trim().is_empty() || host.chars().any(char::is_control) {
        return Err(Error::input(format!(
            "invalid host '{host}': must be non-empty text"
        )));
    }
    Ok(())
}

impl Store {
    /// Registers a supervisor starting on `host`; its id. Supersedes the host's earlier
    /// rows still in force (one supervisor per host).
    pub fn register_supervisor(
        &mut self,
        host: &str,
        pid: u32,
        started: u64,
        lease: Duration,
    ) -> Result<i64> {
        check_host(host)?;
        self.write("registering a supervisor", |tx, now| {
            let until = lease_end(now, lease)?;
            tx.execute(
                &format!(
                    "INSERT INTO supervisors ({COLUMNS})
                     VALUES (NULL, ?1, ?2, ?3, ?4, ?4, ?5, NULL, NULL)"
                ),
                params![host, pid, started as i64, now, until],
            )?;
            let id = tx.last_insert_rowid();
            tx.execute(
                "UPDATE supervisors SET superseded_by = ?2
                 WHERE host = ?1 AND id < ?2 AND ended IS NULL AND superseded_by IS NULL",
                params![host, id],
            )?;
            Ok(id)
        })
    }

    /// Extends supervisor `id`'s lease to at least `lease` from now; refused when the
    /// row ended or was superseded.
    pub fn supervisor_heartbeat(&mut self, id: i64, lease: Duration) -> Result<()> {
        self.write("recording a heartbeat", |tx, now| {
            let me = one(tx, id, now)?.ok_or_else(|| unknown(id))?;
            refuse_ended(&me)?;
            let until = me.lease_until.max(lease_end(now, lease)?);
            tx.execute(
                "UPDATE supervisors SET heartbeat = ?2, lease_until = ?3 WHERE id = ?1",
                params![id, now, until],
            )?;
            Ok(())
        })
    }

    /// Supervisor `id` ends itself (a clean stop): its lanes are free for any other
    /// supervisor, and its host is not lost. A superseded row stays as it is.
    pub fn end_supervisor(&mut self, id: i64) -> Result<()> {
        self.write("ending a supervisor", |tx, now| {
            one(tx, id, now)?.ok_or_else(|| unknown(id))?;
            tx.execute(
                "UPDATE supervisors SET ended = ?2
                 WHERE id = ?1 AND ended IS NULL AND superseded_by IS NULL",
                params![id, now],
            )?;
            Ok(())
        })
    }

    /// Every supervisor row, oldest first, each judged live by the store's clock.
    pub fn supervisors(&mut self) -> Result<Vec<SupervisorRow>> {
        self.read("listing supervisors", |tx, now| {
            let mut st =
                tx.prepare_cached(&format!("SELECT {COLUMNS} FROM supervisors ORDER BY id"))?;
            let rows = st
                .query_map([], |r| row(r, now))?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            Ok(rows)
        })
    }

    /// Makes supervisor `supervisor` the runner of lane `name` if its host is among
    /// `hosts` (empty: any) and no other supervisor in force runs it ([`judge_take`]).
    pub fn take_lane(&mut self, name: &str, supervisor: i64, hosts: &[String]) -> Result<LaneTake> {
        self.write("taking a lane", |tx, now| {
            let (me, runner) = me_and_runner(tx, name, supervisor, now)?;
            let take = judge_take(&me, runner, hosts, now)?;
            if let LaneTake::Taken { from } = &take {
                tx.execute(
                    "INSERT INTO lane_runners (lane, supervisor, taken) VALUES (?1, ?2, ?3)
                     ON CONFLICT (lane) DO UPDATE SET supervisor = ?2, taken = ?3
                     WHERE supervisor <> ?2",
                    params![name, supervisor, now],
                )?;
                if let Some(from) = from {
                    tx.execute(
                        "UPDATE supervisors SET superseded_by = ?2 WHERE id = ?1",
                        params![from.id, supervisor],
                    )?;
                }
            }
            Ok(take)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;
    use std::sync::Arc;

    const MIN: Duration = Duration::from_secs(60);

    #[test]
    fn a_lapsed_runner_is_superseded_by_the_taker_and_its_heartbeat_refused() {
        let dir = tempfile::tempdir().unwrap();
        let clock = ManualClock::new(1_790_000_000_000_000);
        let mut s = Store::open_dir(dir.path(), Arc::new(clock.clone())).unwrap();
        let a = s.register_supervisor("a", 10, 1, MIN).unwrap();
        let b = s.register_supervisor("b", 20, 2, MIN).unwrap();
        assert!(matches!(
            s.take_lane("x", a, &[]).unwrap(),
            LaneTake::Taken { from: None }
        ));
        assert!(matches!(s.take_lane("x", b, &[]).unwrap(), LaneTake::Held { by } if by.id == a));
        clock.advance(2 * MIN);
        s.supervisor_heartbeat(b, MIN).unwrap();
        assert!(
            matches!(s.take_lane("x", b, &[]).unwrap(), LaneTake::Taken { from: Some(f) } if f.id == a)
        );
        let e = s.supervisor_heartbeat(a, MIN).unwrap_err().to_string();
        assert!(e.contains(&format!("superseded by supervisor {b}")), "{e}");
        let again = s.register_supervisor("b", 21, 3, MIN).unwrap();
        assert!(s.supervisor_heartbeat(b, MIN).is_err(), "one per host");
        let rows = s.supervisors().unwrap();
        assert_eq!(
            rows.iter().map(|r| r.live).collect::<Vec<_>>(),
            [false, false, true]
        );
        assert_eq!(rows[2].id, again);
    }
}
