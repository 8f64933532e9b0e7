//! The fleet's configuration as a whole: every `lanes/*.toml` resolved against the
//! profiles (built-in, or `profiles/*.toml` overriding one of the same name).
//!
//! [`load`] reads everything and reports every problem it finds, never only the first,
//! each as one [`ConfigError`] line `file:line:col: reason` with the file relative to the
//! repository. Within one file TOML decoding stops at its first error; the checks after
//! decoding (names, durations, env, templates, the profile reference) each report.
//!
//! Rules across files, decided here:
//! - names come from file stems and follow [`check_name`] (letters, digits, `-`, `_`,
//!   not starting with `-`); files not ending in `.toml` are ignored;
//! - two lanes, or two profiles (built-ins included), may not differ only in case: the
//!   names become directory and branch names, and case-insensitive file systems would
//!   merge them; an exact match of a built-in's name is an override, not a collision;
//! - a lane may not be named like a steering target kind or a session id
//!   ([`super::lane::reserved_lane_name`]);
//! - a lane's `profile` must exist; a profile file with errors is reported once, not
//!   again for each lane using it;
//! - a lane's `repo` (relative to the fleet's repository) must be the top of a git
//!   repository, and its `push`, unless a URL, one of that repository's remotes (of
//!   the fleet's repository when the lane names no `repo`).
//!
//! A missing agent binary is not a configuration error: it makes that one lane
//! unavailable ([`LaneConfig::program`] is `Err`), and the other lanes still run.
//! Invariant: a returned [`FleetConfig`] holds only lanes whose files are fully valid.

use super::lane::{self, check_name, reserved_lane_name, Lane};
use super::profile::{self, Profile, Source};
use super::ConfigError;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Every valid lane and every known profile.
#[derive(Debug, Clone)]
pub struct FleetConfig {
    /// In name order, disabled lanes included (`lane.enabled` says which).
    pub lanes: Vec<LaneConfig>,
    /// Built-ins, replaced by files of the same name, plus the other files; by name.
    pub profiles: BTreeMap<String, Profile>,
}

/// One lane, resolved.
#[derive(Debug, Clone)]
pub struct LaneConfig {
    pub name: String,
    /// `lanes/NAME.toml`, relative to the repository when under it.
    pub file: PathBuf,
    pub lane: Lane,
    pub profile: Profile,
    pub lease: Duration,
    /// Always shorter than `lease`.
    pub renew: Duration,
    /// How long the agent may run without a transcript before the lane reports it.
    pub start_timeout: Duration,
    /// How long a quiet transcript mid-turn takes to be reported stalled.
    pub stall_after: Duration,
    /// `command[0]` as found by `which`, or why the lane cannot run (located at the
    /// lane's `profile` value). `Err` only ever means a missing program.
    pub program: Result<PathBuf, ConfigError>,
}

/// What [`load`] asks of the machine, answered by the caller: the library searches no
/// `PATH` and runs no git itself.
pub struct Probes<'a> {
    /// Resolves a program as written in `command[0]` or `resume[0]`: a bare name
    /// (search `PATH`), an absolute path (check it), or the literal `{spice}`, which the
    /// caller answers with the running spice binary.
    pub which: &'a dyn Fn(&str) -> Option<PathBuf>,
    /// The remotes of the git repository whose top (or bare directory) is the path, or
    /// why it is not one, in a line.
    pub remotes: &'a dyn Fn(&Path) -> Result<Vec<String>, String>,
}

impl FleetConfig {
    /// Lanes whose agent program is missing, with the reason.
    pub fn unavailable(&self) -> impl Iterator<Item = (&LaneConfig, &ConfigError)> {
        self.lanes
            .iter()
            .filter_map(|l| l.program.as_ref().err().map(|e| (l, e)))
    }
}

