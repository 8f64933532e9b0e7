//! `spice bed`: warm a template bed at a commit, see every bed of the repository
//! (templates and the beds seeded into task worktrees) with real and apparent sizes
//! and who uses them, and evict least recently used templates to stay under the
//! repository's disk budget.

use super::render::print_json;
use super::Env;
use crate::bed::config::{self, BedConfig};
use crate::bed::evict::{self, bed_paths, size};
use crate::bed::pool::Pool;
use crate::bed::template::{self, Beds, Template};
use crate::error::{Error, Result};
use crate::git::{Git, Runner};
use clap::Subcommand;
use serde_json::json;
use std::io::Write;
use std::path::{Path, PathBuf};

#[derive(Debug, Subcommand)]
pub enum BedCmd {
    /// Build a template bed at a commit: a scratch worktree, the warm commands of
    /// spice.toml's [testbed] run in it (their output shown as it comes).
    Warm {
        /// The commit (default: HEAD).
        #[arg(long, default_value = "HEAD")]
        at: String,
        /// Print the warmed template as JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Every bed: templates (key, commit, state, sizes, last use) and the beds of task
    /// worktrees (slot, ports, template, method).
    Status {
        /// Print JSON instead of text: templates, worktrees' beds, pool, sizes and budget.
        #[arg(long)]
        json: bool,
    },
    /// Seed a worktree (default: the current one) from the best template for its
    /// HEAD: only the bed paths it lacks.
    Seed {
        /// The worktree's top.
        path: Option<PathBuf>,
        /// Print what was seeded as JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Evict least recently used templates and pooled worktrees (never a template
    /// being warmed or seeded from, never the bed of a task in progress) until every
    /// bed together fits [testbed] disk_budget; failed warms go first.
    Gc {
        /// Print the evicted beds as a JSON array instead of text.
        #[arg(long)]
        json: bool,
    },
}

fn repo(env: &Env) -> Result<(Git, BedConfig)> {
    let top = env
        .repo_top
        .clone()
        .ok_or_else(|| Error::input("spice bed needs a git repository"))?;
    let git = Git::open(&top, Runner::new(Vec::<(String, String)>::new()))?;
    let path = top.join(config::FILE);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(Error::input(format!(
                "{}: no such file: a test bed is configured in its [testbed] section",
                config::FILE
            )))
        }
        Err(source) => {
            return Err(Error::Io {
                context: format!("reading {}", path.display()),
                source,
            })
        }
    };
    match config::parse(Path::new(config::FILE), &text) {
        Ok(Some(c)) => Ok((git, c)),
        Ok(None) => Err(Error::input(format!(
            "{}: has no [testbed] section",
            config::FILE
        ))),
        Err(errs) => {
            let all: Vec<String> = errs.iter().map(|e| e.to_string()).collect();
            Err(Error::Input(all.join("\n")))
        }
    }
}

