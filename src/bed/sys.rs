//! The Linux calls a bed needs beyond `std`: `FICLONE`, `copy_file_range`, `FIEMAP`
//! and nanosecond timestamps that never follow a symlink.
//!
//! Each wrapper returns the raw `io::Error`, so callers can tell "this filesystem
//! cannot" (`EOPNOTSUPP`, `EXDEV`, `EINVAL`, `ENOTTY`, `ENOSYS`) from a real failure.

use nix::libc;
use nix::sys::stat::{futimens, utimensat, UtimensatFlags};
use nix::sys::time::TimeSpec;
use std::fs::{File, Metadata};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// True for the errors by which a filesystem (or a pair of them) says it cannot do
/// an operation at all, as opposed to failing at it.
pub fn unsupported(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EOPNOTSUPP | libc::EXDEV | libc::EINVAL | libc::ENOTTY | libc::ENOSYS)
    )
}

/// Makes `dst` share all of `src`'s extents (a reflink): `ioctl(dst, FICLONE, src)`.
pub fn ficlone(src: &File, dst: &File) -> io::Result<()> {
    // SAFETY: FICLONE takes the source descriptor as its integer argument.
    let r = unsafe { libc::ioctl(dst.as_raw_fd(), libc::FICLONE, src.as_raw_fd()) };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Copies `len` bytes from the start of `src` to `dst` in the kernel. An error on
/// the very first call means the pair cannot use it; later ones are real failures.
pub fn copy_file_range(src: &File, dst: &File, len: u64) -> io::Result<()> {
    let mut left = len;
    while left > 0 {
        let chunk = usize::try_from(left.min(1 << 30)).unwrap_or(1 << 30);
        // SAFETY: null offsets use and advance both descriptors' file positions.
        let n = unsafe {
            libc::copy_file_range(
                src.as_raw_fd(),
                std::ptr::null_mut(),
                dst.as_raw_fd(),
                std::ptr::null_mut(),
                chunk,
                0,
            )
        };
        match n {
            n if n < 0 => return Err(io::Error::last_os_error()),
            // The source shrank under us: what was copied is what there is.
            0 => break,
            n => left = left.saturating_sub(n as u64),
        }
    }
    Ok(())
}

/// Sets `path`'s access and modification times to `meta`'s, to the nanosecond,
/// without following a symlink (a link keeps its own times).
pub fn set_times(path: &Path, meta: &Metadata) -> io::Result<()> {
    let atime = TimeSpec::new(meta.atime(), meta.atime_nsec());
    let mtime = TimeSpec::new(meta.mtime(), meta.mtime_nsec());
    utimensat(None, path, &atime, &mtime, UtimensatFlags::NoFollowSymlink).map_err(io::Error::from)
}

/// Sets an open file's access and modification times to `meta`'s, to the nanosecond.
pub fn set_file_times(file: &File, meta: &Metadata) -> io::Result<()> {
    let atime = TimeSpec::new(meta.atime(), meta.atime_nsec());
    let mtime = TimeSpec::new(meta.mtime(), meta.mtime_nsec());
    futimens(file.as_raw_fd(), &atime, &mtime).map_err(io::Error::from)
}

/// Flushes the whole filesystem holding `dir` (what a crash would otherwise lose
/// before the renames that publish a seeded tree).
pub fn syncfs(dir: &File) -> io::Result<()> {
    nix::unistd::syncfs(dir.as_raw_fd()).map_err(io::Error::from)
}

/// One extent of a file, as `FIEMAP` reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Extent {
    pub logical: u64,
    pub physical: u64,
    pub length: u64,
    pub flags: u32,
}

pub const FIEMAP_EXTENT_LAST: u32 = 0x0001;
pub const FIEMAP_EXTENT_UNKNOWN: u32 = 0x0002;
pub const FIEMAP_EXTENT_DELALLOC: u32 = 0x0004;
pub const FIEMAP_EXTENT_NOT_ALIGNED: u32 = 0x0100;
pub const FIEMAP_EXTENT_DATA_INLINE: u32 = 0x0200;
pub const FIEMAP_EXTENT_DATA_TAIL: u32 = 0x0400;
pub const FIEMAP_EXTENT_SHARED: u32 = 0x2000;

/// `struct fiemap` (linux/fiemap.h), followed by room for `BATCH` extents.
#[repr(C)]
struct Fiemap {
    start: u64,
    length: u64,
    flags: u32,
    mapped_extents: u32,
    extent_count: u32,
    reserved: u32,
    extents: [FiemapExtent; BATCH],
}

/// `struct fiemap_extent`.
#[repr(C)]
#[derive(Clone, Copy)]
struct FiemapExtent {
    logical: u64,
    physical: u64,
    length: u64,
    reserved64: [u64; 2],
    flags: u32,
    reserved: [u32; 3],
}

const BATCH: usize = 128;

/// `_IOWR('f', 11, struct fiemap)`: direction 3 in bits 30–31, the 32-byte header's
/// size in bits 16–29, type `'f'` in bits 8–15, number 11 in bits 0–7.
pub const FS_IOC_FIEMAP: libc::c_ulong =
    (3 << 30) | (32 << 16) | ((b'f' as libc::c_ulong) << 8) | 11;

/// Every extent of `file`, in logical order. An `unsupported` error means the
/// filesystem has no `FIEMAP` (tmpfs, some FUSE filesystems).
pub fn fiemap(file: &File) -> io::Result<Vec<Extent>> {
    let mut out = Vec::new();
    let mut start = 0u64;
    loop {
        // SAFETY: all-zero is a valid value of this plain C struct.
        let mut req: Box<Fiemap> = Box::new(unsafe { std::mem::zeroed() });
        req.start = start;
        req.length = u64::MAX - start;
        req.extent_count = BATCH as u32;
        // SAFETY: the buffer holds the header and `extent_count` extents, as the
        // kernel expects; it writes no further.
        let r = unsafe { libc::ioctl(file.as_raw_fd(), FS_IOC_FIEMAP as _, &mut *req) };
        if r != 0 {
            return Err(io::Error::last_os_error());
        }
        let n = (req.mapped_extents as usize).min(BATCH);
        if n == 0 {
            return Ok(out);
        }
        let mut last = false;
        for e in &req.extents[..n] {
            out.push(Extent {
                logical: e.logical,
                physical: e.physical,
                length: e.length,
                flags: e.flags,
            });
            last |= e.flags & FIEMAP_EXTENT_LAST != 0;
        }
        let end = req.extents[n - 1].logical + req.extents[n - 1].length;
        if last || n < BATCH || end <= start {
            return Ok(out);
        }
        start = end;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fiemap_request_matches_the_kernel_abi() {
        // The value linux/fs.h gives FS_IOC_FIEMAP on every architecture spice builds on.
        assert_eq!(FS_IOC_FIEMAP, 0xC020_660B);
        assert_eq!(std::mem::size_of::<FiemapExtent>(), 56);
        assert_eq!(std::mem::size_of::<Fiemap>(), 32 + 56 * BATCH);
    }

    #[test]
    fn unsupported_is_only_the_cannot_errors() {
        assert!(unsupported(&io::Error::from_raw_os_error(libc::EOPNOTSUPP)));
        assert!(unsupported(&io::Error::from_raw_os_error(libc::EXDEV)));
        assert!(!unsupported(&io::Error::from_raw_os_error(libc::ENOSPC)));
        assert!(!unsupported(&io::Error::from_raw_os_error(libc::EIO)));
    }
}
