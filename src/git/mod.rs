//! Worktrees and the three git boundaries: the one place spice moves git.
//!
//! Git moves at exactly three moments (DESIGN principle 5), each one function here:
//!
//! 1. **Claim** — [`Git::prepare_worktree`]: the task's worktree is created on its
//!    branch from `base`, or an existing one is reused; it is moved only when it is
//!    clean and strictly behind `base`, and then only by a fast-forward.
//! 2. **Phase completion** — [`Git::complete_phase`]: a clean task branch is merged
//!    into `base` (fast-forward, else a merge commit), never through a half-merged
//!    checkout, one merge per repository at a time ([`Git::lock_merges`]); nothing is
//!    pushed here ([`Git::push`] is the caller's next step, under the same lock).
//! 3. **Launch** — [`Git::launch_check`]: read-only; it reports branch, HEAD and
//!    cleanliness, since starting an agent moves nothing.
//!
//! Activation (an agent re-reading its task after a restart or a compaction) calls
//! nothing in this module, so it cannot touch git. Nothing here ever resets, stashes,
//! checks out over, or deletes uncommitted work it has not saved: the destructive
//! operations are [`Git::remove_worktree`] with `force`, which the caller asks for by
//! name, and [`Git::recycle_worktree`], which empties a finished task's worktree only
//! once everything it held beyond its commits and its test bed is saved under a ref.
//!
//! **A task worktree is the agent's to write, its `.git` file included**: git run in
//! one is pointed at the worktree's git directory and the common directory found from
//! the repository ([`Git::pinned`]), never at what the worktree's `.git` names, so a
//! forged `.git` (a git directory whose config runs a program, `core.fsmonitor`) never
//! runs anything with the supervisor's rights, nor shows spice another branch's state.
//!
//! All git runs through [`Runner`] (the `git` CLI in a cleared environment); errors
//! are one line naming the repository, the branch and git's first line of complaint.
//! A state that forbids the move (dirty tree, conflict, something in the way) is
//! [`Error::Conflict`]; a git failure is [`Error::Other`]; a branch name git would
//! not accept is [`Error::Input`].

mod bed;
mod checkout;
mod checkout_record;
mod gc;
mod handoff;
mod lock;
mod merge;
mod merge_commit;
mod objects;
mod pool;
mod refname;
pub mod review;
mod run;
mod status;
mod task_refs;
#[cfg(test)]
pub(crate) mod testutil;
mod worktree;

pub use bed::RefStamp;
pub use gc::{disk_bytes, TaskCheckout};
pub use handoff::{BranchHolder, Freed};
pub use lock::Merging;
pub use merge::{Merge, MergeKind};
pub use merge_commit::MergeMethod;
pub use objects::private_dir;
pub use pool::Recycled;
pub use refname::{
    check_branch_name, legacy_task_branch, task_branch, task_of_branch, KEEP, LEAF, PREFIX,
};
pub use run::{Output, Runner, PASSED};
pub use status::LaunchState;
pub use worktree::{Prepared, Worktree};

use crate::error::{Error, Result};
use std::ffi::OsStr;
use std::path::{Component, Path, PathBuf};

/// The directory under `<common>/worktrees/` whose `gitdir` names `worktree`'s `.git`
/// file: exactly one, else none (nothing is trusted on a guess). The agent of that
/// worktree can write its own `gitdir`, so naming another worktree there only makes
/// both ambiguous: none is found for either.
pub fn admin_dir(common: &Path, worktree: &Path) -> Option<PathBuf> {
    let want = std::fs::canonicalize(worktree).ok()?.join(".git");
    let mut found = Vec::new();
    for e in std::fs::read_dir(common.join("worktrees")).ok()?.flatten() {
        let Ok(text) = std::fs::read_to_string(e.path().join("gitdir")) else {
            continue;
        };
        let named = PathBuf::from(text.trim());
        let named = std::fs::canonicalize(&named).unwrap_or(named);
        if named == want {
            found.push(e.path());
        }
    }
    (found.len() == 1).then(|| found.remove(0))
}

/// `[&OsStr; N]` from strings and paths alike, for argument lists.
macro_rules! args {
    ($($a:expr),* $(,)?) => { [$(::std::ffi::OsStr::new($a)),*] };
}
pub(crate) use args;

