//! Opening the database file, and saying what went wrong with it in the user's terms.
//!
//! Invariants:
//! - A file is looked at before anything is written to it: the schema version and the
//!   table count are read first, so a foreign SQLite file or one from a newer spice is
//!   refused with its bytes untouched (the journal mode, which rewrites the header, is
//!   switched only after those checks pass).
//! - A store whose directory or file is not writable, or whose disk is full, opens
//!   read-only: reads work, and every write is refused naming the file and why.
//! - SQLite's "disk I/O error" and "attempt to write a readonly database" are reported
//!   as what they are ("the disk is full", "read-only") with the file they concern.
//! - The `-wal` file stays bounded: a checkpoint rewinds it but never shrinks it, so a
//!   store written for days kept the size of its busiest burst; every read-write
//!   connection sets `journal_size_limit` ([`WAL_LIMIT`]), and the file is cut back to
//!   it after each checkpoint that resets it.

use super::schema;
use crate::error::{Error, Result};
use rusqlite::{Connection, ErrorCode, OpenFlags};
use std::path::{Path, PathBuf};

/// Below this much free space, an I/O error is taken to be the disk filling up.
const FULL_BELOW: u64 = 1 << 20;

/// What the `-wal` file is truncated to after a checkpoint resets it (64 MiB): far
/// above what a fleet writes between two automatic checkpoints (1,000 pages), so
/// steady work never pays for growing it again, while a burst's leftover is given
/// back. A per-connection setting, made at each open.
const WAL_LIMIT: i64 = 64 << 20;

/// Opens `path` for reading and writing, creating and migrating it as needed; or, when
/// it cannot be written, read-only with the reason (`Some(why)`) writes will report.
pub(super) fn open(path: &Path) -> Result<(Connection, Option<String>)> {
    if let Some(why) = unwritable(path) {
        return Ok((open_read_only(path, &why)?, Some(why)));
    }
    match open_read_write_waiting(path) {
        Ok(conn) => Ok((conn, None)),
        Err(e) => {
            // A full disk cannot even hold the WAL index; what is there can still be read.
            if let (Some(full), true) = (
                io_failure(&e).then(|| disk_full(path)).flatten(),
                path.exists(),
            ) {
                return Ok((open_read_only(path, &full)?, Some(full)));
            }
            Err(explain(path, None, e))
        }
    }
}

/// [`open_read_write`], tried again while another opener holds the lock it needs.
/// Switching a new file to WAL takes an exclusive lock, and SQLite refuses the second
/// of two switches at once with SQLITE_BUSY without calling the busy handler (waiting
/// could deadlock); so a first open that meets another one waits here instead, as
/// long as any write would.
fn open_read_write_waiting(path: &Path) -> Result<Connection> {
    let deadline = std::time::Instant::now() + super::BUSY_TIMEOUT;
    let mut pause = std::time::Duration::from_millis(2);
    loop {
        match open_read_write(path) {
            Err(e) if busy(&e) && std::time::Instant::now() < deadline => {
                std::thread::sleep(pause);
                pause = (pause * 2).min(std::time::Duration::from_millis(50));
            }
            done => return done,
        }
    }
}

fn busy(e: &Error) -> bool {
    matches!(
        e,
        Error::Sqlite { source, .. }
            if matches!(source.sqlite_error_code(), Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked))
    )
}

fn open_read_write(path: &Path) -> Result<Connection> {
    configure_sqlite();
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
        | OpenFlags::SQLITE_OPEN_CREATE
        | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = Connection::open_with_flags(path, flags).map_err(|e| sql(path, e))?;
    conn.busy_timeout(super::BUSY_TIMEOUT)
        .map_err(|e| sql(path, e))?;
    conn.execute_batch(&format!(
        "PRAGMA foreign_keys = ON; PRAGMA synchronous = FULL; \
         PRAGMA journal_size_limit = {WAL_LIMIT};"
    ))
    .map_err(|e| sql(path, e))?;
    // Refuse before the first write: switching to WAL rewrites the header.
    let version = schema::refuse_foreign(&conn, path)?;
    let mode: String = conn
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .map_err(|e| sql(path, e))?;
    if !mode.eq_ignore_ascii_case("wal") {
        conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get::<_, String>(0))
            .map_err(|e| sql(path, e))?;
    }
    let mut conn = conn;
    // A current schema was just read: no second look (every command opens the store).
    if version < schema::VERSION {
        schema::migrate(&mut conn, path)?;
    }
    Ok(conn)
}

