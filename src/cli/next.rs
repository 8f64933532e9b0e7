//! `spice task next`: rank the ready tasks, explain the order, or claim the best.

use super::render;
use super::Env;
use crate::alloc::{self, next, Filter};
use crate::error::Result;
use crate::store::{Authority, ClaimRequest};
use clap::Args;
use std::time::Duration;

use super::task::duration;

#[derive(Debug, Args)]
pub struct NextArgs {
    /// How many candidates to print.
    #[arg(long, default_value_t = 10)]
    limit: usize,
    /// Use this lane's project and phase filter (lanes/LANE.toml).
    #[arg(long)]
    lane: Option<String>,
    /// Only tasks of this project (repeatable).
    #[arg(long = "project", value_name = "PROJECT")]
    projects: Vec<String>,
    /// Only tasks in this phase (repeatable).
    #[arg(long = "phase", value_name = "PHASE")]
    phases: Vec<String>,
    /// Rank for this claimant (peer spread and locality depend on who asks); with
    /// --claim, who holds the claim [default with --claim: operator].
    #[arg(long)]
    claimant: Option<String>,
    /// Claim the best candidate, as --claimant (default `operator`, as the console's
    /// takeover).
    #[arg(long)]
    claim: bool,
    /// With --claim: claim up to N tasks, one transaction each.
    #[arg(long, requires = "claim", default_value_t = 1)]
    count: usize,
    /// With --claim: the worktree the claim records (where the work happens).
    #[arg(long)]
    worktree: Option<String>,
    /// With --claim: the lease length, e.g. 30m, 2h (default 30m).
    #[arg(long, value_parser = duration)]
    lease: Option<Duration>,
    /// Say in words why the first candidate beat the second.
    #[arg(long, conflicts_with = "claim")]
    explain: bool,
    /// Print the ranking (or with --claim the claims) as JSON instead of a table.
    #[arg(long)]
    json: bool,
}

pub fn run(s: &mut dyn Authority, env: &Env, args: NextArgs) -> Result<()> {
    let mut filter = Filter {
        projects: args.projects,
        phases: args.phases,
    };
    let mut lane_name = None;
    if let Some(lane) = &args.lane {
        super::lanes::require(env, lane)?;
        let l = crate::config::lane::load(&env.lanes_dir()?, lane)?;
        filter.projects.extend(l.projects);
        filter.phases.extend(l.phases);
        lane_name = Some(lane.clone());
    }
    if args.claim {
        let req = ClaimRequest {
            claimant: args
                .claimant
                .clone()
                .unwrap_or_else(|| crate::store::OPERATOR.into()),
            lane: lane_name,
            worktree: args.worktree,
            lease: args.lease.unwrap_or(crate::store::DEFAULT_LEASE),
        };
        let mut claimed = Vec::new();
        for _ in 0..args.count.max(1) {
            match next::claim_next(s, &req, &filter)? {
                Some(c) => claimed.push(c),
                None => break,
            }
        }
        if args.json {
            let v: Vec<_> = claimed.iter().map(render::claim_json).collect();
            match (args.count, v.len()) {
                (1, 0) => println!("null"),
                (1, _) => render::print_json(&v[0]),
                _ => render::print_json(&v),
            }
        } else if claimed.is_empty() {
            println!("nothing ready");
        } else {
            for c in &claimed {
                render::claim_out(c, false);
            }
        }
        return Ok(());
    }
    // --explain compares the first two, so at least two are ranked.
    let (snap, ranking) =
        next::ranked_top(s, args.claimant.as_deref(), &filter, args.limit.max(2))?;
    if args.json {
        let v: Vec<_> = ranking
            .iter()
            .take(args.limit)
            .map(|c| render::candidate_json(&snap.tasks[c.index], c))
            .collect();
        render::print_json(&v);
    } else {
        let shown = &ranking[..ranking.len().min(args.limit)];
        let ids: Vec<&str> = shown
            .iter()
            .map(|c| snap.tasks[c.index].id.as_str())
            .collect();
        let short = s.short_ids_of(&ids)?;
        render::candidate_table(&snap.tasks, shown, &short);
    }
    if args.explain {
        let why = match ranking.as_slice() {
            [a, b, ..] => alloc::explain(&snap.tasks, a, b),
            [a] => format!("{} is the only ready task", snap.tasks[a.index].handle()),
            [] => return Ok(()),
        };
        // With --json, stdout stays one JSON document.
        if args.json {
            eprintln!("{why}");
        } else {
            println!("{why}");
        }
    }
    // The process ends here: returning a large graph's allocations one by one would
    // cost more than the ranking (the kernel takes the pages back at once).
    std::mem::forget((snap, ranking));
    Ok(())
}
