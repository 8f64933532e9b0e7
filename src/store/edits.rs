//! The operator's edits of the task graph that both backends share, written once:
//! changing a task's dependencies ([`change_deps`]) and importing a Taskwarrior export
//! ([`import`]). Each runs inside one transaction of its backend, reached through
//! [`TaskTx`], the row-level steps that transaction offers; the rules (what is refused,
//! with which words, and what the ledger records) live only here.
//!
//! Invariants: the dependency graph stays acyclic (a new edge is checked before it is
//! written; an import is checked whole before it commits); a claimed task is its
//! holder's, so an import that would rewrite one is refused; a failed edit writes
//! nothing (the caller's transaction rolls back on the error).

use super::Claim;
use crate::error::{Error, Result};
use crate::task::taskwarrior::TwTask;
use crate::task::NewTask;
use petgraph::graph::{DiGraph, NodeIndex};
use serde::Serialize;
use std::collections::{HashMap, HashSet, VecDeque};

/// What an import did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ImportReport {
    pub added: usize,
    pub updated: usize,
    pub dependencies: usize,
}

/// The steps of one open transaction of a backend that the shared edits are made of.
/// Ids are task ids unless a step says otherwise.
pub(crate) trait TaskTx {
    /// A typed id (stamp, prefix, handle, uuid) as a task id.
    fn resolve(&mut self, input: &str) -> Result<String>;
    /// The task with this (lowercase) uuid, if any.
    fn id_of_uuid(&mut self, uuid: &str) -> Result<Option<String>>;
    /// The claim on a task, if any (locked until the transaction ends, where the
    /// backend locks rows).
    fn claim_on(&mut self, id: &str) -> Result<Option<Claim>>;
    /// Inserts a task (its tags and annotations) under a fresh id, checked as `add` is.
    fn insert_task(&mut self, new: &NewTask) -> Result<String>;
    /// Overwrites a task with an export's state of it (its tags and annotations too;
    /// its dependencies are left to the caller).
    fn overwrite_task(&mut self, id: &str, tw: &TwTask) -> Result<()>;
    /// The tasks `id` directly waits on, by id.
    fn waits_on(&mut self, id: &str) -> Result<Vec<String>>;
    /// Makes `id` wait on `dep` (already waiting: nothing changes).
    fn insert_dep(&mut self, id: &str, dep: &str) -> Result<()>;
    /// Stops `id` waiting on `dep`; whether it did.
    fn delete_dep(&mut self, id: &str, dep: &str) -> Result<bool>;
    /// Stops `id` waiting on anything.
    fn clear_deps(&mut self, id: &str) -> Result<()>;
    /// Every dependency edge (task, the task it waits on), by task, then by the other.
    fn edges(&mut self) -> Result<Vec<(String, String)>>;
    /// The handles of `ids`, for messages.
    fn handles(&mut self, ids: &[String]) -> Result<Vec<String>>;
    /// Appends an operator's (actor-less) entry to a task's ledger.
    fn note(&mut self, id: &str, kind: &str, detail: serde_json::Value) -> Result<()>;
}

/// Refuses an edge from a task to itself.
pub(crate) fn check_not_self(id: &str, dep: &str) -> Result<()> {
    if id == dep {
        return Err(Error::input(format!(
            "dependency cycle: {id} → {id} (a task cannot wait on itself)"
        )));
    }
    Ok(())
}

/// Makes `task` wait on each of `add` and stop waiting on each of `remove`: an edge
/// that would close a cycle refuses the whole change and the message names the cycle.
pub(crate) fn change_deps(
    t: &mut impl TaskTx,
    task: &str,
    add: &[String],
    remove: &[String],
) -> Result<()> {
    let id = t.resolve(task)?;
    for on in remove {
        let dep = t.resolve(on)?;
        if !t.delete_dep(&id, &dep)? {
            return Err(Error::input(format!("task {id} does not depend on {dep}")));
        }
        t.note(&id, "dep_removed", serde_json::json!({ "on": dep }))?;
    }
    for on in add {
        let dep = t.resolve(on)?;
        if let Some(path) = path_between(t, &dep, &id)? {
            // path runs dep → … → id along "waits on" edges; id → dep closes it.
            let mut cycle = vec![id.clone()];
            cycle.extend(path);
            return Err(Error::input(format!(
                "dependency cycle: {} (each waits on the next)",
                t.handles(&cycle)?.join(" → ")
            )));
        }
        check_not_self(&id, &dep)?;
        t.insert_dep(&id, &dep)?;
        t.note(&id, "dep_added", serde_json::json!({ "on": dep }))?;
    }
    Ok(())
}