/// `git merge` arguments that fast-forward a checkout to `target` or change nothing:
/// git checks every path before writing any, never stashes, and never overwrites an
/// ignored file in the way. Both moves of a checked-out branch (a task worktree
/// behind `base`, the operator's checkout of `base`) use exactly these.
pub(crate) fn fast_forward_args(target: &str) -> [&OsStr; 6] {
    args![
        "merge",
        "--ff-only",
        "--quiet",
        "--no-autostash",
        "--no-overwrite-ignore",
        target
    ]
}

/// One repository, and the way to run git in it and in its worktrees.
#[derive(Debug, Clone)]
pub struct Git {
    /// The work tree (or bare git directory) the repository was opened at, canonical.
    repo: PathBuf,
    /// Shared by every worktree: refs, objects and worktree metadata live here.
    common_dir: PathBuf,
    runner: Runner,
    merge_method: MergeMethod,
}

impl Git {
    /// Opens the repository whose work tree (any of its worktrees) or bare git
    /// directory is exactly `repo`: a directory merely inside a repository is refused,
    /// so a mistyped path never acts on an enclosing one.
    pub fn open(repo: &Path, runner: Runner) -> Result<Git> {
        let abs = std::fs::canonicalize(repo)
            .map_err(|e| Error::Other(format!("cannot open repository {}: {e}", repo.display())))?;
        let out = runner
            .run(
                &abs,
                &args![
                    "rev-parse",
                    "--git-common-dir",
                    "--is-bare-repository",
                    "--is-inside-git-dir"
                ],
            )
            .map_err(|e| spawn_error(&abs, e))?;
        let lines: Vec<&str> = out.stdout.lines().collect();
        let (common, bare, in_git_dir) = match (out.ok(), lines.as_slice()) {
            (true, [c, b, g]) => (*c, *b == "true", *g == "true"),
            _ => {
                return Err(Error::Other(format!(
                    "{} is not the top of a git repository: {}",
                    abs.display(),
                    out.first_line()
                )))
            }
        };
        if in_git_dir && !bare {
            return Err(Error::Other(format!(
                "{} is a git directory, not a work tree; name the repository's top",
                abs.display()
            )));
        }
        let common_dir = std::fs::canonicalize(abs.join(common)).unwrap_or(abs.join(common));
        Ok(Git {
            repo: abs,
            common_dir,
            runner,
            merge_method: MergeMethod::Auto,
        })
    }

    /// Chooses how merge commits are computed (see [`MergeMethod`]).
    pub fn with_merge_method(mut self, method: MergeMethod) -> Git {
        self.merge_method = method;
        self
    }

    /// The repository as opened (canonical).
    pub fn repo(&self) -> &Path {
        &self.repo
    }

    /// The git directory every worktree of the repository shares.
    pub fn common_dir(&self) -> &Path {
        &self.common_dir
    }

    /// Runs git in `dir`; only a failure to start it is an error.
    ///
    /// `git worktree` commands run one at a time per repository, across processes (an
    /// exclusive lock on `<common dir>/spice-worktrees.lock`): git reads every
    /// worktree's metadata in `list` and `add`, and fails on one another command is
    /// half-way through writing ("failed to read …/commondir"), which a supervisor
    /// starting lanes together, or an agent completing its phase, would hit.
    fn run(&self, dir: &Path, args: &[&OsStr]) -> Result<Output> {
        let _serial = if args.first().is_some_and(|a| *a == "worktree") {
            self.worktree_lock()
        } else {
            None
        };
        let pinned = self.pinned(dir);
        let extra: Vec<(&str, &OsStr)> = pinned.iter().map(|(k, v)| (*k, v.as_os_str())).collect();
        self.runner
            .run_with(dir, args, &extra)
            .map_err(|e| spawn_error(dir, e))
    }

    /// Runs git in `dir` so that it cannot be stopped half-way, short of SIGKILL
    /// (see [`Runner::run_shielded`]).
    fn run_shielded(&self, dir: &Path, args: &[&OsStr]) -> Result<Output> {
        let pinned = self.pinned(dir);
        let extra: Vec<(&str, &OsStr)> = pinned.iter().map(|(k, v)| (*k, v.as_os_str())).collect();
        self.runner
            .run_shielded_with(dir, args, &extra)
            .map_err(|e| spawn_error(dir, e))
    }

