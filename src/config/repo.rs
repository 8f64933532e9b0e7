//! The repository's own `spice.toml`: the one place that knows which top-level
//! sections it may have, and the one reader of the copy a revision carries.
//!
//! Each section is read by its own module, strictly ([`section`]): `[gate]` by
//! `gate::config`, `[testbed]` by `bed::config`, `[hooks]` by `stage::config`,
//! `[notify]` by `fleet::notify`, `[archive]` and `[gc]` by `config::housekeeping`.
//! A module sees only its own section; a top-level name that is none of
//! [`SECTIONS`] is refused by whichever module reads the file, located
//! `spice.toml:line:col`, so a misspelt section is never silently ignored.

use crate::config::ConfigError;
use serde::de::{DeserializeOwned, DeserializeSeed, IgnoredAny, MapAccess, Visitor};
use std::fmt;
use std::marker::PhantomData;
use std::path::Path;
use std::process::{Command, Stdio};
use toml::Spanned;

/// The file at the repository's root.
pub const FILE: &str = "spice.toml";

/// Every top-level section of `spice.toml`.
pub const SECTIONS: &[&str] = &["gate", "testbed", "hooks", "notify", "archive", "gc"];

/// The section `name` of the `spice.toml` text shown as `file`, deserialized
/// strictly as `T` (its spans are the file's); `None` when the file has no such
/// section. A top-level name outside [`SECTIONS`] is an error.
pub fn section<T: DeserializeOwned>(
    file: &Path,
    text: &str,
    name: &'static str,
) -> Result<Option<T>, Vec<ConfigError>> {
    debug_assert!(
        SECTIONS.contains(&name),
        "{name} is not a spice.toml section"
    );
    let (found, unknown) = Only::<T>(name, PhantomData)
        .deserialize(toml::Deserializer::new(text))
        .map_err(|e| vec![ConfigError::from_toml(file, text, &e)])?;
    if unknown.is_empty() {
        return Ok(found);
    }
    let expected = SECTIONS
        .iter()
        .map(|s| format!("`{s}`"))
        .collect::<Vec<_>>();
    Err(unknown
        .iter()
        .map(|k| {
            let why = format!(
                "unknown section `{}`, expected one of {}",
                k.get_ref(),
                expected.join(", ")
            );
            ConfigError::at(file, text, k.span().start, why)
        })
        .collect())
}

/// What `rev` carries of `spice.toml` in the repository at `repo`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AtRev {
    /// `rev` names no commit (an unborn branch, or a name git cannot resolve).
    NoCommit,
    /// The commit has no `spice.toml`.
    NoFile,
    /// Its text, and the name errors show it under: `spice.toml (at REV)`.
    Text { shown: String, text: String },
}

/// Runs git in `dir` (no terminal prompt, C locale) and returns its stdout, or its
/// first line of stderr as the reason it failed.
pub fn git(dir: &Path, args: &[&str]) -> Result<Vec<u8>, String> {
    let mut cmd = Command::new("git");
    cmd.args(args)
        .current_dir(dir)
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("LC_ALL", "C");
    git_output(cmd, args)
}

/// Runs `cmd` (git with `args`, stdin closed) and returns its stdout, or its first
/// line of stderr as the reason it failed.
pub fn git_output(mut cmd: Command, args: &[&str]) -> Result<Vec<u8>, String> {
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("git: {e}"))?;
    if out.status.success() {
        Ok(out.stdout)
    } else {
        let err = String::from_utf8_lossy(&out.stderr);
        let line = err
            .lines()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("failed");
        Err(format!("git {}: {}", args.join(" "), line.trim()))
    }
}

/// Reads `spice.toml` at `rev` with git; a commit whose file cannot be listed or
/// read is an error (its configuration would otherwise be skipped).
pub fn at_rev(repo: &Path, rev: &str) -> Result<AtRev, Vec<ConfigError>> {
    let shown = format!("{FILE} (at {rev})");
    let whole = |why: String| vec![ConfigError::whole(Path::new(&shown), why)];
    let commit = format!("{rev}^{{commit}}");
    if git(repo, &["rev-parse", "--verify", "--quiet", &commit]).is_err() {
        return Ok(AtRev::NoCommit);
    }
    let listed = git(repo, &["ls-tree", "--name-only", rev, "--", FILE])
        .map_err(|e| whole(format!("cannot list {rev}: {e}")))?;
    if listed.is_empty() {
        return Ok(AtRev::NoFile);
    }
    let text = git(repo, &["show", &format!("{rev}:{FILE}")])
        .map_err(|e| whole(format!("cannot read it: {e}")))?;
    Ok(AtRev::Text {
        shown,
        text: String::from_utf8_lossy(&text).into_owned(),
    })
}

/// Deserializes a whole `spice.toml` keeping only the section it names.
struct Only<T>(&'static str, PhantomData<T>);

/// The section, and every top-level name outside [`SECTIONS`] where it stands.
type Found<T> = (Option<T>, Vec<Spanned<String>>);

impl<'de, T: DeserializeOwned> DeserializeSeed<'de> for Only<T> {
    type Value = Found<T>;

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Found<T>, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de, T: DeserializeOwned> Visitor<'de> for Only<T> {
    type Value = Found<T>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a table of spice.toml sections")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Found<T>, A::Error> {
        let (mut found, mut unknown) = (None, Vec::new());
        while let Some(key) = map.next_key::<Spanned<String>>()? {
            if key.get_ref() == self.0 {
                found = Some(map.next_value::<T>()?);
            } else {
                map.next_value::<IgnoredAny>()?;
                if !SECTIONS.contains(&key.get_ref().as_str()) {
                    unknown.push(key);
                }
            }
        }
        Ok((found, unknown))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Debug, Deserialize, PartialEq)]
    #[serde(deny_unknown_fields)]
    struct Hooks {
        on_claim: Vec<String>,
    }

    fn hooks(text: &str) -> Result<Option<Hooks>, String> {
        section::<Hooks>(Path::new("spice.toml"), text, "hooks").map_err(|e| e[0].to_string())
    }

    #[test]
    fn only_its_own_section_is_read() {
        let text = "[gate]\nflex = 'not even a number'\n[hooks]\non_claim = ['x']\n";
        assert_eq!(
            hooks(text),
            Ok(Some(Hooks {
                on_claim: vec!["x".into()]
            }))
        );
        assert_eq!(hooks("[gate]\n"), Ok(None));
        assert_eq!(hooks(""), Ok(None));
    }

    #[test]
    fn problems_are_located() {
        let e = hooks("[gate]\n[tesbed]\npaths = []\n").unwrap_err();
        assert!(
            e.starts_with("spice.toml:2:2: unknown section `tesbed`, expected one of `gate`,"),
            "{e}"
        );
        let e = hooks("[hooks]\non_clam = ['x']\n").unwrap_err();
        assert!(
            e.starts_with("spice.toml:2:1: unknown field `on_clam`"),
            "{e}"
        );
        let e = hooks("[hooks]\non_claim = 3\n").unwrap_err();
        assert!(e.starts_with("spice.toml:2:12: "), "{e}");
        // Another section's shape is its own module's business.
        assert_eq!(hooks("gate = 3\n"), Ok(None));
    }
}
