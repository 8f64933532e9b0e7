//! The command line: clap definitions and output. This is the only layer that reads
//! the environment (`SPICE_HOME`), the working directory or the terminal; it passes
//! explicit paths, a clock and options to the library.

mod archive;
mod bed;
mod conscience;
mod demo;
mod docs;
mod fleet;
mod gate;
mod lanes;
mod next;
pub(crate) mod render;
mod report;
mod secret;
mod serve;
mod steer;
mod store;
mod task;
mod usage;
mod watch;

use crate::clock::SystemClock;
use crate::error::{Error, Result};
use crate::store::Store;
use clap::{Parser, Subcommand};
use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::Arc;

#[derive(Debug, Parser)]
#[command(
    name = "spice",
    version,
    about = "A fleet supervisor for coding agents"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Tasks, the allocator and leased claims.
    #[command(subcommand)]
    Task(task::TaskCmd),
    /// Create a steering item for a lane, worktree or session; prints its key.
    Steer(steer::SteerArgs),
    /// List steering items (pending ones unless --all).
    Inbox(steer::InboxArgs),
    /// The ACK/NACK grammar: parse prose, or retire the items it acknowledges.
    #[command(subcommand)]
    Ack(steer::AckCmd),
    /// Run a command, showing pending steering on its stderr before, during and after.
    Exec(steer::ExecArgs),
    /// Print the startup file that routes an agent's shell commands through `spice exec`.
    ShellInit {
        /// The shell the agent runs its commands in.
        #[arg(value_enum)]
        shell: steer::Shell,
    },
    /// Follow Claude Code and Codex transcripts, read-only.
    Watch(watch::WatchArgs),
    /// List, show and brief agent sessions, read-only.
    #[command(subcommand)]
    Session(watch::SessionCmd),
    /// Tokens per session, lane, task, phase or day, from the transcripts (money only
    /// from a price table the operator provides).
    Usage(usage::UsageArgs),
    /// Token budgets: raise or stop a lane or task paused at its budget.
    #[command(subcommand)]
    Budget(usage::BudgetCmd),
    /// The transcript archive: copies of ended sessions' transcripts (list, prune).
    #[command(subcommand)]
    Archive(archive::ArchiveCmd),
    /// The state store itself.
    #[command(subcommand)]
    Store(store::StoreCmd),
    /// Lanes of agents: check their configuration, run them (up), see them (status),
    /// stop them (down), lift a crash-loop hold, attach to an agent's terminal.
    #[command(subcommand)]
    Fleet(fleet::FleetCmd),
    /// Gates: measurable rules (file and routine caps, commit messages, the
    /// repository's own checks) before every commit and before a phase merges.
    #[command(subcommand)]
    Gate(gate::GateCmd),
    /// Test beds: warm templates of a worktree's derived state (build output,
    /// dependencies), seeded into every task's worktree.
    #[command(subcommand)]
    Bed(bed::BedCmd),
    /// The conscience: maxims watching the agents' prose, its log, proposed maxims.
    #[command(subcommand)]
    Conscience(conscience::ConscienceCmd),
    /// The first run: a scratch repository, two lanes of the scripted demo agent, the
    /// whole loop narrated (no network, no API key).
    Demo(demo::DemoArgs),
    /// Hook entry points agents call (Claude Code's PostToolUse shows pending steering).
    Hook {
        /// Which hook the agent is calling.
        #[arg(value_enum)]
        kind: steer::HookKind,
    },
    /// The operator's console: a live status page with steering and takeover, and its JSON API.
    Serve(serve::ServeArgs),
    /// Print the shell completion script for bash, zsh, fish, elvish or PowerShell.
    Completions(docs::CompletionsArgs),
    /// Print spice's man page, or write one page per command into a directory.
    Man(docs::ManArgs),
    /// The scripted demo agent the `demo` profile runs (no network, no API key).
    #[command(hide = true)]
    DemoAgent(DemoArgs),
    /// What the supervisor runs under each PTY: starts the agent, and ends the agent's
    /// whole process tree when the supervisor dies.
    #[command(hide = true)]
    AgentShim {
        /// The supervisor's pid: if it is not the parent any more, the shim ends.
        #[arg(long)]
        parent: u32,
        /// Confine the agent (Landlock): writes only to the `--write` paths, signals
        /// only within it.
        #[arg(long)]
        confine: bool,
        /// A path the confined agent may write (repeated).
        #[arg(long = "write", requires = "confine")]
        write: Vec<std::path::PathBuf>,
        /// The agent's command and its arguments (after `--`).
        #[arg(last = true, required = true)]
        command: Vec<std::ffi::OsString>,
    },
}

