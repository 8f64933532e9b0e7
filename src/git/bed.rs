//! What test beds need of git: a scratch worktree detached at a commit (where a
//! template is warmed), the blobs of a template's key files at a commit, a file's
//! text at a revision, how far one commit is behind another, and which of a
//! worktree's files are as a commit has them.

use super::{args, Git};
use crate::error::{Error, Result};
use std::path::Path;

/// What [`Git::ref_stamp`] returns: compare two for equality.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefStamp(Vec<Option<FileStamp>>);

/// A file's identity and change marks; `None` in a [`RefStamp`] when it is absent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FileStamp {
    dev: u64,
    ino: u64,
    size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl FileStamp {
    fn of(path: &Path) -> Option<FileStamp> {
        use std::os::unix::fs::MetadataExt;
        let m = std::fs::metadata(path).ok()?;
        Some(FileStamp {
            dev: m.dev(),
            ino: m.ino(),
            size: m.size(),
            mtime: (m.mtime(), m.mtime_nsec()),
            ctime: (m.ctime(), m.ctime_nsec()),
        })
    }
}

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

    /// A fingerprint of the files git reads to resolve `rev` when it is a plain ref
    /// name (a branch, tag or remote-tracking branch, possibly spelled out under
    /// `refs/`): the loose ref files it may be, `packed-refs` and the reftable list,
    /// each by inode, size and change times. Equal stamps mean
    /// [`Git::resolve_commit`] would answer as before, so a watcher need not run git;
    /// `None` (an expression such as `main~2`, or `HEAD`, which is per worktree) means
    /// ask git. A loose ref that is itself symbolic is followed by no stamp: a watcher
    /// still asks git now and then.
    pub fn ref_stamp(&self, rev: &str) -> Option<RefStamp> {
        if super::refname::check_branch_name(rev).is_err() || rev.contains('@') {
            return None;
        }
        let dir = &self.common_dir;
        let mut paths = vec![
            dir.join("packed-refs"),
            dir.join("reftable").join("tables.list"),
        ];
        if rev.starts_with("refs/") {
            paths.push(dir.join(rev));
        }
        for ns in ["refs", "refs/tags", "refs/heads", "refs/remotes"] {
            paths.push(dir.join(ns).join(rev));
        }
        paths.push(dir.join("refs/remotes").join(rev).join("HEAD"));
        Some(RefStamp(paths.iter().map(|p| FileStamp::of(p)).collect()))
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

#[cfg(test)]
mod tests {
    use super::super::testutil::{repo_with_task_worktree, sh};
    use super::*;

    /// A watcher skips git while the stamp is unchanged: the stamp must move whenever
    /// what the ref names moves, loose or packed, and whenever it could.
    #[test]
    fn a_ref_stamp_moves_with_its_ref_loose_or_packed() {
        let (_dir, repo, wt) = repo_with_task_worktree();
        let git = Git::open(
            &repo,
            crate::git::Runner::new(Vec::<(String, String)>::new()),
        )
        .unwrap();
        for rev in ["main~1", "HEAD", "main@{1}", "a..b"] {
            assert_eq!(git.ref_stamp(rev), None, "{rev} is no plain ref");
        }
        let first = git.ref_stamp("main").unwrap();
        assert_eq!(git.ref_stamp("main"), Some(first.clone()), "nothing moved");

        // A commit on the task branch, in the other worktree, leaves main's stamp.
        std::fs::write(wt.join("b.txt"), "b\n").unwrap();
        sh(&wt, &["add", "b.txt"]);
        sh(
            &wt,
            &[
                "-c",
                "user.email=t@example.com",
                "-c",
                "user.name=T",
                "commit",
                "-q",
                "-m",
                "b",
            ],
        );
        assert_eq!(git.ref_stamp("main"), Some(first.clone()));

        // main moves (a loose ref rewritten), then is packed, then moves packed.
        let tip = sh(&wt, &["rev-parse", "HEAD"]);
        sh(&repo, &["update-ref", "refs/heads/main", &tip]);
        let moved = git.ref_stamp("main").unwrap();
        assert_ne!(moved, first, "a loose ref moved");
        sh(&repo, &["pack-refs", "--all"]);
        let packed = git.ref_stamp("main").unwrap();
        assert_ne!(packed, moved, "the ref was packed");
        let root = sh(&repo, &["rev-parse", "main~1"]);
        sh(&repo, &["update-ref", "refs/heads/main", &root]);
        assert_ne!(
            git.ref_stamp("main").unwrap(),
            packed,
            "a ref moved after packing"
        );
        assert_eq!(git.resolve_commit("main").unwrap(), root);
    }
}
