//! Seeding: copying a template's bed paths into a worktree, as cheaply as the
//! destination filesystem allows, so that incremental builds see the tree as fresh.
//!
//! One seeding probes its method once, on a scratch file pair in the destination
//! (`FICLONE`, else `copy_file_range`, else a plain copy); paths marked `link` get
//! hard links where template and destination share a device. Everything is checked
//! before anything is written (escaping or overlapping paths, a missing template path,
//! a symlink on the way, existing content at the destination). Every path is built as
//! `<path>.spice-seeding`; only after all of them are complete and the destination's
//! filesystem is synced are they renamed into place, so a crash leaves at worst a
//! staging tree, which [`state`] reports as interrupted and the next seeding clears.

use super::check::{has_content, preflight, probe, same_device};
use super::copy::{remove_any, Copier, PathCopy};
pub use super::report::{Counts, Method, PathReport, Probe, Progress, RewrittenLink, SeedReport};
use super::sys;
use super::{check_relative, IoContext, Result};
use serde::{Deserialize, Serialize};
use std::ffi::OsString;
use std::fs::{self, File};
use std::io;
use std::path::{Path, PathBuf};

/// One path of a bed, relative to the worktree.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SeedPath {
    pub path: PathBuf,
    /// Hard-link its files instead of copying them (where the device allows).
    pub link: bool,
}

impl SeedPath {
    pub fn copy(path: impl Into<PathBuf>) -> Self {
        SeedPath {
            path: path.into(),
            link: false,
        }
    }
    pub fn link(path: impl Into<PathBuf>) -> Self {
        SeedPath {
            path: path.into(),
            link: true,
        }
    }
}

/// What to seed: `paths` of the `template` tree into the `dest` worktree (both absolute).
#[derive(Debug, Clone)]
pub struct SeedRequest {
    pub template: PathBuf,
    pub dest: PathBuf,
    pub paths: Vec<SeedPath>,
}

/// Where one path of a worktree stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PathState {
    /// Nothing there (or an empty directory).
    Absent,
    /// The path exists with content.
    Seeded,
    /// Only a staging tree from an interrupted seeding: not seeded.
    Interrupted,
}

/// The name a path is built under before it is complete: `<path>.spice-seeding`.
pub fn staging_path(dest: &Path, rel: &Path) -> PathBuf {
    let mut name: OsString = dest.join(rel).into_os_string();
    name.push(".spice-seeding");
    PathBuf::from(name)
}

/// Where `rel` stands in the worktree `dest`.
pub fn state(dest: &Path, rel: &Path) -> Result<PathState> {
    check_relative(rel)?;
    let at = dest.join(rel);
    if has_content(&at).at("reading", &at)? {
        return Ok(PathState::Seeded);
    }
    let staging = staging_path(dest, rel);
    match fs::symlink_metadata(&staging) {
        Ok(_) => Ok(PathState::Interrupted),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(PathState::Absent),
        Err(e) => Err(e).at("reading", &staging),
    }
}

/// Seeds `req.paths` into `req.dest`; see the module's documentation.
pub fn seed(req: &SeedRequest) -> Result<SeedReport> {
    seed_with_progress(req, &mut |_| {})
}

