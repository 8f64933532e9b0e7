//! `spice steer`, `spice inbox`, `spice ack`, `spice exec`, `spice shell-init`.

use super::{render, Env};
use crate::clock::SystemClock;
use crate::error::{Error, Result};
use crate::steer::desk::Desk;
use crate::steer::{exec, grammar};
use crate::store::{Authority, Scope, Target, TargetKind, DEFAULT_TTL};
use crate::when;
use clap::{Args, Subcommand, ValueEnum};
use serde_json::Value;
use std::ffi::OsString;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use super::task::duration;

#[derive(Debug, Args)]
pub struct SteerArgs {
    /// A lane name, a worktree path, a session id, or lane:/worktree:/session: explicitly.
    target: String,
    /// The message (several words are joined); `-` reads it from stdin.
    #[arg(required = true)]
    message: Vec<String>,
    /// How long the item waits for an answer before it expires.
    #[arg(long, value_parser = duration)]
    ttl: Option<Duration>,
    /// Steer a lane no lanes/NAME.toml defines (yet): the item waits for a lane of
    /// that name, and expires unseen if none runs.
    #[arg(long)]
    force: bool,
    /// Anchor the item to lines of the target's worktree (PATH:START-END, or PATH:LINE):
    /// its text quotes them as they are now, then the message.
    #[arg(long, value_name = "PATH:LINES")]
    at: Option<String>,
    /// Print the new item as JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
pub struct InboxArgs {
    /// Only items for this target.
    target: Option<String>,
    /// Every state, not just pending.
    #[arg(long)]
    all: bool,
    /// Print the items as a JSON array instead of a table.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Subcommand)]
pub enum AckCmd {
    /// Print the directives the text on stdin issues, in source order.
    Parse {
        /// Print each directive as a JSON object, one a line, instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Retire the items acknowledged in transcripts' assistant replies, reading each
    /// from where the last scan stopped. A transcript's ACKs count only for the items
    /// addressed to its writer: the session it names, the worktree of its cwd, and the
    /// lane the store ties to it (the lane recording it, or its session's claim).
    Scan {
        /// Claude Code or Codex transcript files.
        #[arg(required = true)]
        paths: Vec<std::path::PathBuf>,
        /// Print each file's scan report as a JSON object, one a line, instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Retire the items the text on stdin acknowledges: any item the operator's text
    /// names, or with --target only the items addressed to those targets.
    Apply {
        /// Where the text came from, kept with each acknowledgment.
        #[arg(long, default_value = "<stdin>")]
        source: String,
        /// Count the ACKs only for items addressed to this target (a lane, worktree or
        /// session, as for `spice steer`); repeatable. Use it for an agent's prose.
        #[arg(long = "target", value_name = "TARGET")]
        targets: Vec<String>,
        /// Print each outcome as a JSON object, one a line, instead of text.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Args)]
pub struct ExecArgs {
    /// The command and its arguments (after `--`).
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, required = true)]
    command: Vec<OsString>,
}

impl ExecArgs {
    /// The arguments of `spice exec -- CMD…`, read without clap (`cli::hot_command`).
    pub(super) fn new(command: Vec<OsString>) -> ExecArgs {
        ExecArgs { command }
    }
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum Shell {
    /// bash, loaded through BASH_ENV.
    Bash,
    /// zsh, as the .zshenv of the ZDOTDIR spice points at.
    Zsh,
}

pub fn steer(args: SteerArgs, env: &Env) -> Result<()> {
    let text = if args.message.len() == 1 && args.message[0] == "-" {
        let mut s = String::new();
        std::io::stdin()
            .read_to_string(&mut s)
            .map_err(|source| Error::Io {
                context: "failed to read the message from stdin".into(),
                source,
            })?;
        s.trim_end().to_string()
    } else {
        args.message.join(" ")
    };
    // The store is opened only once the target reads well (a session's to resolve it).
    let mut opened = None;
    let target = steer_target_with(env, &args.target, args.force, |typed| {
        opened.insert(env.authority()?).resolve_session(typed)
    })?;
    let mut store = match opened {
        Some(s) => s,
        None => env.authority()?,
    };
    let text = match &args.at {
        Some(at) => {
            let anchor: crate::steer::anchor::Anchor = at.parse()?;
            crate::steer::anchor::anchored(store.as_mut(), &target, &anchor, &text)?
        }
        None => text,
    };
    let item = store.steer(&target, &text, args.ttl.unwrap_or(DEFAULT_TTL))?;
    if args.json {
        render::print_json(&render::item_json(&item, store.now()?));
    } else {
        println!("{}", item.key);
    }
    Ok(())
}

pub fn inbox(args: InboxArgs, env: impl FnOnce() -> Result<Env>) -> Result<()> {
    // A lane's agent sees its own items, through its supervisor.
    if let Some(desk) = Desk::from_var(std::env::var_os(crate::steer::desk::VAR)) {
        if args.target.is_some() {
            return Err(Error::input(
                "a lane's agent sees only the items addressed to it: run spice inbox without a target",
            ));
        }
        let inbox = desk.inbox(args.all)?;
        if args.json {
            let docs: Vec<Value> = inbox
                .items
                .iter()
                .map(|i| {
                    let mut v = render::item_json(i, inbox.now);
                    v["reply"] = inbox.replies.get(&i.key).cloned().unwrap_or(Value::Null);
                    v
                })
                .collect();
            render::print_json(&docs);
        } else {
            render::item_table(&inbox.items, inbox.now);
        }
        return Ok(());
    }
    let env = env()?;
    let targets = match &args.target {
        Some(t) => vec![parse_target(&env, t)?],
        None => vec![],
    };
    let mut store = env.authority()?;
    for t in targets.iter().filter(|t| t.kind == TargetKind::Lane) {
        super::lanes::require_or_seen(&env, store.as_mut(), &t.name)?;
    }
    let items = store.inbox(&targets, args.all)?;
    let now = store.now()?;
    if args.json {
        let mut docs = Vec::with_capacity(items.len());
        for i in &items {
            let mut v = render::item_json(i, now);
            v["reply"] = crate::steer::desk::reply(store.as_mut(), i)?;
            docs.push(v);
        }
        render::print_json(&docs);
    } else {
        render::item_table(&items, now);
    }
    Ok(())
}

pub fn ack(cmd: AckCmd, env: impl FnOnce() -> Result<Env>) -> Result<()> {
    if let AckCmd::Scan { paths, json } = &cmd {
        let mut store = env()?.authority()?;
        for p in paths {
            let writer = transcript_writer(&mut *store, p)?;
            let report = crate::transcript::acks::scan(&mut *store, p, writer)?;
            if *json {
                render::print_json(&report);
                continue;
            }
            if report.rewritten {
                println!(
                    "{}: rewritten since the last scan; read again from the start",
                    report.path
                );
            }
            println!(
                "{}: lines {}..{} read",
                report.path,
                report.from_line + 1,
                report.to_line
            );
            let writer: Vec<String> = report.counts_for.iter().map(|t| t.to_string()).collect();
            if writer.is_empty() {
                println!(
                    "{}: names no session or cwd and no lane records it; its ACKs retire nothing",
                    report.path
                );
            } else {
                println!("{}: ACKs count for {}", report.path, writer.join(", "));
            }
            for o in &report.outcomes {
                println!("{}", render::outcome_line(o));
            }
            for line in &report.keyless {
                println!("line {line}: ACK without a key (keyless); nothing retired");
            }
        }
        return Ok(());
    }
    let mut text = String::new();
    std::io::stdin()
        .read_to_string(&mut text)
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::InvalidData => Error::input("stdin is not UTF-8 text"),
            _ => Error::Io {
                context: "failed to read stdin".into(),
                source: e,
            },
        })?;
    let directives = grammar::parse(&text);
    match cmd {
        AckCmd::Parse { json } => {
            for d in &directives {
                if json {
                    render::print_json(d);
                } else {
                    println!("{}", render::directive_line(d));
                }
            }
        }
        AckCmd::Apply {
            source,
            targets,
            json,
        } => {
            let env = env()?;
            let targets = targets
                .iter()
                .map(|t| parse_target(&env, t))
                .collect::<Result<Vec<_>>>()?;
            let scope = if targets.is_empty() {
                Scope::Any
            } else {
                Scope::Within(&targets)
            };
            let mut store = env.authority()?;
            let outcomes = store.apply_acks_in(&directives, &source, scope)?;
            for d in directives.iter().filter(|d| d.problem.is_some()) {
                let msg = format!(
                    "line {}: ACK without a key (keyless); nothing retired",
                    d.line
                );
                if json {
                    render::print_json(&serde_json::json!({"line": d.line, "problem": "keyless"}));
                } else {
                    println!("{msg}");
                }
            }
            for o in &outcomes {
                if json {
                    render::print_json(o);
                } else {
                    println!("{}", render::outcome_line(o));
                }
            }
        }
        AckCmd::Scan { .. } => unreachable!("handled above"),
    }
    Ok(())
}

/// Whom the ACKs in the transcript at `path` count for: the session it names, the
/// worktree of its cwd (the top of the git work tree, as `spice steer worktree:PATH`
/// names it), and its lane: the lane whose row records it as its session's transcript
/// (with that lane's session), else the lane of the claim its session last held. The
/// file says nothing about lanes, so only the store can.
fn transcript_writer(store: &mut dyn crate::store::Authority, path: &Path) -> Result<Vec<Target>> {
    let canonical = std::fs::canonicalize(path)
        .map_err(|e| Error::input(format!("{}: {e}", path.display())))?;
    let agent = crate::transcript::detect_file(&canonical)?;
    let (session, cwd) = crate::transcript::discover::describe(&canonical, agent)
        .map(|f| (f.session_id, f.cwd))
        .unwrap_or_default();
    let row = store.lanes()?.into_iter().find(|l| {
        l.transcript
            .as_deref()
            .and_then(|t| std::fs::canonicalize(t).ok())
            .is_some_and(|t| t == canonical)
    });
    let lane = match (&row, &session) {
        (Some(r), _) => Some(r.name.clone()),
        (None, Some(s)) => store.session_lane(s)?,
        (None, None) => None,
    };
    let worktree = cwd.map(|c| {
        let c = std::fs::canonicalize(&c).unwrap_or_else(|_| PathBuf::from(c));
        super::find_git(&c).map(|(top, _)| top).unwrap_or(c)
    });
    let mut writer =
        crate::store::agent_targets(session.as_deref(), lane.as_deref(), worktree.as_deref());
    if let Some(s) = row.and_then(|l| l.session) {
        let t = Target {
            kind: TargetKind::Session,
            name: s,
        };
        if !writer.contains(&t) {
            writer.push(t);
        }
    }
    Ok(writer)
}

/// Gathers the wrapper's inputs from the environment and runs it.
/// Where an agent's command finds its steering: the state directory (`SPICE_HOME`,
/// else the repository's) and the targets it answers to (its session, its lane, the
/// worktree it runs in), with the re-show schedule.
struct AgentContext {
    state_dir: Option<PathBuf>,
    /// The PostgreSQL server the state directory's store is on, if it is.
    postgres: Option<String>,
    /// The supervisor's desk, when a lane's agent runs this: then nothing else is used.
    desk: Option<Desk>,
    targets: Vec<Target>,
    backoff: Vec<std::time::Duration>,
}

fn agent_context() -> Result<AgentContext> {
    let cwd = std::env::current_dir().unwrap_or_default();
    let git = super::find_git(&cwd);
    let state_dir = std::env::var_os("SPICE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| git.as_ref().map(|(_, common)| common.join("spice")));
    let desk = Desk::from_var(std::env::var_os(crate::steer::desk::VAR));
    // A store on PostgreSQL is read there, never from a SQLite file beside it.
    let postgres = match &state_dir {
        _ if desk.is_some() => None,
        Some(dir) => {
            let url = std::env::var(crate::config::state::URL_VAR).ok();
            match crate::config::state::location(dir, url.as_deref())? {
                crate::store::Location::Postgres(url) => Some(url),
                crate::store::Location::Sqlite(_) => None,
            }
        }
        None => None,
    };
    let session = std::env::var("SPICE_SESSION").ok();
    let lane = std::env::var("SPICE_LANE").ok();
    let targets = crate::store::agent_targets(
        session.as_deref(),
        lane.as_deref(),
        git.as_ref().map(|(top, _)| top.as_path()),
    );
    // The re-show schedule can be tuned (and shortened in tests): "15s,60s,300s".
    let backoff = match std::env::var("SPICE_EXEC_BACKOFF") {
        Ok(v) if !v.trim().is_empty() => v
            .split(',')
            .map(|d| {
                when::parse_duration(d)
                    .map_err(|e| Error::input(format!("SPICE_EXEC_BACKOFF: {e}")))
            })
            .collect::<Result<Vec<_>>>()?,
        _ => exec::BACKOFF.to_vec(),
    };
    Ok(AgentContext {
        state_dir,
        postgres,
        desk,
        targets,
        backoff,
    })
}

pub fn exec(args: ExecArgs) -> Result<i32> {
    let ctx = agent_context()?;
    let cfg = exec::ExecConfig {
        argv: args.command,
        state_dir: ctx.state_dir,
        postgres: ctx.postgres,
        desk: ctx.desk,
        targets: ctx.targets,
        backoff: ctx.backoff,
        readout: std::env::var(exec::DELIVERY_VAR).as_deref() != Ok(exec::DELIVER_MESSAGE),
    };
    exec::run(cfg, Arc::new(SystemClock))
}

/// `spice hook claude-post-tool-use`: run by Claude Code after each tool call. Prints
/// the hook's JSON with the steering items due for this agent, or nothing. It never
/// fails the agent's tool call: problems go to stderr and the exit code stays 0.
pub fn hook(kind: HookKind) -> Result<()> {
    let HookKind::ClaudePostToolUse = kind;
    // Claude writes the hook's input on stdin; read it so it never sees a broken pipe.
    let _ = std::io::copy(&mut std::io::stdin().lock(), &mut std::io::sink());
    let run = || -> Result<Option<String>> {
        let ctx = agent_context()?;
        let mut store: Box<dyn crate::steer::desk::Steering> = match (ctx.desk, ctx.postgres) {
            (Some(desk), _) => Box::new(desk),
            (None, Some(url)) => Box::new(crate::store::connect(
                &crate::store::Location::Postgres(url),
                Arc::new(SystemClock),
            )?),
            (None, None) => {
                let Some(db) = ctx
                    .state_dir
                    .map(|d| d.join(crate::store::DB_FILE))
                    .filter(|p| p.exists())
                else {
                    return Ok(None);
                };
                let store: Box<dyn Authority> =
                    Box::new(crate::store::Store::open(&db, Arc::new(SystemClock))?);
                Box::new(store)
            }
        };
        crate::steer::hook::claude_post_tool_use(store.as_mut(), &ctx.targets, &ctx.backoff)
    };
    match run() {
        Ok(Some(out)) => println!("{out}"),
        Ok(None) => {}
        Err(e) => eprintln!("spice: steering unavailable to this hook ({e})"),
    }
    Ok(())
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum HookKind {
    /// Claude Code's PostToolUse hook (installed with `claude --settings`).
    ClaudePostToolUse,
}

pub fn shell_init(shell: Shell) -> Result<()> {
    let me = std::env::current_exe().map_err(|source| Error::Io {
        context: "failed to locate the spice binary".into(),
        source,
    })?;
    print!("{}", shell_init_text(shell, &me));
    Ok(())
}

/// The startup file for `shell` that routes top-level commands through `me exec`.
pub fn shell_init_text(shell: Shell, me: &Path) -> String {
    let me = shell_quote(&me.display().to_string());
    match shell {
        Shell::Bash => format!(
            r#"# spice shell redirector for bash, loaded through BASH_ENV.
# Re-runs a top-level `bash -c` command through `spice exec` exactly once, so the
# operator's steering shows on its stderr. SPICE_EXEC_ACTIVE marks everything below
# it, so nested shells and scripts run untouched.
if [ -z "${{SPICE_EXEC_ACTIVE:-}}" ] && [ -n "${{BASH_EXECUTION_STRING:-}}" ] && [ -x {me} ]; then
  export SPICE_EXEC_ACTIVE=1
  exec {me} exec -- "${{BASH:-bash}}" -c "$BASH_EXECUTION_STRING" "$0" "$@"
fi
"#
        ),
        Shell::Zsh => format!(
            r#"# spice shell redirector for zsh: the .zshenv of the ZDOTDIR spice points at.
# First restore the user's own startup files, then re-run a top-level `zsh -c`
# command through `spice exec` exactly once.
if [[ -n "${{SPICE_ORIG_ZDOTDIR-}}" ]]; then export ZDOTDIR="$SPICE_ORIG_ZDOTDIR"; else unset ZDOTDIR; fi
[[ -f "${{ZDOTDIR:-$HOME}}/.zshenv" ]] && source "${{ZDOTDIR:-$HOME}}/.zshenv"
if [[ -z "${{SPICE_EXEC_ACTIVE-}}" && -n "${{ZSH_EXECUTION_STRING-}}" && -x {me} ]]; then
  export SPICE_EXEC_ACTIVE=1
  exec {me} exec -- "${{ZSH_NAME:-zsh}}" -c "$ZSH_EXECUTION_STRING"
fi
"#
        ),
    }
}

fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// Reads a target as the operator typed it.
pub fn parse_target(env: &Env, text: &str) -> Result<Target> {
    let text = text.trim();
    if let Some((kind, rest)) = text.split_once(':') {
        let kind = match kind {
            "lane" => Some(TargetKind::Lane),
            "worktree" => Some(TargetKind::Worktree),
            "session" => Some(TargetKind::Session),
            _ => None,
        };
        if let Some(kind) = kind {
            if rest.is_empty() {
                return Err(Error::input(format!(
                    "invalid target '{text}': nothing after ':'"
                )));
            }
            if kind == TargetKind::Lane {
                crate::config::lane::check_lane_name(rest)?;
            }
            let name = match kind {
                TargetKind::Worktree => worktree_name(Path::new(rest))?,
                _ => rest.to_string(),
            };
            return Ok(Target { kind, name });
        }
    }
    let path = Path::new(text);
    if text.contains('/') || text == "." || path.is_dir() {
        return Ok(Target {
            kind: TargetKind::Worktree,
            name: worktree_name(path)?,
        });
    }
    if let Ok(dir) = env.lanes_dir() {
        if crate::config::lane::check_lane_name(text).is_ok()
            && dir.join(format!("{text}.toml")).is_file()
        {
            return Ok(Target {
                kind: TargetKind::Lane,
                name: text.to_string(),
            });
        }
    }
    if crate::stamp::is_stamp(text) || crate::task::looks_like_uuid(text) {
        return Ok(Target {
            kind: TargetKind::Session,
            name: text.to_string(),
        });
    }
    Err(Error::input(format!(
        "unknown target '{text}': not a lane (no lanes/{text}.toml), a directory or a session id; \
         write lane:{text}, worktree:PATH or session:ID to be explicit"
    )))
}

/// The target of a new steering item (`spice steer`, the console's steer): as
/// [`parse_target`] reads it, a session by a unique prefix of one the store knows
/// ([`Authority::resolve_session`]), and a lane only if a lane file defines it,
/// as the bare form requires, unless `force`: nothing would ever deliver an item for
/// any other, and it would expire unseen.
pub fn steer_target(env: &Env, text: &str, force: bool) -> Result<Target> {
    steer_target_with(env, text, force, |typed| {
        env.authority()?.resolve_session(typed)
    })
}

/// [`steer_target`] with a session resolved by `resolve` (asked only for a session).
fn steer_target_with(
    env: &Env,
    text: &str,
    force: bool,
    resolve: impl FnOnce(&str) -> Result<String>,
) -> Result<Target> {
    let mut target = parse_target(env, text)?;
    if target.kind == TargetKind::Session {
        // As a listing shows it: a unique prefix of a session the store knows.
        target.name = resolve(&target.name)?;
    }
    if target.kind != TargetKind::Lane || force {
        return Ok(target);
    }
    super::lanes::require(env, &target.name).map_err(|e| {
        Error::input(format!(
            "{e}; nothing would deliver the item and it would expire unseen \
             (`spice steer --force` steers it anyway)"
        ))
    })?;
    Ok(target)
}

/// A worktree target is the canonical top of the git work tree holding `path`.
fn worktree_name(path: &Path) -> Result<String> {
    let abs = std::fs::canonicalize(path).map_err(|_| {
        Error::input(format!(
            "invalid worktree '{}': no such directory",
            path.display()
        ))
    })?;
    Ok(super::find_git(&abs)
        .map(|(top, _)| top)
        .unwrap_or(abs)
        .display()
        .to_string())
}
