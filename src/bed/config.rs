//! `spice.toml`'s `[testbed]`: what a worktree's bed holds, how a template is warmed,
//! what says a template matches base, the ports each bed reserves and the disk budget
//! of every bed of the repository. As strict as `[gate]`: every problem is located
//! `spice.toml:line:col` and all are reported before anything runs.

use crate::config::ConfigError;
use serde::Deserialize;
use std::path::{Path, PathBuf};
use std::time::Duration;
use toml::Spanned;

pub use crate::config::repo::FILE;
/// A warm command that runs longer is stopped and the warm fails.
pub const DEFAULT_WARM_TIMEOUT: Duration = Duration::from_secs(60 * 60);
/// At most this many ports per bed.
pub const MAX_PORTS: u16 = 64;
/// Finished tasks' worktrees kept for reuse, unless `pool` says otherwise.
pub const DEFAULT_POOL: usize = 2;
/// At most this many.
pub const MAX_POOL: usize = 64;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TestbedToml {
    paths: Spanned<Vec<Spanned<String>>>,
    #[serde(default)]
    link: Vec<Spanned<String>>,
    #[serde(default)]
    warm: Vec<Spanned<Vec<String>>>,
    #[serde(default)]
    key: Vec<Spanned<String>>,
    ports: Option<Spanned<i64>>,
    disk_budget: Option<Spanned<String>>,
    warm_timeout: Option<Spanned<String>>,
    pool: Option<Spanned<i64>>,
}

/// The repository's `[testbed]`.
#[derive(Debug, Clone, PartialEq)]
pub struct BedConfig {
    /// Copied (reflinked where the filesystem can) into each worktree.
    pub paths: Vec<PathBuf>,
    /// Hard-linked instead (caches that tools never write in place).
    pub link: Vec<PathBuf>,
    /// The warm commands, run in order at base in a scratch worktree.
    pub warm: Vec<Vec<String>>,
    /// Files whose content (at the commit) decides whether a template matches.
    pub key: Vec<String>,
    pub ports: u16,
    /// Every bed of the repository together, in bytes of real disk.
    pub disk_budget: Option<u64>,
    pub warm_timeout: Duration,
    /// How many finished tasks' worktrees (with their beds) are kept for the
    /// repository's next tasks; 0: none, every worktree starts from a template.
    pub pool: usize,
}

impl BedConfig {
    /// Every bed path with whether it is hard-linked, in the order given.
    pub fn seed_paths(&self) -> Vec<super::SeedPath> {
        self.paths
            .iter()
            .map(|p| super::SeedPath::copy(p.clone()))
            .chain(self.link.iter().map(|p| super::SeedPath::link(p.clone())))
            .collect()
    }
}

/// Parses a `spice.toml` shown as `file`: `None` when it has no `[testbed]`.
pub fn parse(file: &Path, text: &str) -> Result<Option<BedConfig>, Vec<ConfigError>> {
    let Some(t) = crate::config::repo::section::<TestbedToml>(file, text, "testbed")? else {
        return Ok(None);
    };
    let mut errs = Vec::new();
    let mut at = |offset: usize, why: String| errs.push(ConfigError::at(file, text, offset, why));
    let mut seen: Vec<String> = Vec::new();
    let mut path_list =
        |list: &[Spanned<String>], field: &str, at: &mut dyn FnMut(usize, String)| {
            let mut out = Vec::new();
            for p in list {
                let s = p.get_ref();
                if let Err(e) = super::check_relative(Path::new(s)) {
                    at(p.span().start, format!("{field}: {e}"));
                    continue;
                }
                let overlaps = seen.iter().find(|o| {
                    Path::new(s).starts_with(o.as_str()) || Path::new(o.as_str()).starts_with(s)
                });
                if let Some(o) = overlaps {
                    at(p.span().start, format!("{field}: {s:?} overlaps {o:?}"));
                    continue;
                }
                seen.push(s.clone());
                out.push(PathBuf::from(s));
            }
            out
        };
    let paths = path_list(t.paths.get_ref(), "paths", &mut at);
    if t.paths.get_ref().is_empty() {
        at(
            t.paths.span().start,
            "paths: names no path: a bed holds at least one".into(),
        );
    }
    let link = path_list(&t.link, "link", &mut at);
    let mut warm = Vec::new();
    for w in &t.warm {
        if w.get_ref().is_empty() || w.get_ref()[0].is_empty() {
            at(w.span().start, "warm: an empty command".into());
        } else {
            warm.push(w.get_ref().clone());
        }
    }
    let mut key = Vec::new();
    for k in &t.key {
        match super::check_relative(Path::new(k.get_ref())) {
            Ok(()) => key.push(k.get_ref().clone()),
            Err(e) => at(k.span().start, format!("key: {e}")),
        }
    }
    let ports = match &t.ports {
        Some(p) => match u16::try_from(*p.get_ref()) {
            Ok(n) if n <= MAX_PORTS => n,
            _ => {
                at(
                    p.span().start,
                    format!("ports: {} must be between 0 and {MAX_PORTS}", p.get_ref()),
                );
                0
            }
        },
        None => 0,
    };
    let disk_budget = match &t.disk_budget {
        Some(b) => match parse_size(b.get_ref()) {
            Ok(n) => Some(n),
            Err(e) => {
                at(b.span().start, format!("disk_budget: {e}"));
                None
            }
        },
        None => None,
    };
    let warm_timeout = match &t.warm_timeout {
        Some(d) => match crate::when::parse_duration(d.get_ref()) {
            Ok(d) if !d.is_zero() => d,
            Ok(_) => {
                at(d.span().start, "warm_timeout: must be longer than 0".into());
                DEFAULT_WARM_TIMEOUT
            }
            Err(e) => {
                at(d.span().start, format!("warm_timeout: {e}"));
                DEFAULT_WARM_TIMEOUT
            }
        },
        None => DEFAULT_WARM_TIMEOUT,
    };
    let pool = match &t.pool {
        Some(p) => match usize::try_from(*p.get_ref()) {
            Ok(n) if n <= MAX_POOL => n,
            _ => {
                at(
                    p.span().start,
                    format!("pool: {} must be between 0 and {MAX_POOL}", p.get_ref()),
                );
                DEFAULT_POOL
            }
        },
        None => DEFAULT_POOL,
    };
    if errs.is_empty() {
        Ok(Some(BedConfig {
            paths,
            link,
            warm,
            key,
            ports,
            disk_budget,
            warm_timeout,
            pool,
        }))
    } else {
        errs.sort_by_key(|e| (e.line, e.col));
        Err(errs)
    }
}

