//! `lanes/NAME.toml`: one agent seat. The name of the file is the name of the lane.
//!
//! Parsing is strict (unknown keys, wrong types and bad values are errors located
//! `file:line:col`). The checks here look at one file only; rules across files (the
//! profile exists, no two lanes differ only in case) belong to [`super::fleet`].
//! Invariant: a [`Timing`] returned from [`check`] always has `renew < lease`; a lane
//! returned from it has a `base` git accepts as a branch name, a `push` that cannot
//! read as an option, and `projects` and `phases` that tasks can carry (so can match).
//! Whether `repo` is a repository and `push` one of its remotes needs git: that is
//! [`super::fleet`]'s, located with [`spans`].

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
    /// The hosts whose supervisor may run this lane (each supervisor's `SPICE_HOST`,
    /// else its machine's name); empty: any host, one at a time.
    #[serde(default)]
    pub hosts: Vec<String>,
    /// Where this lane's worktrees go; default: under the state directory.
    pub worktrees: Option<PathBuf>,
    /// Lease length, e.g. "30m"; default [`crate::store::DEFAULT_LEASE`].
    pub lease: Option<Spanned<String>>,
    /// Renewal interval, e.g. "5m"; default a third of the lease.
    pub renew: Option<Spanned<String>>,
    /// How long an agent may run without writing its transcript before the lane says
    /// so (it may be waiting at a prompt or dialog), e.g. "2m"; default 60 s.
    pub start_timeout: Option<Spanned<String>>,
    /// How long the transcript may stay quiet mid-turn (a command running, nothing
    /// written) before the lane is reported stalled, e.g. "20m"; default 10 min.
    pub stall_after: Option<Spanned<String>>,
    /// Added to the agent's environment after the profile's (literal values).
    #[serde(default)]
    pub env: BTreeMap<Spanned<String>, String>,
    /// The model passed to the agent through the profile's `{model}` placeholder.
    pub model: Option<String>,
    /// The remote `base` is pushed to after each merge at phase completion; nothing
    /// is pushed without it. A remote of the lane's repository or a URL
    /// ([`push_is_url`]), never anything starting with `-`.
    pub push: Option<String>,
    #[serde(default = "yes")]
    pub enabled: bool,
    /// Tokens the lane's sessions may spend (input, output and cache, as `spice usage`
    /// counts them); crossing it pauses the lane after the agent's turn until the
    /// operator raises or stops it (`spice budget`). A positive integer.
    pub budget_tokens: Option<Spanned<u64>>,
    /// How the lane's agent is confined ([`Confinement`]); default Landlock.
    #[serde(default)]
    pub sandbox: Confinement,
    /// More paths the confined agent may write, beyond its worktree, its agent home
    /// entries (the profile's `writable`), its private temp directory and the git
    /// files of its own branch: absolute, or `~/…` for the agent's HOME.
    #[serde(default)]
    pub writable: Vec<Spanned<String>>,
}

/// A lane's `sandbox`: what confines every process its agent starts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Confinement {
    /// Writes only to the paths named (worktree, agent home, temp, own branch),
    /// signals only within the lane (`crate::sandbox`); said plainly where the kernel
    /// cannot.
    #[default]
    Landlock,
    /// No confinement: the agent may write whatever the operator can. `fleet check`
    /// and the lane's row say so.
    Off,
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
    pub stall_after: Duration,
}

/// The default `start_timeout`.
pub const START_TIMEOUT: Duration = Duration::from_secs(60);
/// The default `stall_after`.
pub const STALL_AFTER: Duration = Duration::from_secs(10 * 60);

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

/// Where the values of a lane file checked against its repository are: byte offsets of
/// `repo` and `push`, when present.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Spans {
    pub repo: Option<usize>,
    pub push: Option<usize>,
}

/// The located fields of a lane file, read a second time beside [`Lane`] (which keeps
/// plain values for its users); unknown keys are [`Lane`]'s to refuse.
#[derive(Deserialize)]
struct Located {
    repo: Option<Spanned<PathBuf>>,
    base: Option<Spanned<String>>,
    push: Option<Spanned<String>>,
    #[serde(default)]
    projects: Vec<Spanned<String>>,
    #[serde(default)]
    phases: Vec<Spanned<String>>,
    #[serde(default)]
    hosts: Vec<Spanned<String>>,
}

/// The offsets of `repo` and `push` in a lane file that [`check`] accepted.
pub fn spans(text: &str) -> Spans {
    match toml::from_str::<Located>(text) {
        Ok(l) => Spans {
            repo: l.repo.map(|r| r.span().start),
            push: l.push.map(|p| p.span().start),
        },
        Err(_) => Spans::default(),
    }
}

