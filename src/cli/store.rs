//! `spice store`: where the database is, whether it is sound, and restoring a backup.
//! On PostgreSQL only `path` applies (the URL, without its password): checking and
//! restoring are about the SQLite file and its backups, and are refused there in one
//! line naming the server's tools that do that job.

use super::render::print_json;
use super::Env;
use crate::clock::{Clock, SystemClock};
use crate::error::{Error, Result};
use crate::store::{self, DB_FILE};
use crate::when;
use clap::Subcommand;
use std::path::PathBuf;

#[derive(Debug, Subcommand)]
pub enum StoreCmd {
    /// Print the database in use.
    Path,
    /// Check the database (SQLite's integrity check) and its backups, and say what to
    /// do about a problem. Writes nothing; exits 4 unless the store is sound.
    Check {
        /// Print the report (the database's and each backup's state) as JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Replace the database with a backup (the newest that passes its check, unless
    /// --from). Refuses while another process has it open; the replaced file is kept
    /// as spice.db.aside-<time>.
    Restore {
        /// Restore from this file instead of the newest sound backup.
        #[arg(long, conflicts_with = "list")]
        from: Option<PathBuf>,
        /// List the backups instead (newest first).
        #[arg(long)]
        list: bool,
        /// Restore even though the current database passes its check.
        #[arg(long, conflicts_with = "list")]
        force: bool,
        /// Print what was restored (or with --list the backups) as JSON instead of text.
        #[arg(long)]
        json: bool,
    },
}

pub fn run(cmd: StoreCmd, env: &Env) -> Result<()> {
    match cmd {
        StoreCmd::Path => {
            match &env.location {
                store::Location::Sqlite(_) => {
                    println!("{}", env.state_dir.join(DB_FILE).display())
                }
                other => println!("{}", other.describe()),
            }
            Ok(())
        }
        StoreCmd::Check { json } => {
            env.location.require_file(
                "spice store check",
                "the server's own tools check it: pg_amcheck",
            )?;
            check(env, json)
        }
        StoreCmd::Restore { .. } if env.location.backend() == "postgres" => {
            env.location.require_file(
                "spice store restore",
                "the server's backups restore it: pg_dump and pg_restore, or its own",
            )?;
            Ok(())
        }
        StoreCmd::Restore {
            list: true, json, ..
        } => list(env, json),
        StoreCmd::Restore {
            from, force, json, ..
        } => {
            let done = store::restore(&env.state_dir, from.as_deref(), force, SystemClock.now())?;
            if json {
                print_json(&done);
                return Ok(());
            }
            for (path, why) in &done.skipped {
                println!("skipped {}: {why}", path.display());
            }
            match &done.aside {
                Some(aside) => println!(
                    "restored {} from {}; the file it replaced is kept as {}",
                    done.db.display(),
                    done.from.display(),
                    aside.display()
                ),
                None => println!(
                    "restored {} from {}",
                    done.db.display(),
                    done.from.display()
                ),
            }
            Ok(())
        }
    }
}

fn check(env: &Env, json: bool) -> Result<()> {
    let report = store::check(&env.state_dir);
    if json {
        print_json(&report);
    } else {
        let version = report
            .found
            .schema_version
            .map(|v| format!(" (schema version {v})"))
            .unwrap_or_default();
        // "ok: PATH" first, as scripts have read it.
        println!(
            "{}: {} is {}{version}",
            if report.ok { "ok" } else { "problem" },
            report.db.display(),
            report.found.verdict.text()
        );
        for p in &report.found.problems {
            println!("  found: {p}");
        }
        match report.backups.first() {
            Some(b) => println!(
                "backups: {} in {}, newest {} UTC",
                report.backups.len(),
                env.state_dir.join(store::BACKUP_DIR).display(),
                when::short(b.taken)
            ),
            None => {
                println!("backups: none yet (a writer takes one when the store is first written)")
            }
        }
        println!("what to do: {}", report.advice);
    }
    if report.ok {
        Ok(())
    } else {
        Err(Error::Exit(4, report.headline()))
    }
}

fn list(env: &Env, json: bool) -> Result<()> {
    let backups = store::list_backups(&env.state_dir)?;
    if json {
        print_json(&backups);
        return Ok(());
    }
    if backups.is_empty() {
        println!(
            "no backups in {}",
            env.state_dir.join(store::BACKUP_DIR).display()
        );
    }
    for b in &backups {
        println!(
            "{} UTC  {:>10} bytes  {}",
            when::short(b.taken),
            b.bytes,
            b.path.display()
        );
    }
    Ok(())
}
