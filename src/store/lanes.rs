//! What the supervisor last knew of each lane: state, session and its lineage, the
//! agent's pid (with its start time, so a reused pid is never signalled), restarts,
//! a crash-loop hold and the last error.
//!
//! Invariants:
//! - Only the supervisor that holds the state directory's lock writes a lane's row
//!   ([`Store::put_lane`]); the operator only lifts a hold ([`Store::lift_hold`]), which
//!   the supervisor notices on its next tick.
//! - The row is a report, not an authority: claims decide who works on what. A row
//!   left by a killed supervisor names the agent it ran, which the next supervisor uses
//!   to make sure that agent is gone before it starts a successor.
//! - Which supervisor runs the lane is not part of the row the supervisor writes: it
//!   is the lane's runner ([`super::supervisors`]), read with the row (`host`,
//!   `host_lost`), so writing the row never changes who runs it.

use super::Store;
use crate::clock::Micros;
use crate::error::{Error, Result};
use rusqlite::{params, OptionalExtension, Row};
use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum LaneState {
    /// The agent is launched and has not written its transcript yet, or its worktree
    /// is being prepared (`state_note` says what a hand-off from the task's previous
    /// phase waits for).
    #[default]
    Starting,
    /// The agent's turn is in progress.
    Working,
    /// The agent's turn ended with nothing asked: done with its turn, it waits for input.
    Waiting,
    /// The agent waits for the operator: a question at the end of its turn, a question
    /// put through its own tool, or a permission prompt (`state_note` says which).
    Asking,
    /// The agent waits on its own sub-agent (a sub-agent tool call in progress).
    Subagent,
    /// No task is ready for the lane.
    Idle,
    /// The agent is running but its transcript has not moved for a long time.
    Stalled,
    /// Held after repeated quick deaths, until `hold_until` or the operator lifts it.
    Held,
    /// The agent's API or the agent itself failed (`state_note` says how); it may
    /// recover on its own or be restarted as a successor.
    Errored,
    /// The supervisor stopped the lane (or was stopped).
    Stopped,
}

impl LaneState {
    pub fn as_str(self) -> &'static str {
        match self {
            LaneState::Starting => "starting",
            LaneState::Working => "working",
            LaneState::Waiting => "waiting",
            LaneState::Asking => "asking",
            LaneState::Subagent => "subagent",
            LaneState::Idle => "idle",
            LaneState::Stalled => "stalled",
            LaneState::Held => "held",
            LaneState::Errored => "errored",
            LaneState::Stopped => "stopped",
        }
    }
    pub(crate) fn parse(s: &str) -> LaneState {
        match s {
            "working" => LaneState::Working,
            "waiting" => LaneState::Waiting,
            "asking" => LaneState::Asking,
            "subagent" => LaneState::Subagent,
            "idle" => LaneState::Idle,
            "stalled" => LaneState::Stalled,
            "held" => LaneState::Held,
            "errored" => LaneState::Errored,
            "stopped" => LaneState::Stopped,
            _ => LaneState::Starting,
        }
    }
}

impl std::fmt::Display for LaneState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct LaneRow {
    pub name: String,
    pub state: LaneState,
    pub profile: Option<String>,
    pub session: Option<String>,
    /// The agent's own id for the conversation the sessions of this claim continue
    /// (what a resume names): the first session's id, or the id the transcript gives.
    pub conversation: Option<String>,
    pub task_id: Option<String>,
    pub pid: Option<u32>,
    pub pid_start: Option<u64>,
    pub transcript: Option<String>,
    pub recording: Option<String>,
    /// Earlier sessions on the current claim, oldest first.
    pub lineage: Vec<String>,
    /// Sessions started as successors since the supervisor started the lane.
    pub restarts: u32,
    pub hold_until: Option<Micros>,
    pub hold_reason: Option<String>,
    pub last_error: Option<String>,
    /// When the transcript last grew.
    pub last_activity: Option<Micros>,
    pub updated: Micros,
    /// What the state is about: the question asked, the permission sought, the
    /// sub-agent waited on, the error met.
    pub state_note: Option<String>,
    /// The host of the supervisor that runs (or last ran) the lane, when one took it
    /// ([`Store::take_lane`]); read, never written by [`Store::put_lane`].
    pub host: Option<String>,
    /// That host is lost: its supervisor's heartbeat lapsed (or it was superseded)
    /// without it ending, and no supervisor of that host is in force.
    pub host_lost: bool,
}

const COLUMNS: &str =
    "name, state, profile, session, conversation, task_id, pid, pid_start, transcript, \
     recording, lineage, restarts, hold_until, hold_reason, last_error, last_activity, updated, \
     state_note";

/// The lane's columns, then its runner's host and whether that host is lost at `?1`.
fn select() -> String {
    let cols = COLUMNS
        .split(", ")
        .map(|c| format!("l.{}", c.trim()))
        .collect::<Vec<_>>()
        .join(", ");
    format!(
        "SELECT {cols}, s.host, {} FROM lanes l
         LEFT JOIN lane_runners r ON r.lane = l.name
         LEFT JOIN supervisors s ON s.id = r.supervisor",
        super::supervisors::host_lost_sql("?1")
    )
}

