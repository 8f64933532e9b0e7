//! `spice.toml`'s `[archive]` and `[gc]`: how large the transcript archive may grow,
//! and whether the fleet removes finished tasks' worktrees and branches by itself.
//! As strict as `[testbed]` and `[hooks]`: unknown keys, wrong types and bad values
//! are located `spice.toml:line:col`, every one reported before anything runs. The
//! fleet reads the copy `base` carries (`git show base:spice.toml`).
//!
//! ```toml
//! [archive]
//! max_bytes = "2GiB"     # oldest copies pruned beyond it (default 2 GiB)
//! sessions_max_bytes = "1GiB"  # terminal recordings and briefs of ended sessions (default 1 GiB)
//! [gc]
//! after = "7d"           # the fleet runs `fleet gc` for tasks finished this long ago
//! every = "1h"           # how often it looks (default 1h)
//! ```

use crate::config::ConfigError;
use serde::Deserialize;
use std::path::Path;
use std::time::Duration;
use toml::Spanned;

/// The shortest `[gc] every` (anything shorter is a typo, and costs git work).
pub const MIN_EVERY: Duration = Duration::from_secs(60);
pub const DEFAULT_EVERY: Duration = Duration::from_secs(3600);

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ArchiveToml {
    max_bytes: Option<Spanned<toml::Value>>,
    sessions_max_bytes: Option<Spanned<toml::Value>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct GcToml {
    after: Option<Spanned<String>>,
    every: Option<Spanned<String>>,
}

/// The fleet's clean-up policy: `fleet gc` for tasks whose work ended `after` ago.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GcPolicy {
    pub after: Duration,
    pub every: Duration,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Housekeeping {
    /// `[archive] max_bytes` when set.
    pub archive_max_bytes: Option<u64>,
    /// `[archive] sessions_max_bytes` when set.
    pub sessions_max_bytes: Option<u64>,
    /// `None`: no `[gc] after`, the fleet never removes anything by itself.
    pub gc: Option<GcPolicy>,
}

/// The default bound on the archive's size (`[archive] max_bytes`): 2 GiB.
pub const DEFAULT_ARCHIVE_MAX_BYTES: u64 = 2 << 30;

/// The default bound on ended sessions' recordings and briefs
/// (`[archive] sessions_max_bytes`): 1 GiB.
pub const DEFAULT_SESSIONS_MAX_BYTES: u64 = 1 << 30;

impl Housekeeping {
    /// The archive's bound: `max_bytes`, else the default.
    pub fn archive_bound(&self) -> u64 {
        self.archive_max_bytes.unwrap_or(DEFAULT_ARCHIVE_MAX_BYTES)
    }

    /// The bound on ended sessions' recordings and briefs: `sessions_max_bytes`,
    /// else the default.
    pub fn sessions_bound(&self) -> u64 {
        self.sessions_max_bytes
            .unwrap_or(DEFAULT_SESSIONS_MAX_BYTES)
    }
}

/// Parses the text of a `spice.toml` shown as `file`, collecting every problem of
/// its `[archive]` and `[gc]`.
pub fn parse(file: &Path, text: &str) -> Result<Housekeeping, Vec<ConfigError>> {
    use crate::config::repo::section;
    let archive = section::<ArchiveToml>(file, text, "archive")?;
    let gc = section::<GcToml>(file, text, "gc")?;
    let mut out = Housekeeping::default();
    let mut errs = Vec::new();
    let mut at = |offset: usize, why: String| errs.push(ConfigError::at(file, text, offset, why));
    let size = |m: &Spanned<toml::Value>| match m.get_ref() {
        toml::Value::Integer(n) if *n > 0 => Ok(*n as u64),
        toml::Value::Integer(n) => Err(format!("{n} must be more than 0")),
        toml::Value::String(s) => crate::config::size::parse_size(s),
        other => Err(format!(
            "expected a size such as \"2GiB\" or a number of bytes, found {}",
            other.type_str()
        )),
    };
    if let Some(a) = archive {
        for (key, m, slot) in [
            ("max_bytes", a.max_bytes, &mut out.archive_max_bytes),
            (
                "sessions_max_bytes",
                a.sessions_max_bytes,
                &mut out.sessions_max_bytes,
            ),
        ] {
            let Some(m) = m else { continue };
            match size(&m) {
                Ok(n) => *slot = Some(n),
                Err(e) => at(m.span().start, format!("archive.{key}: {e}")),
            }
        }
    }
    if let Some(g) = gc {
        let duration = |d: &Spanned<String>, key: &str, at: &mut dyn FnMut(usize, String)| {
            match crate::when::parse_duration(d.get_ref()) {
                Ok(v) => Some(v),
                Err(e) => {
                    at(d.span().start, format!("gc.{key}: {e}"));
                    None
                }
            }
        };
        let every = match &g.every {
            Some(e) => match duration(e, "every", &mut at) {
                Some(v) if v < MIN_EVERY => {
                    at(
                        e.span().start,
                        format!("gc.every: {} is shorter than a minute", e.get_ref()),
                    );
                    None
                }
                v => v,
            },
            None => Some(DEFAULT_EVERY),
        };
        match &g.after {
            Some(a) => {
                if let (Some(after), Some(every)) = (duration(a, "after", &mut at), every) {
                    out.gc = Some(GcPolicy { after, every });
                }
            }
            None if g.every.is_some() => at(
                g.every.as_ref().map_or(0, |e| e.span().start),
                "gc.every: set without gc.after (how long after a task ends to remove its worktree)".into(),
            ),
            None => {}
        }
    }
    if errs.is_empty() {
        Ok(out)
    } else {
        errs.sort_by_key(|e| (e.line, e.col));
        Err(errs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn errors(text: &str) -> Vec<String> {
        parse(Path::new("spice.toml"), text)
            .unwrap_err()
            .iter()
            .map(|e| e.to_string())
            .collect()
    }

    #[test]
    fn defaults_and_values() {
        let none = parse(Path::new("spice.toml"), "[gate]\n").unwrap();
        assert_eq!(none, Housekeeping::default());
        let h = parse(
            Path::new("spice.toml"),
            "[archive]\nmax_bytes = \"1MiB\"\n[gc]\nafter = \"7d\"\n",
        )
        .unwrap();
        assert_eq!(h.archive_bound(), 1 << 20);
        assert_eq!(
            h.gc,
            Some(GcPolicy {
                after: Duration::from_secs(7 * 86400),
                every: DEFAULT_EVERY
            })
        );
        let n = parse(Path::new("spice.toml"), "[archive]\nmax_bytes = 5000\n").unwrap();
        assert_eq!(n.archive_max_bytes, Some(5000));
        assert_eq!(none.archive_bound(), DEFAULT_ARCHIVE_MAX_BYTES);
    }

    #[test]
    fn every_problem_is_located() {
        let e = errors("[archive]\nmax_bytes = \"lots\"\n[gc]\nafter = \"soon\"\nevery = \"1s\"\n");
        assert_eq!(e.len(), 3, "{e:?}");
        assert!(
            e[0].starts_with("spice.toml:2:13: archive.max_bytes:"),
            "{e:?}"
        );
        assert!(e[1].starts_with("spice.toml:4:9: gc.after:"), "{e:?}");
        assert!(
            e[2].starts_with("spice.toml:5:9: gc.every: 1s is shorter"),
            "{e:?}"
        );
        let e = errors("[archive]\nmax = 1\n");
        assert!(
            e[0].starts_with("spice.toml:2:1: unknown field `max`"),
            "{e:?}"
        );
        let e = errors("[gc]\nevery = \"1h\"\n");
        assert!(e[0].contains("gc.every: set without gc.after"), "{e:?}");
        let e = errors("[archive]\nmax_bytes = -3\n");
        assert!(e[0].contains("must be more than 0"), "{e:?}");
    }
}
