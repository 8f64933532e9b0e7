//! What a lane's agent may write when confined ([`crate::sandbox`]): the paths one
//! session's policy names, worked out by the supervisor from what it knows, never
//! from anything the agent could have written.
//!
//! Theory: Landlock grants writes beneath directories (or to single files), so the
//! layout decides what can be enforced. A session may write:
//! - its worktree, and the worktree's own administrative directory in the git common
//!   directory (`worktrees/<name>`: its `HEAD`, index, reflog), found by matching each
//!   `worktrees/*/gitdir` (written by git when the supervisor added the worktree) to
//!   the worktree path the claim records;
//! - its worktree's private object directory (`git::private_dir`: its git writes
//!   new objects there, `GIT_OBJECT_DIRECTORY`, and reads the repository's through
//!   `GIT_ALTERNATE_OBJECT_DIRECTORIES`; never the repository's object store, so no
//!   agent can delete or rewrite history), and its task branch's own directories
//!   of loose refs and reflogs (`refs/heads/spice/NAME/`, `logs/refs/heads/spice/NAME/`,
//!   `git::task_ref_dirs`, named from the claim's handle), so it commits its branch
//!   and cannot move any other;
//! - its transcript's directory (the profile's `transcript.dir`), its agent's home
//!   entries (the profile's `writable`; all of the demo agent's own HOME), a private temporary
//!   directory (`TMPDIR`), the record of its interrupted commands, the terminal
//!   devices, and what the lane's `writable` adds.
//!
//! It may not write: the repository's objects, the base branch, another task's branch
//! or any ref outside its own directory, the git configuration and hooks, the gate's
//! directory (its pre-commit hook asks the supervisor, `gate::agent`), other
//! worktrees, the operator's checkout, beds and templates, manifests, recordings and
//! logs in the state directory.
//!
//! Nor the store: the agent's own `spice` commands reach it through the supervisor's
//! desk (`fleet::desk`), so none of its files is writable.
//!
//! Known limit, said in `fleet check` and ARCHITECTURE.md: reads are not confined.

use super::FleetOptions;
use crate::config::fleet::LaneConfig;
use crate::config::lane::Confinement;
use crate::config::profile::Placeholder;
use std::path::{Path, PathBuf};

/// The devices an agent's terminal programs write.
const DEVICES: [&str; 6] = [
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/tty",
    "/dev/pts",
    "/dev/ptmx",
];

/// One session's confinement: the writable paths handed to the agent shim (`None`:
/// the lane runs unconfined), and the one line the lane's row and `fleet check` show.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Confined {
    pub write: Option<Vec<PathBuf>>,
    pub status: String,
    /// Variables the agent's environment gets for it: where its git writes objects.
    pub env: Vec<(String, String)>,
}

/// What a lane's agents get on this machine, in a few words (`fleet check`'s column;
/// the ABI is said once, on its `sandbox:` line).
pub fn describe(cfg: &LaneConfig, offer: crate::sandbox::Offer) -> String {
    match (cfg.lane.sandbox, offer.landlock) {
        (Confinement::Off, _) => "not confined (sandbox = \"off\")".into(),
        (Confinement::Landlock, None) => "NOT confined: no Landlock in this kernel".into(),
        (Confinement::Landlock, Some(v)) if v >= 6 => "confined".into(),
        (Confinement::Landlock, Some(_)) => "partly confined (writes only)".into(),
    }
}

/// What confinement leaves open today, said once under `fleet check`'s lanes.
pub const LIMITS: &str = "agents can still read what their operator can (docs/security.md)";

/// The private temporary directory of a lane's sessions (`TMPDIR`).
pub fn temp_dir(opts: &FleetOptions, lane: &str) -> PathBuf {
    opts.state_dir.join("tmp").join(lane)
}

/// Works out the policy of a session of `cfg`: what its lane's commands in the
/// worktree may write ([`commands`]), and what is the session's own (the record of
/// its interrupted commands, its transcript's directory, its agent's home entries),
/// creating the private directories it names. `value` expands the profile's
/// `writable` templates (`{home}` is the HOME the agent gets).
pub fn session(
    cfg: &LaneConfig,
    opts: &FleetOptions,
    commands: &Confined,
    session: &str,
    value: &dyn Fn(Placeholder) -> Option<String>,
) -> Confined {
    let Some(mut write) = commands.write.clone() else {
        return commands.clone();
    };
    let interrupted = opts.state_dir.join("interrupted").join(session);
    let _ = std::fs::create_dir_all(&interrupted);
    write.push(interrupted);
    let home = value(Placeholder::Home).map(PathBuf::from);
    // The scripted demo agent's HOME is its own, under the state directory.
    if cfg.profile.runs_demo_agent() {
        write.extend(home.clone());
    }
    // The agent writes its transcript where the profile says it does.
    if let Some(dir) = cfg
        .profile
        .transcript
        .as_ref()
        .and_then(|t| t.dir()?.expand(value))
    {
        let _ = std::fs::create_dir_all(&dir);
        write.push(PathBuf::from(dir));
    }
    for t in &cfg.profile.writable {
        if let Some(p) = t.expand(value) {
            write.push(PathBuf::from(p));
        }
    }
    // `~/` in the lane's `writable` is the agent's HOME (a lane's `[env] HOME`).
    write.extend(lane_writable(cfg, home.as_deref()));
    write.retain(|p| crate::sandbox::nameable(p));
    write.dedup();
    Confined {
        write: Some(write),
        ..commands.clone()
    }
}

