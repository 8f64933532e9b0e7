//! Templates: warm beds kept per repository under `<git common dir>/spice/beds/`, one
//! directory per commit (`<id>/tree` is a worktree detached at the commit, where the
//! warm commands ran; `<id>/bed.json` is its manifest, written atomically).
//!
//! Invariants:
//! - Only a template whose manifest says `ready` is ever seeded from; a failed warm
//!   is recorded (`failed`, with the end of its output) and never used.
//! - Warming and seeding hold the template's lock (`<id>.lock`, `flock`), so a
//!   template is never evicted while it is warmed or copied from.
//! - The key of a template is the blob ids of the key files at its commit: a template
//!   matches base exactly when base's key files are the same blobs.
//! - Only a template warmed at the seeded commit or one of its ancestors is chosen: a
//!   template warmed on a task's unmerged branch never reaches another task, however
//!   its key files match (an agent can run `spice bed warm` in its own worktree).

use super::config::BedConfig;
use super::owned;
use super::usage::{Meter, Usage};
use crate::error::{Error, Result};
use crate::git::Git;
use crate::stage::run::{self as runner, Job};
use nix::fcntl::{Flock, FlockArg};
use serde::{Deserialize, Serialize};
use std::fs::File;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// A template's manifest.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Template {
    pub id: String,
    pub commit: String,
    /// Each key file with its blob id at the commit (`None`: absent).
    pub key: Vec<(String, Option<String>)>,
    /// `warming`, `ready` or `failed`.
    pub state: String,
    pub created: String,
    pub warm_seconds: f64,
    pub usage: Option<Usage>,
    /// Why the warm failed: which command, what happened, the end of its output.
    pub error: Option<String>,
    pub last_used: String,
    /// Where its bed paths live (the scratch worktree).
    pub tree: PathBuf,
}

/// How a template was chosen for a commit.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Choice {
    pub template: Template,
    /// `exact` (same key) or `ancestor` (the nearest ancestor's, key differs).
    pub matched: String,
    pub behind: u64,
}

/// The templates of one repository.
pub struct Beds {
    pub root: PathBuf,
}

fn now_rfc3339() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

fn io(context: String) -> impl FnOnce(std::io::Error) -> Error {
    move |source| Error::Io { context, source }
}

impl Beds {
    pub fn of(git: &Git) -> Beds {
        Beds {
            root: git.common_dir().join("spice").join("beds"),
        }
    }

    fn dir(&self, id: &str) -> PathBuf {
        self.root.join(id)
    }

    /// Holds `id`'s lock until dropped; waits for a warm in progress.
    pub fn lock(&self, id: &str) -> Result<Flock<File>> {
        lock_file(&self.root, &format!("{id}.lock"))
    }

    /// Whether `id` is locked now (warmed or seeded from).
    pub fn busy(&self, id: &str) -> bool {
        let path = self.root.join(format!("{id}.lock"));
        let Ok(f) = File::options().write(true).open(&path) else {
            return false;
        };
        Flock::lock(f, FlockArg::LockExclusiveNonblock).is_err()
    }

    pub fn save(&self, t: &Template) -> Result<()> {
        let dir = self.dir(&t.id);
        std::fs::create_dir_all(&dir).map_err(io(format!("creating {}", dir.display())))?;
        let tmp = dir.join("bed.json.tmp");
        let text = serde_json::to_vec_pretty(t).expect("serialisable");
        std::fs::write(&tmp, text).map_err(io(format!("writing {}", tmp.display())))?;
        let path = dir.join("bed.json");
        std::fs::rename(&tmp, &path).map_err(io(format!("writing {}", path.display())))
    }

