//! Tasks, their tags, annotations and dependencies (phases and flows: `phases.rs`).
//!
//! Invariants: the dependency graph stays acyclic (every new edge is checked, and an
//! import is checked whole before anything is written); a task's phase is always one
//! of its project's flow; a write that acts on a claim (phase, done, delete) comes from
//! the claim's holder, while descriptive edits (modify, annotate) stay the operator's.

use super::ledger::append;
use super::phases::flow_of;
use super::resolve::resolve;
use super::Store;
use crate::clock::Micros;
use crate::error::{Error, Result, SqlContext};
use crate::stamp;
use crate::task::{check_name, handle, Annotation, NewTask, Priority, Status, Task};
use rusqlite::{params, OptionalExtension, Transaction};

/// Which tasks `list` returns. Empty fields do not filter.
#[derive(Debug, Clone, Default)]
pub struct ListFilter {
    pub statuses: Vec<Status>,
    pub project: Option<String>,
    pub phase: Option<String>,
    pub tag: Option<String>,
}

/// A change to a task's descriptive fields; `None` leaves a field as it is.
#[derive(Debug, Clone, Default)]
pub struct TaskUpdate {
    pub title: Option<String>,
    pub body: Option<String>,
    pub project: Option<Option<String>>,
    pub priority: Option<Option<Priority>>,
    pub due: Option<Option<Micros>>,
    pub add_tags: Vec<String>,
    pub remove_tags: Vec<String>,
}

/// What completing a phase did.
#[derive(Debug, Clone, serde::Serialize)]
pub struct PhaseOutcome {
    pub from: String,
    /// The next phase, or `None` when the flow is finished and the task is completed.
    pub to: Option<String>,
}

const TASK_COLUMNS: &str =
    "id, uuid, title, body, project, phase, priority, due, wait, status, entry, end_at, modified";
/// [`TASK_COLUMNS`] for a reader that only ranks: the uuid, title and body (most of a
/// task's bytes), the end and the modification time, which no ranking reads, are left
/// empty.
const RANKED_COLUMNS: &str =
    "id, '', '', '', project, phase, priority, due, wait, status, entry, NULL, 0";

fn row_to_task(r: &rusqlite::Row<'_>) -> rusqlite::Result<Task> {
    let priority: Option<String> = r.get(6)?;
    let status: String = r.get(9)?;
    Ok(Task {
        id: r.get(0)?,
        uuid: r.get(1)?,
        title: r.get(2)?,
        body: r.get(3)?,
        project: r.get(4)?,
        phase: r.get(5)?,
        priority: priority.and_then(|p| Priority::parse(&p).ok().flatten()),
        due: r.get(7)?,
        wait: r.get(8)?,
        status: Status::parse(&status).unwrap_or(Status::Pending),
        entry: r.get(10)?,
        end: r.get(11)?,
        modified: r.get(12)?,
        depends: Vec::new(),
        tags: Vec::new(),
        annotations: Vec::new(),
    })
}

impl Store {
    /// Creates a task. `depends` are ids as typed (prefixes, handles, uuids).
    pub fn add_task(&mut self, new: NewTask, depends: &[String]) -> Result<Task> {
        let id = self.write("adding a task", |tx, now| {
            let dep_ids = depends
                .iter()
                .map(|d| resolve(tx, d))
                .collect::<Result<Vec<_>>>()?;
            let id = insert_task(tx, &new, now)?;
            for dep in dep_ids {
                insert_dep(tx, &id, &dep)?;
            }
            append(tx, &id, now, "added", None, None, serde_json::json!({}))?;
            Ok(id)
        })?;
        self.task(&id)
    }

    /// Resolves a typed id (stamp, prefix, handle or uuid) to a task id.
    pub fn resolve(&mut self, input: &str) -> Result<String> {
        self.read("looking up a task", |tx, _| resolve(tx, input))
    }

    /// One task with its tags, dependencies and annotations.
    pub fn task(&mut self, input: &str) -> Result<Task> {
        self.read("reading a task", |tx, _| {
            let id = resolve(tx, input)?;
            load_task(tx, &id)
        })
    }

