//! The one lane-status document: what `spice fleet status --json` prints, what the
//! console serves as `/api/status`, and what the `fleet status` table is drawn from,
//! led by what needs the operator ([`super::needs`]).
//!
//! Built from the store only (lane rows, claims, the inbox), plus, for the CLI, the
//! configured lanes. Invariants:
//! - One vocabulary: every field has one name and one meaning wherever the document
//!   is read; a time is RFC 3339 with, where a person wants it, its distance from
//!   `now` in whole seconds beside it (`lease_until` + `lease_left_seconds`).
//! - A lane's `pending_steering` counts exactly the items its agent would be given:
//!   those for the targets [`crate::store::agent_targets`] names (its session, lane
//!   and worktree), which the document lists as `targets`.
//! - Without a running supervisor a lane's row is history, not the present: its state
//!   reads `stopped`. A lane run by another host's supervisor (the row's `host`) is
//!   judged by that supervisor's row in the store (in force or not), never by this
//!   host's pidfile; a lane of this host, or of no recorded host, by the pidfile.

use crate::clock::Micros;
use crate::config::fleet::LaneConfig;
use crate::error::Result;
use crate::store::{agent_targets, Authority, Claim, LaneRow, LaneState, Target};
use crate::task::Status;
use crate::when;
use serde::Serialize;
use std::path::Path;

/// The whole fleet: every lane, every claim, and how much steering waits.
#[derive(Debug, Clone, Serialize)]
pub struct FleetStatus {
    pub now: String,
    /// The supervisor holding the state directory's lock, if any.
    pub supervisor_pid: Option<u32>,
    pub lanes: Vec<LaneStatus>,
    /// Every claim, a lane's or not, live and stale.
    pub claims: Vec<ClaimStatus>,
    /// Pending items for any target.
    pub pending_steering: usize,
    /// What needs the operator, most urgent first ([`super::needs`]).
    pub needs: Vec<super::needs::Need>,
}

/// One lane as the operator sees it.
#[derive(Debug, Clone, Serialize)]
pub struct LaneStatus {
    pub lane: String,
    pub profile: Option<String>,
    /// What confinement its agent has (`fleet::confine::describe`'s words): the
    /// running session's, as its `launched` ledger entry records it, else what the
    /// lane file gives the next one; `null` when neither is known (the console, for a
    /// lane with no session).
    pub sandbox: Option<String>,
    /// Where the lane reads its agent's replies: its transcript's format (`claude`,
    /// `codex`, `gemini`, `qwen`), `terminal` (the recording of its screen) or
    /// `none`. From the lane file, else the running session's `launched` entry.
    pub reads: Option<String>,
    /// How steering reaches its agent while it works (`command output`, `typed
    /// message`, `next turn`: `config::profile::Deliver::describe`); as `reads`.
    pub delivers: Option<String>,
    /// From the lane file; `null` where it is not read (the console).
    pub enabled: Option<bool>,
    /// Whether its agent binary was found; `null` where the lane file is not read.
    pub available: Option<bool>,
    /// A lane state (`starting`, `working`, `waiting` (done with its turn), `asking`
    /// (needs the operator), `subagent`, `idle`, `stalled`, `held`, `errored`,
    /// `stopped`), or `disabled` / `never run` for a configured lane.
    pub state: String,
    /// What the state is about: the question asked, the permission sought, the
    /// sub-agent waited on, the error met, the call stalled in.
    pub state_note: Option<String>,
    /// Whether the lane waits for the operator (`asking`, `held`, `errored`).
    pub needs_you: bool,
    pub session: Option<String>,
    /// Earlier sessions on the current claim, oldest first.
    pub predecessors: Vec<String>,
    pub restarts: u32,
    pub pid: Option<u32>,
    pub hold: Option<Hold>,
    /// The token budgets it answers to (its own, its task's) and what was used.
    pub budget: crate::store::BudgetState,
    pub last_error: Option<String>,
    /// The host whose supervisor runs (or last ran) the lane, when one took it.
    pub host: Option<String>,
    /// That host's supervisor lapsed without ending and none of that host is in force.
    pub host_lost: bool,
    /// When the transcript last grew.
    pub last_activity: Option<String>,
    pub last_activity_seconds_ago: Option<i64>,
    /// When the supervisor last wrote the lane's row.
    pub updated: Option<String>,
    pub transcript: Option<String>,
    pub recording: Option<String>,
    /// The task the lane works on now.
    pub task: Option<TaskBrief>,
    /// The lane's claims, the one it works on now first.
    pub claims: Vec<ClaimStatus>,
    /// Whom its agent answers to.
    pub targets: Vec<Target>,
    pub pending_steering: usize,
}

