//! What a gate run looks at: the paths in scope and their contents, read the way git
//! will commit them.
//!
//! Git runs here in the environment it was given: inside a hook that is git's own
//! (`GIT_DIR`, and `GIT_INDEX_FILE` for `git commit -a` or `git commit PATH`, whose
//! temporary index holds what will be committed), so unlike [`crate::git::Runner`]
//! the environment is inherited, not cleared.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Which paths a run checks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    /// What the index will commit: added, copied, modified and renamed paths.
    Staged,
    /// Every tracked file, as it is in the working tree.
    All,
    /// These paths (relative to the repository's root), from the working tree.
    Paths(Vec<String>),
    /// What a branch changed since it left `base` (the merge base), at the branch's tip.
    Branch { base: String, tip: String },
    /// What a commit of `tree` on `parent` (none: a first commit) would change: the
    /// index of an agent's commit, written as a tree by its supervisor and judged
    /// as that tree, so what was judged is exactly what the tree id names.
    Tree {
        parent: Option<String>,
        tree: String,
    },
}

impl Scope {
    /// Whether attributes come from the index (`.gitattributes` as it is staged) rather
    /// than the working tree.
    pub fn cached(&self) -> bool {
        matches!(self, Scope::Staged | Scope::Tree { .. })
    }
}

/// One path to check and its content.
#[derive(Debug, Clone)]
pub struct Item {
    pub path: String,
    /// The path it was renamed from, when git saw a rename.
    pub renamed_from: Option<String>,
    pub content: Vec<u8>,
}

/// The repository a run works in.
#[derive(Debug, Clone)]
pub struct Repo {
    /// The working tree's root.
    pub root: PathBuf,
    /// The common git directory (shared by every worktree).
    pub common_dir: PathBuf,
    /// The worktree's git directory as the repository knows it, when git must not
    /// find it through the worktree's `.git` (the supervisor's phase gate: that file
    /// is the agent's to write): git then runs with `GIT_DIR`, `GIT_COMMON_DIR` and
    /// `GIT_WORK_TREE` set.
    pub pin: Option<PathBuf>,
    /// The index git reads instead of the worktree's own (`GIT_INDEX_FILE`): the one
    /// a hook was given by the `git commit` that runs it (`commit -a` and a commit of
    /// named paths stage into a temporary index).
    pub index: Option<PathBuf>,
}

pub use crate::config::repo::git;

impl Repo {
    /// The repository `dir` is in (one `git rev-parse`).
    pub fn find(dir: &Path) -> Result<Repo, String> {
        let out = git(
            dir,
            &[
                "rev-parse",
                "--path-format=absolute",
                "--show-toplevel",
                "--git-common-dir",
            ],
        )
        .map_err(|_| format!("{}: not in a git repository", dir.display()))?;
        let text = String::from_utf8_lossy(&out).into_owned();
        let mut lines = text.lines();
        let (Some(root), Some(common)) = (lines.next(), lines.next()) else {
            return Err(format!("{}: not in a git work tree", dir.display()));
        };
        Ok(Repo {
            root: PathBuf::from(root),
            common_dir: PathBuf::from(common),
            pin: None,
            index: None,
        })
    }

    /// Runs git in the work tree (pinned when [`Repo::pin`] says) and returns its
    /// stdout.
    pub fn git(&self, args: &[&str]) -> Result<Vec<u8>, String> {
        match (&self.pin, &self.index) {
            (None, None) => git(&self.root, args),
            _ => crate::config::repo::git_output(self.command(args), args),
        }
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new("git");
        cmd.args(args)
            .current_dir(&self.root)
            .env("GIT_TERMINAL_PROMPT", "0")
            .env("LC_ALL", "C");
        if let Some(dir) = &self.pin {
            cmd.env("GIT_DIR", dir)
                .env("GIT_COMMON_DIR", &self.common_dir)
                .env("GIT_WORK_TREE", &self.root);
        }
        if let Some(index) = &self.index {
            cmd.env("GIT_INDEX_FILE", index);
        }
        cmd
    }

    /// The paths in `scope` and their contents.
    pub fn items(&self, scope: &Scope) -> Result<Vec<Item>, String> {
        match scope {
            // What the index will commit: blobs `:path`.
            Scope::Staged => self.changed(&["--cached"], ""),
            // What the branch changed since it left base: blobs `tip:path`.
            Scope::Branch { base, tip } => self.changed(&[&format!("{base}...{tip}")], tip),
            Scope::Tree { parent, tree } => {
                let from = match parent {
                    Some(p) => p.clone(),
                    None => self.empty_tree()?,
                };
                self.changed(&[&from, tree], tree)
            }
            Scope::All => {
                let listed = self.git(&["ls-files", "-z"])?;
                let paths: Vec<String> = listed
                    .split(|b| *b == 0)
                    .filter(|p| !p.is_empty())
                    .map(|p| String::from_utf8_lossy(p).into_owned())
                    .collect();
                Ok(self.read_tree(paths))
            }
            Scope::Paths(paths) => Ok(self.read_tree(paths.clone())),
        }
    }