/// SQLite's process-wide settings, made once before its first connection: no memory
/// statistics (spice never reads them; keeping them takes a global mutex and a count on
/// every allocation, and parsing the schema at each open allocates a few thousand times).
pub(super) fn configure_sqlite() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // SAFETY: called before any connection exists in this process (every connection
        // of the store is made after this); sqlite3_config is refused (SQLITE_MISUSE),
        // harmlessly, if SQLite was already initialised.
        unsafe {
            rusqlite::ffi::sqlite3_config(
                rusqlite::ffi::SQLITE_CONFIG_MEMSTATUS,
                0 as std::ffi::c_int,
            );
        }
    });
}

/// Opens an existing database without writing to it or beside it where that cannot be
/// done: a WAL database whose `-wal` is gone (cleanly closed) is opened immutable, since
/// a directory nobody can write holds no writer.
pub(super) fn open_read_only(path: &Path, why: &str) -> Result<Connection> {
    if !path.exists() {
        return Err(Error::Other(format!(
            "{}: {why}: it does not exist and cannot be created",
            path.display()
        )));
    }
    let conn = open_read_only_for_check(path, false)
        .map_err(|e| explain(path, Some(why), sql(path, e)))?;
    let version = schema::refuse_foreign(&conn, path)?;
    if version < schema::VERSION {
        return Err(Error::Other(format!(
            "{}: {why}, and at schema version {version}, older than this spice's {}: it cannot be upgraded until it can be written",
            path.display(),
            schema::VERSION
        )));
    }
    Ok(conn)
}

/// A read-only connection for examining a file: a live database is read as other
/// connections see it (immutable only when nothing beside it can be created); a
/// backup, which nothing writes, is always read immutable, leaving nothing beside it.
pub(super) fn open_read_only_for_check(path: &Path, backup: bool) -> rusqlite::Result<Connection> {
    if backup {
        return immutable_conn(path);
    }
    match read_only_conn(path) {
        // Nothing beside it can be created (read-only directory, full disk).
        Err(e) if wal_is_empty(path) && !crate::error::is_corruption(&e) => immutable_conn(path),
        other => other,
    }
}

pub(super) fn read_only_conn(path: &Path) -> rusqlite::Result<Connection> {
    configure_sqlite();
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    conn.busy_timeout(super::BUSY_TIMEOUT)?;
    // Opening is lazy: the first read is what needs the WAL index.
    conn.query_row("PRAGMA user_version", [], |r| r.get::<_, i64>(0))?;
    Ok(conn)
}

