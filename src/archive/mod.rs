//! The transcript archive: a zstd-compressed copy of each lane session's transcript
//! (Claude Code JSONL or a Codex rollout) under `<state dir>/archive/`, so briefings,
//! ACK evidence and usage stay readable after the agent deletes its own files.
//!
//! Layout: one file per original transcript, `<session>.<xxh3 of the original
//! path>.jsonl.zst`, found by session id (the name's start) or by the path it was
//! copied from (the hash). Each file opens with a zstd skippable frame holding its
//! [`Meta`] as JSON (original path, session, agent, bytes in, the original's
//! modification time, when it was archived), followed by the compressed transcript.
//!
//! Invariants:
//! - A copy appears under its name only complete: written to a temporary name in the
//!   same directory, fsynced, renamed over the older copy, the directory fsynced. A
//!   transcript that grew (a resumed conversation) replaces its older copy that way;
//!   an unchanged one (same size and modification time) is not written again.
//! - Nothing here reads the environment or the store; the fleet's [`worker`] records
//!   what was archived in the ledger.
//! - Reading an archived transcript writes nothing: it is decompressed into an
//!   anonymous memory file ([`Opened`]) and decoded by the same code as the original.

mod read;
pub mod sessions;
pub mod worker;

pub use read::{open, resolve, Opened};

use crate::error::{Error, Result};
use crate::transcript::event::Agent;
use serde::{Deserialize, Serialize};
use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// The archive's directory inside the state directory.
pub const DIR: &str = "archive";
/// The default bound on the archive's size (`[archive] max_bytes`).
pub use crate::config::housekeeping::DEFAULT_ARCHIVE_MAX_BYTES as DEFAULT_MAX_BYTES;
/// zstd's level for archived transcripts: JSONL compresses ~10× at level 3, fast.
const LEVEL: i32 = 3;
/// The skippable frame's magic number (the first of the sixteen zstd reserves).
const META_MAGIC: u32 = 0x184D_2A50;
const SUFFIX: &str = ".jsonl.zst";

/// What an archived copy says about itself (its first, skippable frame).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Meta {
    /// The path the transcript was copied from.
    pub original: PathBuf,
    pub session_id: String,
    /// `claude` or `codex`.
    pub agent: String,
    /// The working directory its first records name.
    #[serde(default)]
    pub cwd: Option<String>,
    /// The transcript's bytes (uncompressed).
    pub bytes_in: u64,
    /// The original's modification time when it was copied (µs since the epoch).
    pub source_modified: i64,
    /// When the copy was made (µs since the epoch).
    pub archived_at: i64,
}

/// One archived transcript.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Entry {
    pub path: PathBuf,
    /// The archive file's size (compressed, with its header).
    pub bytes_out: u64,
    #[serde(flatten)]
    pub meta: Meta,
}

/// What [`Archive::store`] did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Stored {
    pub entry: Entry,
    /// `false`: the archived copy was already up to date, nothing written.
    pub written: bool,
    /// An older copy of the same transcript was replaced.
    pub replaced: bool,
}

/// The archive of one state directory.
#[derive(Debug, Clone)]
pub struct Archive {
    dir: PathBuf,
}

fn io(context: String) -> impl FnOnce(std::io::Error) -> Error {
    move |source| Error::Io { context, source }
}

fn micros(t: SystemTime) -> i64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_micros() as i64)
        .unwrap_or(0)
}

fn agent_name(a: Agent) -> &'static str {
    a.name()
}

/// The hash naming an original path in the archive.
pub fn path_key(original: &Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    format!(
        "{:016x}",
        xxhash_rust::xxh3::xxh3_64(original.as_os_str().as_bytes())
    )
}

/// A session id made safe as the start of a file name.
fn safe(id: &str) -> String {
    let s: String = id
        .chars()
        .take(96)
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '-'
            }
        })
        .collect();
    if s.is_empty() {
        "session".into()
    } else {
        s
    }
}

/// `(session part, path key)` of an archive file's name.
fn split_name(name: &str) -> Option<(&str, &str)> {
    let stem = name.strip_suffix(SUFFIX)?;
    let (session, key) = stem.rsplit_once('.')?;
    (key.len() == 16 && key.bytes().all(|b| b.is_ascii_hexdigit())).then_some((session, key))
}

