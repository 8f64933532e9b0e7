//! The asciicast v2 recording of an agent's terminal: a header line, then one
//! `[seconds, "o", text]` event per chunk of output (and `"r"` for a resize), so
//! `asciinema play` replays what the agent showed.
//!
//! Invariants:
//! - Every line is a complete JSON value: text is valid UTF-8, with a sequence split
//!   across two reads carried to the next chunk and invalid bytes replaced by U+FFFD,
//!   exactly as `String::from_utf8_lossy` would decode the whole stream.
//! - Writes are buffered and flushed by the reader at least every [`FLUSH_EVERY`] and
//!   at the end, so a crash of the supervisor loses a fraction of a second at most.
//! - Memory is bounded: the buffer, plus at most 3 carried bytes.

use crate::error::{Error, Result};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Buffered recording data reaches the file at least this often.
pub const FLUSH_EVERY: Duration = Duration::from_millis(250);

/// Decodes a byte stream that arrives in arbitrary chunks into UTF-8 text.
#[derive(Debug, Default)]
pub struct Utf8Stream {
    /// The start of a multi-byte sequence whose remaining bytes have not arrived yet.
    carry: Vec<u8>,
}

impl Utf8Stream {
    /// Decodes `bytes`, keeping an incomplete trailing sequence for the next call.
    pub fn push(&mut self, bytes: &[u8]) -> String {
        let joined;
        let mut rest: &[u8] = if self.carry.is_empty() {
            bytes
        } else {
            joined = [std::mem::take(&mut self.carry).as_slice(), bytes].concat();
            &joined
        };
        let mut out = String::with_capacity(rest.len());
        loop {
            match std::str::from_utf8(rest) {
                Ok(s) => {
                    out.push_str(s);
                    return out;
                }
                Err(e) => {
                    let (good, bad) = rest.split_at(e.valid_up_to());
                    // The prefix was just validated; the default is never taken.
                    out.push_str(std::str::from_utf8(good).unwrap_or_default());
                    match e.error_len() {
                        Some(n) => {
                            out.push(char::REPLACEMENT_CHARACTER);
                            rest = &bad[n..];
                        }
                        None => {
                            self.carry = bad.to_vec();
                            return out;
                        }
                    }
                }
            }
        }
    }

    /// The end of the stream: a sequence that never completed becomes U+FFFD.
    pub fn finish(&mut self) -> String {
        let carry = std::mem::take(&mut self.carry);
        String::from_utf8_lossy(&carry).into_owned()
    }
}

/// The first line, in the order asciinema writes its keys.
#[derive(serde::Serialize)]
struct Header<'a> {
    version: u8,
    width: u16,
    height: u16,
    timestamp: i64,
    env: Env<'a>,
}

#[derive(serde::Serialize, Default)]
struct Env<'a> {
    #[serde(rename = "TERM", skip_serializing_if = "str::is_empty")]
    term: &'a str,
}

/// An open asciicast v2 file.
pub struct Recorder {
    path: PathBuf,
    out: BufWriter<File>,
    utf8: Utf8Stream,
    start: Instant,
    /// When buffered data first went unflushed, if any is.
    dirty_since: Option<Instant>,
}

