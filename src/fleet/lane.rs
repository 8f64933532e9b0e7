//! One lane's loop: allocate → worktree → launch → follow → renew → next.
//!
//! Invariants:
//! - The claimant of a claim is the session that works on it; a session that ends
//!   with the task still claimed is followed by a successor that the claim passes to
//!   by renewal (never by release), up to [`MAX_SUCCESSORS`] times.
//! - Renewal is fenced: if it fails, the claim was taken over, and the agent is
//!   stopped after a grace period; its worktree is kept.
//! - ACKs are read from the agent's own transcript, with the checkpoint written in the
//!   same transaction (`transcript::acks::scan`).
//! - Git moves only here at claim time (`prepare_worktree`); launching moves nothing.

use super::{brief, FleetOptions, LaneReport};
use crate::agent::{Agent, LaunchSpec};
use crate::alloc::{next, Filter};
use crate::clock::SystemClock;
use crate::config::fleet::LaneConfig;
use crate::config::profile::expand_argv;
use crate::config::profile::{Format, Placeholder};
use crate::error::{Error, Result};
use crate::store::{Claim, ClaimRequest, Holder, Store};
use crate::transcript::discover::claude_slug;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How many successor sessions a claim gets before the lane holds it.
pub const MAX_SUCCESSORS: u32 = 3;
const TICK: Duration = Duration::from_millis(250);
const GRACE: Duration = Duration::from_secs(5);

pub fn run(lane: &LaneConfig, opts: &FleetOptions, stop: &Arc<AtomicBool>) -> LaneReport {
    let mut report = LaneReport {
        lane: lane.name.clone(),
        ..LaneReport::default()
    };
    if let Err(e) = run_inner(lane, opts, stop, &mut report) {
        report.error = Some(e.to_string());
    }
    report
}

fn run_inner(
    lane: &LaneConfig,
    opts: &FleetOptions,
    stop: &Arc<AtomicBool>,
    report: &mut LaneReport,
) -> Result<()> {
    let program = lane
        .program
        .clone()
        .map_err(|e| Error::input(e.to_string()))?;
    let mut store = Store::open_dir(&opts.state_dir, Arc::new(SystemClock))?;
    let git = crate::git::Git::open(&opts.repo, crate::git::Runner::new(opts.vars.clone()))?;
    let filter = Filter {
        projects: lane.lane.projects.clone(),
        phases: lane.lane.phases.clone(),
    };
    let base = lane.lane.base.clone().unwrap_or_else(|| opts.base.clone());
    while !stop.load(Ordering::SeqCst) {
        let session = uuid::Uuid::new_v4().to_string();
        let req = ClaimRequest {
            claimant: session.clone(),
            lane: Some(lane.name.clone()),
            worktree: None,
            lease: lane.lease,
        };
        let Some(claim) = next::claim_next(&mut store, &req, &filter)? else {
            if opts.until_idle {
                return Ok(());
            }
            std::thread::sleep(opts.poll);
            continue;
        };
        report.claimed.push(claim.handle.clone());
        let branch = crate::git::task_branch(&claim.handle);
        let root = lane
            .lane
            .worktrees
            .clone()
            .unwrap_or_else(|| opts.state_dir.join("worktrees").join(&lane.name));
        let path = root.join(&claim.handle);
        std::fs::create_dir_all(&root).map_err(|source| Error::Io {
            context: format!("failed to create {}", root.display()),
            source,
        })?;
        let wt = git.prepare_worktree(&base, &branch, &path)?;
        let holder = Holder::fenced(session.clone(), claim.fence);
        store.set_claim_worktree(&claim.task_id, &holder, &wt.path.display().to_string())?;
        work_on(
            lane, opts, stop, &mut store, &program, claim, session, &wt.path, report,
        )?;
    }
    Ok(())
}