/// A connection that reads the file as it is, with no `-wal`/`-shm` and no locks.
pub(super) fn immutable_conn(path: &Path) -> rusqlite::Result<Connection> {
    configure_sqlite();
    let conn = Connection::open_with_flags(
        format!("file:{}?immutable=1", uri_path(path)),
        OpenFlags::SQLITE_OPEN_READ_ONLY
            | OpenFlags::SQLITE_OPEN_URI
            | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    conn.query_row("PRAGMA user_version", [], |r| r.get::<_, i64>(0))?;
    Ok(conn)
}

/// The path part of a `file:` URI: `?`, `#` and `%` are escaped, the rest kept.
fn uri_path(path: &Path) -> String {
    let mut out = String::new();
    for c in path.to_string_lossy().chars() {
        match c {
            '?' | '#' | '%' => out.push_str(&format!("%{:02X}", c as u32)),
            c => out.push(c),
        }
    }
    out
}

/// True when `path` has no `-wal` with content: nothing is committed beyond the main
/// file (a failed open may leave an empty one behind).
fn wal_is_empty(path: &Path) -> bool {
    std::fs::metadata(wal_file(path)).map_or(true, |m| m.len() == 0)
}

pub(super) fn wal_file(path: &Path) -> PathBuf {
    let mut p = path.as_os_str().to_owned();
    p.push("-wal");
    PathBuf::from(p)
}

/// Why this process cannot write the database (or create it), if it cannot.
fn unwritable(path: &Path) -> Option<String> {
    use nix::unistd::{access, AccessFlags};
    let dir = directory(path);
    if let Err(e) = access(dir, AccessFlags::W_OK) {
        return Some(format!(
            "read-only (its directory {} is not writable: {})",
            dir.display(),
            std::io::Error::from(e)
        ));
    }
    match access(path, AccessFlags::W_OK) {
        Err(nix::errno::Errno::ENOENT) | Ok(()) => None,
        Err(e) => Some(format!(
            "read-only (the file is not writable: {})",
            std::io::Error::from(e)
        )),
    }
}

fn directory(path: &Path) -> &Path {
    path.parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
}

/// "the disk is full (N bytes free in DIR)" when the file system holding `path` has
/// (next to) no space left.
pub(super) fn disk_full(path: &Path) -> Option<String> {
    let dir = directory(path);
    let st = nix::sys::statvfs::statvfs(dir).ok()?;
    let free = st.blocks_available() as u64 * st.fragment_size() as u64;
    (free < FULL_BELOW)
        .then(|| format!("the disk is full ({free} bytes free in {})", dir.display()))
}

fn io_failure(e: &Error) -> bool {
    matches!(
        e,
        Error::Sqlite { source, .. }
            if matches!(source.sqlite_error_code(), Some(ErrorCode::SystemIoFailure | ErrorCode::DiskFull))
    )
}

fn sql(path: &Path, source: rusqlite::Error) -> Error {
    Error::Sqlite {
        context: format!("failed to open {}", path.display()),
        source,
    }
}

/// Says what a SQLite error means for the file at `path`: corrupt, not a database,
/// read-only (with `read_only`, the reason this connection knows), or on a full disk.
/// Other errors pass through unchanged.
pub(super) fn explain(path: &Path, read_only: Option<&str>, e: Error) -> Error {
    let Error::Sqlite { context, source } = e else {
        return e;
    };
    let file = path.display();
    match source.sqlite_error_code() {
        Some(ErrorCode::NotADatabase) => Error::Store(format!(
            "{file} is not a SQLite database (corrupt or foreign file): refusing to use or replace it; `spice store check` says what to do"
        )),
        Some(ErrorCode::DatabaseCorrupt) => Error::Store(format!(
            "{file} is corrupt ({source}): refusing to use it; `spice store check` says what is damaged and how to restore it"
        )),
        Some(ErrorCode::ReadOnly) => Error::Other(format!(
            "{file}: {}: {context}; nothing was written",
            read_only.map_or_else(|| format!("read-only ({source})"), str::to_string)
        )),
        Some(ErrorCode::SystemIoFailure | ErrorCode::DiskFull) => match disk_full(path) {
            Some(full) => Error::Other(format!(
                "{file}: {full}: {context}; free some space and retry"
            )),
            None => Error::Sqlite {
                context: format!("{context} ({file})"),
                source,
            },
        },
        _ => Error::Sqlite { context, source },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sqlite(code: i32) -> Error {
        Error::Sqlite {
            context: "failed to commit adding a task".into(),
            source: rusqlite::Error::SqliteFailure(rusqlite::ffi::Error::new(code), None),
        }
    }

    #[test]
    fn read_only_errors_name_the_file_and_the_reason() {
        let p = Path::new("/state/spice.db");
        let e = explain(
            p,
            Some("read-only (its directory /state is not writable)"),
            sqlite(rusqlite::ffi::SQLITE_READONLY),
        );
        assert_eq!(
            e.to_string(),
            "/state/spice.db: read-only (its directory /state is not writable): failed to commit adding a task; nothing was written"
        );
    }

    #[test]
    fn corruption_points_at_store_check() {
        let e = explain(
            Path::new("/s/spice.db"),
            None,
            sqlite(rusqlite::ffi::SQLITE_CORRUPT),
        );
        assert!(
            e.to_string()
                .contains("`spice store check` says what is damaged"),
            "{e}"
        );
        assert_eq!(e.exit_code(), 4);
    }

    #[test]
    fn a_read_write_connection_bounds_its_wal() {
        let dir = tempfile::tempdir().unwrap();
        let (conn, read_only) = open(&dir.path().join("spice.db")).unwrap();
        assert_eq!(read_only, None);
        let limit: i64 = conn
            .query_row("PRAGMA journal_size_limit", [], |r| r.get(0))
            .unwrap();
        assert_eq!(limit, WAL_LIMIT);
        assert_eq!(limit, 64 * 1024 * 1024);
    }

    #[test]
    fn uri_paths_escape_what_sqlite_would_parse() {
        assert_eq!(
            uri_path(Path::new("/a b/x?y#z%.db")),
            "/a b/x%3Fy%23z%25.db"
        );
    }

    /// Regression: several processes meeting a store that does not exist yet (a fleet
    /// and an operator's first commands in a new repository) each switch the new file
    /// to WAL; SQLite refuses one of two such switches at once with SQLITE_BUSY
    /// without waiting (waiting could deadlock), and that failed the open.
    #[test]
    fn first_opens_at_once_all_succeed() {
        for round in 0..20 {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("spice.db");
            let barrier = std::sync::Barrier::new(8);
            std::thread::scope(|s| {
                for _ in 0..8 {
                    s.spawn(|| {
                        barrier.wait();
                        if let Err(e) = open(&path) {
                            panic!("round {round}: {e}");
                        }
                    });
                }
            });
        }
    }
}
