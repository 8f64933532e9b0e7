//! Branch names: the rules of `git check-ref-format --branch`, checked without running
//! git ([`check_branch_name`], for configuration), and the branches of tasks.
//!
//! Invariant: [`task_branch`] always returns a valid ref name (`git check-ref-format
//! --branch` accepts it) of the form `spice/<name>/work`, and two different handles
//! never share a name: a handle used as it is cannot collide with a handle that had
//! to be altered, because every altered handle carries a hash of the original.
//!
//! Why a directory per task: git writes a branch by creating `NAME.lock` beside the
//! ref and renaming it over the ref, so what may move a branch is whoever may create
//! and remove files in its directory. With each task's branch alone in
//! `refs/heads/spice/<name>/`, a confined agent is granted that directory (and its
//! reflog's) and no other: it commits its own branch and cannot move any other
//! (`fleet::confine`). Branches of the earlier layout (`spice/<name>`) are renamed
//! into it when their task next launches ([`legacy_task_branch`]).

use xxhash_rust::xxh3::xxh3_64;

/// The namespace of every task branch spice creates.
pub const PREFIX: &str = "spice/";

/// The last component of a task branch: its directory is the task's own.
pub const LEAF: &str = "work";

/// The file that keeps a task branch's directory when git packs and prunes its refs
/// (git skips names starting with a dot when it reads loose refs; no ref has one), so
/// a confined agent never needs to create the directory it was granted.
pub const KEEP: &str = ".keep";

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
    format!("{PREFIX}{name}/{LEAF}")
}

/// The name `branch` (a [`task_branch`]) had in the earlier layout, `spice/<name>`.
pub fn legacy_task_branch(branch: &str) -> Option<&str> {
    branch.strip_suffix(LEAF)?.strip_suffix('/')
}

/// The task directory part of a task branch, `<name>` of `spice/<name>/work` (or of a
/// legacy `spice/<name>`); `None` for any other branch, an agent's own included.
pub fn task_of_branch(branch: &str) -> Option<&str> {
    let rest = branch.strip_prefix(PREFIX)?;
    let name = rest
        .strip_suffix(LEAF)
        .and_then(|r| r.strip_suffix('/'))
        .unwrap_or(rest);
    (!name.is_empty() && !name.contains('/')).then_some(name)
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
        assert_eq!(task_branch("web-Bc3dFg5hJ"), "spice/web-Bc3dFg5hJ/work");
        assert_eq!(task_branch("Bc3dFg5hJ"), "spice/Bc3dFg5hJ/work");
        assert_eq!(
            task_branch("my_proj-Bc3dFg5hJ-2"),
            "spice/my_proj-Bc3dFg5hJ-2/work"
        );
    }

    #[test]
    fn a_task_branch_names_its_task_and_its_earlier_name() {
        let b = task_branch("web-1");
        assert_eq!(legacy_task_branch(&b), Some("spice/web-1"));
        assert_eq!(task_of_branch(&b), Some("web-1"));
        assert_eq!(task_of_branch("spice/web-1"), Some("web-1"));
        for other in [
            "main",
            "spice/web-1/mine",
            "spice/a/b/work",
            "spice/",
            "spice//work",
        ] {
            assert_eq!(task_of_branch(other), None, "{other}");
        }
        assert!(check_branch_name(&b).is_ok());
    }

    #[test]
    fn odd_handles_are_cleaned_and_hashed() {
        let b = task_branch("a b/c..d");
        assert!(b.starts_with("spice/a-b-c-d-"), "{b}");
        assert_eq!(b.len(), "spice/a-b-c-d-".len() + 8 + "/work".len());
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
        assert_eq!(b.len(), PREFIX.len() + MAX_LEN + 9 + 1 + LEAF.len());
    }

    #[test]
    fn only_safe_characters_remain() {
        for h in [
            "é-ü", "a\u{0}b", "a\tb", "~^:?*[\\", "a//b", "x.", ".x", "ẞ",
        ] {
            let b = task_branch(h);
            let rest = task_of_branch(&b).unwrap();
            assert!(!rest.is_empty() && !rest.starts_with('-') && !rest.ends_with('-'));
            assert!(
                rest.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_'),
                "{h:?} -> {b:?}"
            );
        }
    }
}
