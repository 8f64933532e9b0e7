//! Reading an archived transcript: decompressed into an anonymous memory file
//! (`memfd`), so the ordinary decoders read it by a path and nothing is written.

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

/// Decompresses `entry` (see [`Opened`]).
pub fn open(entry: &Entry) -> Result<Opened> {
    use std::os::fd::AsRawFd;
    let shown = entry.path.display().to_string();
    let mut f = std::fs::File::open(&entry.path).map_err(io(format!("opening {shown}")))?;
    read_header(&mut f, &entry.path)?;
    let fd = nix::sys::memfd::memfd_create(
        c"spice-archive",
        nix::sys::memfd::MemFdCreateFlag::MFD_CLOEXEC,
    )
    .map_err(|e| Error::Other(format!("cannot decompress {shown}: memfd_create: {e}")))?;
    let mut mem = std::fs::File::from(fd);
    let mut dec =
        zstd::stream::read::Decoder::new(f).map_err(|e| Error::input(format!("{shown}: {e}")))?;
    std::io::copy(&mut dec, &mut mem)
        .map_err(|e| Error::input(format!("{shown}: damaged archive: {e}")))?;
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
