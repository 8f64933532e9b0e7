//! The state directory's own configuration, `<state dir>/config.toml`: the operator's
//! (not the repository's) settings for this fleet. Today one key, where the store is:
//!
//! ```toml
//! [store]
//! url = "postgres://spice@db.internal/fleet"   # default: spice.db in the state directory
//! ```
//!
//! Strict like every spice file: unknown tables and keys, wrong types and a URL that
//! is not PostgreSQL's are one line `config.toml:line:col: reason`. `SPICE_DATABASE_URL`
//! (passed in by the CLI, the only layer that reads the environment) wins over the file.

use crate::config::ConfigError;
use crate::error::{Error, Result};
use crate::store::{Location, DB_FILE};
use serde::Deserialize;
use std::path::Path;
use toml::Spanned;

/// The file's name inside the state directory.
pub const FILE: &str = "config.toml";

/// The environment variable the CLI reads for the store's URL.
pub const URL_VAR: &str = "SPICE_DATABASE_URL";

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct StateToml {
    store: Option<StoreToml>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct StoreToml {
    url: Option<Spanned<String>>,
}

/// Where the store of `state_dir` is: `env_url` (from `SPICE_DATABASE_URL`) when set,
/// else `[store] url` from `config.toml`, else `spice.db` in the directory.
pub fn location(state_dir: &Path, env_url: Option<&str>) -> Result<Location> {
    if let Some(url) = env_url.filter(|u| !u.trim().is_empty()) {
        return Location::postgres(url).map_err(|why| Error::input(format!("{URL_VAR}: {why}")));
    }
    let file = state_dir.join(FILE);
    let text = match std::fs::read_to_string(&file) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Ok(Location::Sqlite(state_dir.join(DB_FILE)))
        }
        Err(e) => return Err(ConfigError::whole(&file, format!("cannot read: {e}")).into()),
    };
    parse(&file, &text, state_dir)
}

/// The location `text` (the contents of `file`) names.
pub fn parse(file: &Path, text: &str, state_dir: &Path) -> Result<Location> {
    let raw: StateToml =
        toml::from_str(text).map_err(|e| Error::from(ConfigError::from_toml(file, text, &e)))?;
    match raw.store.and_then(|s| s.url) {
        None => Ok(Location::Sqlite(state_dir.join(DB_FILE))),
        Some(url) => Location::postgres(url.get_ref()).map_err(|why| {
            ConfigError::at(file, text, url.span().start, format!("[store] url: {why}")).into()
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn parsed(text: &str) -> std::result::Result<Location, String> {
        parse(Path::new("config.toml"), text, Path::new("/s")).map_err(|e| e.to_string())
    }

    #[test]
    fn a_url_names_postgres_and_nothing_names_the_file() {
        assert_eq!(
            parsed(""),
            Ok(Location::Sqlite(PathBuf::from("/s/spice.db")))
        );
        assert_eq!(
            parsed("[store]\n"),
            Ok(Location::Sqlite(PathBuf::from("/s/spice.db")))
        );
        assert_eq!(
            parsed("[store]\nurl = \"postgres://u@h/db\"\n"),
            Ok(Location::Postgres("postgres://u@h/db".into()))
        );
    }

    #[test]
    fn bad_input_is_one_located_line() {
        let e = parsed("[store]\nurl = \"sqlite:///x.db\"\n").unwrap_err();
        assert!(
            e.starts_with("config.toml:2:7: [store] url: expected a postgres://"),
            "{e}"
        );
        let e = parsed("[store]\nurl = \"postgres://u@h/db\"\npool = 4\n").unwrap_err();
        assert!(
            e.starts_with("config.toml:3:1: unknown field `pool`"),
            "{e}"
        );
        let e = parsed("[stor]\n").unwrap_err();
        assert!(
            e.starts_with("config.toml:1:2: unknown field `stor`"),
            "{e}"
        );
        let e = parsed("[store]\nurl = 5\n").unwrap_err();
        assert!(e.starts_with("config.toml:2:7: invalid type"), "{e}");
        assert!(!e.contains('\n'), "{e}");
    }

    #[test]
    fn the_environment_wins_and_is_checked_too() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join(FILE),
            "[store]\nurl = \"postgres://a@h/file\"\n",
        )
        .unwrap();
        assert_eq!(
            location(dir.path(), Some("postgres://a@h/env")).unwrap(),
            Location::Postgres("postgres://a@h/env".into())
        );
        assert_eq!(
            location(dir.path(), None).unwrap(),
            Location::Postgres("postgres://a@h/file".into())
        );
        let e = location(dir.path(), Some("http://x"))
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("SPICE_DATABASE_URL: expected a postgres://"),
            "{e}"
        );
    }
}
