//! What spice may delete or move among beds: only what lies under a root it owns,
//! named by a manifest whose every field checks out.
//!
//! Templates and pooled worktrees are described by JSON manifests under the git
//! directory, which an unconfined agent can write. A manifest is therefore input, not
//! truth: its `id` must be a plain name (no separator, no `..`) equal to where the
//! manifest sits, and the paths it names must be exactly the ones spice derives from
//! that id. Before anything is removed or moved, the path's real location (symlinks
//! resolved) must still lie strictly under the owned root: a directory replaced by a
//! symlink to a live worktree is refused, not followed.

use crate::error::{Error, Result};
use std::path::{Path, PathBuf};

/// Whether `id` may name a directory under an owned root: ASCII letters, digits,
/// `-`, `_` and `.`, not empty, not starting with `.`, at most 128 bytes.
pub fn plain_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 128
        && !id.starts_with('.')
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

/// Checks a manifest's `id` against the name it was found under, and a path field
/// against the one derived from that id; the error names the manifest and the field.
pub fn check_manifest(
    manifest: &Path,
    id: &str,
    found_as: &str,
    field: &str,
    path: &Path,
    expected: &Path,
) -> std::result::Result<(), String> {
    if !plain_id(id) {
        return Err(format!(
            "{}: field id {id:?} is not a plain name; ignored",
            manifest.display()
        ));
    }
    if id != found_as {
        return Err(format!(
            "{}: field id {id:?} does not match its place {found_as:?}; ignored",
            manifest.display()
        ));
    }
    if path != expected {
        return Err(format!(
            "{}: field {field} {} is not {}; ignored",
            manifest.display(),
            path.display(),
            expected.display()
        ));
    }
    Ok(())
}

/// The real path of `path` when it lies strictly under the real path of `root` and is
/// no symlink itself; an error saying what was refused otherwise. A path that does not
/// exist yields `Ok(None)`: there is nothing to remove.
pub fn under(root: &Path, path: &Path, doing: &str) -> Result<Option<PathBuf>> {
    let refuse = |why: String| {
        Err(Error::Other(format!(
            "refusing {doing} {}: {why}",
            path.display()
        )))
    };
    let meta = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return refuse(e.to_string()),
    };
    if meta.file_type().is_symlink() {
        return refuse("it is a symbolic link".into());
    }
    let real_root = match root.canonicalize() {
        Ok(r) => r,
        Err(e) => return refuse(format!("{}: {e}", root.display())),
    };
    let real = match path.canonicalize() {
        Ok(r) => r,
        Err(e) => return refuse(e.to_string()),
    };
    if real == real_root || !real.starts_with(&real_root) {
        return refuse(format!(
            "it resolves to {}, outside {}",
            real.display(),
            real_root.display()
        ));
    }
    Ok(Some(real))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_names_are_ids() {
        for ok in ["abc123", "a-b_c.d", "T-1-x"] {
            assert!(plain_id(ok), "{ok}");
        }
        for bad in ["", ".", "..", "../x", "a/b", ".hidden", "a\\b", "x y", "é"] {
            assert!(!plain_id(bad), "{bad}");
        }
        assert!(!plain_id(&"a".repeat(129)));
    }

    #[test]
    fn a_manifest_must_sit_where_its_id_says_and_name_the_derived_path() {
        let m = Path::new("/r/x/bed.json");
        let exp = Path::new("/r/x/tree");
        assert!(check_manifest(m, "x", "x", "tree", exp, exp).is_ok());
        let e = check_manifest(m, "../../v", "x", "tree", exp, exp).unwrap_err();
        assert!(e.contains("field id") && e.contains("/r/x/bed.json"), "{e}");
        assert!(check_manifest(m, "y", "x", "tree", exp, exp).is_err());
        let e = check_manifest(m, "x", "x", "tree", Path::new("/live/wt"), exp).unwrap_err();
        assert!(e.contains("field tree /live/wt"), "{e}");
    }

    #[test]
    fn a_path_must_resolve_under_the_root_and_be_no_symlink() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path().join("root");
        let outside = d.path().join("outside");
        std::fs::create_dir_all(root.join("inside")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        assert!(under(&root, &root.join("inside"), "removing")
            .unwrap()
            .is_some());
        assert!(under(&root, &root.join("gone"), "removing")
            .unwrap()
            .is_none());
        assert!(under(&root, &root, "removing").is_err());
        assert!(under(&root, &root.join("../outside"), "removing").is_err());
        std::os::unix::fs::symlink(&outside, root.join("link")).unwrap();
        let e = under(&root, &root.join("link"), "removing")
            .unwrap_err()
            .to_string();
        assert!(e.contains("symbolic link"), "{e}");
        // A symlinked parent inside the root is resolved, and refused when it leads out.
        assert!(under(&root, &root.join("link/."), "removing").is_err());
    }
}
