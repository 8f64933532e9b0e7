//! Tasks, dependencies, snapshots and the ledger on PostgreSQL. Ids are resolved by
//! the store's one set of rules ([`super::super::resolve::resolve_by`]).

use super::{PgContext, PgStore};
use crate::clock::Micros;
use crate::error::{Error, Result};
use crate::stamp;
use crate::store::authority::Cell;
use crate::store::edits::check_not_self;
use crate::store::resolve::{resolve_by, Lookup, PER_LOOKUP};
use crate::store::tasks::new_task_phase;
use crate::store::{ClaimSet, ClaimView, LeanClaim, LedgerEntry, ShortIds, Snapshot};
use crate::task::{handle, Annotation, NewTask, Priority, Status, Task};
use postgres::{GenericClient, Row};

pub(super) const TASK_COLUMNS: &str =
    "id, uuid, title, body, project, phase, priority, due, wait, status, entry, end_at, modified";

pub(super) fn row_to_task(r: &Row) -> Task {
    let priority: Option<String> = r.get(6);
    let status: String = r.get(9);
    Task {
        id: r.get(0),
        uuid: r.get(1),
        title: r.get(2),
        body: r.get(3),
        project: r.get(4),
        phase: r.get(5),
        priority: priority.and_then(|p| Priority::parse(&p).ok().flatten()),
        due: r.get(7),
        wait: r.get(8),
        status: Status::parse(&status).unwrap_or(Status::Pending),
        entry: r.get(10),
        end: r.get(11),
        modified: r.get(12),
        depends: Vec::new(),
        tags: Vec::new(),
        annotations: Vec::new(),
    }
}

/// Lookups for [`resolve_by`] through any client or transaction.
pub(super) struct Ids<'a, C: GenericClient> {
    pub c: &'a mut C,
    pub at: &'a str,
}

impl<C: GenericClient> Lookup for Ids<'_, C> {
    fn by_uuid(&mut self, uuid: &str) -> Result<Option<String>> {
        let row = self
            .c
            .query_opt("SELECT id FROM tasks WHERE uuid = $1", &[&uuid])
            .ctx("to look up a task", self.at)?;
        Ok(row.map(|r| r.get(0)))
    }
    fn exact(&mut self, id: &str) -> Result<Option<String>> {
        let row = self
            .c
            .query_opt("SELECT id FROM tasks WHERE id = $1", &[&id])
            .ctx("to look up a task", self.at)?;
        Ok(row.map(|r| r.get(0)))
    }
    fn prefixed(&mut self, prefix: &str, project: Option<&str>) -> Result<Vec<String>> {
        // Ids are ASCII below 0x7f; `COLLATE "C"` compares them bytewise, as SQLite does.
        let upper = format!("{prefix}\u{7f}");
        let rows = self
            .c
            .query(
                "SELECT id FROM tasks WHERE id COLLATE \"C\" >= $1 AND id COLLATE \"C\" < $2
                   AND ($3::text IS NULL OR project = $3) ORDER BY id COLLATE \"C\" LIMIT $4",
                &[&prefix, &upper, &project, &(PER_LOOKUP as i64)],
            )
            .ctx("to look up a task", self.at)?;
        Ok(rows.iter().map(|r| r.get(0)).collect())
    }
}

/// Resolves a typed id through `c`.
pub(super) fn resolve(c: &mut impl GenericClient, at: &str, input: &str) -> Result<String> {
    resolve_by(&mut Ids { c, at }, input)
}

/// The server's clock, in microseconds since the epoch.
pub(super) fn server_now(c: &mut impl GenericClient, at: &str) -> Result<Micros> {
    Ok(c.query_one("SELECT spice_now()", &[])
        .ctx("to read the server's clock", at)?
        .get(0))
}

/// Appends one ledger entry.
pub(super) fn append(
    c: &mut impl GenericClient,
    at: &str,
    entry: (&str, Micros, &str),
    actor: Option<&str>,
    fence: Option<i64>,
    detail: serde_json::Value,
) -> Result<()> {
    let (task, when, kind) = entry;
    c.execute(
        "INSERT INTO ledger (task_id, at, kind, actor, fence, detail)
         VALUES ($1, $2, $3, $4, $5, $6::text::jsonb)",
        &[&task, &when, &kind, &actor, &fence, &detail.to_string()],
    )
    .ctx("to append to the ledger", at)?;
    Ok(())
}

