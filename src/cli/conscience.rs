//! `spice conscience`: the maxims in force, the log of what the conscience did, a
//! transcript heard in the foreground, and maxims proposed from the operator's
//! recurring corrections (filed as tasks, never written as maxim files).

use super::{render, Env};
use crate::conscience::{self, maxim, propose, Book, Conscience, Scope};
use crate::error::{Error, Result};
use crate::store::{Authority, ItemState};
use crate::task::NewTask;
use clap::Subcommand;
use serde_json::json;
use std::path::PathBuf;

#[derive(Debug, Subcommand)]
pub enum ConscienceCmd {
    /// The maxims in force in this repository (maxims/*.toml and the built-ins not
    /// disabled); a bad maxim file is reported file:line:col (exit 2).
    Maxims {
        /// Print the maxims as JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// What the conscience did: fired, suppressed, each judge's answer, abandoned,
    /// published, and how each reminder was answered (acked, nacked, expired).
    Log {
        /// Only this lane's steps.
        #[arg(long)]
        lane: Option<String>,
        /// The last N steps.
        #[arg(long, default_value_t = 200)]
        limit: usize,
        /// Print the steps as a JSON array instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Hear transcripts' assistant prose as LANE's conscience would (from where the
    /// last scan of each file stopped), publishing reminders for the lane.
    Scan {
        /// Transcript files to hear (JSONL), each from where its last scan stopped.
        #[arg(required = true)]
        paths: Vec<PathBuf>,
        /// The lane whose conscience hears them, and whose agent gets the reminders.
        #[arg(long)]
        lane: String,
        /// The writer's agent profile, for maxims scoped to profiles.
        #[arg(long)]
        profile: Option<String>,
        /// The writer's task project, for maxims scoped to projects.
        #[arg(long)]
        project: Option<String>,
        /// The writer's task phase, for maxims scoped to phases.
        #[arg(long)]
        phase: Option<String>,
        /// Print JSON instead of text: each file's scan and the steps it logged.
        #[arg(long)]
        json: bool,
    },
    /// Draft maxims from corrections the operator made again and again (acknowledged
    /// steering items sharing terms no maxim owns) and file each as a task to review.
    Propose {
        /// How many items a theme needs.
        #[arg(long, default_value_t = 2)]
        min: usize,
        /// Print the drafted maxims (TOML, evidence, filed task) as a JSON array.
        #[arg(long)]
        json: bool,
    },
}

pub fn run(cmd: ConscienceCmd, env: &Env) -> Result<()> {
    match cmd {
        ConscienceCmd::Maxims { json } => {
            let book = book(env)?;
            if json {
                render::print_json(&book);
            } else {
                for m in &book.maxims {
                    let mut triggers = m.words.clone();
                    triggers.extend(m.phrases.iter().map(|p| format!("\"{p}\"")));
                    let judged = if m.judges { " (judged)" } else { "" };
                    println!("{}{judged}: {}", m.name, m.message);
                    println!("  triggers: {}", triggers.join(", "));
                }
                if !book.disabled.is_empty() {
                    println!("disabled: {}", book.disabled.join(", "));
                }
            }
            Ok(())
        }
        ConscienceCmd::Log { lane, limit, json } => {
            let mut store = env.authority()?;
            if let Some(l) = &lane {
                super::lanes::require_or_seen(env, store.as_mut(), l)?;
            }
            let log = store.conscience_log(lane.as_deref(), limit)?;
            if json {
                render::print_json(&log);
            } else {
                for e in &log {
                    let detail = e
                        .detail
                        .get("sentence")
                        .or(e.detail.get("raw"))
                        .or(e.detail.get("body"))
                        .or(e.detail.get("why"))
                        .and_then(|v| v.as_str())
                        .unwrap_or_default();
                    println!(
                        "{} {} {} epoch {} {}{} {}",
                        render::clock_time(e.at),
                        e.lane,
                        e.maxim,
                        e.epoch,
                        e.step,
                        e.key
                            .as_deref()
                            .map(|k| format!(" {k}"))
                            .unwrap_or_default(),
                        detail.split_whitespace().collect::<Vec<_>>().join(" ")
                    );
                }
            }
            Ok(())
        }
        ConscienceCmd::Scan {
            paths,
            lane,
            profile,
            project,
            phase,
            json,
        } => {
            // Its reminders are the lane's steering: for a lane no file defines, nothing
            // would deliver them.
            super::lanes::require(env, &lane)?;
            // Its judges are agents.
            super::launch_depth()?;
            let c = Conscience::new(book(env)?);
            let scope = Scope {
                lane,
                profile,
                project,
                phase,
            };
            let mut store = env.authority()?;
            let before = last_seq(&mut *store)?;
            let cwd = env.repo_top.clone().unwrap_or_else(|| PathBuf::from("."));
            let mut reports = Vec::new();
            for p in &paths {
                reports.push(conscience::scan::scan(&mut *store, &c, &scope, p, &cwd)?);
            }
            let steps: Vec<_> = store
                .conscience_log(Some(&scope.lane), usize::MAX >> 1)?
                .into_iter()
                .filter(|e| e.seq > before)
                .collect();
            if json {
                render::print_json(&json!({ "scans": reports, "steps": steps }));
            } else {
                for r in &reports {
                    println!(
                        "{}: lines {}..{}, {} message(s), {} compaction(s)",
                        r.path, r.from_line, r.to_line, r.messages, r.compactions
                    );
                }
                for e in steps.iter().filter(|e| e.step == "published") {
                    println!(
                        "published {} for {}: {}",
                        e.key.as_deref().unwrap_or(""),
                        e.maxim,
                        e.lane
                    );
                }
            }
            Ok(())
        }
        ConscienceCmd::Propose { min, json } => propose_cmd(env, min, json),
    }
}

/// The maxims in force in the work tree the command runs in (the built-ins alone
/// outside a repository).
fn book(env: &Env) -> Result<Book> {
    let loaded = match &env.repo_top {
        Some(top) => maxim::load(top),
        None => maxim::compile(std::path::Path::new(maxim::DIR), &[]),
    };
    loaded.map_err(|mut errs| {
        let last = errs.pop().expect("an error");
        for e in &errs {
            eprintln!("spice: {e}");
        }
        Error::from(last)
    })
}

fn last_seq(store: &mut dyn Authority) -> Result<i64> {
    Ok(store.conscience_log(None, 1)?.last().map_or(0, |e| e.seq))
}

fn propose_cmd(env: &Env, min: usize, json: bool) -> Result<()> {
    let book = book(env)?;
    let mut store = env.authority()?;
    let mut items = Vec::new();
    for item in store.inbox(&[], true)? {
        if item.state != ItemState::Acked || item.text.starts_with("[MAXIM ") {
            continue;
        }
        let acks = store.acks_for(&item.key)?;
        items.push(propose::Evidence { item, acks });
    }
    let mut out = Vec::new();
    for d in propose::drafts(&items, &book, min) {
        let (task, filed) = match store.proposal(&d.theme)? {
            Some(p) => (p.task_id, false),
            None => {
                let task = store.add_task(
                    NewTask {
                        title: format!(
                            "maxim proposal: {} ({} corrections)",
                            d.name,
                            d.evidence.len()
                        ),
                        body: propose::body(&d),
                        tags: vec![crate::fleet::needs::PROPOSAL_TAG.into()],
                        ..NewTask::default()
                    },
                    &[],
                )?;
                store.record_proposal(&d.theme, &task.id)?;
                (task.id, true)
            }
        };
        out.push(json!({
            "theme": d.theme, "name": d.name, "words": d.words, "message": d.message,
            "items": d.evidence.iter().map(|e| &e.item.key).collect::<Vec<_>>(),
            "toml": d.toml, "task": task, "filed": filed,
        }));
    }
    if json {
        render::print_json(&out);
    } else if out.is_empty() {
        println!("no theme recurs {min} times or more");
    } else {
        for p in &out {
            let how = if p["filed"] == true {
                "filed as task"
            } else {
                "already proposed: task"
            };
            println!(
                "{} ({}): {how} {}",
                p["name"].as_str().unwrap_or(""),
                p["words"],
                p["task"].as_str().unwrap_or("")
            );
        }
    }
    Ok(())
}
