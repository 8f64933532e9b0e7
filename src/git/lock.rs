//! Per-repository locks across processes: `flock`s on files in the git common
//! directory, which every worktree of a repository shares, so an agent in its task
//! worktree and the operator in the main one contend for the same lock.
//!
//! - `spice-worktrees.lock`: one `git worktree` command at a time (see `Git::run`).
//!   Best effort: without it git runs as it would without spice.
//! - `spice-merge.lock`: one merge into the repository at a time ([`Merging`]). It is
//!   held from before `base` is first read until `base` has moved, and a caller that
//!   lands a phase keeps it until the store has recorded the completion and `base` is
//!   pushed. Merges racing inside one checkout of `base` interleave git's file writes,
//!   index writes and ref updates, and left the operator's tree with staged deletions
//!   and untracked copies of merged files; serialised, each merge starts from the
//!   state the previous one finished. Required: a merge that cannot have it fails.
//!
//! The kernel drops a `flock` with the last descriptor of its open file, so a holder
//! that is killed never wedges the repository; descriptors are close-on-exec, so no
//! git child keeps a lock past its spice. Two opens in one process are two holders,
//! which is what lets threads of the test suite contend like processes.

use super::Git;
use crate::error::{Error, Result};
use nix::fcntl::{Flock, FlockArg};
use std::fs::File;
use std::path::Path;

/// The merge lock of one repository, held: proof for the merge functions that they
/// run one at a time. Released on drop.
#[derive(Debug)]
pub struct Merging<'a> {
    pub(super) git: &'a Git,
    _lock: Flock<File>,
}

impl Git {
    /// Waits for and takes the repository's merge lock.
    pub fn lock_merges(&self) -> Result<Merging<'_>> {
        let path = self.common_dir.join("spice-merge.lock");
        let lock = exclusive(&path, true).map_err(|e| {
            Error::Other(format!(
                "cannot lock merges into {} ({}): {e}",
                self.repo.display(),
                path.display()
            ))
        })?;
        Ok(Merging {
            git: self,
            _lock: lock.expect("a blocking lock is had or fails"),
        })
    }

    /// The worktree lock, or `None` if it cannot be had (then git runs unserialised,
    /// as it would without spice).
    pub(super) fn worktree_lock(&self) -> Option<Flock<File>> {
        exclusive(&self.common_dir.join("spice-worktrees.lock"), true)
            .ok()
            .flatten()
    }
}

impl Merging<'_> {
    /// The repository the lock is for.
    pub fn git(&self) -> &Git {
        self.git
    }
}

/// An exclusive `flock` on `path` (created if missing, never truncated). With `wait`
/// false, `Ok(None)` means someone else holds it.
pub(super) fn exclusive(path: &Path, wait: bool) -> std::io::Result<Option<Flock<File>>> {
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)?;
    let how = if wait {
        FlockArg::LockExclusive
    } else {
        FlockArg::LockExclusiveNonblock
    };
    match Flock::lock(file, how) {
        Ok(lock) => Ok(Some(lock)),
        Err((_, nix::errno::Errno::EWOULDBLOCK)) if !wait => Ok(None),
        Err((_, errno)) => Err(errno.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_held_lock_excludes_others_until_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("spice-merge.lock");
        let held = exclusive(&path, false).unwrap();
        assert!(held.is_some());
        assert!(exclusive(&path, false).unwrap().is_none());
        drop(held);
        assert!(exclusive(&path, false).unwrap().is_some());
    }

    #[test]
    fn a_waiting_lock_is_had_only_once_the_holder_lets_go() {
        use std::sync::atomic::{AtomicBool, Ordering};
        use std::sync::Arc;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("spice-merge.lock");
        let held = exclusive(&path, true).unwrap().unwrap();
        let released = Arc::new(AtomicBool::new(false));
        let (p, r) = (path.clone(), released.clone());
        let waiter = std::thread::spawn(move || {
            let lock = exclusive(&p, true).unwrap();
            lock.is_some() && r.load(Ordering::SeqCst)
        });
        released.store(true, Ordering::SeqCst);
        drop(held);
        assert!(waiter.join().unwrap());
    }

    #[test]
    fn a_lock_in_a_missing_directory_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        assert!(exclusive(&dir.path().join("no/such/dir/x.lock"), true).is_err());
    }
}
