//! Where and with what an agent is started: its worktree (prepared at claim time);
//! the profile's argv (or its resume argv) expanded, with the Claude Code hook
//! settings when the profile supports them, all under `spice agent-shim` so no process
//! of the agent outlives the supervisor; the environment, which is exactly what is
//! built here (nothing of the supervisor's leaks in); and whom its steering is for.

use super::FleetOptions;
use crate::config::fleet::LaneConfig;
use crate::config::profile::{expand_argv, Hook, Placeholder};
use crate::error::{Error, Result};
use crate::store::{Authority, Claim, Holder, Target};
use serde_json::json;
use std::path::{Path, PathBuf};

/// The argv to spawn under the PTY for a session (`resume`: the profile's resume
/// template), with `program` the resolved agent binary.
pub(super) fn argv(
    cfg: &LaneConfig,
    opts: &FleetOptions,
    program: &Path,
    resume: bool,
    value: &dyn Fn(Placeholder) -> Option<String>,
    confined: &super::confine::Confined,
) -> Vec<String> {
    let template = match (&cfg.profile.resume, resume) {
        (Some(r), true) => r,
        _ => &cfg.profile.command,
    };
    let mut argv = expand_argv(template, value);
    if argv
        .first()
        .is_some_and(|a| a == "{spice}" || !a.contains('/'))
    {
        argv[0] = program.display().to_string();
    }
    if cfg.profile.hooks.contains(&Hook::ClaudePostToolUse) {
        argv.splice(
            1..1,
            ["--settings".to_string(), claude_settings(&opts.spice)],
        );
    }
    // Under the shim, no process of the agent outlives the supervisor; the shim
    // enters the sandbox before it starts the agent, so all the agent starts is in it.
    let mut shim = vec![
        opts.spice.display().to_string(),
        "agent-shim".into(),
        "--parent".into(),
        std::process::id().to_string(),
    ];
    if let Some(write) = &confined.write {
        shim.push("--confine".into());
        for p in write {
            shim.push("--write".into());
            shim.push(p.display().to_string());
        }
    }
    shim.push("--".into());
    argv.splice(0..0, shim);
    argv
}

/// The agent's whole environment: spice's variables and the redirector, then the
/// profile's `env`, then the lane's.
pub(super) fn environment(
    cfg: &LaneConfig,
    opts: &FleetOptions,
    base: &str,
    session: &str,
    task_id: &str,
) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = vec![
        ("PATH".into(), opts.path.clone()),
        ("HOME".into(), agent_home(cfg, opts).display().to_string()),
        ("TERM".into(), "xterm-256color".into()),
        ("SPICE_HOME".into(), opts.state_dir.display().to_string()),
        ("SPICE_LANE".into(), cfg.name.clone()),
        ("SPICE_SESSION".into(), session.to_string()),
        ("SPICE_TASK".into(), task_id.to_string()),
        // Where `task phase --done` merges (and pushes): the running lane's policy,
        // not whatever copy of the lane file the task's worktree holds.
        ("SPICE_BASE".into(), base.to_string()),
        // The lane's private temporary directory: a confined agent writes no other.
        (
            "TMPDIR".into(),
            super::confine::temp_dir(opts, &cfg.name)
                .display()
                .to_string(),
        ),
        ("BASH_ENV".into(), opts.bash_env.display().to_string()),
        // Where the agent's `spice task phase --done` asks the supervisor to land it.
        (
            super::desk::VAR.into(),
            super::desk::socket(&opts.state_dir).display().to_string(),
        ),
        // A `bash -c` whose stdin is a socket (Claude Code's Bash tool) and whose
        // SHLVL says top level takes itself for a command run by rshd: it reads
        // ~/.bashrc and never BASH_ENV. Saying we run under a shell keeps the
        // redirector working.
        ("SHLVL".into(), "1".into()),
        // One deeper than this supervisor: a `spice fleet up` the agent runs is
        // refused past the maximum (`agent::depth`).
        (
            crate::agent::depth::VAR.into(),
            crate::agent::depth::child(),
        ),
    ];
    if let Some(remote) = &cfg.lane.push {
        env.push(("SPICE_PUSH".into(), remote.clone()));
    }
    if cfg.profile.deliver == crate::config::profile::Deliver::Message {
        env.push((
            crate::steer::exec::DELIVERY_VAR.into(),
            crate::steer::exec::DELIVER_MESSAGE.into(),
        ));
    }
    env.extend(cfg.profile.env.iter().map(|(k, v)| (k.clone(), v.clone())));
    env.extend(
        cfg.lane
            .env
            .iter()
            .map(|(k, v)| (k.get_ref().clone(), v.clone())),
    );
    env
}

