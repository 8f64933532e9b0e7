//! `spice store check`: what is wrong with the database file, and what to do about it.
//!
//! The check opens the file read-only (immutable when its directory cannot hold a WAL
//! index) and never migrates or writes, so it works on exactly the files the store
//! refuses: corrupt, foreign, from a newer spice, on a read-only or full disk.

use super::backup::{list_backups, Backup, BACKUP_DIR};
use super::{open, schema};
use crate::error::{Error, Result};
use crate::when;
use rusqlite::{Connection, ErrorCode};
use serde::Serialize;
use std::path::{Path, PathBuf};

/// How many of SQLite's findings are kept.
const PROBLEMS_SHOWN: usize = 20;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    /// Passes `PRAGMA integrity_check` and has a schema this spice can use.
    Sound,
    /// There is no database yet; the first write creates it.
    Missing,
    Corrupt,
    NotADatabase,
    /// A SQLite database with tables but no spice schema version.
    Foreign,
    /// Written by a newer spice.
    Newer,
    /// It could not be read at all (permissions, I/O).
    Unreadable,
}

impl Verdict {
    /// How the verdict reads in a sentence.
    pub fn text(self) -> &'static str {
        match self {
            Verdict::Sound => "sound (passes its integrity check)",
            Verdict::Missing => "missing",
            Verdict::Corrupt => "corrupt",
            Verdict::NotADatabase => "not a SQLite database",
            Verdict::Foreign => "a SQLite database, but not spice's",
            Verdict::Newer => "written by a newer spice",
            Verdict::Unreadable => "unreadable",
        }
    }
}

/// What examining one file found.
#[derive(Debug, Serialize)]
pub struct Examined {
    pub verdict: Verdict,
    pub schema_version: Option<i64>,
    /// SQLite's findings (at most 20), or the error that stopped the check.
    pub problems: Vec<String>,
}

impl Examined {
    /// "corrupt: <first finding>", for one-line messages.
    pub fn summary(&self) -> String {
        match self.problems.first() {
            Some(p) => format!("{}: {p}", self.verdict.text()),
            None => self.verdict.text().to_string(),
        }
    }
}

/// The report of `spice store check`.
#[derive(Debug, Serialize)]
pub struct CheckReport {
    pub db: PathBuf,
    pub ok: bool,
    #[serde(flatten)]
    pub found: Examined,
    /// Newest first.
    pub backups: Vec<Backup>,
    /// The newest backup that passes its own check, when the database needs one.
    pub restorable: Option<PathBuf>,
    /// What to do, in one sentence.
    pub advice: String,
}

impl CheckReport {
    /// One line for the error that ends a failed check.
    pub fn headline(&self) -> String {
        format!(
            "{} is {}: {}",
            self.db.display(),
            self.found.summary(),
            self.advice
        )
    }
}

/// Examines `state_dir/spice.db` and its backups, writing nothing.
pub fn check(state_dir: &Path) -> CheckReport {
    let db = state_dir.join(super::DB_FILE);
    let found = examine(&db, false);
    let backups = list_backups(state_dir).unwrap_or_default();
    let needs_backup = matches!(found.verdict, Verdict::Corrupt | Verdict::NotADatabase);
    let restorable = if needs_backup {
        backups
            .iter()
            .find(|b| examine(&b.path, true).verdict == Verdict::Sound)
            .map(|b| (b.path.clone(), b.taken))
    } else {
        None
    };
    let dir = state_dir.join(BACKUP_DIR);
    let advice = match found.verdict {
        Verdict::Sound => "nothing to do".to_string(),
        Verdict::Missing => "nothing to do: the first write creates it".to_string(),
        Verdict::Corrupt | Verdict::NotADatabase => match &restorable {
            Some((path, taken)) => format!(
                "run `spice store restore` to replace it with {} (taken {} UTC, which passes its check); the damaged file is kept aside",
                path.display(),
                when::short(*taken)
            ),
            None => format!(
                "{} in {}: keep a copy of the file, salvage what SQLite can read with `sqlite3 {} .recover | sqlite3 recovered.db`, then move it away to start afresh",
                if backups.is_empty() { "there is no backup".to_string() } else { format!("none of the {} backups passes its check", backups.len()) },
                dir.display(),
                db.display()
            ),
        },
        Verdict::Foreign => "it belongs to another program: point SPICE_HOME at spice's state directory, or move the file away".to_string(),
        Verdict::Newer => "upgrade spice, or use the spice that wrote it".to_string(),
        Verdict::Unreadable => "check the file's permissions and its disk".to_string(),
    };
    CheckReport {
        db,
        ok: matches!(found.verdict, Verdict::Sound | Verdict::Missing),
        found,
        backups,
        restorable: restorable.map(|(p, _)| p),
        advice,
    }
}

