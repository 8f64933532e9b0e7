//! Maxims: the repository's rules of taste, one file each (`maxims/NAME.toml`), plus
//! the built-in bags a repository may switch off, and the conscience's own settings
//! (`maxims/conscience.toml`: which built-ins are off, the judge command).
//!
//! ```toml
//! # maxims/no-sleep.toml
//! message = "Do not sleep to wait for something: wait on the thing itself."
//! words = ["sleep", "sleeps"]             # whole words, case-folded
//! phrases = ["wait a bit", "try again later"]   # contiguous words
//! lanes = ["a"]                           # scope: each list empty or absent = any
//! profiles = ["claude"]
//! projects = ["web"]
//! phases = ["todo"]
//! judges = true                           # ask the judges before publishing
//!
//! # maxims/conscience.toml (the settings, not a maxim)
//! disable = ["polling", "shims"]          # built-in bags switched off
//! [judge]
//! argv = ["claude", "-p"]                 # the prompt on stdin; {prompt}, {statement},
//! timeout = "60s"                         #   {maxim}, {message} in argv too
//! attempts = 3                            # answers that are not YES/NO, then abandoned
//! ```
//!
//! Strict like every repository file: unknown keys, wrong types, a word that is not
//! one word, an empty message are errors located `file:line:col`, all reported before
//! anything runs. The fleet reads the maxims `base` carries (`git show`), so a task
//! branch cannot switch its own maxims off.

use super::judge::JudgeConfig;
use super::matcher;
use crate::config::ConfigError;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::Duration;
use toml::Spanned;

/// The directory of maxims at the repository's root.
pub const DIR: &str = "maxims";
/// The conscience's settings inside [`DIR`] (a reserved name: no maxim is called so).
pub const SETTINGS: &str = "conscience.toml";
/// A judge that has not answered by then gave no answer.
pub const DEFAULT_JUDGE_TIMEOUT: Duration = Duration::from_secs(120);
/// Answers that are neither YES nor NO before a check is abandoned.
pub const DEFAULT_ATTEMPTS: u32 = 3;
const MAX_ATTEMPTS: u32 = 10;

/// Where a maxim comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Origin {
    Builtin,
    Repository,
}

/// One rule of taste.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Maxim {
    pub name: String,
    pub origin: Origin,
    /// The opinion, as the agent is reminded of it.
    pub message: String,
    /// Whole words, case-folded.
    pub words: Vec<String>,
    /// Contiguous words, case-folded, each at least two words.
    pub phrases: Vec<String>,
    /// Scope: empty = any.
    pub lanes: Vec<String>,
    pub profiles: Vec<String>,
    pub projects: Vec<String>,
    pub phases: Vec<String>,
    /// Ask the judges before publishing.
    pub judges: bool,
}

/// Whom a message was written by: what a maxim's scope is matched against.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Scope {
    pub lane: String,
    pub profile: Option<String>,
    pub project: Option<String>,
    pub phase: Option<String>,
}

impl Maxim {
    /// Whether the maxim watches messages written in `scope`.
    pub fn applies(&self, s: &Scope) -> bool {
        let within = |list: &[String], v: Option<&str>| {
            list.is_empty() || v.is_some_and(|v| list.iter().any(|x| x == v))
        };
        within(&self.lanes, Some(&s.lane))
            && within(&self.profiles, s.profile.as_deref())
            && within(&self.projects, s.project.as_deref())
            && within(&self.phases, s.phase.as_deref())
    }
}

