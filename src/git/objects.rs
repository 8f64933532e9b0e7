//! Objects an agent writes, kept apart from the repository's own (issue #39).
//!
//! Theory: a confined agent must commit, and a commit writes objects; if the agent
//! may write the repository's object store it may also delete or rewrite every
//! object in it, which is all of history. So it never may: a confined session's git
//! writes new objects into a private directory of its worktree
//! (`GIT_OBJECT_DIRECTORY`, [`private_dir`]) and reads the repository's through
//! `GIT_ALTERNATE_OBJECT_DIRECTORIES`; the sandbox grants that directory and nothing
//! under `objects/`. The repository lists each private directory in its
//! `objects/info/alternates` ([`Git::lend_objects`]), so the supervisor, the gate and
//! the operator's own git see the agent's commits. Before a phase merges, and again
//! once it has, the supervisor copies the objects of what merges into the
//! repository's own store ([`Git::adopt_objects`]): from then on nothing the agent
//! does to its directory reaches what was merged.
//!
//! Invariants: the alternates file is rewritten only under `spice-alternates.lock`
//! in the common directory, whole (a temporary file renamed over it); a line goes
//! only once its directory's objects were copied into the repository's own store,
//! as its worktree goes ([`Git::retire_objects`]) or, for a worktree removed without
//! spice, at `fleet gc` ([`Git::retire_orphan_objects`]); a private directory is named after the worktree's administrative
//! directory (which git created when the supervisor added the worktree), never after
//! anything the agent wrote.
//!
//! Known limit: an agent may still delete or damage objects in its own directory;
//! that harms only its own unmerged work (its branch, which it can rewrite anyway).

use super::{args, Git};
use crate::error::{Error, Result};
use std::io::Write;
use std::path::{Path, PathBuf};

/// The private object directory of the worktree whose administrative directory is
/// `admin` (`<common>/worktrees/NAME`): `<common>/spice/objects/NAME`.
pub fn private_dir(common: &Path, admin: &Path) -> Option<PathBuf> {
    let name = admin.file_name()?;
    Some(common.join("spice").join("objects").join(name))
}

