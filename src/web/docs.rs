//! The JSON documents the console serves, built from the store with the same reads the
//! CLI uses. Pure functions of a store (and, for tasks, of one consistent snapshot);
//! nothing here writes.

use crate::alloc::{self, Filter};
use crate::cli::render;
use crate::clock::Micros;
use crate::error::Result;
use crate::fleet::status;
use crate::store::{Claim, Item, ItemState, ListFilter, Store};
use crate::task::{Priority, Status, Task};
use crate::when;
use serde::Serialize;
use serde_json::{json, Value};
use std::collections::HashMap;

/// How many finished tasks the task table keeps (newest first).
const DONE_SHOWN: usize = 200;
/// How many items a lane's inbox shows (newest).
const INBOX_SHOWN: usize = 100;

fn time(t: Option<Micros>) -> Value {
    t.map(|t| Value::String(when::rfc3339(t)))
        .unwrap_or(Value::Null)
}

/// A claim as `task claims --json` shows it, plus whether it is stale and how long
/// its lease has left (the status document's names for the two).
pub fn claim_doc(c: &Claim, now: Micros) -> Value {
    let mut v = render::claim_json(c);
    v["stale"] = json!(!c.is_live(now));
    v["lease_left_seconds"] = json!((c.lease_until - now) / 1_000_000);
    v
}

/// `/api/status`: the fleet's status document, as `spice fleet status --json` prints
/// it, for every lane the store has a row for.
pub fn status(s: &mut Store, supervisor_pid: Option<u32>) -> Result<Value> {
    let doc = crate::fleet::status::status(s, None, supervisor_pid)?;
    Ok(serde_json::to_value(doc).expect("the status document serialises"))
}

/// An item with the agent's answer, if it gave one.
fn item_doc(s: &mut Store, i: &Item, now: Micros) -> Result<Value> {
    let mut v = render::item_json(i, now);
    if i.state != ItemState::Pending {
        let acks = s.acks_for(&i.key)?;
        let answer = acks
            .iter()
            .rev()
            .find(|a| a.effect == "acked" || a.effect == "refused")
            .or(acks.last());
        v["reply"] = match answer {
            Some(a) => json!({
                "polarity": a.polarity, "body": a.body, "source": a.source,
                "line": a.line, "at": when::rfc3339(a.at),
            }),
            None => Value::Null,
        };
    }
    Ok(v)
}

/// `/api/lanes/NAME/inbox`: the items the lane's agent sees, newest last, with replies.
pub fn lane_inbox(s: &mut Store, name: &str, all: bool) -> Result<Option<Value>> {
    let Some(lane) = s.lane(name)? else {
        return Ok(None);
    };
    let claims = s.claims()?;
    let targets = status::lane_targets(&lane, status::claim_of_lane(&lane, &claims));
    let items = s.inbox(&targets, all)?;
    let now = s.now();
    let skip = items.len().saturating_sub(INBOX_SHOWN);
    let docs = items[skip..]
        .iter()
        .map(|i| item_doc(s, i, now))
        .collect::<Result<Vec<_>>>()?;
    Ok(Some(json!({
        "lane": name,
        "targets": targets.iter().map(|t| json!({"kind": t.kind, "name": t.name})).collect::<Vec<_>>(),
        "now": when::rfc3339(now),
        "items": docs,
        "omitted": skip,
    })))
}

/// `/api/inbox`: every item (pending unless `all`), newest last.
pub fn inbox(s: &mut Store, all: bool) -> Result<Value> {
    let items = s.inbox(&[], all)?;
    let now = s.now();
    let skip = items.len().saturating_sub(INBOX_SHOWN * 5);
    let docs = items[skip..]
        .iter()
        .map(|i| item_doc(s, i, now))
        .collect::<Result<Vec<_>>>()?;
    Ok(json!({ "now": when::rfc3339(now), "items": docs, "omitted": skip }))
}

/// `/api/tasks/ID/ledger`: the task and its history.
pub fn ledger(s: &mut Store, id: &str) -> Result<Value> {
    let task = s.task(id)?;
    let entries = s.ledger(&task.id)?;
    Ok(json!({
        "task": render::task_json(&task),
        "ledger": entries.iter().map(render::ledger_json).collect::<Vec<_>>(),
    }))
}

/// One row of the task table.
#[derive(Debug, Clone, Serialize)]
pub struct TaskRow {
    pub id: String,
    pub handle: String,
    pub description: String,
    pub project: Option<String>,
    pub phase: String,
    pub priority: Option<Priority>,
    pub status: Status,
    /// ready, blocked, claimed or done.
    pub category: &'static str,
    /// Place in the allocator's order (ready tasks only, 1 = next).
    pub rank: Option<usize>,
    pub inherited_priority: Option<Priority>,
    pub releases: usize,
    /// Open tasks that wait directly on this one (handles).
    pub unblocks: Vec<String>,
    /// Open prerequisites it still waits on (handles).
    pub waits_on: Vec<String>,
    pub claim: Option<Value>,
    pub due: Value,
    pub end: Value,
    /// Longest chain of open prerequisites below it (0 = waits on nothing open).
    #[serde(skip)]
    pub depth: usize,
}

