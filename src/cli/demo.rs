//! `spice demo [DIR]`: the newcomer's first run. Creates a scratch repository with a
//! few dependent tasks and two lanes of the scripted demo agent, runs the fleet until
//! nothing is ready, and narrates the loop from the store as it happens: claims,
//! worktrees, agents launched, a steering item delivered mid-command and ACKed from
//! the agent's transcript, phases completed and merged, the next task claimed.
//!
//! Nothing outside DIR is touched: the state directory is the repository's own
//! (`.git/spice`), and the demo agents' home (where their transcripts go) is inside
//! it, `.git/spice/demo-home`, as for every lane of the built-in demo profile.
//! No API key, no network.

use super::Env;
use crate::error::{Error, Result};
use crate::store::{ItemState, LaneState, Store, Target, TargetKind};
use crate::task::{NewTask, Priority};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

#[derive(Debug, clap::Args)]
pub struct DemoArgs {
    /// Where to create the scratch repository (must not exist, or be empty); default:
    /// a new directory under the system's temporary directory.
    dir: Option<PathBuf>,
}

const TASKS: [(&str, &str); 4] = [
    ("Write the greeting", "H"),
    ("Add a farewell", "M"),
    ("Document the demo", "L"),
    ("Polish the farewell", "M"),
];
const STEER: &str = "Keep commit messages under 50 characters.";

pub fn run(args: DemoArgs) -> Result<()> {
    super::launch_depth()?;
    let dir = match args.dir {
        Some(d) => d,
        None => std::env::temp_dir().join(format!("spice-demo-{}", uuid::Uuid::new_v4().simple())),
    };
    if std::fs::read_dir(&dir).is_ok_and(|mut d| d.next().is_some()) {
        return Err(Error::input(format!(
            "{} exists and is not empty: name a new directory",
            dir.display()
        )));
    }
    let repo = scratch_repo(&dir)?;
    let env = Env {
        state_dir: repo.join(".git").join("spice"),
        repo_top: Some(repo.clone()),
        location: crate::store::Location::Sqlite(
            repo.join(".git").join("spice").join(crate::store::DB_FILE),
        ),
        host: super::host_name(std::env::var(super::HOST_VAR).ok().as_deref())?,
    };
    let mut store = env.open()?;
    let ids = add_tasks(&mut store)?;
    println!(
        "spice demo: a scratch repository at {} with {} tasks (\"{}\" and \"{}\" wait on \"{}\") \
         and two lanes of the scripted demo agent.\n",
        repo.display(),
        ids.len(),
        TASKS[1].0,
        TASKS[3].0,
        TASKS[0].0
    );
    let (_, fleet) = super::fleet::load(&env)?;
    let opts = super::fleet::options(&env, repo.clone(), repo.join(".agents"), true)?;
    let stop = super::fleet::stop_on_signals();
    let supervisor = {
        let stop = stop.clone();
        std::thread::spawn(move || crate::fleet::up(&fleet, &opts, stop))
    };
    let mut story = Story {
        start: Instant::now(),
        seq: 0,
        lanes: Default::default(),
        steered: None,
        acked: false,
    };
    while !supervisor.is_finished() {
        story.tell(&mut store)?;
        std::thread::sleep(Duration::from_millis(100));
        if stop.load(Ordering::SeqCst) {
            break;
        }
    }
    let reports = supervisor
        .join()
        .map_err(|_| Error::Other("the supervisor thread panicked".into()))??;
    story.tell(&mut store)?;
    for r in reports.iter().filter(|r| r.error.is_some()) {
        println!(
            "lane {}: {}",
            r.lane,
            r.error.as_deref().unwrap_or_default()
        );
    }
    summary(&repo, &mut store, &ids)?;
    failed_lanes(&reports)
}

/// A demo whose lane stopped on an error did not show the loop it promised: that is
/// a failed run, exit status and all, named in one line after the summary (issue #40),
/// in the words `fleet up --until-idle` uses.
fn failed_lanes(reports: &[crate::fleet::LaneReport]) -> Result<()> {
    match super::fleet::lanes_failed(reports) {
        Some(failed) => Err(Error::Other(format!("the demo did not finish: {failed}"))),
        None => Ok(()),
    }
}

