//! The pre-commit gate of a lane's agent, run by its supervisor: the agent's hook
//! asks its desk (`fleet::desk`), and the supervisor judges the commit and keeps the
//! record, so nothing the gate remembers (latches, passed commits) is the agent's to
//! write.
//!
//! Theory: the supervisor writes the agent's index as a tree and judges that tree
//! against the commit `HEAD` names ([`Scope::Tree`]), under the rules `base`
//! carries; what passed is recorded as that (parent, tree) pair, so a commit the
//! agent makes of anything else, or on another parent, is reported by the phase
//! gate as a bypass. Latches that tighten (a new latch, a lower one, a failure's)
//! are kept at once: a hostile agent gains nothing by them. A release (a file back
//! at its base, gone, no longer capped) waits for its commit: the run leaves it in
//! `<gate>/released/<task>.json` with the (parent, tree) it was judged on, and it
//! takes effect only when the supervisor later finds that very commit at the tip of
//! the task's branch ([`settle`], before the task's next gate run and before its
//! phase lands). A tree judged and never committed frees nothing.
//!
//! Invariants:
//! - Every path written is under the gate's directory and named by the supervisor
//!   (the task's id, checked), never by the agent.
//! - A release is applied only for the (parent, tree) it was judged on, found as
//!   the tip of the task's own branch (named from its handle, not from `HEAD`).

use super::latch::Latches;
use super::phase::{self, gate_dir};
use super::scan::{Repo, Scope};
use super::{Options, Report};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// What the supervisor knows of the commit an agent is about to make: never read
/// from the agent's files or environment.
#[derive(Debug, Clone, Copy)]
pub struct Commit<'a> {
    /// The task's worktree, as its claim records it.
    pub worktree: &'a Path,
    /// The repository's common git directory.
    pub common: &'a Path,
    /// The branch whose `spice.toml` gives the rules: the lane's base.
    pub base: &'a str,
    /// The task's id (names its file of waiting releases).
    pub task: &'a str,
    /// The task's own branch (`git::task_branch` of its handle).
    pub branch: &'a str,
    /// The index the agent's hook was given (`GIT_INDEX_FILE`; `commit -a` and a
    /// commit of named paths stage into a temporary one), as the agent says: used
    /// only when it is a file of the worktree's own git directory ([`index_file`]).
    pub index: Option<&'a str>,
}

/// Releases judged on a commit not yet seen on the task's branch.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
struct Waiting {
    /// The commit-to-be's first parent, `-` for a first commit.
    parent: String,
    tree: String,
    /// The latches, as (rule, key), its commit releases.
    released: Vec<(String, String)>,
}

/// The file of `task`'s waiting releases; a task id that could name anything but one
/// file there is refused.
fn waiting_file(common: &Path, task: &str) -> Result<PathBuf, String> {
    let plain = !task.is_empty()
        && task
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if !plain {
        return Err(format!("task id {task:?} cannot name a file"));
    }
    Ok(gate_dir(common)
        .join("released")
        .join(format!("{task}.json")))
}

/// Judges the commit the agent in `at.worktree` is about to make, and records what
/// the gate keeps (see the module doc). The caller says who judges (`opts.actor`,
/// `opts.phase`) and where the repository's checks run (`opts.confine`).
pub fn pre_commit(at: &Commit<'_>, opts: &Options) -> Result<Report, String> {
    let mut repo = phase::pinned(at.worktree, at.common)?;
    repo.index = index_file(&repo, at.index)?;
    settle(at)?;
    let cfg = phase::config_of(&repo, at.base)?;
    let tree = write_tree(&repo)?;
    let parent = phase::head(&repo);
    let scope = Scope::Tree {
        parent: parent.clone(),
        tree: tree.clone(),
    };
    let opts = Options {
        record: true,
        defer_releases: true,
        ..opts.clone()
    };
    let report = super::run(&repo, &cfg, &scope, &opts)?;
    if report.clean() {
        phase::append_verified(at.common, parent.as_deref(), &tree)?;
        let file = waiting_file(at.common, at.task)?;
        if report.released.is_empty() {
            remove(&file)?;
        } else {
            let waiting = Waiting {
                parent: parent.unwrap_or_else(|| "-".into()),
                tree,
                released: report.released.clone(),
            };
            write(&file, &waiting)?;
        }
    }
    Ok(report)
}

