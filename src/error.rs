//! Errors and exit codes.
//!
//! Messages are lowercase fragments that read well after "spice: " and name the file,
//! task, key or field at fault. The kind decides the exit code, which scripts rely on:
//!
//! | code | meaning |
//! | --- | --- |
//! | 0 | success (including "nothing ready") |
//! | 1 | the operation failed (I/O, git, an internal error) |
//! | 2 | bad input: arguments, config, ids, JSON, cycles; nothing was written |
//! | 3 | conflict: the claim is held by someone else, a fence is stale, a task is not ready |
//! | 4 | the store is unusable: corrupt, or written by a newer spice |
//! | 5 | a gate refused: its findings are printed, one a line, before the summary |
//! | 126, 127 | `spice exec`: the command cannot run / was not found (as shells do) |
//!
//! `spice exec` otherwise exits with its command's code, or 128+N after signal N.

use thiserror::Error;

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Debug, Error)]
pub enum Error {
    /// The user asked for something malformed or impossible; nothing was written.
    #[error("{0}")]
    Input(String),
    /// The request was well-formed but lost to another claimant or a stale view.
    #[error("{0}")]
    Conflict(String),
    /// The store refused an operation on a claim, and why (exit code 3, as a conflict).
    #[error(transparent)]
    Claim(#[from] ClaimError),
    /// The database cannot be used as it is; spice refuses rather than repairs.
    #[error("{0}")]
    Store(String),
    #[error("{context}: {source}")]
    Sqlite {
        context: String,
        #[source]
        source: rusqlite::Error,
    },
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{0}")]
    Other(String),
    /// The store's server could not be reached or dropped the connection (restarting,
    /// down, the network): nothing is known to have been written; a later try may work.
    #[error("{0}")]
    Unreachable(String),
    /// A check refused the operation: its summary, and the findings, one a line
    /// (printed before the summary; the one case of an error longer than a line).
    #[error("{0}")]
    Refused(String, Vec<String>),
    /// Ends the process with this exact code (the wrapper's 126/127 for a command that
    /// cannot run, as shells do).
    #[error("{1}")]
    Exit(i32, String),
}

impl Error {
    pub fn input(msg: impl Into<String>) -> Self {
        Error::Input(msg.into())
    }
    pub fn conflict(msg: impl Into<String>) -> Self {
        Error::Conflict(msg.into())
    }
    /// The store's server could not be reached (see [`Error::Unreachable`]): a caller
    /// that runs for long waits and tries again rather than giving up.
    pub fn is_unreachable(&self) -> bool {
        matches!(self, Error::Unreachable(_))
    }
    /// Lost to another claimant or a stale view (a claim refused among them).
    pub fn is_conflict(&self) -> bool {
        matches!(self, Error::Conflict(_) | Error::Claim(_))
    }
    /// Why a claim operation was refused, when that is what this is.
    pub fn claim_refusal(&self) -> Option<&Refusal> {
        match self {
            Error::Claim(c) => Some(&c.refusal),
            _ => None,
        }
    }
    pub fn exit_code(&self) -> i32 {
        match self {
            Error::Input(_) => 2,
            Error::Conflict(_) | Error::Claim(_) => 3,
            Error::Store(_) => 4,
            Error::Refused(..) => 5,
            Error::Exit(code, _) => *code,
            Error::Sqlite { source, .. } if is_corruption(source) => 4,
            _ => 1,
        }
    }
}

/// Why the store refused an operation on a claim: what a caller decides on (a lane
/// re-reads who holds its claim; the console answers 409), the same on every backend.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// Nobody holds the task.
    NotClaimed,
    /// Someone else holds it: this claimant.
    HeldBy(String),
    /// The caller named a fence that is not the claim's (`seen`): that holding ended,
    /// the claim is now `current`.
    StaleFence { seen: i64, current: i64 },
    /// A takeover of a claim whose lease is still live.
    LeaseLive,
    /// The task cannot be claimed now (its status, a wait, a dependency not done).
    NotReady,
    /// Another claimant took it first.
    Taken,
}

/// A refused claim operation: the task, why, and the one line that says so (built by
/// `store::refusals`, which both backends use).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{message}")]
pub struct ClaimError {
    pub task: String,
    pub refusal: Refusal,
    pub message: String,
}

/// True for SQLite errors that mean the file is not a usable database.
pub fn is_corruption(e: &rusqlite::Error) -> bool {
    matches!(
        e.sqlite_error_code(),
        Some(rusqlite::ErrorCode::DatabaseCorrupt) | Some(rusqlite::ErrorCode::NotADatabase)
    )
}

/// Attaches "what failed" to a SQLite error.
pub trait SqlContext<T> {
    fn ctx(self, context: impl FnOnce() -> String) -> Result<T>;
}

impl<T> SqlContext<T> for std::result::Result<T, rusqlite::Error> {
    fn ctx(self, context: impl FnOnce() -> String) -> Result<T> {
        self.map_err(|source| Error::Sqlite {
            context: context(),
            source,
        })
    }
}

impl From<rusqlite::Error> for Error {
    fn from(source: rusqlite::Error) -> Self {
        Error::Sqlite {
            context: "database error".into(),
            source,
        }
    }
}