    /// Tasks matching `filter`, oldest first.
    pub fn list(&mut self, filter: &ListFilter) -> Result<Vec<Task>> {
        self.read("listing tasks", |tx, _| list_tasks(tx, filter))
    }

    /// Tasks matching `filter`, oldest first, one at a time (memory stays that of one
    /// task, however many there are), all from one read transaction.
    pub fn each_task(
        &mut self,
        filter: &ListFilter,
        f: impl FnMut(Task) -> Result<()>,
    ) -> Result<()> {
        self.read("listing tasks", |tx, _| each_task(tx, filter, f))
    }

    /// The ids of open tasks that directly wait on `id`.
    pub fn dependents(&mut self, input: &str) -> Result<Vec<String>> {
        self.read("reading dependents", |tx, _| {
            let id = resolve(tx, input)?;
            let mut stmt = tx.prepare_cached(
                "SELECT d.task_id FROM deps d JOIN tasks t ON t.id = d.task_id
                 WHERE d.dep_id = ?1 ORDER BY d.task_id",
            )?;
            let rows = stmt.query_map([&id], |r| r.get(0))?;
            Ok(rows.collect::<std::result::Result<Vec<String>, _>>()?)
        })
    }

    /// Changes a task's descriptive fields (the operator's: no claim is consulted).
    pub fn modify(&mut self, input: &str, up: &TaskUpdate) -> Result<Task> {
        let id = self.write("modifying a task", |tx, now| {
            let id = resolve(tx, input)?;
            let phase: String =
                tx.query_row("SELECT phase FROM tasks WHERE id = ?1", [&id], |r| r.get(0))?;
            check_update(up, &phase, |p| flow_of(tx, p))?;
            if let Some(t) = &up.title {
                tx.execute("UPDATE tasks SET title = ?2 WHERE id = ?1", params![id, t])?;
            }
            if let Some(b) = &up.body {
                tx.execute("UPDATE tasks SET body = ?2 WHERE id = ?1", params![id, b])?;
            }
            if let Some(p) = &up.project {
                tx.execute(
                    "UPDATE tasks SET project = ?2 WHERE id = ?1",
                    params![id, p],
                )?;
            }
            if let Some(p) = up.priority {
                tx.execute(
                    "UPDATE tasks SET priority = ?2 WHERE id = ?1",
                    params![id, p.map(Priority::as_str)],
                )?;
            }
            if let Some(d) = up.due {
                tx.execute("UPDATE tasks SET due = ?2 WHERE id = ?1", params![id, d])?;
            }
            for t in &up.add_tags {
                tx.execute(
                    "INSERT OR IGNORE INTO tags (task_id, tag) VALUES (?1, ?2)",
                    params![id, t],
                )?;
            }
            for t in &up.remove_tags {
                tx.execute(
                    "DELETE FROM tags WHERE task_id = ?1 AND tag = ?2",
                    params![id, t],
                )?;
            }
            tx.execute(
                "UPDATE tasks SET modified = ?2 WHERE id = ?1",
                params![id, now],
            )?;
            append(tx, &id, now, "modified", None, None, serde_json::json!({}))?;
            Ok(id)
        })?;
        self.task(&id)
    }

    pub fn annotate(&mut self, input: &str, text: &str) -> Result<Task> {
        let id = self.write("annotating a task", |tx, now| {
            let id = resolve(tx, input)?;
            tx.execute(
                "INSERT INTO annotations (task_id, entry, description) VALUES (?1, ?2, ?3)",
                params![id, now, text],
            )?;
            tx.execute(
                "UPDATE tasks SET modified = ?2 WHERE id = ?1",
                params![id, now],
            )?;
            Ok(id)
        })?;
        self.task(&id)
    }
}