#[derive(Debug, clap::Args)]
struct DemoArgs {
    /// The id of the new session (names its transcript).
    #[arg(long, conflicts_with = "resume", required_unless_present = "resume")]
    session_id: Option<String>,
    /// A file holding the brief: the task the agent is given.
    #[arg(long, requires = "session_id")]
    brief_file: Option<PathBuf>,
    /// Continue an earlier session.
    #[arg(long)]
    resume: Option<String>,
    /// How long each work command runs.
    #[arg(long, default_value_t = 1.0)]
    command_seconds: f64,
    /// After each turn, wait for a message typed into the terminal.
    #[arg(long)]
    interactive: bool,
}

/// Runs the command line and returns the process exit code.
pub fn main() -> i32 {
    // Before any thread: the store's password leaves /proc/PID/environ.
    secret::hide_from_proc(crate::config::state::URL_VAR);
    // How deep this process is among spice-launched ones; a bad value matters only
    // to a command that starts agents, which refuses it (`launch_depth`).
    if let Ok(Some(d)) = crate::agent::depth::parse(
        crate::agent::depth::VAR,
        std::env::var(crate::agent::depth::VAR).ok().as_deref(),
    ) {
        crate::agent::depth::set_current(d);
    }
    let args: Vec<OsString> = std::env::args_os().collect();
    let command = match hot_command(&args) {
        Some(command) => command,
        None => match Cli::try_parse_from(&args) {
            Ok(cli) => cli.command,
            Err(e) => return clap_error(e),
        },
    };
    let result = match command {
        // The wrapper's exit code is its command's, not spice's.
        Command::Exec(args) => steer::exec(args),
        Command::AgentShim {
            parent,
            confine,
            write,
            command,
        } => crate::agent::shim::run(parent, confine.then_some(write.as_slice()), &command),
        // Findings exit 1 and bad configuration 2, after printing every one.
        Command::Gate(cmd) => Ok(gate::run(cmd)),
        command => {
            // Output into a closed pipe (`spice task list | head`) ends the command
            // quietly, as it does for other tools, instead of a panic in println!.
            // The wrapper and the shim keep ignoring SIGPIPE: their children's output
            // never passes through them.
            // SAFETY: restoring a default disposition installs no handler.
            unsafe {
                let _ = nix::sys::signal::signal(
                    nix::sys::signal::Signal::SIGPIPE,
                    nix::sys::signal::SigHandler::SigDfl,
                );
            }
            report::install();
            run(command).map(|()| 0)
        }
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            if let Error::Refused(_, lines) = &e {
                for l in lines {
                    eprintln!("{l}");
                }
            }
            eprintln!("spice: {}", one_line(&e.to_string()));
            e.exit_code()
        }
    }
}

/// The internal commands an agent runs on every one of its shell commands and tool
/// calls (`exec -- CMD…`, `agent-shim --parent PID -- CMD…`, `hook KIND`), read by
/// hand in exactly the form spice itself writes them: building clap's tree of every
/// command is a third of start-up, paid on each of an agent's commands. Any other form
/// (a flag, `--help`, a missing command, a bad pid) is left to clap, which parses or
/// refuses it as before.
fn hot_command(args: &[OsString]) -> Option<Command> {
    let word = |i: usize| args.get(i).and_then(|a| a.to_str());
    match word(1)? {
        "exec" if word(2)? == "--" && args.len() > 3 => {
            Some(Command::Exec(steer::ExecArgs::new(args[3..].to_vec())))
        }
        "agent-shim" if word(2)? == "--parent" => {
            let parent = word(3)?.parse().ok()?;
            let mut at = 4;
            let confine = word(at)? == "--confine";
            if confine {
                at += 1;
            }
            let mut write = Vec::new();
            while word(at)? == "--write" {
                write.push(std::path::PathBuf::from(args.get(at + 1)?));
                at += 2;
            }
            if word(at)? != "--" || args.len() <= at + 1 || (!confine && !write.is_empty()) {
                return None;
            }
            Some(Command::AgentShim {
                parent,
                confine,
                write,
                command: args[at + 1..].to_vec(),
            })
        }
        "hook" if args.len() == 3 => {
            let kind = <steer::HookKind as clap::ValueEnum>::from_str(word(2)?, false).ok()?;
            Some(Command::Hook { kind })
        }
        _ => None,
    }
}

