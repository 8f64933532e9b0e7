//! Branch names for tasks.
//!
//! Invariant: [`task_branch`] always returns a valid ref name (`git check-ref-format
//! --branch` accepts it) of the form `spice/<one component>`, and two different
//! handles never share a branch: a handle used as it is cannot collide with a handle
//! that had to be altered, because every altered handle carries a hash of the original.
//! One component, never nested, because `spice/a` and `spice/a/b` cannot both exist.

use xxhash_rust::xxh3::xxh3_64;

/// The namespace of every task branch spice creates.
pub const PREFIX: &str = "spice/";

/// Longest component kept before the hash, well under file-name limits for loose refs.
const MAX_LEN: usize = 80;

/// The branch a task's worktree is on: `spice/<handle>`, sanitised.
///
/// Handles are `PROJECT-stamp` and pass through unchanged. Anything else keeps ASCII
/// letters, digits, `-` and `_`, turns every other run of characters (including `.`,
/// `/`, spaces, `@{`, control and non-ASCII characters) into one `-`, and gets
/// `-<8 hex digits of XXH3(handle)>` so the altered name stays unique.
pub fn task_branch(handle: &str) -> String {
    let mut out = String::with_capacity(handle.len() + 9);
    let mut pending_dash = false;
    for c in handle.chars() {
        if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
            if pending_dash && !out.is_empty() {
                out.push('-');
            }
            pending_dash = false;
            out.push(c);
        } else {
            pending_dash = true;
        }
    }
    let capped: String = out.trim_start_matches('-').chars().take(MAX_LEN).collect();
    let mut name = capped.trim_end_matches('-').to_string();
    if name != handle || name.is_empty() {
        if name.is_empty() {
            name.push_str("task");
        }
        name = format!("{name}-{:08x}", xxh3_64(handle.as_bytes()) as u32);
    }
    format!("{PREFIX}{name}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ordinary_handles_pass_through() {
        assert_eq!(task_branch("web-Bc3dFg5hJ"), "spice/web-Bc3dFg5hJ");
        assert_eq!(task_branch("Bc3dFg5hJ"), "spice/Bc3dFg5hJ");
        assert_eq!(
            task_branch("my_proj-Bc3dFg5hJ-2"),
            "spice/my_proj-Bc3dFg5hJ-2"
        );
    }

    #[test]
    fn odd_handles_are_cleaned_and_hashed() {
        let b = task_branch("a b/c..d");
        assert!(b.starts_with("spice/a-b-c-d-"), "{b}");
        assert_eq!(b.len(), "spice/a-b-c-d-".len() + 8);
        assert!(task_branch("").starts_with("spice/task-"));
        assert!(task_branch("..").starts_with("spice/task-"));
        assert!(task_branch("@{x}.lock").starts_with("spice/x-lock-"));
        assert!(task_branch("-x-").starts_with("spice/x-"));
    }

    #[test]
    fn altered_handles_do_not_collide() {
        assert_ne!(task_branch("a b"), task_branch("a.b"));
        assert_ne!(task_branch("a b"), task_branch("a-b"));
        assert_eq!(task_branch("a b"), task_branch("a b"));
    }

    #[test]
    fn long_handles_are_capped() {
        let b = task_branch(&"x".repeat(500));
        assert_eq!(b.len(), PREFIX.len() + MAX_LEN + 9);
    }

    #[test]
    fn only_safe_characters_remain() {
        for h in [
            "é-ü", "a\u{0}b", "a\tb", "~^:?*[\\", "a//b", "x.", ".x", "ẞ",
        ] {
            let b = task_branch(h);
            let rest = b.strip_prefix(PREFIX).unwrap();
            assert!(!rest.is_empty() && !rest.starts_with('-') && !rest.ends_with('-'));
            assert!(
                rest.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_'),
                "{h:?} -> {b:?}"
            );
        }
    }
}