/// Reads `lanes_dir/*.toml` and `profiles_dir/*.toml` (either may be missing) and
/// resolves each lane. `repo` is the fleet's repository: lanes' relative `repo` paths
/// start there, and error paths are shown relative to it.
pub fn load(
    repo: &Path,
    lanes_dir: &Path,
    profiles_dir: &Path,
    probes: &Probes<'_>,
) -> Result<FleetConfig, Vec<ConfigError>> {
    let which = probes.which;
    let mut remotes = BTreeMap::new();
    let mut errors = Vec::new();
    let shown = |p: &Path| p.strip_prefix(repo).unwrap_or(p).to_path_buf();

    let mut profiles = BTreeMap::new();
    for (name, text) in profile::BUILTIN {
        let file = PathBuf::from(format!("<built-in>/{name}.toml"));
        match profile::parse(&file, name, text, Source::Builtin) {
            Ok(p) => {
                profiles.insert(name.to_string(), p);
            }
            Err(e) => errors.extend(e),
        }
    }
    let mut broken = Vec::new();
    for (name, path, text) in read_dir(profiles_dir, &shown, &mut errors) {
        let file = shown(&path);
        let mut name_ok = true;
        if let Err(reason) = check_name("profile", &name) {
            errors.push(ConfigError::whole(&file, reason));
            name_ok = false;
        } else if let Some(other) = case_twin(profiles.keys(), &name) {
            let what = match &profiles[other].source {
                Source::Builtin => "the built-in profile".to_string(),
                Source::File(f) => format!("profile {}", f.display()),
            };
            errors.push(ConfigError::whole(
                &file,
                format!("profile '{name}' differs from {what} '{other}' only in case"),
            ));
            name_ok = false;
        }
        let Some(text) = text else {
            broken.push(name);
            continue;
        };
        // A badly named file is still checked, so all its problems show at once.
        match profile::parse(&file, &name, &text, Source::File(file.clone())) {
            Ok(p) if name_ok => {
                profiles.insert(name, p);
            }
            Ok(_) => broken.push(name),
            Err(e) => {
                errors.extend(e);
                // A broken override must not fall back to the built-in silently.
                profiles.remove(&name);
                broken.push(name);
            }
        }
    }

    let mut lanes: Vec<LaneConfig> = Vec::new();
    let mut seen: BTreeMap<String, PathBuf> = BTreeMap::new();
    for (name, path, text) in read_dir(lanes_dir, &shown, &mut errors) {
        let file = shown(&path);
        let mut name_ok = true;
        let reason = check_name("lane", &name)
            .err()
            .or_else(|| reserved_lane_name(&name));
        if let Some(reason) = reason {
            errors.push(ConfigError::whole(&file, reason));
            name_ok = false;
        } else if let Some(other) = case_twin(seen.keys(), &name) {
            let (other, at) = (other.clone(), seen[other].display());
            errors.push(ConfigError::whole(
                &file,
                format!("lane '{name}' differs from lane '{other}' ({at}) only in case"),
            ));
            name_ok = false;
        }
        seen.insert(name.clone(), file.clone());
        let Some(text) = text else { continue };
        let (lane, timing) = match lane::check(&file, &text) {
            Ok(v) => v,
            Err(e) => {
                errors.extend(e);
                // A file that decodes has only bad values: its repository is still
                // checked, so every problem shows at once.
                if let Ok(lane) = toml::from_str::<Lane>(&text) {
                    errors.extend(check_repository(
                        &file,
                        &text,
                        &lane,
                        repo,
                        probes,
                        &mut remotes,
                    ));
                }
                continue;
            }
        };
        errors.extend(check_repository(
            &file,
            &text,
            &lane,
            repo,
            probes,
            &mut remotes,
        ));
        let wanted = lane.profile.get_ref();
        let Some(profile) = profiles.get(wanted.as_str()) else {
            if !broken.contains(wanted) {
                let known: Vec<&str> = profiles.keys().map(String::as_str).collect();
                errors.push(ConfigError::at(
                    &file,
                    &text,
                    lane.profile.span().start,
                    format!("unknown profile '{wanted}' (known: {})", known.join(", ")),
                ));
            }
            continue;
        };
        if !name_ok {
            continue;
        }
        let at = |reason: String| ConfigError::at(&file, &text, lane.profile.span().start, reason);
        let mut program = None;
        let mut missing = None;
        for (i, written) in profile.programs().into_iter().enumerate() {
            match which(written) {
                Some(found) if i == 0 => program = Some(found),
                Some(_) => {}
                None if missing.is_none() => {
                    missing = Some(at(missing_reason(profile, i, written)))
                }
                None => {}
            }
        }
        lanes.push(LaneConfig {
            name,
            file: file.clone(),
            profile: profile.clone(),
            lease: timing.lease,
            renew: timing.renew,
            start_timeout: timing.start_timeout,
            stall_after: timing.stall_after,
            program: match (missing, program) {
                (Some(e), _) => Err(e),
                (None, Some(p)) => Ok(p),
                (None, None) => unreachable!("command[0] is always looked up"),
            },
            lane,
        });
    }

    if errors.is_empty() {
        Ok(FleetConfig { lanes, profiles })
    } else {
        // Stable: problems of one position keep the order they were found in.
        errors.sort_by(|a, b| (&a.file, a.line, a.col).cmp(&(&b.file, b.line, b.col)));
        Err(errors)
    }
}

