//! `spice gate install`: git hooks that run the gate, in the hooks directory git
//! itself uses (`core.hooksPath` when set, else the common `hooks/`, shared by every
//! worktree). A hook already there is never overwritten: it is kept beside ours as
//! `NAME.spice-chained` and run first, with the same arguments; ours runs only if it
//! passed. `spice gate uninstall` removes only what install wrote, and puts a chained
//! hook back.

use super::scan::{git, Repo};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// The hooks spice writes.
pub const HOOKS: &[&str] = &["pre-commit", "commit-msg", "prepare-commit-msg"];
/// How the hooks' last line starts when they refuse a commit (what a briefing looks
/// for in an agent's command output).
pub const REFUSED: &str = "spice gate: commit refused";
/// The line that marks a hook as ours.
pub const MARK: &str = "# spice gate hook: written by `spice gate install`";
const CHAINED: &str = "spice-chained";

/// The directory git runs hooks from, for the repository at `repo`.
pub fn dir(repo: &Repo) -> Result<PathBuf, String> {
    let out = git(
        &repo.root,
        &["rev-parse", "--path-format=absolute", "--git-path", "hooks"],
    )?;
    Ok(PathBuf::from(
        String::from_utf8_lossy(&out).trim_end_matches('\n'),
    ))
}

/// A hook's script: POSIX sh, no process of its own before spice's (the hooks sit on
/// every commit's path); prepare-commit-msg only adds a task's trailers, so outside
/// a task it ends without starting spice.
fn script(hook: &str, spice: &Path) -> String {
    let spice = spice.display().to_string().replace('\'', "'\\''");
    let only_in_a_task = if hook == "prepare-commit-msg" {
        "[ -n \"$SPICE_TASK\" ] || exit 0\n"
    } else {
        ""
    };
    format!(
        "#!/bin/sh\n\
         {MARK}; `spice gate uninstall` removes it.\n\
         case \"$0\" in */*) dir=${{0%/*}} ;; *) dir=. ;; esac\n\
         if [ -x \"$dir/{hook}.{CHAINED}\" ]; then\n\
         \x20   \"$dir/{hook}.{CHAINED}\" \"$@\" || exit $?\n\
         fi\n\
         {only_in_a_task}\
         spice='{spice}'\n\
         [ -x \"$spice\" ] || spice=spice\n\
         exec \"$spice\" gate hook {hook} \"$@\"\n"
    )
}

fn ours(path: &Path) -> bool {
    std::fs::read_to_string(path).is_ok_and(|t| t.contains(MARK))
}

/// What install or uninstall did to one hook.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Change {
    pub hook: String,
    pub path: String,
    /// `installed`, `chained` (an existing hook kept and run first), `already`,
    /// `updated` (ours, rewritten by a newer spice),
    /// `removed`, `restored` (the chained hook put back), `absent`, `foreign`.
    pub action: String,
}

/// Writes the hooks, running as `spice` (this binary's path).
pub fn install(repo: &Repo, spice: &Path) -> Result<Vec<Change>, String> {
    let dir = dir(repo)?;
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut out = Vec::new();
    for hook in HOOKS {
        let path = dir.join(hook);
        let mut action = "installed";
        let text = script(hook, spice);
        if ours(&path) {
            let same = std::fs::read_to_string(&path).is_ok_and(|t| t == text);
            action = if same { "already" } else { "updated" };
        } else if path.symlink_metadata().is_ok() {
            let kept = dir.join(format!("{hook}.{CHAINED}"));
            if kept.symlink_metadata().is_ok() {
                return Err(format!(
                    "{}: exists, and so does {}: move one away first",
                    path.display(),
                    kept.display()
                ));
            }
            std::fs::rename(&path, &kept).map_err(|e| format!("{}: {e}", path.display()))?;
            action = "chained";
        }
        let tmp = dir.join(format!(".{hook}.spice-tmp"));
        std::fs::write(&tmp, &text).map_err(|e| format!("{}: {e}", tmp.display()))?;
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o755))
            .map_err(|e| format!("{}: {e}", tmp.display()))?;
        std::fs::rename(&tmp, &path).map_err(|e| format!("{}: {e}", path.display()))?;
        out.push(Change {
            hook: hook.to_string(),
            path: path.display().to_string(),
            action: action.into(),
        });
    }
    Ok(out)
}

/// Removes our hooks; a hook we chained goes back in its place. A hook that is not
/// ours is left alone.
pub fn uninstall(repo: &Repo) -> Result<Vec<Change>, String> {
    let dir = dir(repo)?;
    let mut out = Vec::new();
    for hook in HOOKS {
        let path = dir.join(hook);
        let kept = dir.join(format!("{hook}.{CHAINED}"));
        let action = if ours(&path) {
            std::fs::remove_file(&path).map_err(|e| format!("{}: {e}", path.display()))?;
            if kept.symlink_metadata().is_ok() {
                std::fs::rename(&kept, &path).map_err(|e| format!("{}: {e}", kept.display()))?;
                "restored"
            } else {
                "removed"
            }
        } else if path.symlink_metadata().is_ok() {
            "foreign"
        } else {
            "absent"
        };
        out.push(Change {
            hook: hook.to_string(),
            path: path.display().to_string(),
            action: action.into(),
        });
    }
    Ok(out)
}
