//! Sticky flex: a cap's base, its flex ceiling, and the latch that holds a file that
//! grew past its base to the base until it shrinks back.
//!
//! A measure at or under the base passes and clears the latch. Above the base and up
//! to the ceiling it passes once, and latches at that size. While latched it may not
//! grow: above the base it passes only if it is no larger than the size it latched at,
//! and the latch ratchets down with it, so it must shrink to the base before it may
//! grow again. (An edit that leaves a latched file no bigger passes: refusing it would
//! block every fix to a big file that does not also split it.) Past the ceiling it
//! fails and latches at the base. The ceiling is `base × flex`, moved by a small
//! deterministic jitter (from the file's path and the author or task session, never
//! below the base) so parallel agents do not all stop at the same line.
//!
//! Latches are shared by every worktree of a repository: one JSON file in the git
//! common directory, to which a run writes only its own changes, onto the file as it
//! is then, under a lock ([`Latches::apply`]), so commits gated at once lose none of
//! each other's. A latch made by a failure is kept at once (it only tightens);
//! latches made by passes, and clears, are written only when the whole gate run is
//! accepted, so a commit that is refused for another reason leaves no trace.
//!
//! A latch lasts only while a cap still holds its (rule, path): an accepted run also
//! drops every latch whose file is gone from what it would commit (deleted; a rename
//! carries the latch), is now generated, vendored, binary or excluded, or that no cap
//! of `spice.toml` holds that rule for any more (its glob stopped matching, the cap
//! went, or no longer names that rule), and a routine's latch when the run measured
//! its file without it. This holds for latched files the commit does not touch too
//! (they are read as the commit has them); a file merely left unchanged keeps its
//! latch.

use super::config::Cap;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// What one measure did against its cap.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// At or under the base (clears a latch).
    Under,
    /// Above the base, within the ceiling, not latched: passes and latches.
    Flexed,
    /// Latched, above the base, and no larger than it latched at: passes, and the
    /// latch moves down to this size.
    Held,
    /// Latched and larger than it latched at: fails until it is back at the base.
    Grew,
    /// Past the ceiling: fails and latches at the base.
    Over,
}

impl Verdict {
    pub fn fails(self) -> bool {
        matches!(self, Verdict::Grew | Verdict::Over)
    }
}

/// The ceiling for one file and actor: `base × flex × (1 ± jitter)`, never below the base.
pub fn ceiling(cap: Cap, jitter: f64, path: &str, actor: &str) -> u64 {
    let flexed = cap.base as f64 * cap.flex;
    let h = xxhash_rust::xxh3::xxh3_64(format!("{path}\0{actor}").as_bytes());
    // A fraction in [-1, 1], the same for the same path and actor on every machine.
    let unit = (h % 20_001) as f64 / 10_000.0 - 1.0;
    let moved = (flexed * (1.0 + jitter * unit)).floor();
    (moved as u64).max(cap.base)
}

/// The verdict for `value` (latched at `latched`, if it is), and the limit it was
/// held to.
pub fn judge(value: u64, base: u64, ceiling: u64, latched: Option<u64>) -> (Verdict, u64) {
    match latched {
        _ if value <= base => (Verdict::Under, base),
        Some(at) if value <= at => (Verdict::Held, at),
        Some(at) => (Verdict::Grew, at),
        None if value <= ceiling => (Verdict::Flexed, ceiling),
        None => (Verdict::Over, ceiling),
    }
}

/// One latched (rule, path).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Latch {
    pub rule: String,
    pub path: String,
    /// The size it latched at: it may not grow past it (the base after a failure).
    pub value: u64,
    pub base: u64,
    pub since: String,
}

/// Every latch of a repository, keyed `rule` then path.
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub struct Latches {
    #[serde(default)]
    pub latches: BTreeMap<String, BTreeMap<String, Latch>>,
}

impl Latches {
    /// `<common>/spice/gate/latches.json`: in the gate's own directory, the one part
    /// of spice's files a confined agent's pre-commit hook may write
    /// (`fleet::confine`).
    pub fn file(common_dir: &Path) -> PathBuf {
        super::phase::gate_dir(common_dir).join("latches.json")
    }

    /// Where latches were kept before they had a directory of their own: read when the
    /// new file does not exist yet, never written.
    fn legacy_file(common_dir: &Path) -> PathBuf {
        common_dir.join("spice").join("gate-latches.json")
    }

