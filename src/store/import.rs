//! Importing a Taskwarrior export in one transaction: all of it or none of it.
//!
//! A uuid already in the store updates that task (Taskwarrior's own `task import`
//! semantics: the export is the task's whole state, dependencies included); a new uuid
//! creates a task under a fresh stamp. Dependencies may point into the same file or
//! at tasks already stored. The resulting graph is checked for cycles before commit.

use super::ledger::append;
use super::phases::flow_of;
use super::tasks::{handles, insert_dep, insert_task};
use super::Store;
use crate::error::{Error, Result};
use crate::task::taskwarrior::TwTask;
use crate::task::Priority;
use petgraph::graph::{DiGraph, NodeIndex};
use rusqlite::{params, OptionalExtension, Transaction};
use serde::Serialize;
use std::collections::HashMap;

#[derive(Debug, Clone, Default, Serialize)]
pub struct ImportReport {
    pub added: usize,
    pub updated: usize,
    pub dependencies: usize,
}

impl Store {
    pub fn import(&mut self, tasks: &[TwTask], source: &str) -> Result<ImportReport> {
        self.write("importing tasks", |tx, now| {
            let mut report = ImportReport::default();
            let mut id_of: HashMap<String, String> = HashMap::new();
            for tw in tasks {
                let uuid = tw.new.uuid.clone().unwrap_or_default();
                let existing: Option<String> = tx
                    .prepare_cached("SELECT id FROM tasks WHERE uuid = ?1")?
                    .query_row([&uuid], |r| r.get(0))
                    .optional()?;
                let id = match existing {
                    Some(id) => {
                        // The export is the task's whole state, but a claimed task is
                        // its holder's to change: re-importing it must wait for release.
                        if let Some(c) = super::claims::claim_of(tx, &id)? {
                            return Err(Error::conflict(format!(
                                "{source}: task {uuid}: it is claimed by {} (fence {}); release it before re-importing",
                                c.claimant, c.fence
                            )));
                        }
                        update_task(tx, &id, tw, now).map_err(|e| located(e, source, &uuid))?;
                        report.updated += 1;
                        id
                    }
                    None => {
                        let id = insert_task(tx, &tw.new, now).map_err(|e| located(e, source, &uuid))?;
                        report.added += 1;
                        id
                    }
                };
                append(tx, &id, now, "imported", None, None, serde_json::json!({ "uuid": uuid, "source": source }))?;
                id_of.insert(uuid, id);
            }
            for tw in tasks {
                let uuid = tw.new.uuid.clone().unwrap_or_default();
                let id = &id_of[&uuid];
                tx.execute("DELETE FROM deps WHERE task_id = ?1", [id])?;
                for dep in &tw.depends {
                    let dep_id = match id_of.get(dep) {
                        Some(d) => d.clone(),
                        None => tx
                            .prepare_cached("SELECT id FROM tasks WHERE uuid = ?1")?
                            .query_row([dep], |r| r.get(0))
                            .optional()?
                            .ok_or_else(|| {
                                Error::input(format!(
                                    "{source}: task {uuid}: field 'depends': unknown uuid {dep} (not in the input nor in the store)"
                                ))
                            })?,
                    };
                    insert_dep(tx, id, &dep_id).map_err(|e| located(e, source, &uuid))?;
                    report.dependencies += 1;
                }
            }
            if let Some(cycle) = find_cycle(tx)? {
                return Err(Error::input(format!(
                    "{source}: dependency cycle: {} (each waits on the next); nothing imported",
                    handles(tx, &cycle)?.join(" → ")
                )));
            }
            Ok(report)
        })
    }
}

/// Prefixes bad-input errors with where they came from; other errors pass unchanged
/// so their exit code (I/O, busy, corrupt) survives.
fn located(e: Error, source: &str, uuid: &str) -> Error {
    match e {
        Error::Input(m) => Error::input(format!("{source}: task {uuid}: {m}")),
        other => other,
    }
}

fn update_task(tx: &Transaction<'_>, id: &str, tw: &TwTask, now: i64) -> Result<()> {
    let n = &tw.new;
    let current_phase: String =
        tx.query_row("SELECT phase FROM tasks WHERE id = ?1", [id], |r| r.get(0))?;
    let flow = flow_of(tx, n.project.as_deref())?;
    let phase = n.phase.clone().unwrap_or(current_phase);
    if !flow.contains(&phase) {
        return Err(Error::input(format!(
            "field 'phase': '{phase}' is not in the flow of project '{}' ({})",
            n.project.as_deref().unwrap_or(""),
            flow.join(" → ")
        )));
    }
    tx.execute(
        "UPDATE tasks SET title = ?2, body = ?3, project = ?4, phase = ?5, priority = ?6, due = ?7,
         wait = ?8, status = ?9, end_at = ?10, modified = ?11 WHERE id = ?1",
        params![
            id,
            n.title,
            n.body,
            n.project,
            phase,
            n.priority.map(Priority::as_str),
            n.due,
            n.wait,
            n.status.unwrap_or(crate::task::Status::Pending).as_str(),
            n.end,
            now
        ],
    )?;
    tx.execute("DELETE FROM tags WHERE task_id = ?1", [id])?;
    for t in &n.tags {
        tx.execute(
            "INSERT OR IGNORE INTO tags (task_id, tag) VALUES (?1, ?2)",
            params![id, t],
        )?;
    }
    tx.execute("DELETE FROM annotations WHERE task_id = ?1", [id])?;
    for a in &n.annotations {
        tx.execute(
            "INSERT INTO annotations (task_id, entry, description) VALUES (?1, ?2, ?3)",
            params![id, a.entry, a.description],
        )?;
    }
    Ok(())
}

/// Some cycle in the whole dependency graph, as ids in "waits on" order, if any.
fn find_cycle(tx: &Transaction<'_>) -> Result<Option<Vec<String>>> {
    let mut stmt = tx.prepare("SELECT task_id, dep_id FROM deps")?;
    let edges: Vec<(String, String)> = stmt
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect::<std::result::Result<_, _>>()?;
    let mut index: HashMap<&str, NodeIndex> = HashMap::new();
    let mut g: DiGraph<&str, ()> = DiGraph::new();
    for (a, b) in &edges {
        let ia = *index.entry(a).or_insert_with(|| g.add_node(a));
        let ib = *index.entry(b).or_insert_with(|| g.add_node(b));
        g.add_edge(ia, ib, ());
    }
    let Some(scc) = petgraph::algo::kosaraju_scc(&g)
        .into_iter()
        .find(|c| c.len() > 1)
    else {
        return Ok(None);
    };
    // Walk inside the component until a node repeats: that loop is a cycle.
    let members: std::collections::HashSet<NodeIndex> = scc.iter().copied().collect();
    let mut path = vec![scc[0]];
    let mut pos: HashMap<NodeIndex, usize> = HashMap::from([(scc[0], 0)]);
    loop {
        let cur = *path.last().expect("path starts non-empty");
        let next = g
            .neighbors(cur)
            .find(|n| members.contains(n))
            .expect("every member of a component has an edge inside it");
        if let Some(&start) = pos.get(&next) {
            let mut cycle: Vec<String> = path[start..].iter().map(|n| g[*n].to_string()).collect();
            cycle.push(g[next].to_string());
            return Ok(Some(cycle));
        }
        pos.insert(next, path.len());
        path.push(next);
    }
}
