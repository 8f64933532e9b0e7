//! Listing tasks on PostgreSQL as SQLite's store lists them ([`crate::store::tasks`]'s
//! `each_task`): oldest id first, each task with its tags, dependencies and
//! annotations, one task handed on at a time. The tasks and each side table are read
//! through portals of one repeatable-read transaction, a batch at a time, in byte
//! order of ids (`COLLATE "C"`, as Rust compares them), and merged: memory stays that
//! of a few batches however many tasks there are.

use super::tasks::{row_to_task, TASK_COLUMNS};
use super::{PgContext, PgStore};
use crate::error::Result;
use crate::store::ListFilter;
use crate::task::Annotation;
use crate::task::Task;
use postgres::{Portal, Row, Transaction};
use std::cmp::Ordering;
use std::collections::VecDeque;

/// Rows fetched from a portal at once.
const BATCH: i32 = 256;

pub(super) fn each_task(
    s: &mut PgStore,
    filter: &ListFilter,
    f: &mut dyn FnMut(Task) -> Result<()>,
) -> Result<()> {
    let at = s.at.as_str();
    let mut tx = s
        .client
        .build_transaction()
        .isolation_level(postgres::IsolationLevel::RepeatableRead)
        .read_only(true)
        .start()
        .ctx("to list tasks", at)?;
    let statuses: Vec<&str> = filter.statuses.iter().map(|s| s.as_str()).collect();
    let sql = format!(
        "SELECT {TASK_COLUMNS} FROM tasks
         WHERE (cardinality($1::text[]) = 0 OR status = ANY($1))
           AND ($2::text IS NULL OR project = $2) AND ($3::text IS NULL OR phase = $3)
           AND ($4::text IS NULL OR id IN (SELECT task_id FROM tags WHERE tag = $4))
         ORDER BY id COLLATE \"C\""
    );
    let tasks = tx
        .bind(
            sql.as_str(),
            &[&statuses, &filter.project, &filter.phase, &filter.tag],
        )
        .ctx("to list tasks", at)?;
    let mut tags = Side::open(
        &mut tx,
        at,
        "SELECT task_id, tag FROM tags ORDER BY task_id COLLATE \"C\", tag COLLATE \"C\"",
    )?;
    let mut deps = Side::open(
        &mut tx,
        at,
        "SELECT task_id, dep_id FROM deps ORDER BY task_id COLLATE \"C\", dep_id COLLATE \"C\"",
    )?;
    let mut notes = Side::open(
        &mut tx,
        at,
        "SELECT task_id, entry, description FROM annotations
         ORDER BY task_id COLLATE \"C\", entry, seq",
    )?;
    loop {
        let rows = tx.query_portal(&tasks, BATCH).ctx("to list tasks", at)?;
        for r in &rows {
            let mut t = row_to_task(r);
            tags.take(&mut tx, at, &t.id, &mut t.tags, |r| r.get(1))?;
            deps.take(&mut tx, at, &t.id, &mut t.depends, |r| r.get(1))?;
            notes.take(&mut tx, at, &t.id, &mut t.annotations, |r| Annotation {
                entry: r.get(1),
                description: r.get(2),
            })?;
            f(t)?;
        }
        if rows.len() < BATCH as usize {
            break;
        }
    }
    tx.commit().ctx("to list tasks", at)
}

/// A side table keyed by task id in its first column, read through a portal in id
/// order alongside the tasks.
struct Side {
    portal: Portal,
    ahead: VecDeque<Row>,
    done: bool,
}

impl Side {
    fn open(tx: &mut Transaction<'_>, at: &str, sql: &str) -> Result<Side> {
        Ok(Side {
            portal: tx.bind(sql, &[]).ctx("to list tasks", at)?,
            ahead: VecDeque::new(),
            done: false,
        })
    }

    /// Appends to `out` every row for task `id`, skipping rows of earlier ids (tasks
    /// the filter left out); the first row of a later id stays for the next call.
    fn take<T>(
        &mut self,
        tx: &mut Transaction<'_>,
        at: &str,
        id: &str,
        out: &mut Vec<T>,
        decode: fn(&Row) -> T,
    ) -> Result<()> {
        loop {
            if self.ahead.is_empty() && !self.done {
                let rows = tx
                    .query_portal(&self.portal, BATCH)
                    .ctx("to list tasks", at)?;
                self.done = rows.len() < BATCH as usize;
                self.ahead.extend(rows);
            }
            let Some(next) = self.ahead.front() else {
                return Ok(());
            };
            match next.get::<_, &str>(0).cmp(id) {
                Ordering::Greater => return Ok(()),
                Ordering::Less => {
                    self.ahead.pop_front();
                }
                Ordering::Equal => {
                    if let Some(r) = self.ahead.pop_front() {
                        out.push(decode(&r));
                    }
                }
            }
        }
    }
}