fn run(command: Command) -> Result<()> {
    match command {
        Command::Task(cmd) => task::run(cmd, &Env::from_process_any()?),
        Command::Steer(args) => steer::steer(args, &Env::from_process_any()?),
        Command::Inbox(args) => steer::inbox(args, Env::from_process_any),
        Command::Ack(cmd) => steer::ack(cmd, Env::from_process_any),
        Command::ShellInit { shell } => steer::shell_init(shell),
        Command::Watch(args) => watch::watch(args),
        Command::DemoAgent(args) => demo_agent(args),
        Command::Hook { kind } => steer::hook(kind),
        Command::Demo(args) => demo::run(args),
        Command::Session(cmd) => watch::session(cmd),
        Command::Usage(args) => usage::usage(args),
        Command::Budget(cmd) => usage::budget(cmd, &Env::from_process_any()?),
        Command::Exec(_) | Command::AgentShim { .. } | Command::Gate(_) => {
            unreachable!("handled in main")
        }
        Command::Fleet(cmd) => fleet::run(cmd, &Env::from_process_any()?),
        Command::Serve(args) => serve::serve(args, Env::from_process_any()?),
        Command::Store(cmd) => store::run(cmd, &Env::from_process_any()?),
        Command::Archive(cmd) => archive::run(cmd, &Env::from_process_any()?),
        Command::Bed(cmd) => bed::run(cmd, &Env::from_process_any()?),
        Command::Conscience(cmd) => conscience::run(cmd, &Env::from_process_any()?),
        Command::Completions(args) => docs::completions(args),
        Command::Man(args) => docs::man(args),
    }
}

fn demo_agent(args: DemoArgs) -> Result<()> {
    let brief = match &args.brief_file {
        Some(f) => crate::demo::read_brief(f)?,
        None => String::new(),
    };
    let cwd = std::env::current_dir().map_err(|source| Error::Io {
        context: "failed to read the current directory".into(),
        source,
    })?;
    let cfg = crate::demo::DemoConfig {
        session_id: args.session_id.or(args.resume.clone()).unwrap_or_default(),
        resume: args.resume.is_some(),
        brief,
        cwd: std::fs::canonicalize(&cwd).unwrap_or(cwd),
        claude_projects: watch::roots().claude_projects,
        spice: std::env::current_exe().unwrap_or_else(|_| PathBuf::from("spice")),
        task: std::env::var("SPICE_TASK").ok().filter(|t| !t.is_empty()),
        command_seconds: args.command_seconds,
        interactive: args.interactive,
    };
    crate::demo::run(&cfg)
}

/// Refuses to start agents at or past the maximum depth (`agent::depth`): `SPICE_DEPTH`
/// against `SPICE_MAX_DEPTH` (default 2), each a whole number or unset.
pub(crate) fn launch_depth() -> Result<()> {
    use crate::agent::depth::{self, DEFAULT_MAX, MAX_VAR, VAR};
    let read = |v: &str| std::env::var(v).ok();
    let current = depth::parse(VAR, read(VAR).as_deref())?.unwrap_or(0);
    let max = depth::parse(MAX_VAR, read(MAX_VAR).as_deref())?.unwrap_or(DEFAULT_MAX);
    depth::check_launch(current, max)
}

/// What the CLI learned from the process: where state lives and where the repo is.
pub(crate) struct Env {
    pub state_dir: PathBuf,
    /// The top of the git work tree the command runs in, if any.
    pub repo_top: Option<PathBuf>,
    /// Where the store is (`SPICE_DATABASE_URL`, else the state directory's config).
    pub location: crate::store::Location,
    /// This host's name among a fleet's supervisors: `SPICE_HOST`, else the machine's.
    pub host: String,
}

/// The command as typed, for messages: `spice` and its first words up to a flag or
/// an argument (`spice fleet up`, `spice task modify`).
pub(crate) fn command_name() -> String {
    let mut words = vec!["spice".to_string()];
    for a in std::env::args().skip(1).take(2) {
        if a.starts_with('-') || !a.bytes().all(|b| b.is_ascii_lowercase() || b == b'-') {
            break;
        }
        words.push(a);
    }
    words.join(" ")
}