/// A lane's `repo` against the machine, and its `push` against that repository's
/// remotes. `known` keeps each repository's answer, so it is asked once per run.
fn check_repository(
    file: &Path,
    text: &str,
    lane: &Lane,
    fleet_repo: &Path,
    probes: &Probes<'_>,
    known: &mut BTreeMap<PathBuf, Result<Vec<String>, String>>,
) -> Vec<ConfigError> {
    let spans = lane::spans(text);
    let dir = match &lane.repo {
        Some(r) => fleet_repo.join(r),
        None => fleet_repo.to_path_buf(),
    };
    let answer = known
        .entry(dir.clone())
        .or_insert_with(|| (probes.remotes)(&dir));
    let mut errors = Vec::new();
    match (answer, &lane.repo) {
        (Err(why), Some(r)) => errors.push(ConfigError::at(
            file,
            text,
            spans.repo.unwrap_or(0),
            format!("field 'repo': '{}': {why}", r.display()),
        )),
        (Ok(names), _) => {
            let push = lane
                .push
                .as_deref()
                .filter(|p| lane::push_problem(p).is_none());
            if let Some(p) = push.filter(|p| !lane::push_is_url(p) && !names.iter().any(|n| n == p))
            {
                let which = match &lane.repo {
                    Some(r) => format!("the lane's repository '{}'", r.display()),
                    None => "the repository".to_string(),
                };
                let has = if names.is_empty() {
                    "it has none".to_string()
                } else {
                    format!("its remotes: {}", names.join(", "))
                };
                errors.push(ConfigError::at(
                    file,
                    text,
                    spans.push.unwrap_or(0),
                    format!("field 'push': '{p}' is not a remote of {which} ({has}); name one, or a URL"),
                ));
            }
        }
        // The fleet's own repository could not be asked: `fleet` runs in it, so that
        // is reported where it is opened, not as this lane's problem.
        (Err(_), None) => {}
    }
    errors
}

fn missing_reason(profile: &Profile, index: usize, written: &str) -> String {
    let field = if index == 0 { "command" } else { "resume" };
    let name = &profile.name;
    if written == "{spice}" {
        format!("the running spice binary ({field}[0] of profile '{name}') cannot be found")
    } else if written.starts_with('/') {
        format!(
            "agent binary '{written}' ({field}[0] of profile '{name}') is not an executable file"
        )
    } else {
        format!("agent binary '{written}' ({field}[0] of profile '{name}') not found on PATH")
    }
}

/// A name among `names` equal to `name` except for case (an exact match is not one).
fn case_twin<'a>(names: impl Iterator<Item = &'a String>, name: &str) -> Option<&'a String> {
    names
        .into_iter()
        .find(|n| n.as_str() != name && n.eq_ignore_ascii_case(name))
}