/// Every open task classified and measured, plus the newest finished ones.
pub struct TaskTable {
    pub now: Micros,
    pub rows: Vec<TaskRow>,
    pub done_total: usize,
    /// `waits_on` as row indices, for the graph.
    edges: Vec<(usize, usize)>,
    /// Row indices in display order: by category, then rank, inherited priority,
    /// release count.
    display: Vec<usize>,
}

pub const CATEGORIES: [&str; 4] = ["ready", "blocked", "claimed", "done"];

/// Builds the task table from one snapshot: the allocator's ranking for order, the
/// graph measures for inherited priority and release counts.
pub fn task_table(s: &mut Store) -> Result<TaskTable> {
    let (snap, ranking) = alloc::next::ranked(s, None, &Filter::default())?;
    let now = snap.now;
    let tasks: &[Task] = &snap.tasks;
    let (waits_on, m) = alloc::measure(tasks);
    let mut unblocks: Vec<Vec<usize>> = vec![Vec::new(); tasks.len()];
    for (t, deps) in waits_on.iter().enumerate() {
        for &d in deps {
            unblocks[d].push(t);
        }
    }
    let depth = depths(&waits_on);
    let rank: HashMap<usize, usize> = ranking
        .iter()
        .enumerate()
        .map(|(r, c)| (c.index, r + 1))
        .collect();
    let claims: HashMap<&str, &Claim> = snap
        .claims
        .iter()
        .map(|c| (c.task_id.as_str(), c))
        .collect();
    let handles: Vec<String> = tasks.iter().map(Task::handle).collect();
    let mut rows: Vec<TaskRow> = tasks
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let claim = claims.get(t.id.as_str());
            let category = if claim.is_some() {
                "claimed"
            } else if rank.contains_key(&i) {
                "ready"
            } else {
                "blocked"
            };
            TaskRow {
                id: t.id.clone(),
                handle: handles[i].clone(),
                description: t.title.clone(),
                project: t.project.clone(),
                phase: t.phase.clone(),
                priority: t.priority,
                status: t.status,
                category,
                rank: rank.get(&i).copied(),
                inherited_priority: m.inherited[i],
                releases: m.releases[i],
                unblocks: unblocks[i].iter().map(|&j| handles[j].clone()).collect(),
                waits_on: waits_on[i].iter().map(|&j| handles[j].clone()).collect(),
                claim: claim.map(|c| claim_doc(c, now)),
                due: time(t.due),
                end: Value::Null,
                depth: depth[i],
            }
        })
        .collect();
    let edges = waits_on
        .iter()
        .enumerate()
        .flat_map(|(t, deps)| deps.iter().map(move |&d| (d, t)))
        .collect();
    // Ready tasks in the allocator's order first, then claimed, then blocked.
    let open = rows.len();
    let mut done = s.list(&ListFilter {
        statuses: vec![Status::Completed],
        ..ListFilter::default()
    })?;
    let done_total = done.len();
    done.sort_by_key(|t| std::cmp::Reverse(t.end.unwrap_or(t.modified)));
    rows.extend(done.iter().take(DONE_SHOWN).map(|t| TaskRow {
        id: t.id.clone(),
        handle: t.handle(),
        description: t.title.clone(),
        project: t.project.clone(),
        phase: t.phase.clone(),
        priority: t.priority,
        status: t.status,
        category: "done",
        rank: None,
        inherited_priority: t.priority,
        releases: 0,
        unblocks: Vec::new(),
        waits_on: Vec::new(),
        claim: None,
        due: time(t.due),
        end: time(t.end),
        depth: 0,
    }));
    debug_assert!(open <= rows.len());
    let mut display: Vec<usize> = (0..rows.len()).collect();
    display.sort_by_key(|&i| {
        let r = &rows[i];
        let cat = CATEGORIES.iter().position(|c| *c == r.category);
        let rank = r.rank.unwrap_or(usize::MAX);
        (
            cat,
            rank,
            std::cmp::Reverse(r.inherited_priority),
            std::cmp::Reverse(r.releases),
        )
    });
    Ok(TaskTable {
        now,
        rows,
        done_total,
        edges,
        display,
    })
}

/// Longest chain of prerequisites below each task, iteratively (deep chains must not
/// overflow the stack); members of a cycle, which the store refuses anyway, get 0.
fn depths(waits_on: &[Vec<usize>]) -> Vec<usize> {
    let n = waits_on.len();
    let mut depth = vec![usize::MAX; n];
    let mut on_stack = vec![false; n];
    for start in 0..n {
        if depth[start] != usize::MAX {
            continue;
        }
        let mut stack = vec![(start, 0usize)];
        on_stack[start] = true;
        while let Some(top) = stack.last_mut() {
            let v = top.0;
            if let Some(&d) = waits_on[v].get(top.1) {
                top.1 += 1;
                if depth[d] == usize::MAX && !on_stack[d] {
                    on_stack[d] = true;
                    stack.push((d, 0));
                }
            } else {
                let below = waits_on[v]
                    .iter()
                    .filter(|&&d| depth[d] != usize::MAX)
                    .map(|&d| depth[d] + 1)
                    .max()
                    .unwrap_or(0);
                depth[v] = below;
                on_stack[v] = false;
                stack.pop();
            }
        }
    }
    depth
}