    /// The added, copied, modified and renamed paths `git diff ARGS` names, with the
    /// blobs `REV:path` (`REV` empty: the index).
    fn changed(&self, args: &[&str], rev: &str) -> Result<Vec<Item>, String> {
        let mut a = vec!["diff", "--name-status", "-z", "-M", "--diff-filter=ACMR"];
        a.extend_from_slice(args);
        let changes = name_status(&self.git(&a)?);
        let specs: Vec<String> = changes.iter().map(|(p, _)| format!("{rev}:{p}")).collect();
        let blobs = self.cat(&specs)?;
        Ok(changes
            .into_iter()
            .zip(blobs)
            .filter_map(|((path, from), blob)| {
                blob.map(|content| Item {
                    path,
                    renamed_from: from,
                    content,
                })
            })
            .collect())
    }

    /// The id of the empty tree in this repository's object format (what a first
    /// commit is compared with).
    fn empty_tree(&self) -> Result<String, String> {
        let out = self.git(&["hash-object", "-t", "tree", "/dev/null"])?;
        Ok(String::from_utf8_lossy(&out).trim().to_string())
    }

    /// Working-tree contents; a path that is gone or is not a file is left out.
    fn read_tree(&self, paths: Vec<String>) -> Vec<Item> {
        paths
            .into_iter()
            .filter_map(|path| {
                let content = self.read_file(&path)?;
                Some(Item {
                    path,
                    renamed_from: None,
                    content,
                })
            })
            .collect()
    }

    /// One working-tree file's content (`None`: gone, or not a file).
    fn read_file(&self, path: &str) -> Option<Vec<u8>> {
        let full = self.root.join(path);
        let meta = std::fs::symlink_metadata(&full).ok()?;
        if !meta.is_file() {
            return None;
        }
        std::fs::read(&full).ok()
    }

    /// `paths` as `scope` will have them, whether or not the scope changed them: the
    /// index for `Staged`, the tip for a branch, tracked working-tree files for `All`,
    /// the working tree for `Paths`. `None` for a path that is not there (deleted,
    /// untracked, not a file). What a run asks of the files its latches name.
    pub fn read(&self, scope: &Scope, paths: &[String]) -> Result<Vec<Option<Vec<u8>>>, String> {
        let at = |rev: &str| {
            let specs: Vec<String> = paths.iter().map(|p| format!("{rev}:{p}")).collect();
            self.cat(&specs)
        };
        match scope {
            Scope::Staged => at(""),
            Scope::Branch { tip, .. } => at(tip),
            Scope::Tree { tree, .. } => at(tree),
            Scope::Paths(_) => Ok(paths.iter().map(|p| self.read_file(p)).collect()),
            Scope::All => {
                if paths.is_empty() {
                    return Ok(Vec::new());
                }
                let mut a = vec!["--literal-pathspecs", "ls-files", "-z", "--"];
                a.extend(paths.iter().map(String::as_str));
                let listed = self.git(&a)?;
                let tracked: std::collections::HashSet<&[u8]> = listed
                    .split(|b| *b == 0)
                    .filter(|p| !p.is_empty())
                    .collect();
                Ok(paths
                    .iter()
                    .map(|p| {
                        tracked
                            .contains(p.as_bytes())
                            .then(|| self.read_file(p))
                            .flatten()
                    })
                    .collect())
            }
        }
    }

    /// Blob contents for each object spec, through one `git cat-file --batch`
    /// (`None` for one git does not have, e.g. a submodule's commit). Specs are
    /// newline-terminated (`-Z` needs git 2.43); the rare path holding a newline is
    /// read on its own through `git cat-file blob`.
    fn cat(&self, specs: &[String]) -> Result<Vec<Option<Vec<u8>>>, String> {
        let batched: Vec<&String> = specs.iter().filter(|s| !s.contains('\n')).collect();
        let mut got = if batched.is_empty() {
            Vec::new()
        } else {
            self.cat_batch(&batched)?
        }
        .into_iter();
        Ok(specs
            .iter()
            .map(|s| {
                if s.contains('\n') {
                    self.git(&["cat-file", "blob", s]).ok()
                } else {
                    got.next().flatten()
                }
            })
            .collect())
    }

    fn cat_batch(&self, specs: &[&String]) -> Result<Vec<Option<Vec<u8>>>, String> {
        let input: Vec<u8> = specs
            .iter()
            .flat_map(|s| s.bytes().chain(std::iter::once(b'\n')))
            .collect();
        let out = self.git_with_input(&["cat-file", "--batch"], input)?;
        parse_batch(&out, specs.len())
    }
}

impl Repo {
    /// Runs git with `input` on its stdin (written from a thread, so a large input cannot
    /// deadlock against git's output) and returns its stdout.
    fn git_with_input(&self, args: &[&str], input: Vec<u8>) -> Result<Vec<u8>, String> {
        let name = format!("git {}", args.join(" "));
        let mut child = self
            .command(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("{name}: {e}"))?;
        let mut stdin = child.stdin.take().expect("piped");
        let writer = std::thread::spawn(move || stdin.write_all(&input));
        let mut out = Vec::new();
        child
            .stdout
            .take()
            .expect("piped")
            .read_to_end(&mut out)
            .map_err(|e| format!("{name}: {e}"))?;
        let _ = writer.join();
        let status = child.wait().map_err(|e| format!("{name}: {e}"))?;
        if !status.success() {
            return Err(format!("{name}: exit {status}"));
        }
        Ok(out)
    }
}

