//! `lanes/NAME.toml`: one agent seat. The name of the file is the name of the lane.
//!
//! Parsing is strict (unknown keys, wrong types and bad values are errors located
//! `file:line:col`). The checks here look at one file only; rules across files (the
//! profile exists, no two lanes differ only in case) belong to [`super::fleet`].
//! Invariant: a [`Timing`] returned from [`check`] always has `renew < lease`.

use super::{check_env, ConfigError};
use crate::error::{Error, Result};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;
use toml::Spanned;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Lane {
    /// The profile (agent CLI) this lane runs; spanned so an unknown one can be located.
    pub profile: Spanned<String>,
    /// The repository worked in; default: the one `fleet up` runs in.
    pub repo: Option<PathBuf>,
    /// The branch task branches start from.
    pub base: Option<String>,
    /// Only tasks of these projects (empty: any).
    #[serde(default)]
    pub projects: Vec<String>,
    /// Only tasks in these phases (empty: any).
    #[serde(default)]
    pub phases: Vec<String>,
    /// Where this lane's worktrees go; default: under the state directory.
    pub worktrees: Option<PathBuf>,
    /// Lease length, e.g. "30m"; default [`crate::store::DEFAULT_LEASE`].
    pub lease: Option<Spanned<String>>,
    /// Renewal interval, e.g. "5m"; default a third of the lease.
    pub renew: Option<Spanned<String>>,
    /// How long an agent may run without writing its transcript before the lane says
    /// so (it may be waiting at a prompt or dialog), e.g. "2m"; default 60 s.
    pub start_timeout: Option<Spanned<String>>,
    /// Added to the agent's environment after the profile's (literal values).
    #[serde(default)]
    pub env: BTreeMap<Spanned<String>, String>,
    /// The model passed to the agent through the profile's `{model}` placeholder.
    pub model: Option<String>,
    /// The remote `base` is pushed to after each merge at phase completion; nothing
    /// is pushed without it.
    pub push: Option<String>,
    #[serde(default = "yes")]
    pub enabled: bool,
}

fn yes() -> bool {
    true
}

/// How long a claim is leased for and how often it is renewed (`renew < lease`), and
/// how long an agent may take to write its transcript.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timing {
    pub lease: Duration,
    pub renew: Duration,
    pub start_timeout: Duration,
}

/// The default `start_timeout`.
pub const START_TIMEOUT: Duration = Duration::from_secs(60);

/// Words a lane may not be called, compared without case: `spice steer NAME` resolves a
/// lane before anything else, so a lane named like a target kind would read ambiguously
/// next to `lane:`, `worktree:` and `session:` targets.
pub const RESERVED_LANE_NAMES: [&str; 3] = ["lane", "session", "worktree"];

/// Lane and profile names become file, branch and directory names: keep them plain.
/// Returns the reason a name is refused; `kind` is "lane" or "profile".
pub fn check_name(kind: &str, name: &str) -> std::result::Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_')
        && !name.starts_with('-');
    if ok {
        Ok(())
    } else {
        Err(format!(
            "invalid {kind} name '{name}': use letters, digits, '-' and '_', not starting with '-' (at most 64)"
        ))
    }
}

/// The character rules of [`check_name`] for a lane, as a crate error.
pub fn check_lane_name(name: &str) -> Result<()> {
    check_name("lane", name).map_err(Error::input)
}

/// Why `name` (already plain) cannot be a lane: a reserved word, or a session id
/// look-alike (a stamp or a uuid), which `spice steer` would take for the lane.
pub fn reserved_lane_name(name: &str) -> Option<String> {
    let lower = name.to_ascii_lowercase();
    if RESERVED_LANE_NAMES.contains(&lower.as_str()) {
        Some(format!(
            "lane name '{name}' is reserved (it reads as a steering target kind)"
        ))
    } else if crate::stamp::is_stamp(name) || crate::task::looks_like_uuid(name) {
        Some(format!(
            "lane name '{name}' looks like a session id (a stamp or uuid); steering targets would be ambiguous"
        ))
    } else {
        None
    }
}

/// Reads `dir/NAME.toml`; the first problem found is the error.
pub fn load(dir: &Path, name: &str) -> Result<Lane> {
    check_lane_name(name)?;
    let path = dir.join(format!("{name}.toml"));
    let text = std::fs::read_to_string(&path).map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            Error::input(format!(
                "unknown lane '{name}': {} does not exist",
                path.display()
            ))
        } else {
            Error::Io {
                context: format!("failed to read {}", path.display()),
                source: e,
            }
        }
    })?;
    parse(&path, &text)
}

/// Parses and checks one lane file; the first problem found is the error.
pub fn parse(path: &Path, text: &str) -> Result<Lane> {
    check(path, text)
        .map(|(lane, _)| lane)
        .map_err(|mut errors| errors.swap_remove(0).into())
}

