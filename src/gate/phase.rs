//! The gate before a phase lands: every rule over what the task branch changed since
//! it left `base`, under the rules `base` carries (a branch cannot loosen its own
//! gate), and the bypasses seen on the way: commits that never went through the
//! pre-commit gate (`--no-verify`, or rewritten by a rebase), and a `[gate]` the
//! branch changed.

use super::config::{self, GateConfig};
use super::scan::{git, Repo, Scope};
use super::{hooks, Options, Report};
use std::io::Write;
use std::path::Path;

/// A way round the gate seen on a task branch.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Bypass {
    /// `unverified` (a commit whose tree the pre-commit gate never passed) or
    /// `config` (the branch changed `spice.toml`'s `[gate]`).
    pub kind: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
    pub detail: String,
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct PhaseGate {
    pub report: Report,
    pub bypasses: Vec<Bypass>,
}

/// The directory of what the pre-commit gate writes (`latches.json`, `verified`,
/// the releases waiting for their commit): written by the operator's own hooks and,
/// for a lane's agent, by its supervisor ([`super::agent`]); no confined agent may
/// write it (`fleet::confine`).
pub fn gate_dir(common_dir: &Path) -> std::path::PathBuf {
    common_dir.join("spice").join("gate")
}

/// Where the pre-commit gate records the commits-to-be it passed, one a line: the
/// first parent (`-` for a first commit) and the tree. (A line of a tree alone is
/// from before parents were recorded, and still counts for any commit of it.)
fn verified_file(common_dir: &Path) -> std::path::PathBuf {
    gate_dir(common_dir).join("verified")
}

/// Where it recorded them before the gate had a directory: still read.
fn legacy_verified_file(common_dir: &Path) -> std::path::PathBuf {
    common_dir.join("spice").join("gate-verified")
}

/// Called by the operator's pre-commit hook after a clean run: the index about to
/// be committed on `HEAD` passed the gate.
pub fn record_verified(repo: &Repo) -> Result<(), String> {
    let tree = git(&repo.root, &["write-tree"])?;
    let tree = String::from_utf8_lossy(&tree).trim().to_string();
    append_verified(&repo.common_dir, head(repo).as_deref(), &tree)
}

/// The commit `HEAD` names, `None` before a first commit.
pub fn head(repo: &Repo) -> Option<String> {
    let out = repo
        .git(&["rev-parse", "--verify", "--quiet", "HEAD^{commit}"])
        .ok()?;
    Some(String::from_utf8_lossy(&out).trim().to_string())
}

/// Records that a commit of `tree` on `parent` passed the pre-commit gate.
pub fn append_verified(common_dir: &Path, parent: Option<&str>, tree: &str) -> Result<(), String> {
    let path = verified_file(common_dir);
    std::fs::create_dir_all(path.parent().expect("has a parent"))
        .map_err(|e| format!("{}: {e}", path.display()))?;
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    writeln!(f, "{} {tree}", parent.unwrap_or("-")).map_err(|e| format!("{}: {e}", path.display()))
}

/// The gate configuration `rev` carries (none when it has no `spice.toml`): what a
/// branch is judged by, never the branch's own copy.
pub fn config_of(repo: &Repo, rev: &str) -> Result<GateConfig, String> {
    let shown = format!("{} (at {rev})", config::FILE);
    match config_at(repo, rev) {
        Some(t) => config::parse(Path::new(&shown), &t).map_err(|errs| {
            let all: Vec<String> = errs.iter().map(|e| e.to_string()).collect();
            all.join("; ")
        }),
        None => Ok(GateConfig::empty()),
    }
}

/// The worktree `wt` of the repository whose common git directory is `common`, with
/// git pointed at the worktree's git directory as the repository knows it (a linked
/// worktree's own, else the main work tree's: the common one itself), never at what
/// `wt/.git` names (the agent's to write).
pub fn pinned(wt: &Path, common: &Path) -> Result<Repo, String> {
    let found = crate::git::admin_dir(common, wt).or_else(|| {
        let main = std::fs::canonicalize(wt).ok()
            == std::fs::canonicalize(common)
                .ok()
                .and_then(|c| c.parent().map(Path::to_path_buf));
        main.then(|| common.to_path_buf())
    });
    let pin = found.ok_or_else(|| {
        format!(
            "{} is gone, or no longer a worktree of {}",
            wt.display(),
            common.display()
        )
    })?;
    Ok(Repo {
        root: wt.to_path_buf(),
        common_dir: common.to_path_buf(),
        pin: Some(pin),
        index: None,
    })
}

/// What the pre-commit gate recorded as passed: `PARENT TREE` lines, and `TREE`
/// lines from before parents were recorded.
struct Passed(std::collections::HashSet<String>);

impl Passed {
    fn load(common_dir: &Path) -> Passed {
        let files = [verified_file(common_dir), legacy_verified_file(common_dir)];
        Passed(
            files
                .iter()
                .flat_map(|f| {
                    let text = std::fs::read_to_string(f).unwrap_or_default();
                    text.lines().map(str::to_string).collect::<Vec<_>>()
                })
                .collect(),
        )
    }