impl Recorder {
    /// Creates `path` (and its directory) and writes the header. `timestamp` is the
    /// Unix time of the start, in seconds; `start` is the same moment, monotonic.
    pub fn create(
        path: &Path,
        cols: u16,
        rows: u16,
        timestamp: i64,
        term: Option<&str>,
        start: Instant,
    ) -> Result<Recorder> {
        let io = |what: &str, source| Error::Io {
            context: format!("failed to {what} recording {}", path.display()),
            source,
        };
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| io("create the directory of", e))?;
        }
        let file = File::create(path).map_err(|e| io("create", e))?;
        let header = Header {
            version: 2,
            width: cols,
            height: rows,
            timestamp,
            env: term.map(|t| Env { term: t }).unwrap_or_default(),
        };
        let header = serde_json::to_string(&header)
            .map_err(|e| Error::Other(format!("failed to encode a recording header: {e}")))?;
        let mut rec = Recorder {
            path: path.to_path_buf(),
            out: BufWriter::with_capacity(64 * 1024, file),
            utf8: Utf8Stream::default(),
            start,
            dirty_since: None,
        };
        rec.line(&header)?;
        rec.flush()?;
        Ok(rec)
    }

    /// Appends an output event for `bytes` (nothing while they are only the start of
    /// a character).
    pub fn output(&mut self, bytes: &[u8]) -> Result<()> {
        let text = self.utf8.push(bytes);
        self.event("o", &text)
    }

    /// Appends a resize event, so playback changes the terminal size at that moment.
    pub fn resize(&mut self, cols: u16, rows: u16) -> Result<()> {
        self.event("r", &format!("{cols}x{rows}"))
    }

    /// Flushes if data has waited [`FLUSH_EVERY`]; returns how long until the next
    /// flush is due (`None`: nothing is waiting).
    pub fn flush_if_due(&mut self, now: Instant) -> Result<Option<Duration>> {
        match self.dirty_since {
            Some(t) if now.duration_since(t) >= FLUSH_EVERY => self.flush().map(|()| None),
            Some(t) => Ok(Some(FLUSH_EVERY - now.duration_since(t))),
            None => Ok(None),
        }
    }

    /// Ends the stream: the last incomplete character, then everything to disk.
    pub fn finish(&mut self) -> Result<()> {
        let tail = self.utf8.finish();
        self.event("o", &tail)?;
        self.flush()
    }

    fn event(&mut self, kind: &str, text: &str) -> Result<()> {
        if text.is_empty() {
            return Ok(());
        }
        let secs = self.start.elapsed().as_secs_f64();
        // Microsecond precision, as asciinema writes it; serde_json escapes the text.
        let secs = (secs * 1e6).round() / 1e6;
        let line = serde_json::to_string(&(secs, kind, text))
            .map_err(|e| Error::Other(format!("failed to encode a recording event: {e}")))?;
        self.line(&line)?;
        self.dirty_since.get_or_insert_with(Instant::now);
        Ok(())
    }

    fn line(&mut self, line: &str) -> Result<()> {
        self.out
            .write_all(line.as_bytes())
            .and_then(|()| self.out.write_all(b"\n"))
            .map_err(|source| self.io_err(source))
    }

    fn flush(&mut self) -> Result<()> {
        self.dirty_since = None;
        self.out.flush().map_err(|source| self.io_err(source))
    }

    fn io_err(&self, source: std::io::Error) -> Error {
        Error::Io {
            context: format!("failed to write recording {}", self.path.display()),
            source,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn chunked(bytes: &[u8], cuts: &[usize]) -> String {
        let mut s = Utf8Stream::default();
        let mut out = String::new();
        let mut at = 0;
        for &c in cuts {
            let c = c.clamp(at, bytes.len());
            out.push_str(&s.push(&bytes[at..c]));
            at = c;
        }
        out.push_str(&s.push(&bytes[at..]));
        out.push_str(&s.finish());
        out
    }

    #[test]
    fn a_character_split_across_chunks_is_carried() {
        let bytes = "aé€😀z".as_bytes();
        for cut in 0..=bytes.len() {
            assert_eq!(chunked(bytes, &[cut]), "aé€😀z", "cut at {cut}");
        }
        let mut s = Utf8Stream::default();
        assert_eq!(s.push(&[0xF0, 0x9F]), "");
        assert_eq!(s.push(&[0x98]), "");
        assert_eq!(s.push(&[0x80, b'!']), "😀!");
    }

    #[test]
    fn invalid_bytes_become_replacement_characters() {
        assert_eq!(chunked(b"a\xFFb\xC3", &[]), "a\u{FFFD}b\u{FFFD}");
        assert_eq!(chunked(b"\xE2\x82x", &[1]), "\u{FFFD}x");
    }

    proptest! {
        #[test]
        fn chunked_decoding_equals_lossy_decoding_of_the_whole(
            bytes in proptest::collection::vec(prop_oneof![
                any::<u8>(),
                Just(0xE2u8), Just(0x82u8), Just(0xACu8), Just(0xF0u8), Just(0x9Fu8)
            ], 0..64),
            mut cuts in proptest::collection::vec(0usize..64, 0..6),
        ) {
            cuts.sort_unstable();
            prop_assert_eq!(chunked(&bytes, &cuts), String::from_utf8_lossy(&bytes).into_owned());
        }
    }
}
