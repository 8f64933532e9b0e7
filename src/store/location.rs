//! Where the authority is: the embedded SQLite file in the state directory (the
//! default), or a PostgreSQL server shared by the supervisors of several hosts.
//!
//! The library never reads the environment: the CLI passes `SPICE_DATABASE_URL`, and
//! `config::state` reads `[store] url` from the state directory's `config.toml`, and
//! both end here as one [`Location`].

use crate::error::{Error, Result};
use std::path::PathBuf;

/// The store a command talks to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    /// `spice.db` at this path.
    Sqlite(PathBuf),
    /// A `postgres://` or `postgresql://` URL, checked by [`Location::postgres`].
    Postgres(String),
}

impl Location {
    /// A PostgreSQL location from a URL, or why it is not one (a fragment that reads
    /// well after the name of whatever gave the URL).
    pub fn postgres(url: &str) -> std::result::Result<Location, String> {
        let url = url.trim();
        if !(url.starts_with("postgres://") || url.starts_with("postgresql://")) {
            return Err(format!(
                "expected a postgres:// or postgresql:// URL, found '{}'",
                redact(url)
            ));
        }
        super::pg::check_url(url)?;
        Ok(Location::Postgres(url.to_string()))
    }

    /// The location for messages, with any password replaced by `***`.
    pub fn describe(&self) -> String {
        match self {
            Location::Sqlite(p) => p.display().to_string(),
            Location::Postgres(url) => redact(url),
        }
    }

    /// Whether the location carries a password (a PostgreSQL URL's).
    pub fn has_password(&self) -> bool {
        matches!(self, Location::Postgres(url) if redact(url) != *url)
    }

    /// The backend's name: `sqlite` or `postgres`.
    pub fn backend(&self) -> &'static str {
        match self {
            Location::Sqlite(_) => "sqlite",
            Location::Postgres(_) => "postgres",
        }
    }

    /// Refuses, in one line naming `what` and this location, a command that works only
    /// on the embedded store: never a silent fall back to SQLite.
    pub fn require_sqlite(&self, what: &str) -> Result<PathBuf> {
        match self {
            Location::Sqlite(p) => Ok(p.clone()),
            Location::Postgres(_) => Err(not_on_postgres(what, &self.describe())),
        }
    }

    /// Refuses, in one line naming `what`, a command about the SQLite file itself
    /// (its soundness, its backups), which a PostgreSQL store does not have: `instead`
    /// says what does that job there.
    pub fn require_file(&self, what: &str, instead: &str) -> Result<PathBuf> {
        match self {
            Location::Sqlite(p) => Ok(p.clone()),
            Location::Postgres(_) => Err(Error::Input(format!(
                "{what} works on a SQLite file, and the store is {} (on PostgreSQL, {instead})",
                self.describe()
            ))),
        }
    }
}

/// The error for a part of the store that is not on PostgreSQL yet.
pub fn not_on_postgres(what: &str, at: &str) -> Error {
    Error::Input(format!(
        "{what} is not on PostgreSQL yet (the store is {at}); the rest of spice's commands are"
    ))
}

/// `user:secret@` becomes `user:***@`; a `password=` option's value becomes `***`.
fn redact(url: &str) -> String {
    let mut out = url.to_string();
    if let Some(scheme_end) = out.find("://") {
        let rest = &out[scheme_end + 3..];
        let auth_end = rest.find(['/', '?']).unwrap_or(rest.len());
        if let Some(at) = rest[..auth_end].rfind('@') {
            if let Some(colon) = rest[..at].find(':') {
                let start = scheme_end + 3 + colon + 1;
                out.replace_range(start..scheme_end + 3 + at, "***");
            }
        }
    }
    if let Some(p) = out.find("password=") {
        let start = p + "password=".len();
        let end = out[start..].find('&').map_or(out.len(), |e| start + e);
        out.replace_range(start..end, "***");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_never_reach_a_message() {
        assert_eq!(
            redact("postgres://spice:hunter2@db.example:5432/fleet"),
            "postgres://spice:***@db.example:5432/fleet"
        );
        assert_eq!(
            redact("postgresql:///fleet?user=a&password=x&host=/tmp"),
            "postgresql:///fleet?user=a&password=***&host=/tmp"
        );
        assert_eq!(redact("postgres://a@h/db"), "postgres://a@h/db");
    }

    #[test]
    fn only_postgres_urls_are_locations() {
        assert!(Location::postgres("postgres://u@localhost/db").is_ok());
        assert!(Location::postgres("postgresql:///db?host=/tmp/x").is_ok());
        let e = Location::postgres("mysql://u:pw@h/db").unwrap_err();
        assert!(e.contains("mysql://u:***@h/db"), "{e}");
    }
}
