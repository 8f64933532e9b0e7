//! Copying one tree by one seeding's method: the walk behind [`super::seed`].
//!
//! Never follows a symlink (every node is `lstat`ed; links are recreated from their
//! text), creates every node fresh (`O_EXCL`, `mkdir`), and gives every node its
//! template's mode and nanosecond times, directories' after they are filled so the
//! filling does not move them. A file whose method the filesystem refuses falls back
//! to the next method (reflink → in-kernel copy → plain copy; hard link → the
//! seeding's method), and the fallback is recorded once in the report.

use super::seed::{Counts, Method, Progress, RewrittenLink};
use super::sys;
use super::{IoContext, Result};
use std::fs::{self, DirBuilder, File, Metadata, OpenOptions, Permissions};
use std::io::{self, Seek};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Reports progress every this many files.
const PROGRESS_EVERY: u64 = 256;

/// The state of one seeding's copies, shared by its paths.
pub(crate) struct Copier<'a> {
    /// The template as given and as resolved: absolute links under either are rewritten.
    pub template_roots: Vec<PathBuf>,
    pub dest_root: PathBuf,
    /// The method for regular files; lowered for the rest of the seeding when the
    /// filesystem refuses it.
    pub method: Method,
    /// What the copy falls to when `method` is refused.
    pub copy_method: Method,
    /// Why a method was lowered, once per seeding.
    pub fallbacks: Vec<String>,
    pub progress: &'a mut dyn FnMut(&Progress),
}

/// One path's copy: its counts and the links it rewrote.
pub(crate) struct PathCopy<'c, 'a> {
    pub copier: &'c mut Copier<'a>,
    /// The path relative to the worktree (for the report and progress).
    pub rel: PathBuf,
    /// Hard links are wanted and possible (same device as the destination).
    pub link: bool,
    pub counts: Counts,
    pub rewritten: Vec<RewrittenLink>,
}

impl PathCopy<'_, '_> {
    /// Copies the node `src` (of the template) to `dst`, which must not exist; `sub`
    /// is its path below the seeded path, for reports.
    pub fn node(&mut self, src: &Path, dst: &Path, sub: &Path) -> Result<()> {
        let meta = fs::symlink_metadata(src).at("reading", src)?;
        let ft = meta.file_type();
        if ft.is_dir() {
            DirBuilder::new()
                .mode(0o700)
                .create(dst)
                .at("creating directory", dst)?;
            for entry in fs::read_dir(src).at("listing", src)? {
                let entry = entry.at("listing", src)?;
                let name = entry.file_name();
                self.node(&entry.path(), &dst.join(&name), &sub.join(&name))?;
            }
            fs::set_permissions(dst, Permissions::from_mode(meta.mode() & 0o7777))
                .at("setting the mode of", dst)?;
            sys::set_times(dst, &meta).at("setting the times of", dst)?;
            self.counts.dirs += 1;
        } else if ft.is_symlink() {
            let target = fs::read_link(src).at("reading link", src)?;
            let kept = self.rewrite(&target, sub);
            std::os::unix::fs::symlink(&kept, dst).at("creating symlink", dst)?;
            sys::set_times(dst, &meta).at("setting the times of", dst)?;
            self.counts.symlinks += 1;
        } else if ft.is_file() {
            let used = self.file(src, dst, &meta)?;
            self.counts.files += 1;
            self.counts.bytes += meta.len();
            *self.counts.by_method.entry(used).or_default() += 1;
            if self.counts.files % PROGRESS_EVERY == 0 {
                (self.copier.progress)(&Progress {
                    path: &self.rel,
                    files: self.counts.files,
                    bytes: self.counts.bytes,
                    done: false,
                });
            }
        } else {
            // Sockets, fifos and devices: a bed is files; their count is reported.
            self.counts.special_skipped += 1;
        }
        Ok(())
    }