impl TaskTable {
    pub fn counts(&self) -> Value {
        let mut c: HashMap<&str, usize> = HashMap::new();
        for r in &self.rows {
            *c.entry(r.category).or_default() += 1;
        }
        json!({
            "ready": c.get("ready").copied().unwrap_or(0),
            "blocked": c.get("blocked").copied().unwrap_or(0),
            "claimed": c.get("claimed").copied().unwrap_or(0),
            "done": self.done_total,
        })
    }

    /// `/api/tasks`: one category (all open ones when `None`), in display order, paged.
    pub fn page(
        &self,
        category: Option<&str>,
        text: Option<&str>,
        offset: usize,
        limit: usize,
    ) -> Value {
        let needle = text.map(str::to_lowercase).filter(|t| !t.is_empty());
        let rows: Vec<&TaskRow> = self
            .display
            .iter()
            .map(|&i| &self.rows[i])
            .filter(|r| match category {
                Some(c) => r.category == c,
                None => r.category != "done",
            })
            .filter(|r| {
                needle.as_ref().is_none_or(|n| {
                    r.description.to_lowercase().contains(n) || r.handle.to_lowercase().contains(n)
                })
            })
            .collect();
        let total = rows.len();
        let page: Vec<&TaskRow> = rows.into_iter().skip(offset).take(limit).collect();
        json!({
            "now": when::rfc3339(self.now),
            "counts": self.counts(),
            "total": total,
            "offset": offset,
            "tasks": page,
        })
    }

    /// `/api/graph`: the `limit` most pressing open tasks and the dependencies among
    /// them, laid out in columns by depth (prerequisites left of what waits on them).
    pub fn graph(&self, limit: usize) -> Value {
        let mut order: Vec<usize> = (0..self.rows.len())
            .filter(|&i| self.rows[i].category != "done")
            .collect();
        let pressing = |r: &TaskRow| {
            let cat = match r.category {
                "claimed" => 0,
                "ready" => 1,
                _ => 2,
            };
            (
                cat,
                std::cmp::Reverse(r.inherited_priority),
                std::cmp::Reverse(r.releases),
                r.rank.unwrap_or(usize::MAX),
            )
        };
        order.sort_by_key(|&i| pressing(&self.rows[i]));
        order.truncate(limit);
        let chosen: HashMap<usize, usize> =
            order.iter().enumerate().map(|(k, &i)| (i, k)).collect();
        let mut column_rows: HashMap<usize, usize> = HashMap::new();
        let mut by_depth = order.clone();
        by_depth.sort_by_key(|&i| (self.rows[i].depth, chosen[&i]));
        let nodes: Vec<Value> = by_depth
            .iter()
            .map(|&i| {
                let r = &self.rows[i];
                let row = column_rows.entry(r.depth).or_default();
                let y = *row;
                *row += 1;
                json!({
                    "id": r.id, "handle": r.handle, "description": r.description,
                    "category": r.category, "priority": r.priority,
                    "inherited_priority": r.inherited_priority, "releases": r.releases,
                    "stale": r.claim.as_ref().is_some_and(|c| c["stale"] == true),
                    "x": r.depth, "y": y,
                })
            })
            .collect();
        let edges: Vec<Value> = self
            .edges
            .iter()
            .filter(|(a, b)| chosen.contains_key(a) && chosen.contains_key(b))
            .map(|&(a, b)| json!({"from": self.rows[a].id, "to": self.rows[b].id}))
            .collect();
        let open = self.rows.iter().filter(|r| r.category != "done").count();
        json!({
            "now": when::rfc3339(self.now),
            "nodes": nodes,
            "edges": edges,
            "shown": order.len(),
            "open": open,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn depths_follow_the_longest_chain() {
        // 0 <- 1 <- 2, and 0 <- 2 directly; 3 alone; 4 <-> 5 a cycle.
        let waits = vec![vec![], vec![0], vec![1, 0], vec![], vec![5], vec![4]];
        let d = depths(&waits);
        assert_eq!(&d[..4], &[0, 1, 2, 0]);
        assert!(d[4] <= 1 && d[5] <= 1);
    }

    #[test]
    fn a_deep_chain_does_not_overflow() {
        let n = 200_000;
        let waits: Vec<Vec<usize>> = (0..n)
            .map(|i| if i == 0 { vec![] } else { vec![i - 1] })
            .collect();
        assert_eq!(depths(&waits)[n - 1], n - 1);
    }
}
