//! `spice.toml`'s `[gate]` section: the repository's own rules, as strict as lane
//! files (unknown keys, wrong types, bad globs and absurd numbers are errors located
//! `file:line:col`, every one reported before anything runs).

use crate::config::ConfigError;
use globset::{Glob, GlobSet, GlobSetBuilder};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;
use toml::Spanned;

pub use crate::config::repo::FILE;
/// A cap may flex to this multiple of its base unless configured otherwise.
pub const DEFAULT_FLEX: f64 = 1.5;
/// The flex ceiling moves by up to this fraction, per file and author.
pub const DEFAULT_JITTER: f64 = 0.03;
/// A repository check that runs longer is stopped and fails.
pub const DEFAULT_CHECK_TIMEOUT: Duration = Duration::from_secs(300);
/// Routine caps when `[gate.routines]` names none.
pub const DEFAULT_ROUTINE_LINES: u64 = 80;
pub const DEFAULT_COMPLEXITY: u64 = 15;
/// Generated, vendored and lock files are excluded unless the repository says otherwise.
pub const DEFAULT_EXCLUDE: &[&str] = &[
    "**/*.lock",
    "**/package-lock.json",
    "**/node_modules/**",
    "**/vendor/**",
    "**/*.min.js",
];

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct GateToml {
    flex: Option<Spanned<f64>>,
    jitter: Option<Spanned<f64>>,
    exclude: Option<Vec<Spanned<String>>>,
    #[serde(default)]
    files: BTreeMap<Spanned<String>, CapToml>,
    routines: Option<RoutinesToml>,
    commit: Option<CommitToml>,
    #[serde(default)]
    check: Vec<CheckToml>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CapToml {
    lines: Option<Spanned<i64>>,
    bytes: Option<Spanned<i64>>,
    flex: Option<Spanned<f64>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RoutinesToml {
    lines: Option<Spanned<i64>>,
    complexity: Option<Spanned<i64>>,
    flex: Option<Spanned<f64>>,
    #[serde(default)]
    paths: BTreeMap<Spanned<String>, RoutineCapToml>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RoutineCapToml {
    lines: Option<Spanned<i64>>,
    complexity: Option<Spanned<i64>>,
    flex: Option<Spanned<f64>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CommitToml {
    subject: Option<Spanned<i64>>,
    body: Option<Spanned<i64>>,
    #[serde(default)]
    trailers: Vec<Spanned<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CheckToml {
    name: Spanned<String>,
    run: Spanned<Vec<String>>,
    paths: Option<Vec<Spanned<String>>>,
    #[serde(default)]
    phases: Vec<Spanned<String>>,
    timeout: Option<Spanned<String>>,
}

/// One measurable limit: the base, and the flex ceiling's multiple of it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Cap {
    pub base: u64,
    pub flex: f64,
}

/// File caps that apply to files matching `glob` (the longest matching pattern wins;
/// `default` applies to every file no pattern matches).
#[derive(Debug, Clone)]
pub struct FileRule {
    pub pattern: String,
    pub lines: Option<Cap>,
    pub bytes: Option<Cap>,
}

#[derive(Debug, Clone)]
pub struct RoutineRule {
    pub pattern: String,
    pub lines: Option<Cap>,
    pub complexity: Option<Cap>,
}

#[derive(Debug, Clone, Default)]
pub struct CommitRules {
    /// Longest subject line, in characters.
    pub subject: Option<u64>,
    /// Widest body line, in characters.
    pub body: Option<u64>,
    /// Trailers every commit carries (a task's commits also carry `Task` and
    /// `Task-Session`).
    pub trailers: Vec<String>,
}

#[derive(Debug, Clone)]
pub struct Check {
    pub name: String,
    pub run: Vec<String>,
    /// Paths it cares about: it runs only when a checked path matches (all if none).
    pub paths: Option<GlobSet>,
    pub path_patterns: Vec<String>,
    /// Phases whose tasks it runs for (empty: every phase, and outside any task).
    pub phases: Vec<String>,
    pub timeout: Duration,
}

/// Every rule of a repository, compiled.
#[derive(Debug, Clone)]
pub struct GateConfig {
    pub jitter: f64,
    pub exclude: GlobSet,
    pub files: Vec<(GlobSet, FileRule)>,
    pub default_file: Option<FileRule>,
    pub routines: Vec<(GlobSet, RoutineRule)>,
    pub default_routine: Option<RoutineRule>,
    pub commit: CommitRules,
    pub checks: Vec<Check>,
    /// Where it was read from (`None`: the repository has no `spice.toml`).
    pub source: Option<PathBuf>,
}

impl GateConfig {
    /// No `spice.toml`: no file caps, default routine caps off, nothing to check.
    pub fn empty() -> GateConfig {
        GateConfig {
            jitter: DEFAULT_JITTER,
            exclude: globs(DEFAULT_EXCLUDE.iter().copied()).expect("valid defaults"),
            files: Vec::new(),
            default_file: None,
            routines: Vec::new(),
            default_routine: None,
            commit: CommitRules::default(),
            checks: Vec::new(),
            source: None,
        }
    }

    /// The caps for `path`: the longest matching pattern's, else the default's.
    pub fn file_rule(&self, path: &str) -> Option<&FileRule> {
        best(&self.files, path).or(self.default_file.as_ref())
    }

    pub fn routine_rule(&self, path: &str) -> Option<&RoutineRule> {
        best(&self.routines, path).or(self.default_routine.as_ref())
    }

    pub fn excluded(&self, path: &str) -> bool {
        self.exclude.is_match(path)
    }
}

fn best<'a, R: HasPattern>(rules: &'a [(GlobSet, R)], path: &str) -> Option<&'a R> {
    rules
        .iter()
        .filter(|(g, _)| g.is_match(path))
        .max_by_key(|(_, r)| r.pattern().len())
        .map(|(_, r)| r)
}

trait HasPattern {
    fn pattern(&self) -> &str;
}
impl HasPattern for FileRule {
    fn pattern(&self) -> &str {
        &self.pattern
    }
}
impl HasPattern for RoutineRule {
    fn pattern(&self) -> &str {
        &self.pattern
    }
}

fn globs<'a>(patterns: impl IntoIterator<Item = &'a str>) -> Result<GlobSet, String> {
    let mut b = GlobSetBuilder::new();
    for p in patterns {
        b.add(glob(p)?);
    }
    b.build().map_err(|e| e.to_string())
}

fn glob(p: &str) -> Result<Glob, String> {
    if p.trim().is_empty() {
        return Err("an empty glob matches nothing".into());
    }
    globset::GlobBuilder::new(p)
        .literal_separator(true)
        .build()
        .map_err(|e| format!("bad glob {p:?}: {}", e.kind()))
}

/// Reads `repo/spice.toml`; a missing file is an empty configuration.
pub fn load(repo: &Path) -> Result<GateConfig, Vec<ConfigError>> {
    let path = repo.join(FILE);
    match std::fs::read_to_string(&path) {
        Ok(text) => parse(Path::new(FILE), &text).map(|mut c| {
            c.source = Some(path);
            c
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(GateConfig::empty()),
        Err(e) => Err(vec![ConfigError::whole(Path::new(FILE), e.to_string())]),
    }
}

/// Parses the text of a `spice.toml` shown as `file`, collecting every problem.
pub fn parse(file: &Path, text: &str) -> Result<GateConfig, Vec<ConfigError>> {
    let mut cfg = GateConfig::empty();
    let Some(g) = crate::config::repo::section::<GateToml>(file, text, "gate")? else {
        return Ok(cfg);
    };
    let mut errs = Vec::new();
    let mut at = |offset: usize, why: String| errs.push(ConfigError::at(file, text, offset, why));
    let default_flex = match &g.flex {
        Some(f) => flex_value(f, "flex", &mut at),
        None => DEFAULT_FLEX,
    };
    if let Some(j) = &g.jitter {
        let v = *j.get_ref();
        if !(0.0..=0.10).contains(&v) {
            at(
                j.span().start,
                format!("jitter: {v} must be between 0 and 0.1"),
            );
        } else {
            cfg.jitter = v;
        }
    }
    if let Some(ex) = &g.exclude {
        let mut b = GlobSetBuilder::new();
        for p in ex {
            match glob(p.get_ref()) {
                Ok(gl) => {
                    b.add(gl);
                }
                Err(e) => at(p.span().start, format!("exclude: {e}")),
            }
        }
        // The repository's own list replaces the defaults: it says what is generated.
        if let Ok(set) = b.build() {
            cfg.exclude = set;
        }
    }
    for (pattern, cap) in &g.files {
        let off = pattern.span().start;
        let name = pattern.get_ref().clone();
        let flex = match &cap.flex {
            Some(f) => flex_value(f, &format!("files.{name:?}.flex"), &mut at),
            None => default_flex,
        };
        let lines = cap
            .lines
            .as_ref()
            .and_then(|v| count(v, &format!("files.{name:?}.lines"), &mut at))
            .map(|base| Cap { base, flex });
        let bytes = cap
            .bytes
            .as_ref()
            .and_then(|v| count(v, &format!("files.{name:?}.bytes"), &mut at))
            .map(|base| Cap { base, flex });
        if cap.lines.is_none() && cap.bytes.is_none() {
            at(
                off,
                format!("files.{name:?}: names neither lines nor bytes"),
            );
        }
        let rule = FileRule {
            pattern: name.clone(),
            lines,
            bytes,
        };
        if name == "default" {
            cfg.default_file = Some(rule);
        } else {
            match globs([name.as_str()]) {
                Ok(set) => cfg.files.push((set, rule)),
                Err(e) => at(off, format!("files: {e}")),
            }
        }
    }
    if let Some(r) = &g.routines {
        let flex = match &r.flex {
            Some(f) => flex_value(f, "routines.flex", &mut at),
            None => default_flex,
        };
        let lines = match &r.lines {
            Some(v) => count(v, "routines.lines", &mut at),
            None => Some(DEFAULT_ROUTINE_LINES),
        };
        let complexity = match &r.complexity {
            Some(v) => count(v, "routines.complexity", &mut at),
            None => Some(DEFAULT_COMPLEXITY),
        };
        cfg.default_routine = Some(RoutineRule {
            pattern: "default".into(),
            lines: lines.map(|base| Cap { base, flex }),
            complexity: complexity.map(|base| Cap { base, flex }),
        });
        for (pattern, cap) in &r.paths {
            let name = pattern.get_ref().clone();
            let flex = match &cap.flex {
                Some(f) => flex_value(f, &format!("routines.paths.{name:?}.flex"), &mut at),
                None => flex,
            };
            let l = match &cap.lines {
                Some(v) => count(v, &format!("routines.paths.{name:?}.lines"), &mut at),
                None => lines,
            };
            let c = match &cap.complexity {
                Some(v) => count(v, &format!("routines.paths.{name:?}.complexity"), &mut at),
                None => complexity,
            };
            match globs([name.as_str()]) {
                Ok(set) => cfg.routines.push((
                    set,
                    RoutineRule {
                        pattern: name,
                        lines: l.map(|base| Cap { base, flex }),
                        complexity: c.map(|base| Cap { base, flex }),
                    },
                )),
                Err(e) => at(pattern.span().start, format!("routines.paths: {e}")),
            }
        }
    }
    if let Some(c) = &g.commit {
        cfg.commit.subject = c
            .subject
            .as_ref()
            .and_then(|v| count(v, "commit.subject", &mut at));
        cfg.commit.body = c
            .body
            .as_ref()
            .and_then(|v| count(v, "commit.body", &mut at));
        for t in &c.trailers {
            let name = t.get_ref();
            let token = !name.is_empty()
                && name
                    .chars()
                    .all(|ch| ch.is_ascii_alphanumeric() || ch == '-');
            if token {
                cfg.commit.trailers.push(name.clone());
            } else {
                at(
                    t.span().start,
                    format!(
                        "commit.trailers: {name:?} is not a trailer name (letters, digits and '-')"
                    ),
                );
            }
        }
    }
    let mut names = std::collections::BTreeSet::new();
    for c in &g.check {
        let name = c.name.get_ref().trim().to_string();
        if name.is_empty() {
            at(c.name.span().start, "check.name: must not be empty".into());
        } else if !names.insert(name.clone()) {
            at(
                c.name.span().start,
                format!("check.name: {name:?} is defined twice"),
            );
        }
        if c.run.get_ref().is_empty() || c.run.get_ref()[0].trim().is_empty() {
            at(
                c.run.span().start,
                format!("check {name:?}: run must name a program"),
            );
        }
        let mut path_patterns = Vec::new();
        let paths = match &c.paths {
            None => None,
            Some(list) => {
                let mut b = GlobSetBuilder::new();
                for p in list {
                    match glob(p.get_ref()) {
                        Ok(gl) => {
                            b.add(gl);
                            path_patterns.push(p.get_ref().clone());
                        }
                        Err(e) => at(p.span().start, format!("check {name:?}: paths: {e}")),
                    }
                }
                b.build().ok()
            }
        };
        let timeout = match &c.timeout {
            None => DEFAULT_CHECK_TIMEOUT,
            Some(t) => match crate::when::parse_duration(t.get_ref()) {
                Ok(d) if d.is_zero() => {
                    at(
                        t.span().start,
                        format!("check {name:?}: timeout must be positive"),
                    );
                    DEFAULT_CHECK_TIMEOUT
                }
                Ok(d) if d > Duration::from_secs(24 * 3600) => {
                    at(
                        t.span().start,
                        format!(
                            "check {name:?}: timeout {} exceeds the maximum of 24h",
                            t.get_ref()
                        ),
                    );
                    DEFAULT_CHECK_TIMEOUT
                }
                Ok(d) => d,
                Err(e) => {
                    at(t.span().start, format!("check {name:?}: timeout: {e}"));
                    DEFAULT_CHECK_TIMEOUT
                }
            },
        };
        cfg.checks.push(Check {
            name,
            run: c.run.get_ref().clone(),
            paths,
            path_patterns,
            phases: c.phases.iter().map(|p| p.get_ref().clone()).collect(),
            timeout,
        });
    }
    if errs.is_empty() {
        Ok(cfg)
    } else {
        errs.sort_by_key(|e| (e.line, e.col));
        Err(errs)
    }
}

/// Caps are counts: positive, and under a bound no file reaches (a typo, not a cap).
const MAX_CAP: i64 = 1 << 40;

fn count(v: &Spanned<i64>, field: &str, at: &mut impl FnMut(usize, String)) -> Option<u64> {
    let n = *v.get_ref();
    if n <= 0 {
        at(
            v.span().start,
            format!("{field}: {n} must be a positive number"),
        );
        None
    } else if n > MAX_CAP {
        at(
            v.span().start,
            format!("{field}: {n} exceeds the maximum of {MAX_CAP}"),
        );
        None
    } else {
        Some(n as u64)
    }
}

fn flex_value(v: &Spanned<f64>, field: &str, at: &mut impl FnMut(usize, String)) -> f64 {
    let f = *v.get_ref();
    if !(1.0..=10.0).contains(&f) {
        at(
            v.span().start,
            format!("{field}: {f} must be between 1 (no flex) and 10 times the base"),
        );
        DEFAULT_FLEX
    } else {
        f
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
    fn a_full_configuration_compiles() {
        let cfg = parse(
            Path::new("spice.toml"),
            r#"
[gate]
flex = 1.4
[gate.files]
default = { lines = 1000 }
"src/**/*.rs" = { lines = 700, flex = 1.2 }
"src/big/*.rs" = { lines = 900 }
[gate.routines]
lines = 60
[gate.routines.paths]
"tests/**" = { lines = 200 }
[gate.commit]
subject = 72
body = 72
trailers = ["Signed-off-by"]
[[gate.check]]
name = "lint"
run = ["./lint.sh"]
paths = ["src/**"]
phases = ["todo"]
timeout = "30s"
"#,
        )
        .unwrap();
        let r = cfg.file_rule("src/big/a.rs").unwrap();
        assert_eq!(
            r.lines,
            Some(Cap {
                base: 900,
                flex: 1.4
            })
        );
        let r = cfg.file_rule("src/x/y.rs").unwrap();
        assert_eq!(
            r.lines,
            Some(Cap {
                base: 700,
                flex: 1.2
            })
        );
        assert_eq!(cfg.file_rule("README.md").unwrap().pattern, "default");
        assert_eq!(
            cfg.routine_rule("tests/a.rs").unwrap().lines.unwrap().base,
            200
        );
        assert_eq!(
            cfg.routine_rule("src/a.rs")
                .unwrap()
                .complexity
                .unwrap()
                .base,
            15
        );
        assert_eq!(cfg.checks[0].timeout, Duration::from_secs(30));
        assert!(cfg.excluded("Cargo.lock"));
    }

    #[test]
    fn every_problem_is_located() {
        let e = errors(
            r#"[gate]
flex = 0.5
[gate.files]
"src/[" = { lines = 10 }
"x" = { lines = -3 }
"y" = { flex = 2.0 }
[[gate.check]]
name = "a"
run = []
timeout = "forever"
"#,
        );
        assert!(e[0].starts_with("spice.toml:2:8: flex: 0.5"), "{e:?}");
        assert!(
            e.iter()
                .any(|l| l.starts_with("spice.toml:4:1: files: bad glob")),
            "{e:?}"
        );
        assert!(
            e.iter()
                .any(|l| l.contains("spice.toml:5:17: files.\"x\".lines: -3")),
            "{e:?}"
        );
        assert!(
            e.iter()
                .any(|l| l.contains("names neither lines nor bytes")),
            "{e:?}"
        );
        assert!(
            e.iter().any(|l| l.contains("run must name a program")),
            "{e:?}"
        );
        assert!(e.iter().any(|l| l.contains("timeout:")), "{e:?}");
        let e = errors("[gate]\nfiles = 3\nbogus = 1\n");
        assert_eq!(e.len(), 1, "{e:?}");
        let e = errors("[gate]\nbogus = 1\n");
        assert!(
            e[0].starts_with("spice.toml:2:1: unknown field `bogus`"),
            "{e:?}"
        );
        let e = errors("[gate.files]\n\"a\" = { lines = 3, lnes = 4 }\n");
        assert!(e[0].contains("unknown field `lnes`"), "{e:?}");
    }
}
