//! `/api/gate`: what the gates last said in each lane, the ways round them seen on
//! its task's branch, and the files latched in the repositories those runs checked.
//!
//! Built from the ledger (the commit hooks record each run as `gate_run`, naming the
//! lane; a phase's merge records `gate_refused` and `gate_bypass`), read by kind, so
//! a lane that has gone idle still shows what the gate said about its last task. The
//! latches are read from each repository's git common directory as they are now.

use crate::error::Result;
use crate::gate::latch::Latches;
use crate::store::{Authority, LedgerEntry};
use crate::when;
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

/// The kinds the panel is made of.
const KINDS: &[&str] = &["gate_run", "gate_refused", "gate_bypass"];
/// How many of the newest such entries are read.
const READ: usize = 500;

fn entry(e: &LedgerEntry) -> Value {
    let mut v = e.detail.clone();
    if !v.is_object() {
        v = json!({});
    }
    v["at"] = json!(when::rfc3339(e.at));
    v["session"] = json!(e.actor);
    v
}

fn lane_of(e: &LedgerEntry) -> Option<&str> {
    e.detail.get("lane").and_then(Value::as_str)
}

/// The document: one row per lane (its newest task the gate spoke about; a task
/// whose runs name no lane gets a row of its own), and one per repository seen.
pub fn doc(s: &mut dyn Authority) -> Result<Value> {
    let recent = s.ledger_recent_of_kinds(KINDS, READ)?;
    // Newest first: the first task seen for a lane is the one shown.
    let mut rows: BTreeMap<String, (Option<String>, String)> = BTreeMap::new();
    let mut repos: BTreeSet<PathBuf> = BTreeSet::new();
    for e in &recent {
        let key = lane_of(e).map_or_else(|| format!("task {}", e.task_id), str::to_string);
        rows.entry(key)
            .or_insert_with(|| (lane_of(e).map(str::to_string), e.task_id.clone()));
        if let Some(dir) = e.detail.get("common_dir").and_then(Value::as_str) {
            repos.insert(PathBuf::from(dir));
        }
    }
    let mut lanes = Vec::new();
    for (lane, task) in rows.into_values() {
        let of_task: Vec<&LedgerEntry> = recent.iter().filter(|e| e.task_id == task).collect();
        let newest = |kind: &str| of_task.iter().find(|e| e.kind == kind).copied();
        // A refusal stands until a phase of the task completes after it.
        let refused = match newest("gate_refused") {
            Some(r) => {
                let done = s.ledger_of_kinds(&task, &["phase_completed"], 1)?;
                done.last().is_none_or(|d| d.seq < r.seq).then(|| entry(r))
            }
            None => None,
        };
        let handle = s.task(&task).map(|t| t.handle()).ok();
        lanes.push(json!({
            "lane": lane,
            "task": task,
            "handle": handle,
            "last_run": newest("gate_run").map(entry),
            "refused": refused,
            "bypasses": of_task.iter().rev().filter(|e| e.kind == "gate_bypass").map(|e| entry(e)).collect::<Vec<_>>(),
        }));
    }
    let repositories: Vec<Value> = repos
        .into_iter()
        .map(|dir| match Latches::load(&dir) {
            Ok(l) => json!({ "common_dir": dir, "latches": l.all().collect::<Vec<_>>() }),
            Err(e) => json!({ "common_dir": dir, "latches": [], "error": e }),
        })
        .collect();
    Ok(json!({
        "now": when::rfc3339(s.now()?),
        "lanes": lanes,
        "repositories": repositories,
    }))
}
