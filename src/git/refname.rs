//! Branch names: the rules of `git check-ref-format --branch`, checked without running
//! git ([`check_branch_name`], for configuration), and the branches of tasks.
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

/// Why `name` is not a branch name git accepts (`git check-ref-format --branch`), or
/// `Ok`. The rules, in git's words: no component starts with `.` or ends with `.lock`;
/// no `..`, `@{`, `//`, control characters, spaces, `~^:?*[\\`; no leading or trailing
/// `/`, no trailing `.`; not `HEAD`, and, as a branch, no leading `-`. Beyond git: not
/// `@`, which every revision argument reads as HEAD.
pub fn check_branch_name(name: &str) -> Result<(), String> {
    let why = if name.is_empty() {
        "it is empty"
    } else if name.starts_with('-') {
        "it starts with '-' (it would read as an option)"
    } else if name == "@" || name == "HEAD" {
        "it reads as HEAD"
    } else if name.starts_with('/') || name.ends_with('/') {
        "it starts or ends with '/'"
    } else if name.ends_with('.') {
        "it ends with '.'"
    } else if name.contains("//") {
        "it contains '//'"
    } else if name.contains("..") {
        "it contains '..'"
    } else if name.contains("@{") {
        "it contains '@{'"
    } else if let Some(c) = name
        .chars()
        .find(|&c| c.is_ascii_control() || " ~^:?*[\\".contains(c))
    {
        return Err(format!("it contains {c:?}"));
    } else if name.split('/').any(|c| c.starts_with('.')) {
        "a component starts with '.'"
    } else if name.split('/').any(|c| c.ends_with(".lock")) {
        "a component ends with '.lock'"
    } else {
        return Ok(());
    };
    Err(why.to_string())
}

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

    /// The rules agree with git itself, on names that break each rule and on near
    /// misses that do not.
    #[test]
    fn branch_names_follow_git() {
        let names = [
            "main",
            "dev/x",
            "feature/a.b",
            "v1.0",
            "a-b_c",
            "ünï",
            "a@b",
            "@x",
            "x.lock2",
            "a.lockx/b",
            "",
            "-x",
            "@",
            "HEAD",
            "/a",
            "a/",
            "a.",
            "a//b",
            "a..b",
            "../../etc",
            "a@{b",
            "a b",
            "a~1",
            "a^",
            "a:b",
            "a?",
            "a*",
            "a[b",
            "a\\b",
            "a\tb",
            "a\u{7f}",
            ".a",
            "a/.b",
            "a.lock",
            "a/b.lock",
            "a/b.lock/c",
        ];
        let git = |args: &[&str]| {
            std::process::Command::new("git")
                .args(args)
                .output()
                .expect("git runs")
                .status
                .success()
        };
        // `--branch` itself expands `@` to the current branch, so the ref rules are
        // asked of `refs/heads/NAME`; the two rules only `--branch` adds are checked
        // against it apart. `@` is a ref git allows, refused here: in every revision
        // argument it means HEAD.
        assert!(!git(&["check-ref-format", "--branch", "-x"]));
        assert!(!git(&["check-ref-format", "--branch", "HEAD"]));
        for name in names {
            let ok = git(&["check-ref-format", &format!("refs/heads/{name}")])
                && !name.starts_with('-')
                && name != "HEAD"
                && name != "@";
            assert_eq!(
                check_branch_name(name).is_ok(),
                ok,
                "{name:?}: {:?}",
                check_branch_name(name)
            );
        }
    }

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