    /// Where git run in `dir` finds its repository, when `dir` is not the repository
    /// as opened: the common directory always (its config, hooks, refs and objects
    /// are the repository's, never those a worktree's `.git` file points at), and the
    /// worktree's own git directory and work tree when [`admin_dir`] finds exactly one
    /// that names `dir`. A `dir` that is no worktree of the repository then fails in
    /// git instead of acting on another one.
    fn pinned(&self, dir: &Path) -> Vec<(&'static str, std::ffi::OsString)> {
        if dir == self.repo || dir == self.common_dir {
            return Vec::new();
        }
        let mut env = vec![("GIT_COMMON_DIR", self.common_dir.clone().into_os_string())];
        if let Some(admin) = admin_dir(&self.common_dir, dir) {
            env.push(("GIT_DIR", admin.into_os_string()));
            env.push(("GIT_WORK_TREE", dir.as_os_str().to_owned()));
        }
        env
    }

    /// Runs git in `dir` and requires success; `what` says what was being done
    /// (naming the branch) and git's first line says why it failed.
    fn check(&self, dir: &Path, args: &[&OsStr], what: impl FnOnce() -> String) -> Result<Output> {
        let out = self.run(dir, args)?;
        if out.ok() {
            Ok(out)
        } else {
            Err(Error::Other(format!("{}: {}", what(), out.first_line())))
        }
    }

    /// The commit a local branch points at, or `None` when there is no such branch.
    fn branch_tip(&self, branch: &str) -> Result<Option<String>> {
        let rev = format!("refs/heads/{branch}^{{commit}}");
        let out = self.run(&self.repo, &args!["rev-parse", "--verify", "--quiet", &rev])?;
        match out.code {
            Some(0) => Ok(Some(out.stdout.trim().to_string())),
            Some(1) => Ok(None),
            _ => Err(Error::Other(format!(
                "cannot read branch {branch} in {}: {}",
                self.repo.display(),
                out.first_line()
            ))),
        }
    }

    /// Whether commit `a` is an ancestor of (or equal to) commit `b`.
    fn is_ancestor(&self, a: &str, b: &str) -> Result<bool> {
        let out = self.run(&self.repo, &args!["merge-base", "--is-ancestor", a, b])?;
        match out.code {
            Some(0) => Ok(true),
            Some(1) => Ok(false),
            _ => Err(Error::Other(format!(
                "cannot compare {a} with {b} in {}: {}",
                self.repo.display(),
                out.first_line()
            ))),
        }
    }

    /// Refuses a name git would not accept as a local branch. Checked as a full ref
    /// (not `--branch`, which would expand `@{-1}` and the like).
    fn check_branch_name(&self, branch: &str) -> Result<()> {
        let full = format!("refs/heads/{branch}");
        let out = self.run(&self.repo, &args!["check-ref-format", &full])?;
        if out.ok() && !branch.starts_with('-') {
            Ok(())
        } else {
            Err(Error::input(format!(
                "{branch:?} is not a valid branch name"
            )))
        }
    }
}

fn spawn_error(dir: &Path, e: std::io::Error) -> Error {
    Error::Other(format!("cannot run git in {}: {e}", dir.display()))
}

/// `path` made absolute against `base` and canonical as far as it exists, so paths
/// git reports (symlinks resolved) compare equal to the ones callers pass, even for a
/// directory that is gone or not created yet.
fn canonical(base: &Path, path: &Path) -> PathBuf {
    let abs = base.join(path);
    let mut existing = abs.as_path();
    let mut rest = Vec::new();
    loop {
        if let Ok(c) = std::fs::canonicalize(existing) {
            return rest.iter().rev().fold(c, |p, r| p.join(r));
        }
        match (existing.parent(), existing.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name.to_owned());
                existing = parent;
            }
            _ => return lexical(&abs),
        }
    }
}

/// Removes `.` and `..` without touching the file system (the fallback of [`canonical`]).
fn lexical(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_resolves_the_existing_prefix() {
        let dir = tempfile::tempdir().unwrap();
        let real = std::fs::canonicalize(dir.path()).unwrap();
        assert_eq!(canonical(dir.path(), Path::new("a/b")), real.join("a/b"));
        assert_eq!(
            canonical(Path::new("/nowhere"), Path::new("/abs")),
            PathBuf::from("/abs")
        );
        std::fs::create_dir(dir.path().join("x")).unwrap();
        assert_eq!(canonical(dir.path(), Path::new("x/../y")), real.join("y"));
    }

    #[test]
    fn lexical_drops_dots() {
        assert_eq!(lexical(Path::new("/a/./b/../c")), PathBuf::from("/a/c"));
    }
}
