//! What needs the operator, first: one queue that `spice fleet status` leads with (and
//! `--json` carries as `needs`) and the console shows at the top of its page.
//!
//! An entry is something only the operator can resolve, with since when, its lane and
//! task, what it is about, and the command that resolves it:
//!
//! | kind | when | resolved by |
//! | --- | --- | --- |
//! | `asking` | a lane's agent asks (a question ending its turn, a permission prompt) | a reply: `spice steer lane:L "…"` |
//! | `budget` | a lane paused at a token budget | `spice budget raise` / `stop` |
//! | `held` | a lane held after quick deaths, with its countdown | `spice fleet lift L` |
//! | `merge_refused` | the gate or the `on_phase_done` hook refused a phase's merge, and no phase of that task completed since | the agent fixing it; the findings say what |
//! | `error` | a lane whose agent failed (`errored`), or whose last error is unresolved | a look: `spice fleet attach L` |
//! | `stale_claim` | a claim whose lease lapsed with no one renewing it | `spice task takeover ID --stale FENCE` |
//! | `proposal` | a maxim the conscience drafted from repeated corrections (a task tagged `maxim-proposal`) | reading it: `spice task show H` |
//!
//! Nothing else is an entry: a lane waiting for another lane's agent (a hand-off), a
//! lost race, a retried merge are states, not things the operator must do.
//!
//! Invariants: entries are ordered by urgency (the order of [`Kind`]), then newest
//! first; the queue is derived from the store on each read and kept nowhere, so it
//! cannot drift from what it describes.

use super::status::LaneStatus;
use crate::clock::Micros;
use crate::error::Result;
use crate::store::{Authority, Claim, LaneRow, ListFilter};
use crate::task::Status;
use crate::when;
use serde::Serialize;
use std::collections::HashMap;

/// The tag the conscience files its maxim drafts under.
pub const PROPOSAL_TAG: &str = "maxim-proposal";
/// How many of the newest merge refusals and completions are read.
const READ: usize = 500;

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Asking => "asking",
            Kind::Budget => "budget",
            Kind::Held => "held",
            Kind::MergeRefused => "merge_refused",
            Kind::Error => "error",
            Kind::StaleClaim => "stale_claim",
            Kind::Proposal => "proposal",
        }
    }
}

/// What kind of thing needs the operator, most urgent first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    Asking,
    Budget,
    Held,
    MergeRefused,
    Error,
    StaleClaim,
    Proposal,
}

/// One entry of the queue.
#[derive(Debug, Clone, Serialize)]
pub struct Need {
    pub kind: Kind,
    /// Since when (RFC 3339), and how long ago in whole seconds.
    pub since: String,
    pub since_seconds_ago: i64,
    pub lane: Option<String>,
    /// The task's handle and id.
    pub task: Option<String>,
    pub task_id: Option<String>,
    /// What it is about, in a line: the question, the reason, the findings.
    pub what: String,
    /// The command that resolves it (the console offers the same in place).
    pub resolve: String,
    /// A hold's time left.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seconds_left: Option<i64>,
    /// A budget pause: the tokens used and the limit crossed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub used: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit: Option<u64>,
    /// A stale claim's fence, which a takeover must name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fence: Option<i64>,
    /// A refused merge's findings, as the gate or the hook gave them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub findings: Option<serde_json::Value>,
}

impl Need {
    /// What the entry is about, the same while it stands: kind, lane and task.
    pub fn key(&self) -> String {
        format!(
            "{}:{}:{}",
            self.kind.as_str(),
            self.lane.as_deref().unwrap_or(""),
            self.task_id.as_deref().unwrap_or("")
        )
    }

    fn new(kind: Kind, since: Micros, now: Micros, what: String, resolve: String) -> Need {
        Need {
            kind,
            since: when::rfc3339(since),
            since_seconds_ago: (now - since).max(0) / 1_000_000,
            lane: None,
            task: None,
            task_id: None,
            what,
            resolve,
            seconds_left: None,
            used: None,
            limit: None,
            fence: None,
            findings: None,
        }
    }