/// Runs sessions on one claimed task until it leaves our hands.
#[allow(clippy::too_many_arguments)]
fn work_on(
    lane: &LaneConfig,
    opts: &FleetOptions,
    stop: &Arc<AtomicBool>,
    store: &mut Store,
    program: &Path,
    claim: Claim,
    mut session: String,
    worktree: &Path,
    report: &mut LaneReport,
) -> Result<()> {
    let mut fence = claim.fence;
    let mut predecessor: Option<String> = None;
    // The conversation a resumed session continues: the first session's, since a
    // resume keeps writing the conversation it resumes.
    let conversation = session.clone();
    for attempt in 0..=MAX_SUCCESSORS {
        let task = store.task(&claim.task_id)?;
        let resume = attempt > 0 && lane.profile.resume.is_some();
        let text = brief::compose(&brief::BriefInput {
            task: &task,
            lane: &lane.name,
            session: &session,
            spice: &opts.spice.display().to_string(),
            predecessor: predecessor.as_deref(),
        });
        let briefs = opts.state_dir.join("briefs");
        std::fs::create_dir_all(&briefs).map_err(|source| Error::Io {
            context: "failed to create briefs".into(),
            source,
        })?;
        let brief_file = briefs.join(format!("{session}.md"));
        std::fs::write(&brief_file, &text).map_err(|source| Error::Io {
            context: format!("failed to write {}", brief_file.display()),
            source,
        })?;
        let value = |p: Placeholder| -> Option<String> {
            Some(match p {
                Placeholder::SessionId => {
                    if resume {
                        conversation.clone()
                    } else {
                        session.clone()
                    }
                }
                Placeholder::Brief => text.clone(),
                Placeholder::BriefFile => brief_file.display().to_string(),
                Placeholder::Worktree => worktree.display().to_string(),
                Placeholder::Model => lane.lane.model.clone()?,
                Placeholder::Task => task.id.clone(),
                Placeholder::Lane => lane.name.clone(),
                Placeholder::Spice => opts.spice.display().to_string(),
                Placeholder::Home => opts.home.display().to_string(),
                Placeholder::CwdSlug => claude_slug(worktree),
            })
        };
        let template = if resume {
            lane.profile.resume.as_ref().expect("checked")
        } else {
            &lane.profile.command
        };
        let mut argv = expand_argv(template, &value);
        if argv
            .first()
            .is_some_and(|a| a == "{spice}" || !a.contains('/'))
        {
            argv[0] = program.display().to_string();
        }
        let mut env: Vec<(String, String)> = vec![
            ("PATH".into(), opts.path.clone()),
            ("HOME".into(), opts.home.display().to_string()),
            ("TERM".into(), "xterm-256color".into()),
            ("SPICE_HOME".into(), opts.state_dir.display().to_string()),
            ("SPICE_LANE".into(), lane.name.clone()),
            ("SPICE_SESSION".into(), session.clone()),
            ("SPICE_TASK".into(), task.id.clone()),
            ("BASH_ENV".into(), opts.bash_env.display().to_string()),
        ];
        env.extend(lane.profile.env.iter().map(|(k, v)| (k.clone(), v.clone())));
        env.extend(
            lane.lane
                .env
                .iter()
                .map(|(k, v)| (k.get_ref().clone(), v.clone())),
        );
        let recordings = opts.state_dir.join("recordings");
        let _ = std::fs::create_dir_all(&recordings);
        let mut agent = Agent::spawn(&LaunchSpec {
            argv,
            cwd: worktree.to_path_buf(),
            env,
            cols: 120,
            rows: 40,
            recording: Some(recordings.join(format!("{session}.cast"))),
        })?;
        report.sessions.push(session.clone());
        let transcript = locate(lane, &value);
        let mut scanner = transcript
            .as_deref()
            .map(crate::transcript::acks::Scanner::new);
        let mut last_renew = Instant::now();
        let lost = loop {
            if let Some(sc) = scanner
                .as_mut()
                .filter(|_| transcript.as_ref().is_some_and(|t| t.exists()))
            {
                let _ = sc.scan(store);
            }
            if agent.try_wait()?.is_some() {
                break false;
            }
            if stop.load(Ordering::SeqCst) {
                agent.stop(GRACE)?;
                return Ok(());
            }
            if last_renew.elapsed() >= lane.renew {
                last_renew = Instant::now();
                if store
                    .renew(
                        &task.id,
                        &Holder::fenced(session.clone(), fence),
                        None,
                        lane.lease,
                    )
                    .is_err()
                {
                    agent.stop(GRACE)?;
                    break true;
                }
            }
            std::thread::sleep(TICK);
        };
        if let Some(sc) = scanner
            .as_mut()
            .filter(|_| transcript.as_ref().is_some_and(|t| t.exists()))
        {
            sc.scan(store)?;
        }
        if lost {
            report.error = Some(format!(
                "lost the claim on {} to another claimant; worktree kept",
                task.handle()
            ));
            return Ok(());
        }
        match store.claim_on(&task.id)? {
            Some(c) if c.claimant == session => {
                // Ended with the task still ours: a successor continues the claim.
                let next_session = uuid::Uuid::new_v4().to_string();
                let passed = store.renew(
                    &task.id,
                    &Holder::fenced(session.clone(), fence),
                    Some(&next_session),
                    lane.lease,
                )?;
                fence = passed.fence;
                predecessor = Some(session.clone());
                session = next_session;
            }
            _ => return Ok(()),
        }
    }
    report.error = Some(format!(
        "{}: {MAX_SUCCESSORS} successor sessions ended without finishing; lane held",
        claim.handle
    ));
    Ok(())
}

/// The transcript file the profile says the session writes, if it names one exactly.
fn locate(lane: &LaneConfig, value: &dyn Fn(Placeholder) -> Option<String>) -> Option<PathBuf> {
    let t = lane.profile.transcript.as_ref()?;
    if t.format == Format::Codex {
        return None; // rollouts are named by time: found by scanning, not yet wired
    }
    let dir = t.dir.expand(value)?;
    let name = t.glob.expand(value)?;
    Some(PathBuf::from(dir).join(name))
}
