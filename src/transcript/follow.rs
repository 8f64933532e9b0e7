//! Following a growing transcript file: whole lines only, exactly once.
//!
//! Invariants:
//! - A partial last line (no newline yet) is held back and retried when more bytes
//!   arrive: never decoded early, never skipped.
//! - The position is a [`Checkpoint`]: byte offset, line number, and an XXH3-64 hash of
//!   every byte before the offset (streamed, so it costs nothing extra to keep). A
//!   follower resumed from a checkpoint re-hashes the prefix once; if the file is
//!   shorter or its prefix differs, it was truncated or rewritten, and the follower
//!   starts again from the beginning with a fresh decoder (and says so), rather than
//!   decoding from the middle of a different file.
//! - While following, a file that shrinks, or whose last bytes before the offset
//!   change, is a [`Restart::Reset`]: the lines it still holds unchanged (found by
//!   [`marks`], hashes of the prefix at line ends) are not emitted again, the decoder is
//!   brought to where they end (replayed silently), and reading goes on after them.
//! - The file is followed by identity, not by name: the open file is kept, so a file
//!   renamed away (rotation) or deleted is read to its end before anything else at the
//!   path is looked at. Whatever is at the path then, the same bytes as the checkpoint's
//!   prefix (a copy put in its place) continue where they were; anything else is a new
//!   file, [`Restart::Rotated`], read from its start. A deleted file, read to its end,
//!   is closed (its space freed) and [`Follower::poll`] says `NotFound` until a file is
//!   at the path again.
//! - Memory is bounded by the longest line, not the file: bytes are read in chunks, and
//!   the marks are a few KiB however long the file. A poll with a lot to read (catching
//!   up on a large file) reads on a second thread while this one decodes, at most a few
//!   chunks ahead; the chunks are consumed in file order, exactly as an inline read
//!   would.

mod marks;

use super::event::{Decoder, Event};
use marks::Marks;
use std::fs::File;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use xxhash_rust::xxh3::Xxh3;

pub use crate::store::vocab::{prefix_hash, Checkpoint};

/// What happened to the file before the events of one [`Follower::poll`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Restart {
    /// The file continued where we left off.
    No,
    /// The file shrank (`truncated`) or bytes already read changed: the lines after
    /// `kept.line` are no longer in it. The lines up to it are not emitted again; the
    /// events that follow go on at `kept.line + 1` (at 1 when nothing was kept).
    Reset { kept: Checkpoint, truncated: bool },
    /// Another file is at the path now, the old one having been read to its end: its
    /// lines are read from its start, numbered from 1 again.
    Rotated,
}

impl Restart {
    /// How many lines already emitted still stand after this, when some no longer do
    /// (`None`: all of them stand).
    pub fn kept_lines(&self) -> Option<u64> {
        match self {
            Restart::No => None,
            Restart::Reset { kept, .. } => Some(kept.line),
            Restart::Rotated => Some(0),
        }
    }
}

const CHUNK: usize = 1 << 16;
/// At most this many bytes are read per [`Follower::poll`], so a caller can hand
/// events on between reads and memory stays bounded by this plus the longest line.
const BUDGET: u64 = 8 << 20;
/// How many bytes before the offset are compared on every read to notice rewrites.
const TAIL: u64 = 4096;
/// A poll with at least this much to read reads on a second thread while decoding.
const READ_AHEAD_FROM: u64 = 1 << 20;
/// Chunks read ahead of the decoder, at most.
const AHEAD: usize = 4;

/// A file's identity while it exists: device and inode.
pub type FileId = (u64, u64);

fn identity(md: &std::fs::Metadata) -> FileId {
    (md.dev(), md.ino())
}

pub struct Follower {
    path: PathBuf,
    /// The file being read, open: it stays readable when renamed away or deleted.
    file: Option<File>,
    /// The identity of the file last opened at `path`, kept after it is closed.
    id: Option<FileId>,
    /// The last file was lost (renamed away or deleted, and read to its end): what is
    /// opened at the path next is checked against the checkpoint.
    lost: bool,
    /// The running hash of `[0, at.offset)`.
    hasher: Xxh3,
    decoder: Box<dyn Decoder + Send>,
    make_decoder: fn() -> Box<dyn Decoder + Send>,
    at: Checkpoint,
    /// Bytes after the last newline, waiting for the rest of their line.
    partial: Vec<u8>,
    /// The last bytes before `at.offset`, to notice a rewrite cheaply.
    tail: Vec<u8>,
    /// Line ends read so far, to find what a truncated or rewritten file still holds.
    marks: Marks,
    /// Whether `at` has been checked against the file since it was set.
    verified: bool,
    /// Whether the last poll reached the end of the file.
    caught_up: bool,
    /// Length, modification and change times of the open file when a poll last read it
    /// to its end: the same again means nothing to read and nothing to compare.
    unchanged: Option<(u64, i64, i64, i64, i64)>,
}

