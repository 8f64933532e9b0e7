//! `spice task list` and `spice task claims`: the task plane's listings, as a table or
//! as JSON. A JSON task listing streams one task's document at a time (never the whole
//! list in memory); an empty listing of open tasks says how many closed ones it hid.

use super::super::render;
use crate::error::Result;
use crate::store::{Authority, ListFilter};
use crate::task::{Status, Task};

/// `task list`: the tasks `filter` matches (open ones when it names no status and
/// `all` is not given).
pub(super) fn tasks(
    a: &mut dyn Authority,
    filter: ListFilter,
    all: bool,
    json: bool,
) -> Result<()> {
    let open_only = !all && filter.statuses.is_empty();
    let statuses = if all {
        vec![]
    } else if open_only {
        vec![Status::Pending, Status::Waiting]
    } else {
        filter.statuses
    };
    let filter = ListFilter { statuses, ..filter };
    let short = a.short_ids()?;
    if json {
        // Streamed: one task's document at a time, never the whole list.
        let mut out = render::JsonArray::stdout();
        a.each_task(&filter, &mut |t| {
            let mut v = render::task_json(&t);
            v["short"] = short.id(&t.id).into();
            out.push(&v)
        })?;
        out.finish()?;
    } else {
        let tasks = all_tasks(a, &filter)?;
        if tasks.is_empty() && open_only {
            println!("{}", nothing_open(a, filter)?);
        } else {
            let claims = a.claims()?;
            render::task_table(&tasks, &claims, a.now()?, &short);
        }
    }
    Ok(())
}

/// `task claims`: every claim, or only those whose lease has lapsed.
pub(super) fn claims(a: &mut dyn Authority, stale: bool, json: bool) -> Result<()> {
    let now = a.now()?;
    let claims: Vec<_> = a
        .claims()?
        .into_iter()
        .filter(|c| !stale || !c.is_live(now))
        .collect();
    let short = a.short_ids()?;
    if json {
        let docs: Vec<_> = claims
            .iter()
            .map(|c| {
                let mut v = render::claim_json(c);
                v["short"] = short.id(&c.task_id).into();
                v
            })
            .collect();
        render::print_json(&docs);
    } else {
        render::claim_table(&claims, now, &short);
    }
    Ok(())
}

/// Every task matching `filter`, oldest first.
pub(super) fn all_tasks(a: &mut dyn Authority, filter: &ListFilter) -> Result<Vec<Task>> {
    let mut tasks = Vec::new();
    a.each_task(filter, &mut |t| {
        tasks.push(t);
        Ok(())
    })?;
    Ok(tasks)
}

/// What `task list` says when no open task matches: how many closed ones it hid, so
/// a store of finished work does not read as an empty one (issue #40).
fn nothing_open(a: &mut dyn Authority, filter: ListFilter) -> Result<String> {
    let (mut completed, mut deleted) = (0, 0);
    let closed = ListFilter {
        statuses: vec![Status::Completed, Status::Deleted],
        ..filter
    };
    a.each_task(&closed, &mut |t| {
        match t.status {
            Status::Completed => completed += 1,
            _ => deleted += 1,
        }
        Ok(())
    })?;
    let hidden: Vec<String> = [(completed, "completed"), (deleted, "deleted")]
        .into_iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, what)| format!("{n} {what}"))
        .collect();
    Ok(if hidden.is_empty() {
        "no tasks".to_string()
    } else {
        format!("no open tasks ({}; --all shows them)", hidden.join(", "))
    })
}