/// Where the built-in scripted demo agent keeps its fake home (its Claude-format
/// transcripts): inside the state directory, never the operator's real `~/.claude`.
pub const DEMO_HOME: &str = "demo-home";

/// The HOME spice gives a lane's agent (before the profile's and lane's `[env]`):
/// the operator's, except for the scripted demo agent (the built-in `demo` profile or
/// any copy of it), whose fake transcripts must never land in the real `~/.claude`.
fn agent_home(cfg: &LaneConfig, opts: &FleetOptions) -> std::path::PathBuf {
    if cfg.profile.runs_demo_agent() {
        opts.state_dir.join(DEMO_HOME)
    } else {
        opts.home.clone()
    }
}

/// The HOME an environment built by [`environment`] gives the agent: the last one
/// set, as the profile's and then the lane's `[env]` override spice's.
pub(super) fn home(env: &[(String, String)]) -> Option<String> {
    env.iter()
        .rev()
        .find(|(k, _)| k == "HOME")
        .map(|(_, v)| v.clone())
}

/// `--settings` for Claude Code: a PostToolUse hook that shows pending steering.
fn claude_settings(spice: &Path) -> String {
    let command = format!(
        "'{}' hook claude-post-tool-use",
        spice.display().to_string().replace('\'', r"'\''")
    );
    json!({ "hooks": { "PostToolUse": [
        { "matcher": "*", "hooks": [{ "type": "command", "command": command }] }
    ]}})
    .to_string()
}

/// Whom a session's steering is addressed to: the session, the lane, the worktree
/// (as `spice exec` inside the worktree sees it).
pub(super) fn targets(session: &str, lane: &str, worktree: &Path) -> Vec<Target> {
    crate::store::agent_targets(Some(session), Some(lane), Some(worktree))
}

/// Where the lane keeps the worktree of the task `handle`.
pub(super) fn worktree_path(cfg: &LaneConfig, opts: &FleetOptions, handle: &str) -> PathBuf {
    cfg.lane
        .worktrees
        .clone()
        .unwrap_or_else(|| opts.state_dir.join("worktrees").join(&cfg.name))
        .join(handle)
}

/// Creates or fast-forwards the task's worktree (git boundary 1: the lane's worktrees
/// directory, branch `spice/<handle>` from `base`) and records it on the claim.
#[allow(clippy::too_many_arguments)]
pub(super) fn worktree(
    store: &mut dyn Authority,
    git: &crate::git::Git,
    cfg: &LaneConfig,
    opts: &FleetOptions,
    base: &str,
    claim: &Claim,
    holder: &Holder,
) -> Result<PathBuf> {
    let path = worktree_path(cfg, opts, &claim.handle);
    if let Some(root) = path.parent() {
        std::fs::create_dir_all(root).map_err(|source| Error::Io {
            context: format!("failed to create {}", root.display()),
            source,
        })?;
    }
    let branch = crate::git::task_branch(&claim.handle);
    let wt = git.prepare_worktree(base, &branch, &path)?;
    store.set_claim_worktree(&claim.task_id, holder, &wt.path.display().to_string())?;
    Ok(wt.path)
}
