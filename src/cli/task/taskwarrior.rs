//! `spice task import --taskwarrior FILE` and `spice task export --taskwarrior`: the
//! task plane to and from Taskwarrior's JSON (`crate::task::taskwarrior` owns the
//! format). An import reads a file or standard input (`-`); a missing or non-UTF-8
//! file is refused in one line naming it.

use super::super::render;
use crate::error::{Error, Result};
use crate::store::{Authority, ListFilter};
use crate::task::taskwarrior;
use std::io::Read;

/// Imports a `task export` from `file` (or stdin for `-`) and prints the report.
pub(super) fn import(a: &mut dyn Authority, file: &str, json: bool) -> Result<()> {
    let (text, source) = read_input(file)?;
    let tasks = taskwarrior::parse_export(&text, &source)?;
    let report = a.import(&tasks, &source)?;
    if json {
        render::print_json(&report);
    } else {
        println!(
            "imported {} task(s) from {source}: {} added, {} updated, {} dependencies",
            tasks.len(),
            report.added,
            report.updated,
            report.dependencies
        );
    }
    Ok(())
}

/// Prints every task as Taskwarrior JSON.
pub(super) fn export(a: &mut dyn Authority) -> Result<()> {
    let tasks = super::list::all_tasks(a, &ListFilter::default())?;
    let uuid_of = tasks
        .iter()
        .map(|t| (t.id.clone(), t.uuid.clone()))
        .collect();
    render::print_json(&taskwarrior::export(&tasks, &uuid_of));
    Ok(())
}

fn read_input(file: &str) -> Result<(String, String)> {
    if file == "-" {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .map_err(|source| Error::Io {
                context: "failed to read standard input".into(),
                source,
            })?;
        Ok((text, "<stdin>".into()))
    } else {
        let text = std::fs::read_to_string(file).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => Error::input(format!("{file}: no such file")),
            std::io::ErrorKind::InvalidData => Error::input(format!("{file}: not UTF-8 text")),
            _ => Error::Io {
                context: format!("failed to read {file}"),
                source: e,
            },
        })?;
        Ok((text, file.to_string()))
    }
}