    /// Every template with a readable manifest, oldest first; unreadable ones are
    /// named in the second list.
    pub fn list(&self) -> (Vec<Template>, Vec<String>) {
        let mut out = Vec::new();
        let mut bad = Vec::new();
        let Ok(rd) = std::fs::read_dir(&self.root) else {
            return (out, bad);
        };
        for e in rd.flatten() {
            let m = e.path().join("bed.json");
            // A symlink is never followed: whatever it points at is not ours.
            if !e.file_type().is_ok_and(|t| t.is_dir()) {
                continue;
            }
            let name = e.file_name().to_string_lossy().into_owned();
            match std::fs::read(&m)
                .map_err(|e| format!("{}: {e}", m.display()))
                .and_then(|b| {
                    serde_json::from_slice::<Template>(&b)
                        .map_err(|e| format!("{}: {e}", m.display()))
                })
                .and_then(|t| {
                    let tree = self.dir(&name).join("tree");
                    owned::check_manifest(&m, &t.id, &name, "tree", &t.tree, &tree)?;
                    Ok(t)
                }) {
                Ok(t) => out.push(t),
                Err(why) => bad.push(why),
            }
        }
        out.sort_by(|a, b| a.created.cmp(&b.created).then(a.id.cmp(&b.id)));
        (out, bad)
    }

    /// Warms a template at `rev` (unless a ready one for that commit exists), running
    /// the warm commands in order in a scratch worktree; `on_line` sees their output.
    /// A warm stopped by `stop` leaves nothing behind (it was not a failure).
    pub fn warm(
        &self,
        git: &Git,
        cfg: &BedConfig,
        rev: &str,
        on_line: &mut dyn FnMut(&str),
        stop: &std::sync::atomic::AtomicBool,
    ) -> Result<Template> {
        let commit = git.resolve_commit(rev)?;
        let id = commit[..commit.len().min(12)].to_string();
        let _lock = self.lock(&id)?;
        if let Some(t) = self
            .list()
            .0
            .into_iter()
            .find(|t| t.id == id && t.state == "ready")
        {
            return Ok(t);
        }
        let dir = self.dir(&id);
        let tree = dir.join("tree");
        if owned::under(&self.root, &tree, "clearing the template tree")?.is_some() {
            let _ = git.remove_worktree(&tree, true);
            let _ = std::fs::remove_dir_all(&tree);
        }
        let mut t = Template {
            id: id.clone(),
            commit: commit.clone(),
            key: git.blobs_at(&commit, &cfg.key)?,
            state: "warming".into(),
            created: now_rfc3339(),
            warm_seconds: 0.0,
            usage: None,
            error: None,
            last_used: now_rfc3339(),
            tree: tree.clone(),
        };
        self.save(&t)?;
        git.add_scratch_worktree(&commit, &tree)?;
        let started = Instant::now();
        for argv in &cfg.warm {
            on_line(&format!("$ {}", argv.join(" ")));
            let o = runner::run_until(
                Job {
                    argv,
                    cwd: tree.clone(),
                    env: vec![("SPICE_BED_WARM".into(), "1".into())],
                    stdin: Vec::new(),
                    timeout: cfg.warm_timeout,
                    on_line: Some(&mut *on_line),
                    confine: None,
                },
                stop,
            );
            if stop.load(std::sync::atomic::Ordering::SeqCst) {
                self.remove(git, &t)?;
                return Err(Error::Other(format!(
                    "warming a test bed at {id} was stopped: {}",
                    argv.join(" ")
                )));
            }
            if !o.passed() {
                t.state = "failed".into();
                t.warm_seconds = started.elapsed().as_secs_f64();
                t.error = Some(format!(
                    "{}: {}\n{}",
                    argv.join(" "),
                    o.summary(cfg.warm_timeout),
                    o.output()
                ));
                self.save(&t)?;
                return Err(Error::Other(format!(
                    "warming a test bed at {id} failed: {}: {}",
                    argv.join(" "),
                    o.summary(cfg.warm_timeout)
                )));
            }
        }
        t.warm_seconds = started.elapsed().as_secs_f64();
        let present: Vec<PathBuf> = cfg
            .seed_paths()
            .iter()
            .map(|p| tree.join(&p.path))
            .filter(|p| p.exists())
            .collect();
        let mut m = Meter::new();
        for p in &present {
            m.add(p)?;
        }
        t.usage = Some(m.total());
        t.state = "ready".into();
        self.save(&t)?;
        Ok(t)
    }

