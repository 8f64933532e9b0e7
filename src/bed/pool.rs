//! The pool: finished tasks' worktrees, with their beds, kept under
//! `<git common dir>/spice/pool/<id>/` for the repository's next tasks. A task whose
//! worktree comes from the pool starts with the last task's build output, nearer to
//! base than any template, instead of a cold worktree.
//!
//! Invariants:
//! - A worktree enters the pool only through [`crate::git::Git::recycle_worktree`]:
//!   whatever it held beyond its commits and its bed paths is first saved under a
//!   ref (named in the pool entry and the caller's ledger), and a worktree holding
//!   more than [`MAX_SAVED`] of such files is refused, left where it was.
//! - The pool holds at most `[testbed] pool` worktrees: putting one more evicts the
//!   least recently pooled. A pooled worktree is never in use (the lane that finished
//!   with it let go), so evicting it loses nothing.
//! - Taking and putting hold the pool's lock (`pool.lock`, `flock`): two lanes never
//!   take the same worktree, and eviction never removes one being taken.
//! - An entry whose worktree is gone is dropped; a worktree that cannot be moved to
//!   the new task's place stays pooled and the next one is tried.

use super::config::BedConfig;
use super::owned;
use crate::error::{Error, Result};
use crate::git::{Git, Recycled};
use nix::fcntl::Flock;
use serde::{Deserialize, Serialize};
use std::fs::File;
use std::path::{Path, PathBuf};

/// More than this many bytes of uncommitted files outside its bed and a worktree is
/// not recycled.
pub const MAX_SAVED: u64 = 64 << 20;

/// One pooled worktree.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Pooled {
    pub id: String,
    /// Where the worktree is now.
    pub path: PathBuf,
    /// The task whose worktree it was.
    pub task: String,
    /// The ref what it held beyond its commits was saved under.
    pub saved: Option<String>,
    pub saved_files: usize,
    pub pooled_at: String,
}

/// What putting a worktree in the pool did.
#[derive(Debug, Clone, Serialize)]
pub struct Put {
    pub entry: Pooled,
    pub recycled: Recycled,
    /// Entries evicted to keep the pool within its bound.
    pub evicted: Vec<Pooled>,
}

/// The pool of one repository.
pub struct Pool {
    pub root: PathBuf,
}

fn io(context: String) -> impl FnOnce(std::io::Error) -> Error {
    move |source| Error::Io { context, source }
}

/// The bed paths as the strings git is given.
pub fn keep_paths(cfg: &BedConfig) -> Vec<String> {
    cfg.seed_paths()
        .iter()
        .map(|p| p.path.display().to_string())
        .collect()
}

impl Pool {
    pub fn of(git: &Git) -> Pool {
        Pool {
            root: git.common_dir().join("spice").join("pool"),
        }
    }

    /// Holds the pool's lock until dropped.
    pub fn lock(&self) -> Result<Flock<File>> {
        super::template::lock_file(&self.root, "pool.lock")
    }

    fn manifest(&self, id: &str) -> PathBuf {
        self.root.join(format!("{id}.json"))
    }

    fn save(&self, e: &Pooled) -> Result<()> {
        let tmp = self.root.join(format!("{}.json.tmp", e.id));
        std::fs::write(&tmp, serde_json::to_vec_pretty(e).expect("serialisable"))
            .map_err(io(format!("writing {}", tmp.display())))?;
        let path = self.manifest(&e.id);
        std::fs::rename(&tmp, &path).map_err(io(format!("writing {}", path.display())))
    }

    /// Every entry, least recently pooled first.
    pub fn list(&self) -> Vec<Pooled> {
        self.scan().0
    }

    /// Every entry whose manifest checks out (`bed::owned`: its id is the manifest's
    /// name and its path is `<pool>/<id>`), least recently pooled first; and why each
    /// other manifest was ignored.
    pub fn scan(&self) -> (Vec<Pooled>, Vec<String>) {
        let (mut out, mut bad) = (Vec::new(), Vec::new());
        let Ok(rd) = std::fs::read_dir(&self.root) else {
            return (out, bad);
        };
        for e in rd.flatten() {
            let m = e.path();
            let Some(stem) = m
                .file_name()
                .and_then(|n| n.to_str())
                .and_then(|n| n.strip_suffix(".json"))
            else {
                continue;
            };
            if !e.file_type().is_ok_and(|t| t.is_file()) {
                continue;
            }
            let parsed = std::fs::read(&m)
                .map_err(|err| format!("{}: {err}", m.display()))
                .and_then(|b| {
                    serde_json::from_slice::<Pooled>(&b)
                        .map_err(|err| format!("{}: {err}", m.display()))
                })
                .and_then(|p| {
                    let home = self.root.join(stem);
                    owned::check_manifest(&m, &p.id, stem, "path", &p.path, &home)?;
                    Ok(p)
                });
            match parsed {
                Ok(p) => out.push(p),
                Err(why) => bad.push(why),
            }
        }
        out.sort_by(|a: &Pooled, b: &Pooled| a.pooled_at.cmp(&b.pooled_at).then(a.id.cmp(&b.id)));
        (out, bad)
    }

