//! Following a growing transcript file: whole lines only, exactly once.
//!
//! Invariants:
//! - A partial last line (no newline yet) is held back and retried when more bytes
//!   arrive: never decoded early, never skipped.
//! - The position is a [`Checkpoint`]: byte offset, line number, and an XXH3-64 hash of
//!   every byte before the offset (streamed, so it costs nothing extra to keep). A follower resumed from a checkpoint re-hashes the
//!   prefix once; if the file is shorter or its prefix differs, it was truncated or
//!   rewritten, and the follower starts again from the beginning with a fresh decoder
//!   (and says so), rather than decoding from the middle of a different file.
//! - While following, a file that shrinks, or whose last bytes before the offset
//!   change, is detected the same way on the next read.
//! - Memory is bounded by the longest line, not the file: bytes are read in chunks.
//!   A poll with a lot to read (catching up on a large file) reads on a second thread
//!   while this one decodes, at most a few chunks ahead; the chunks are consumed in
//!   file order, exactly as an inline read would.

use super::event::{Decoder, Event};
use serde::{Deserialize, Serialize};
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use xxhash_rust::xxh3::Xxh3;

/// Where a follower is in a file.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Checkpoint {
    pub offset: u64,
    /// Lines fully consumed so far (the next line is `line + 1`).
    pub line: u64,
    /// XXH3-64 of the bytes `[0, offset)`.
    pub hash: u64,
}

/// What one read found besides events.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Restart {
    /// The file continued where we left off.
    No,
    /// The file was shorter than the checkpoint or its prefix changed: read anew.
    Rewritten,
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

pub struct Follower {
    path: PathBuf,
    /// The running hash of `[0, at.offset)`.
    hasher: Xxh3,
    decoder: Box<dyn Decoder + Send>,
    make_decoder: fn() -> Box<dyn Decoder + Send>,
    at: Checkpoint,
    /// Bytes after the last newline, waiting for the rest of their line.
    partial: Vec<u8>,
    /// The last bytes before `at.offset`, to notice a rewrite cheaply.
    tail: Vec<u8>,
    /// Whether `at` has been checked against the file since it was set.
    verified: bool,
    /// Whether the last poll reached the end of the file.
    caught_up: bool,
}

/// The checkpoint hash of a whole prefix: XXH3-64, stable across builds and
/// platforms (unlike std's hasher), and fast enough to stream over every byte read.
pub fn prefix_hash(bytes: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64(bytes)
}

/// The hash of the empty prefix.
fn empty_hash() -> u64 {
    prefix_hash(b"")
}