/// Applies the task's waiting releases if their commit is the tip of its branch, and
/// forgets them either way: a later commit is judged afresh.
pub fn settle(at: &Commit<'_>) -> Result<(), String> {
    let file = waiting_file(at.common, at.task)?;
    let waiting: Waiting = match std::fs::read(&file) {
        Ok(b) => serde_json::from_slice(&b).map_err(|e| format!("{}: {e}", file.display()))?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(format!("{}: {e}", file.display())),
    };
    let repo = phase::pinned(at.worktree, at.common)?;
    if tip(&repo, at.branch).as_ref() == Some(&(waiting.parent.clone(), waiting.tree.clone())) {
        let _writer = Latches::lock(at.common)?;
        let mut latches = Latches::load(at.common)?;
        let mut changed = false;
        for (rule, key) in &waiting.released {
            changed |= latches.clear(rule, key);
        }
        if changed {
            latches.save(at.common)?;
        }
    }
    remove(&file)
}

/// The index file `said` names, when it is one git makes in the worktree's own git
/// directory (`index`, `index.lock`, `next-index-*.lock`, symbolic links resolved);
/// `None` said: the worktree's own index.
fn index_file(repo: &Repo, said: Option<&str>) -> Result<Option<PathBuf>, String> {
    let Some(said) = said.filter(|s| !s.is_empty()) else {
        return Ok(None);
    };
    let refused = || format!("{said}: not an index of the worktree's git directory");
    let given = Path::new(said);
    // git names a relative index from the work tree's root, where hooks run.
    let real = std::fs::canonicalize(repo.root.join(given)).map_err(|_| refused())?;
    let dir = repo
        .pin
        .as_deref()
        .and_then(|d| std::fs::canonicalize(d).ok());
    let name = real.file_name().and_then(|n| n.to_str()).unwrap_or("");
    let made_by_git = name == "index"
        || name == "index.lock"
        || (name.starts_with("next-index-") && name.ends_with(".lock"));
    if dir.is_none() || real.parent() != dir.as_deref() || !made_by_git {
        return Err(refused());
    }
    Ok(Some(real))
}

/// The (first parent or `-`, tree) of `branch`'s tip.
fn tip(repo: &Repo, branch: &str) -> Option<(String, String)> {
    super::phase::parent_and_tree(repo, &format!("refs/heads/{branch}"))
}

/// The pinned worktree's index as a tree (the objects it needs are the repository's
/// or the worktree's own, which the repository lists as alternates).
fn write_tree(repo: &Repo) -> Result<String, String> {
    let out = repo.git(&["write-tree"])?;
    Ok(String::from_utf8_lossy(&out).trim().to_string())
}

fn write(file: &Path, waiting: &Waiting) -> Result<(), String> {
    let dir = file.parent().expect("under the gate's directory");
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let tmp = file.with_extension("json.tmp");
    let text = serde_json::to_vec(waiting).expect("serialisable");
    std::fs::write(&tmp, text).map_err(|e| format!("{}: {e}", tmp.display()))?;
    std::fs::rename(&tmp, file).map_err(|e| format!("{}: {e}", file.display()))
}

fn remove(file: &Path) -> Result<(), String> {
    match std::fs::remove_file(file) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(format!("{}: {e}", file.display())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_index_is_one_git_makes_in_the_worktree_s_own_git_directory() {
        let d = tempfile::tempdir().unwrap();
        let admin = d.path().join("admin");
        let wt = d.path().join("wt");
        std::fs::create_dir_all(&admin).unwrap();
        std::fs::create_dir_all(&wt).unwrap();
        for f in ["index", "index.lock", "next-index-123.lock", "other"] {
            std::fs::write(admin.join(f), "").unwrap();
        }
        std::fs::write(wt.join("index"), "").unwrap();
        std::os::unix::fs::symlink(wt.join("index"), admin.join("next-index-9.lock")).unwrap();
        let repo = Repo {
            root: wt.clone(),
            common_dir: d.path().to_path_buf(),
            pin: Some(admin.clone()),
            index: None,
        };
        assert_eq!(index_file(&repo, None).unwrap(), None);
        for ok in ["index", "index.lock", "next-index-123.lock"] {
            let p = admin.join(ok);
            let got = index_file(&repo, Some(p.to_str().unwrap())).unwrap();
            assert_eq!(got, Some(std::fs::canonicalize(&p).unwrap()));
        }
        let relative = "../admin/index.lock";
        assert!(index_file(&repo, Some(relative)).unwrap().is_some());
        for bad in [
            admin.join("other"),
            admin.join("next-index-9.lock"),
            wt.join("index"),
            admin.join("missing"),
        ] {
            assert!(
                index_file(&repo, Some(bad.to_str().unwrap())).is_err(),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn a_task_id_names_one_file_or_none() {
        let c = Path::new("/r/.git");
        assert!(waiting_file(c, "BCD-x")
            .unwrap()
            .ends_with("released/BCD-x.json"));
        for bad in ["", "../x", "a/b", "a.b", "x\n"] {
            assert!(waiting_file(c, bad).is_err(), "{bad:?}");
        }
    }
}
