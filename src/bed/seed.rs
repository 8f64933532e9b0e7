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

use super::copy::{remove_any, Copier, PathCopy};
use super::sys;
use super::{check_absolute, check_relative, Error, IoContext, Result};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// How a file reached the destination.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Method {
    /// `FICLONE`: the destination shares the template's extents until either is written.
    Reflink,
    /// `copy_file_range`: copied in the kernel (which may share extents on its own).
    CopyFileRange,
    /// Read and written through user space.
    Copy,
    /// The same inode as the template's (for caches tools never write in place).
    HardLink,
}

impl Method {
    pub fn name(self) -> &'static str {
        match self {
            Method::Reflink => "reflink",
            Method::CopyFileRange => "copy_file_range",
            Method::Copy => "copy",
            Method::HardLink => "hard_link",
        }
    }
}

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

/// How far a seeding has got, for a progress line.
#[derive(Debug)]
pub struct Progress<'a> {
    pub path: &'a Path,
    pub files: u64,
    pub bytes: u64,
    /// This path is complete (in staging).
    pub done: bool,
}

/// What was copied, and how.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counts {
    pub files: u64,
    /// Apparent bytes of the regular files.
    pub bytes: u64,
    pub dirs: u64,
    pub symlinks: u64,
    /// Absolute symlinks pointing outside the template, kept as they were.
    pub absolute_links_kept: u64,
    /// Sockets, fifos and device nodes, not copied.
    pub special_skipped: u64,
    /// Regular files per method that copied them.
    pub by_method: BTreeMap<Method, u64>,
}

impl Counts {
    fn add(&mut self, o: &Counts) {
        self.files += o.files;
        self.bytes += o.bytes;
        self.dirs += o.dirs;
        self.symlinks += o.symlinks;
        self.absolute_links_kept += o.absolute_links_kept;
        self.special_skipped += o.special_skipped;
        for (m, n) in &o.by_method {
            *self.by_method.entry(*m).or_default() += n;
        }
    }
}

/// An absolute symlink into the template, moved to the same place in the destination.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RewrittenLink {
    /// The link, relative to the worktree.
    pub link: PathBuf,
    pub from: PathBuf,
    pub to: PathBuf,
}

