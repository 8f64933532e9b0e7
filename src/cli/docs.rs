//! `spice completions` and `spice man`: shell completion scripts and man pages,
//! generated from the same clap tree that parses the arguments, so neither can drift
//! from `--help`. The tests here pin that every command and argument in that tree has
//! help text, which is what the man pages and the completions' descriptions show.
//!
//! Neither offers what clap hides (`agent-shim`, `demo-agent`, `gate hook`,
//! `fleet up --log-only`: what spice runs itself, not what a user types): the man
//! pages skip hidden commands, and the completions are generated from the tree with
//! its hidden commands and arguments left out ([`visible_only`]), since clap_complete's
//! scripts offer everything the tree holds.

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
    let mut cmd = visible_only(&Cli::command());
    clap_complete::generate(args.shell, &mut cmd, "spice", &mut std::io::stdout());
    Ok(())
}

/// `cmd` without its hidden subcommands and arguments, at every depth. clap has no way
/// to take a subcommand out of a tree, so a command holding something hidden is made
/// again from what completion reads (name, help, version, aliases, arguments, their
/// groups, the settings that add or allow words); one holding nothing hidden is kept
/// whole.
fn visible_only(cmd: &clap::Command) -> clap::Command {
    if !hides_any(cmd) {
        return cmd.clone();
    }
    let shown = |a: &&clap::Arg| !a.is_hide_set();
    let kept: Vec<&clap::Id> = cmd
        .get_arguments()
        .filter(shown)
        .map(|a| a.get_id())
        .collect();
    let groups = cmd.get_groups().map(|g| {
        let mut group = g.clone();
        clap::ArgGroup::new(g.get_id().clone())
            .args(g.get_args().filter(|id| kept.contains(id)).cloned())
            .multiple(group.is_multiple())
            .required(g.is_required_set())
    });
    let mut out = clap::Command::new(leak(cmd.get_name()))
        .args(cmd.get_arguments().filter(shown).cloned())
        .groups(groups)
        .subcommands(
            cmd.get_subcommands()
                .filter(|s| !s.is_hide_set())
                .map(visible_only),
        )
        .visible_aliases(cmd.get_visible_aliases().map(leak).collect::<Vec<_>>())
        .allow_external_subcommands(cmd.is_allow_external_subcommands_set())
        .subcommand_required(cmd.is_subcommand_required_set())
        .arg_required_else_help(cmd.is_arg_required_else_help_set())
        .disable_help_subcommand(cmd.is_disable_help_subcommand_set())
        .disable_help_flag(cmd.is_disable_help_flag_set())
        .disable_version_flag(cmd.is_disable_version_flag_set())
        .propagate_version(cmd.is_propagate_version_set());
    if let Some(about) = cmd.get_about() {
        out = out.about(about.clone());
    }
    if let Some(about) = cmd.get_long_about() {
        out = out.long_about(about.clone());
    }
    if let Some(version) = cmd.get_version() {
        out = out.version(leak(version));
    }
    out
}

/// Whether `cmd` holds a hidden subcommand or argument, at any depth.
fn hides_any(cmd: &clap::Command) -> bool {
    cmd.get_arguments().any(clap::Arg::is_hide_set)
        || cmd
            .get_subcommands()
            .any(|s| s.is_hide_set() || hides_any(s))
}

/// A `'static` copy of `s`: clap (without its `string` feature) names a command only
/// by a `&'static str`. Only the few commands [`visible_only`] makes again are named
/// this way, once, by a process that prints a script and exits.
fn leak(s: &str) -> &'static str {
    Box::leak(s.to_owned().into_boxed_str())
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

    /// The tree completions are made from: every command a user types, with its
    /// arguments, and nothing clap hides.
    #[test]
    fn completions_leave_out_what_clap_hides() {
        let full = Cli::command();
        let mut shown = visible_only(&full);
        shown.build();
        assert!(!hides_any(&shown));
        for hidden in ["agent-shim", "demo-agent"] {
            assert!(full.find_subcommand(hidden).is_some(), "{hidden}");
            assert!(shown.find_subcommand(hidden).is_none(), "{hidden}");
        }
        let gate = shown.find_subcommand("gate").unwrap();
        assert!(gate.find_subcommand("check").is_some());
        assert!(gate.find_subcommand("hook").is_none());
        let up = shown
            .find_subcommand("fleet")
            .and_then(|f| f.find_subcommand("up"))
            .unwrap();
        let longs: Vec<_> = up.get_arguments().filter_map(|a| a.get_long()).collect();
        assert!(
            longs.contains(&"detach") && !longs.contains(&"log-only"),
            "{longs:?}"
        );
        let visible = |c: &clap::Command| -> Vec<String> {
            c.get_subcommands()
                .filter(|s| !s.is_hide_set() && s.get_name() != "help")
                .map(|s| s.get_name().to_string())
                .collect()
        };
        assert_eq!(visible(&shown), visible(&full));
        assert_eq!(shown.get_version(), full.get_version());
    }
}
