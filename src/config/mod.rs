//! Lanes and profiles as files: strict TOML (unknown keys are errors) with every
//! error located as `file:line:col: reason` on one line.
//!
//! `lane` and `profile` parse one file each; `fleet` reads every lane and profile of a
//! repository, resolves lanes against profiles (built-in or overriding files) and
//! reports every problem at once, each as a [`ConfigError`].

pub mod fleet;
pub mod housekeeping;
pub mod lane;
pub mod profile;
pub mod repo;
pub mod size;
pub mod state;

use crate::error::Error;
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

/// One configuration problem, printed as `file:line:col: reason` (1-based, one line).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// The file as it should be shown: relative to the repository when under it.
    pub file: PathBuf,
    pub line: usize,
    pub col: usize,
    pub reason: String,
}

impl ConfigError {
    /// A problem at byte `offset` of `text`, the contents of `file`.
    pub fn at(file: &Path, text: &str, offset: usize, reason: impl Into<String>) -> ConfigError {
        let (line, col) = line_col(text, offset);
        ConfigError {
            file: file.to_path_buf(),
            line,
            col,
            reason: one_line(&reason.into()),
        }
    }

    /// A problem with the file as a whole (its name, or reading it): `file:1:1`.
    pub fn whole(file: &Path, reason: impl Into<String>) -> ConfigError {
        ConfigError::at(file, "", 0, reason)
    }

    /// A TOML syntax or type error, located by toml's span (the file's start if none).
    pub fn from_toml(file: &Path, text: &str, e: &toml::de::Error) -> ConfigError {
        let offset = e.span().map_or(0, |s| s.start);
        ConfigError::at(file, text, offset, e.message().trim())
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (file, line, col) = (self.file.display(), self.line, self.col);
        write!(f, "{file}:{line}:{col}: {}", self.reason)
    }
}

impl From<ConfigError> for Error {
    fn from(e: ConfigError) -> Error {
        Error::input(e.to_string())
    }
}

/// Turns a TOML deserialisation error into `file:line:col: message`.
pub fn toml_error(path: &Path, text: &str, e: &toml::de::Error) -> Error {
    ConfigError::from_toml(path, text, e).into()
}

/// 1-based line and column of a byte offset.
pub fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, col)
}

fn one_line(s: &str) -> String {
    s.split('\n').map(str::trim).collect::<Vec<_>>().join(" ")
}

/// Variables the supervisor sets for every agent; a lane or profile may not set them,
/// since the agent's steering and shell redirection depend on their values.
const SUPERVISOR_ENV: [&str; 2] = ["BASH_ENV", "ZDOTDIR"];

/// Checks the keys of an `env` table: POSIX variable names (`[A-Za-z_][A-Za-z0-9_]*`)
/// that the supervisor does not own (`SPICE_*`, `BASH_ENV`, `ZDOTDIR`).
pub fn check_env(
    file: &Path,
    text: &str,
    env: &BTreeMap<toml::Spanned<String>, String>,
) -> Vec<ConfigError> {
    let mut errors = Vec::new();
    for key in env.keys() {
        let name = key.get_ref();
        let valid = name
            .bytes()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == b'_')
            && name.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'_');
        let reason = if !valid {
            format!("invalid environment variable name '{name}': use letters, digits and '_', not starting with a digit")
        } else if name.starts_with("SPICE_") || SUPERVISOR_ENV.contains(&name.as_str()) {
            format!(
                "environment variable '{name}' is set by the supervisor and cannot be configured"
            )
        } else {
            continue;
        };
        errors.push(ConfigError::at(file, text, key.span().start, reason));
    }
    errors
}
