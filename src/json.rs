//! The JSON shapes of the store's records (tasks, claims, ledger entries, steering
//! items), shared by the CLI's `--json` output and the console's documents so the two
//! never drift. Field names follow Taskwarrior where they overlap (`description` for
//! the title); times are RFC 3339 in UTC, `null` when absent. Pure functions.

use crate::clock::Micros;
use crate::store::{Claim, Item, LedgerEntry};
use crate::task::Task;
use crate::when;
use serde_json::{json, Value};

/// A moment as RFC 3339, or `null`.
pub fn time(t: Option<Micros>) -> Value {
    t.map(|t| Value::String(when::rfc3339(t)))
        .unwrap_or(Value::Null)
}

pub fn task_json(t: &Task) -> Value {
    json!({
        "id": t.id,
        "handle": t.handle(),
        "uuid": t.uuid,
        "description": t.title,
        "body": t.body,
        "project": t.project,
        "phase": t.phase,
        "priority": t.priority,
        "status": t.status,
        "due": time(t.due),
        "wait": time(t.wait),
        "tags": t.tags,
        "depends": t.depends,
        "entry": time(Some(t.entry)),
        "end": time(t.end),
        "modified": time(Some(t.modified)),
        "annotations": t.annotations.iter().map(|a| json!({
            "entry": when::rfc3339(a.entry), "description": a.description,
        })).collect::<Vec<_>>(),
    })
}

pub fn claim_json(c: &Claim) -> Value {
    json!({
        "id": c.task_id,
        "handle": c.handle,
        "description": c.title,
        "claimant": c.claimant,
        "lane": c.lane,
        "worktree": c.worktree,
        "fence": c.fence,
        "lease_until": when::rfc3339(c.lease_until),
        "claimed_at": when::rfc3339(c.claimed_at),
        "renewed_at": when::rfc3339(c.renewed_at),
    })
}

pub fn ledger_json(e: &LedgerEntry) -> Value {
    json!({
        "seq": e.seq,
        "task": e.task_id,
        "at": when::rfc3339(e.at),
        "kind": e.kind,
        "actor": e.actor,
        "fence": e.fence,
        "detail": e.detail,
    })
}

pub fn item_json(i: &Item, now: Micros) -> Value {
    json!({
        "key": i.key,
        "target": i.target.name,
        "target_kind": i.target.kind,
        "text": i.text,
        "state": i.state,
        "created": when::rfc3339(i.created),
        "age_seconds": (now - i.created) / 1_000_000,
        "expires": when::rfc3339(i.expires),
        "shown": i.shown,
        "last_shown": time(i.last_shown),
        "closed_at": time(i.closed_at),
        "problem": i.problem,
    })
}
