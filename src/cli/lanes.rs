//! Which lanes the repository defines, for the commands that take a lane's name.
//!
//! A lane exists when `lanes/NAME.toml` of the repository the command runs in defines
//! it: the rule `spice steer lane:NAME` has always applied, and the one every command
//! naming a lane (`budget raise|stop`, `fleet attach|lift`, `conscience scan --lane`,
//! `task next --lane`; `inbox lane:NAME` and `conscience log --lane` through
//! [`require_or_seen`]) checks through [`require`], so an unknown name is refused in
//! the same words everywhere, with the lanes that do exist. `fleet up` and `fleet
//! check` say what to do about a repository with none ([`none_defined`]).

use super::Env;
use crate::error::{Error, Result};
use std::path::Path;

/// Refuses `name` unless a lane file of the repository defines it: an error naming the
/// file looked for and the lanes there are, or saying no lane can be known outside a
/// git repository.
pub(crate) fn require(env: &Env, name: &str) -> Result<()> {
    crate::config::lane::check_lane_name(name)?;
    let Ok(dir) = env.lanes_dir() else {
        return Err(Error::input(format!(
            "cannot tell whether lane '{name}' exists: not inside a git repository \
             (lanes live in its lanes/ directory)"
        )));
    };
    let file = dir.join(format!("{name}.toml"));
    if file.is_file() {
        return Ok(());
    }
    let lanes = defined(&dir);
    let known = if lanes.is_empty() {
        format!("there are none: {}", how_to_add())
    } else {
        format!("the lanes are {}", lanes.join(", "))
    };
    Err(Error::input(format!(
        "unknown lane '{name}': no {} defines it ({known})",
        file.display()
    )))
}

/// [`require`], or a lane the store has a row for: the listings that read history
/// (`inbox lane:NAME`, `conscience log --lane`) still reach a lane whose file is gone.
pub(crate) fn require_or_seen(
    env: &Env,
    store: &mut dyn crate::store::Authority,
    name: &str,
) -> Result<()> {
    match require(env, name) {
        Ok(()) => Ok(()),
        Err(_) if store.lanes()?.iter().any(|r| r.name == name) => Ok(()),
        Err(e) => Err(e),
    }
}

/// The lanes `dir` (a repository's `lanes/`) defines, in name order: the stems of its
/// `*.toml` files that are valid lane names. None when it is missing or unreadable.
pub(crate) fn defined(dir: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut names: Vec<String> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml") && p.is_file())
        .filter_map(|p| Some(p.file_stem()?.to_str()?.to_string()))
        .filter(|n| crate::config::lane::check_lane_name(n).is_ok())
        .collect();
    names.sort();
    names
}

/// What `fleet up` refuses and `fleet check` reports for a repository whose `dir`
/// holds no lane file.
pub(crate) fn none_defined(dir: &Path) -> String {
    format!("no lanes in {}: {}", dir.display(), how_to_add())
}

fn how_to_add() -> &'static str {
    "add one as lanes/NAME.toml holding `profile = \"claude\"`, or run `spice demo` \
     to see a fleet at work"
}