/// Every maxim in force, and how judges are run.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Book {
    pub maxims: Vec<Maxim>,
    /// Built-in bags switched off by the repository.
    pub disabled: Vec<String>,
    pub judge: Option<JudgeConfig>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct MaximToml {
    message: Spanned<String>,
    #[serde(default)]
    words: Vec<Spanned<String>>,
    #[serde(default)]
    phrases: Vec<Spanned<String>>,
    #[serde(default)]
    lanes: Vec<String>,
    #[serde(default)]
    profiles: Vec<String>,
    #[serde(default)]
    projects: Vec<String>,
    #[serde(default)]
    phases: Vec<String>,
    judges: Option<Spanned<bool>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SettingsToml {
    #[serde(default)]
    disable: Vec<Spanned<String>>,
    judge: Option<JudgeToml>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct JudgeToml {
    argv: Spanned<Vec<String>>,
    timeout: Option<Spanned<String>>,
    attempts: Option<Spanned<i64>>,
}

/// The built-in bags: (name, message, words, phrases).
const BUILTIN: &[(&str, &str, &[&str], &[&str])] = &[
    (
        "polling",
        "Do not poll: wait on the event itself (a notification, a channel, the child's exit), with a deadline.",
        &["poll", "polls", "polled", "polling"],
        &["busy wait", "sleep loop", "check again every"],
    ),
    (
        "fallbacks",
        "No silent fallbacks: when the expected path fails, fail with a clear error instead of quietly doing something else.",
        &["fallback", "fallbacks"],
        &["fall back", "falls back", "falling back"],
    ),
    (
        "shims",
        "No shims or adapters around a problem: fix it where it is.",
        &["shim", "shims", "polyfill", "polyfills"],
        &["compatibility layer", "wrapper around the old"],
    ),
    (
        "backwards-compatibility",
        "No compatibility paths for callers that do not exist: change the code and its callers together.",
        &[],
        &[
            "backwards compatibility",
            "backward compatibility",
            "backwards compatible",
            "backward compatible",
            "legacy path",
            "deprecated alias",
        ],
    ),
];

/// The names of the built-in bags.
pub fn builtin_names() -> impl Iterator<Item = &'static str> {
    BUILTIN.iter().map(|b| b.0)
}

fn builtin(name: &str, message: &str, words: &[&str], phrases: &[&str]) -> Maxim {
    Maxim {
        name: name.into(),
        origin: Origin::Builtin,
        message: message.into(),
        words: words.iter().map(|w| w.to_string()).collect(),
        phrases: phrases.iter().map(|p| p.to_string()).collect(),
        lanes: vec![],
        profiles: vec![],
        projects: vec![],
        phases: vec![],
        judges: false,
    }
}

/// A maxim's name from its file name: lowercase letters, digits, `-` and `_`.
fn check_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_');
    if ok {
        Ok(())
    } else {
        Err(format!(
            "{name:?} is not a maxim name (lowercase letters, digits, '-' and '_', at most 64)"
        ))
    }
}

/// Parses one maxim file `file` (shown so in errors) named `name`.
pub fn parse_maxim(file: &Path, name: &str, text: &str) -> Result<Maxim, Vec<ConfigError>> {
    parse_maxim_with(file, name, text, true)
}

/// [`parse_maxim`], refusing `judges = true` when no judge is configured.
fn parse_maxim_with(
    file: &Path,
    name: &str,
    text: &str,
    judge_configured: bool,
) -> Result<Maxim, Vec<ConfigError>> {
    let raw: MaximToml =
        toml::from_str(text).map_err(|e| vec![ConfigError::from_toml(file, text, &e)])?;
    let mut errs = Vec::new();
    let mut at = |offset: usize, why: String| errs.push(ConfigError::at(file, text, offset, why));
    if let Err(e) = check_name(name) {
        at(0, e);
    }
    if raw.message.get_ref().trim().is_empty() {
        at(
            raw.message.span().start,
            "message: must not be empty".into(),
        );
    }
    let mut words = Vec::new();
    for w in &raw.words {
        match matcher::tokens(w.get_ref()).as_slice() {
            [one] => words.push(one.clone()),
            [] => at(w.span().start, "words: an empty word".into()),
            _ => at(
                w.span().start,
                format!(
                    "words: {:?} is more than one word (put it in phrases)",
                    w.get_ref()
                ),
            ),
        }
    }
    let mut phrases = Vec::new();
    for p in &raw.phrases {
        let t = matcher::tokens(p.get_ref());
        if t.len() < 2 {
            at(
                p.span().start,
                format!(
                    "phrases: {:?} is not two words or more (put it in words)",
                    p.get_ref()
                ),
            );
        } else {
            phrases.push(t.join(" "));
        }
    }
    if let Some(j) = raw
        .judges
        .as_ref()
        .filter(|j| *j.get_ref() && !judge_configured)
    {
        at(
            j.span().start,
            format!("judges: no judge is configured ([judge] in {DIR}/{SETTINGS})"),
        );
    }
    if raw.words.is_empty() && raw.phrases.is_empty() {
        at(0, "a maxim needs words or phrases to trigger on".into());
    }
    if errs.is_empty() {
        Ok(Maxim {
            name: name.into(),
            origin: Origin::Repository,
            message: raw.message.into_inner().trim().to_string(),
            words,
            phrases,
            lanes: raw.lanes,
            profiles: raw.profiles,
            projects: raw.projects,
            phases: raw.phases,
            judges: raw.judges.is_some_and(|j| *j.get_ref()),
        })
    } else {
        Err(errs)
    }
}