pub use crate::config::size::parse_size;

#[cfg(test)]
mod tests {
    use super::*;

    fn errors(text: &str) -> Vec<String> {
        parse(Path::new(FILE), text)
            .unwrap_err()
            .iter()
            .map(|e| e.to_string())
            .collect()
    }

    #[test]
    fn a_full_section_parses() {
        let c = parse(
            Path::new(FILE),
            r#"
[gate]
[testbed]
paths = ["target", "web/node_modules"]
link = ["cache/registry"]
warm = [["cargo", "build", "--tests"], ["npm", "ci"]]
key = ["Cargo.lock", "web/package-lock.json"]
ports = 3
disk_budget = "40GiB"
warm_timeout = "20m"
pool = 4
"#,
        )
        .unwrap()
        .unwrap();
        assert_eq!(
            c.paths,
            [PathBuf::from("target"), PathBuf::from("web/node_modules")]
        );
        assert_eq!(c.link, [PathBuf::from("cache/registry")]);
        assert_eq!(c.warm.len(), 2);
        assert_eq!(c.ports, 3);
        assert_eq!(c.disk_budget, Some(40 << 30));
        assert_eq!(c.warm_timeout, Duration::from_secs(1200));
        assert_eq!(c.seed_paths().len(), 3);
        assert_eq!(c.pool, 4);
        assert!(parse(Path::new(FILE), "[gate]\n").unwrap().is_none());
    }

    #[test]
    fn every_problem_is_located() {
        let e = errors(
            "[testbed]\npaths = [\"../x\", \"target\", \"target/debug\"]\nwarm = [[]]\nports = 99\ndisk_budget = \"lots\"\npool = -1\n",
        );
        assert_eq!(e.len(), 6, "{e:?}");
        assert!(
            e[5].starts_with("spice.toml:6:8: pool: -1 must be between 0 and 64"),
            "{e:?}"
        );
        assert!(
            e[0].starts_with("spice.toml:2:10: paths: ../x: escapes"),
            "{e:?}"
        );
        assert!(
            e[1].contains("\"target/debug\" overlaps \"target\""),
            "{e:?}"
        );
        assert!(
            e[2].starts_with("spice.toml:3:9: warm: an empty command"),
            "{e:?}"
        );
        assert!(e[3].contains("ports: 99 must be between 0 and 64"), "{e:?}");
        assert!(
            e[4].contains("disk_budget: \"lots\" is not a size"),
            "{e:?}"
        );
        let e = errors("[testbed]\npaths = [\"t\"]\nbogus = 1\n");
        assert!(
            e[0].starts_with("spice.toml:3:1: unknown field `bogus`"),
            "{e:?}"
        );
        let e = errors("[tesbed]\npaths = [\"t\"]\n");
        assert!(
            e[0].starts_with("spice.toml:1:2: unknown section `tesbed`"),
            "{e:?}"
        );
        let e = errors("[testbed]\nwarm = []\n");
        assert!(e[0].contains("missing field `paths`"), "{e:?}");
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("40GiB"), Ok(40 << 30));
        assert_eq!(parse_size("1.5 MB"), Ok(1_500_000));
        assert_eq!(parse_size("4096"), Ok(4096));
        assert!(parse_size("0").is_err());
        assert!(parse_size("3 parsecs").is_err());
    }
}