fn row(r: &Row<'_>) -> rusqlite::Result<LaneRow> {
    let lineage: String = r.get(10)?;
    Ok(LaneRow {
        name: r.get(0)?,
        state: LaneState::parse(&r.get::<_, String>(1)?),
        profile: r.get(2)?,
        session: r.get(3)?,
        conversation: r.get(4)?,
        task_id: r.get(5)?,
        pid: r.get(6)?,
        pid_start: r.get::<_, Option<i64>>(7)?.map(|v| v as u64),
        transcript: r.get(8)?,
        recording: r.get(9)?,
        lineage: serde_json::from_str(&lineage).unwrap_or_default(),
        restarts: r.get(11)?,
        hold_until: r.get(12)?,
        hold_reason: r.get(13)?,
        last_error: r.get(14)?,
        last_activity: r.get(15)?,
        updated: r.get(16)?,
        state_note: r.get(17)?,
        host: r.get(18)?,
        host_lost: r.get(19)?,
    })
}

impl Store {
    /// Every lane the supervisor has reported on, by name.
    pub fn lanes(&mut self) -> Result<Vec<LaneRow>> {
        self.read("listing lanes", |tx, now| {
            let mut stmt = tx.prepare_cached(&format!("{} ORDER BY l.name", select()))?;
            let rows = stmt
                .query_map([now], row)?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            Ok(rows)
        })
    }

    pub fn lane(&mut self, name: &str) -> Result<Option<LaneRow>> {
        self.read("reading a lane", |tx, now| lane_in(tx, name, now))
    }

    /// Writes the supervisor's view of a lane, stamping `updated`. Returns the row as
    /// stored (with its runner's host, which the row written does not set).
    pub fn put_lane(&mut self, lane: &LaneRow) -> Result<LaneRow> {
        self.put_lane_by(lane, None)
    }

    /// [`Store::put_lane`] by supervisor `runner`, refused (a conflict, nothing
    /// written) unless it still runs the lane
    /// ([`super::supervisors::judge_lane_write`]).
    pub fn put_lane_as(&mut self, lane: &LaneRow, runner: i64) -> Result<LaneRow> {
        self.put_lane_by(lane, Some(runner))
    }

    fn put_lane_by(&mut self, lane: &LaneRow, runner: Option<i64>) -> Result<LaneRow> {
        self.write("recording a lane", |tx, now| {
            if let Some(id) = runner {
                super::supervisors::fence_lane(tx, &lane.name, id, now)?;
            }
            let mut out = lane.clone();
            out.updated = now;
            let lineage = serde_json::to_string(&out.lineage).expect("strings serialise");
            tx.prepare_cached(&format!(
                "INSERT OR REPLACE INTO lanes ({COLUMNS})
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18)"
            ))?
            .execute(params![
                out.name,
                out.state.as_str(),
                out.profile,
                out.session,
                out.conversation,
                out.task_id,
                out.pid,
                out.pid_start.map(|v| v as i64),
                out.transcript,
                out.recording,
                lineage,
                out.restarts,
                out.hold_until,
                out.hold_reason,
                out.last_error,
                out.last_activity,
                out.updated,
                out.state_note,
            ])?;
            lane_in(tx, &out.name, now)?
                .ok_or_else(|| Error::Other(format!("lane {} vanished", out.name)))
        })
    }

    /// The operator lifts a lane's crash-loop hold. Refused for an unknown lane, one
    /// that is not held, and one paused at its token budget: clearing that pause's
    /// reason would leave the lane over its budget, paused as before, so the refusal
    /// names what does end it (`spice budget raise`, `spice budget stop`).
    pub fn lift_hold(&mut self, name: &str) -> Result<()> {
        self.write("lifting a hold", |tx, _| {
            let row: Option<(String, Option<String>, Option<String>)> = tx
                .query_row(
                    "SELECT state, hold_reason, task_id FROM lanes WHERE name = ?1",
                    [name],
                    |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
                )
                .optional()?;
            judge_lift(name, row, &mut |t| task_handle(tx, t))?;
            tx.execute(
                "UPDATE lanes SET hold_until = NULL, hold_reason = NULL WHERE name = ?1",
                [name],
            )?;
            Ok(())
        })
    }
}

/// One lane with its runner's host, judged lost at `now`.
fn lane_in(tx: &rusqlite::Transaction<'_>, name: &str, now: Micros) -> Result<Option<LaneRow>> {
    Ok(tx
        .prepare_cached(&format!("{} WHERE l.name = ?2", select()))?
        .query_row(params![now, name], row)
        .optional()?)
}