    /// Holds the repository's latches for one writer (an exclusive lock on
    /// `<common>/spice/gate/lock`) until the guard drops: every lane's commits and
    /// the operator's run the gate at once, and each writes the whole file.
    pub fn lock(common_dir: &Path) -> Result<nix::fcntl::Flock<std::fs::File>, String> {
        let dir = super::phase::gate_dir(common_dir);
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let path = dir.join("lock");
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusive)
            .map_err(|(_, e)| format!("{}: {e}", path.display()))
    }

    /// Reads the latches; a missing file is none. A corrupt file is an error (it
    /// would otherwise silently release every latch).
    pub fn load(common_dir: &Path) -> Result<Latches, String> {
        let read = |path: &Path| match std::fs::read(path) {
            Ok(b) => serde_json::from_slice(&b)
                .map(Some)
                .map_err(|e| format!("{}: {e}", path.display())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(format!("{}: {e}", path.display())),
        };
        match read(&Latches::file(common_dir))? {
            Some(l) => Ok(l),
            None => Ok(read(&Latches::legacy_file(common_dir))?.unwrap_or_default()),
        }
    }

    /// Writes atomically (a temporary file renamed over the old one).
    pub fn save(&self, common_dir: &Path) -> Result<(), String> {
        let path = Latches::file(common_dir);
        let dir = path.parent().expect("has a parent");
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let tmp = dir.join(format!(".latches.{}.tmp", std::process::id()));
        let text = serde_json::to_vec_pretty(self).expect("serialisable");
        std::fs::write(&tmp, text).map_err(|e| format!("{}: {e}", tmp.display()))?;
        std::fs::rename(&tmp, &path).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// Makes on this set the changes that turned `before` into `after`: what one run
    /// set or moved, and what it released.
    pub fn apply(&mut self, before: &Latches, after: &Latches) {
        for l in after.all() {
            if before.get(&l.rule, &l.path) != Some(l) {
                self.set(l.clone());
            }
        }
        for l in before.all() {
            if after.get(&l.rule, &l.path).is_none() {
                self.clear(&l.rule, &l.path);
            }
        }
    }

    /// Puts back every latch of `before` this set no longer has, and returns them as
    /// (rule, key): what is left changed only by tightening (new latches, lower
    /// ones), the releases held back.
    pub fn held_back(&mut self, before: &Latches) -> Vec<(String, String)> {
        let mut back = Vec::new();
        for l in before.all() {
            if self.get(&l.rule, &l.path).is_none() {
                back.push((l.rule.clone(), l.path.clone()));
                self.set(l.clone());
            }
        }
        back
    }

    pub fn get(&self, rule: &str, path: &str) -> Option<&Latch> {
        self.latches.get(rule)?.get(path)
    }

    pub fn set(&mut self, latch: Latch) {
        self.latches
            .entry(latch.rule.clone())
            .or_default()
            .insert(latch.path.clone(), latch);
    }

    pub fn clear(&mut self, rule: &str, path: &str) -> bool {
        let Some(m) = self.latches.get_mut(rule) else {
            return false;
        };
        let had = m.remove(path).is_some();
        if m.is_empty() {
            self.latches.remove(rule);
        }
        had
    }

    /// A file renamed `from` → `to` carries its latches (every rule keyed by path,
    /// routine rules keyed `path::routine` too).
    pub fn rename(&mut self, from: &str, to: &str) {
        for m in self.latches.values_mut() {
            let moved: Vec<String> = m
                .keys()
                .filter(|k| *k == from || k.starts_with(&format!("{from}::")))
                .cloned()
                .collect();
            for k in moved {
                let mut l = m.remove(&k).expect("listed");
                let key = format!("{to}{}", &k[from.len()..]);
                l.path = key.clone();
                m.insert(key, l);
            }
        }
    }

    pub fn all(&self) -> impl Iterator<Item = &Latch> {
        self.latches.values().flat_map(|m| m.values())
    }
}

/// The file a latch key names, and the routine for routine rules (keyed
/// `path::routine`, split at the first `::`: a routine's name may hold one, as a
/// JavaScript key `"a::b"` does, a path in practice does not).
pub fn split_key<'a>(rule: &str, key: &'a str) -> (&'a str, Option<&'a str>) {
    match key.split_once("::") {
        Some((path, routine)) if rule.starts_with("routine.") => (path, Some(routine)),
        _ => (key, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_verdicts() {
        assert_eq!(judge(100, 100, 150, None), (Verdict::Under, 100));
        assert_eq!(judge(100, 100, 150, Some(120)), (Verdict::Under, 100));
        assert_eq!(judge(120, 100, 150, None), (Verdict::Flexed, 150));
        assert_eq!(judge(150, 100, 150, None), (Verdict::Flexed, 150));
        assert_eq!(judge(151, 100, 150, None), (Verdict::Over, 150));
        assert_eq!(judge(120, 100, 150, Some(120)), (Verdict::Held, 120));
        assert_eq!(judge(110, 100, 150, Some(120)), (Verdict::Held, 120));
        assert_eq!(judge(121, 100, 150, Some(120)), (Verdict::Grew, 120));
        assert_eq!(judge(101, 100, 150, Some(100)), (Verdict::Grew, 100));
        assert!(!Verdict::Flexed.fails() && !Verdict::Held.fails());
        assert!(Verdict::Grew.fails() && Verdict::Over.fails());
    }

    fn latch(path: &str, value: u64) -> Latch {
        Latch {
            rule: "file.lines".into(),
            path: path.into(),
            value,
            base: 10,
            since: String::new(),
        }
    }

    #[test]
    fn held_back_keeps_what_tightens_and_returns_what_would_be_released() {
        let mut before = Latches::default();
        before.set(latch("gone.txt", 12));
        before.set(latch("lower.txt", 14));
        let mut after = before.clone();
        after.clear("file.lines", "gone.txt");
        after.set(latch("lower.txt", 11));
        after.set(latch("new.txt", 13));
        let back = after.held_back(&before);
        assert_eq!(back, [("file.lines".to_string(), "gone.txt".to_string())]);
        let kept: Vec<(&str, u64)> = after.all().map(|l| (l.path.as_str(), l.value)).collect();
        assert_eq!(kept, [("gone.txt", 12), ("lower.txt", 11), ("new.txt", 13)]);
    }

    #[test]
    fn a_run_s_changes_go_onto_what_another_run_wrote_meanwhile() {
        let mut before = Latches::default();
        before.set(latch("mine.txt", 12));
        before.set(latch("both.txt", 14));
        let mut after = before.clone();
        after.clear("file.lines", "mine.txt");
        after.set(latch("new.txt", 13));
        // Meanwhile another run latched its own file and lowered both.txt.
        let mut now = before.clone();
        now.set(latch("theirs.txt", 11));
        now.set(latch("both.txt", 12));
        now.apply(&before, &after);
        let kept: Vec<(&str, u64)> = now.all().map(|l| (l.path.as_str(), l.value)).collect();
        assert_eq!(
            kept,
            [("both.txt", 12), ("new.txt", 13), ("theirs.txt", 11)]
        );
    }

    #[test]
    fn jitter_is_deterministic_bounded_and_never_below_the_base() {
        let cap = Cap {
            base: 1000,
            flex: 1.5,
        };
        let a = ceiling(cap, 0.03, "src/a.rs", "alice@x");
        assert_eq!(a, ceiling(cap, 0.03, "src/a.rs", "alice@x"));
        let mut seen = std::collections::BTreeSet::new();
        for i in 0..500 {
            let c = ceiling(cap, 0.03, &format!("src/{i}.rs"), "s-1");
            assert!((1455..=1545).contains(&c), "{c}");
            seen.insert(c);
        }
        assert!(
            seen.len() > 20,
            "the jitter spreads ceilings: {}",
            seen.len()
        );
        assert_eq!(ceiling(cap, 0.0, "x", "y"), 1500);
        let tight = Cap {
            base: 10,
            flex: 1.0,
        };
        for i in 0..100 {
            assert!(ceiling(tight, 0.1, &i.to_string(), "a") >= 10);
        }
    }

    #[test]
    fn a_key_names_its_file_and_routine() {
        assert_eq!(split_key("file.lines", "src/a.rs"), ("src/a.rs", None));
        assert_eq!(
            split_key("routine.lines", "src/a.rs::outer.f"),
            ("src/a.rs", Some("outer.f"))
        );
        assert_eq!(
            split_key("routine.complexity", "a.js::\"x::y\""),
            ("a.js", Some("\"x::y\""))
        );
        // A file rule's key is the path, whatever it holds.
        assert_eq!(split_key("file.bytes", "odd::name"), ("odd::name", None));
    }

    #[test]
    fn latches_follow_renames_and_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let mut l = Latches::default();
        for (rule, path) in [("file.lines", "a.rs"), ("routine.lines", "a.rs::f")] {
            l.set(Latch {
                rule: rule.into(),
                path: path.into(),
                value: 9,
                base: 5,
                since: "t".into(),
            });
        }
        l.rename("a.rs", "b.rs");
        assert!(l.get("file.lines", "b.rs").is_some());
        assert_eq!(l.get("routine.lines", "b.rs::f").unwrap().path, "b.rs::f");
        assert!(l.get("file.lines", "a.rs").is_none());
        l.save(dir.path()).unwrap();
        let back = Latches::load(dir.path()).unwrap();
        assert_eq!(back.all().count(), 2);
        assert!(l.clear("file.lines", "b.rs"));
        std::fs::write(Latches::file(dir.path()), "{not json").unwrap();
        assert!(Latches::load(dir.path())
            .unwrap_err()
            .contains("gate/latches.json"));
        // A repository gated before the gate had its own directory keeps its latches.
        std::fs::remove_file(Latches::file(dir.path())).unwrap();
        l.save(dir.path()).unwrap();
        std::fs::rename(Latches::file(dir.path()), Latches::legacy_file(dir.path())).unwrap();
        assert_eq!(Latches::load(dir.path()).unwrap().all().count(), 1);
    }
}
