//! How deep a process is in a chain of processes spice launched: `SPICE_DEPTH`.
//!
//! Every process spice starts (agents, headless turns, stage hooks, warm commands,
//! gate checks, judges) carries `SPICE_DEPTH` = this process's depth plus one; a
//! process without it is at depth 0 (the operator's). A command that starts agents
//! (`fleet up`, `demo`, `conscience scan`) refuses to when its own depth is at or past
//! the maximum, `SPICE_MAX_DEPTH` (default [`DEFAULT_MAX`]): with the default, the
//! operator's fleet runs agents at depth 1, whose own `spice fleet up` runs agents at
//! depth 2, and those cannot start any, so a runaway recursion is cut off.
//!
//! The CLI reads both variables (it is the only layer that reads the environment) and
//! sets [`set_current`]; the library only asks [`child`] for the value to pass down.

use crate::error::{Error, Result};
use std::sync::atomic::{AtomicU32, Ordering};

pub const VAR: &str = "SPICE_DEPTH";
pub const MAX_VAR: &str = "SPICE_MAX_DEPTH";
pub const DEFAULT_MAX: u32 = 2;

static CURRENT: AtomicU32 = AtomicU32::new(0);

/// Sets this process's depth (the CLI, from `SPICE_DEPTH`).
pub fn set_current(depth: u32) {
    CURRENT.store(depth, Ordering::SeqCst);
}

/// This process's depth.
pub fn current() -> u32 {
    CURRENT.load(Ordering::SeqCst)
}

/// The `SPICE_DEPTH` a process this one launches carries.
pub fn child() -> String {
    current().saturating_add(1).to_string()
}

/// A depth variable's value: `None` when unset or empty, an error naming the
/// variable when it is not a whole number.
pub fn parse(var: &str, value: Option<&str>) -> Result<Option<u32>> {
    match value.map(str::trim).filter(|v| !v.is_empty()) {
        None => Ok(None),
        Some(v) => v.parse::<u32>().map(Some).map_err(|_| {
            Error::input(format!(
                "{var}={v:?}: not a whole number (the depth of spice-launched processes)"
            ))
        }),
    }
}

/// Refuses to start agents at `depth` when it is at or past `max`.
pub fn check_launch(depth: u32, max: u32) -> Result<()> {
    if depth >= max {
        return Err(Error::conflict(format!(
            "refusing to start agents: {VAR} is {depth}, at or past the maximum {max} \
             (this spice runs under agents spice launched; raise {MAX_VAR} to allow deeper)"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_and_limits() {
        assert_eq!(parse(VAR, None).unwrap(), None);
        assert_eq!(parse(VAR, Some("")).unwrap(), None);
        assert_eq!(parse(VAR, Some(" 2 ")).unwrap(), Some(2));
        let e = parse(VAR, Some("two")).unwrap_err().to_string();
        assert!(e.contains("SPICE_DEPTH=\"two\": not a whole number"), "{e}");
        assert!(check_launch(0, 2).is_ok());
        assert!(check_launch(1, 2).is_ok());
        let e = check_launch(2, 2).unwrap_err().to_string();
        assert!(
            e.contains("SPICE_DEPTH is 2, at or past the maximum 2"),
            "{e}"
        );
        assert!(check_launch(3, 2).is_err());
    }
}
