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
//! in the common directory, whole (a temporary file renamed over it), and only ever
//! gains lines; a private directory is named after the worktree's administrative
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
        let tmp = info.join(format!("alternates.spice-{}", std::process::id()));
        std::fs::File::create(&tmp)
            .and_then(|mut f| f.write_all(next.as_bytes()).and_then(|()| f.sync_all()))
            .map_err(|e| io("write", &tmp, e))?;
        std::fs::rename(&tmp, &file).map_err(|e| io("replace", &file, e))?;
        Ok(Some(dir))
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
