//! `spice task …`: the task plane on its own.

use super::render;
use super::Env;
use crate::clock::Micros;
use crate::error::{Error, Result};
use crate::store::{Authority, ClaimRequest, Holder, ListFilter, Takeover, TaskUpdate};
use crate::task::{taskwarrior, NewTask, Priority, Status};
use crate::when;
use clap::{Args, Subcommand};
use std::io::Read;
use std::time::Duration;

/// `H`, `M`, `L` or `none`: clap cannot hold an `Option<Option<_>>` as a value.
#[derive(Debug, Clone, Copy)]
pub struct Prio(Option<Priority>);
/// A date or `none`.
#[derive(Debug, Clone, Copy)]
pub struct MaybeDate(Option<Micros>);

fn priority(s: &str) -> std::result::Result<Prio, String> {
    Priority::parse(s).map(Prio)
}
fn date(s: &str) -> std::result::Result<Micros, String> {
    when::parse_date(s)
}
fn optional_date(s: &str) -> std::result::Result<MaybeDate, String> {
    if s == "none" {
        Ok(MaybeDate(None))
    } else {
        when::parse_date(s).map(|d| MaybeDate(Some(d)))
    }
}
pub(super) fn duration(s: &str) -> std::result::Result<Duration, String> {
    when::parse_duration(s)
}
fn status(s: &str) -> std::result::Result<Status, String> {
    Status::parse(s)
}

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
    /// Take over a claim whose lease lapsed, naming the fence you saw.
    Takeover {
        /// The claimed task: id, unique prefix, handle (PROJECT-id) or uuid.
        id: String,
        /// The fence of the lapsed claim, as `task claims --stale` shows it.
        #[arg(long, value_name = "FENCE")]
        stale: i64,
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

/// Who acts on a claimed task: its holder, optionally pinned to one holding (fence).
#[derive(Debug, Args)]
pub struct HolderArgs {
    /// The claim's holder; needed when the task is claimed.
    #[arg(long)]
    claimant: Option<String>,
    /// Refuse unless the claim still carries this fence.
    #[arg(long, requires = "claimant")]
    fence: Option<i64>,
}

impl HolderArgs {
    fn holder(&self) -> Option<Holder> {
        self.claimant.as_ref().map(|c| Holder {
            claimant: c.clone(),
            fence: self.fence,
        })
    }
}

#[derive(Debug, Args)]
pub struct LeaseArgs {
    /// Who holds the claim.
    #[arg(long, default_value = crate::store::OPERATOR)]
    claimant: String,
    /// The worktree the claim records (where the work happens).
    #[arg(long)]
    worktree: Option<String>,
    /// The lane the claim records.
    #[arg(long)]
    lane: Option<String>,
    /// Lease length (default 30m).
    #[arg(long, value_parser = duration)]
    lease: Option<Duration>,
}

impl LeaseArgs {
    fn request(&self) -> ClaimRequest {
        ClaimRequest {
            claimant: self.claimant.clone(),
            lane: self.lane.clone(),
            worktree: self.worktree.clone(),
            lease: self.lease.unwrap_or(crate::store::DEFAULT_LEASE),
        }
    }
}

pub fn run(cmd: TaskCmd, env: &Env) -> Result<()> {
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
            let open_only = !all && status.is_empty();
            let statuses = if all {
                vec![]
            } else if open_only {
                vec![Status::Pending, Status::Waiting]
            } else {
                status
            };
            let filter = ListFilter {
                statuses,
                project,
                phase,
                tag,
            };
            let short = a.short_ids()?;
            if json {
                // Streamed: one task's document at a time, never the whole list.
                let mut out = render::JsonArray::stdout();
                a.each_task(&filter, &mut |t| {
                    let mut v = render::task_json(&t);
                    v["short"] = short.id(&t.id).into();
                    out.push(&v)
                })?;
                out.finish()?;
            } else {
                let tasks = all_tasks(a, &filter)?;
                if tasks.is_empty() && open_only {
                    println!("{}", nothing_open(a, filter)?);
                } else {
                    let claims = a.claims()?;
                    render::task_table(&tasks, &claims, a.now()?, &short);
                }
            }
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
                // Completing a phase (the merge and the step) is behind the Authority.
                let landed = phase_done(a, env, &id, holder.holder().as_ref())?;
                if let Some(m) = landed.merge.as_ref().filter(|_| !json) {
                    println!(
                        "merged {} into {} at {} ({:?})",
                        m.branch, m.base, m.commit, m.kind
                    );
                }
                // A failed push loses nothing: the merge is local and kept.
                if let Some(p) = &landed.push {
                    if let Some(e) = &p.error {
                        eprintln!("spice: {e}; the merge into {} is kept locally", p.base);
                    }
                }
                // The release stands whatever the repository's on_release says.
                match &landed.release_hook {
                    Some(Ok(run)) if !run.passed() => {
                        eprintln!("spice: {}; the release stands", run.summary_with_output())
                    }
                    Some(Err(why)) => {
                        eprintln!("spice: on_release not run: {why}; the release stands")
                    }
                    _ => {}
                }
                let out = landed.phase;
                if json {
                    render::print_json(&out);
                } else {
                    match &out.to {
                        Some(to) => println!("{} → {to}", out.from),
                        None => println!("{} → completed", out.from),
                    }
                }
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
            };
            let claim = a.takeover(&id, &t)?;
            render::claim_out(&claim, json);
        }
        TaskCmd::Claims { stale, json } => {
            let now = a.now()?;
            let claims: Vec<_> = a
                .claims()?
                .into_iter()
                .filter(|c| !stale || !c.is_live(now))
                .collect();
            let short = a.short_ids()?;
            if json {
                let docs: Vec<_> = claims
                    .iter()
                    .map(|c| {
                        let mut v = render::claim_json(c);
                        v["short"] = short.id(&c.task_id).into();
                        v
                    })
                    .collect();
                render::print_json(&docs);
            } else {
                render::claim_table(&claims, now, &short);
            }
        }
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
        } => {
            let (text, source) = read_input(&file)?;
            let tasks = taskwarrior::parse_export(&text, &source)?;
            let report = a.import(&tasks, &source)?;
            if json {
                render::print_json(&report);
            } else {
                println!(
                    "imported {} task(s) from {source}: {} added, {} updated, {} dependencies",
                    tasks.len(),
                    report.added,
                    report.updated,
                    report.dependencies
                );
            }
        }
        TaskCmd::Export { .. } => {
            let tasks = all_tasks(a, &ListFilter::default())?;
            let uuid_of = tasks
                .iter()
                .map(|t| (t.id.clone(), t.uuid.clone()))
                .collect();
            render::print_json(&taskwarrior::export(&tasks, &uuid_of));
        }
    }
    Ok(())
}