/// Inserts one task row (with tags and annotations) under a fresh stamp id.
pub(super) fn insert_task(tx: &Transaction<'_>, new: &NewTask, now: Micros) -> Result<String> {
    let phase = new_task_phase(new, &flow_of(tx, new.project.as_deref())?)?;
    let id = fresh_id(tx, now)?;
    let uuid = match &new.uuid {
        Some(u) => u.to_ascii_lowercase(),
        None => uuid::Uuid::new_v4().to_string(),
    };
    let status = new.status.unwrap_or(Status::Pending);
    let end = new.end.or_else(|| (!status.is_open()).then_some(now));
    tx.execute(
        "INSERT INTO tasks (id, uuid, title, body, project, phase, priority, due, wait, status, entry, end_at, modified)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
        params![
            id,
            uuid,
            new.title,
            new.body,
            new.project,
            phase,
            new.priority.map(Priority::as_str),
            new.due,
            new.wait,
            status.as_str(),
            new.entry.unwrap_or(now),
            end,
            now
        ],
    )
    .map_err(|e| match e.sqlite_error_code() {
        Some(rusqlite::ErrorCode::ConstraintViolation) => {
            Error::input(format!("a task with uuid {uuid} already exists"))
        }
        _ => e.into(),
    })?;
    let mut tag_stmt =
        tx.prepare_cached("INSERT OR IGNORE INTO tags (task_id, tag) VALUES (?1, ?2)")?;
    for t in &new.tags {
        tag_stmt.execute(params![id, t])?;
    }
    let mut ann_stmt = tx.prepare_cached(
        "INSERT INTO annotations (task_id, entry, description) VALUES (?1, ?2, ?3)",
    )?;
    for a in &new.annotations {
        ann_stmt.execute(params![id, a.entry, a.description])?;
    }
    Ok(id)
}

pub(super) fn insert_dep(tx: &Transaction<'_>, id: &str, dep: &str) -> Result<()> {
    super::edits::check_not_self(id, dep)?;
    tx.prepare_cached("INSERT OR IGNORE INTO deps (task_id, dep_id) VALUES (?1, ?2)")?
        .execute(params![id, dep])?;
    Ok(())
}

/// A stamp for `now` that no task has yet: the minter's next value, with a `-N`
/// suffix if another process minted the same microsecond.
fn fresh_id(tx: &Transaction<'_>, now: Micros) -> Result<String> {
    let base = stamp::MINTER.mint(now.max(0) as u64);
    let mut exists = tx.prepare_cached("SELECT 1 FROM tasks WHERE id = ?1")?;
    if !exists.exists([&base])? {
        return Ok(base);
    }
    for n in 1.. {
        let candidate = stamp::with_suffix(&base, n);
        if !exists.exists([&candidate])? {
            return Ok(candidate);
        }
    }
    unreachable!("suffixes are unbounded")
}

/// A new task's phase (the one asked for, else its flow's first), once its title,
/// project and tags are checked: the rules of `add` on every backend.
pub(super) fn new_task_phase(new: &NewTask, flow: &[String]) -> Result<String> {
    check_title(&new.title)?;
    if let Some(p) = &new.project {
        check_name("project", p).map_err(Error::input)?;
    }
    for t in &new.tags {
        check_name("tag", t).map_err(Error::input)?;
    }
    match &new.phase {
        Some(p) if flow.contains(p) => Ok(p.clone()),
        Some(p) => Err(Error::input(format!(
            "phase '{p}' is not in the flow of project '{}' ({})",
            new.project.as_deref().unwrap_or(""),
            flow.join(" → ")
        ))),
        None => Ok(flow[0].clone()),
    }
}

/// Checks a change to a task now in `phase` before anything is written: the title,
/// the new project's name and that its flow (`flow_of`) has the phase, the new tags.
pub(super) fn check_update(
    up: &TaskUpdate,
    phase: &str,
    flow_of: impl FnOnce(Option<&str>) -> Result<Vec<String>>,
) -> Result<()> {
    if let Some(t) = &up.title {
        check_title(t)?;
    }
    if let Some(p) = &up.project {
        if let Some(name) = p {
            check_name("project", name).map_err(Error::input)?;
        }
        let flow = flow_of(p.as_deref())?;
        if !flow.iter().any(|f| f == phase) {
            return Err(Error::input(format!(
                "cannot move task to project '{}': its phase '{phase}' is not in that project's flow ({})",
                p.as_deref().unwrap_or(""),
                flow.join(" → ")
            )));
        }
    }
    for t in &up.add_tags {
        check_name("tag", t).map_err(Error::input)?;
    }
    Ok(())
}