/// The `*.toml` files of `dir` in name order, as (stem, path, text); `text` is `None`
/// when the file cannot be read (the problem is in `errors`). A missing directory has
/// no files.
fn read_dir(
    dir: &Path,
    shown: &dyn Fn(&Path) -> PathBuf,
    errors: &mut Vec<ConfigError>,
) -> Vec<(String, PathBuf, Option<String>)> {
    let entries = match std::fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Vec::new(),
        Err(e) => {
            errors.push(ConfigError::whole(
                &shown(dir),
                format!("cannot read directory: {e}"),
            ));
            return Vec::new();
        }
    };
    let mut paths: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml") && p.is_file())
        .collect();
    paths.sort();
    paths
        .into_iter()
        .map(|path| {
            let stem = path
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default();
            let text = match std::fs::read_to_string(&path) {
                Ok(t) => Some(t),
                Err(e) => {
                    errors.push(ConfigError::whole(
                        &shown(&path),
                        format!("cannot read: {e}"),
                    ));
                    None
                }
            };
            (stem, path, text)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, rel: &str, text: &str) {
        let p = dir.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    fn run(repo: &Path, found: &[&str]) -> Result<FleetConfig, Vec<String>> {
        let which = |name: &str| {
            found
                .contains(&name)
                .then(|| PathBuf::from("/bin").join(name))
        };
        let remotes = |dir: &Path| -> Result<Vec<String>, String> {
            if dir.join(".git").exists() {
                Ok(vec!["origin".to_string()])
            } else {
                Err(format!("{} has no .git", dir.display()))
            }
        };
        let probes = Probes {
            which: &which,
            remotes: &remotes,
        };
        load(repo, &repo.join("lanes"), &repo.join("profiles"), &probes)
            .map_err(|e| e.iter().map(|e| e.to_string()).collect())
    }

    #[test]
    fn missing_binary_only_marks_its_lane() {
        let t = tempfile::tempdir().unwrap();
        write(t.path(), "lanes/a.toml", "profile = \"claude\"\n");
        write(
            t.path(),
            "lanes/b.toml",
            "profile = \"demo\"\nlease = \"1h\"\n",
        );
        let fleet = run(t.path(), &["{spice}"]).unwrap();
        let names: Vec<&str> = fleet.lanes.iter().map(|l| l.name.as_str()).collect();
        assert_eq!(names, ["a", "b"]);
        let gone: Vec<String> = fleet
            .unavailable()
            .map(|(l, e)| format!("{} {e}", l.name))
            .collect();
        assert_eq!(gone.len(), 1);
        assert!(
            gone[0].starts_with("a lanes/a.toml:1:11: agent binary 'claude'"),
            "{gone:?}"
        );
        assert_eq!(
            fleet.lanes[1].program.as_ref().unwrap(),
            Path::new("/bin/{spice}")
        );
        assert_eq!(fleet.lanes[1].renew, Duration::from_secs(1200));
    }

    #[test]
    fn every_problem_is_reported_in_file_order() {
        let t = tempfile::tempdir().unwrap();
        write(t.path(), "lanes/a.toml", "profile = \"nope\"\n");
        write(t.path(), "lanes/A.toml", "profile = \"demo\"\n");
        write(
            t.path(),
            "lanes/b.toml",
            "profile = \"broken\"\nlease = \"x\"\n",
        );
        write(t.path(), "lanes/-c.toml", "profile = \"demo\"\n");
        write(t.path(), "lanes/README.md", "not a lane");
        write(t.path(), "profiles/broken.toml", "command = []\n");
        let errs = run(t.path(), &[]).unwrap_err();
        assert_eq!(
            errs,
            [
                "lanes/-c.toml:1:1: invalid lane name '-c': use letters, digits, '-' and '_', not starting with '-' (at most 64)",
                "lanes/a.toml:1:1: lane 'a' differs from lane 'A' (lanes/A.toml) only in case",
                "lanes/a.toml:1:11: unknown profile 'nope' (known: claude, claude-headless, codex, codex-headless, demo, gemini, gemini-headless, qwen, qwen-headless)",
                "lanes/b.toml:2:9: field 'lease': invalid duration 'x': expected number at 0 (try 30s, 15m, 2h)",
                "profiles/broken.toml:1:11: 'command' must not be empty: its first element is the program",
            ]
        );
    }

    #[test]
    fn repo_and_push_are_checked_against_the_repository() {
        let t = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(t.path().join(".git")).unwrap();
        std::fs::create_dir_all(t.path().join("other/.git")).unwrap();
        let lane = |name: &str, rest: &str| {
            write(
                t.path(),
                &format!("lanes/{name}.toml"),
                &format!("profile = \"demo\"\n{rest}"),
            )
        };
        lane("a", "repo = \"/nonexistent\"\npush = \"origin\"\n");
        lane("b", "push = \"upstream\"\n");
        lane("c", "repo = \"other\"\npush = \"origin\"\n");
        lane("d", "push = \"git@example.com:spice.git\"\n");
        lane("e", "push = \"https://example.com/spice.git\"\n");
        lane("f", "repo = \"other\"\n");
        let errs = run(t.path(), &["{spice}"]).unwrap_err();
        assert_eq!(
            errs,
            [
                "lanes/a.toml:2:8: field 'repo': '/nonexistent': /nonexistent has no .git",
                "lanes/b.toml:2:8: field 'push': 'upstream' is not a remote of the repository (its remotes: origin); name one, or a URL",
            ]
        );
    }

    #[test]
    fn a_file_overrides_the_builtin() {
        let t = tempfile::tempdir().unwrap();
        write(t.path(), "profiles/claude.toml", "command = [\"true\"]\n");
        write(t.path(), "lanes/a.toml", "profile = \"claude\"\n");
        let fleet = run(t.path(), &["true"]).unwrap();
        let p = &fleet.lanes[0].profile;
        assert_eq!(p.source, Source::File("profiles/claude.toml".into()));
        assert!(p.transcript.is_none());
        assert!(fleet.unavailable().next().is_none());
    }
}