/// Every task matching `filter`, oldest first.
fn all_tasks(a: &mut dyn Authority, filter: &ListFilter) -> Result<Vec<crate::task::Task>> {
    let mut tasks = Vec::new();
    a.each_task(filter, &mut |t| {
        tasks.push(t);
        Ok(())
    })?;
    Ok(tasks)
}

/// What `task list` says when no open task matches: how many closed ones it hid, so
/// a store of finished work does not read as an empty one (issue #40).
fn nothing_open(a: &mut dyn Authority, filter: ListFilter) -> Result<String> {
    let (mut completed, mut deleted) = (0, 0);
    let closed = ListFilter {
        statuses: vec![Status::Completed, Status::Deleted],
        ..filter
    };
    a.each_task(&closed, &mut |t| {
        match t.status {
            Status::Completed => completed += 1,
            _ => deleted += 1,
        }
        Ok(())
    })?;
    let hidden: Vec<String> = [(completed, "completed"), (deleted, "deleted")]
        .into_iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, what)| format!("{n} {what}"))
        .collect();
    Ok(if hidden.is_empty() {
        "no tasks".to_string()
    } else {
        format!("no open tasks ({}; --all shows them)", hidden.join(", "))
    })
}

/// Git boundary 2, through the library: the CLI only supplies what the library may
/// not read itself (the lanes directory of the repository the caller runs in, a
/// fallback for lane files). Where the branch merges comes from the claim and the
/// lane, never from the caller's environment (`land`'s module doc).
fn phase_done(
    s: &mut dyn Authority,
    env: &Env,
    id: &str,
    holder: Option<&Holder>,
) -> Result<crate::land::Landed> {
    let runner = crate::git::Runner::new(std::env::vars_os());
    let lanes_dir = env.lanes_dir().ok();
    crate::land::complete_phase(
        s,
        &crate::land::PhaseDone {
            task: id,
            holder,
            runner: &runner,
            lanes_dir: lanes_dir.as_deref(),
            home: Some(&env.state_dir),
        },
    )
}

fn read_input(file: &str) -> Result<(String, String)> {
    if file == "-" {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .map_err(|source| Error::Io {
                context: "failed to read standard input".into(),
                source,
            })?;
        Ok((text, "<stdin>".into()))
    } else {
        let text = std::fs::read_to_string(file).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => Error::input(format!("{file}: no such file")),
            std::io::ErrorKind::InvalidData => Error::input(format!("{file}: not UTF-8 text")),
            _ => Error::Io {
                context: format!("failed to read {file}"),
                source: e,
            },
        })?;
        Ok((text, file.to_string()))
    }
}