pub(super) fn check_title(title: &str) -> Result<()> {
    if title.trim().is_empty() {
        return Err(Error::input("a task needs a non-empty title"));
    }
    Ok(())
}

pub(super) fn load_task(tx: &Transaction<'_>, id: &str) -> Result<Task> {
    let mut task = tx
        .query_row(
            &format!("SELECT {TASK_COLUMNS} FROM tasks WHERE id = ?1"),
            [id],
            row_to_task,
        )
        .optional()
        .ctx(|| format!("failed to read task {id}"))?
        .ok_or_else(|| Error::input(format!("unknown task '{id}'")))?;
    let mut stmt = tx.prepare_cached("SELECT tag FROM tags WHERE task_id = ?1 ORDER BY tag")?;
    task.tags = stmt
        .query_map([id], |r| r.get(0))?
        .collect::<std::result::Result<_, _>>()?;
    let mut stmt =
        tx.prepare_cached("SELECT dep_id FROM deps WHERE task_id = ?1 ORDER BY dep_id")?;
    task.depends = stmt
        .query_map([id], |r| r.get(0))?
        .collect::<std::result::Result<_, _>>()?;
    let mut stmt = tx.prepare_cached(
        "SELECT entry, description FROM annotations WHERE task_id = ?1 ORDER BY entry, rowid",
    )?;
    task.annotations = stmt
        .query_map([id], |r| {
            Ok(Annotation {
                entry: r.get(0)?,
                description: r.get(1)?,
            })
        })?
        .collect::<std::result::Result<_, _>>()?;
    Ok(task)
}

/// Lists tasks with their tags, deps and annotations, in three bulk queries rather
/// than three per task.
pub(super) fn list_tasks(tx: &Transaction<'_>, filter: &ListFilter) -> Result<Vec<Task>> {
    let mut tasks = Vec::new();
    each_task(tx, filter, |t| {
        tasks.push(t);
        Ok(())
    })?;
    Ok(tasks)
}

/// The open tasks (`statuses`), for ranking only: each task's uuid, title and body come
/// back empty, its end and modification times unset (`Store::ranking_graph`). Each
/// status is read in the order of the `(status, id)` index, so SQLite sorts nothing
/// (with the columns no longer read, a fifth of a claim's instructions at 1,500 tasks,
/// by callgrind); the runs are merged
/// by id here, then the side tables joined as [`each_task`] joins them.
pub(super) fn list_ranked_tasks(tx: &Transaction<'_>, statuses: &[Status]) -> Result<Vec<Task>> {
    let mut tasks = Vec::new();
    let mut stmt = tx.prepare_cached(&format!(
        "SELECT {RANKED_COLUMNS} FROM tasks WHERE status = ?1 ORDER BY id"
    ))?;
    for status in statuses {
        let mut rows = stmt.query([status.as_str()])?;
        while let Some(r) = rows.next()? {
            tasks.push(row_to_task(r)?);
        }
    }
    // Already sorted runs, one per status: the stable sort only merges them.
    tasks.sort_by(|a, b| a.id.cmp(&b.id));
    let mut tags = tx.prepare("SELECT task_id, tag FROM tags ORDER BY task_id, tag")?;
    let mut tags = Side::new(tags.query([])?, |r| r.get(1));
    let mut deps = tx.prepare("SELECT task_id, dep_id FROM deps ORDER BY task_id, dep_id")?;
    let mut deps = Side::new(deps.query([])?, |r| r.get(1));
    let mut notes = tx.prepare(
        "SELECT task_id, entry, description FROM annotations ORDER BY task_id, entry, rowid",
    )?;
    let mut notes = Side::new(notes.query([])?, |r| {
        Ok(Annotation {
            entry: r.get(1)?,
            description: r.get(2)?,
        })
    });
    for t in &mut tasks {
        tags.take(&t.id, &mut t.tags)?;
        deps.take(&t.id, &mut t.depends)?;
        notes.take(&t.id, &mut t.annotations)?;
    }
    Ok(tasks)
}