/// A path `from → … → to` along "waits on" edges, if there is one (breadth-first, so
/// the cycle reported is a shortest one).
fn path_between(t: &mut impl TaskTx, from: &str, to: &str) -> Result<Option<Vec<String>>> {
    let mut parent: HashMap<String, String> = HashMap::new();
    let mut queue = VecDeque::from([from.to_string()]);
    let mut seen = HashSet::from([from.to_string()]);
    while let Some(cur) = queue.pop_front() {
        if cur == to {
            let mut path = vec![cur.clone()];
            let mut at = cur;
            while let Some(p) = parent.get(&at) {
                path.push(p.clone());
                at = p.clone();
            }
            path.reverse();
            return Ok(Some(path));
        }
        for n in t.waits_on(&cur)? {
            if seen.insert(n.clone()) {
                parent.insert(n.clone(), cur.clone());
                queue.push_back(n);
            }
        }
    }
    Ok(None)
}

/// Imports a Taskwarrior export: a uuid already stored updates that task (the export
/// is its whole state, dependencies included), a new one creates a task; dependencies
/// may point into the input or at stored tasks. All or nothing.
pub(crate) fn import(t: &mut impl TaskTx, tasks: &[TwTask], source: &str) -> Result<ImportReport> {
    let mut report = ImportReport::default();
    let mut id_of: HashMap<String, String> = HashMap::new();
    for tw in tasks {
        let uuid = tw.new.uuid.clone().unwrap_or_default();
        let id = match t.id_of_uuid(&uuid)? {
            Some(id) => {
                // A claimed task is its holder's to change: re-importing it waits for
                // the release.
                if let Some(c) = t.claim_on(&id)? {
                    return Err(super::refusals::import_held(source, &uuid, &id, &c).into());
                }
                t.overwrite_task(&id, tw)
                    .map_err(|e| located(e, source, &uuid))?;
                report.updated += 1;
                id
            }
            None => {
                let id = t
                    .insert_task(&tw.new)
                    .map_err(|e| located(e, source, &uuid))?;
                report.added += 1;
                id
            }
        };
        t.note(
            &id,
            "imported",
            serde_json::json!({ "uuid": uuid, "source": source }),
        )?;
        id_of.insert(uuid, id);
    }
    for tw in tasks {
        let uuid = tw.new.uuid.clone().unwrap_or_default();
        let id = id_of[&uuid].clone();
        t.clear_deps(&id)?;
        for dep in &tw.depends {
            let dep_id = match id_of.get(dep) {
                Some(d) => d.clone(),
                None => t.id_of_uuid(dep)?.ok_or_else(|| {
                    Error::input(format!(
                        "{source}: task {uuid}: field 'depends': unknown uuid {dep} (not in the input nor in the store)"
                    ))
                })?,
            };
            check_not_self(&id, &dep_id).map_err(|e| located(e, source, &uuid))?;
            t.insert_dep(&id, &dep_id)?;
            report.dependencies += 1;
        }
    }
    if let Some(cycle) = find_cycle(&t.edges()?) {
        return Err(Error::input(format!(
            "{source}: dependency cycle: {} (each waits on the next); nothing imported",
            t.handles(&cycle)?.join(" → ")
        )));
    }
    Ok(report)
}

/// The phase a stored task takes from an export: the export's, else the one it has
/// (`current`), refused unless in `flow`.
pub(crate) fn imported_phase(tw: &TwTask, current: String, flow: &[String]) -> Result<String> {
    let phase = tw.new.phase.clone().unwrap_or(current);
    if !flow.contains(&phase) {
        return Err(Error::input(format!(
            "field 'phase': '{phase}' is not in the flow of project '{}' ({})",
            tw.new.project.as_deref().unwrap_or(""),
            flow.join(" → ")
        )));
    }
    Ok(phase)
}

/// Prefixes bad-input errors with where they came from; other errors pass unchanged
/// so their exit code (I/O, busy, corrupt) survives.
fn located(e: Error, source: &str, uuid: &str) -> Error {
    match e {
        Error::Input(m) => Error::input(format!("{source}: task {uuid}: {m}")),
        other => other,
    }
}

/// Some cycle among `edges`, as ids in "waits on" order, if any.
fn find_cycle(edges: &[(String, String)]) -> Option<Vec<String>> {
    let mut index: HashMap<&str, NodeIndex> = HashMap::new();
    let mut g: DiGraph<&str, ()> = DiGraph::new();
    for (a, b) in edges {
        let ia = *index.entry(a).or_insert_with(|| g.add_node(a));
        let ib = *index.entry(b).or_insert_with(|| g.add_node(b));
        g.add_edge(ia, ib, ());
    }
    let scc = petgraph::algo::kosaraju_scc(&g)
        .into_iter()
        .find(|c| c.len() > 1)?;
    // Walk inside the component until a node repeats: that loop is a cycle.
    let members: HashSet<NodeIndex> = scc.iter().copied().collect();
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
            return Some(cycle);
        }
        pos.insert(next, path.len());
        path.push(next);
    }
}
