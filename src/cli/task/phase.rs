//! `spice task phase ID --done`: completing a task's current phase from the command
//! line. The merge, the step and the release are the library's (`crate::land`); this
//! layer supplies only what the library may not read itself and reports the outcome.
//! A failed push or a failing `on_release` hook is reported and goes on: the merge is
//! kept locally and the release stands.

use super::super::Env;
use crate::error::Result;
use crate::store::{Authority, Holder};

/// Completes `id`'s current phase and prints the step (and the merge, unless `json`).
pub(super) fn done(
    a: &mut dyn Authority,
    env: &Env,
    id: &str,
    holder: Option<&Holder>,
    json: bool,
) -> Result<()> {
    // Completing a phase (the merge and the step) is behind the Authority.
    let (out, err) = phase_done(a, env, id, holder)?.report(json);
    print(out, err);
    Ok(())
}

/// Prints a phase's report: its stderr lines, then its stdout lines.
pub(super) fn print(out: Vec<String>, err: Vec<String>) {
    for line in err {
        eprintln!("{line}");
    }
    for line in out {
        println!("{line}");
    }
}

/// Git boundary 2, through the library: the CLI only supplies what the library may
/// not read itself (the lanes directory of the repository the caller runs in, a
/// fallback for lane files). Where the branch merges comes from the claim and the
/// lane, never from the caller's environment (`phase_done`'s module doc).
fn phase_done(
    s: &mut dyn Authority,
    env: &Env,
    id: &str,
    holder: Option<&Holder>,
) -> Result<crate::phase_done::Landed> {
    let runner = crate::git::Runner::new(std::env::vars_os());
    let lanes_dir = env.lanes_dir().ok();
    crate::phase_done::complete_phase(
        s,
        &crate::phase_done::PhaseDone {
            task: id,
            holder,
            runner: &runner,
            lanes_dir: lanes_dir.as_deref(),
            home: Some(&env.state_dir),
            repo: None,
            confine: None,
            sandbox_env: &[],
        },
    )
}
