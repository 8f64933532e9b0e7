//! What a seeding reports: the method per file, path and seeding, the counts, the
//! links it rewrote, and what the probe found. All of it serialises (JSON for
//! `spice bed status` and the task's ledger).

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
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
    pub(crate) fn add(&mut self, o: &Counts) {
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
