//! The checks before a seeding writes anything, and the probe of the destination's
//! filesystem that chooses the seeding's method.

use super::report::Probe;
use super::seed::SeedRequest;
use super::sys;
use super::{check_absolute, check_relative, Error, IoContext, Result};
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

/// Refuses the request before anything is written if any path cannot be seeded.
pub(crate) fn preflight(req: &SeedRequest) -> Result<()> {
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
pub(crate) fn has_content(path: &Path) -> io::Result<bool> {
    match fs::symlink_metadata(path) {
        Ok(m) if m.is_dir() => Ok(fs::read_dir(path)?.next().is_some()),
        Ok(_) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e),
    }
}

pub(crate) fn same_device(a: &Path, b: &Path) -> Result<bool> {
    let da = fs::symlink_metadata(a).at("reading", a)?.dev();
    let db = fs::metadata(b).at("reading", b)?.dev();
    Ok(da == db)
}

/// Tries `FICLONE` and `copy_file_range` on a scratch file pair in `dest`.
pub(crate) fn probe(dest: &Path) -> Result<Probe> {
    // Unique per process and per seeding, so concurrent seedings never share a pair.
    static N: AtomicU64 = AtomicU64::new(0);
    let n = N.fetch_add(1, Ordering::Relaxed);
    let name = |side| {
        dest.join(format!(
            ".spice-seed-probe.{}.{n}.{side}",
            std::process::id()
        ))
    };
    let (a, b) = (name("a"), name("b"));
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