impl Git {
    /// Creates the private object directory of the worktree at `worktree` (when git
    /// registered it here) and lists it in the repository's alternates. Returns the
    /// directory, or `None` for a worktree git does not know as one of this
    /// repository's.
    pub fn lend_objects(&self, worktree: &Path) -> Result<Option<PathBuf>> {
        let Some(dir) = super::admin_dir(&self.common_dir, worktree)
            .and_then(|a| private_dir(&self.common_dir, &a))
        else {
            return Ok(None);
        };
        let io = |what: &str, p: &Path, e: std::io::Error| {
            Error::Other(format!("cannot {what} {}: {e}", p.display()))
        };
        std::fs::create_dir_all(dir.join("info")).map_err(|e| io("create", &dir, e))?;
        let info = self.common_dir.join("objects").join("info");
        std::fs::create_dir_all(&info).map_err(|e| io("create", &info, e))?;
        let _lock = super::lock::exclusive(&self.common_dir.join("spice-alternates.lock"), true)
            .map_err(|e| io("lock the alternates of", &self.common_dir, e))?;
        let file = info.join("alternates");
        let text = match std::fs::read_to_string(&file) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
            Err(e) => return Err(io("read", &file, e)),
        };
        let line = dir.display().to_string();
        if text.lines().any(|l| l == line) {
            return Ok(Some(dir));
        }
        let mut next = text;
        if !next.is_empty() && !next.ends_with('\n') {
            next.push('\n');
        }
        next.push_str(&line);
        next.push('\n');
        replace(&file, &next).map_err(|e| io("write", &file, e))?;
        Ok(Some(dir))
    }

    /// Before the worktree at `worktree` goes: copies what its private object
    /// directory holds into the repository's own store, drops the directory from the
    /// alternates and deletes it. Nothing is lost: its commits may live on in a branch
    /// or a saved ref after the worktree is gone.
    pub fn retire_objects(&self, worktree: &Path) -> Result<()> {
        match super::admin_dir(&self.common_dir, worktree)
            .and_then(|a| private_dir(&self.common_dir, &a))
        {
            Some(dir) if dir.is_dir() => self.retire_dir(&dir),
            _ => Ok(()),
        }
    }

    /// Retires ([`Git::retire_objects`]) the private object directories whose
    /// worktree git no longer knows (removed before they were retired). Returns how
    /// many.
    pub fn retire_orphan_objects(&self) -> Result<usize> {
        let root = self.common_dir.join("spice").join("objects");
        let Ok(entries) = std::fs::read_dir(&root) else {
            return Ok(0);
        };
        let mut n = 0;
        for e in entries.flatten() {
            let admin = self.common_dir.join("worktrees").join(e.file_name());
            if e.path().is_dir() && !admin.is_dir() {
                self.retire_dir(&e.path())?;
                n += 1;
            }
        }
        Ok(n)
    }

    fn retire_dir(&self, dir: &Path) -> Result<()> {
        let failed = |what: &str, why: String| {
            Error::Other(format!(
                "cannot {what} the objects of {} into {}: {why}",
                dir.display(),
                self.repo.display()
            ))
        };
        let listed = self
            .runner
            .run_with(
                &self.repo,
                &args![
                    "cat-file",
                    "--batch-all-objects",
                    "--batch-check=%(objectname)"
                ],
                &[
                    ("GIT_OBJECT_DIRECTORY", dir.as_os_str()),
                    ("GIT_ALTERNATE_OBJECT_DIRECTORIES", std::ffi::OsStr::new("")),
                ],
            )
            .map_err(|e| super::spawn_error(&self.repo, e))?;
        if !listed.ok() {
            return Err(failed("list", listed.first_line()));
        }
        if !listed.stdout.trim().is_empty() {
            let base = self.common_dir.join("objects").join("pack").join("pack");
            let out = self
                .runner
                .run_input(
                    &self.repo,
                    &args!["pack-objects", "-q", base.as_os_str()],
                    listed.stdout.as_bytes(),
                )
                .map_err(|e| super::spawn_error(&self.repo, e))?;
            if !out.ok() {
                return Err(failed("copy", out.first_line()));
            }
        }
        let _lock = super::lock::exclusive(&self.common_dir.join("spice-alternates.lock"), true)
            .map_err(|e| failed("lock the alternates for", e.to_string()))?;
        let file = self.common_dir.join("objects/info/alternates");
        let line = dir.display().to_string();
        if let Ok(text) = std::fs::read_to_string(&file) {
            let kept: String = text
                .lines()
                .filter(|l| *l != line)
                .map(|l| format!("{l}\n"))
                .collect();
            replace(&file, &kept).map_err(|e| failed("unlist", e.to_string()))?;
        }
        std::fs::remove_dir_all(dir).map_err(|e| failed("delete", e.to_string()))
    }

    /// Copies every object reachable from `tip` and not from `not` into the
    /// repository's own store (one new pack), when the worktree at `worktree` has a
    /// private object directory: what merges must not live only where an agent can
    /// delete it. Nothing to copy is no pack.
    pub fn adopt_objects(&self, worktree: &Path, tip: &str, not: &str) -> Result<()> {
        let lent = super::admin_dir(&self.common_dir, worktree)
            .and_then(|a| private_dir(&self.common_dir, &a))
            .is_some_and(|d| d.is_dir());
        if !lent {
            return Ok(());
        }
        let pack = self.common_dir.join("objects").join("pack");
        std::fs::create_dir_all(&pack)
            .map_err(|e| Error::Other(format!("cannot create {}: {e}", pack.display())))?;
        let base = pack.join("pack");
        let input = format!("{tip}\n^{not}\n");
        let out = self
            .runner
            .run_input(
                &self.repo,
                &args![
                    "pack-objects",
                    "--revs",
                    "--non-empty",
                    "-q",
                    base.as_os_str()
                ],
                input.as_bytes(),
            )
            .map_err(|e| super::spawn_error(&self.repo, e))?;
        if !out.ok() {
            return Err(Error::Other(format!(
                "cannot copy the objects of {tip} into {}: {}",
                self.repo.display(),
                out.first_line()
            )));
        }
        Ok(())
    }
}

/// Writes `file` whole: a temporary file beside it, synced, renamed over it.
fn replace(file: &Path, text: &str) -> std::io::Result<()> {
    let tmp = file.with_extension(format!("spice-{}", std::process::id()));
    std::fs::File::create(&tmp)
        .and_then(|mut f| f.write_all(text.as_bytes()).and_then(|()| f.sync_all()))?;
    std::fs::rename(&tmp, file)
}