/// True if `push` is a URL git pushes to (`scheme://…`, or scp-style `host:path` with
/// no `/` before the `:`) rather than the name of a remote.
pub fn push_is_url(push: &str) -> bool {
    if push.contains("://") {
        return true;
    }
    match push.find(':') {
        Some(colon) => colon > 0 && !push[..colon].contains('/'),
        None => false,
    }
}

/// Why `push` can be neither a remote nor a URL, whatever the repository holds.
pub fn push_problem(push: &str) -> Option<&'static str> {
    if push.is_empty() {
        Some("is empty")
    } else if push.starts_with('-') {
        Some("starts with '-': git would read it as an option, not a remote")
    } else if push.chars().any(|c| c.is_whitespace() || c.is_control()) {
        Some("contains a space or a control character")
    } else {
        None
    }
}

/// `base`, `push`, `projects` and `phases`: what can be said without the repository.
fn check_values(path: &Path, text: &str) -> Vec<ConfigError> {
    let Ok(l) = toml::from_str::<Located>(text) else {
        return Vec::new();
    };
    let mut errors = Vec::new();
    let mut at = |v: &Spanned<String>, reason: String| {
        errors.push(ConfigError::at(path, text, v.span().start, reason));
    };
    if let Some(base) = &l.base {
        if let Err(why) = crate::git::check_branch_name(base.get_ref()) {
            at(
                base,
                format!(
                    "field 'base': '{}' is not a valid branch name: {why}",
                    base.get_ref()
                ),
            );
        }
    }
    if let Some(push) = &l.push {
        let p = push.get_ref();
        if let Some(why) = push_problem(p) {
            at(
                push,
                format!(
                    "field 'push': '{p}' {why}; name a remote of the lane's repository or a URL"
                ),
            );
        }
    }
    for (field, kind, names) in [
        ("projects", "project", &l.projects),
        ("phases", "phase", &l.phases),
    ] {
        for name in names {
            if let Err(why) = crate::task::check_name(kind, name.get_ref()) {
                at(
                    name,
                    format!("field '{field}': {why}, so no task can ever match it"),
                );
            }
        }
    }
    for (i, host) in l.hosts.iter().enumerate() {
        let h = host.get_ref();
        if h.is_empty()
            || h.chars().count() > 64
            || h.chars().any(|c| c.is_whitespace() || c.is_control())
        {
            at(
                host,
                format!("field 'hosts': '{}' is not a host name (1 to 64 characters without spaces), so no supervisor could run the lane there", h.escape_debug()),
            );
        } else if l.hosts[..i].iter().any(|o| o.get_ref() == h) {
            at(host, format!("field 'hosts': '{h}' is named twice"));
        }
    }
    if let Some(repo) = &l.repo {
        if repo.get_ref().as_os_str().is_empty() {
            errors.push(ConfigError::at(
                path,
                text,
                repo.span().start,
                "field 'repo': is empty; leave it out for the repository `fleet up` runs in",
            ));
        }
    }
    errors
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

/// The `budget_tokens` of the lane file at `path`, if it reads and sets one (the
/// floor of the lane's budget, which the operator may raise).
pub fn budget_tokens(path: &Path) -> Option<u64> {
    let text = std::fs::read_to_string(path).ok()?;
    let lane: Lane = toml::from_str(&text).ok()?;
    lane.budget_tokens.map(|b| *b.get_ref())
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
    let stall_after = duration("stall_after", &lane.stall_after).unwrap_or(STALL_AFTER);
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
    if let Some(b) = lane.budget_tokens.as_ref().filter(|b| *b.get_ref() == 0) {
        errors.push(ConfigError::at(
            path,
            text,
            b.span().start,
            "field 'budget_tokens': must be a positive number of tokens (leave it out for no budget)",
        ));
    }
    for w in &lane.writable {
        let v = w.get_ref();
        let plain = v.starts_with('/') || v.starts_with("~/");
        if !plain || v.split('/').any(|c| c == "..") {
            errors.push(ConfigError::at(
                path,
                text,
                w.span().start,
                format!("field 'writable': '{v}' must be an absolute path or start with '~/', without '..'"),
            ));
        }
    }
    errors.extend(check_values(path, text));
    if errors.is_empty() {
        Ok((
            lane,
            Timing {
                lease,
                renew,
                start_timeout,
                stall_after,
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
    fn hosts_are_host_names_each_once() {
        let (l, _) = check(
            Path::new("l.toml"),
            "profile = \"demo\"\nhosts = [\"a\", \"b.example\"]\n",
        )
        .unwrap();
        assert_eq!(l.hosts, ["a", "b.example"]);
        let errors = check(
            Path::new("l.toml"),
            "profile = \"demo\"\nhosts = [\"a\", \"my host\", \"a\"]\n",
        )
        .unwrap_err();
        let msgs: Vec<String> = errors.iter().map(|e| e.to_string()).collect();
        assert_eq!(
            msgs,
            [
                "l.toml:2:15: field 'hosts': 'my host' is not a host name (1 to 64 characters without spaces), so no supervisor could run the lane there",
                "l.toml:2:26: field 'hosts': 'a' is named twice",
            ]
        );
    }

    #[test]
    fn sandbox_and_writable_are_checked() {
        let (l, _) = check(
            Path::new("l.toml"),
            "profile = \"demo\"\nwritable = [\"/opt/cache\", \"~/.cargo/registry\"]\n",
        )
        .unwrap();
        assert_eq!(l.sandbox, Confinement::Landlock);
        assert_eq!(l.writable.len(), 2);
        let (l, _) = check(
            Path::new("l.toml"),
            "profile = \"demo\"\nsandbox = \"off\"\n",
        )
        .unwrap();
        assert_eq!(l.sandbox, Confinement::Off);
        let errors = check(
            Path::new("l.toml"),
            "profile = \"demo\"\nwritable = [\"rel\", \"/a/../b\"]\n",
        )
        .unwrap_err();
        let msgs: Vec<String> = errors.iter().map(|e| e.to_string()).collect();
        assert_eq!(msgs.len(), 2, "{msgs:?}");
        assert!(
            msgs[0].starts_with("l.toml:2:13: field 'writable': 'rel' must be"),
            "{msgs:?}"
        );
        let e = check(
            Path::new("l.toml"),
            "profile = \"demo\"\nsandbox = \"maybe\"\n",
        )
        .unwrap_err();
        assert!(e[0].to_string().starts_with("l.toml:2:11"), "{}", e[0]);
    }

    #[test]
    fn a_budget_is_a_positive_number_of_tokens() {
        let lane = parse(
            Path::new("lanes/a.toml"),
            "profile = \"demo\"\nbudget_tokens = 5000\n",
        )
        .unwrap();
        assert_eq!(lane.budget_tokens.map(|b| *b.get_ref()), Some(5000));
        for (text, col) in [
            ("budget_tokens = 0", 17),
            ("budget_tokens = -3", 17),
            ("budget_tokens = \"lots\"", 17),
        ] {
            let e = parse(
                Path::new("lanes/a.toml"),
                &format!("profile = \"demo\"\n{text}\n"),
            )
            .unwrap_err()
            .to_string();
            assert!(e.starts_with(&format!("lanes/a.toml:2:{col}:")), "{e}");
        }
    }

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
    fn values_that_can_never_work_are_located() {
        let text = "profile = \"demo\"\nbase = \"../../etc\"\npush = \"--upload-pack=touch /tmp/x\"\nprojects = [\"app\", \"my app\"]\nphases = [\"to,do\"]\nrepo = \"\"\n";
        let errs: Vec<String> = check(Path::new("l.toml"), text)
            .unwrap_err()
            .iter()
            .map(|e| e.to_string())
            .collect();
        assert_eq!(
            errs,
            [
                "l.toml:2:8: field 'base': '../../etc' is not a valid branch name: it contains '..'",
                "l.toml:3:8: field 'push': '--upload-pack=touch /tmp/x' starts with '-': git would read it as an option, not a remote; name a remote of the lane's repository or a URL",
                "l.toml:4:20: field 'projects': invalid project 'my app': must be 1-128 characters without spaces or commas, so no task can ever match it",
                "l.toml:5:11: field 'phases': invalid phase 'to,do': must be 1-128 characters without spaces or commas, so no task can ever match it",
                "l.toml:6:8: field 'repo': is empty; leave it out for the repository `fleet up` runs in",
            ]
        );
        let ok =
            "profile = \"demo\"\nbase = \"release/1.x\"\npush = \"origin\"\nprojects = [\"app\"]\n";
        assert!(check(Path::new("l.toml"), ok).is_ok());
        assert_eq!(
            spans(ok),
            Spans {
                repo: None,
                push: Some(ok.find("\"origin").unwrap())
            }
        );
        assert!(push_is_url("https://h/x.git") && push_is_url("git@h:x.git"));
        assert!(!push_is_url("origin") && !push_is_url("./a:b") && !push_is_url(":x"));
    }

    #[test]
    fn reserved_names() {
        assert!(reserved_lane_name("Session").is_some());
        assert!(reserved_lane_name("3bcdFGHJK").is_some());
        assert!(reserved_lane_name("core").is_none());
    }
}