    /// The best ready template for `commit` among those warmed at `commit` or an
    /// ancestor: the same key (nearest first), else the nearest.
    pub fn choose(&self, git: &Git, cfg: &BedConfig, commit: &str) -> Result<Option<Choice>> {
        let key = git.blobs_at(commit, &cfg.key)?;
        let mut best: Option<Choice> = None;
        // A template whose tree was removed by hand is no template.
        for t in self
            .list()
            .0
            .into_iter()
            .filter(|t| t.state == "ready" && t.tree.is_dir())
        {
            // Only a template of `commit`'s own history: one warmed at a commit base
            // never had (a task's unmerged branch, whatever its key files) is never
            // seeded from, since its warm ran code base does not hold.
            let Some(behind) = git.behind(&t.commit, commit)? else {
                continue;
            };
            let exact = !cfg.key.is_empty() && t.key == key;
            let c = Choice {
                matched: if exact { "exact" } else { "ancestor" }.into(),
                behind,
                template: t,
            };
            let better = match &best {
                None => true,
                Some(b) => {
                    (c.matched == "exact", std::cmp::Reverse(c.behind))
                        > (b.matched == "exact", std::cmp::Reverse(b.behind))
                }
            };
            if better {
                best = Some(c);
            }
        }
        Ok(best)
    }

    /// Records that `t` was just seeded from (eviction is least recently used first).
    pub fn touch(&self, t: &Template) -> Result<()> {
        let mut t = t.clone();
        t.last_used = now_rfc3339();
        self.save(&t)
    }

    /// Removes a template: its worktree, its directory, its lock file.
    /// Only a template [`Beds::list`] accepted, whose directory still resolves under
    /// the beds' root, is removed (`bed::owned`).
    pub fn remove(&self, git: &Git, t: &Template) -> Result<()> {
        if !owned::plain_id(&t.id) || t.tree != self.dir(&t.id).join("tree") {
            return Err(Error::Other(format!(
                "refusing to remove template {:?}: its manifest names {}",
                t.id,
                t.tree.display()
            )));
        }
        let dir = self.dir(&t.id);
        if owned::under(&self.root, &dir, "removing the template")?.is_none() {
            return Ok(());
        }
        if owned::under(&self.root, &t.tree, "removing the template tree")?.is_some() {
            let _ = git.remove_worktree(&t.tree, true);
        }
        std::fs::remove_dir_all(&dir).map_err(io(format!("removing {}", dir.display())))?;
        let _ = std::fs::remove_file(self.root.join(format!("{}.lock", t.id)));
        Ok(())
    }
}

/// Holds an exclusive `flock` on `dir/name` (made, with `dir`, when missing) until
/// dropped; waits for its holder.
pub(crate) fn lock_file(dir: &Path, name: &str) -> Result<Flock<File>> {
    std::fs::create_dir_all(dir).map_err(io(format!("creating {}", dir.display())))?;
    let path = dir.join(name);
    let f = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(io(format!("opening {}", path.display())))?;
    Flock::lock(f, FlockArg::LockExclusive)
        .map_err(|(_, e)| Error::Other(format!("locking {}: {e}", path.display())))
}

