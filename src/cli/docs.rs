//! `spice completions` and `spice man`: shell completion scripts and man pages,
//! generated from the same clap tree that parses the arguments, so neither can drift
//! from `--help`. The tests here pin that every command and argument in that tree has
//! help text, which is what the man pages and the completions' descriptions show.

use super::Cli;
use crate::error::{Error, Result};
use clap::CommandFactory;
use std::path::{Path, PathBuf};

#[derive(Debug, clap::Args)]
#[command(after_help = "\
Install (each writes the script where the shell looks for it):
  bash        spice completions bash > ~/.local/share/bash-completion/completions/spice
  zsh         spice completions zsh > ~/.zfunc/_spice   (fpath+=(~/.zfunc) before compinit)
  fish        spice completions fish > ~/.config/fish/completions/spice.fish
  elvish      spice completions elvish >> ~/.config/elvish/rc.elv
  powershell  spice completions powershell >> $PROFILE")]
pub(super) struct CompletionsArgs {
    /// The shell whose completion script to print.
    #[arg(value_enum)]
    shell: clap_complete::Shell,
}

#[derive(Debug, clap::Args)]
#[command(after_help = "\
Install: spice man --dir ~/.local/share/man/man1, then `man spice` or `man spice-task-add`.
Read without installing: spice man | man -l -")]
pub(super) struct ManArgs {
    /// Write one page per command (spice.1, spice-task.1, spice-task-add.1, ...) into
    /// this directory, creating it, instead of printing the top page to stdout.
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
}

/// Prints the completion script for `args.shell` to stdout.
pub(super) fn completions(args: CompletionsArgs) -> Result<()> {
    let mut cmd = Cli::command();
    clap_complete::generate(args.shell, &mut cmd, "spice", &mut std::io::stdout());
    Ok(())
}

/// Prints the top man page, or writes every visible command's page into `--dir` and
/// says how many.
pub(super) fn man(args: ManArgs) -> Result<()> {
    let Some(dir) = args.dir else {
        return clap_mangen::Man::new(Cli::command())
            .render(&mut std::io::stdout().lock())
            .map_err(|source| Error::Io {
                context: "failed to write the man page to stdout".into(),
                source,
            });
    };
    std::fs::create_dir_all(&dir).map_err(|source| Error::Io {
        context: format!("failed to create {}", dir.display()),
        source,
    })?;
    let written = write_pages(&dir)?;
    println!("wrote {} man pages to {}", written.len(), dir.display());
    Ok(())
}

/// Writes `spice.1` and one page for each visible subcommand at every depth, named by
/// its path (`spice-task-add.1`); returns the files written.
fn write_pages(dir: &Path) -> Result<Vec<PathBuf>> {
    fn walk(cmd: clap::Command, dir: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
        for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
            walk(sub.clone(), dir, out)?;
        }
        let page = clap_mangen::Man::new(cmd);
        let path = dir.join(page.get_filename());
        page.generate_to(dir).map_err(|source| Error::Io {
            context: format!("failed to write {}", path.display()),
            source,
        })?;
        out.push(path);
        Ok(())
    }
    // Built once at the top so every subcommand carries its display name
    // (`spice-task-add`), which names its page.
    let mut cmd = Cli::command().disable_help_subcommand(true);
    cmd.build();
    let mut out = Vec::new();
    walk(cmd, dir, &mut out)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every command path (`spice task add`) with its arguments and subcommands that
    /// have no help text, skipping clap's own `help` and `version`.
    fn undocumented(cmd: &clap::Command, path: &str, out: &mut Vec<String>) {
        for arg in cmd.get_arguments() {
            let id = arg.get_id().as_str();
            if id == "help" || id == "version" {
                continue;
            }
            if arg.get_help().is_none() && arg.get_long_help().is_none() {
                out.push(format!("{path} <{id}>"));
            }
        }
        for sub in cmd.get_subcommands() {
            if sub.get_name() == "help" {
                continue;
            }
            let sub_path = format!("{path} {}", sub.get_name());
            if sub.get_about().is_none() && sub.get_long_about().is_none() {
                out.push(sub_path.clone());
            }
            undocumented(sub, &sub_path, out);
        }
    }

    #[test]
    fn the_command_tree_is_consistent() {
        Cli::command().debug_assert();
    }

    /// Issue #40: flags such as `--json`, `--lease`, `--project` had no help.
    #[test]
    fn every_command_and_argument_has_help() {
        let mut cmd = Cli::command();
        cmd.build();
        let mut missing = Vec::new();
        undocumented(&cmd, "spice", &mut missing);
        assert!(
            missing.is_empty(),
            "{} commands or arguments without help text:\n  {}",
            missing.len(),
            missing.join("\n  ")
        );
    }

    #[test]
    fn a_page_is_written_for_every_visible_command() {
        let dir = tempfile::tempdir().unwrap();
        let pages = write_pages(dir.path()).unwrap();
        let names: Vec<String> = pages
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        for name in ["spice.1", "spice-task.1", "spice-task-add.1", "spice-man.1"] {
            assert!(names.iter().any(|n| n == name), "{name} not in {names:?}");
        }
        assert!(!names.iter().any(|n| n.contains("agent-shim")), "{names:?}");
    }
}