    /// Recycles the finished worktree `wt` of task `task` into the pool (module
    /// invariants); `tag` names the ref its leftovers are saved under.
    pub fn put(&self, git: &Git, cfg: &BedConfig, wt: &Path, task: &str, tag: &str) -> Result<Put> {
        let _lock = self.lock()?;
        let recycled = git.recycle_worktree(wt, &keep_paths(cfg), tag, MAX_SAVED)?;
        let id = format!("{}-{}", safe(task), safe(tag));
        let home = self.root.join(&id);
        // Out of the lane's directory, so the task's place is free again. A move git
        // refuses pools nothing: the worktree stays where it is (clean, its leftovers
        // saved), since a pool entry names only `<pool>/<id>`.
        git.move_worktree(wt, &home)?;
        let entry = Pooled {
            id,
            path: home,
            task: task.to_string(),
            saved: recycled.saved.clone(),
            saved_files: recycled.files.len(),
            pooled_at: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Micros, true),
        };
        self.save(&entry)?;
        let mut evicted = Vec::new();
        let mut all = self.list();
        while all.len() > cfg.pool {
            let oldest = all.remove(0);
            self.remove_locked(git, &oldest)?;
            evicted.push(oldest);
        }
        Ok(Put {
            entry,
            recycled,
            evicted,
        })
    }

    /// Moves the most recently pooled worktree to `to` and checks out `branch` there
    /// (made at `base` when new); `None` when the pool has none that can be.
    pub fn take(&self, git: &Git, to: &Path, branch: &str, base: &str) -> Result<Option<Pooled>> {
        if !self.root.is_dir() {
            return Ok(None);
        }
        let _lock = self.lock()?;
        for e in self.list().into_iter().rev() {
            if !matches!(owned::under(&self.root, &e.path, "taking the pooled worktree"), Ok(Some(p)) if p.is_dir())
            {
                let _ = std::fs::remove_file(self.manifest(&e.id));
                continue;
            }
            let Ok(at) = git.move_worktree(&e.path, to) else {
                continue;
            };
            let _ = std::fs::remove_file(self.manifest(&e.id));
            if let Err(err) = git.switch_recycled(&at, branch, base) {
                // Clean and saved: nothing is lost by removing it; a cold worktree
                // is made instead.
                let _ = git.remove_worktree(&at, true);
                return Err(err);
            }
            return Ok(Some(Pooled { path: at, ..e }));
        }
        Ok(None)
    }

    /// Removes a pooled worktree (it was emptied of everything but its bed).
    pub fn remove(&self, git: &Git, e: &Pooled) -> Result<()> {
        let _lock = self.lock()?;
        self.remove_locked(git, e)
    }

    /// Removes only what [`Pool::scan`] accepts and still resolves under the pool.
    fn remove_locked(&self, git: &Git, e: &Pooled) -> Result<()> {
        if !owned::plain_id(&e.id) || e.path != self.root.join(&e.id) {
            return Err(Error::Other(format!(
                "refusing to remove pooled worktree {:?}: its manifest names {}",
                e.id,
                e.path.display()
            )));
        }
        if owned::under(&self.root, &e.path, "removing the pooled worktree")?.is_some() {
            git.remove_worktree(&e.path, true)?;
        }
        let _ = std::fs::remove_file(self.manifest(&e.id));
        Ok(())
    }
}

