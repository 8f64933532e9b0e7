//! `spice.toml`'s `[hooks]` section: the repository's stage hooks, parsed as strictly
//! as `[gate]` (unknown keys, wrong types, an empty argv, an absurd timeout are errors
//! located `file:line:col`, every one reported before anything runs).
//!
//! ```toml
//! [hooks]
//! on_claim = ["./scripts/claim.sh"]        # argv, run in the task's worktree
//! on_phase_done = ["make", "check"]
//! timeout = "5m"                           # each run's limit (default 5m)
//! [hooks.timeouts]                         # a stage's own limit
//! on_phase_done = "20m"
//! ```
//!
//! The fleet reads the `spice.toml` that `base` carries (`git show base:spice.toml`),
//! never a task branch's copy, so a branch cannot switch off its own hooks.

use crate::config::repo::FILE;
use crate::config::ConfigError;
use serde::Deserialize;
use std::path::Path;
use std::time::Duration;
use toml::Spanned;

/// A stage hook that runs longer is stopped (with its process group) and fails.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(300);
/// The longest timeout a hook may be given: anything longer is a typo.
pub const MAX_TIMEOUT: Duration = Duration::from_secs(24 * 3600);

/// The fleet's boundaries at which a repository may run its own command.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Stage {
    /// A task was claimed and its worktree prepared; the agent is not started yet.
    OnClaim,
    /// An agent session is about to start in the worktree.
    OnLaunch,
    /// `task phase --done`: after the gate passed, before the branch merges.
    OnPhaseDone,
    /// The claim was let go (the phase completed, or the lane handed it back).
    OnRelease,
}

impl Stage {
    pub const ALL: [Stage; 4] = [
        Stage::OnClaim,
        Stage::OnLaunch,
        Stage::OnPhaseDone,
        Stage::OnRelease,
    ];

    /// Its key in `[hooks]`.
    pub fn key(self) -> &'static str {
        match self {
            Stage::OnClaim => "on_claim",
            Stage::OnLaunch => "on_launch",
            Stage::OnPhaseDone => "on_phase_done",
            Stage::OnRelease => "on_release",
        }
    }
}

impl std::fmt::Display for Stage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.key())
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct HooksToml {
    on_claim: Option<Spanned<Vec<String>>>,
    on_launch: Option<Spanned<Vec<String>>>,
    on_phase_done: Option<Spanned<Vec<String>>>,
    on_release: Option<Spanned<Vec<String>>>,
    timeout: Option<Spanned<String>>,
    timeouts: Option<TimeoutsToml>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TimeoutsToml {
    on_claim: Option<Spanned<String>>,
    on_launch: Option<Spanned<String>>,
    on_phase_done: Option<Spanned<String>>,
    on_release: Option<Spanned<String>>,
}

/// One stage's command.
#[derive(Debug, Clone, PartialEq)]
pub struct Hook {
    pub stage: Stage,
    /// Never empty; its program names something (relative paths are the worktree's).
    pub argv: Vec<String>,
    pub timeout: Duration,
}

/// The hooks of a repository (none: no `spice.toml`, or no `[hooks]`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HooksConfig {
    pub hooks: Vec<Hook>,
    /// Where it was read from, as shown in errors (`spice.toml (at main)`).
    pub source: Option<String>,
}

impl HooksConfig {
    pub fn get(&self, stage: Stage) -> Option<&Hook> {
        self.hooks.iter().find(|h| h.stage == stage)
    }

    pub fn is_empty(&self) -> bool {
        self.hooks.is_empty()
    }
}

/// Parses the text of a `spice.toml` shown as `file`, collecting every problem of
/// its `[hooks]`.
pub fn parse(file: &Path, text: &str) -> Result<HooksConfig, Vec<ConfigError>> {
    let mut cfg = HooksConfig {
        hooks: Vec::new(),
        source: Some(file.display().to_string()),
    };
    let Some(h) = crate::config::repo::section::<HooksToml>(file, text, "hooks")? else {
        return Ok(cfg);
    };
    let mut errs = Vec::new();
    let mut at = |offset: usize, why: String| errs.push(ConfigError::at(file, text, offset, why));
    let default = match &h.timeout {
        Some(t) => timeout(t, "timeout", &mut at).unwrap_or(DEFAULT_TIMEOUT),
        None => DEFAULT_TIMEOUT,
    };
    let t = h.timeouts.as_ref();
    let stages = [
        (
            Stage::OnClaim,
            &h.on_claim,
            t.and_then(|t| t.on_claim.as_ref()),
        ),
        (
            Stage::OnLaunch,
            &h.on_launch,
            t.and_then(|t| t.on_launch.as_ref()),
        ),
        (
            Stage::OnPhaseDone,
            &h.on_phase_done,
            t.and_then(|t| t.on_phase_done.as_ref()),
        ),
        (
            Stage::OnRelease,
            &h.on_release,
            t.and_then(|t| t.on_release.as_ref()),
        ),
    ];
    for (stage, argv, own) in stages {
        let limit = match own {
            Some(t) => timeout(t, &format!("timeouts.{stage}"), &mut at).unwrap_or(default),
            None => default,
        };
        let Some(argv) = argv else { continue };
        let list = argv.get_ref();
        match list.first() {
            None => at(
                argv.span().start,
                format!("{stage}: an empty command (name a program, e.g. [\"./hook.sh\"])"),
            ),
            Some(p) if p.trim().is_empty() => at(
                argv.span().start,
                format!("{stage}: the program (the first word) is empty"),
            ),
            Some(_) => cfg.hooks.push(Hook {
                stage,
                argv: list.clone(),
                timeout: limit,
            }),
        }
    }
    if errs.is_empty() {
        Ok(cfg)
    } else {
        errs.sort_by_key(|e| (e.line, e.col));
        Err(errs)
    }
}