/// Parses one lane file and checks everything that needs no other file: durations
/// (`renew` shorter than `lease`) and `env` names. Every problem is returned.
pub fn check(path: &Path, text: &str) -> std::result::Result<(Lane, Timing), Vec<ConfigError>> {
    let lane: Lane =
        toml::from_str(text).map_err(|e| vec![ConfigError::from_toml(path, text, &e)])?;
    let mut errors = check_env(path, text, &lane.env);
    let mut duration = |field: &str, value: &Option<Spanned<String>>| {
        let v = value.as_ref()?;
        match crate::when::parse_duration(v.get_ref()) {
            Ok(d) => Some(d),
            Err(e) => {
                let reason = format!("field '{field}': {e}");
                errors.push(ConfigError::at(path, text, v.span().start, reason));
                None
            }
        }
    };
    let lease = duration("lease", &lane.lease);
    let renew = duration("renew", &lane.renew);
    let start_timeout = duration("start_timeout", &lane.start_timeout).unwrap_or(START_TIMEOUT);
    let lease_bad = lane.lease.is_some() && lease.is_none();
    let lease = lease.unwrap_or(crate::store::DEFAULT_LEASE);
    // A renewal at a third of the lease leaves two more chances before it lapses.
    let renew = match (renew, &lane.renew) {
        (Some(r), Some(at)) if !lease_bad && r >= lease => {
            let default = if lane.lease.is_none() {
                ", the default"
            } else {
                ""
            };
            errors.push(ConfigError::at(
                path,
                text,
                at.span().start,
                format!(
                    "field 'renew': {} must be shorter than the lease ({}{default})",
                    at.get_ref().trim(),
                    humantime::format_duration(lease)
                ),
            ));
            r
        }
        (Some(r), _) => r,
        (None, _) => lease / 3,
    };
    if errors.is_empty() {
        Ok((
            lane,
            Timing {
                lease,
                renew,
                start_timeout,
            },
        ))
    } else {
        Err(errors)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_key_is_located() {
        let e = parse(
            Path::new("lanes/a.toml"),
            "profile = \"demo\"\nprojetcs = [\"x\"]\n",
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.starts_with("lanes/a.toml:2:1: unknown field `projetcs`"),
            "{e}"
        );
        assert!(!e.contains('\n'));
    }

    #[test]
    fn wrong_type_and_bad_duration() {
        let e = parse(
            Path::new("l.toml"),
            "profile = \"demo\"\nenabled = \"yes\"\n",
        )
        .unwrap_err()
        .to_string();
        assert!(e.starts_with("l.toml:2:11:"), "{e}");
        let e = parse(
            Path::new("l.toml"),
            "profile = \"demo\"\nlease = \"soon\"\n",
        )
        .unwrap_err()
        .to_string();
        assert!(e.starts_with("l.toml:2:9: field 'lease'"), "{e}");
        let e = check(
            Path::new("l.toml"),
            "profile = \"demo\"\nstart_timeout = \"later\"\n",
        )
        .unwrap_err();
        assert!(
            e[0].to_string()
                .starts_with("l.toml:2:17: field 'start_timeout'"),
            "{}",
            e[0]
        );
        let (_, t) = check(Path::new("l.toml"), "profile = \"demo\"\n").unwrap();
        assert_eq!(t.start_timeout, START_TIMEOUT);
    }

    #[test]
    fn filters_parse() {
        let l = parse(
            Path::new("l.toml"),
            "profile = \"demo\"\nprojects = [\"a\"]\nphases = [\"todo\"]\n",
        )
        .unwrap();
        assert_eq!(l.projects, ["a"]);
        assert!(l.enabled);
        assert!(check_lane_name("../x").is_err());
        assert!(check_lane_name("-x").is_err());
        assert!(check_lane_name("a b").is_err());
    }

    #[test]
    fn timing_defaults_and_order() {
        let (_, t) = check(Path::new("l.toml"), "profile = \"demo\"\n").unwrap();
        assert_eq!(t.lease, crate::store::DEFAULT_LEASE);
        assert_eq!(t.renew, crate::store::DEFAULT_LEASE / 3);
        let (_, t) = check(
            Path::new("l.toml"),
            "profile = \"demo\"\nlease = \"1h\"\nrenew = \"10m\"\n",
        )
        .unwrap();
        assert_eq!(t.renew, Duration::from_secs(600));
        let errs = check(
            Path::new("l.toml"),
            "profile = \"demo\"\nrenew = \"45m\"\nlease = \"bad\"\n[env]\n\"A B\" = \"x\"\n",
        )
        .unwrap_err();
        // A bad lease hides the order check (nothing to compare with); both other
        // problems are reported.
        let lines: Vec<String> = errs.iter().map(|e| e.to_string()).collect();
        assert_eq!(lines.len(), 2, "{lines:?}");
        assert!(lines[0].starts_with("l.toml:5:1: invalid environment variable name 'A B'"));
        assert!(lines[1].starts_with("l.toml:3:9: field 'lease'"));
    }

    #[test]
    fn reserved_names() {
        assert!(reserved_lane_name("Session").is_some());
        assert!(reserved_lane_name("3bcdFGHJK").is_some());
        assert!(reserved_lane_name("core").is_none());
    }
}