impl Follower {
    /// Follows `path` from `from` (the start when `None`).
    pub fn new(
        path: &Path,
        make_decoder: fn() -> Box<dyn Decoder + Send>,
        from: Option<Checkpoint>,
    ) -> Follower {
        let start = Checkpoint {
            offset: 0,
            line: 0,
            hash: empty_hash(),
        };
        Follower {
            path: path.to_path_buf(),
            hasher: Xxh3::new(),
            decoder: make_decoder(),
            make_decoder,
            at: from.unwrap_or(start),
            partial: Vec::new(),
            tail: Vec::new(),
            verified: from.is_none(),
            caught_up: false,
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
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

    /// True when the last [`poll`](Self::poll) read to the end of the file; a caller
    /// that wants everything now polls until this holds.
    pub fn caught_up(&self) -> bool {
        self.caught_up
    }

    /// Reads whole lines appended since the last call, at most [`BUDGET`] bytes.
    pub fn poll(&mut self, out: &mut Vec<Event>) -> std::io::Result<Restart> {
        let mut file = File::open(&self.path)?;
        let len = file.metadata()?.len();
        let mut restart = Restart::No;
        if !self.verified {
            if !self.prefix_matches(&mut file, len)? {
                self.reset();
                restart = Restart::Rewritten;
            }
            self.verified = true;
        } else if len < self.at.offset + self.partial.len() as u64
            || !self.tail_matches(&mut file)?
        {
            self.reset();
            restart = Restart::Rewritten;
        }
        let read_from = self.at.offset + self.partial.len() as u64;
        self.caught_up = len <= read_from + BUDGET;
        if len <= read_from {
            return Ok(restart);
        }
        file.seek(SeekFrom::Start(read_from))?;
        let remaining = (len - read_from).min(BUDGET);
        if remaining >= READ_AHEAD_FROM {
            self.read_ahead(&mut file, remaining, out)?;
            return Ok(restart);
        }
        let mut buf = vec![0u8; CHUNK];
        let mut remaining = remaining;
        while remaining > 0 {
            let want = (remaining as usize).min(CHUNK);
            let n = file.read(&mut buf[..want])?;
            if n == 0 {
                break;
            }
            remaining -= n as u64;
            self.consume(&buf[..n], out);
        }
        Ok(restart)
    }

    /// Reads `remaining` bytes as [`poll`](Self::poll) does, on a second thread, so that
    /// the kernel's copy of the file overlaps decoding. The same chunks are consumed in
    /// the same order, a read error ends the poll after the chunks before it, and at
    /// most [`AHEAD`] chunks wait between the threads.
    fn read_ahead(
        &mut self,
        file: &mut File,
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
                    match file.read(&mut buf[..want]) {
                        Ok(0) => return,
                        Ok(n) => {
                            remaining -= n as u64;
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
        // Whole lines of `bytes` start here; they are hashed and kept as the tail in one
        // go once decoded (a streamed hash does not depend on how its input is split).
        let mut start = 0;
        let mut at = 0;
        while let Some(nl) = memchr::memchr(b'\n', &bytes[at..]) {
            let end = at + nl;
            let line_no = self.at.line + 1;
            if self.partial.is_empty() {
                self.decoder.feed(strip_cr(&bytes[at..end]), line_no, out);
            } else {
                self.partial.extend_from_slice(&bytes[at..=end]);
                let whole = std::mem::take(&mut self.partial);
                self.decoder
                    .feed(strip_cr(&whole[..whole.len() - 1]), line_no, out);
                self.hasher.update(&whole);
                self.push_tail(&whole);
                self.at.offset += whole.len() as u64;
                start = end + 1;
            }
            self.at.line = line_no;
            at = end + 1;
        }
        let lines = &bytes[start..at];
        self.hasher.update(lines);
        self.push_tail(lines);
        self.at.offset += lines.len() as u64;
        self.partial.extend_from_slice(&bytes[at..]);
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

    fn reset(&mut self) {
        self.decoder = (self.make_decoder)();
        self.hasher = Xxh3::new();
        self.at = Checkpoint {
            offset: 0,
            line: 0,
            hash: empty_hash(),
        };
        self.partial.clear();
        self.tail.clear();
    }

    /// Re-hashes `[0, offset)` of the file and compares it with the checkpoint.
    fn prefix_matches(&mut self, file: &mut File, len: u64) -> std::io::Result<bool> {
        if len < self.at.offset {
            return Ok(false);
        }
        file.seek(SeekFrom::Start(0))?;
        let mut h = Xxh3::new();
        let mut left = self.at.offset;
        let mut buf = vec![0u8; CHUNK];
        while left > 0 {
            let n = file.read(&mut buf[..(left as usize).min(CHUNK)])?;
            if n == 0 {
                return Ok(false);
            }
            h.update(&buf[..n]);
            left -= n as u64;
        }
        if h.digest() != self.at.hash {
            return Ok(false);
        }
        self.hasher = h;
        let keep = self.at.offset.min(TAIL);
        file.seek(SeekFrom::Start(self.at.offset - keep))?;
        self.tail = vec![0u8; keep as usize];
        file.read_exact(&mut self.tail)?;
        Ok(true)
    }

    /// Compares the bytes just before the offset with what was read there.
    fn tail_matches(&mut self, file: &mut File) -> std::io::Result<bool> {
        let keep = (self.tail.len() as u64).min(TAIL).min(self.at.offset);
        if keep == 0 {
            return Ok(true);
        }
        let mut now = vec![0u8; keep as usize];
        file.seek(SeekFrom::Start(self.at.offset - keep))?;
        if file.read_exact(&mut now).is_err() {
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