/// Parses the settings file: the built-ins switched off and the judge.
fn parse_settings(
    file: &Path,
    text: &str,
) -> Result<(Vec<String>, Option<JudgeConfig>), Vec<ConfigError>> {
    let raw: SettingsToml =
        toml::from_str(text).map_err(|e| vec![ConfigError::from_toml(file, text, &e)])?;
    let mut errs = Vec::new();
    let mut at = |offset: usize, why: String| errs.push(ConfigError::at(file, text, offset, why));
    let mut disabled = Vec::new();
    for d in &raw.disable {
        if builtin_names().any(|n| n == d.get_ref()) {
            disabled.push(d.get_ref().clone());
        } else {
            let known: Vec<&str> = builtin_names().collect();
            at(
                d.span().start,
                format!(
                    "disable: {:?} is no built-in maxim (they are: {})",
                    d.get_ref(),
                    known.join(", ")
                ),
            );
        }
    }
    let judge = raw.judge.map(|j| {
        if j.argv.get_ref().first().is_none_or(|p| p.is_empty()) {
            at(j.argv.span().start, "judge.argv: an empty command".into());
        }
        let timeout = match &j.timeout {
            None => DEFAULT_JUDGE_TIMEOUT,
            Some(t) => match crate::when::parse_duration(t.get_ref()) {
                Ok(d) if !d.is_zero() && d <= Duration::from_secs(3600) => d,
                Ok(_) => {
                    at(
                        t.span().start,
                        "judge.timeout: must be between 1s and 1h".into(),
                    );
                    DEFAULT_JUDGE_TIMEOUT
                }
                Err(e) => {
                    at(t.span().start, format!("judge.timeout: {e}"));
                    DEFAULT_JUDGE_TIMEOUT
                }
            },
        };
        let attempts = match &j.attempts {
            None => DEFAULT_ATTEMPTS,
            Some(a) => match u32::try_from(*a.get_ref()) {
                Ok(n) if (1..=MAX_ATTEMPTS).contains(&n) => n,
                _ => {
                    at(
                        a.span().start,
                        format!(
                            "judge.attempts: {} must be between 1 and {MAX_ATTEMPTS}",
                            a.get_ref()
                        ),
                    );
                    DEFAULT_ATTEMPTS
                }
            },
        };
        JudgeConfig {
            argv: j.argv.into_inner(),
            timeout,
            attempts,
        }
    });
    if errs.is_empty() {
        Ok((disabled, judge))
    } else {
        Err(errs)
    }
}

/// Builds the book from the files of a maxims directory, as `(file name, text)`:
/// the settings, every `*.toml` maxim, the built-ins not switched off. `shown` is how
/// the directory is named in errors (`maxims`, `maxims (at main)`).
pub fn compile(shown: &Path, files: &[(String, String)]) -> Result<Book, Vec<ConfigError>> {
    let mut errs = Vec::new();
    let mut book = Book::default();
    if let Some((name, text)) = files.iter().find(|(n, _)| n == SETTINGS) {
        match parse_settings(&shown.join(name), text) {
            Ok((disabled, judge)) => (book.disabled, book.judge) = (disabled, judge),
            Err(e) => errs.extend(e),
        }
    }
    for (name, message, words, phrases) in BUILTIN {
        if !book.disabled.iter().any(|d| d == name) {
            book.maxims.push(builtin(name, message, words, phrases));
        }
    }
    for (file, text) in files.iter().filter(|(n, _)| n != SETTINGS) {
        let Some(stem) = file.strip_suffix(".toml") else {
            continue;
        };
        let path = shown.join(file);
        match parse_maxim_with(&path, stem, text, book.judge.is_some()) {
            Ok(m) if book.maxims.iter().any(|b| b.name == m.name) => errs.push(ConfigError::whole(
                &path,
                format!("{stem:?} is a built-in maxim: disable it in {SETTINGS} first, or pick another name"),
            )),
            Ok(m) => book.maxims.push(m),
            Err(e) => errs.extend(e),
        }
    }
    if errs.is_empty() {
        Ok(book)
    } else {
        Err(errs)
    }
}

/// The maxims of the repository checked out at `repo` (its `maxims/` directory; the
/// built-ins alone when it has none).
pub fn load(repo: &Path) -> Result<Book, Vec<ConfigError>> {
    let dir = repo.join(DIR);
    let shown = PathBuf::from(DIR);
    let mut files = Vec::new();
    match std::fs::read_dir(&dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => {
            return Err(vec![ConfigError::whole(
                &shown,
                format!("cannot read it: {e}"),
            )])
        }
        Ok(rd) => {
            for entry in rd.flatten() {
                let name = entry.file_name().to_string_lossy().to_string();
                if !name.ends_with(".toml") {
                    continue;
                }
                let text = std::fs::read_to_string(entry.path()).map_err(|e| {
                    vec![ConfigError::whole(
                        &shown.join(&name),
                        format!("cannot read it: {e}"),
                    )]
                })?;
                files.push((name, text));
            }
        }
    }
    files.sort();
    compile(&shown, &files)
}