/// The (project, phase) cell of a task.
pub(super) fn cell_of(c: &mut impl GenericClient, at: &str, id: &str) -> Result<Cell> {
    let r = c
        .query_one("SELECT project, phase FROM tasks WHERE id = $1", &[&id])
        .ctx("to read a task", at)?;
    Ok((r.get(0), r.get(1)))
}

pub(super) fn add(s: &mut PgStore, new: NewTask, depends: &[String]) -> Result<Task> {
    let at = s.at.as_str();
    let mut tx = s.client.transaction().ctx("to add a task", at)?;
    let deps = depends
        .iter()
        .map(|d| resolve(&mut tx, at, d))
        .collect::<Result<Vec<_>>>()?;
    let now = server_now(&mut tx, at)?;
    let id = insert_task(&mut tx, at, &new, now)?;
    for dep in &deps {
        check_not_self(&id, dep)?;
        insert_dep(&mut tx, at, &id, dep)?;
    }
    append(
        &mut tx,
        at,
        (&id, now, "added"),
        None,
        None,
        serde_json::json!({}),
    )?;
    tx.commit().ctx("to commit a new task", at)?;
    one(s, &id)
}

/// Inserts one task (with its tags and annotations) under a fresh stamp id, checked
/// by the rules of SQLite's store.
pub(super) fn insert_task(
    tx: &mut impl GenericClient,
    at: &str,
    new: &NewTask,
    now: Micros,
) -> Result<String> {
    let flow = super::phases::flow_of(tx, at, new.project.as_deref())?;
    let phase = new_task_phase(new, &flow)?;
    let uuid = match &new.uuid {
        Some(u) => u.to_ascii_lowercase(),
        None => uuid::Uuid::new_v4().to_string(),
    };
    let status = new.status.unwrap_or(Status::Pending);
    let end = new.end.or_else(|| (!status.is_open()).then_some(now));
    let base = stamp::MINTER.mint(now.max(0) as u64);
    let mut id = base.clone();
    // Another host may mint the same microsecond: the next suffix, as SQLite's store does.
    for n in 1.. {
        let inserted = tx
            .execute(
                "INSERT INTO tasks (id, uuid, title, body, project, phase, priority, due, wait,
                                    status, entry, end_at, modified)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)
                 ON CONFLICT (id) DO NOTHING",
                &[
                    &id,
                    &uuid,
                    &new.title,
                    &new.body,
                    &new.project,
                    &phase,
                    &new.priority.map(Priority::as_str),
                    &new.due,
                    &new.wait,
                    &status.as_str(),
                    &new.entry.unwrap_or(now),
                    &end,
                    &now,
                ],
            )
            .map_err(|e| {
                if e.code() == Some(&postgres::error::SqlState::UNIQUE_VIOLATION) {
                    Error::input(format!("a task with uuid {uuid} already exists"))
                } else {
                    Error::Other(format!(
                        "failed to add a task on {at}: {}",
                        super::reason(&e)
                    ))
                }
            })?;
        if inserted == 1 {
            break;
        }
        id = stamp::with_suffix(&base, n);
    }
    for t in &new.tags {
        tag_row(tx, at, &id, t)?;
    }
    for a in &new.annotations {
        annotate_row(tx, at, &id, a.entry, &a.description)?;
    }
    Ok(id)
}

/// Makes `id` wait on `dep` (already waiting: nothing changes).
pub(super) fn insert_dep(c: &mut impl GenericClient, at: &str, id: &str, dep: &str) -> Result<()> {
    c.execute(
        "INSERT INTO deps (task_id, dep_id) VALUES ($1, $2) ON CONFLICT DO NOTHING",
        &[&id, &dep],
    )
    .ctx("to add a dependency", at)?;
    Ok(())
}

/// Tags a task (already tagged so: nothing changes).
pub(super) fn tag_row(c: &mut impl GenericClient, at: &str, id: &str, tag: &str) -> Result<()> {
    c.execute(
        "INSERT INTO tags (task_id, tag) VALUES ($1, $2) ON CONFLICT DO NOTHING",
        &[&id, &tag],
    )
    .ctx("to tag a task", at)?;
    Ok(())
}

