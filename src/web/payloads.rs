//! The JSON documents the console serves, built from the store with the same reads the
//! CLI uses. Pure functions of a store (and, for tasks, of one consistent snapshot);
//! nothing here writes.

use crate::alloc::{self, Filter};
use crate::clock::Micros;
use crate::error::Result;
use crate::fleet::status;
use crate::json::{self as record, time};
use crate::store::{Authority, Claim, Item, ItemState};
use crate::task::{Priority, Status, Task};
use crate::when;
use bytes::Bytes;
use serde::Serialize;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::Mutex;

/// How many finished tasks the task table keeps (newest first).
const DONE_SHOWN: usize = 200;
/// How many items a lane's inbox shows (newest).
const INBOX_SHOWN: usize = 100;

/// A claim as `task claims --json` shows it, plus whether it is stale and how long
/// its lease has left (the status document's names for the two).
pub fn claim_doc(c: &Claim, now: Micros) -> Value {
    let mut v = record::claim_json(c);
    v["stale"] = json!(!c.is_live(now));
    v["lease_left_seconds"] = json!((c.lease_until - now) / 1_000_000);
    v
}

/// `/api/status`: the fleet's status document, as `spice fleet status --json` prints
/// it, for every lane the store has a row for, whichever host runs it (`here`: this
/// console's host, whose supervisor is `supervisor_pid`).
pub fn status(s: &mut dyn Authority, here: &str, supervisor_pid: Option<u32>) -> Result<Value> {
    let doc = crate::fleet::status::status(s, None, here, supervisor_pid)?;
    Ok(serde_json::to_value(doc).expect("the status document serialises"))
}