/// A crash-loop hold (until a time), or a pause at a token budget (until the
/// operator raises or stops it: no `until`, reason `budget: …`).
#[derive(Debug, Clone, Serialize)]
pub struct Hold {
    pub until: Option<String>,
    pub seconds_left: i64,
    pub reason: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct TaskBrief {
    pub id: String,
    pub handle: String,
    pub description: String,
    pub project: Option<String>,
    pub phase: String,
    pub status: Status,
}

/// A claim in the status document.
#[derive(Debug, Clone, Serialize)]
pub struct ClaimStatus {
    /// The task's id.
    pub id: String,
    /// The task's handle.
    pub task: String,
    pub description: String,
    /// The claimant: for a lane's claim, the session working on it.
    pub session: String,
    pub lane: Option<String>,
    pub worktree: Option<String>,
    pub fence: i64,
    pub lease_until: String,
    /// Negative once the lease has lapsed.
    pub lease_left_seconds: i64,
    pub stale: bool,
    pub claimed_at: String,
    pub renewed_at: String,
}

impl ClaimStatus {
    pub fn new(c: &Claim, now: Micros) -> ClaimStatus {
        ClaimStatus {
            id: c.task_id.clone(),
            task: c.handle.clone(),
            description: c.title.clone(),
            session: c.claimant.clone(),
            lane: c.lane.clone(),
            worktree: c.worktree.clone(),
            fence: c.fence,
            lease_until: when::rfc3339(c.lease_until),
            lease_left_seconds: seconds(c.lease_until - now),
            stale: !c.is_live(now),
            claimed_at: when::rfc3339(c.claimed_at),
            renewed_at: when::rfc3339(c.renewed_at),
        }
    }
}

fn seconds(us: Micros) -> i64 {
    us / 1_000_000
}

/// The claim a lane works on: the one its row names, else its newest.
pub fn claim_of_lane<'a>(lane: &LaneRow, claims: &'a [Claim]) -> Option<&'a Claim> {
    match &lane.task_id {
        Some(id) => claims.iter().find(|c| &c.task_id == id),
        None => claims
            .iter()
            .filter(|c| c.lane.as_deref() == Some(lane.name.as_str()))
            .max_by_key(|c| c.claimed_at),
    }
}

/// Whom the agent of lane `row` answers to now (see [`agent_targets`]).
pub fn lane_targets(row: &LaneRow, claim: Option<&Claim>) -> Vec<Target> {
    agent_targets(
        row.session.as_deref(),
        Some(&row.name),
        claim.and_then(|c| c.worktree.as_deref()).map(Path::new),
    )
}

/// The host of another supervisor that runs (or ran) the lane, if one does.
fn elsewhere<'a>(row: &'a LaneRow, here: &str) -> Option<&'a str> {
    row.host.as_deref().filter(|h| *h != here)
}

/// What a session's `launched` ledger entry records (its confinement, what the lane
/// reads and how it steers): the running session's own record.
fn launched(store: &mut dyn Authority, task: &str, session: &str) -> Result<serde_json::Value> {
    Ok(store
        .ledger(task)?
        .into_iter()
        .rev()
        .find(|e| e.kind == "launched" && e.actor.as_deref() == Some(session))
        .map(|e| e.detail)
        .unwrap_or_default())
}