/// Adds one annotation row.
pub(super) fn annotate_row(
    c: &mut impl GenericClient,
    at: &str,
    id: &str,
    entry: Micros,
    text: &str,
) -> Result<()> {
    c.execute(
        "INSERT INTO annotations (task_id, entry, description) VALUES ($1, $2, $3)",
        &[&id, &entry, &text],
    )
    .ctx("to annotate a task", at)?;
    Ok(())
}

/// One task, with its tags, dependencies and annotations.
pub(super) fn one(s: &mut PgStore, input: &str) -> Result<Task> {
    let at = s.at.as_str();
    let c = &mut s.client;
    let id = resolve(c, at, input)?;
    let row = c
        .query_one(
            &format!("SELECT {TASK_COLUMNS} FROM tasks WHERE id = $1"),
            &[&id],
        )
        .ctx("to read a task", at)?;
    let mut task = row_to_task(&row);
    let mut of_task = |sql: &str, what: &str| {
        c.query(sql, &[&id])
            .ctx(&format!("to read a task's {what}"), at)
    };
    task.tags = of_task(
        "SELECT tag FROM tags WHERE task_id = $1 ORDER BY tag COLLATE \"C\"",
        "tags",
    )?
    .iter()
    .map(|r| r.get(0))
    .collect();
    task.depends = of_task(
        "SELECT dep_id FROM deps WHERE task_id = $1 ORDER BY dep_id COLLATE \"C\"",
        "dependencies",
    )?
    .iter()
    .map(|r| r.get(0))
    .collect();
    task.annotations = of_task(
        "SELECT entry, description FROM annotations WHERE task_id = $1 ORDER BY entry, seq",
        "annotations",
    )?
    .iter()
    .map(|r| Annotation {
        entry: r.get(0),
        description: r.get(1),
    })
    .collect();
    Ok(task)
}

/// The newest `limit` completed tasks (by end, else last change) and how many there
/// are, from one read; without tags and dependencies (the console's table of finished
/// work shows neither).
pub(super) fn done(s: &mut PgStore, limit: usize) -> Result<(usize, Vec<Task>)> {
    let at = s.at.as_str();
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let rows = s
        .client
        .query(
            &format!(
                "SELECT {TASK_COLUMNS}, count(*) OVER () FROM tasks WHERE status = 'completed'
                 ORDER BY coalesce(end_at, modified) DESC, entry, id COLLATE \"C\" LIMIT $1"
            ),
            &[&limit],
        )
        .ctx("to read the finished tasks", at)?;
    let total = match rows.first() {
        Some(r) => r.get::<_, i64>(13) as usize,
        // LIMIT 0, or none finished: count them apart only in the first case.
        None if limit == 0 => s
            .client
            .query_one("SELECT count(*) FROM tasks WHERE status = 'completed'", &[])
            .ctx("to count the finished tasks", at)?
            .get::<_, i64>(0) as usize,
        None => 0,
    };
    Ok((total, rows.iter().map(row_to_task).collect()))
}

/// The open tasks, oldest first (the columns of [`TASK_COLUMNS`]).
const OPEN_TASKS: &str = "SELECT id, uuid, title, body, project, phase, priority, due, wait,
    status, entry, end_at, modified
  FROM tasks WHERE status IN ('pending', 'waiting') ORDER BY entry, id COLLATE \"C\"";

/// Tags and dependencies are read whole and joined here: gathering them per task on
/// the server (`array_agg` or an `ARRAY(...)` subquery per task) cost more than the
/// two round trips it saves (`EXPLAIN ANALYZE` on 10,000 tasks: about twice the time).
const ALL_TAGS: &str = "SELECT task_id, tag FROM tags ORDER BY tag";
const ALL_DEPS: &str = "SELECT task_id, dep_id FROM deps ORDER BY dep_id COLLATE \"C\"";
/// Annotations count towards urgency, so a ranking reads them as SQLite's does.
const ALL_NOTES: &str = "SELECT task_id, entry, description FROM annotations ORDER BY entry, seq";