    /// A link's target as the seeded tree keeps it: relative targets and absolute ones
    /// outside the template unchanged; absolute ones inside it moved to the same
    /// place inside the destination.
    fn rewrite(&mut self, target: &Path, sub: &Path) -> PathBuf {
        if target.is_absolute() {
            for root in &self.copier.template_roots {
                if let Ok(inner) = target.strip_prefix(root) {
                    let to = self.copier.dest_root.join(inner);
                    self.rewritten.push(RewrittenLink {
                        link: if sub.as_os_str().is_empty() {
                            self.rel.clone()
                        } else {
                            self.rel.join(sub)
                        },
                        from: target.to_path_buf(),
                        to: to.clone(),
                    });
                    return to;
                }
            }
            self.counts.absolute_links_kept += 1;
        }
        target.to_path_buf()
    }

    /// Copies one regular file, returning the method that did it.
    fn file(&mut self, src: &Path, dst: &Path, meta: &Metadata) -> Result<Method> {
        if self.link {
            match fs::hard_link(src, dst) {
                Ok(()) => return Ok(Method::HardLink),
                Err(e) if sys::unsupported(&e) || e.raw_os_error() == Some(nix::libc::EMLINK) => {
                    self.link = false;
                    self.copier.fallbacks.push(format!(
                        "hard link refused for {} ({e}): copied by {} instead",
                        self.rel.display(),
                        self.copier.method.name()
                    ));
                }
                Err(e) => return Err(e).at("hard-linking", dst),
            }
        }
        let mut from = File::open(src).at("opening", src)?;
        let mut to = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(dst)
            .at("creating", dst)?;
        let used = self.contents(&mut from, &mut to, meta.len(), src, dst)?;
        to.set_permissions(Permissions::from_mode(meta.mode() & 0o7777))
            .at("setting the mode of", dst)?;
        sys::set_file_times(&to, meta).at("setting the times of", dst)?;
        Ok(used)
    }

    /// Fills `to` with `from`'s bytes by the best method the pair accepts.
    fn contents(
        &mut self,
        from: &mut File,
        to: &mut File,
        len: u64,
        src: &Path,
        dst: &Path,
    ) -> Result<Method> {
        if self.copier.method == Method::Reflink {
            match sys::ficlone(from, to) {
                Ok(()) => return Ok(Method::Reflink),
                Err(e) if sys::unsupported(&e) => {
                    self.lower(Method::Reflink, src, &e);
                }
                Err(e) => return Err(e).at("cloning into", dst),
            }
        }
        if self.copier.method == Method::CopyFileRange {
            match sys::copy_file_range(from, to, len) {
                Ok(()) => return Ok(Method::CopyFileRange),
                Err(e) if sys::unsupported(&e) => {
                    self.lower(Method::CopyFileRange, src, &e);
                    to.set_len(0).at("truncating", dst)?;
                    to.rewind().at("rewinding", dst)?;
                    from.rewind().at("rewinding", src)?;
                }
                Err(e) => return Err(e).at("copying into", dst),
            }
        }
        io::copy(from, to).at("copying into", dst)?;
        Ok(Method::Copy)
    }

    /// Lowers the seeding's method after the filesystem refused `failed` on `src`.
    fn lower(&mut self, failed: Method, src: &Path, e: &io::Error) {
        let next = if failed == Method::Reflink {
            self.copier.copy_method
        } else {
            Method::Copy
        };
        self.copier.method = next;
        self.copier.fallbacks.push(format!(
            "{} refused for {} ({e}): {} from here on",
            failed.name(),
            src.display(),
            next.name()
        ));
    }
}

/// Removes whatever is at `path` (a leftover staging tree, a failed copy), if anything.
pub(crate) fn remove_any(path: &Path) -> io::Result<bool> {
    match fs::symlink_metadata(path) {
        Ok(m) if m.is_dir() => fs::remove_dir_all(path).map(|()| true),
        Ok(_) => fs::remove_file(path).map(|()| true),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e),
    }
}
