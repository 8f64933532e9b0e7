//! `spice archive list|prune`: the transcripts the fleet archived when their sessions
//! ended (`crate::archive`). `prune` keeps the newest copies within `--max-bytes`,
//! else the `[archive] max_bytes` of the repository's `spice.toml`, else 2 GiB.

use super::{render, Env};
use crate::archive::Archive;
use crate::error::{Error, Result};
use clap::Subcommand;
use std::path::Path;

#[derive(Debug, Subcommand)]
pub enum ArchiveCmd {
    /// Every archived transcript, oldest first: session, agent, sizes, original path.
    List {
        /// Print the archived transcripts as a JSON array instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Remove the oldest archived transcripts until the archive fits its bound.
    Prune {
        /// The bound (e.g. "500MiB"); default: spice.toml's [archive] max_bytes, else 2GiB.
        #[arg(long, value_parser = size)]
        max_bytes: Option<u64>,
        /// Say what would be removed; remove nothing.
        #[arg(long)]
        dry_run: bool,
        /// Print JSON instead of text: the bound, dry_run, the removed entries and freed_bytes.
        #[arg(long)]
        json: bool,
    },
}

fn size(text: &str) -> std::result::Result<u64, String> {
    crate::bed::config::parse_size(text)
}

/// The bound spice.toml sets in the repository's work tree, if it sets one.
fn configured_bound(env: &Env) -> Result<Option<u64>> {
    let Some(top) = &env.repo_top else {
        return Ok(None);
    };
    let path = top.join("spice.toml");
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => {
            return Err(Error::Io {
                context: format!("reading {}", path.display()),
                source,
            })
        }
    };
    match crate::config::housekeeping::parse(Path::new("spice.toml"), &text) {
        Ok(h) => Ok(h.archive_max_bytes),
        Err(errs) => {
            let all: Vec<String> = errs.iter().map(|e| e.to_string()).collect();
            Err(Error::Input(all.join("\n")))
        }
    }
}

pub fn run(cmd: ArchiveCmd, env: &Env) -> Result<()> {
    let archive = Archive::at(&env.state_dir);
    match cmd {
        ArchiveCmd::List { json } => {
            let all = archive.list();
            if json {
                render::print_json(&all);
            } else if all.is_empty() {
                println!("nothing archived in {}", archive.dir().display());
            } else {
                for e in &all {
                    println!(
                        "{:<6} {:<38} {:>11} B → {:>10} B  {}  {}",
                        e.meta.agent,
                        e.meta.session_id,
                        e.meta.bytes_in,
                        e.bytes_out,
                        crate::when::short(e.meta.archived_at),
                        e.meta.original.display()
                    );
                }
                let total: u64 = all.iter().map(|e| e.bytes_out).sum();
                println!("{} transcript(s), {total} bytes", all.len());
            }
            Ok(())
        }
        ArchiveCmd::Prune {
            max_bytes,
            dry_run,
            json,
        } => {
            let bound = match max_bytes {
                Some(b) => b,
                None => configured_bound(env)?.unwrap_or(crate::archive::DEFAULT_MAX_BYTES),
            };
            let gone = archive.prune(bound, dry_run)?;
            let freed: u64 = gone.iter().map(|e| e.bytes_out).sum();
            if json {
                render::print_json(&serde_json::json!({
                    "max_bytes": bound, "dry_run": dry_run,
                    "removed": gone, "freed_bytes": freed,
                }));
            } else {
                let verb = if dry_run { "would remove" } else { "removed" };
                for e in &gone {
                    println!(
                        "{verb} {} ({})",
                        e.path.display(),
                        e.meta.original.display()
                    );
                }
                println!(
                    "{verb} {} archived transcript(s), {freed} bytes (bound {bound} bytes)",
                    gone.len()
                );
            }
            Ok(())
        }
    }
}