impl Env {
    /// The environment of a command: where state lives, and where the store is (a
    /// command reaches the store through [`crate::store::Authority`], whichever backend
    /// it is).
    fn from_process_any() -> Result<Env> {
        let home = std::env::var_os("SPICE_HOME").filter(|v| !v.is_empty());
        let (repo_top, common) = git_dirs(home.is_some());
        let state_dir = match home {
            Some(home) => PathBuf::from(home),
            None => match common {
                Some(common) => common.join("spice"),
                None => return Err(Error::input(
                    "no state directory: not inside a git repository and SPICE_HOME is not set \
                         (run spice inside a git repository, or set SPICE_HOME to a directory)",
                )),
            },
        };
        let url = std::env::var(crate::config::state::URL_VAR).ok();
        let location = crate::config::state::location(&state_dir, url.as_deref())?;
        let host = host_name(std::env::var(HOST_VAR).ok().as_deref())?;
        Ok(Env {
            state_dir,
            repo_top,
            location,
            host,
        })
    }

    /// The embedded store; refused on PostgreSQL.
    pub fn open(&self) -> Result<Store> {
        self.location.require_sqlite(&command_name())?;
        Store::open_dir(&self.state_dir, Arc::new(SystemClock))
    }

    /// The store's narrow interface, on whichever backend the location names.
    pub fn authority(&self) -> Result<Box<dyn crate::store::Authority>> {
        crate::store::connect(&self.location, Arc::new(SystemClock))
    }

    /// The `lanes/` directory of the repository.
    pub fn lanes_dir(&self) -> Result<PathBuf> {
        self.repo_top
            .as_ref()
            .map(|t| t.join("lanes"))
            .ok_or_else(|| {
                Error::input("--lane needs a git repository (lanes live in its lanes/ directory)")
            })
    }
}

/// Names this host among the supervisors sharing one store (two "hosts" on one machine
/// in tests, or a name the operator prefers to the machine's).
pub(crate) const HOST_VAR: &str = "SPICE_HOST";

/// This host's name: `var` (`SPICE_HOST`) when set, else the machine's host name. A
/// name is 1 to 64 printable characters without spaces.
pub(crate) fn host_name(var: Option<&str>) -> Result<String> {
    let name = match var.filter(|v| !v.is_empty()) {
        Some(v) => v.to_string(),
        None => nix::unistd::gethostname()
            .ok()
            .and_then(|h| h.into_string().ok())
            .filter(|h| !h.is_empty())
            .unwrap_or_else(|| "localhost".to_string()),
    };
    if name.chars().count() > 64 || name.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(Error::input(format!(
            "{HOST_VAR}: expected a host name of 1 to 64 characters without spaces, found '{}'",
            name.escape_debug()
        )));
    }
    Ok(name)
}

/// The work tree's top and the git common directory (shared by every worktree of a
/// repository). Found without running git ([`find_git`]) unless the environment
/// redirects git (`GIT_DIR` and kin) or nothing was found: then `git rev-parse`
/// decides (it also knows bare repositories), except when `SPICE_HOME` already says
/// where the state is (`home_set`) and no work tree was found, where git could only
/// say there is none. Relative output is resolved against the current directory, so
/// this works on git versions without `--path-format`.
fn git_dirs(home_set: bool) -> (Option<PathBuf>, Option<PathBuf>) {
    let redirected = [
        "GIT_DIR",
        "GIT_WORK_TREE",
        "GIT_COMMON_DIR",
        "GIT_CEILING_DIRECTORIES",
    ]
    .iter()
    .any(|v| std::env::var_os(v).is_some());
    if !redirected {
        let cwd = std::env::current_dir().unwrap_or_default();
        if let Some((top, common)) = find_git(&cwd) {
            let top = std::fs::canonicalize(&top).unwrap_or(top);
            return (Some(top), Some(common));
        }
        if home_set {
            return (None, None);
        }
    }
    match git_lines(&["rev-parse", "--show-toplevel", "--git-common-dir"]).as_slice() {
        [top, common] => (Some(top.clone()), Some(common.clone())),
        // A bare repository has no work tree, so the first form fails there.
        _ => (None, git_lines(&["rev-parse", "--git-common-dir"]).pop()),
    }
}