impl Confined {
    /// The Landlock ruleset of this policy, for a child to enter (`None`: not
    /// confined). It must outlive the spawn.
    pub fn prepare(&self) -> crate::error::Result<Option<crate::sandbox::Prepared>> {
        self.write
            .as_ref()
            .map(|write| {
                crate::sandbox::Policy {
                    write: write.clone(),
                }
                .prepare()
            })
            .transpose()
    }
}

/// What a repository command run in a lane's worktree may write (a stage hook, which
/// runs in the agent's files: its build scripts, its tests): the worktree, the lane's
/// temporary directory, the git paths of its commits and the lane's `writable`, as
/// the agent has them, with the same variables; nothing of a session's own (its
/// transcript, its agent's home). `write` is `None` for a lane not confined.
/// `handle` is the claim's: it names the one branch the commands may move.
pub fn commands(
    cfg: &LaneConfig,
    opts: &FleetOptions,
    repo: &Path,
    worktree: &Path,
    handle: &str,
) -> Confined {
    let status = describe(cfg, crate::sandbox::probe());
    // Every lane's agent gets it as `TMPDIR` (`launch::environment`), confined or
    // not: a missing one made an unconfined agent's temporary files fail.
    let tmp = temp_dir(opts, &cfg.name);
    let _ = std::fs::create_dir_all(&tmp);
    if cfg.lane.sandbox == Confinement::Off {
        return Confined {
            write: None,
            status,
            env: Vec::new(),
        };
    }
    let (paths, mut env) = git_paths(opts, repo, worktree, handle);
    env.push(("TMPDIR".into(), tmp.display().to_string()));
    let mut write = vec![worktree.to_path_buf(), tmp];
    write.extend(paths);
    write.extend(DEVICES.iter().map(PathBuf::from));
    write.extend(lane_writable(cfg, Some(&opts.home)));
    write.retain(|p| crate::sandbox::nameable(p));
    write.dedup();
    Confined {
        write: Some(write),
        status,
        env,
    }
}

/// The lane file's `writable` paths, `~/` under `home`.
fn lane_writable(cfg: &LaneConfig, home: Option<&Path>) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for w in &cfg.lane.writable {
        let w = w.get_ref();
        match (w.strip_prefix("~/"), home) {
            (Some(rest), Some(h)) => out.push(h.join(rest)),
            (None, _) => out.push(PathBuf::from(w)),
            (Some(_), None) => {}
        }
    }
    out
}

/// The git paths a worktree's commits write: its administrative directory, its
/// private object directory, and its task branch's directories of refs and reflogs
/// (created when missing, so a packed branch can still be updated as a loose ref);
/// with the variables that point the agent's git at its object directory.
fn git_paths(
    opts: &FleetOptions,
    repo: &Path,
    worktree: &Path,
    handle: &str,
) -> (Vec<PathBuf>, Vec<(String, String)>) {
    let Ok(git) = crate::git::Git::open(repo, crate::git::Runner::new(opts.vars.clone())) else {
        return (Vec::new(), Vec::new());
    };
    let common = git.common_dir().to_path_buf();
    let mut out = Vec::new();
    let mut env = Vec::new();
    if let Some(admin) = admin_dir(&common, worktree) {
        out.push(admin);
    }
    match git.lend_objects(worktree) {
        Ok(Some(dir)) => {
            env.push(("GIT_OBJECT_DIRECTORY".into(), dir.display().to_string()));
            env.push((
                "GIT_ALTERNATE_OBJECT_DIRECTORIES".into(),
                common.join("objects").display().to_string(),
            ));
            out.push(dir);
        }
        // No object directory of its own: its commits fail (said by git), history
        // stays safe.
        Ok(None) => {}
        Err(e) => tracing::warn!("{e}; the agent cannot commit"),
    }
    match git.task_ref_dirs(&crate::git::task_branch(handle)) {
        Ok(dirs) => out.extend(dirs),
        Err(e) => tracing::warn!("{e}; the agent cannot commit"),
    }
    (out, env)
}

pub use crate::git::admin_dir;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_admin_dir_is_the_one_whose_gitdir_names_the_worktree() {
        let d = tempfile::tempdir().unwrap();
        let common = d.path().join("repo/.git");
        let wt = d.path().join("wt");
        let other = d.path().join("other");
        for w in [&wt, &other] {
            std::fs::create_dir_all(w).unwrap();
        }
        for (name, w) in [("wt", &wt), ("other", &other)] {
            let a = common.join("worktrees").join(name);
            std::fs::create_dir_all(&a).unwrap();
            std::fs::write(a.join("gitdir"), format!("{}\n", w.join(".git").display())).unwrap();
        }
        assert_eq!(admin_dir(&common, &wt), Some(common.join("worktrees/wt")));
        // Two claimants of one worktree: nothing is granted.
        let a = common.join("worktrees/forged");
        std::fs::create_dir_all(&a).unwrap();
        std::fs::write(a.join("gitdir"), format!("{}\n", wt.join(".git").display())).unwrap();
        assert_eq!(admin_dir(&common, &wt), None);
    }
}