/// Every claim, oldest first, each row ending with the server's clock; a row of nulls
/// and the clock when there is no claim, so the time of the read costs no query.
const CLAIMS_AND_NOW: &str = "SELECT c.task_id, t.project, t.title, c.claimant, c.lane,
    c.worktree, c.fence, c.lease_until, c.claimed_at, c.renewed_at, n.now
  FROM (SELECT spice_now() AS now) n
  LEFT JOIN (claims c JOIN tasks t ON t.id = c.task_id) ON true
  ORDER BY c.claimed_at, c.fence";

/// Open tasks and every claim from one repeatable-read transaction: seven round trips
/// (begin, tasks, tags, dependencies, annotations, claims with the clock, commit), each statement
/// prepared once per connection.
pub(super) fn snapshot(s: &mut PgStore) -> Result<Snapshot> {
    let PgStore {
        client,
        at,
        prepared,
        ..
    } = s;
    let at = at.as_str();
    let mut tx = client
        .build_transaction()
        .isolation_level(postgres::IsolationLevel::RepeatableRead)
        .read_only(true)
        .start()
        .ctx("to read the task graph", at)?;
    let tasks = open_tasks(&mut tx, prepared, at)?;
    let st = prepared.get(&mut tx, CLAIMS_AND_NOW, at)?;
    let rows = tx.query(&st, &[]).ctx("to list claims", at)?;
    tx.commit().ctx("to read the task graph", at)?;
    let now = rows
        .first()
        .map(|r| r.get(10))
        .ok_or_else(|| Error::Other(format!("failed to read the server's clock on {at}")))?;
    let claims = rows
        .iter()
        .filter(|r| r.get::<_, Option<&str>>(0).is_some())
        .map(super::claims::row_to_claim)
        .collect();
    Ok(Snapshot { tasks, claims, now })
}

/// The open tasks with their tags and dependencies, read in `tx`.
fn open_tasks(
    tx: &mut postgres::Transaction<'_>,
    prepared: &mut super::Prepared,
    at: &str,
) -> Result<Vec<Task>> {
    let st = prepared.get(tx, OPEN_TASKS, at)?;
    let rows = tx.query(&st, &[]).ctx("to list tasks", at)?;
    let mut tasks: Vec<Task> = rows.iter().map(row_to_task).collect();
    let index: std::collections::HashMap<String, usize> = tasks
        .iter()
        .enumerate()
        .map(|(i, t)| (t.id.clone(), i))
        .collect();
    let st = prepared.get(tx, ALL_TAGS, at)?;
    for r in tx.query(&st, &[]).ctx("to list tags", at)? {
        if let Some(&i) = index.get(r.get::<_, &str>(0)) {
            tasks[i].tags.push(r.get(1));
        }
    }
    let st = prepared.get(tx, ALL_DEPS, at)?;
    for r in tx.query(&st, &[]).ctx("to list dependencies", at)? {
        if let Some(&i) = index.get(r.get::<_, &str>(0)) {
            tasks[i].depends.push(r.get(1));
        }
    }
    let st = prepared.get(tx, ALL_NOTES, at)?;
    for r in tx.query(&st, &[]).ctx("to list annotations", at)? {
        if let Some(&i) = index.get(r.get::<_, &str>(0)) {
            tasks[i].annotations.push(Annotation {
                entry: r.get(1),
                description: r.get(2),
            });
        }
    }
    Ok(tasks)
}

/// The open tasks and the graph's generation they are at, from one repeatable read.
pub(super) fn ranking_graph(s: &mut PgStore) -> Result<(i64, Vec<Task>)> {
    let PgStore {
        client,
        at,
        prepared,
        ..
    } = s;
    let at = at.as_str();
    let mut tx = client
        .build_transaction()
        .isolation_level(postgres::IsolationLevel::RepeatableRead)
        .read_only(true)
        .start()
        .ctx("to read the task graph", at)?;
    let graph: i64 = tx
        .query_one("SELECT value FROM spice_graph", &[])
        .ctx("to read the graph's generation", at)?
        .get(0);
    let tasks = open_tasks(&mut tx, prepared, at)?;
    tx.commit().ctx("to read the task graph", at)?;
    Ok((graph, tasks))
}

