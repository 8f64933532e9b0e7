//! Lanes and profiles as files: strict TOML (unknown keys are errors) with every
//! error located as `file:line:col: reason` on one line.
//!
//! Only lanes are read so far (the allocator's `--lane` filter); profiles and the
//! cross-file validation pass arrive with the fleet.

pub mod lane;
pub mod profile;

use crate::error::Error;
use std::path::Path;

/// Turns a TOML deserialisation error into `file:line:col: message`.
pub fn toml_error(path: &Path, text: &str, e: &toml::de::Error) -> Error {
    let (line, col) = e.span().map(|s| line_col(text, s.start)).unwrap_or((1, 1));
    let msg = e.message().trim().replace('\n', " ");
    Error::input(format!("{}:{line}:{col}: {msg}", path.display()))
}

/// 1-based line and column of a byte offset.
pub fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, col)
}
