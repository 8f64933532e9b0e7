//! `spice usage` (tokens per session, lane, task, phase or day) and `spice budget`
//! (raise or stop a lane's or a task's token budget).

use super::render::print_json;
use super::Env;
use crate::error::{Error, Result};
use crate::store::BudgetScope;
use crate::usage::{self, prices::Prices, By, Options, Progress, Report};
use clap::{Args, Subcommand};
use std::io::{IsTerminal, Write};
use std::path::PathBuf;

#[derive(Debug, Args)]
pub struct UsageArgs {
    /// Transcript files or directories (no store needed); none = every session the
    /// store knows.
    paths: Vec<PathBuf>,
    /// Group by session, lane, task, phase or day (lane, task and phase need the store).
    #[arg(long, default_value = "session")]
    by: By,
    /// Only tokens spent from then on: a date (2026-12-01, RFC 3339) or a duration
    /// ago (2h, 7d).
    #[arg(long, value_name = "WHEN")]
    since: Option<String>,
    /// A price table (TOML: per million tokens, per model); default
    /// `<state>/prices.toml` when reading the store's sessions, if it exists.
    #[arg(long, value_name = "FILE")]
    prices: Option<PathBuf>,
    /// Print the report (each group, the total, the cost if priced) as JSON instead of a
    /// table.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Subcommand)]
pub enum BudgetCmd {
    /// Raise the token budget of a lane or a task to N (`+N`: by N); a paused lane
    /// resumes.
    Raise {
        /// A lane name, or a task (id, prefix or handle); `--task` says which.
        target: String,
        /// The new budget N, or +N to raise it by N.
        tokens: String,
        /// TARGET names a task, not a lane.
        #[arg(long)]
        task: bool,
    },
    /// Stop the lane working under this budget: its session ends as on `fleet down`,
    /// the claim kept.
    Stop {
        /// A lane name, or a task (id, prefix or handle); `--task` says which.
        target: String,
        /// TARGET names a task, not a lane.
        #[arg(long)]
        task: bool,
    },
    /// Each lane's and task's budget and the tokens used against it.
    Show {
        /// Print the budgets as a JSON array instead of a table.
        #[arg(long)]
        json: bool,
    },
}

/// `--since`: a date, or a duration before now.
fn since(text: &str, now: crate::clock::Micros) -> Result<crate::clock::Micros> {
    if let Ok(d) = crate::when::parse_date(text) {
        return Ok(d);
    }
    match crate::when::parse_duration(text) {
        Ok(d) => Ok(now - crate::when::micros(d)),
        Err(_) => Err(Error::input(format!(
            "--since '{text}': expected a date (YYYY-MM-DD, RFC 3339) or a duration ago (2h, 7d)"
        ))),
    }
}

pub fn usage(args: UsageArgs) -> Result<()> {
    let now = chrono::Utc::now().timestamp_micros();
    let since = args.since.as_deref().map(|s| since(s, now)).transpose()?;
    // Archived copies decompressed for this run, kept readable until it ends.
    let mut _opened = Vec::new();
    let (sources, missing, state_prices) = if args.paths.is_empty() {
        let env = Env::from_process_any()?;
        let mut store = env.authority()?;
        let mut ledger = store
            .ledger_recent_of_kinds(&["launched", "conversation", "archived"], usize::MAX >> 1)?;
        ledger.reverse();
        let live = store.session_usage()?;
        let (s, m, o) = usage::sources(&ledger, &live, Some(&env.state_dir));
        _opened = o;
        let default = env.state_dir.join("prices.toml");
        (s, m, default.is_file().then_some(default))
    } else {
        if args.by.needs_store() {
            return Err(Error::input(
                format!(
                    "--by {:?} needs the store's sessions: give no PATH",
                    args.by
                )
                .to_lowercase(),
            ));
        }
        (usage::files(&args.paths)?, Vec::new(), None)
    };
    let prices = match args.prices.or(state_prices) {
        Some(p) => Some(Prices::load(&p)?),
        None => None,
    };
    let opts = Options {
        by: args.by,
        since,
        prices,
    };
    let tty = std::io::stderr().is_terminal();
    let started = std::time::Instant::now();
    let mut last = started;
    let mut progress = |p: Progress| {
        if tty && last.elapsed().as_millis() >= 200 {
            last = std::time::Instant::now();
            eprint!(
                "\rusage: {}/{} files, {} MiB",
                p.files,
                p.of_files,
                p.bytes >> 20
            );
            let _ = std::io::stderr().flush();
        }
    };
    let report = usage::read(&sources, missing, &opts, &mut progress)?;
    if tty && started.elapsed().as_millis() >= 200 {
        eprint!("\r\x1b[K");
    }
    if args.json {
        print_json(&report);
    } else {
        table(&report);
    }
    Ok(())
}

fn table(r: &Report) {
    let money = r.cost.is_some();
    let head = format!("{:?}", r.by).to_uppercase();
    let mut rows: Vec<[String; 7]> = vec![[
        head,
        "INPUT".into(),
        "OUTPUT".into(),
        "CACHE READ".into(),
        "CACHE WRITE".into(),
        "TOTAL".into(),
        if money { "COST".into() } else { String::new() },
    ]];
    let cost = |c: Option<f64>| c.map(|c| format!("{c:.2}")).unwrap_or_default();
    for g in &r.groups {
        let t = &g.tokens;
        rows.push([
            crate::transcript::sanitize::for_terminal(&g.key),
            t.input.to_string(),
            t.output.to_string(),
            t.cache_read.to_string(),
            t.cache_creation.to_string(),
            t.total.to_string(),
            cost(g.cost),
        ]);
    }
    let t = &r.total;
    rows.push([
        "total".into(),
        t.input.to_string(),
        t.output.to_string(),
        t.cache_read.to_string(),
        t.cache_creation.to_string(),
        t.total.to_string(),
        cost(r.cost),
    ]);
    let widths: Vec<usize> = (0..7)
        .map(|i| rows.iter().map(|r| r[i].chars().count()).max().unwrap_or(0))
        .collect();
    for row in &rows {
        let mut line = format!("{:<w$}", row[0], w = widths[0]);
        for i in 1..7 {
            if !row[i].is_empty() || i < 6 {
                line.push_str(&format!("  {:>w$}", row[i], w = widths[i]));
            }
        }
        println!("{}", line.trim_end());
    }
    if let Some(c) = &r.currency {
        println!("(cost in {c})");
    }
    let unpriced: u64 = r.groups.iter().filter_map(|g| g.unpriced_tokens).sum();
    if unpriced > 0 {
        println!("{unpriced} tokens of models the price table does not name are not costed");
    }
    for m in &r.missing {
        println!("not read: session {}: {}", m.session, m.why);
    }
    if !r.skipped.is_empty() {
        println!("{} files are not transcripts", r.skipped.len());
    }
}

pub fn budget(cmd: BudgetCmd, env: &Env) -> Result<()> {
    // A lane no lane file defines is refused before the store is opened: nothing would
    // ever work under its budget.
    let lane_named = |target: &str, task: bool| -> Result<()> {
        if task {
            Ok(())
        } else {
            super::lanes::require(env, target)
        }
    };
    let scope = |store: &mut dyn crate::store::Authority,
                 target: &str,
                 task: bool|
     -> Result<BudgetScope> {
        Ok(if task {
            BudgetScope::Task(store.task(target)?.id)
        } else {
            BudgetScope::Lane(target.to_string())
        })
    };
    match cmd {
        BudgetCmd::Raise {
            target,
            tokens,
            task,
        } => {
            lane_named(&target, task)?;
            let mut store = env.authority()?;
            let scope = scope(&mut *store, &target, task)?;
            let floor = lane_floor(env, &scope);
            let now = match &scope {
                BudgetScope::Lane(l) => store.budget_state(l, None, floor)?.lane,
                BudgetScope::Task(t) => store
                    .budget_state("", Some(t), None)?
                    .task
                    .unwrap_or_default(),
            };
            let n = parse_tokens(&tokens, now.limit)?;
            let b = store.budget_raise(&scope, n)?;
            println!(
                "budget {}: {} tokens ({} used)",
                target,
                b.limit.unwrap_or(n),
                b.used
            );
        }
        BudgetCmd::Stop { target, task } => {
            lane_named(&target, task)?;
            let mut store = env.authority()?;
            let scope = scope(&mut *store, &target, task)?;
            store.budget_stop(&scope)?;
            println!("stop asked for {target}: its lane ends the session (claim kept)");
        }
        BudgetCmd::Show { json } => {
            let rows = shown(env, &mut *env.authority()?)?;
            if json {
                print_json(&rows);
            } else {
                for r in rows {
                    let spent = match r.limit {
                        Some(l) => format!("{} of {l} tokens", r.used),
                        None => format!("{} tokens, no limit", r.used),
                    };
                    let state = match r.state {
                        Some(BudgetStop::StopAsked) => " (stop asked)",
                        Some(BudgetStop::Stopped) => " (stopped at its budget; claim kept)",
                        None => "",
                    };
                    println!("{} {}: {spent}{state}", r.kind, r.name);
                }
            }
        }
    }
    Ok(())
}

/// A budget as `budget show` lists it: the limit in force (a lane's is its file's
/// `budget_tokens` unless the operator raised it higher), the tokens used, and a stop.
#[derive(Debug, serde::Serialize)]
struct ShownBudget {
    kind: String,
    name: String,
    limit: Option<u64>,
    used: u64,
    /// A stop asked for and not acted on yet.
    stop: bool,
    state: Option<BudgetStop>,
}

/// Where a stop stands: asked for, or acted on (the lane stopped at its budget).
#[derive(Debug, Clone, Copy, serde::Serialize)]
#[serde(rename_all = "snake_case")]
enum BudgetStop {
    StopAsked,
    Stopped,
}

/// Every budget: each lane's that a lane file sets or the operator raised or stopped
/// (lanes first, by name), then each task's the store holds.
fn shown(env: &Env, store: &mut dyn crate::store::Authority) -> Result<Vec<ShownBudget>> {
    let stored = store.budgets()?;
    let mut lanes: std::collections::BTreeMap<String, Option<u64>> = stored
        .iter()
        .filter(|r| r.kind == "lane")
        .map(|r| (r.name.clone(), None))
        .collect();
    if let Ok(dir) = env.lanes_dir() {
        for name in super::lanes::defined(&dir) {
            let floor = lane_floor(env, &BudgetScope::Lane(name.clone()));
            if floor.is_some() || lanes.contains_key(&name) {
                lanes.insert(name, floor);
            }
        }
    }
    let rows = store.lanes()?;
    let mut out = Vec::new();
    for (name, floor) in lanes {
        let b = store.budget_state(&name, None, floor)?.lane;
        let stopped = rows.iter().any(|r| r.name == name && r.stopped_at_budget());
        out.push(ShownBudget {
            kind: "lane".into(),
            state: if b.stop {
                Some(BudgetStop::StopAsked)
            } else {
                stopped.then_some(BudgetStop::Stopped)
            },
            name,
            limit: b.limit,
            used: b.used,
            stop: b.stop,
        });
    }
    out.extend(
        stored
            .into_iter()
            .filter(|r| r.kind != "lane")
            .map(|r| ShownBudget {
                state: r.stop.then_some(BudgetStop::StopAsked),
                kind: r.kind,
                name: r.name,
                limit: r.limit,
                used: r.used,
                stop: r.stop,
            }),
    );
    Ok(out)
}

/// A lane file's `budget_tokens`, the floor of its budget.
fn lane_floor(env: &Env, scope: &BudgetScope) -> Option<u64> {
    let BudgetScope::Lane(name) = scope else {
        return None;
    };
    let dir = env.lanes_dir().ok()?;
    crate::config::lane::budget_tokens(&dir.join(format!("{name}.toml")))
}

/// `N` or `+N` (added to `limit`).
fn parse_tokens(text: &str, limit: Option<u64>) -> Result<u64> {
    let bad = || {
        Error::input(format!(
            "'{text}': expected a number of tokens (N, or +N to add to the budget)"
        ))
    };
    let t = text.replace('_', "");
    match t.strip_prefix('+') {
        Some(add) => {
            let add: u64 = add.parse().map_err(|_| bad())?;
            Ok(limit.unwrap_or(0).saturating_add(add))
        }
        None => t.parse().map_err(|_| bad()),
    }
}