/// The maxims `rev` carries in the repository at `repo` (read with `git show`, shown
/// in errors as `maxims (at REV)/NAME.toml`).
pub fn at_rev(repo: &Path, rev: &str) -> Result<Book, Vec<ConfigError>> {
    let shown = PathBuf::from(format!("{DIR} (at {rev})"));
    let whole = |why: String| vec![ConfigError::whole(&shown, why)];
    let git = |args: &[&str]| crate::gate::scan::git(repo, args);
    git(&[
        "rev-parse",
        "--verify",
        "--quiet",
        &format!("{rev}^{{commit}}"),
    ])
    .map_err(|e| whole(format!("cannot read {rev}: {e}")))?;
    let listed = git(&["ls-tree", "--name-only", &format!("{rev}:{DIR}")]).unwrap_or_default();
    let mut files = Vec::new();
    for name in String::from_utf8_lossy(&listed).lines() {
        if !name.ends_with(".toml") {
            continue;
        }
        let text = git(&["show", &format!("{rev}:{DIR}/{name}")]).map_err(|e| {
            vec![ConfigError::whole(
                &shown.join(name),
                format!("cannot read it: {e}"),
            )]
        })?;
        files.push((
            name.to_string(),
            String::from_utf8_lossy(&text).into_owned(),
        ));
    }
    compile(&shown, &files)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn errors(files: &[(&str, &str)]) -> Vec<String> {
        let files: Vec<(String, String)> = files
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect();
        compile(Path::new("maxims"), &files)
            .err()
            .unwrap_or_default()
            .iter()
            .map(|e| e.to_string())
            .collect()
    }

    #[test]
    fn a_maxim_and_the_builtins() {
        let files = vec![
            ("conscience.toml".to_string(), "disable = [\"shims\"]\n".to_string()),
            (
                "no-sleep.toml".to_string(),
                "message = \"Wait on the thing.\"\nwords = [\"Sleep\"]\nphrases = [\"wait  a bit\"]\nlanes = [\"a\"]\n"
                    .to_string(),
            ),
        ];
        let book = compile(Path::new("maxims"), &files).unwrap();
        let names: Vec<&str> = book.maxims.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "polling",
                "fallbacks",
                "backwards-compatibility",
                "no-sleep"
            ]
        );
        let m = book.maxims.last().unwrap();
        assert_eq!(
            (m.words.clone(), m.phrases.clone()),
            (vec!["sleep".into()], vec!["wait a bit".into()])
        );
        let mut s = Scope {
            lane: "a".into(),
            ..Scope::default()
        };
        assert!(m.applies(&s));
        s.lane = "b".into();
        assert!(!m.applies(&s));
    }

    #[test]
    fn every_problem_is_located() {
        let e = errors(&[("x.toml", "message = \"m\"\nwords = [\"a b\"]\ncolour = 1\n")]);
        assert_eq!(e, ["maxims/x.toml:3:1: unknown field `colour`, expected one of `message`, `words`, `phrases`, `lanes`, `profiles`, `projects`, `phases`, `judges`"]);
        let e = errors(&[(
            "x.toml",
            "message = \"m\"\nwords = [\"a b\"]\nphrases = [\"one\"]\n",
        )]);
        assert_eq!(
            e,
            [
                "maxims/x.toml:2:10: words: \"a b\" is more than one word (put it in phrases)",
                "maxims/x.toml:3:12: phrases: \"one\" is not two words or more (put it in words)"
            ]
        );
        let e = errors(&[(
            "x.toml",
            "message = \"m\"\nwords = [\"w\"]\njudges = true\n",
        )]);
        assert_eq!(e, ["maxims/x.toml:3:10: judges: no judge is configured ([judge] in maxims/conscience.toml)"]);
        let e = errors(&[(
            "conscience.toml",
            "disable = [\"nope\"]\n[judge]\nargv = []\nattempts = 0\n",
        )]);
        assert_eq!(e.len(), 3, "{e:?}");
        assert!(e[0].starts_with("maxims/conscience.toml:1:12: disable: \"nope\" is no built-in"));
        assert_eq!(
            e[1],
            "maxims/conscience.toml:3:8: judge.argv: an empty command"
        );
        let e = errors(&[("Bad.toml", "message = \"m\"\nwords = [\"w\"]\n")]);
        assert!(
            e[0].starts_with("maxims/Bad.toml:1:1: \"Bad\" is not a maxim name"),
            "{e:?}"
        );
        let e = errors(&[("polling.toml", "message = \"m\"\nwords = [\"w\"]\n")]);
        assert!(e[0].contains("is a built-in maxim"), "{e:?}");
    }
}