/// The graph's generation, the clock, the claimant's last cell, the count of claims
/// gone, the reading snapshot's horizon, and the claims written by transactions at or
/// above `$2` (a horizon as a number; 0 for every claim), in one statement (one round
/// trip): a row per claim, or one row of nulls after the first six columns when none
/// changed. The range on `changed` has an upper bound no transaction reaches (2^62)
/// so that the generic plan, which cannot know `$2`, prices it as a narrow range and
/// reads the few changed claims by `claims_by_change` and their tasks by key; priced
/// as an open inequality (a third of the table) it scanned every claim and hashed
/// every task.
const CLAIM_VIEW: &str = "SELECT g.value, n.now, l.project, l.phase, gone.value,
    pg_snapshot_xmin(pg_current_snapshot())::text::bigint,
    c.task_id, c.claimant, c.lease_until, t.project, t.phase
  FROM spice_graph g
  CROSS JOIN (SELECT spice_now() AS now) n
  CROSS JOIN (SELECT sum(value)::bigint AS value FROM spice_claims_gone) gone
  LEFT JOIN LATERAL (SELECT detail->>'project' AS project, detail->>'phase' AS phase
      FROM ledger WHERE actor = $1 AND kind IN ('claimed', 'takeover', 'successor')
      ORDER BY seq DESC LIMIT 1) l ON true
  LEFT JOIN (claims c JOIN tasks t ON t.id = c.task_id)
    ON c.changed >= $2::bigint::text::xid8
   AND c.changed < ($2::bigint + 4611686018427387904)::text::xid8";

const KEPT_RANKING: &str = "SELECT data FROM spice_rankings WHERE graph = $1";

/// The claims this connection last read ([`claim_view`]), and what they were read at:
/// the graph's generation (a claimed task's project or phase moves it), the count of
/// claims gone, and the reading snapshot's horizon. The next read asks only for the
/// claims written at or above the horizon and keeps this while the generation and the
/// count stay; either moving means a claim may be gone or changed without a row to say
/// so, and every claim is read again. So a long-lived claimer reads what changed
/// between its claims, not every claim each time (at 64 claimers draining 1,000 tasks
/// that was 600,000 rows).
#[derive(Debug, Default)]
pub(super) struct SeenClaims {
    graph: i64,
    gone: i64,
    horizon: i64,
    claims: std::sync::Arc<ClaimSet>,
}

pub(super) fn claim_view(s: &mut PgStore, claimant: &str, have: Option<i64>) -> Result<ClaimView> {
    let PgStore {
        client,
        at,
        prepared,
        seen,
        ..
    } = s;
    let at = at.as_str();
    let st = prepared.get(client, CLAIM_VIEW, at)?;
    let mut from = seen.as_ref().map_or(0, |s| s.horizon);
    let (graph, now, last_cell) = loop {
        let rows = client
            .query(&st, &[&claimant, &from])
            .ctx("to read the claims", at)?;
        let first = rows.first().ok_or_else(|| {
            Error::Other(format!("failed to read the graph's generation on {at}"))
        })?;
        let graph: i64 = first.get(0);
        let gone: i64 = first.get(4);
        let horizon: i64 = first.get(5);
        let kept = seen
            .take()
            .filter(|s| from > 0 && s.graph == graph && s.gone == gone);
        if from > 0 && kept.is_none() {
            // A claim may have gone or changed cell without a row to say so.
            from = 0;
            continue;
        }
        let mut now_seen = kept.unwrap_or_default();
        now_seen.graph = graph;
        now_seen.gone = gone;
        now_seen.horizon = horizon;
        for r in rows
            .iter()
            .filter(|r| r.get::<_, Option<&str>>(6).is_some())
        {
            let claim = LeanClaim {
                task_id: r.get(6),
                claimant: r.get(7),
                lease_until: r.get(8),
                project: r.get(9),
                phase: r.get(10),
            };
            // The ranking let go of the last view's set before asking again: no copy.
            std::sync::Arc::make_mut(&mut now_seen.claims).insert(claim);
        }
        *seen = Some(now_seen);
        let last_cell = first
            .get::<_, Option<String>>(3)
            .map(|phase| (first.get(2), phase));
        break (graph, first.get::<_, Micros>(1), last_cell);
    };
    let claims = seen.as_ref().map(|s| s.claims.clone()).unwrap_or_default();
    let kept = if have == Some(graph) {
        None
    } else {
        let st = prepared.get(client, KEPT_RANKING, at)?;
        client
            .query_opt(&st, &[&graph])
            .ctx("to read the kept ranking", at)?
            .map(|r| r.get(0))
    };
    Ok(ClaimView {
        graph,
        now,
        claims,
        last_cell,
        kept,
    })
}