/// `git diff --name-status -z` output: (path, renamed from).
fn name_status(raw: &[u8]) -> Vec<(String, Option<String>)> {
    let mut fields = raw
        .split(|b| *b == 0)
        .map(|f| String::from_utf8_lossy(f).into_owned());
    let mut out = Vec::new();
    while let Some(status) = fields.next() {
        if status.is_empty() {
            continue;
        }
        if status.starts_with('R') || status.starts_with('C') {
            let (Some(from), Some(to)) = (fields.next(), fields.next()) else {
                break;
            };
            let from = status.starts_with('R').then_some(from);
            out.push((to, from));
        } else if let Some(path) = fields.next() {
            out.push((path, None));
        }
    }
    out
}

/// `git cat-file --batch` output: `<sha> <type> <size>\n<content>\n` per object,
/// `<spec> missing\n` for one it lacks.
fn parse_batch(mut raw: &[u8], n: usize) -> Result<Vec<Option<Vec<u8>>>, String> {
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let end = memchr::memchr(b'\n', raw).ok_or("git cat-file: truncated output")?;
        let header = String::from_utf8_lossy(&raw[..end]).into_owned();
        raw = &raw[end + 1..];
        let parts: Vec<&str> = header.split(' ').collect();
        if parts.last() == Some(&"missing") || parts.last() == Some(&"ambiguous") {
            out.push(None);
            continue;
        }
        let size: usize = parts
            .get(2)
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| format!("git cat-file: bad header {header:?}"))?;
        if raw.len() < size + 1 {
            return Err("git cat-file: truncated object".into());
        }
        let blob = parts.get(1) == Some(&"blob");
        out.push(blob.then(|| raw[..size].to_vec()));
        raw = &raw[size + 1..];
    }
    Ok(out)
}

/// Which of `paths` git's attributes mark as generated, vendored or binary
/// (`linguist-generated`, `linguist-vendored`, `binary`, or `-diff`/`-text` as
/// `binary` sets them), read from the index when `cached`.
pub fn attributed(repo: &Repo, paths: &[String], cached: bool) -> Result<Vec<bool>, String> {
    if paths.is_empty() {
        return Ok(Vec::new());
    }
    let mut args = vec!["check-attr", "-z", "--stdin"];
    if cached {
        args.push("--cached");
    }
    args.extend(["linguist-generated", "linguist-vendored", "binary", "text"]);
    let input: Vec<u8> = paths
        .iter()
        .flat_map(|s| s.bytes().chain(std::iter::once(0)))
        .collect();
    let out = repo.git_with_input(&args, input)?;
    let mut skip = std::collections::HashMap::new();
    let fields: Vec<String> = out
        .split(|b| *b == 0)
        .map(|f| String::from_utf8_lossy(f).into_owned())
        .collect();
    for t in fields.chunks(3) {
        if let [path, attr, value] = t {
            let set = match attr.as_str() {
                "linguist-generated" | "linguist-vendored" | "binary" => {
                    value == "set" || value == "true"
                }
                "text" => value == "unset",
                _ => false,
            };
            if set {
                skip.insert(path.clone(), true);
            }
        }
    }
    Ok(paths.iter().map(|p| skip.contains_key(p)).collect())
}

/// Git's own rule: a NUL in the first 8000 bytes makes a file binary.
pub fn looks_binary(content: &[u8]) -> bool {
    memchr::memchr(0, &content[..content.len().min(8000)]).is_some()
}

/// Lines as an editor counts them: a last line without its newline still counts.
pub fn count_lines(content: &[u8]) -> u64 {
    let n = memchr::memchr_iter(b'\n', content).count() as u64;
    n + u64::from(content.last().is_some_and(|b| *b != b'\n'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_bytes_and_binary() {
        assert_eq!(count_lines(b""), 0);
        assert_eq!(count_lines(b"a"), 1);
        assert_eq!(count_lines(b"a\n"), 1);
        assert_eq!(count_lines(b"a\nb"), 2);
        assert!(looks_binary(b"ab\0c"));
        assert!(!looks_binary("é\n".as_bytes()));
    }

    #[test]
    fn name_status_with_renames() {
        let raw = b"M\0a.rs\0R087\0old.rs\0new.rs\0C100\0x\0y\0A\0z\0";
        assert_eq!(
            name_status(raw),
            [
                ("a.rs".to_string(), None),
                ("new.rs".to_string(), Some("old.rs".to_string())),
                ("y".to_string(), None),
                ("z".to_string(), None),
            ]
        );
    }

    #[test]
    fn batch_output() {
        let raw = b"abc blob 3\nx\ny\n:gone missing\ndef tree 0\n\n";
        let got = parse_batch(raw, 3).unwrap();
        assert_eq!(got, [Some(b"x\ny".to_vec()), None, None]);
    }
}
