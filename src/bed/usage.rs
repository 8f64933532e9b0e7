//! Real disk usage of trees: what they cost, not what they claim.
//!
//! Apparent size is the sum of `st_size` over regular files and symlinks. Real size is
//! allocated space: each inode counted once (hard links share one, by `(dev, ino)`),
//! an unshared file by its `st_blocks * 512`, and a file with extents `FIEMAP` flags
//! `SHARED` (reflinks on btrfs and XFS) by its private extents plus the shared ones
//! as a union of physical ranges per device, so an extent shared by ten clones is
//! counted once. Where the filesystem has no `FIEMAP` the file's `st_blocks` is
//! counted and the result says how many files that was. Limits: compressed extents
//! are counted at their logical length, and btrfs subvolumes (distinct `st_dev`) are
//! measured as if they shared nothing.

use super::sys::{self, Extent};
use super::{IoContext, Result};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs::{self, File};
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// The size of some trees, or of what one tree adds to others.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Sum of `st_size` over regular files and symlinks, each inode once.
    pub apparent: u64,
    /// Allocated bytes, each inode and each shared extent once.
    pub real: u64,
    /// The part of `real` in extents flagged shared (counted once).
    pub shared: u64,
    pub inodes: u64,
    /// Regular files `FIEMAP` could not map (a filesystem without it, a file this
    /// user cannot open): counted by `st_blocks`, so extents they share are not seen.
    pub fiemap_unsupported: u64,
    /// Says, when `fiemap_unsupported` is not zero, what that means for `real`.
    pub note: Option<String>,
}

impl Usage {
    fn noted(mut self) -> Self {
        if self.fiemap_unsupported > 0 {
            self.note = Some(format!(
                "FIEMAP unavailable for {} files (unsupported by the filesystem, or unreadable): \
                 counted by st_blocks, shared extents not seen",
                self.fiemap_unsupported
            ));
        }
        self
    }
}

/// Disjoint half-open ranges `[start, end)`, keyed by start.
#[derive(Debug, Default)]
struct Ranges(BTreeMap<u64, u64>);

impl Ranges {
    /// Adds `[start, end)`, returning how many of its bytes were not covered yet.
    fn insert(&mut self, start: u64, end: u64) -> u64 {
        if end <= start {
            return 0;
        }
        let (mut lo, mut hi, mut covered) = (start, end, 0);
        let touching: Vec<(u64, u64)> = self
            .0
            .range(..=end)
            .rev()
            .take_while(|(_, &e)| e >= start)
            .map(|(&s, &e)| (s, e))
            .collect();
        for (s, e) in touching {
            covered += e.min(end).saturating_sub(s.max(start));
            lo = lo.min(s);
            hi = hi.max(e);
            self.0.remove(&s);
        }
        self.0.insert(lo, hi);
        (end - start) - covered
    }
}

/// Counts trees one after another, so a later tree is charged only for what the
/// earlier ones did not already hold.
#[derive(Debug, Default)]
pub struct Meter {
    seen: HashSet<(u64, u64)>,
    shared: HashMap<u64, Ranges>,
    total: Usage,
}

impl Meter {
    pub fn new() -> Self {
        Meter::default()
    }

    /// Everything counted so far.
    pub fn total(&self) -> Usage {
        self.total.clone().noted()
    }

    /// Counts `tree` (a directory or a single file; symlinks are not followed) and
    /// returns what it added: its own apparent size, and the real bytes and inodes
    /// nothing counted before held.
    pub fn add(&mut self, tree: &Path) -> Result<Usage> {
        let mut added = Usage::default();
        // The tree's own apparent size, and the part of it no earlier tree held.
        let mut own = HashSet::new();
        let mut new_apparent = 0;
        let mut stack = vec![tree.to_path_buf()];
        let gone = |e: &std::io::Error| e.kind() == std::io::ErrorKind::NotFound;
        while let Some(path) = stack.pop() {
            // What vanishes inside the tree while it is measured (a warm or a removal
            // under way) no longer takes any disk; a tree that is not there is named.
            let meta = match fs::symlink_metadata(&path) {
                Err(e) if gone(&e) && path != tree => continue,
                m => m.at("measuring", &path)?,
            };
            if meta.is_dir() {
                let entries = match fs::read_dir(&path) {
                    Err(e) if gone(&e) => continue,
                    rd => rd.at("listing", &path)?,
                };
                for entry in entries {
                    match entry {
                        Err(e) if gone(&e) => {}
                        e => stack.push(e.at("listing", &path)?.path()),
                    }
                }
            }
            let id = (meta.dev(), meta.ino());
            let sized = meta.is_file() || meta.file_type().is_symlink();
            if own.insert(id) && sized {
                added.apparent += meta.size();
            }
            if !self.seen.insert(id) {
                continue;
            }
            if sized {
                new_apparent += meta.size();
            }
            added.inodes += 1;
            let blocks = meta.blocks() * 512;
            if !meta.is_file() || blocks == 0 {
                added.real += blocks;
                continue;
            }
            match File::open(&path).and_then(|f| sys::fiemap(&f)) {
                Ok(extents) => {
                    self.extents(meta.dev(), blocks, meta.blksize(), &extents, &mut added)
                }
                Err(e) if sys::unsupported(&e) => {
                    added.fiemap_unsupported += 1;
                    added.real += blocks;
                }
                Err(e) if gone(&e) => {}
                Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
                    added.fiemap_unsupported += 1;
                    added.real += blocks;
                }
                Err(e) => return Err(e).at("mapping the extents of", &path),
            }
        }
        self.total.apparent += new_apparent;
        self.total.real += added.real;
        self.total.shared += added.shared;
        self.total.inodes += added.inodes;
        self.total.fiemap_unsupported += added.fiemap_unsupported;
        Ok(added.noted())
    }

    /// Charges one file with extents `extents` (its `st_blocks` in bytes `blocks`).
    fn extents(&mut self, dev: u64, blocks: u64, block: u64, extents: &[Extent], to: &mut Usage) {
        let unmappable = sys::FIEMAP_EXTENT_UNKNOWN
            | sys::FIEMAP_EXTENT_DELALLOC
            | sys::FIEMAP_EXTENT_DATA_INLINE
            | sys::FIEMAP_EXTENT_NOT_ALIGNED
            | sys::FIEMAP_EXTENT_DATA_TAIL;
        let is_shared =
            |e: &Extent| e.flags & sys::FIEMAP_EXTENT_SHARED != 0 && e.flags & unmappable == 0;
        if !extents.iter().any(is_shared) {
            to.real += blocks;
            return;
        }
        let block = block.max(512);
        let ranges = self.shared.entry(dev).or_default();
        for e in extents {
            let len = e.length.div_ceil(block) * block;
            if is_shared(e) {
                let new = ranges.insert(e.physical, e.physical.saturating_add(len));
                to.real += new;
                to.shared += new;
            } else {
                to.real += len;
            }
        }
    }
}

