//! A log file bounded by size: `fleet.log`, then `fleet.log.1`, `fleet.log.2`, … the
//! older the higher, at most `files` in all, each at most `limit` bytes.
//!
//! Invariants:
//! - Every `write` is one whole record (a line) and is never split across files: a
//!   file rotates before the record that would take it past `limit`, so only a single
//!   record longer than `limit` makes a file exceed it.
//! - Rotation renames (oldest removed first, then each moved one up), so a crash
//!   mid-rotation loses at most the oldest file, never the current one.
//! - Records go to the file as they are written (no buffering in the process), so
//!   `tail -f` shows each one at once and a killed supervisor loses none.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// The default bound of `<state>/logs/fleet.log`: 10 MiB a file, three files.
pub const LIMIT: u64 = 10 * 1024 * 1024;
pub const FILES: usize = 3;

pub struct LogFile {
    path: PathBuf,
    limit: u64,
    files: usize,
    file: File,
    size: u64,
}

impl LogFile {
    /// Opens `path` for appending (creating it and its directory), keeping at most
    /// `files` files (at least one) of at most `limit` bytes.
    pub fn open(path: &Path, limit: u64, files: usize) -> io::Result<LogFile> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let file = append(path)?;
        let size = file.metadata()?.len();
        Ok(LogFile {
            path: path.to_path_buf(),
            limit,
            files: files.max(1),
            file,
            size,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The `n`th older file (`n` ≥ 1).
    fn older(&self, n: usize) -> PathBuf {
        let mut p = self.path.clone().into_os_string();
        p.push(format!(".{n}"));
        PathBuf::from(p)
    }

    fn rotate(&mut self) -> io::Result<()> {
        if self.files == 1 {
            self.file.set_len(0)?;
            self.size = 0;
            return Ok(());
        }
        let oldest = self.older(self.files - 1);
        match std::fs::remove_file(&oldest) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
        for n in (1..self.files - 1).rev() {
            let from = self.older(n);
            if from.exists() {
                std::fs::rename(&from, self.older(n + 1))?;
            }
        }
        std::fs::rename(&self.path, self.older(1))?;
        self.file = append(&self.path)?;
        self.size = 0;
        Ok(())
    }
}

fn append(path: &Path) -> io::Result<File> {
    OpenOptions::new().create(true).append(true).open(path)
}

impl Write for LogFile {
    fn write(&mut self, record: &[u8]) -> io::Result<usize> {
        if self.size > 0 && self.size + record.len() as u64 > self.limit {
            self.rotate()?;
        }
        self.file.write_all(record)?;
        self.size += record.len() as u64;
        Ok(record.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(p: &Path) -> String {
        std::fs::read_to_string(p).unwrap_or_default()
    }

    #[test]
    fn the_log_rotates_by_size_and_keeps_a_bounded_number_of_files() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("logs/fleet.log");
        let mut log = LogFile::open(&path, 100, 3).unwrap();
        // 30 lines of 24 bytes: four lines a file, and only the newest three files.
        for n in 0..30 {
            log.write_all(format!("line {n:02} of the events..\n").as_bytes())
                .unwrap();
        }
        let names: Vec<String> = {
            let mut v: Vec<String> = std::fs::read_dir(dir.path().join("logs"))
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect();
            v.sort();
            v
        };
        assert_eq!(names, ["fleet.log", "fleet.log.1", "fleet.log.2"]);
        for p in [path.clone(), log.older(1), log.older(2)] {
            let text = read(&p);
            assert!(text.len() <= 100, "{}: {} bytes", p.display(), text.len());
            assert!(text.ends_with('\n') && text.lines().all(|l| l.len() == 23));
        }
        assert!(read(&path).ends_with("line 29 of the events..\n"));
        // Lines 20–23 in the oldest file kept: nothing before them, nothing lost after.
        assert!(
            read(&log.older(2)).starts_with("line 20 "),
            "{}",
            read(&log.older(2))
        );
        // A reopened log goes on where it was, and rotates on the same bound.
        drop(log);
        let mut log = LogFile::open(&path, 100, 3).unwrap();
        for n in 30..33 {
            log.write_all(format!("line {n:02} of the events..\n").as_bytes())
                .unwrap();
        }
        assert!(
            read(&log.older(1)).starts_with("line 28 "),
            "{}",
            read(&log.older(1))
        );
        assert_eq!(read(&path), "line 32 of the events..\n");
    }

    #[test]
    fn a_record_longer_than_the_limit_gets_a_file_of_its_own() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("fleet.log");
        let mut log = LogFile::open(&path, 10, 2).unwrap();
        log.write_all(b"short\n").unwrap();
        log.write_all(b"a record of thirty bytes long\n").unwrap();
        log.write_all(b"next\n").unwrap();
        assert_eq!(read(&log.older(1)), "a record of thirty bytes long\n");
        assert_eq!(read(&path), "next\n");
    }
}