pub fn run(cmd: BedCmd, env: &Env) -> Result<()> {
    match cmd {
        BedCmd::Warm { at, json } => {
            let (git, cfg) = repo(env)?;
            let beds = Beds::of(&git);
            let mut err = std::io::stderr();
            let mut show = |l: &str| {
                let _ = writeln!(err, "  {l}");
            };
            eprintln!("warming a test bed at {at} ({} command(s))", cfg.warm.len());
            let t = beds.warm(&git, &cfg, &at, &mut show, &Default::default())?;
            if json {
                print_json(&t);
            } else {
                println!("{}", line(&t));
            }
            Ok(())
        }
        BedCmd::Status { json } => {
            let (git, cfg) = repo(env)?;
            let beds = Beds::of(&git);
            let (templates, mut bad) = beds.list();
            let slots = slots(env)?;
            let (pooled, pool_bad) = Pool::of(&git).scan();
            bad.extend(pool_bad);
            let mut worktrees = Vec::new();
            for s in &slots {
                let paths = bed_paths(&cfg, &[PathBuf::from(&s.worktree)]);
                let refs: Vec<&Path> = paths.iter().map(PathBuf::as_path).collect();
                let usage = template::total_usage(&refs)?;
                worktrees.push(json!({
                    "worktree": s.worktree, "task": s.task_id, "slot": s.slot, "ports": s.ports,
                    "template": s.template, "method": s.method, "usage": usage,
                }));
            }
            let roots: Vec<PathBuf> = templates
                .iter()
                .map(|t| t.tree.clone())
                .chain(slots.iter().map(|s| PathBuf::from(&s.worktree)))
                .chain(pooled.iter().map(|p| p.path.clone()))
                .collect();
            let mut pool_rows = Vec::new();
            for p in &pooled {
                let paths = bed_paths(&cfg, std::slice::from_ref(&p.path));
                let refs: Vec<&Path> = paths.iter().map(PathBuf::as_path).collect();
                let usage = template::total_usage(&refs)?;
                pool_rows.push(json!({ "pooled": p, "usage": usage }));
            }
            let all = bed_paths(&cfg, &roots);
            let refs: Vec<&Path> = all.iter().map(PathBuf::as_path).collect();
            let total = template::total_usage(&refs)?;
            let doc = json!({
                "templates": templates.iter().map(|t| {
                    let users: Vec<&str> = slots.iter()
                        .filter(|s| s.template.as_deref() == Some(t.id.as_str()))
                        .map(|s| s.worktree.as_str()).collect();
                    json!({ "template": t, "busy": beds.busy(&t.id), "used_by": users })
                }).collect::<Vec<_>>(),
                "worktrees": worktrees,
                "pool": pool_rows,
                "pool_size": cfg.pool,
                "total": total,
                "disk_budget": cfg.disk_budget,
                "unreadable": bad,
            });
            if json {
                print_json(&doc);
                return Ok(());
            }
            if templates.is_empty() {
                println!("no template beds (`spice bed warm` builds one)");
            }
            for t in &templates {
                println!("{}", line(t));
            }
            for w in &doc["worktrees"].as_array().cloned().unwrap_or_default() {
                println!(
                    "slot {:<3} {}  ports {}  from {} ({})  real {}",
                    w["slot"],
                    w["worktree"].as_str().unwrap_or(""),
                    w["ports"],
                    w["template"].as_str().unwrap_or("-"),
                    w["method"].as_str().unwrap_or("-"),
                    size(w["usage"]["real"].as_u64().unwrap_or(0)),
                );
            }
            for p in &pool_rows {
                println!(
                    "pooled   {}  from task {}  real {}{}",
                    p["pooled"]["path"].as_str().unwrap_or(""),
                    p["pooled"]["task"].as_str().unwrap_or(""),
                    size(p["usage"]["real"].as_u64().unwrap_or(0)),
                    p["pooled"]["saved"]
                        .as_str()
                        .map(|r| format!("  (its leftovers saved as {r})"))
                        .unwrap_or_default(),
                );
            }
            println!(
                "all beds: real {} (apparent {}){}",
                size(total.real),
                size(total.apparent),
                cfg.disk_budget
                    .map(|b| format!(", budget {}", size(b)))
                    .unwrap_or_default()
            );
            for b in &bad {
                println!("ignored manifest: {b}");
            }
            Ok(())
        }
        BedCmd::Seed { path, json } => {
            let (git, cfg) = repo(env)?;
            let wt = match path {
                Some(p) => p,
                None => env.repo_top.clone().expect("repo() checked it"),
            };
            let wt = std::fs::canonicalize(&wt).map_err(|source| Error::Io {
                context: format!("reading {}", wt.display()),
                source,
            })?;
            let wt_git = Git::open(&wt, Runner::new(Vec::<(String, String)>::new()))?;
            let commit = wt_git.resolve_commit("HEAD")?;
            let started = std::time::Instant::now();
            let mut d = template::seed_worktree(&git, &cfg, &commit, &wt)?;
            d["seconds"] = json!(started.elapsed().as_secs_f64());
            if json {
                print_json(&d);
            } else if d["seeded"] == true {
                println!(
                    "seeded {} from {} ({} match) by {}: {} files, {} in {:.2}s",
                    wt.display(),
                    d["template"].as_str().unwrap_or(""),
                    d["matched"].as_str().unwrap_or(""),
                    d["method"].as_str().unwrap_or(""),
                    d["files"],
                    size(d["bytes"].as_u64().unwrap_or(0)),
                    d["seconds"].as_f64().unwrap_or(0.0),
                );
            } else {
                println!("not seeded: {}", d["why"].as_str().unwrap_or(""));
            }
            Ok(())
        }
        BedCmd::Gc { json } => {
            let (git, cfg) = repo(env)?;
            let in_use: Vec<PathBuf> = slots(env)?
                .iter()
                .map(|s| PathBuf::from(&s.worktree))
                .collect();
            let outcome = evict::evict(&git, &cfg, &in_use)?;
            if json {
                print_json(&outcome.evicted);
                return Ok(());
            }
            for e in &outcome.evicted {
                println!("evicted {} {} ({})", e.kind, e.id, e.why);
            }
            let (_, mut ignored) = Beds::of(&git).list();
            ignored.extend(Pool::of(&git).scan().1);
            for b in &ignored {
                println!("ignored manifest: {b}");
            }
            let standing = outcome.standing();
            if outcome.evicted.is_empty() {
                println!("nothing to evict: {standing}");
            } else if outcome.budget.is_some_and(|b| outcome.real > b) {
                println!("still over: {standing}");
            }
            Ok(())
        }
    }
}

/// The bed slots of task worktrees, when there is a store (a SQLite file not made
/// yet holds none, and is not made to say so).
fn slots(env: &Env) -> Result<Vec<crate::store::BedSlot>> {
    match &env.location {
        crate::store::Location::Sqlite(path) if !path.is_file() => Ok(Vec::new()),
        _ => env.authority()?.bed_slots(),
    }
}

fn line(t: &Template) -> String {
    let usage = t
        .usage
        .as_ref()
        .map(|u| format!("real {} (apparent {})", size(u.real), size(u.apparent)))
        .unwrap_or_default();
    format!(
        "{} {:<8} commit {} warmed in {:.1}s {usage} last used {}{}",
        t.id,
        t.state,
        &t.commit[..t.commit.len().min(12)],
        t.warm_seconds,
        t.last_used,
        t.error
            .as_ref()
            .map(|e| format!("\n  {}", e.lines().next().unwrap_or("")))
            .unwrap_or_default()
    )
}