    fn of_lane(mut self, l: &LaneStatus) -> Need {
        self.lane = Some(l.lane.clone());
        if let Some(t) = &l.task {
            self.task = Some(t.handle.clone());
            self.task_id = Some(t.id.clone());
        }
        self
    }
}

/// The queue, from the lanes and claims of the status document and the store.
pub fn collect(
    store: &mut dyn Authority,
    lanes: &[LaneStatus],
    rows: &[LaneRow],
    claims: &[Claim],
    now: Micros,
) -> Result<Vec<Need>> {
    let mut out = Vec::new();
    let rows: HashMap<&str, &LaneRow> = rows.iter().map(|r| (r.name.as_str(), r)).collect();
    for l in lanes {
        let Some(row) = rows.get(l.lane.as_str()) else {
            continue;
        };
        out.extend(of_lane(l, row, now));
    }
    out.extend(beyond_lanes(store, lanes, claims, now)?);
    out.sort_by(|a, b| {
        a.kind
            .cmp(&b.kind)
            .then_with(|| a.since_seconds_ago.cmp(&b.since_seconds_ago))
    });
    Ok(out)
}

/// The entries no lane's row says: stale claims, refused merges and maxim proposals.
/// The supervisor's event observer reports each as it enters the queue (`needs`
/// events), since no lane state changes for them.
pub fn beyond_lanes(
    store: &mut dyn Authority,
    lanes: &[LaneStatus],
    claims: &[Claim],
    now: Micros,
) -> Result<Vec<Need>> {
    let mut out = Vec::new();
    for c in claims.iter().filter(|c| !c.is_live(now)) {
        let lapsed = c.lease_until;
        let mut n = Need::new(
            Kind::StaleClaim,
            lapsed,
            now,
            format!(
                "the lease of {} ({}) lapsed and no one renews it",
                c.claimant,
                c.lane
                    .as_deref()
                    .map_or("no lane".into(), |l| format!("lane {l}")),
            ),
            format!("spice task takeover {} --stale {}", c.handle, c.fence),
        );
        n.lane.clone_from(&c.lane);
        n.task = Some(c.handle.clone());
        n.task_id = Some(c.task_id.clone());
        n.fence = Some(c.fence);
        out.push(n);
    }
    out.extend(refused_merges(store, lanes, now)?);
    out.extend(proposals(store, now)?);
    Ok(out)
}

/// A lane's own entry, if its state needs the operator.
fn of_lane(l: &LaneStatus, row: &LaneRow, now: Micros) -> Option<Need> {
    let since = row.updated;
    let need = match (l.state.as_str(), &l.hold) {
        ("asking", _) => Need::new(
            Kind::Asking,
            row.last_activity.unwrap_or(since),
            now,
            l.state_note
                .clone()
                .unwrap_or_else(|| "it asks the operator".into()),
            format!("spice steer lane:{} \"<your answer>\"", l.lane),
        ),
        ("held", Some(h)) if h.until.is_none() => {
            let reason = h.reason.clone().unwrap_or_default();
            // A task's budget is raised on the task, not on the lane.
            let target = match &l.task {
                Some(t) if reason.starts_with("budget: task") => format!("{} --task", t.handle),
                _ => l.lane.clone(),
            };
            let budget = if reason.starts_with("budget: task") {
                l.budget.task.clone().unwrap_or(l.budget.lane.clone())
            } else {
                l.budget.lane.clone()
            };
            let mut n = Need::new(
                Kind::Budget,
                since,
                now,
                reason,
                format!("spice budget raise {target} +N, or spice budget stop {target}"),
            );
            n.used = Some(budget.used);
            n.limit = budget.limit;
            n
        }
        ("held", Some(h)) => {
            let mut n = Need::new(
                Kind::Held,
                since,
                now,
                format!(
                    "held {} more: {}",
                    when::seconds(h.seconds_left),
                    h.reason.as_deref().unwrap_or("it kept dying")
                ),
                format!("spice fleet lift {}", l.lane),
            );
            n.seconds_left = Some(h.seconds_left);
            n
        }
        ("errored", _) => Need::new(
            Kind::Error,
            since,
            now,
            l.state_note
                .clone()
                .unwrap_or_else(|| "the agent failed".into()),
            format!("spice fleet attach {}", l.lane),
        ),
        (state, _) if state != "stopped" && l.last_error.is_some() => Need::new(
            Kind::Error,
            since,
            now,
            l.last_error.clone().unwrap_or_default(),
            format!("spice fleet attach {}", l.lane),
        ),
        _ => return None,
    };
    Some(need.of_lane(l))
}

