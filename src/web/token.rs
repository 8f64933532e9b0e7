//! The console's shared token: generated once, kept in a file only the owner can read.
//!
//! Invariants: the file is created with mode 0600 (never widened afterwards); a token
//! file that others can read, or that holds no usable token, is refused rather than
//! silently replaced, since another console may be using it.

use crate::error::{Error, Result};
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;

/// The token file's name inside the state directory.
pub const TOKEN_FILE: &str = "serve.token";

/// A token read from `path`, or a new one written there. The flag is true when the
/// token was created now (the only time it is shown).
pub fn load_or_create(path: &Path) -> Result<(String, bool)> {
    match std::fs::metadata(path) {
        Ok(meta) => {
            if meta.permissions().mode() & 0o077 != 0 {
                return Err(Error::input(format!(
                    "{} is readable by others (mode {:o}): chmod 600 it or remove it",
                    path.display(),
                    meta.permissions().mode() & 0o777
                )));
            }
            let text = std::fs::read_to_string(path).map_err(|source| Error::Io {
                context: format!("failed to read {}", path.display()),
                source,
            })?;
            let token = text.trim().to_string();
            if token.len() < 16 || !token.bytes().all(|b| b.is_ascii_graphic()) {
                return Err(Error::input(format!(
                    "{} holds no usable token (16 or more printable characters): remove it to \
                     have a new one generated",
                    path.display()
                )));
            }
            Ok((token, false))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let token = generate();
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(path)
                .map_err(|source| Error::Io {
                    context: format!("failed to create {}", path.display()),
                    source,
                })?;
            writeln!(f, "{token}")
                .and_then(|()| f.sync_all())
                .map_err(|source| Error::Io {
                    context: format!("failed to write {}", path.display()),
                    source,
                })?;
            Ok((token, true))
        }
        Err(source) => Err(Error::Io {
            context: format!("failed to read {}", path.display()),
            source,
        }),
    }
}

/// 244 random bits (two version-4 uuids from the OS generator), as 64 hex digits.
fn generate() -> String {
    format!(
        "{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn created_once_private_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join(TOKEN_FILE);
        let (t, new) = load_or_create(&p).unwrap();
        assert!(new && t.len() == 64);
        assert_eq!(
            std::fs::metadata(&p).unwrap().permissions().mode() & 0o777,
            0o600
        );
        assert_eq!(load_or_create(&p).unwrap(), (t, false));
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
        let e = load_or_create(&p).unwrap_err().to_string();
        assert!(e.contains("readable by others"), "{e}");
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
        std::fs::write(&p, "short\n").unwrap();
        assert!(load_or_create(&p).is_err());
    }
}