/// Examines one database file read-only; `backup` for files nothing else writes.
pub fn examine(path: &Path, backup: bool) -> Examined {
    let fail = |verdict, problem: String| Examined {
        verdict,
        schema_version: None,
        problems: vec![problem],
    };
    if !path.exists() {
        return Examined {
            verdict: Verdict::Missing,
            schema_version: None,
            problems: Vec::new(),
        };
    }
    let conn = match open::open_read_only_for_check(path, backup) {
        Ok(c) => c,
        Err(e) => return fail(verdict_of(&e), e.to_string()),
    };
    let version = match conn.query_row("PRAGMA user_version", [], |r| r.get::<_, i64>(0)) {
        Ok(v) => v,
        Err(e) => return fail(verdict_of(&e), e.to_string()),
    };
    let mut found = Examined {
        verdict: Verdict::Sound,
        schema_version: Some(version),
        problems: Vec::new(),
    };
    if version > schema::VERSION {
        found.verdict = Verdict::Newer;
        found.problems.push(format!(
            "schema version {version}; this spice knows up to {}",
            schema::VERSION
        ));
        return found;
    }
    match findings(&conn, "integrity_check") {
        Ok(rows) if rows == ["ok"] => {}
        Ok(rows) => {
            found.verdict = Verdict::Corrupt;
            found.problems = rows;
            return found;
        }
        Err(e) => {
            found.verdict = verdict_of(&e);
            found.problems.push(e.to_string());
            return found;
        }
    }
    if version == 0 {
        let tables = conn.query_row(
            "SELECT count(*) FROM sqlite_schema WHERE type = 'table'",
            [],
            |r| r.get::<_, i64>(0),
        );
        if tables.is_ok_and(|n| n > 0) {
            found.verdict = Verdict::Foreign;
            found
                .problems
                .push("it has tables and no spice schema version".into());
        }
    }
    found
}

fn verdict_of(e: &rusqlite::Error) -> Verdict {
    match e.sqlite_error_code() {
        Some(ErrorCode::NotADatabase) => Verdict::NotADatabase,
        Some(ErrorCode::DatabaseCorrupt) => Verdict::Corrupt,
        _ => Verdict::Unreadable,
    }
}

/// The rows of `PRAGMA quick_check` or `integrity_check`, at most [`PROBLEMS_SHOWN`].
fn findings(conn: &Connection, pragma: &str) -> rusqlite::Result<Vec<String>> {
    let mut stmt = conn.prepare(&format!("PRAGMA {pragma}({PROBLEMS_SHOWN})"))?;
    let rows = stmt.query_map([], |r| r.get(0))?;
    rows.collect()
}

/// Refuses a store that fails `pragma` (`quick_check` or `integrity_check`), naming the
/// file and SQLite's first findings.
pub(super) fn integrity(conn: &Connection, path: &Path, pragma: &str) -> Result<()> {
    let rows = findings(conn, pragma).map_err(|source| {
        open::explain(
            path,
            None,
            Error::Sqlite {
                context: format!("failed to run {pragma}"),
                source,
            },
        )
    })?;
    if rows == ["ok"] {
        return Ok(());
    }
    super::backup::Verified::forget(path);
    let more = if rows.len() > 3 {
        format!(" (and {} more)", rows.len() - 3)
    } else {
        String::new()
    };
    Err(Error::Store(format!(
        "{} is corrupt: it fails its integrity check ({}{more}): refusing to use it; `spice store check` says how to restore it",
        path.display(),
        rows[..rows.len().min(3)].join("; ")
    )))
}