fn git_lines(args: &[&str]) -> Vec<PathBuf> {
    let out = std::process::Command::new("git")
        .args(args)
        .stderr(std::process::Stdio::null())
        .output();
    match out {
        Ok(o) if o.status.success() => {
            let cwd = std::env::current_dir().unwrap_or_default();
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .filter(|l| !l.is_empty())
                .map(|l| {
                    let p = cwd.join(l);
                    std::fs::canonicalize(&p).unwrap_or(p)
                })
                .collect()
        }
        _ => Vec::new(),
    }
}

/// Finds the work tree top and git common directory containing `dir` without running
/// git: the hot path of `spice exec` cannot afford a process. Handles a `.git`
/// directory, a `.git` file (linked worktrees, submodules) and `commondir`.
pub(crate) fn find_git(dir: &std::path::Path) -> Option<(PathBuf, PathBuf)> {
    for top in dir.ancestors() {
        let dot = top.join(".git");
        let gitdir = if dot.is_dir() {
            dot
        } else if dot.is_file() {
            let text = std::fs::read_to_string(&dot).ok()?;
            let rel = text.strip_prefix("gitdir:")?.trim();
            top.join(rel)
        } else {
            continue;
        };
        let common = match std::fs::read_to_string(gitdir.join("commondir")) {
            Ok(c) => gitdir.join(c.trim()),
            Err(_) => gitdir,
        };
        let common = std::fs::canonicalize(&common).unwrap_or(common);
        return Some((top.to_path_buf(), common));
    }
    None
}

/// Clap's errors are several lines long; spice's contract is one line.
fn clap_error(e: clap::Error) -> i32 {
    use clap::error::ErrorKind;
    match e.kind() {
        ErrorKind::DisplayHelp
        | ErrorKind::DisplayVersion
        | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            let _ = e.print();
            if e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
                2
            } else {
                0
            }
        }
        _ => {
            // Everything before the usage block, folded into one line.
            let text = e.render().to_string();
            let body: Vec<&str> = text
                .lines()
                .take_while(|l| !l.starts_with("Usage:") && !l.starts_with("For more information"))
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .collect();
            let msg = body.join(" ");
            let msg = msg.trim_start_matches("error: ");
            eprintln!("spice: {msg} (see --help)");
            2
        }
    }
}

fn one_line(s: &str) -> String {
    s.split('\n').map(str::trim).collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(words: &[&str]) -> Vec<OsString> {
        words.iter().map(OsString::from).collect()
    }

    /// The hand-read forms mean exactly what clap reads from them.
    #[test]
    fn hot_commands_parse_as_clap_does() {
        for words in [
            &["spice", "exec", "--", "true"][..],
            &["spice", "exec", "--", "sh", "-c", "echo hi", "--", "--help"],
            &[
                "spice",
                "agent-shim",
                "--parent",
                "42",
                "--",
                "claude",
                "--x",
            ],
            &[
                "spice",
                "agent-shim",
                "--parent",
                "42",
                "--confine",
                "--write",
                "/a b",
                "--write",
                "/dev/null",
                "--",
                "claude",
            ],
            &[
                "spice",
                "agent-shim",
                "--parent",
                "42",
                "--confine",
                "--",
                "x",
            ],
            &["spice", "hook", "claude-post-tool-use"],
        ] {
            let args = argv(words);
            let hot = hot_command(&args).expect("a hot command");
            let clap = Cli::try_parse_from(&args).unwrap().command;
            assert_eq!(format!("{hot:?}"), format!("{clap:?}"), "{words:?}");
        }
    }

    /// Anything else goes to clap, which parses or refuses it as it always did.
    #[test]
    fn other_forms_are_left_to_clap() {
        for words in [
            &["spice", "exec"][..],
            &["spice", "exec", "--"],
            &["spice", "exec", "true"],
            &["spice", "exec", "--help"],
            &["spice", "agent-shim", "--parent", "x", "--", "claude"],
            &["spice", "agent-shim", "--parent", "42", "--"],
            &[
                "spice",
                "agent-shim",
                "--parent",
                "42",
                "--write",
                "/a",
                "--",
                "x",
            ],
            &[
                "spice",
                "agent-shim",
                "--parent",
                "42",
                "--confine",
                "--write",
            ],
            &["spice", "hook", "no-such-hook"],
            &["spice", "hook", "claude-post-tool-use", "extra"],
            &["spice", "task", "list"],
        ] {
            assert!(hot_command(&argv(words)).is_none(), "{words:?}");
        }
    }
}