fn timeout(
    t: &Spanned<String>,
    field: &str,
    at: &mut impl FnMut(usize, String),
) -> Option<Duration> {
    match crate::when::parse_duration(t.get_ref()) {
        Ok(d) if d > MAX_TIMEOUT => {
            at(
                t.span().start,
                format!("{field}: {} exceeds the maximum of 24h", t.get_ref()),
            );
            None
        }
        Ok(d) => Some(d),
        Err(e) => {
            at(t.span().start, format!("{field}: {e}"));
            None
        }
    }
}

/// The hooks `rev` carries in the repository at `repo`: its `spice.toml` read with
/// `git show`, shown in errors as `spice.toml (at REV)`. A `rev` without the file has
/// no hooks; a `rev` git cannot resolve is an error (the hooks would be skipped).
pub fn at_rev(repo: &Path, rev: &str) -> Result<HooksConfig, Vec<ConfigError>> {
    use crate::config::repo::AtRev;
    match crate::config::repo::at_rev(repo, rev)? {
        AtRev::NoCommit => Err(vec![ConfigError::whole(
            Path::new(&format!("{FILE} (at {rev})")),
            format!("cannot read {rev}: it names no commit"),
        )]),
        AtRev::NoFile => Ok(HooksConfig::default()),
        AtRev::Text { shown, text } => parse(Path::new(&shown), &text),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn errors(text: &str) -> Vec<String> {
        parse(Path::new("spice.toml"), text)
            .err()
            .unwrap_or_default()
            .iter()
            .map(|e| e.to_string())
            .collect()
    }

    #[test]
    fn stages_and_timeouts_compile() {
        let cfg = parse(
            Path::new("spice.toml"),
            r#"
[gate]
jitter = 0.0
[testbed]
paths = ["target"]
[hooks]
on_claim = ["./claim.sh", "--fast"]
on_phase_done = ["make", "check"]
timeout = "30s"
[hooks.timeouts]
on_phase_done = "20m"
on_release = "1s"
"#,
        )
        .unwrap();
        let claim = cfg.get(Stage::OnClaim).unwrap();
        assert_eq!(claim.argv, ["./claim.sh", "--fast"]);
        assert_eq!(claim.timeout, Duration::from_secs(30));
        let done = cfg.get(Stage::OnPhaseDone).unwrap();
        assert_eq!(done.timeout, Duration::from_secs(20 * 60));
        assert!(cfg.get(Stage::OnLaunch).is_none());
        assert!(cfg.get(Stage::OnRelease).is_none());
        let none = parse(Path::new("spice.toml"), "[gate]\njitter = 0.0\n").unwrap();
        assert!(none.is_empty());
        let default = parse(Path::new("spice.toml"), "[hooks]\non_launch = [\"x\"]\n").unwrap();
        assert_eq!(default.hooks[0].timeout, DEFAULT_TIMEOUT);
    }

    #[test]
    fn every_problem_is_located() {
        let e = errors(
            r#"[hooks]
on_claim = []
on_launch = ["", "x"]
timeout = "forever"
[hooks.timeouts]
on_release = "0s"
on_phase_done = "100h"
"#,
        );
        assert_eq!(e.len(), 5, "{e:?}");
        assert!(
            e[0].starts_with("spice.toml:2:12: on_claim: an empty command"),
            "{e:?}"
        );
        assert!(
            e[1].starts_with("spice.toml:3:13: on_launch: the program"),
            "{e:?}"
        );
        assert!(
            e[2].starts_with("spice.toml:4:11: timeout: invalid duration"),
            "{e:?}"
        );
        assert!(
            e[3].starts_with("spice.toml:6:14: timeouts.on_release:"),
            "{e:?}"
        );
        assert!(
            e[4].starts_with("spice.toml:7:17: timeouts.on_phase_done: 100h exceeds"),
            "{e:?}"
        );
        let e = errors("[hooks]\non_clam = [\"x\"]\n");
        assert!(
            e[0].starts_with("spice.toml:2:1: unknown field `on_clam`"),
            "{e:?}"
        );
        let e = errors("[hooks]\non_claim = \"./claim.sh\"\n");
        assert!(e[0].starts_with("spice.toml:2:12: invalid type"), "{e:?}");
        let e = errors("[hooks.timeouts]\non_lunch = \"1s\"\n");
        assert!(e[0].contains("unknown field `on_lunch`"), "{e:?}");
        let e = errors("[hook]\non_claim = [\"x\"]\n");
        assert!(
            e[0].starts_with("spice.toml:1:2: unknown section `hook`"),
            "{e:?}"
        );
    }
}