/// `task` as a directory name.
fn safe(task: &str) -> String {
    task.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::git::testutil::sh;
    use crate::git::Runner;

    fn cfg(pool: usize) -> BedConfig {
        super::super::config::parse(
            Path::new("spice.toml"),
            &format!("[testbed]\npaths = [\"target\"]\npool = {pool}\n"),
        )
        .unwrap()
        .unwrap()
    }

    /// A repository with task worktrees `wt/<name>` on `spice/<name>`, each with a bed.
    fn setup(names: &[&str]) -> (tempfile::TempDir, Git) {
        let d = tempfile::tempdir().unwrap();
        let repo = d.path().join("repo");
        std::fs::create_dir(&repo).unwrap();
        sh(&repo, &["init", "-q", "-b", "main"]);
        sh(&repo, &["config", "user.email", "t@example.com"]);
        sh(&repo, &["config", "user.name", "T"]);
        std::fs::write(repo.join(".gitignore"), "target/\n").unwrap();
        sh(&repo, &["add", "."]);
        sh(&repo, &["commit", "-q", "-m", "root"]);
        for n in names {
            let wt = d.path().join("wt").join(n);
            let b = format!("spice/{n}");
            sh(
                &repo,
                &["worktree", "add", "-q", "-b", &b, wt.to_str().unwrap()],
            );
            std::fs::create_dir_all(wt.join("target")).unwrap();
            std::fs::write(wt.join("target/built"), *n).unwrap();
        }
        let g = Git::open(&repo, Runner::new(std::env::vars_os())).unwrap();
        (d, g)
    }

    #[test]
    fn a_pooled_worktree_is_taken_by_the_next_task_with_its_bed() {
        let (d, g) = setup(&["a"]);
        let pool = Pool::of(&g);
        let wt = d.path().join("wt/a");
        std::fs::write(wt.join("left.txt"), "x").unwrap();
        let put = pool.put(&g, &cfg(2), &wt, "a", "t1").unwrap();
        assert!(put.entry.path.starts_with(&pool.root), "{put:?}");
        assert_eq!(
            put.entry.saved.as_deref(),
            Some("refs/spice/saved/spice/a/t1")
        );
        assert!(!wt.exists(), "the task's place is free again");
        let to = d.path().join("wt/b");
        let got = pool.take(&g, &to, "spice/b", "main").unwrap().unwrap();
        assert_eq!(got.task, "a");
        assert_eq!(
            std::fs::read_to_string(to.join("target/built")).unwrap(),
            "a"
        );
        assert!(!to.join("left.txt").exists());
        assert_eq!(sh(&to, &["branch", "--show-current"]), "spice/b");
        assert!(pool.list().is_empty());
        assert!(pool
            .take(&g, &d.path().join("wt/c"), "spice/c", "main")
            .unwrap()
            .is_none());
    }

    #[test]
    fn the_pool_is_bounded_and_least_recently_pooled_goes_first() {
        let (d, g) = setup(&["a", "b", "c"]);
        let pool = Pool::of(&g);
        for (i, n) in ["a", "b", "c"].iter().enumerate() {
            let put = pool
                .put(
                    &g,
                    &cfg(2),
                    &d.path().join("wt").join(n),
                    n,
                    &format!("t{i}"),
                )
                .unwrap();
            if *n == "c" {
                assert_eq!(put.evicted.len(), 1);
                assert_eq!(put.evicted[0].task, "a");
                assert!(!put.evicted[0].path.exists());
            }
        }
        let left: Vec<String> = pool.list().into_iter().map(|e| e.task).collect();
        assert_eq!(left, ["b", "c"]);
        // The warmest (most recently pooled) is taken first.
        let got = pool
            .take(&g, &d.path().join("wt/x"), "spice/x", "main")
            .unwrap()
            .unwrap();
        assert_eq!(got.task, "c");
        // A pool of 0 keeps nothing.
        let (d2, g2) = setup(&["z"]);
        let put = Pool::of(&g2)
            .put(&g2, &cfg(0), &d2.path().join("wt/z"), "z", "t")
            .unwrap();
        assert_eq!(put.evicted.len(), 1);
        assert!(Pool::of(&g2).list().is_empty());
    }

    #[test]
    fn an_entry_whose_worktree_is_gone_is_dropped() {
        let (d, g) = setup(&["a"]);
        let pool = Pool::of(&g);
        let put = pool
            .put(&g, &cfg(2), &d.path().join("wt/a"), "a", "t")
            .unwrap();
        std::fs::remove_dir_all(&put.entry.path).unwrap();
        assert!(pool
            .take(&g, &d.path().join("wt/b"), "spice/b", "main")
            .unwrap()
            .is_none());
        assert!(pool.list().is_empty());
    }
}
