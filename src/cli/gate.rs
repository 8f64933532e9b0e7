//! `spice gate`: check the repository's measurable rules, install the hooks that check
//! them before every commit, and the hooks' own entry points. Needs no store and no
//! fleet. Exit codes: 0 clean, 1 findings (or a rule that could not run), 2 bad
//! configuration or arguments.

use crate::gate::{self, config, hooks, message, scan};
use clap::{Args, Subcommand};
use std::path::PathBuf;

#[derive(Debug, Subcommand)]
pub enum GateCmd {
    /// Check every rule of spice.toml's [gate]; prints nothing when clean.
    Check(CheckArgs),
    /// Write pre-commit, commit-msg and prepare-commit-msg hooks (existing hooks are
    /// kept and run first).
    Install {
        /// Print what was done to each hook as a JSON array instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Remove the hooks `install` wrote, putting back any it chained.
    Uninstall {
        /// Print what was done to each hook as a JSON array instead of text.
        #[arg(long)]
        json: bool,
    },
    /// List the files and routines latched at their base.
    Latches {
        /// Print the latches as a JSON array instead of text.
        #[arg(long)]
        json: bool,
    },
    /// What the installed hooks run.
    #[command(hide = true)]
    Hook {
        /// The hook git runs: pre-commit, commit-msg or prepare-commit-msg.
        hook: String,
        /// The arguments git passed the hook.
        args: Vec<String>,
    },
}

#[derive(Debug, Args)]
pub struct CheckArgs {
    /// What the index will commit (the default).
    #[arg(long, conflicts_with_all = ["all", "paths", "base"])]
    staged: bool,
    /// Every tracked file.
    #[arg(long, conflicts_with_all = ["paths", "base"])]
    all: bool,
    /// What the current branch changed since it left BASE (as a phase's merge would).
    #[arg(long, conflicts_with = "paths")]
    base: Option<String>,
    /// The task phase, for checks scoped to phases (default: $SPICE_PHASE).
    #[arg(long)]
    phase: Option<String>,
    /// Write latch changes, as a hook does (a plain check only looks).
    #[arg(long)]
    record: bool,
    /// Print the report (findings, rules that could not run, counts) as JSON instead
    /// of text.
    #[arg(long)]
    json: bool,
    /// These files (from the working tree).
    paths: Vec<PathBuf>,
}

pub fn run(cmd: GateCmd) -> i32 {
    match run_inner(cmd) {
        Ok(code) => code,
        Err((code, msg)) => {
            eprintln!("spice: {msg}");
            code
        }
    }
}

type Outcome = Result<i32, (i32, String)>;

fn failed(e: String) -> (i32, String) {
    (1, e)
}

fn repo() -> Result<scan::Repo, (i32, String)> {
    let cwd = std::env::current_dir().map_err(|e| (1, format!("the current directory: {e}")))?;
    scan::Repo::find(&cwd).map_err(|e| (2, e))
}

fn load(repo: &scan::Repo) -> Result<config::GateConfig, (i32, String)> {
    config::load(&repo.root).map_err(|errs| {
        let all: Vec<String> = errs.iter().map(|e| e.to_string()).collect();
        // Every problem, one per line; the last goes out through the caller.
        let (last, rest) = all.split_last().expect("at least one error");
        for e in rest {
            eprintln!("spice: {e}");
        }
        (2, last.clone())
    })
}

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

/// Who the jitter is keyed by: the task session, else the commit's author (in a
/// hook, git has put the author's email in the environment already).
fn actor(repo: &scan::Repo) -> String {
    env("SPICE_SESSION")
        .or_else(|| env("GIT_AUTHOR_EMAIL"))
        .unwrap_or_else(|| {
            scan::git(&repo.root, &["var", "GIT_AUTHOR_IDENT"])
                .ok()
                .map(|o| String::from_utf8_lossy(&o).to_string())
                .and_then(|id| {
                    let email = id.split('<').nth(1)?.split('>').next()?.to_string();
                    Some(email)
                })
                .unwrap_or_default()
        })
}

fn run_inner(cmd: GateCmd) -> Outcome {
    match cmd {
        GateCmd::Check(a) => check(a),
        GateCmd::Install { json } => {
            let repo = repo()?;
            let spice = std::env::current_exe().unwrap_or_else(|_| PathBuf::from("spice"));
            let changes = hooks::install(&repo, &spice).map_err(failed)?;
            show_changes(&changes, json);
            Ok(0)
        }
        GateCmd::Uninstall { json } => {
            let repo = repo()?;
            let changes = hooks::uninstall(&repo).map_err(failed)?;
            show_changes(&changes, json);
            Ok(0)
        }
        GateCmd::Latches { json } => {
            let repo = repo()?;
            let latches = gate::latch::Latches::load(&repo.common_dir).map_err(failed)?;
            let all: Vec<&gate::latch::Latch> = latches.all().collect();
            if json {
                println!("{}", serde_json::to_string(&all).expect("serialisable"));
            } else {
                for l in all {
                    println!(
                        "{}  {}  latched at {} (was {}) since {}",
                        l.path, l.rule, l.base, l.value, l.since
                    );
                }
            }
            Ok(0)
        }
        GateCmd::Hook { hook, args } => run_hook(&hook, &args),
    }
}

fn show_changes(changes: &[hooks::Change], json: bool) {
    if json {
        println!("{}", serde_json::to_string(changes).expect("serialisable"));
    } else {
        for c in changes {
            println!("{:<20} {:<9} {}", c.hook, c.action, c.path);
        }
    }
}

fn check(a: CheckArgs) -> Outcome {
    let repo = repo()?;
    let cfg = load(&repo)?;
    let scope = if a.all {
        scan::Scope::All
    } else if let Some(base) = a.base {
        scan::Scope::Branch {
            base,
            tip: "HEAD".into(),
        }
    } else if !a.paths.is_empty() {
        let cwd = std::env::current_dir().map_err(|e| (1, e.to_string()))?;
        let mut rel = Vec::new();
        for p in &a.paths {
            let full = cwd.join(p);
            let full =
                std::fs::canonicalize(&full).map_err(|e| (2, format!("{}: {e}", p.display())))?;
            let root = std::fs::canonicalize(&repo.root).unwrap_or(repo.root.clone());
            let r = full.strip_prefix(&root).map_err(|_| {
                (
                    2,
                    format!(
                        "{}: not in the repository at {}",
                        p.display(),
                        root.display()
                    ),
                )
            })?;
            rel.push(r.display().to_string());
        }
        scan::Scope::Paths(rel)
    } else {
        scan::Scope::Staged
    };
    let opts = gate::Options {
        actor: actor(&repo),
        phase: a.phase.or_else(|| env("SPICE_PHASE")),
        record: a.record,
        now: crate::clock::Clock::now(&crate::clock::SystemClock),
        ..Default::default()
    };
    let report = gate::run(&repo, &cfg, &scope, &opts).map_err(failed)?;
    if a.json {
        println!("{}", serde_json::to_string(&report).expect("serialisable"));
    } else {
        print!("{}", gate::render_text(&report));
    }
    Ok(if report.clean() { 0 } else { 1 })
}

/// The comment character git strips from messages (`core.commentChar`).
fn comment_char(repo: &scan::Repo) -> char {
    scan::git(&repo.root, &["config", "core.commentChar"])
        .ok()
        .and_then(|o| String::from_utf8_lossy(&o).trim().chars().next())
        .filter(|c| *c != 'a') // "auto": git picks one not in the message; '#' is its first choice
        .unwrap_or('#')
}

fn run_hook(hook: &str, args: &[String]) -> Outcome {
    // Outside a task there are no trailers to add: done before anything is read.
    let trailers = message::task_trailers(
        env("SPICE_TASK").as_deref(),
        env("SPICE_SESSION").as_deref(),
    );
    if hook == "prepare-commit-msg" && trailers.is_empty() {
        return Ok(0);
    }
    // A lane's agent may not write the gate's files: its supervisor judges the
    // commit and keeps the record.
    if hook == "pre-commit" {
        if let Some(desk) =
            crate::steer::desk::Desk::from_var(std::env::var_os(crate::steer::desk::VAR))
        {
            let judged = desk
                .pre_commit(env("GIT_INDEX_FILE"))
                .map_err(|e| (1, format!("pre-commit: {e}")))?;
            if judged.clean {
                return Ok(0);
            }
            eprint!("{}", judged.text);
            eprintln!(
                "{} ({} finding(s)); fix them and commit again",
                hooks::REFUSED,
                judged.problems
            );
            return Ok(1);
        }
    }
    let repo = repo()?;
    let cfg = load(&repo)?;
    match hook {
        "pre-commit" => {
            let caps = cfg.default_file.is_some()
                || !cfg.files.is_empty()
                || cfg.default_routine.is_some();
            let opts = gate::Options {
                // The jitter's key; asked of git only when a cap can use it.
                actor: if caps && cfg.jitter > 0.0 {
                    actor(&repo)
                } else {
                    String::new()
                },
                phase: env("SPICE_PHASE"),
                record: true,
                now: crate::clock::Clock::now(&crate::clock::SystemClock),
                ..Default::default()
            };
            let report = gate::run(&repo, &cfg, &scan::Scope::Staged, &opts).map_err(failed)?;
            record(&repo, "pre-commit", &report.ledger_detail(&repo));
            if report.clean() {
                // What the phase gate checks for bypasses: this tree passed.
                gate::phase::record_verified(&repo).map_err(failed)?;
                return Ok(0);
            }
            eprint!("{}", gate::render_text(&report));
            eprintln!(
                "{} ({} finding(s)); fix them and commit again",
                hooks::REFUSED,
                report.findings.len() + report.could_not_run.len()
            );
            Ok(1)
        }
        "commit-msg" => {
            let file = args
                .first()
                .ok_or((2, "commit-msg: no message file".to_string()))?;
            let text = std::fs::read_to_string(repo.root.join(file))
                .or_else(|_| std::fs::read_to_string(file))
                .map_err(|e| (1, format!("{file}: {e}")))?;
            let required: Vec<String> = trailers.into_iter().map(|(k, _)| k).collect();
            let rules = &cfg.commit;
            if required.is_empty()
                && rules.subject.is_none()
                && rules.body.is_none()
                && rules.trailers.is_empty()
            {
                return Ok(0);
            }
            let problems = message::check(&text, comment_char(&repo), &cfg.commit, &required);
            if problems.is_empty() {
                // The pre-commit run already said this commit passed.
                return Ok(0);
            }
            record(
                &repo,
                "commit-msg",
                &serde_json::json!({ "clean": false, "message": problems }),
            );
            for p in &problems {
                eprintln!("commit message:{}: {}: {}", p.line, p.rule, p.message);
            }
            eprintln!("{}; fix the message and commit again", hooks::REFUSED);
            Ok(1)
        }
        "prepare-commit-msg" => {
            let add = trailers;
            let Some(file) = args.first() else {
                return Err((2, "prepare-commit-msg: no message file".into()));
            };
            let path = if std::path::Path::new(file).is_absolute() {
                PathBuf::from(file)
            } else {
                repo.root.join(file)
            };
            let text = std::fs::read_to_string(&path).map_err(|e| (1, format!("{file}: {e}")))?;
            let new = message::add_trailers(&text, comment_char(&repo), &add);
            if new != text {
                std::fs::write(&path, new).map_err(|e| (1, format!("{file}: {e}")))?;
            }
            Ok(0)
        }
        other => Err((
            2,
            format!("unknown hook {other:?} (spice writes {:?})", hooks::HOOKS),
        )),
    }
}

/// Records a hook's run in the ledger of the task whose worktree this is
/// (`SPICE_TASK`), when the fleet's store is there. A commit is never refused because
/// the record could not be written: the verdict stands and the reason is said.
fn record(repo: &scan::Repo, hook: &str, detail: &serde_json::Value) {
    let Some(task) = env("SPICE_TASK") else {
        return;
    };
    let mut detail = detail.clone();
    detail["hook"] = hook.into();
    // A lane's agent records through its supervisor, which files the run under the
    // agent's own task, session and lane.
    if let Some(desk) =
        crate::steer::desk::Desk::from_var(std::env::var_os(crate::steer::desk::VAR))
    {
        if let Err(e) = desk.gate_run(detail) {
            eprintln!("spice gate: this run was not recorded in task {task}'s ledger: {e}");
        }
        return;
    }
    let state_dir = std::env::var_os("SPICE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| repo.common_dir.join("spice"));
    let url = std::env::var(crate::config::state::URL_VAR).ok();
    let location = crate::config::state::location(&state_dir, url.as_deref());
    // No store made yet: no fleet, so no task to record the run for.
    if matches!(&location, Ok(crate::store::Location::Sqlite(p)) if !p.is_file()) {
        return;
    }
    detail["lane"] = env("SPICE_LANE").into();
    let actor = env("SPICE_SESSION").unwrap_or_else(|| "gate".into());
    let written = location
        .and_then(|l| crate::store::connect(&l, std::sync::Arc::new(crate::clock::SystemClock)))
        .and_then(|mut a| a.note(&task, "gate_run", &actor, detail));
    if let Err(e) = written {
        eprintln!("spice gate: this run was not recorded in task {task}'s ledger: {e}");
    }
}