/// An item with the agent's answer, if it gave one.
fn item_doc(s: &mut dyn Authority, i: &Item, now: Micros) -> Result<Value> {
    let mut v = record::item_json(i, now);
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
pub fn lane_inbox(s: &mut dyn Authority, name: &str, all: bool) -> Result<Option<Value>> {
    let Some(lane) = s.lane(name)? else {
        return Ok(None);
    };
    let claims = s.claims()?;
    let targets = status::lane_targets(&lane, status::claim_of_lane(&lane, &claims));
    let items = s.inbox(&targets, all)?;
    let now = s.now()?;
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
pub fn inbox(s: &mut dyn Authority, all: bool) -> Result<Value> {
    let items = s.inbox(&[], all)?;
    let now = s.now()?;
    let skip = items.len().saturating_sub(INBOX_SHOWN * 5);
    let docs = items[skip..]
        .iter()
        .map(|i| item_doc(s, i, now))
        .collect::<Result<Vec<_>>>()?;
    Ok(json!({ "now": when::rfc3339(now), "items": docs, "omitted": skip }))
}

/// `/api/tasks/ID/ledger`: the task and its history.
pub fn ledger(s: &mut dyn Authority, id: &str) -> Result<Value> {
    let task = s.task(id)?;
    let entries = s.ledger(&task.id)?;
    Ok(json!({
        "task": record::task_json(&task),
        "ledger": entries.iter().map(record::ledger_json).collect::<Vec<_>>(),
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
///
/// Built once per graph generation (and second), then read by every `/api/tasks`
/// request: each row is serialised once here, and a page is those bytes copied, so
/// a request costs its page, not the table (issue #14: serialising and filtering
/// every row per request put p99 at 124–455 ms with 10,000 tasks). Each page and
/// graph once made is kept as the bytes sent ([`TaskTable::page_bytes`]), so asking
/// again within the table's life costs a lookup; the counts are made here, once.
pub struct TaskTable {
    pub now: Micros,
    pub rows: Vec<TaskRow>,
    pub done_total: usize,
    /// `waits_on` as row indices, for the graph.
    edges: Vec<(usize, usize)>,
    /// Row indices in display order (by category, then rank, inherited priority,
    /// release count): all open rows, then one list per category of [`CATEGORIES`].
    open: Vec<usize>,
    by_category: [Vec<usize>; 4],
    /// Each row as JSON.
    json: Vec<Box<[u8]>>,
    /// Each row's description and handle, lower-cased, for `q=`.
    haystack: Vec<[Box<str>; 2]>,
    /// `"now":…,"counts":{…}` as JSON, shared by every page.
    head: Box<[u8]>,
    /// Pages and graphs served from this table, as sent (at most [`KEPT`]).
    served: Mutex<HashMap<Served, Bytes>>,
}

/// How many pages and graphs one table keeps; past it the kept ones are dropped.
const KEPT: usize = 256;

/// What a kept document answered: a page of `/api/tasks` or an `/api/graph`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Served {
    Page {
        category: Option<usize>,
        text: Option<String>,
        offset: usize,
        limit: usize,
    },
    Graph(usize),
}

pub const CATEGORIES: [&str; 4] = ["ready", "blocked", "claimed", "done"];

/// Builds the task table from one snapshot: the allocator's ranking for order, the
/// graph measures for inherited priority and release counts.
pub fn task_table(s: &mut dyn Authority) -> Result<TaskTable> {
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
    let (done_total, done) = s.done_tasks(DONE_SHOWN)?;
    rows.extend(done.iter().map(|t| TaskRow {
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
    let mut by_category: [Vec<usize>; 4] = Default::default();
    let mut open = Vec::with_capacity(rows.len());
    for &i in &display {
        let c = CATEGORIES.iter().position(|c| *c == rows[i].category);
        by_category[c.expect("a row's category is one of CATEGORIES")].push(i);
        if rows[i].category != "done" {
            open.push(i);
        }
    }
    let json = rows
        .iter()
        .map(|r| {
            serde_json::to_vec(r)
                .expect("task rows serialise")
                .into_boxed_slice()
        })
        .collect();
    let haystack = rows
        .iter()
        .map(|r| [&r.description, &r.handle].map(|t| t.to_lowercase().into_boxed_str()))
        .collect();
    let counts = json!({
        "ready": by_category[0].len(),
        "blocked": by_category[1].len(),
        "claimed": by_category[2].len(),
        "done": done_total,
    });
    let head = format!(
        "\"now\":{},\"counts\":{counts}",
        Value::String(when::rfc3339(now))
    )
    .into_bytes()
    .into_boxed_slice();
    Ok(TaskTable {
        now,
        rows,
        done_total,
        edges,
        open,
        by_category,
        json,
        haystack,
        head,
        served: Mutex::new(HashMap::new()),
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
    /// [`Self::page`]'s bytes, made once per table and then shared.
    pub fn page_bytes(
        &self,
        category: Option<&str>,
        text: Option<&str>,
        offset: usize,
        limit: usize,
    ) -> Bytes {
        let key = Served::Page {
            category: category.and_then(|c| CATEGORIES.iter().position(|k| *k == c)),
            text: text.map(str::to_lowercase).filter(|t| !t.is_empty()),
            offset,
            limit,
        };
        self.kept(key, || self.page(category, text, offset, limit))
    }

    /// [`Self::graph`]'s bytes, made once per table and then shared.
    pub fn graph_bytes(&self, limit: usize) -> Bytes {
        self.kept(Served::Graph(limit), || {
            serde_json::to_vec(&self.graph(limit)).expect("JSON values serialise")
        })
    }

    fn kept(&self, key: Served, make: impl FnOnce() -> Vec<u8>) -> Bytes {
        let lock = || self.served.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(b) = lock().get(&key) {
            return b.clone();
        }
        // Made outside the lock: another request's lookup never waits on it.
        let made = Bytes::from(make());
        let mut served = lock();
        if served.len() >= KEPT {
            served.clear();
        }
        served.insert(key, made.clone());
        made
    }

    /// `/api/tasks`: one category (all open ones when `None`), in display order, paged,
    /// as the JSON document's bytes.
    pub fn page(
        &self,
        category: Option<&str>,
        text: Option<&str>,
        offset: usize,
        limit: usize,
    ) -> Vec<u8> {
        let order = match category.and_then(|c| CATEGORIES.iter().position(|k| *k == c)) {
            Some(c) => &self.by_category[c],
            None => &self.open,
        };
        let needle = text.map(str::to_lowercase).filter(|t| !t.is_empty());
        let finder = needle.as_deref().map(memchr::memmem::Finder::new);
        let matches = |i: &usize| {
            finder.as_ref().is_none_or(|f| {
                self.haystack[*i]
                    .iter()
                    .any(|h| f.find(h.as_bytes()).is_some())
            })
        };
        let mut out = Vec::with_capacity(self.head.len() + 64 + limit.min(order.len()) * 512);
        out.push(b'{');
        out.extend_from_slice(&self.head);
        out.extend_from_slice(b",\"tasks\":[");
        let mut total = 0usize;
        if finder.is_none() {
            // Every row of the order matches: the count is its length.
            for (k, &i) in order.iter().skip(offset).take(limit).enumerate() {
                if k > 0 {
                    out.push(b',');
                }
                out.extend_from_slice(&self.json[i]);
            }
            total = order.len();
        } else {
            for &i in order.iter().filter(|i| matches(i)) {
                if total >= offset && total - offset < limit {
                    if total > offset {
                        out.push(b',');
                    }
                    out.extend_from_slice(&self.json[i]);
                }
                total += 1;
            }
        }
        out.extend_from_slice(format!("],\"total\":{total},\"offset\":{offset}}}").as_bytes());
        out
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
    use crate::clock::ManualClock;
    use crate::store::Store;
    use crate::task::NewTask;
    use std::sync::Arc;

    /// The page as the table used to make it per request: every row filtered, then
    /// serialised through `serde_json::Value`.
    fn naive_page(
        t: &TaskTable,
        cat: Option<&str>,
        q: Option<&str>,
        off: usize,
        lim: usize,
    ) -> Value {
        let mut order: Vec<usize> = (0..t.rows.len()).collect();
        order.sort_by_key(|&i| {
            let r = &t.rows[i];
            (
                CATEGORIES.iter().position(|c| *c == r.category),
                r.rank.unwrap_or(usize::MAX),
                std::cmp::Reverse(r.inherited_priority),
                std::cmp::Reverse(r.releases),
            )
        });
        let needle = q.map(str::to_lowercase).filter(|n| !n.is_empty());
        let rows: Vec<&TaskRow> = order
            .iter()
            .map(|&i| &t.rows[i])
            .filter(|r| cat.map_or(r.category != "done", |c| r.category == c))
            .filter(|r| {
                needle.as_ref().is_none_or(|n| {
                    r.description.to_lowercase().contains(n) || r.handle.to_lowercase().contains(n)
                })
            })
            .collect();
        let count = |c: &str| t.rows.iter().filter(|r| r.category == c).count();
        json!({
            "now": when::rfc3339(t.now),
            "counts": {"ready": count("ready"), "blocked": count("blocked"),
                       "claimed": count("claimed"), "done": t.done_total},
            "total": rows.len(),
            "offset": off,
            "tasks": rows.into_iter().skip(off).take(lim).collect::<Vec<_>>(),
        })
    }

    #[test]
    fn a_page_from_the_prepared_table_is_the_page_filtering_every_row_gave() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Store::open_dir(dir.path(), Arc::new(ManualClock::new(1_000_000))).unwrap();
        let mut ids: Vec<String> = Vec::new();
        for i in 0..60 {
            let depends: Vec<String> = match i % 4 {
                1 if i > 4 => vec![ids[i - 3].clone()],
                2 if i > 8 => vec![ids[i - 5].clone(), ids[i - 7].clone()],
                _ => Vec::new(),
            };
            let done = i % 9 == 0;
            let t = s
                .add_task(
                    NewTask {
                        title: format!("Task {i} of the Console table"),
                        project: Some(["app", "docs"][i % 2].into()),
                        priority: [None, Some(Priority::H), Some(Priority::L)][i % 3],
                        status: done.then_some(Status::Completed),
                        end: done.then_some(500_000 + i as i64),
                        ..NewTask::default()
                    },
                    &depends,
                )
                .unwrap();
            ids.push(t.id);
        }
        let table = task_table(&mut s).unwrap();
        for cat in [
            None,
            Some("ready"),
            Some("blocked"),
            Some("claimed"),
            Some("done"),
        ] {
            for q in [
                None,
                Some(""),
                Some("TASK 1"),
                Some("docs-"),
                Some("no such thing"),
            ] {
                for (off, lim) in [(0, 100), (0, 5), (3, 7), (40, 10), (1000, 10), (0, 0)] {
                    let made = table.page(cat, q, off, lim);
                    let kept = table.page_bytes(cat, q, off, lim);
                    assert_eq!(&kept[..], &made[..], "{cat:?} {q:?} {off} {lim}");
                    let again = table.page_bytes(cat, q, off, lim);
                    assert_eq!(again.as_ptr(), kept.as_ptr(), "made again, not kept");
                    let page: Value = serde_json::from_slice(&made).unwrap();
                    assert_eq!(
                        page,
                        naive_page(&table, cat, q, off, lim),
                        "{cat:?} {q:?} {off} {lim}"
                    );
                }
            }
        }
    }

    #[test]
    fn a_graph_is_made_once_per_table_and_limit() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Store::open_dir(dir.path(), Arc::new(ManualClock::new(1_000_000))).unwrap();
        let task = |t: &str| NewTask {
            title: t.into(),
            ..NewTask::default()
        };
        let a = s.add_task(task("a"), &[]).unwrap().id;
        s.add_task(task("b"), &[a]).unwrap();
        let table = task_table(&mut s).unwrap();
        let kept = table.graph_bytes(10);
        let made = serde_json::to_vec(&table.graph(10)).unwrap();
        assert_eq!(&kept[..], &made[..]);
        assert_eq!(table.graph_bytes(10).as_ptr(), kept.as_ptr());
        assert_ne!(table.graph_bytes(1), kept);
    }

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
