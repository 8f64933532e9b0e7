//! What test beds need of git: a scratch worktree detached at a commit (where a
//! template is warmed), the blobs of a template's key files at a commit, a file's
//! text at a revision, how far one commit is behind another, and which of a
//! worktree's files are as a commit has them.

use super::{args, Git};
use crate::error::{Error, Result};
use std::path::Path;

impl Git {
    /// The commit `rev` names.
    pub fn resolve_commit(&self, rev: &str) -> Result<String> {
        let spec = format!("{rev}^{{commit}}");
        let out = self.run(
            &self.repo,
            &args!["rev-parse", "--verify", "--quiet", &spec],
        )?;
        if out.ok() {
            Ok(out.stdout.trim().to_string())
        } else {
            Err(Error::input(format!(
                "{rev} names no commit in {}",
                self.repo.display()
            )))
        }
    }

    /// The text of `path` at `rev`; `None` when it has no such file.
    pub fn file_at(&self, rev: &str, path: &str) -> Result<Option<String>> {
        let spec = format!("{rev}:{path}");
        let out = self.run(&self.repo, &args!["cat-file", "-e", &spec])?;
        if !out.ok() {
            return Ok(None);
        }
        let out = self.run(&self.repo, &args!["cat-file", "blob", &spec])?;
        if out.ok() {
            Ok(Some(out.stdout))
        } else {
            Err(Error::Other(format!(
                "cannot read {spec} in {}: {}",
                self.repo.display(),
                out.first_line()
            )))
        }
    }

    /// Each of `files` with its blob id at `commit` (`None`: not there), in order.
    pub fn blobs_at(
        &self,
        commit: &str,
        files: &[String],
    ) -> Result<Vec<(String, Option<String>)>> {
        let mut a: Vec<&std::ffi::OsStr> =
            args!["ls-tree", "-r", "-z", "--full-tree", commit, "--"].to_vec();
        a.extend(files.iter().map(std::ffi::OsStr::new));
        let out = self.run(&self.repo, &a)?;
        if !out.ok() {
            return Err(Error::Other(format!(
                "cannot list {commit} in {}: {}",
                self.repo.display(),
                out.first_line()
            )));
        }
        let found: Vec<(String, String)> = out
            .stdout
            .split('\0')
            .filter_map(|e| {
                let (meta, path) = e.split_once('\t')?;
                Some((path.to_string(), meta.split(' ').nth(2)?.to_string()))
            })
            .collect();
        Ok(files
            .iter()
            .map(|f| {
                let id = found.iter().find(|(p, _)| p == f).map(|(_, id)| id.clone());
                (f.clone(), id)
            })
            .collect())
    }

    /// How many commits `ancestor` is behind `commit`; `None` when it is not an
    /// ancestor of it.
    pub fn behind(&self, ancestor: &str, commit: &str) -> Result<Option<u64>> {
        if !self.is_ancestor(ancestor, commit)? {
            return Ok(None);
        }
        let range = format!("{ancestor}..{commit}");
        let out = self.run(&self.repo, &args!["rev-list", "--count", &range])?;
        Ok(out.stdout.trim().parse().ok())
    }

    /// The files tracked in the worktree `wt` that are exactly as `commit` has them:
    /// changed since neither in a commit, in the index nor on disk.
    pub fn unchanged_since(&self, wt: &Path, commit: &str) -> Result<Vec<String>> {
        let tracked = self.lines(wt, &args!["ls-files", "-z"], "list the tracked files")?;
        let changed: std::collections::HashSet<String> = self
            .lines(
                wt,
                &args!["diff", "--name-only", "--no-renames", "-z", commit, "--"],
                &format!("compare the worktree with {commit}"),
            )?
            .into_iter()
            .collect();
        Ok(tracked
            .into_iter()
            .filter(|p| !changed.contains(p))
            .collect())
    }

    /// A worktree at `path` detached at `commit`, for warming a template; replaces a
    /// stale registration of the same path.
    pub fn add_scratch_worktree(&self, commit: &str, path: &Path) -> Result<()> {
        let _ = self.run(&self.repo, &args!["worktree", "prune"]);
        let out = self.run(
            &self.repo,
            &args!["worktree", "add", "--detach", "--force", path, commit],
        )?;
        if out.ok() {
            Ok(())
        } else {
            Err(Error::Other(format!(
                "cannot add a worktree at {} for {commit}: {}",
                path.display(),
                out.first_line()
            )))
        }
    }
}
