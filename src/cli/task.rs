//! `spice task …`: the task plane on its own. This file holds the commands' arguments
//! and their dispatch; the listings are [`list`]'s, completing a phase is [`phase`]'s,
//! Taskwarrior's import and export are [`taskwarrior`]'s, the shared argument types
//! [`args`]'.

mod args;
mod list;
mod phase;
mod taskwarrior;

pub(super) use args::duration;
pub use args::{HolderArgs, LeaseArgs, MaybeDate, Prio};

use super::render;
use super::Env;
use crate::clock::Micros;
use crate::error::{Error, Result};
use crate::store::{Holder, ListFilter, Takeover, TaskUpdate};
use crate::task::{NewTask, Status};
use args::{date, optional_date, priority, status};
use clap::Subcommand;
use std::time::Duration;

#[derive(Debug, Subcommand)]
pub enum TaskCmd {
    /// Add a task.
    Add {
        /// The title (several words are joined with spaces).
        #[arg(required = true)]
        title: Vec<String>,
        /// A longer description.
        #[arg(long)]
        body: Option<String>,
        /// The project it belongs to: its handle is PROJECT-id, its phases the
        /// project's flow.
        #[arg(long)]
        project: Option<String>,
        /// The starting phase (default: the first of the project's flow).
        #[arg(long)]
        phase: Option<String>,
        /// H, M, L or none.
        #[arg(long, value_parser = priority)]
        priority: Option<Prio>,
        /// A task this one waits on (repeatable).
        #[arg(long = "depends", value_name = "ID")]
        depends: Vec<String>,
        /// YYYY-MM-DD, RFC 3339 or YYYYMMDDTHHMMSSZ.
        #[arg(long, value_parser = date)]
        due: Option<Micros>,
        /// A tag (repeatable).
        #[arg(long = "tag", value_name = "TAG")]
        tags: Vec<String>,
        /// Print the new task as JSON instead of its handle.
        #[arg(long)]
        json: bool,
    },
    /// List tasks (open ones unless --status or --all).
    List {
        /// Only tasks of this project.
        #[arg(long)]
        project: Option<String>,
        /// Only tasks in this phase.
        #[arg(long)]
        phase: Option<String>,
        /// Only tasks with this tag.
        #[arg(long)]
        tag: Option<String>,
        /// Only tasks in this status: pending, waiting, completed or deleted (repeatable).
        #[arg(long, value_parser = status)]
        status: Vec<Status>,
        /// Every task, whatever its status.
        #[arg(long, conflicts_with = "status")]
        all: bool,
        /// Print the tasks as a JSON array instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Show one task with its dependencies, dependents, claim and ledger.
    Show {
        /// The task: id, unique prefix, handle (PROJECT-id) or uuid.
        id: String,
        /// Print the task with its dependents, claim and ledger as JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Change a task's title, body, project, priority, due date, tags or token budget.
    Modify {
        /// The task: id, unique prefix, handle (PROJECT-id) or uuid.
        id: String,
        /// The new title.
        #[arg(long)]
        title: Option<String>,
        /// The new description.
        #[arg(long)]
        body: Option<String>,
        /// A project, or "none".
        #[arg(long)]
        project: Option<String>,
        /// H, M, L or none.
        #[arg(long, value_parser = priority)]
        priority: Option<Prio>,
        /// A date, or "none".
        #[arg(long, value_parser = optional_date)]
        due: Option<MaybeDate>,
        /// Add a tag (repeatable).
        #[arg(long = "tag", value_name = "TAG")]
        tags: Vec<String>,
        /// Remove a tag (repeatable).
        #[arg(long = "untag", value_name = "TAG")]
        untags: Vec<String>,
        /// The task's token budget: crossing it pauses the lane working on it
        /// (see `spice budget`).
        #[arg(long = "budget-tokens", value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
        budget_tokens: Option<u64>,
        /// Print the changed task as JSON instead of its handle.
        #[arg(long)]
        json: bool,
    },
    /// Add a note to a task.
    Annotate {
        /// The task: id, unique prefix, handle (PROJECT-id) or uuid.
        id: String,
        /// The note (several words are joined with spaces).
        text: Vec<String>,
    },
    /// Make a task wait on others (--on), or stop waiting (--remove).
    Dep {
        /// The task that waits: id, unique prefix, handle or uuid.
        id: String,
        /// A task it waits on (repeatable).
        #[arg(long, value_name = "ID", required_unless_present = "remove")]
        on: Vec<String>,
        /// A task it no longer waits on (repeatable).
        #[arg(long, value_name = "ID")]
        remove: Vec<String>,
    },
    /// Show or set the phase flow of a project (or the default flow).
    Flow {
        /// The project whose flow to show or set (default: the default flow).
        #[arg(long)]
        project: Option<String>,
        /// The phases in order; none prints the current flow.
        phases: Vec<String>,
        /// The flow as `{"project": …, "phases": […]}`.
        #[arg(long)]
        json: bool,
    },
    /// Complete the current phase (--done) or move a task to PHASE.
    Phase {
        /// The task: id, unique prefix, handle (PROJECT-id) or uuid.
        id: String,
        /// The phase to move the task to.
        #[arg(required_unless_present = "done", conflicts_with = "done")]
        phase: Option<String>,
        /// Complete the current phase instead: the task's branch is merged into its
        /// base, the task moves to the next phase (done after the last), its claim ends.
        #[arg(long)]
        done: bool,
        #[command(flatten)]
        holder: HolderArgs,
        /// Print the phase step (from, to) as JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Mark a task completed (releasing its claim).
    Done {
        /// The task: id, unique prefix, handle (PROJECT-id) or uuid.
        id: String,
        #[command(flatten)]
        holder: HolderArgs,
    },
    /// Mark a task deleted.
    Delete {
        /// The task: id, unique prefix, handle (PROJECT-id) or uuid.
        id: String,
        #[command(flatten)]
        holder: HolderArgs,
    },
    /// Rank the ready tasks; with --claim, take the best one as a lease.
    Next(super::next::NextArgs),
    /// Claim one task as a lease.
    Claim {
        /// The task: id, unique prefix, handle (PROJECT-id) or uuid.
        id: String,
        #[command(flatten)]
        lease: LeaseArgs,
        /// Print the claim as JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Extend a lease, or pass it to a successor session.
    Renew {
        /// The claimed task: id, unique prefix, handle (PROJECT-id) or uuid.
        id: String,
        /// Who holds the claim.
        #[arg(long, default_value = crate::store::OPERATOR)]
        claimant: String,
        /// Refuse unless the claim still carries this fence.
        #[arg(long)]
        fence: Option<i64>,
        /// Pass the claim to this session (under a new fence) instead of only extending it.
        #[arg(long)]
        successor: Option<String>,
        /// The new lease length from now, e.g. 30m, 2h (default 30m; never shortens it).
        #[arg(long, value_parser = duration)]
        lease: Option<Duration>,
        /// Print the claim as JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Give a claimed task back.
    Release {
        /// The claimed task: id, unique prefix, handle (PROJECT-id) or uuid.
        id: String,
        /// Who holds the claim.
        #[arg(long, default_value = crate::store::OPERATOR)]
        claimant: String,
        /// Refuse unless the claim still carries this fence.
        #[arg(long)]
        fence: Option<i64>,
    },
    /// Take over a lapsed claim (a live one with --force), naming the fence you saw.
    Takeover {
        /// The claimed task: id, unique prefix, handle (PROJECT-id) or uuid.
        id: String,
        /// The fence of the claim you saw, as `task claims` shows it (lapsed, unless --force).
        #[arg(long, value_name = "FENCE")]
        stale: i64,
        /// Take the claim although its lease is still live: its holder's lane stops its
        /// agent when its next renewal finds the fence gone.
        #[arg(long)]
        force: bool,
        #[command(flatten)]
        lease: LeaseArgs,
        /// Print the new claim as JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// List claims, live and lapsed.
    Claims {
        /// Only claims whose lease has lapsed.
        #[arg(long)]
        stale: bool,
        /// Print the claims as a JSON array instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// The history of a task.
    Ledger {
        /// The task: id, unique prefix, handle (PROJECT-id) or uuid.
        id: String,
        /// Print the ledger's entries as a JSON array instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Import a Taskwarrior `task export` (FILE, or - for stdin).
    Import {
        /// The `task export` output to read: a file, or - for stdin.
        #[arg(long, value_name = "FILE")]
        taskwarrior: String,
        /// Print the import report as JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Export every task as Taskwarrior JSON (for `task import`).
    Export {
        /// In Taskwarrior's JSON format (the only one; required).
        #[arg(long, required = true)]
        taskwarrior: bool,
    },
}

pub fn run(cmd: TaskCmd, env: &Env) -> Result<()> {
    // A lane's agent completes its phase through its supervisor, which lands the
    // branch for the lane's own claim: a confined agent opens no store and may not
    // move base or the operator's checkout.
    if let TaskCmd::Phase {
        id,
        done: true,
        json,
        ..
    } = &cmd
    {
        if let Some(desk) =
            crate::steer::desk::Desk::from_var(std::env::var_os(crate::steer::desk::VAR))
        {
            let printed = desk.phase_done(id, *json)?;
            phase::print(printed.out, printed.err);
            return Ok(());
        }
    }
    let mut authority = env.authority()?;
    let a = &mut *authority;
    match cmd {
        TaskCmd::Add {
            title,
            body,
            project,
            phase,
            priority,
            depends,
            due,
            tags,
            json,
        } => {
            let new = NewTask {
                title: title.join(" "),
                body: body.unwrap_or_default(),
                project,
                phase,
                priority: priority.and_then(|p| p.0),
                due,
                tags,
                ..NewTask::default()
            };
            let task = a.add_task(new, &depends)?;
            if json {
                render::print_json(&render::task_json(&task));
            } else {
                println!("{}", task.handle());
            }
        }
        TaskCmd::List {
            project,
            phase,
            tag,
            status,
            all,
            json,
        } => {
            let filter = ListFilter {
                statuses: status,
                project,
                phase,
                tag,
            };
            list::tasks(a, filter, all, json)?;
        }
        TaskCmd::Show { id, json } => {
            let task = a.task(&id)?;
            let dependents = a.dependents(&task.id)?;
            let claim = a.claim_on(&task.id)?;
            let ledger = a.ledger(&task.id)?;
            if json {
                let mut v = render::task_json(&task);
                v["dependents"] = serde_json::json!(dependents);
                v["claim"] = claim
                    .as_ref()
                    .map(render::claim_json)
                    .unwrap_or(serde_json::Value::Null);
                v["ledger"] =
                    serde_json::json!(ledger.iter().map(render::ledger_json).collect::<Vec<_>>());
                render::print_json(&v);
            } else {
                render::task_detail(&task, &dependents, claim.as_ref(), &ledger, a.now()?);
            }
        }
        TaskCmd::Modify {
            id,
            title,
            body,
            project,
            priority,
            due,
            tags,
            untags,
            budget_tokens,
            json,
        } => {
            let up = TaskUpdate {
                title,
                body,
                project: project.map(|p| (p != "none").then_some(p)),
                priority: priority.map(|p| p.0),
                due: due.map(|d| d.0),
                add_tags: tags,
                remove_tags: untags,
            };
            let task = a.modify(&id, &up)?;
            if let Some(n) = budget_tokens {
                a.budget_set(&crate::store::BudgetScope::Task(task.id.clone()), n)?;
            }
            if json {
                render::print_json(&render::task_json(&task));
            } else {
                println!("{}", task.handle());
            }
        }
        TaskCmd::Annotate { id, text } => {
            if text.is_empty() {
                return Err(Error::input("annotate needs some text"));
            }
            let task = a.annotate(&id, &text.join(" "))?;
            println!("{}", task.handle());
        }
        TaskCmd::Dep { id, on, remove } => {
            a.change_deps(&id, &on, &remove)?;
        }
        TaskCmd::Flow {
            project,
            phases,
            json,
        } => {
            if !phases.is_empty() {
                let phases: Vec<String> = phases
                    .iter()
                    .flat_map(|p| p.split(','))
                    .map(|p| p.trim().to_string())
                    .collect();
                a.set_flow(project.as_deref(), &phases)?;
            }
            let flow = a.flow(project.as_deref())?;
            if json {
                render::print_json(&serde_json::json!({"project": project, "phases": flow}));
            } else {
                println!("{}", flow.join(" → "));
            }
        }
        TaskCmd::Phase {
            id,
            phase,
            done,
            holder,
            json,
        } => {
            if done {
                phase::done(a, env, &id, holder.holder().as_ref(), json)?;
            } else {
                let phase = phase.expect("clap requires a phase without --done");
                a.set_phase(&id, &phase, holder.holder().as_ref())?;
                println!("{phase}");
            }
        }
        TaskCmd::Done { id, holder } => {
            let id = a.done(&id, holder.holder().as_ref())?;
            println!("{}", a.task(&id)?.handle());
        }
        TaskCmd::Delete { id, holder } => {
            let id = a.delete(&id, holder.holder().as_ref())?;
            println!("{}", a.task(&id)?.handle());
        }
        TaskCmd::Next(args) => super::next::run(a, env, args)?,
        TaskCmd::Claim { id, lease, json } => {
            let claim = a.claim(&id, &lease.request())?;
            render::claim_out(&claim, json);
        }
        TaskCmd::Renew {
            id,
            claimant,
            fence,
            successor,
            lease,
            json,
        } => {
            let lease = lease.unwrap_or(crate::store::DEFAULT_LEASE);
            let claim = a.renew(
                &id,
                &Holder { claimant, fence },
                successor.as_deref(),
                lease,
            )?;
            render::claim_out(&claim, json);
        }
        TaskCmd::Release {
            id,
            claimant,
            fence,
        } => {
            let id = a.release(&id, &Holder { claimant, fence })?;
            println!("{}", a.task(&id)?.handle());
        }
        TaskCmd::Takeover {
            id,
            stale,
            force,
            lease,
            json,
        } => {
            let req = lease.request();
            let t = Takeover {
                stale_fence: stale,
                claimant: req.claimant,
                lane: req.lane,
                worktree: req.worktree,
                lease: req.lease,
                force,
            };
            let claim = a.takeover(&id, &t)?;
            render::claim_out(&claim, json);
        }
        TaskCmd::Claims { stale, json } => list::claims(a, stale, json)?,
        TaskCmd::Ledger { id, json } => {
            let ledger = a.ledger(&id)?;
            if json {
                render::print_json(&ledger.iter().map(render::ledger_json).collect::<Vec<_>>());
            } else {
                render::ledger_table(&ledger);
            }
        }
        TaskCmd::Import {
            taskwarrior: file,
            json,
        } => taskwarrior::import(a, &file, json)?,
        TaskCmd::Export { .. } => taskwarrior::export(a)?,
    }
    Ok(())
}