/// [`Store::lift_hold`]'s rule (every backend's) on the lane's (state, hold reason,
/// task) as read in its transaction: `Ok` when the hold may be lifted. `handle` names a
/// task as the refusal's commands take it.
pub(crate) fn judge_lift(
    name: &str,
    row: Option<(String, Option<String>, Option<String>)>,
    handle: &mut dyn FnMut(&str) -> Result<String>,
) -> Result<()> {
    let (state, reason, task) = match row {
        Some((s, r, t)) => (Some(s), r, t),
        None => (None, None, None),
    };
    match state.as_deref() {
        None => Err(Error::input(format!("no lane named {name:?} has run"))),
        Some("held") if reason.as_deref().is_some_and(is_budget_pause) => {
            let reason = reason.unwrap_or_default();
            let target = match task.filter(|_| reason.starts_with("budget: task")) {
                Some(t) => format!("{} --task", handle(&t)?),
                None => name.to_string(),
            };
            Err(Error::conflict(format!(
                "lane {name} is paused at its token budget ({reason}), not held after \
                 crashes: go on with `spice budget raise {target} +N`, or end it with \
                 `spice budget stop {target}`"
            )))
        }
        Some("held") => Ok(()),
        Some(other) => Err(Error::conflict(format!(
            "lane {name} is not held (it is {other})"
        ))),
    }
}

/// Whether a hold's reason is a pause at a token budget (`fleet::lane::budget`
/// writes it), not a crash-loop hold.
pub fn is_budget_pause(reason: &str) -> bool {
    reason.starts_with("budget:")
}

impl LaneRow {
    /// The operator stopped the lane at its token budget (`spice budget stop`) and its
    /// runner acted on it: the stop asked for is cleared then, and the row the runner
    /// left (stopped, its reason `budget: stopped …` as `fleet::lane::budget` writes
    /// it) is what says so, until a supervisor runs the lane again.
    pub fn stopped_at_budget(&self) -> bool {
        self.state == LaneState::Stopped
            && self
                .hold_reason
                .as_deref()
                .is_some_and(|r| r.starts_with("budget: stopped"))
    }
}

/// The handle of task `id` (its id when the task is gone).
fn task_handle(tx: &rusqlite::Transaction<'_>, id: &str) -> Result<String> {
    let project: Option<Option<String>> = tx
        .query_row("SELECT project FROM tasks WHERE id = ?1", [id], |r| {
            r.get(0)
        })
        .optional()?;
    Ok(match project.flatten() {
        Some(p) => format!("{p}-{id}"),
        None => id.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;
    use std::sync::Arc;

    fn store() -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().unwrap();
        let s = Store::open_dir(dir.path(), Arc::new(ManualClock::new(1_000))).unwrap();
        (dir, s)
    }

    #[test]
    fn a_lane_row_round_trips() {
        let (_d, mut s) = store();
        let row = LaneRow {
            name: "a".into(),
            state: LaneState::Working,
            session: Some("s2".into()),
            lineage: vec!["s1".into()],
            pid: Some(42),
            pid_start: Some(u64::MAX >> 1),
            restarts: 1,
            ..LaneRow::default()
        };
        let stored = s.put_lane(&row).unwrap();
        assert_eq!(s.lane("a").unwrap().unwrap(), stored);
        assert_eq!(s.lanes().unwrap().len(), 1);
    }

    #[test]
    fn only_a_held_lane_can_be_lifted() {
        let (_d, mut s) = store();
        assert!(matches!(s.lift_hold("a"), Err(Error::Input(_))));
        let mut row = LaneRow {
            name: "a".into(),
            state: LaneState::Working,
            ..LaneRow::default()
        };
        s.put_lane(&row).unwrap();
        assert!(s.lift_hold("a").is_err());
        row.state = LaneState::Held;
        row.hold_until = Some(9_000);
        row.hold_reason = Some("three deaths".into());
        s.put_lane(&row).unwrap();
        s.lift_hold("a").unwrap();
        let got = s.lane("a").unwrap().unwrap();
        assert_eq!((got.hold_until, got.hold_reason), (None, None));
    }

    #[test]
    fn a_budget_pause_is_not_lifted_and_the_refusal_names_the_budget_commands() {
        let (_d, mut s) = store();
        let new = crate::task::NewTask {
            title: "t".into(),
            project: Some("demo".into()),
            ..Default::default()
        };
        let task = s.add_task(new, &[]).unwrap();
        let mut row = LaneRow {
            name: "a".into(),
            state: LaneState::Held,
            task_id: Some(task.id.clone()),
            hold_reason: Some("budget: lane used 1200 of 1000 tokens".into()),
            ..LaneRow::default()
        };
        s.put_lane(&row).unwrap();
        let e = s.lift_hold("a").unwrap_err().to_string();
        assert!(e.contains("`spice budget raise a +N`"), "{e}");
        assert!(e.contains("`spice budget stop a`"), "{e}");
        row.hold_reason = Some("budget: task used 50 of 40 tokens".into());
        s.put_lane(&row).unwrap();
        let e = s.lift_hold("a").unwrap_err().to_string();
        let handle = format!("demo-{} --task", task.id);
        assert!(
            e.contains(&format!("`spice budget raise {handle} +N`")),
            "{e}"
        );
        assert!(e.contains(&format!("`spice budget stop {handle}`")), "{e}");
        let got = s.lane("a").unwrap().unwrap();
        assert_eq!(got.hold_reason, row.hold_reason, "the pause is kept");
    }
}