/// `git init`, two lane files, a first commit; an identity only in this repository.
fn scratch_repo(dir: &Path) -> Result<PathBuf> {
    std::fs::create_dir_all(dir.join("lanes")).map_err(|source| Error::Io {
        context: format!("failed to create {}", dir.display()),
        source,
    })?;
    let repo = std::fs::canonicalize(dir).map_err(|source| Error::Io {
        context: format!("failed to resolve {}", dir.display()),
        source,
    })?;
    let write = |name: &str, text: &str| {
        std::fs::write(repo.join(name), text).map_err(|source| Error::Io {
            context: format!("failed to write {name}"),
            source,
        })
    };
    for lane in ["a", "b"] {
        write(
            &format!("lanes/{lane}.toml"),
            "# A lane of the scripted demo agent (no network, no API key).\nprofile = \"demo\"\n",
        )?;
    }
    write(
        "README.md",
        "# spice demo\n\nA scratch repository made by `spice demo`.\n",
    )?;
    write(".gitignore", ".agents/\n")?;
    for args in [
        &["init", "-q", "-b", "main"][..],
        &["config", "user.name", "spice demo"],
        &["config", "user.email", "demo@spice.invalid"],
        &["add", "."],
        &["commit", "-q", "-m", "A scratch repository for spice demo"],
    ] {
        let out = std::process::Command::new("git")
            .args(args)
            .current_dir(&repo)
            .output()
            .map_err(|source| Error::Io {
                context: "failed to run git (is it installed?)".into(),
                source,
            })?;
        if !out.status.success() {
            return Err(Error::Other(format!(
                "git {} failed: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
    }
    Ok(repo)
}

/// The demo's task graph: the farewell and its polish wait on the greeting.
fn add_tasks(store: &mut Store) -> Result<Vec<String>> {
    // One phase: completing it finishes the task and makes its dependents ready.
    store.set_flow(Some("demo"), &["work".to_string()])?;
    let mut ids: Vec<String> = Vec::new();
    for (i, (title, priority)) in TASKS.into_iter().enumerate() {
        let depends = if i == 1 || i == 3 {
            vec![ids[0].clone()]
        } else {
            Vec::new()
        };
        let t = store.add_task(
            NewTask {
                title: title.to_string(),
                project: Some("demo".into()),
                priority: Priority::parse(priority).map_err(Error::input)?,
                ..NewTask::default()
            },
            &depends,
        )?;
        ids.push(t.id);
    }
    Ok(ids)
}

/// Narrates the ledger and steers lane a once its agent is at work.
struct Story {
    start: Instant,
    seq: i64,
    /// Which lane holds each task, from its claim.
    lanes: std::collections::HashMap<String, String>,
    steered: Option<String>,
    acked: bool,
}

impl Story {
    fn line(&self, who: &str, what: &str) {
        println!(
            "{:>6.1}s  {who:<7} {what}",
            self.start.elapsed().as_secs_f64()
        );
    }

    fn tell(&mut self, store: &mut Store) -> Result<()> {
        for e in store.ledger_since(self.seq, 1000)? {
            self.seq = e.seq;
            let task = store.task(&e.task_id)?;
            if let Some(l) = e.detail["lane"].as_str() {
                self.lanes.insert(e.task_id.clone(), l.to_string());
            }
            let who = match self.lanes.get(&e.task_id) {
                Some(l) => format!("lane {l}"),
                None => String::new(),
            };
            let what = match e.kind.as_str() {
                "claimed" => format!("claimed {} \"{}\"", task.handle(), task.title),
                "launched" if e.detail["resume"] == true => {
                    format!("resumed the agent on {}", task.handle())
                }
                "launched" => format!(
                    "launched the demo agent on {} in its worktree",
                    task.handle()
                ),
                "phase_completed" => format!(
                    "the agent completed {} (phase {}): its branch is merged into main",
                    task.handle(),
                    e.detail["from"].as_str().unwrap_or("?"),
                ),
                "delivered" => format!("steering typed into the idle agent on {}", task.handle()),
                "exited" => format!(
                    "the agent on {} ended ({})",
                    task.handle(),
                    e.detail["how"].as_str().unwrap_or("")
                ),
                "successor" => format!("a successor session continues {}", task.handle()),
                _ => continue,
            };
            self.line(&who, &what);
        }
        if self.steered.is_none() {
            let working = store
                .lanes()?
                .into_iter()
                .any(|l| l.name == "a" && l.state == LaneState::Working);
            if working {
                let item = store.steer(
                    &Target {
                        kind: TargetKind::Lane,
                        name: "a".into(),
                    },
                    STEER,
                    crate::store::DEFAULT_TTL,
                )?;
                self.line(
                    "you",
                    &format!("spice steer lane:a \"{STEER}\"  → item {}", item.key),
                );
                self.line(
                    "",
                    "(pushed onto the stderr of the agent's running command the moment it is created)",
                );
                self.steered = Some(item.key);
            }
        }
        if let (Some(key), false) = (&self.steered, self.acked) {
            let item = store.inbox(&[], true)?.into_iter().find(|i| &i.key == key);
            if item.is_some_and(|i| i.state != ItemState::Pending) {
                self.acked = true;
                for a in store.acks_for(key)? {
                    self.line(
                        "lane a",
                        &format!(
                            "the agent answered \"{} {key}: {}\" (its transcript, line {}): item retired",
                            a.polarity.to_uppercase(),
                            a.body.trim(),
                            a.line
                        ),
                    );
                }
            }
        }
        Ok(())
    }
}

fn summary(repo: &Path, store: &mut Store, ids: &[String]) -> Result<()> {
    println!("\nWhere things are:");
    let log = std::process::Command::new("git")
        .args(["log", "--oneline", "--graph", "main"])
        .current_dir(repo)
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).to_string())
        .unwrap_or_default();
    println!("  git log main:");
    for l in log.lines() {
        println!("    {l}");
    }
    for id in ids {
        let t = store.task(id)?;
        println!("  {} \"{}\": phase {}", t.handle(), t.title, t.phase);
    }
    let state = repo.join(".git").join("spice");
    // After the `cd`, each line works as typed: the state directory is the scratch
    // repository's, and its tasks are all done (`task list` alone shows open ones).
    println!(
        "\nLook around:\n  cd {}\n  spice task list --all    the tasks and their phases\n  \
         spice task show ID       a task's ledger: claimed, launched, merged\n  \
         spice inbox --all        the steering item and its state\n  \
         spice fleet status       each lane's last state\n  \
         spice watch {}/demo-home/.claude/projects/*/   the agents' transcripts\n  \
         asciinema play {}/recordings/<session>.cast   what each agent's terminal showed",
        repo.display(),
        state.display(),
        state.display()
    );
    Ok(())
}