/// Keeps the ranking of generation `graph` unless the graph moved on, another kept it
/// already, or another is keeping one right now (its row locked: a cache is not worth
/// a wait; 64 claimers starting together once queued here 24 ms each). One statement;
/// the row is there from the migration on.
const KEEP_RANKING: &str = "UPDATE spice_rankings r SET graph = $1, data = $2
    FROM (SELECT one FROM spice_rankings WHERE graph <> $1 FOR UPDATE SKIP LOCKED) k,
         spice_graph g
   WHERE r.one = k.one AND g.value = $1";

pub(super) fn keep_ranking(s: &mut PgStore, graph: i64, data: &[u8]) -> Result<bool> {
    let st = s.prepared.get(&mut s.client, KEEP_RANKING, &s.at)?;
    let n = s
        .client
        .execute(&st, &[&graph, &data])
        .ctx("to keep a ranking", &s.at)?;
    Ok(n > 0)
}

pub(super) fn dependents(s: &mut PgStore, input: &str) -> Result<Vec<String>> {
    let at = s.at.as_str();
    let id = resolve(&mut s.client, at, input)?;
    let rows = s
        .client
        .query(
            "SELECT task_id FROM deps WHERE dep_id = $1 ORDER BY task_id COLLATE \"C\"",
            &[&id],
        )
        .ctx("to read dependents", at)?;
    Ok(rows.iter().map(|r| r.get(0)).collect())
}

pub(super) fn short_ids(s: &mut PgStore) -> Result<ShortIds> {
    let ids = s
        .client
        .query("SELECT id FROM tasks", &[])
        .ctx("to read task ids", &s.at)?
        .iter()
        .map(|r| r.get(0))
        .collect();
    Ok(ShortIds::new(ids))
}

pub(super) fn last_cell(s: &mut PgStore, claimant: &str) -> Result<Option<Cell>> {
    // Asked before every next-claim: prepared once per connection.
    let st = s.prepared.get(
        &mut s.client,
        "SELECT detail->>'project', detail->>'phase' FROM ledger WHERE actor = $1
           AND kind IN ('claimed', 'takeover', 'successor') ORDER BY seq DESC LIMIT 1",
        &s.at,
    )?;
    let row = s
        .client
        .query_opt(&st, &[&claimant])
        .ctx("to read the ledger", &s.at)?;
    Ok(row.and_then(|r| {
        let phase: Option<String> = r.get(1);
        phase.map(|p| (r.get(0), p))
    }))
}

pub(super) fn ledger(s: &mut PgStore, input: &str) -> Result<Vec<LedgerEntry>> {
    let at = s.at.as_str();
    let id = resolve(&mut s.client, at, input)?;
    let rows = s
        .client
        .query(
            "SELECT seq, task_id, at, kind, actor, fence, detail::text FROM ledger
             WHERE task_id = $1 ORDER BY seq",
            &[&id],
        )
        .ctx("to read the ledger", at)?;
    Ok(rows
        .iter()
        .map(|r| LedgerEntry {
            seq: r.get(0),
            task_id: r.get(1),
            at: r.get(2),
            kind: r.get(3),
            actor: r.get(4),
            fence: r.get(5),
            detail: serde_json::from_str(r.get::<_, &str>(6)).unwrap_or_default(),
        })
        .collect())
}

/// The handles of `ids`, for messages.
pub(super) fn handles(c: &mut impl GenericClient, at: &str, ids: &[String]) -> Result<Vec<String>> {
    ids.iter()
        .map(|id| {
            let project: Option<String> = c
                .query_opt("SELECT project FROM tasks WHERE id = $1", &[id])
                .ctx("to read a task", at)?
                .and_then(|r| r.get(0));
            Ok(handle(project.as_deref(), id))
        })
        .collect()
}