/// The outcome of the probe on the destination's filesystem.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Probe {
    /// `"ok"`, or the error `FICLONE` gave.
    pub ficlone: String,
    /// `"ok"`, or the error `copy_file_range` gave.
    pub copy_file_range: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PathReport {
    pub path: PathBuf,
    pub link: bool,
    /// The method that copied most of its files (the planned one if it has none).
    pub method: Method,
    pub counts: Counts,
    pub rewritten_links: Vec<RewrittenLink>,
    /// A staging tree from an interrupted seeding was found and removed first.
    pub leftover_removed: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SeedReport {
    pub template: PathBuf,
    pub dest: PathBuf,
    /// The method the probe chose for this seeding's copies.
    pub method: Method,
    pub probe: Probe,
    /// Why a method was lowered during the seeding (a file or device that refused it).
    pub fallbacks: Vec<String>,
    pub paths: Vec<PathReport>,
    pub total: Counts,
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
    for p in &req.paths {
        let staging = staging_path(&req.dest, &p.path);
        staged.push(staging.clone());
        match copy_path(&mut copier, req, p, &staging) {
            Ok(r) => reports.push(r),
            Err(e) => {
                for s in &staged {
                    let _ = remove_any(s);
                }
                return Err(e);
            }
        }
    }
    let root = File::open(&req.dest).at("opening", &req.dest)?;
    sys::syncfs(&root).at("syncing the filesystem of", &req.dest)?;
    for (p, staging) in req.paths.iter().zip(&staged) {
        let fin = req.dest.join(&p.path);
        if fs::symlink_metadata(&fin).is_ok_and(|m| m.is_dir()) {
            // An empty directory (preflight refused any other), e.g. made by a tool.
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
) -> Result<PathReport> {
    let src = req.template.join(&p.path);
    let leftover_removed = remove_any(staging).at("removing the leftover", staging)?;
    let parent = staging.parent().unwrap_or(&req.dest);
    fs::create_dir_all(parent).at("creating", parent)?;
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

/// Refuses the request before anything is written if any path cannot be seeded.
fn preflight(req: &SeedRequest) -> Result<()> {
    check_absolute(&req.template, "the template")?;
    check_absolute(&req.dest, "the destination")?;
    for (root, what) in [(&req.template, "template"), (&req.dest, "destination")] {
        match fs::metadata(root) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => {
                return Err(Error::refused(
                    root,
                    format!("the {what} is not a directory"),
                ))
            }
            Err(e) => return Err(e).at(&format!("reading the {what}"), root),
        }
    }
    for (i, p) in req.paths.iter().enumerate() {
        check_relative(&p.path)?;
        for q in &req.paths[..i] {
            if p.path.starts_with(&q.path) || q.path.starts_with(&p.path) {
                return Err(Error::refused(
                    &p.path,
                    format!("overlaps bed path {}", q.path.display()),
                ));
            }
        }
        no_symlink_on_the_way(&req.template, &p.path, "template")?;
        no_symlink_on_the_way(&req.dest, &p.path, "destination")?;
        let src = req.template.join(&p.path);
        match fs::symlink_metadata(&src) {
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Err(Error::refused(
                    &p.path,
                    format!("missing from the template {}", req.template.display()),
                ))
            }
            Err(e) => return Err(e).at("reading", &src),
        }
        let real_dest = fs::canonicalize(&req.dest).at("resolving", &req.dest)?;
        let real_src = fs::canonicalize(&src).unwrap_or(src.clone());
        if real_dest.starts_with(&real_src) {
            return Err(Error::refused(
                &p.path,
                format!("the destination {} lies inside it", req.dest.display()),
            ));
        }
        let fin = req.dest.join(&p.path);
        if has_content(&fin).at("reading", &fin)? {
            return Err(Error::refused(
                &p.path,
                format!(
                    "already exists in {} with content; seeding never writes over it",
                    req.dest.display()
                ),
            ));
        }
    }
    Ok(())
}

/// Refuses a path whose parents, below `root`, include a symlink or a non-directory
/// (seeding would read or write outside the tree).
fn no_symlink_on_the_way(root: &Path, rel: &Path, what: &str) -> Result<()> {
    let mut at = root.to_path_buf();
    let parents: Vec<_> = rel.components().collect();
    for c in &parents[..parents.len().saturating_sub(1)] {
        at.push(c);
        match fs::symlink_metadata(&at) {
            Ok(m) if m.is_dir() => {}
            Ok(m) if m.file_type().is_symlink() => {
                return Err(Error::refused(
                    rel,
                    format!("passes through a symlink in the {what} ({})", at.display()),
                ))
            }
            Ok(_) => {
                return Err(Error::refused(
                    rel,
                    format!(
                        "passes through a non-directory in the {what} ({})",
                        at.display()
                    ),
                ))
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(e).at("reading", &at),
        }
    }
    Ok(())
}

/// Whether something other than an empty directory is at `path`.
fn has_content(path: &Path) -> io::Result<bool> {
    match fs::symlink_metadata(path) {
        Ok(m) if m.is_dir() => Ok(fs::read_dir(path)?.next().is_some()),
        Ok(_) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e),
    }
}

fn same_device(a: &Path, b: &Path) -> Result<bool> {
    let da = fs::symlink_metadata(a).at("reading", a)?.dev();
    let db = fs::metadata(b).at("reading", b)?.dev();
    Ok(da == db)
}

/// Tries `FICLONE` and `copy_file_range` on a scratch file pair in `dest`.
fn probe(dest: &Path) -> Result<Probe> {
    let base = dest.join(format!(".spice-seed-probe.{}", std::process::id()));
    let a = base.with_extension("a");
    let b = base.with_extension("b");
    let result = probe_pair(&a, &b);
    let _ = fs::remove_file(&a);
    let _ = fs::remove_file(&b);
    result
}

fn probe_pair(a: &Path, b: &Path) -> Result<Probe> {
    let fresh = |p: &Path| -> Result<File> {
        let _ = fs::remove_file(p);
        OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(p)
            .at("creating the probe file", p)
    };
    let mut src = fresh(a)?;
    src.write_all(&[0x5a; 4096])
        .at("writing the probe file", a)?;
    let src = File::open(a).at("opening the probe file", a)?;
    let outcome = |r: io::Result<()>, what: &str, p: &Path| -> Result<String> {
        match r {
            Ok(()) => Ok("ok".into()),
            Err(e) if sys::unsupported(&e) => Ok(e.to_string()),
            Err(e) => Err(e).at(what, p),
        }
    };
    let dst = fresh(b)?;
    let ficlone = outcome(sys::ficlone(&src, &dst), "probing FICLONE on", b)?;
    let dst = fresh(b)?;
    let cfr = outcome(
        sys::copy_file_range(&src, &dst, 4096),
        "probing copy_file_range on",
        b,
    )?;
    Ok(Probe {
        ficlone,
        copy_file_range: cfr,
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
    fn methods_serialise_as_their_names() {
        for m in [
            Method::Reflink,
            Method::CopyFileRange,
            Method::Copy,
            Method::HardLink,
        ] {
            assert_eq!(serde_json::to_value(m).unwrap(), m.name());
        }
        let mut c = Counts::default();
        c.by_method.insert(Method::Reflink, 3);
        let v = serde_json::to_value(&c).unwrap();
        assert_eq!(v["by_method"]["reflink"], 3);
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