/// Seeds the worktree `wt` from the best template for `commit`: only the bed paths it
/// lacks. The answer is what the ledger records (`seeded`, `template`, `matched`,
/// `method`, counts), or why nothing was seeded (`method` `cold` or `kept`).
pub fn seed_worktree(
    git: &Git,
    cfg: &BedConfig,
    commit: &str,
    wt: &Path,
) -> Result<serde_json::Value> {
    use serde_json::json;
    let beds = Beds::of(git);
    let Some(choice) = beds.choose(git, cfg, commit)? else {
        return Ok(json!({ "seeded": false, "method": "cold",
            "why": format!("no warm template for {} (run `spice bed warm`)", &commit[..commit.len().min(12)]) }));
    };
    let _lock = beds.lock(&choice.template.id)?;
    let mut paths = Vec::new();
    for p in cfg.seed_paths() {
        if super::state(wt, &p.path)? != super::PathState::Seeded
            && choice.template.tree.join(&p.path).exists()
        {
            paths.push(p);
        }
    }
    if paths.is_empty() {
        return Ok(
            json!({ "seeded": false, "method": "kept", "template": choice.template.id,
            "why": "every bed path is already in the worktree" }),
        );
    }
    let report = super::seed(&super::SeedRequest {
        template: choice.template.tree.clone(),
        dest: wt.to_path_buf(),
        paths,
    })?;
    let sources = source_times(git, wt, &choice.template)?;
    beds.touch(&choice.template)?;
    Ok(json!({
        "seeded": true,
        "template": choice.template.id,
        "commit": choice.template.commit,
        "matched": choice.matched,
        "behind": choice.behind,
        "method": report.method,
        "files": report.total.files,
        "bytes": report.total.bytes,
        "by_method": report.total.by_method,
        "fallbacks": report.fallbacks,
        "sources_dated": sources,
    }))
}

/// Gives each file of `wt` that is exactly as the template's commit has it the
/// times its copy has in the template's tree (where the warm built), so that a build
/// tool comparing its sources' mtimes with its outputs' (cargo's fingerprints, make)
/// sees the seeded outputs as fresh. A checkout dates every file at the moment it
/// was made, after the template's outputs, so without this the whole crate was
/// rebuilt. A file changed since (committed, staged, or on disk, in either tree)
/// keeps its own newer time and is rebuilt. Returns how many files were dated.
fn source_times(git: &Git, wt: &Path, t: &Template) -> Result<u64> {
    use std::os::unix::fs::MetadataExt;
    let theirs: std::collections::HashSet<String> = git
        .unchanged_since(&t.tree, &t.commit)?
        .into_iter()
        .collect();
    let mut n = 0;
    for rel in git.unchanged_since(wt, &t.commit)? {
        if !theirs.contains(&rel) {
            continue;
        }
        let (ours, template) = (wt.join(&rel), t.tree.join(&rel));
        let (Ok(a), Ok(b)) = (
            std::fs::symlink_metadata(&ours),
            std::fs::symlink_metadata(&template),
        ) else {
            continue;
        };
        let same_time = (a.mtime(), a.mtime_nsec()) == (b.mtime(), b.mtime_nsec());
        if a.is_file() && b.is_file() && a.len() == b.len() && !same_time {
            super::sys::set_times(&ours, &b).map_err(io(format!("dating {}", ours.display())))?;
            n += 1;
        }
    }
    Ok(n)
}

/// Free TCP ports on 127.0.0.1, found by binding them (all bound at once, so they
/// are distinct), released for the caller to reserve.
pub fn free_ports(n: u16) -> Result<Vec<u16>> {
    let mut held = Vec::new();
    for _ in 0..n {
        let l = std::net::TcpListener::bind("127.0.0.1:0")
            .map_err(io("binding a free port on 127.0.0.1".into()))?;
        held.push(l);
    }
    Ok(held
        .iter()
        .map(|l| l.local_addr().map(|a| a.port()).unwrap_or(0))
        .collect())
}

/// The real disk of every tree named, shared extents and inodes counted once.
pub fn total_usage(trees: &[&Path]) -> Result<Usage> {
    let mut m = Meter::new();
    for t in trees.iter().filter(|t| t.exists()) {
        m.add(t)?;
    }
    Ok(m.total())
}