/// Calls `f` with each task matching `filter`, oldest id first, complete with its
/// tags, dependencies and annotations, holding one task at a time. The tasks and
/// each side table are read in id order (SQLite's binary collation is byte order,
/// which is `str`'s), so a merge join attaches each side row to its task without an
/// index of ids or an owned key per row.
pub(super) fn each_task(
    tx: &Transaction<'_>,
    filter: &ListFilter,
    mut f: impl FnMut(Task) -> Result<()>,
) -> Result<()> {
    let statuses: Vec<&str> = filter.statuses.iter().map(|s| s.as_str()).collect();
    let status_sql = if statuses.is_empty() {
        "1".to_string()
    } else {
        format!(
            "status IN ({})",
            statuses
                .iter()
                .map(|s| format!("'{s}'"))
                .collect::<Vec<_>>()
                .join(",")
        )
    };
    let sql = format!(
        "SELECT {TASK_COLUMNS} FROM tasks WHERE {status_sql}
         AND (?1 IS NULL OR project = ?1) AND (?2 IS NULL OR phase = ?2)
         AND (?3 IS NULL OR id IN (SELECT task_id FROM tags WHERE tag = ?3))
         ORDER BY id"
    );
    let mut tags = tx.prepare("SELECT task_id, tag FROM tags ORDER BY task_id, tag")?;
    let mut tags = Side::new(tags.query([])?, |r| r.get(1));
    let mut deps = tx.prepare("SELECT task_id, dep_id FROM deps ORDER BY task_id, dep_id")?;
    let mut deps = Side::new(deps.query([])?, |r| r.get(1));
    let mut notes = tx.prepare(
        "SELECT task_id, entry, description FROM annotations ORDER BY task_id, entry, rowid",
    )?;
    let mut notes = Side::new(notes.query([])?, |r| {
        Ok(Annotation {
            entry: r.get(1)?,
            description: r.get(2)?,
        })
    });
    let mut stmt = tx.prepare(&sql)?;
    let mut rows = stmt.query(params![filter.project, filter.phase, filter.tag])?;
    while let Some(r) = rows.next()? {
        let mut t = row_to_task(r)?;
        tags.take(&t.id, &mut t.tags)?;
        deps.take(&t.id, &mut t.depends)?;
        notes.take(&t.id, &mut t.annotations)?;
        f(t)?;
    }
    Ok(())
}

/// The rows of a side table keyed by task id in its first column, read in id order
/// alongside the tasks, with one row of look-ahead.
struct Side<'s, T> {
    rows: rusqlite::Rows<'s>,
    decode: fn(&rusqlite::Row<'_>) -> rusqlite::Result<T>,
    ahead: Option<(String, T)>,
    done: bool,
}

impl<'s, T> Side<'s, T> {
    fn new(
        rows: rusqlite::Rows<'s>,
        decode: fn(&rusqlite::Row<'_>) -> rusqlite::Result<T>,
    ) -> Self {
        Side {
            rows,
            decode,
            ahead: None,
            done: false,
        }
    }

    /// Appends to `out` every row for task `id`, skipping rows of earlier ids (tasks
    /// the filter left out); the first row of a later id is kept for the next call.
    fn take(&mut self, id: &str, out: &mut Vec<T>) -> Result<()> {
        loop {
            if self.ahead.is_none() && !self.done {
                match self.rows.next()? {
                    Some(r) => self.ahead = Some((r.get(0)?, (self.decode)(r)?)),
                    None => self.done = true,
                }
            }
            let Some((key, _)) = &self.ahead else {
                return Ok(());
            };
            match key.as_str().cmp(id) {
                std::cmp::Ordering::Greater => return Ok(()),
                std::cmp::Ordering::Less => self.ahead = None,
                std::cmp::Ordering::Equal => {
                    if let Some((_, v)) = self.ahead.take() {
                        out.push(v);
                    }
                }
            }
        }
    }
}

/// The handles of `ids`, for messages.
pub(super) fn handles(tx: &Transaction<'_>, ids: &[String]) -> Result<Vec<String>> {
    let mut stmt = tx.prepare_cached("SELECT project FROM tasks WHERE id = ?1")?;
    ids.iter()
        .map(|id| {
            let project: Option<String> = stmt.query_row([id], |r| r.get(0)).optional()?.flatten();
            Ok(handle(project.as_deref(), id))
        })
        .collect()
}