impl Follower {
    /// Follows `path` from `from` (the start when `None`).
    pub fn new(
        path: &Path,
        make_decoder: fn() -> Box<dyn Decoder + Send>,
        from: Option<Checkpoint>,
    ) -> Follower {
        Follower {
            path: path.to_path_buf(),
            file: None,
            id: None,
            lost: false,
            hasher: Xxh3::new(),
            decoder: make_decoder(),
            make_decoder,
            at: from.unwrap_or(Checkpoint::start()),
            partial: Vec::new(),
            tail: Vec::new(),
            marks: Marks::default(),
            verified: from.is_none(),
            caught_up: false,
            unchanged: None,
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The device and inode of the file being followed (the last one, once closed).
    pub fn identity(&self) -> Option<FileId> {
        self.id
    }

    /// Follows the same file under a new name (it was renamed). Nothing is re-read:
    /// the open file is the same; a closed one is checked against the checkpoint when
    /// it is opened under the new name.
    pub fn renamed(&mut self, path: &Path) {
        self.path = path.to_path_buf();
    }

    /// The position after the last whole line decoded.
    pub fn checkpoint(&self) -> Checkpoint {
        Checkpoint {
            hash: self.hasher.digest(),
            ..self.at
        }
    }

    pub fn malformed(&self) -> u64 {
        self.decoder.malformed()
    }

    /// The records skipped so far for a kind the decoder does not know.
    pub fn unread(&self) -> &super::event::Unread {
        self.decoder.unread()
    }

    /// True when the last [`poll`](Self::poll) read to the end of the file; a caller
    /// that wants everything now polls until this holds.
    pub fn caught_up(&self) -> bool {
        self.caught_up
    }

    fn read_from(&self) -> u64 {
        self.at.offset + self.partial.len() as u64
    }

    /// Reads whole lines appended since the last call, at most [`BUDGET`] bytes.
    /// `NotFound` when nothing is at the path (any file that was there read to its end).
    pub fn poll(&mut self, out: &mut Vec<Event>) -> std::io::Result<Restart> {
        self.caught_up = false;
        if let Some(file) = self.file.take() {
            let here = std::fs::metadata(&self.path).map(|m| identity(&m)).ok();
            if here == self.id {
                return self.read(file, out);
            }
            // Renamed away, deleted or replaced: its last lines first.
            let len = file.metadata()?.len();
            if len > self.read_from() {
                let restart = self.read(file, out);
                self.caught_up = false;
                return restart;
            }
            self.lost = true;
        }
        let file = File::open(&self.path)?;
        let md = file.metadata()?;
        self.id = Some(identity(&md));
        self.unchanged = None;
        let mut restart = Restart::No;
        if self.lost {
            self.lost = false;
            self.verified = true;
            if self.prefix_matches(&file, md.len())? {
                // The same bytes under the same name: unread ones are read from here.
                self.partial.clear();
            } else if !self.partial.is_empty() {
                // The old file's last line is its own poll's, before the new file's.
                self.finish_partial(out);
                self.lost = true;
                return Ok(Restart::No);
            } else {
                self.reset();
                restart = Restart::Rotated;
            }
        }
        match self.read(file, out)? {
            Restart::No => Ok(restart),
            r => Ok(r),
        }
    }

    /// Reads from `file`, the file at the path, and keeps it open.
    fn read(&mut self, file: File, out: &mut Vec<Event>) -> std::io::Result<Restart> {
        let r = self.read_open(&file, out);
        self.file = Some(file);
        r
    }

    fn read_open(&mut self, file: &File, out: &mut Vec<Event>) -> std::io::Result<Restart> {
        let md = file.metadata()?;
        let len = md.len();
        let stamp = (
            len,
            md.mtime(),
            md.mtime_nsec(),
            md.ctime(),
            md.ctime_nsec(),
        );
        if self.verified && self.unchanged == Some(stamp) {
            // Not written to since it was read to its end: nothing to compare.
            self.caught_up = true;
            return Ok(Restart::No);
        }
        self.unchanged = None;
        let mut restart = Restart::No;
        if !self.verified {
            if !self.prefix_matches(file, len)? {
                let truncated = len < self.at.offset;
                self.reset();
                restart = Restart::Reset {
                    kept: Checkpoint::start(),
                    truncated,
                };
            }
            self.verified = true;
        } else if len < self.read_from() || !self.tail_matches(file)? {
            let truncated = len < self.read_from();
            let kept = self.kept_prefix(file, len)?;
            if kept.offset == self.at.offset && kept.line == self.at.line {
                // Only the held-back half line went: nothing emitted is gone.
                self.partial.clear();
            } else {
                self.replay(file, kept)?;
                restart = Restart::Reset { kept, truncated };
            }
        }
        let read_from = self.read_from();
        self.caught_up = len <= read_from + BUDGET;
        if self.caught_up {
            self.unchanged = Some(stamp);
        }
        if len <= read_from {
            return Ok(restart);
        }
        let remaining = (len - read_from).min(BUDGET);
        if remaining >= READ_AHEAD_FROM {
            self.read_ahead(file, read_from, remaining, out)?;
            return Ok(restart);
        }
        let mut buf = vec![0u8; CHUNK];
        let (mut pos, end) = (read_from, read_from + remaining);
        while pos < end {
            let want = ((end - pos) as usize).min(CHUNK);
            let n = file.read_at(&mut buf[..want], pos)?;
            if n == 0 {
                break;
            }
            pos += n as u64;
            self.consume(&buf[..n], out);
        }
        Ok(restart)
    }

    /// Reads `remaining` bytes from `pos` as [`poll`](Self::poll) does, on a second
    /// thread, so that the kernel's copy of the file overlaps decoding. The same chunks
    /// are consumed in the same order, a read error ends the poll after the chunks
    /// before it, and at most [`AHEAD`] chunks wait between the threads.
    fn read_ahead(
        &mut self,
        file: &File,
        mut pos: u64,
        mut remaining: u64,
        out: &mut Vec<Event>,
    ) -> std::io::Result<()> {
        let (full_tx, full_rx) = mpsc::sync_channel::<std::io::Result<(Vec<u8>, usize)>>(AHEAD);
        let (empty_tx, empty_rx) = mpsc::channel::<Vec<u8>>();
        for _ in 0..=AHEAD {
            let _ = empty_tx.send(vec![0u8; CHUNK]);
        }
        std::thread::scope(|scope| {
            scope.spawn(move || {
                while remaining > 0 {
                    // Closed only when the consumer is gone.
                    let Ok(mut buf) = empty_rx.recv() else { return };
                    let want = (remaining as usize).min(CHUNK);
                    match file.read_at(&mut buf[..want], pos) {
                        Ok(0) => return,
                        Ok(n) => {
                            remaining -= n as u64;
                            pos += n as u64;
                            if full_tx.send(Ok((buf, n))).is_err() {
                                return;
                            }
                        }
                        Err(e) => {
                            let _ = full_tx.send(Err(e));
                            return;
                        }
                    }
                }
            });
            for chunk in full_rx {
                let (buf, n) = chunk?;
                self.consume(&buf[..n], out);
                let _ = empty_tx.send(buf);
            }
            Ok(())
        })
    }

    fn consume(&mut self, bytes: &[u8], out: &mut Vec<Event>) {
        let mut at = 0;
        while let Some(nl) = memchr::memchr(b'\n', &bytes[at..]) {
            let end = at + nl;
            let line_no = self.at.line + 1;
            if self.partial.is_empty() {
                self.decoder.feed(strip_cr(&bytes[at..end]), line_no, out);
                self.advance(&bytes[at..=end]);
            } else {
                self.partial.extend_from_slice(&bytes[at..=end]);
                let whole = std::mem::take(&mut self.partial);
                self.decoder
                    .feed(strip_cr(&whole[..whole.len() - 1]), line_no, out);
                self.advance(&whole);
            }
            self.at.line = line_no;
            self.marks.push(self.checkpoint());
            at = end + 1;
        }
        self.partial.extend_from_slice(&bytes[at..]);
    }

    /// Moves the offset, the hash and the tail over one whole line.
    fn advance(&mut self, line: &[u8]) {
        self.hasher.update(line);
        self.push_tail(line);
        self.at.offset += line.len() as u64;
    }

    /// Keeps the last [`TAIL`] bytes (at least) of what was consumed.
    fn push_tail(&mut self, bytes: &[u8]) {
        if bytes.len() >= TAIL as usize {
            self.tail.clear();
            self.tail
                .extend_from_slice(&bytes[bytes.len() - TAIL as usize..]);
            return;
        }
        self.tail.extend_from_slice(bytes);
        if self.tail.len() > 2 * TAIL as usize {
            let cut = self.tail.len() - TAIL as usize;
            self.tail.drain(..cut);
        }
    }

    /// A file that is finished (replaced at its path) ends with its held-back bytes,
    /// if any: they are its last line, newline or not.
    fn finish_partial(&mut self, out: &mut Vec<Event>) {
        if !self.partial.is_empty() {
            let last = std::mem::take(&mut self.partial);
            self.at.line += 1;
            self.decoder.feed(strip_cr(&last), self.at.line, out);
        }
    }

    fn reset(&mut self) {
        self.decoder = (self.make_decoder)();
        self.hasher = Xxh3::new();
        self.at = Checkpoint::start();
        self.partial.clear();
        self.tail.clear();
        self.marks.clear();
        self.unchanged = None;
    }

    /// The last line end, at or before `len`, up to which the file still holds
    /// exactly what was read: the file is hashed from its start, compared at each
    /// mark, until the first that differs.
    fn kept_prefix(&self, file: &File, len: u64) -> std::io::Result<Checkpoint> {
        let mut kept = Checkpoint::start();
        let mut h = Xxh3::new();
        let mut pos = 0u64;
        let mut buf = vec![0u8; CHUNK];
        for m in self.marks.upto(len) {
            while pos < m.offset {
                let want = ((m.offset - pos) as usize).min(CHUNK);
                let n = file.read_at(&mut buf[..want], pos)?;
                if n == 0 {
                    return Ok(kept);
                }
                h.update(&buf[..n]);
                pos += n as u64;
            }
            if h.digest() != m.hash {
                break;
            }
            kept = *m;
        }
        Ok(kept)
    }

    /// Starts again with a fresh decoder brought to `kept` by feeding it the kept
    /// lines, whose events are dropped: they were emitted before.
    fn replay(&mut self, file: &File, kept: Checkpoint) -> std::io::Result<()> {
        self.reset();
        let mut buf = vec![0u8; CHUNK];
        let mut dropped = Vec::new();
        let mut pos = 0u64;
        while pos < kept.offset {
            let want = ((kept.offset - pos) as usize).min(CHUNK);
            let n = file.read_at(&mut buf[..want], pos)?;
            if n == 0 {
                break;
            }
            pos += n as u64;
            self.consume(&buf[..n], &mut dropped);
            dropped.clear();
        }
        Ok(())
    }

    /// Re-hashes `[0, offset)` of the file and compares it with the checkpoint.
    fn prefix_matches(&mut self, file: &File, len: u64) -> std::io::Result<bool> {
        if len < self.at.offset {
            return Ok(false);
        }
        let mut h = Xxh3::new();
        let mut pos = 0u64;
        let mut buf = vec![0u8; CHUNK];
        while pos < self.at.offset {
            let want = ((self.at.offset - pos) as usize).min(CHUNK);
            let n = file.read_at(&mut buf[..want], pos)?;
            if n == 0 {
                return Ok(false);
            }
            h.update(&buf[..n]);
            pos += n as u64;
        }
        if h.digest() != self.checkpoint_hash() {
            return Ok(false);
        }
        self.hasher = h;
        let keep = self.at.offset.min(TAIL);
        self.tail = vec![0u8; keep as usize];
        file.read_exact_at(&mut self.tail, self.at.offset - keep)?;
        self.marks.push(self.checkpoint());
        Ok(true)
    }

    /// The hash `at` stands for: the stored one before it is verified, the running
    /// one after.
    fn checkpoint_hash(&self) -> u64 {
        if self.verified {
            self.hasher.digest()
        } else {
            self.at.hash
        }
    }

    /// Compares the bytes just before the offset with what was read there.
    fn tail_matches(&mut self, file: &File) -> std::io::Result<bool> {
        let keep = (self.tail.len() as u64).min(TAIL).min(self.at.offset);
        if keep == 0 {
            return Ok(true);
        }
        let mut now = vec![0u8; keep as usize];
        if file.read_exact_at(&mut now, self.at.offset - keep).is_err() {
            return Ok(false);
        }
        Ok(now[..] == self.tail[self.tail.len() - keep as usize..])
    }
}

fn strip_cr(line: &[u8]) -> &[u8] {
    line.strip_suffix(b"\r").unwrap_or(line)
}

#[cfg(test)]
mod tests;
