//! `lanes/NAME.toml`: one agent seat. The name of the file is the name of the lane.

use super::toml_error;
use crate::error::{Error, Result};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Lane {
    /// The profile (agent CLI) this lane runs.
    pub profile: String,
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
    /// Lease length, e.g. "30m".
    pub lease: Option<toml::Spanned<String>>,
    /// Renewal interval, e.g. "5m".
    pub renew: Option<toml::Spanned<String>>,
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    pub model: Option<String>,
    #[serde(default = "yes")]
    pub enabled: bool,
}

fn yes() -> bool {
    true
}

/// Lane names become file, branch and directory names: keep them plain.
pub fn check_lane_name(name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_')
        && !name.starts_with('-');
    if ok {
        Ok(())
    } else {
        Err(Error::input(format!(
            "invalid lane name '{name}': use letters, digits, '-' and '_' (at most 64)"
        )))
    }
}

/// Reads `dir/NAME.toml`.
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

pub fn parse(path: &Path, text: &str) -> Result<Lane> {
    let lane: Lane = toml::from_str(text).map_err(|e| toml_error(path, text, &e))?;
    for (field, value) in [("lease", &lane.lease), ("renew", &lane.renew)] {
        if let Some(v) = value {
            crate::when::parse_duration(v.get_ref()).map_err(|e| {
                let (l, c) = super::line_col(text, v.span().start);
                Error::input(format!("{}:{l}:{c}: field '{field}': {e}", path.display()))
            })?;
        }
    }
    Ok(lane)
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
    }
}