/// The real and apparent size of `trees` together.
pub fn measure<P: AsRef<Path>>(trees: &[P]) -> Result<Usage> {
    let mut meter = Meter::new();
    for t in trees {
        meter.add(t.as_ref())?;
    }
    Ok(meter.total())
}

/// What `tree` adds to `others` already counted: what one more worktree costs.
pub fn added<P: AsRef<Path>>(tree: &Path, others: &[P]) -> Result<Usage> {
    let mut meter = Meter::new();
    for t in others {
        meter.add(t.as_ref())?;
    }
    meter.add(tree)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_count_each_byte_once() {
        let mut r = Ranges::default();
        assert_eq!(r.insert(0, 10), 10);
        assert_eq!(r.insert(0, 10), 0);
        assert_eq!(r.insert(5, 15), 5);
        assert_eq!(r.insert(20, 30), 10);
        assert_eq!(r.insert(15, 20), 5, "fills the gap exactly");
        assert_eq!(r.0.len(), 1, "adjacent ranges merge: {:?}", r.0);
        assert_eq!(r.insert(40, 50), 10);
        assert_eq!(r.insert(35, 60), 15, "covers a range inside it");
        assert_eq!(r.insert(0, 100), 100 - 30 - 25);
        assert_eq!(r.0.into_iter().collect::<Vec<_>>(), vec![(0, 100)]);
    }

    #[test]
    fn shared_extents_are_charged_once_across_files() {
        let mut m = Meter::new();
        let shared = Extent {
            logical: 0,
            physical: 1 << 20,
            length: 8192,
            flags: sys::FIEMAP_EXTENT_SHARED,
        };
        let private = Extent {
            logical: 8192,
            physical: 1 << 30,
            length: 100,
            flags: sys::FIEMAP_EXTENT_LAST,
        };
        let mut a = Usage::default();
        m.extents(7, 12288, 4096, &[shared, private], &mut a);
        assert_eq!((a.real, a.shared), (8192 + 4096, 8192));
        let mut b = Usage::default();
        m.extents(7, 8192, 4096, &[shared], &mut b);
        assert_eq!((b.real, b.shared), (0, 0), "the clone adds nothing");
        let mut c = Usage::default();
        m.extents(8, 8192, 4096, &[shared], &mut c);
        assert_eq!(c.real, 8192, "another device has its own address space");
        let mut d = Usage::default();
        m.extents(7, 12288, 4096, &[private], &mut d);
        assert_eq!(d.real, 12288, "an unshared file is charged its st_blocks");
    }

    #[test]
    fn hard_links_are_one_inode() {
        let t = tempfile::tempdir().unwrap();
        let a = t.path().join("a");
        fs::write(&a, vec![1u8; 10_000]).unwrap();
        fs::hard_link(&a, t.path().join("b")).unwrap();
        let u = measure(&[t.path()]).unwrap();
        assert_eq!(u.apparent, 10_000);
        assert_eq!(u.inodes, 2, "the directory and the file");
        let both = measure(&[a.clone(), t.path().join("b")]).unwrap();
        assert_eq!((both.apparent, both.inodes), (10_000, 1), "one inode, once");
        let more = added(&t.path().join("b"), &[&a]).unwrap();
        assert_eq!((more.apparent, more.real, more.inodes), (10_000, 0, 0));
    }

    #[test]
    fn a_missing_tree_is_named() {
        let e = measure(&[Path::new("/nonexistent/bed")])
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("measuring /nonexistent/bed: "), "{e}");
    }
}