/// Merges the gate or the `on_phase_done` hook refused, each standing until a phase of
/// its task completes after it.
fn refused_merges(
    store: &mut dyn Authority,
    lanes: &[LaneStatus],
    now: Micros,
) -> Result<Vec<Need>> {
    let recent =
        store.ledger_recent_of_kinds(&["gate_refused", "stage_hook", "phase_completed"], READ)?;
    let mut seen: HashMap<&str, ()> = HashMap::new();
    let mut out = Vec::new();
    // Newest first: a task's first entry decides whether a refusal stands.
    for e in &recent {
        if seen.insert(e.task_id.as_str(), ()).is_some() {
            continue;
        }
        let d = &e.detail;
        let (what, findings) = match e.kind.as_str() {
            "gate_refused" => {
                let n = d["findings"].as_array().map_or(0, Vec::len)
                    + d["could_not_run"].as_array().map_or(0, Vec::len);
                (
                    format!(
                        "the gate refused to merge {} into {} ({n} finding(s))",
                        d["branch"].as_str().unwrap_or("the branch"),
                        d["base"].as_str().unwrap_or("base")
                    ),
                    serde_json::json!({
                        "findings": d["findings"], "could_not_run": d["could_not_run"],
                    }),
                )
            }
            "stage_hook" if d["stage"] == "on_phase_done" && d["outcome"] != "passed" => (
                format!(
                    "on_phase_done refused the merge: {}",
                    d["summary"].as_str().unwrap_or("it failed")
                ),
                serde_json::json!({ "output": d["output"] }),
            ),
            _ => continue,
        };
        let task = store.task(&e.task_id).ok();
        let handle = task.as_ref().map(|t| t.handle());
        let mut n = Need::new(
            Kind::MergeRefused,
            e.at,
            now,
            what,
            format!(
                "spice task show {}",
                handle.as_deref().unwrap_or(&e.task_id)
            ),
        );
        n.lane = d["lane"].as_str().map(str::to_string).or_else(|| {
            lanes
                .iter()
                .find(|l| l.task.as_ref().is_some_and(|t| t.id == e.task_id))
                .map(|l| l.lane.clone())
        });
        n.task = handle;
        n.task_id = Some(e.task_id.clone());
        n.findings = Some(findings);
        out.push(n);
    }
    Ok(out)
}

/// The conscience's maxim drafts not yet dealt with.
fn proposals(store: &mut dyn Authority, now: Micros) -> Result<Vec<Need>> {
    let filter = ListFilter {
        statuses: vec![Status::Pending],
        tag: Some(PROPOSAL_TAG.into()),
        ..ListFilter::default()
    };
    let mut out = Vec::new();
    store.each_task(&filter, &mut |t| {
        let handle = t.handle();
        let mut n = Need::new(
            Kind::Proposal,
            t.entry,
            now,
            format!("a maxim drafted from repeated corrections: {}", t.title),
            format!("spice task show {handle}"),
        );
        n.task = Some(handle);
        n.task_id = Some(t.id);
        out.push(n);
        Ok(())
    })?;
    Ok(out)
}
