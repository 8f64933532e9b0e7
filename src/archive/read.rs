//! Reading an archived transcript: decompressed into an anonymous memory file
//! (`memfd`), so the ordinary decoders read it by a path and nothing is written.
//! Decompression is bounded ([`inflate_limit`]): an archive that inflates past what
//! it recorded is refused as damaged, never held whole in memory.

use super::{io, read_header, Archive, Entry};
use crate::error::{Error, Result};
use std::path::{Path, PathBuf};

/// An archived transcript decompressed into an anonymous memory file: readable at
/// [`Opened::path`] by every reader of transcripts, gone when dropped.
pub struct Opened {
    _file: std::fs::File,
    path: PathBuf,
    pub entry: Entry,
}

impl Opened {
    /// Where the decompressed transcript can be opened (`/proc/self/fd/N`).
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// The most an archive may inflate to: the size its header recorded, and never more
/// than [`MAX_RATIO`] times its compressed size (at least [`RATIO_FLOOR`]), since the
/// header is as writable as the rest of the file. A transcript is JSON text: real ones
/// compress far less than that.
pub fn inflate_limit(bytes_in: u64, bytes_out: u64) -> u64 {
    bytes_in.min(bytes_out.saturating_mul(MAX_RATIO).max(RATIO_FLOOR))
}

/// See [`inflate_limit`].
pub const MAX_RATIO: u64 = 1000;
/// See [`inflate_limit`].
pub const RATIO_FLOOR: u64 = 16 << 20;

/// Decompresses `entry` (see [`Opened`]), within [`inflate_limit`].
pub fn open(entry: &Entry) -> Result<Opened> {
    use std::os::fd::AsRawFd;
    let shown = entry.path.display().to_string();
    let mut f = std::fs::File::open(&entry.path).map_err(io(format!("opening {shown}")))?;
    let meta = read_header(&mut f, &entry.path)?;
    let limit = inflate_limit(meta.bytes_in, entry.bytes_out);
    let fd = nix::sys::memfd::memfd_create(
        c"spice-archive",
        nix::sys::memfd::MemFdCreateFlag::MFD_CLOEXEC,
    )
    .map_err(|e| Error::Other(format!("cannot decompress {shown}: memfd_create: {e}")))?;
    let mut mem = std::fs::File::from(fd);
    let mut dec =
        zstd::stream::read::Decoder::new(f).map_err(|e| Error::input(format!("{shown}: {e}")))?;
    let got = std::io::copy(&mut std::io::Read::take(&mut dec, limit + 1), &mut mem)
        .map_err(|e| Error::input(format!("{shown}: damaged archive: {e}")))?;
    if got > limit {
        return Err(Error::input(format!(
            "{shown}: damaged archive: it inflates beyond {limit} bytes (its header says {} \
             bytes, from {} compressed); not read further",
            meta.bytes_in, entry.bytes_out
        )));
    }
    let path = PathBuf::from(format!("/proc/self/fd/{}", mem.as_raw_fd()));
    Ok(Opened {
        _file: mem,
        path,
        entry: entry.clone(),
    })
}

/// The transcript at `path`, or its archived copy when nothing is there any more:
/// the path to read and, for an archived one, what keeps it readable.
pub fn resolve(state_dir: Option<&Path>, path: &Path) -> Option<Opened> {
    if path.exists() {
        return None;
    }
    let entry = Archive::at(state_dir?).by_path(path)?;
    open(&entry).ok()
}
