//! What ended sessions leave in the state directory besides their transcripts: the
//! terminal recording of each (`recordings/SESSION.cast`) and the brief it was given
//! (`briefs/SESSION.md`). A fleet that runs for days writes one of each per session,
//! so they are pruned to a bound (`[archive] sessions_max_bytes`), oldest first,
//! after each archiving.
//!
//! Invariants: a file of a session named in `keep` (the sessions of the lanes' current
//! claims, their predecessors included: a successor resumes from them, and the console
//! and `fleet attach` replay the current recording) is never removed; only regular
//! files named `<session>.cast` or `<session>.md` directly in those two directories
//! are considered (a symbolic link is not followed, nor removed).

use crate::error::{Error, Result};
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// The directories pruned, under the state directory, and the extension of their files.
const KINDS: [(&str, &str); 2] = [("recordings", "cast"), ("briefs", "md")];

/// One file that was (or, on a dry run, would be) removed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pruned {
    pub path: PathBuf,
    pub bytes: u64,
}

/// Removes the oldest recordings and briefs of sessions not in `keep` until those
/// of ended sessions take at most `max_bytes`; what was removed (nothing when
/// `dry_run`).
pub fn prune(
    state_dir: &Path,
    keep: &HashSet<String>,
    max_bytes: u64,
    dry_run: bool,
) -> Result<Vec<Pruned>> {
    let mut files: Vec<(SystemTime, PathBuf, u64)> = Vec::new();
    for (dir, ext) in KINDS {
        let dir = state_dir.join(dir);
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            let path = e.path();
            let Ok(meta) = std::fs::symlink_metadata(&path) else {
                continue;
            };
            let session = path
                .file_stem()
                .and_then(|s| s.to_str())
                .filter(|_| path.extension().is_some_and(|x| x == ext));
            let Some(session) = session else { continue };
            if !meta.file_type().is_file() || keep.contains(session) {
                continue;
            }
            let at = meta.modified().unwrap_or(SystemTime::UNIX_EPOCH);
            files.push((at, path, meta.len()));
        }
    }
    files.sort();
    let mut total: u64 = files.iter().map(|f| f.2).sum();
    let mut removed = Vec::new();
    for (_, path, bytes) in files {
        if total <= max_bytes {
            break;
        }
        if !dry_run {
            match std::fs::remove_file(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => {
                    return Err(Error::Other(format!(
                        "cannot remove {}: {e}",
                        path.display()
                    )))
                }
            }
        }
        total -= bytes;
        removed.push(Pruned { path, bytes });
    }
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn file(dir: &Path, name: &str, bytes: usize, age_secs: u64) -> PathBuf {
        std::fs::create_dir_all(dir).unwrap();
        let p = dir.join(name);
        std::fs::write(&p, vec![b'x'; bytes]).unwrap();
        let t = SystemTime::now() - Duration::from_secs(age_secs);
        std::fs::File::options()
            .write(true)
            .open(&p)
            .unwrap()
            .set_modified(t)
            .unwrap();
        p
    }

    #[test]
    fn the_oldest_ended_sessions_go_first_and_kept_ones_never() {
        let d = tempfile::tempdir().unwrap();
        let rec = d.path().join("recordings");
        let briefs = d.path().join("briefs");
        let oldest_live = file(&rec, "live.cast", 100, 500);
        let old = file(&rec, "old.cast", 100, 400);
        let old_brief = file(&briefs, "old.md", 10, 400);
        let newer = file(&rec, "newer.cast", 100, 100);
        let stray = file(&rec, "notes.txt", 1000, 900);
        let keep: HashSet<String> = ["live".to_string()].into();
        // Ended: 210 bytes; a bound of 100 takes the oldest two (110 bytes).
        let dry = prune(d.path(), &keep, 100, true).unwrap();
        assert_eq!(dry.len(), 2, "{dry:?}");
        assert!(old.exists());
        let gone = prune(d.path(), &keep, 100, false).unwrap();
        let paths: HashSet<PathBuf> = gone.iter().map(|p| p.path.clone()).collect();
        assert_eq!(paths, [old.clone(), old_brief.clone()].into());
        for p in [&oldest_live, &newer, &stray] {
            assert!(p.exists(), "{} was removed", p.display());
        }
        assert!(!old.exists() && !old_brief.exists());
        // Under the bound: nothing more.
        assert!(prune(d.path(), &keep, 100, false).unwrap().is_empty());
    }
}