    /// Whether a commit of `tree` on `parent` (`-`: none) passed: as itself, or as an
    /// amendment: the gate judged `tree` on the commit `X` it amends (then `HEAD`),
    /// whose own parent is `parent` and which passed itself, so every change from
    /// `parent` to `tree` was judged in one run or the other.
    fn holds(&self, repo: &Repo, parent: &str, tree: &str) -> bool {
        if self.0.contains(tree) || self.0.contains(&format!("{parent} {tree}")) {
            return true;
        }
        let suffix = format!(" {tree}");
        self.0
            .iter()
            .filter_map(|l| l.strip_suffix(suffix.as_str()))
            .filter(|x| *x != "-")
            .any(|x| {
                parent_and_tree(repo, x).is_some_and(|(x_parent, x_tree)| {
                    x_parent == parent
                        && (self.0.contains(&x_tree)
                            || self.0.contains(&format!("{x_parent} {x_tree}")))
                })
            })
    }
}

/// The (first parent or `-`, tree) of the commit `rev` names, `None` when it names none.
pub(super) fn parent_and_tree(repo: &Repo, rev: &str) -> Option<(String, String)> {
    let out = repo.git(&["log", "-1", "--format=%T %P", rev, "--"]).ok()?;
    let text = String::from_utf8_lossy(&out);
    let mut words = text.trim().split(' ');
    let tree = words.next().filter(|t| !t.is_empty())?.to_string();
    let parent = words.next().filter(|p| !p.is_empty()).unwrap_or("-");
    Some((parent.to_string(), tree))
}

/// Each commit of `base..branch` (merges aside, newest first) with whether the
/// pre-commit gate passed it; `None` when the repository's hooks do not run the gate
/// (nothing is recorded as passed then, so nothing can be told apart).
pub fn verdicts(
    repo: &Repo,
    base: &str,
    branch: &str,
) -> Result<Option<Vec<(String, bool)>>, String> {
    let pre_commit = hooks::dir(repo)?.join("pre-commit");
    let installed = std::fs::read_to_string(pre_commit).is_ok_and(|t| t.contains(hooks::MARK));
    if !installed {
        return Ok(None);
    }
    let passed = Passed::load(&repo.common_dir);
    let log = repo.git(&[
        "log",
        "--no-merges",
        "--format=%H %T %P",
        &format!("{base}..{branch}"),
    ])?;
    let mut out = Vec::new();
    for line in String::from_utf8_lossy(&log).lines() {
        let mut words = line.split(' ');
        let (Some(commit), Some(tree)) = (words.next(), words.next()) else {
            continue;
        };
        let parent = words.next().filter(|p| !p.is_empty()).unwrap_or("-");
        out.push((commit.to_string(), passed.holds(repo, parent, tree)));
    }
    Ok(Some(out))
}

/// `rev:spice.toml`'s text, `None` when it has none.
fn config_at(repo: &Repo, rev: &str) -> Option<String> {
    repo.git(&["show", &format!("{rev}:{}", config::FILE)])
        .ok()
        .map(|b| String::from_utf8_lossy(&b).into_owned())
}

fn gate_section(text: Option<&str>) -> Option<toml::Value> {
    let v: toml::Table = toml::from_str(text?).ok()?;
    v.get("gate").cloned()
}

/// The gate over `branch`'s changes since it left `base`, in the worktree `wt` of the
/// repository whose common git directory is `common`: git there is pointed at the
/// worktree's git directory as the repository knows it, never at what `wt/.git`
/// names (the agent's to write).
pub fn check(
    wt: &Path,
    common: &Path,
    base: &str,
    branch: &str,
    opts: &Options,
) -> Result<PhaseGate, String> {
    let repo = pinned(wt, common)?;
    let base_text = config_at(&repo, base);
    let cfg = config_of(&repo, base)?;
    let opts = Options {
        record: false,
        ..opts.clone()
    };
    let report = super::run(
        &repo,
        &cfg,
        &Scope::Branch {
            base: base.to_string(),
            tip: branch.to_string(),
        },
        &opts,
    )?;
    let mut bypasses = Vec::new();
    let branch_text = config_at(&repo, branch);
    if gate_section(base_text.as_deref()) != gate_section(branch_text.as_deref()) {
        bypasses.push(Bypass {
            kind: "config".into(),
            commit: None,
            detail: format!(
                "the branch changed {}'s [gate]; it was checked under {base}'s",
                config::FILE
            ),
        });
    }
    let judged = verdicts(&repo, base, branch)?.unwrap_or_default();
    for (commit, _) in judged.into_iter().filter(|(_, passed)| !passed) {
        bypasses.push(Bypass {
            kind: "unverified".into(),
            detail: format!(
                "commit {} never passed the pre-commit gate (committed with --no-verify, or rewritten)",
                &commit[..commit.len().min(12)]
            ),
            commit: Some(commit),
        });
    }
    Ok(PhaseGate { report, bypasses })
}