/// Builds the document. `configured`: the lanes of the repository's lane files (the
/// CLI), each shown whether or not it ever ran; `None` (the console): every lane the
/// store has a row for. `here`: this host's name, whose supervisor is `supervisor_pid`.
pub fn status(
    store: &mut dyn Authority,
    configured: Option<&[LaneConfig]>,
    here: &str,
    supervisor_pid: Option<u32>,
) -> Result<FleetStatus> {
    let rows = store.lanes()?;
    let claims = store.claims()?;
    let pending = store.inbox(&[], false)?;
    let now = store.now()?;
    // Other hosts' supervisors in force, read only when a lane runs elsewhere.
    let remote_live: Vec<String> = if rows.iter().any(|r| elsewhere(r, here).is_some()) {
        let sups = store.supervisors()?;
        sups.into_iter()
            .filter(|s| s.live)
            .map(|s| s.host)
            .collect()
    } else {
        Vec::new()
    };
    struct Entry<'a> {
        name: String,
        config: Option<&'a LaneConfig>,
        row: Option<&'a LaneRow>,
    }
    let entries: Vec<Entry> = match configured {
        Some(lanes) => lanes
            .iter()
            .map(|l| Entry {
                name: l.name.clone(),
                config: Some(l),
                row: rows.iter().find(|r| r.name == l.name),
            })
            .collect(),
        None => rows
            .iter()
            .map(|r| Entry {
                name: r.name.clone(),
                config: None,
                row: Some(r),
            })
            .collect(),
    };
    let offer = crate::sandbox::probe();
    let mut lanes = Vec::with_capacity(entries.len());
    for e in entries {
        let idle_row = LaneRow {
            name: e.name.clone(),
            ..LaneRow::default()
        };
        let row = e.row.unwrap_or(&idle_row);
        let current = e.row.and_then(|r| claim_of_lane(r, &claims));
        let mut held: Vec<&Claim> = claims
            .iter()
            .filter(|c| c.lane.as_deref() == Some(e.name.as_str()))
            .collect();
        held.sort_by_key(|c| (current.is_none_or(|k| k.task_id != c.task_id), c.claimed_at));
        let targets = lane_targets(row, current);
        let waiting = pending
            .iter()
            .filter(|i| targets.contains(&i.target))
            .count();
        let task_id = row
            .task_id
            .clone()
            .or_else(|| current.map(|c| c.task_id.clone()));
        let task = match task_id {
            Some(id) => store.task(&id).ok().map(|t| TaskBrief {
                handle: t.handle(),
                id: t.id,
                description: t.title,
                project: t.project,
                phase: t.phase,
                status: t.status,
            }),
            None => None,
        };
        let remote = e.row.and_then(|r| elsewhere(r, here));
        let state = match (e.config, e.row, remote, supervisor_pid) {
            (Some(c), _, _, _) if !c.lane.enabled => "disabled".to_string(),
            (_, None, _, _) => "never run".to_string(),
            (_, Some(r), Some(host), _)
                if !r.host_lost && remote_live.iter().any(|h| h == host) =>
            {
                r.state.to_string()
            }
            (_, Some(_), Some(_), _) => "stopped".to_string(),
            (_, Some(r), None, Some(_)) => r.state.to_string(),
            (_, Some(_), None, None) => "stopped".to_string(),
        };
        let ran = e.row.is_some();
        // A running session's own record; for a stopped lane, what the lane file
        // gives the next session, where the file is read.
        let configured = e.config.map(|c| super::confine::describe(c, offer));
        let record = match (&row.session, &task) {
            (Some(session), Some(t)) => launched(store, &t.id, session)?,
            _ => serde_json::Value::Null,
        };
        let recorded = |key: &str| record[key].as_str().map(String::from);
        let sandbox = match configured {
            Some(c) if state == "stopped" => Some(c),
            c => recorded("sandbox").or(c),
        };
        lanes.push(LaneStatus {
            sandbox,
            reads: e
                .config
                .map(|c| reads(&c.profile).to_string())
                .or_else(|| recorded("reads")),
            delivers: e
                .config
                .map(|c| c.profile.deliver.describe(c.profile.mode).to_string())
                .or_else(|| recorded("delivers")),
            lane: e.name.clone(),
            profile: e
                .config
                .map(|c| c.profile.name.clone())
                .or_else(|| row.profile.clone()),
            enabled: e.config.map(|c| c.lane.enabled),
            available: e.config.map(|c| c.program.is_ok()),
            needs_you: ran && matches!(state.as_str(), "asking" | "held" | "errored"),
            state,
            state_note: row.state_note.clone(),
            session: row.session.clone(),
            predecessors: row.lineage.clone(),
            restarts: row.restarts,
            pid: row.pid,
            hold: match (row.hold_until, &row.hold_reason) {
                (Some(until), _) => Some(Hold {
                    until: Some(when::rfc3339(until)),
                    seconds_left: seconds(until - now).max(0),
                    reason: row.hold_reason.clone(),
                }),
                (None, Some(r)) if row.state == LaneState::Held => Some(Hold {
                    until: None,
                    seconds_left: 0,
                    reason: Some(r.clone()),
                }),
                _ => None,
            },
            budget: store.budget_state(
                &e.name,
                task.as_ref().map(|t| t.id.as_str()),
                e.config
                    .and_then(|c| c.lane.budget_tokens.as_ref())
                    .map(|b| *b.get_ref()),
            )?,
            last_error: row.last_error.clone(),
            host: row.host.clone(),
            host_lost: row.host_lost,
            last_activity: row.last_activity.map(when::rfc3339),
            last_activity_seconds_ago: row.last_activity.map(|t| seconds(now - t)),
            updated: ran.then(|| when::rfc3339(row.updated)),
            transcript: row.transcript.clone(),
            recording: row.recording.clone(),
            task,
            claims: held.iter().map(|c| ClaimStatus::new(c, now)).collect(),
            targets,
            pending_steering: waiting,
        });
    }
    let needs = super::needs::collect(store, &lanes, &rows, &claims, now)?;
    Ok(FleetStatus {
        now: when::rfc3339(now),
        supervisor_pid,
        needs,
        lanes,
        claims: claims.iter().map(|c| ClaimStatus::new(c, now)).collect(),
        pending_steering: pending.len(),
    })
}

/// What a lane running `profile` reads its agent's replies from (see `LaneStatus::reads`).
pub fn reads(profile: &crate::config::profile::Profile) -> &'static str {
    profile
        .transcript
        .as_ref()
        .map_or("none", |t| t.format.name())
}
