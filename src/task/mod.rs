//! The task model shared by the store, the allocator and the CLI: what a task is,
//! its priority and status vocabularies, and phase flows.
//!
//! A task's id is a stamp (its moment of entry into spice); its handle is
//! `PROJECT-stamp` (just the stamp when it has no project). Imported tasks keep the
//! uuid they had in Taskwarrior; tasks made here get a fresh v4-shaped uuid.

pub mod taskwarrior;

use crate::clock::Micros;
use serde::Serialize;

/// H > M > L; "no priority" is `Option::None` and ranks below L.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum Priority {
    L,
    M,
    H,
}

impl Priority {
    pub fn parse(text: &str) -> Result<Option<Priority>, String> {
        match text.trim() {
            "H" | "h" => Ok(Some(Priority::H)),
            "M" | "m" => Ok(Some(Priority::M)),
            "L" | "l" => Ok(Some(Priority::L)),
            "" | "none" => Ok(None),
            other => Err(format!(
                "invalid priority '{other}': expected H, M, L or none"
            )),
        }
    }
    pub fn as_str(self) -> &'static str {
        match self {
            Priority::H => "H",
            Priority::M => "M",
            Priority::L => "L",
        }
    }
}

/// Display form of an optional priority.
pub fn priority_str(p: Option<Priority>) -> &'static str {
    p.map(Priority::as_str).unwrap_or("-")
}

/// Taskwarrior's statuses. `Waiting` tasks are hidden until their wait date.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Pending,
    Waiting,
    Completed,
    Deleted,
}

impl Status {
    pub fn parse(text: &str) -> Result<Status, String> {
        match text {
            "pending" => Ok(Status::Pending),
            "waiting" => Ok(Status::Waiting),
            "completed" => Ok(Status::Completed),
            "deleted" => Ok(Status::Deleted),
            other => Err(format!(
                "invalid status '{other}': expected pending, waiting, completed or deleted"
            )),
        }
    }
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Pending => "pending",
            Status::Waiting => "waiting",
            Status::Completed => "completed",
            Status::Deleted => "deleted",
        }
    }
    /// Still work to do: counts as a blocker for its dependents.
    pub fn is_open(self) -> bool {
        matches!(self, Status::Pending | Status::Waiting)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Annotation {
    pub entry: Micros,
    pub description: String,
}

/// A task as stored.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Task {
    pub id: String,
    pub uuid: String,
    pub title: String,
    pub body: String,
    pub project: Option<String>,
    pub phase: String,
    pub priority: Option<Priority>,
    pub due: Option<Micros>,
    pub wait: Option<Micros>,
    pub tags: Vec<String>,
    pub status: Status,
    pub entry: Micros,
    pub end: Option<Micros>,
    pub modified: Micros,
    /// Ids of the tasks this one waits on.
    pub depends: Vec<String>,
    pub annotations: Vec<Annotation>,
}

impl Task {
    pub fn handle(&self) -> String {
        handle(self.project.as_deref(), &self.id)
    }
}

/// `PROJECT-stamp`, or the bare stamp for a task without a project.
pub fn handle(project: Option<&str>, id: &str) -> String {
    match project {
        Some(p) if !p.is_empty() => format!("{p}-{id}"),
        _ => id.to_string(),
    }
}

/// What a caller supplies to create a task; the store fills in id, entry and modified.
#[derive(Debug, Clone, Default)]
pub struct NewTask {
    pub uuid: Option<String>,
    pub title: String,
    pub body: String,
    pub project: Option<String>,
    /// `None` = the first phase of the project's flow.
    pub phase: Option<String>,
    pub priority: Option<Priority>,
    pub due: Option<Micros>,
    pub wait: Option<Micros>,
    pub tags: Vec<String>,
    pub status: Option<Status>,
    pub entry: Option<Micros>,
    pub end: Option<Micros>,
    pub annotations: Vec<Annotation>,
}

/// The default phase flow of a project with none configured.
pub const DEFAULT_FLOW: &[&str] = &["todo", "review"];

/// Checks a project, phase or tag name: no spaces, no control characters, no commas.
pub fn check_name(kind: &str, name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= 128
        && name
            .chars()
            .all(|c| !c.is_whitespace() && !c.is_control() && c != ',');
    if ok {
        Ok(())
    } else {
        Err(format!(
            "invalid {kind} '{name}': must be 1-128 characters without spaces or commas"
        ))
    }
}

/// True for the 8-4-4-4-12 hex shape of a uuid.
pub fn looks_like_uuid(text: &str) -> bool {
    text.len() == 36
        && text.bytes().enumerate().all(|(i, c)| match i {
            8 | 13 | 18 | 23 => c == b'-',
            _ => c.is_ascii_hexdigit(),
        })
}