/// [`seed`], calling `progress` every few hundred files and when each path completes.
pub fn seed_with_progress(
    req: &SeedRequest,
    progress: &mut dyn FnMut(&Progress),
) -> Result<SeedReport> {
    preflight(req)?;
    let probe = probe(&req.dest)?;
    let method = if probe.ficlone == "ok" {
        Method::Reflink
    } else if probe.copy_file_range == "ok" {
        Method::CopyFileRange
    } else {
        Method::Copy
    };
    let copy_method = if probe.copy_file_range == "ok" {
        Method::CopyFileRange
    } else {
        Method::Copy
    };
    let mut template_roots = vec![req.template.clone()];
    if let Ok(real) = fs::canonicalize(&req.template) {
        if real != req.template {
            template_roots.push(real);
        }
    }
    let mut copier = Copier {
        template_roots,
        dest_root: req.dest.clone(),
        method,
        copy_method,
        fallbacks: Vec::new(),
        progress,
    };
    let mut reports = Vec::new();
    let mut staged = Vec::new();
    // Directories made for nested paths (`web` for `web/dist`), removed on failure.
    let mut made = Vec::new();
    for p in &req.paths {
        let staging = staging_path(&req.dest, &p.path);
        staged.push(staging.clone());
        match copy_path(&mut copier, req, p, &staging, &mut made) {
            Ok(r) => reports.push(r),
            Err(e) => {
                for s in &staged {
                    let _ = remove_any(s);
                }
                for d in made.iter().rev() {
                    let _ = fs::remove_dir(d);
                }
                return Err(e);
            }
        }
    }
    let root = File::open(&req.dest).at("opening", &req.dest)?;
    sys::syncfs(&root).at("syncing the filesystem of", &req.dest)?;
    for (p, staging) in req.paths.iter().zip(&staged) {
        let fin = req.dest.join(&p.path);
        // An empty directory at `fin` (preflight refused any other content) is
        // replaced by the rename itself when the staging is a directory too.
        let staged_dir = fs::symlink_metadata(staging).is_ok_and(|m| m.is_dir());
        if !staged_dir && fs::symlink_metadata(&fin).is_ok_and(|m| m.is_dir()) {
            fs::remove_dir(&fin).at("replacing the empty directory", &fin)?;
        }
        fs::rename(staging, &fin).at("renaming into place", staging)?;
        let parent = fin.parent().unwrap_or(&req.dest);
        File::open(parent)
            .and_then(|d| d.sync_all())
            .at("syncing", parent)?;
    }
    let mut total = Counts::default();
    for r in &reports {
        total.add(&r.counts);
    }
    Ok(SeedReport {
        template: req.template.clone(),
        dest: req.dest.clone(),
        method,
        probe,
        fallbacks: copier.fallbacks,
        paths: reports,
        total,
    })
}

/// Copies one path into its staging name.
fn copy_path(
    copier: &mut Copier,
    req: &SeedRequest,
    p: &SeedPath,
    staging: &Path,
    made: &mut Vec<PathBuf>,
) -> Result<PathReport> {
    let src = req.template.join(&p.path);
    let leftover_removed = remove_any(staging).at("removing the leftover", staging)?;
    let parent = staging.parent().unwrap_or(&req.dest);
    let missing: Vec<&Path> = parent
        .ancestors()
        .take_while(|a| fs::symlink_metadata(a).is_err())
        .collect();
    for dir in missing.into_iter().rev() {
        fs::create_dir(dir).at("creating", dir)?;
        made.push(dir.to_path_buf());
    }
    let link = p.link && {
        let same = same_device(&src, parent)?;
        if !same {
            copier.fallbacks.push(format!(
                "{}: the template is on another device: copied by {} instead of hard links",
                p.path.display(),
                copier.method.name()
            ));
        }
        same
    };
    let planned = if link {
        Method::HardLink
    } else {
        copier.method
    };
    let mut pc = PathCopy {
        copier,
        rel: p.path.clone(),
        link,
        counts: Counts::default(),
        rewritten: Vec::new(),
    };
    pc.node(&src, staging, Path::new(""))?;
    let counts = pc.counts;
    let rewritten = pc.rewritten;
    (copier.progress)(&Progress {
        path: &p.path,
        files: counts.files,
        bytes: counts.bytes,
        done: true,
    });
    let method = counts
        .by_method
        .iter()
        .max_by_key(|(_, n)| **n)
        .map_or(planned, |(m, _)| *m);
    Ok(PathReport {
        path: p.path.clone(),
        link: p.link,
        method,
        counts,
        rewritten_links: rewritten,
        leftover_removed,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn staging_name_sits_beside_the_path() {
        assert_eq!(
            staging_path(Path::new("/w"), Path::new("web/node_modules")),
            PathBuf::from("/w/web/node_modules.spice-seeding")
        );
    }

    #[test]
    fn overlapping_paths_are_refused_before_anything_is_written() {
        let t = tempfile::tempdir().unwrap();
        let (tpl, dst) = (t.path().join("t"), t.path().join("d"));
        fs::create_dir_all(tpl.join("target/debug")).unwrap();
        fs::create_dir_all(&dst).unwrap();
        let req = SeedRequest {
            template: tpl,
            dest: dst.clone(),
            paths: vec![SeedPath::copy("target"), SeedPath::copy("target/debug")],
        };
        let e = seed(&req).unwrap_err().to_string();
        assert_eq!(e, "target/debug: overlaps bed path target");
        assert_eq!(fs::read_dir(&dst).unwrap().count(), 0);
    }
}