impl Archive {
    /// The archive under `state_dir` (created when something is first stored).
    pub fn at(state_dir: &Path) -> Archive {
        Archive {
            dir: state_dir.join(DIR),
        }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Archive files, by name (unreadable names skipped).
    fn files(&self) -> Vec<(PathBuf, String, String)> {
        let Ok(rd) = std::fs::read_dir(&self.dir) else {
            return Vec::new();
        };
        let mut out: Vec<_> = rd
            .flatten()
            .filter_map(|e| {
                let name = e.file_name().to_str()?.to_string();
                let (session, key) = split_name(&name)?;
                Some((e.path(), session.to_string(), key.to_string()))
            })
            .collect();
        out.sort();
        out
    }

    /// Every archived transcript, oldest archived first. A file whose header cannot
    /// be read is skipped (it is not one of ours, or it is damaged: never deleted).
    pub fn list(&self) -> Vec<Entry> {
        let mut out: Vec<Entry> = self
            .files()
            .into_iter()
            .filter_map(|(p, _, _)| read_entry(&p).ok())
            .collect();
        out.sort_by(|a, b| (a.meta.archived_at, &a.path).cmp(&(b.meta.archived_at, &b.path)));
        out
    }

    /// The archived copy of the transcript that was at `original`.
    pub fn by_path(&self, original: &Path) -> Option<Entry> {
        let abs = std::path::absolute(original).unwrap_or_else(|_| original.to_path_buf());
        let keys = [path_key(original), path_key(&abs)];
        self.files()
            .into_iter()
            .filter(|(_, _, k)| keys.contains(k))
            .filter_map(|(p, _, _)| read_entry(&p).ok())
            .find(|e| e.meta.original == abs || e.meta.original == original)
    }

    /// Archived transcripts of sessions that worked in `cwd` whose originals are gone.
    pub fn gone_for(&self, cwd: &Path) -> Vec<Entry> {
        let want = std::fs::canonicalize(cwd).unwrap_or_else(|_| cwd.to_path_buf());
        self.list()
            .into_iter()
            .filter(|e| !e.meta.original.exists())
            .filter(|e| {
                e.meta.cwd.as_deref().is_some_and(|c| {
                    let c = Path::new(c);
                    c == cwd || std::fs::canonicalize(c).is_ok_and(|c| c == want)
                })
            })
            .collect()
    }

    /// Archived transcripts whose session id starts with `prefix`.
    pub fn by_session(&self, prefix: &str) -> Vec<Entry> {
        if prefix.is_empty() {
            return Vec::new();
        }
        self.files()
            .into_iter()
            .filter(|(_, s, _)| s.starts_with(&safe(prefix)))
            .filter_map(|(p, _, _)| read_entry(&p).ok())
            .filter(|e| e.meta.session_id.starts_with(prefix))
            .collect()
    }

    /// Copies the transcript at `original` into the archive (module invariants).
    /// `session` names it when its records do not.
    pub fn store(&self, original: &Path, session: Option<&str>, now: i64) -> Result<Stored> {
        let original = std::path::absolute(original).unwrap_or_else(|_| original.to_path_buf());
        let shown = original.display().to_string();
        let mut src = std::fs::File::open(&original).map_err(io(format!("opening {shown}")))?;
        let md = src.metadata().map_err(io(format!("reading {shown}")))?;
        let agent = crate::transcript::detect_file(&original)?;
        let described = crate::transcript::discover::describe(&original, agent);
        let cwd = described.as_ref().and_then(|d| d.cwd.clone());
        let session_id = described
            .and_then(|d| d.session_id)
            .or_else(|| session.map(str::to_string))
            .or_else(|| {
                original
                    .file_stem()
                    .map(|s| s.to_string_lossy().to_string())
            })
            .unwrap_or_else(|| "session".into());
        let modified = md.modified().map(micros).unwrap_or(0);
        let older = self.by_path(&original);
        if let Some(e) = &older {
            if e.meta.bytes_in == md.len() && e.meta.source_modified == modified {
                return Ok(Stored {
                    entry: e.clone(),
                    written: false,
                    replaced: false,
                });
            }
        }
        std::fs::create_dir_all(&self.dir)
            .map_err(io(format!("creating {}", self.dir.display())))?;
        let name = format!("{}.{}{SUFFIX}", safe(&session_id), path_key(&original));
        let dest = self.dir.join(&name);
        let tmp = self.dir.join(format!(".{name}.{}.tmp", std::process::id()));
        let written = (|| -> std::io::Result<u64> {
            let mut out = std::fs::File::create(&tmp)?;
            // The header says how many bytes were copied, known only after the copy:
            // written as a placeholder of fixed width, then filled in.
            let mut meta = Meta {
                original: original.clone(),
                session_id: session_id.clone(),
                agent: agent_name(agent).into(),
                cwd: cwd.clone(),
                bytes_in: u64::MAX,
                source_modified: modified,
                archived_at: now,
            };
            let header = header_bytes(&meta)?;
            out.write_all(&header)?;
            let mut enc = zstd::stream::write::Encoder::new(&mut out, LEVEL)?;
            let copied = std::io::copy(&mut src, &mut enc)?;
            enc.finish()?;
            meta.bytes_in = copied;
            let filled = header_bytes(&meta)?;
            debug_assert_eq!(filled.len(), header.len());
            out.seek(std::io::SeekFrom::Start(0))?;
            out.write_all(&filled)?;
            out.sync_all()?;
            Ok(copied)
        })();
        if let Err(source) = written {
            let _ = std::fs::remove_file(&tmp);
            return Err(Error::Io {
                context: format!("archiving {shown} into {}", dest.display()),
                source,
            });
        }
        std::fs::rename(&tmp, &dest).map_err(io(format!("renaming into {}", dest.display())))?;
        // A copy under another name (the session id read differently before) is the
        // same transcript's older copy: the new one replaces it.
        let mut replaced = older.is_some();
        if let Some(e) = older.filter(|e| e.path != dest) {
            let _ = std::fs::remove_file(&e.path);
            replaced = true;
        }
        if let Ok(d) = std::fs::File::open(&self.dir) {
            let _ = d.sync_all();
        }
        Ok(Stored {
            entry: read_entry(&dest)?,
            written: true,
            replaced,
        })
    }

    /// Removes the oldest copies until the archive holds at most `max_bytes`; what
    /// was removed (nothing when `dry_run`).
    pub fn prune(&self, max_bytes: u64, dry_run: bool) -> Result<Vec<Entry>> {
        let all = self.list();
        let mut total: u64 = all.iter().map(|e| e.bytes_out).sum();
        let mut removed = Vec::new();
        for e in all {
            if total <= max_bytes {
                break;
            }
            if !dry_run {
                std::fs::remove_file(&e.path)
                    .map_err(io(format!("removing {}", e.path.display())))?;
            }
            total -= e.bytes_out;
            removed.push(e);
        }
        Ok(removed)
    }
}

/// The skippable frame holding `meta`, its JSON padded to a width that does not
/// depend on `bytes_in`'s digits.
fn header_bytes(meta: &Meta) -> std::io::Result<Vec<u8>> {
    let mut json = serde_json::to_vec(meta)?;
    let width = serde_json::to_vec(&Meta {
        bytes_in: u64::MAX,
        ..meta.clone()
    })?
    .len();
    json.resize(width, b' ');
    let mut out = Vec::with_capacity(8 + json.len());
    out.extend_from_slice(&META_MAGIC.to_le_bytes());
    out.extend_from_slice(&(json.len() as u32).to_le_bytes());
    out.extend_from_slice(&json);
    Ok(out)
}

/// Reads the header of the archive file at `path`; the reader is left after it.
fn read_header(f: &mut std::fs::File, path: &Path) -> Result<Meta> {
    let bad = |why: &str| Error::input(format!("{}: not a spice archive ({why})", path.display()));
    let mut head = [0u8; 8];
    f.read_exact(&mut head).map_err(|_| bad("too short"))?;
    if u32::from_le_bytes(head[..4].try_into().expect("4 bytes")) != META_MAGIC {
        return Err(bad("no header"));
    }
    let len = u32::from_le_bytes(head[4..].try_into().expect("4 bytes")) as usize;
    if len > 1 << 20 {
        return Err(bad("header too long"));
    }
    let mut json = vec![0u8; len];
    f.read_exact(&mut json)
        .map_err(|_| bad("truncated header"))?;
    serde_json::from_slice(&json).map_err(|e| bad(&format!("header: {e}")))
}

fn read_entry(path: &Path) -> Result<Entry> {
    let mut f = std::fs::File::open(path).map_err(io(format!("opening {}", path.display())))?;
    let meta = read_header(&mut f, path)?;
    let bytes_out = f
        .metadata()
        .map_err(io(format!("reading {}", path.display())))?
        .len();
    Ok(Entry {
        path: path.to_path_buf(),
        bytes_out,
        meta,
    })
}

#[cfg(test)]
mod tests;
