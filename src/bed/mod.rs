//! Test beds, the disk layer: seeding a worktree with a template's derived state
//! ([`seed`]) and measuring what trees really cost on disk ([`usage`]).
//!
//! No store, no fleet, no config: callers pass absolute paths and get serialisable
//! reports back. Invariants:
//! - the method (reflink, in-kernel copy, plain copy, hard link) is probed on the
//!   destination filesystem for each seeding, never guessed from its name, and every
//!   file's method is counted in the report;
//! - a seeded path appears under its final name only once it is complete (it is
//!   built as `<path>.spice-seeding` and renamed); a leftover staging tree is never
//!   taken as seeded and is cleared by the next seeding;
//! - nothing is followed out of the template, and nothing is written outside the
//!   destination or over existing content;
//! - real sizes count each inode once and, where `FIEMAP` can say, each shared extent
//!   once; where it cannot, the result says so.

mod check;
pub mod config;
mod copy;
pub mod evict;
pub mod owned;
pub mod pool;
mod report;
pub mod seed;
mod sys;
pub mod template;
pub mod usage;

pub use seed::{
    seed, seed_with_progress, staging_path, state, Counts, Method, PathState, Progress, SeedPath,
    SeedReport, SeedRequest,
};
pub use usage::{added, measure, Meter, Usage};

use std::io;
use std::path::{Path, PathBuf};
use thiserror::Error;

/// Why a bed operation failed.
#[derive(Debug, Error)]
pub enum Error {
    /// The request cannot be carried out as asked; nothing was written for it.
    #[error("{path}: {reason}")]
    Refused { path: PathBuf, reason: String },
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: io::Error,
    },
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub(crate) fn refused(path: impl Into<PathBuf>, reason: impl Into<String>) -> Self {
        Error::Refused {
            path: path.into(),
            reason: reason.into(),
        }
    }
}

impl From<Error> for crate::Error {
    fn from(e: Error) -> Self {
        match e {
            Error::Refused { .. } => crate::Error::Input(e.to_string()),
            Error::Io { context, source } => crate::Error::Io { context, source },
        }
    }
}

/// Attaches "what failed, on which path" to an I/O error.
pub(crate) trait IoContext<T> {
    fn at(self, what: &str, path: &Path) -> Result<T>;
}

impl<T> IoContext<T> for io::Result<T> {
    fn at(self, what: &str, path: &Path) -> Result<T> {
        self.map_err(|source| Error::Io {
            context: format!("{what} {}", path.display()),
            source,
        })
    }
}

/// Checks that `rel` names something strictly inside a tree, in one spelling:
/// relative, no `..`, `.` or empty component, not empty.
pub(crate) fn check_relative(rel: &Path) -> Result<()> {
    if rel.as_os_str().is_empty() {
        return Err(Error::refused(
            rel,
            "empty path: a bed path names a file or directory inside the worktree",
        ));
    }
    if rel.is_absolute() {
        return Err(Error::refused(
            rel,
            "is absolute: bed paths are relative to the worktree",
        ));
    }
    // Raw segments, not `components()`, which drops a `.` in the middle.
    for seg in rel.as_os_str().as_encoded_bytes().split(|b| *b == b'/') {
        match seg {
            b".." => return Err(Error::refused(rel, "escapes the worktree through '..'")),
            b"" => {
                return Err(Error::refused(
                    rel,
                    "has an empty component (a doubled or trailing '/')",
                ))
            }
            b"." => {
                return Err(Error::refused(
                    rel,
                    "contains '.': name the path inside the worktree",
                ))
            }
            _ => {}
        }
    }
    Ok(())
}

/// Checks that `root` is absolute (the library never resolves against a cwd).
pub(crate) fn check_absolute(root: &Path, what: &str) -> Result<()> {
    if root.is_absolute() {
        Ok(())
    } else {
        Err(Error::refused(
            root,
            format!("{what} must be an absolute path"),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_paths_that_escape_are_refused() {
        assert!(check_relative(Path::new("target")).is_ok());
        assert!(check_relative(Path::new("web/node_modules")).is_ok());
        // A trailing '/' would put the staging name `target/.spice-seeding` inside.
        for bad in [
            "",
            "../x",
            "a/../../x",
            "/etc",
            "./target",
            "a/./b",
            "target/",
            "a//b",
        ] {
            let e = check_relative(Path::new(bad)).unwrap_err().to_string();
            assert!(e.starts_with(&format!("{bad}: ")), "{e}");
        }
    }

    #[test]
    fn refusals_become_input_errors() {
        let e: crate::Error = Error::refused("x", "no").into();
        assert_eq!(e.exit_code(), 2);
        assert_eq!(e.to_string(), "x: no");
    }
}
