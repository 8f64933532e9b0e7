//! What the desk does for a seat: each [`Request`] performed with the supervisor's
//! store, for the seat's own targets, task and fence; and the watch a long command's
//! `spice exec` keeps open for new steering.
//!
//! Invariants: the targets of every read and mark are the seat's (its session, lane
//! and worktree), never the request's; a key outside them is not marked; a gate run
//! is recorded in the seat's task's ledger under the seat's session and lane.

use super::{FleetOptions, Seat};
use crate::error::{Error, Result};
use crate::steer::desk::{Inbox, Judged, Printed, Request};
// After an inotify event, the wrapper's own settle: SQLite publishes a commit through
// shared memory, which makes no event.
use crate::steer::exec::SETTLE;
use crate::steer::wake::{listen, watch_dir, Drained, Watch};
use crate::store::{Authority, Holder, ItemState, Location, Target};
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use serde_json::Value;
use std::io::Write;
use std::os::fd::AsFd;
use std::os::unix::net::UnixStream;
use std::sync::{Arc, Mutex};

/// Connections to the store kept between requests: an agent's every command asks
/// the desk twice, and opening the store for each would cost more than the answer.
#[derive(Clone, Default)]
pub(super) struct Pool(Arc<Mutex<Vec<Box<dyn Authority>>>>);

/// Connections kept idle at most.
const POOL_MAX: usize = 4;

impl Pool {
    /// Runs `f` on a pooled connection (a new one when none is idle). A connection
    /// whose use failed is dropped, not returned: it may be the one that broke.
    fn with<T>(
        &self,
        opts: &FleetOptions,
        f: impl FnOnce(&mut dyn Authority) -> Result<T>,
    ) -> Result<T> {
        let idle = self.0.lock().unwrap_or_else(|p| p.into_inner()).pop();
        let mut store = match idle {
            Some(s) => s,
            None => opts.connect()?,
        };
        let out = f(store.as_mut());
        if out.is_ok() {
            let mut idle = self.0.lock().unwrap_or_else(|p| p.into_inner());
            if idle.len() < POOL_MAX {
                idle.push(store);
            }
        }
        out
    }
}

/// The targets a seat answers to.
fn targets(seat: &Seat) -> Vec<Target> {
    crate::store::agent_targets(
        Some(&seat.session),
        Some(&seat.lane),
        Some(seat.worktree.as_path()),
    )
}

pub(super) fn perform(
    req: &Request,
    seat: &Seat,
    opts: &FleetOptions,
    pool: &Pool,
) -> Result<Value> {
    match req {
        Request::PhaseDone { task, json } => phase_done(task, *json, seat, opts).and_then(value),
        Request::Inbox { all } => pool.with(opts, |s| inbox(s, seat, *all)).and_then(value),
        Request::Shown { keys } => pool.with(opts, |s| shown(s, seat, keys)).and_then(value),
        Request::GateRun { detail } => pool
            .with(opts, |s| gate_run(s, seat, detail.clone()))
            .and_then(value),
        Request::PreCommit { index } => {
            pre_commit(seat, index.as_deref(), opts, pool).and_then(value)
        }
        Request::Watch => Err(Error::Other("a watch is answered on its own".into())),
    }
}

/// An answer as the JSON value sent back.
fn value<T: serde::Serialize>(answer: T) -> Result<Value> {
    serde_json::to_value(answer).map_err(|e| Error::Other(format!("the desk's answer: {e}")))
}

fn inbox(store: &mut dyn Authority, seat: &Seat, all: bool) -> Result<Inbox> {
    let items = store.inbox(&targets(seat), all)?;
    let mut replies = std::collections::BTreeMap::new();
    for i in items.iter().filter(|i| i.state != ItemState::Pending) {
        replies.insert(i.key.clone(), crate::steer::desk::reply(store, i)?);
    }
    Ok(Inbox {
        items,
        now: store.now()?,
        replies,
    })
}

fn shown(store: &mut dyn Authority, seat: &Seat, keys: &[String]) -> Result<()> {
    let mine: Vec<String> = store
        .inbox(&targets(seat), false)?
        .into_iter()
        .map(|i| i.key)
        .filter(|k| keys.contains(k))
        .collect();
    if mine.is_empty() {
        return Ok(());
    }
    store.mark_shown(&mine)
}

fn gate_run(store: &mut dyn Authority, seat: &Seat, mut detail: Value) -> Result<()> {
    if !detail.is_object() {
        return Err(Error::input("a gate run's detail must be a JSON object"));
    }
    detail["lane"] = seat.lane.clone().into();
    store.note(&seat.task, "gate_run", &seat.session, detail)
}

/// Judges the commit the seat's agent is about to make, as its supervisor: under the
/// rules of the lane's base, the repository's checks in the lane's sandbox, and the
/// run recorded in the task's ledger (`gate::agent`).
fn pre_commit(
    seat: &Seat,
    index: Option<&str>,
    opts: &FleetOptions,
    pool: &Pool,
) -> Result<Judged> {
    let (task, now) = pool.with(opts, |s| Ok((s.task(&seat.task)?, s.now()?)))?;
    let git = crate::git::Git::open(&seat.repo, crate::git::Runner::new(opts.vars.clone()))?;
    let common = git.common_dir().to_path_buf();
    let branch = crate::git::task_branch(&task.handle());
    let prepared = seat.hooks.prepare()?;
    let gate_opts = crate::gate::Options {
        actor: seat.session.clone(),
        phase: Some(task.phase.clone()),
        now,
        confine: prepared.as_ref().map(|p| p.entry()),
        sandbox_env: seat.hooks.env.clone(),
        ..Default::default()
    };
    let commit = crate::gate::agent::Commit {
        index,
        ..commit_of(seat, &common, &branch)
    };
    let report = crate::gate::agent::pre_commit(&commit, &gate_opts)
        .map_err(|e| Error::Other(format!("the gate could not judge the commit: {e}")))?;
    let repo = crate::gate::scan::Repo {
        root: seat.worktree.clone(),
        common_dir: common,
        pin: None,
        index: None,
    };
    let mut detail = report.ledger_detail(&repo);
    detail["hook"] = "pre-commit".into();
    detail["lane"] = seat.lane.clone().into();
    pool.with(opts, |s| {
        s.note(&seat.task, "gate_run", &seat.session, detail)
    })?;
    Ok(Judged {
        clean: report.clean(),
        text: crate::gate::render_text(&report),
        problems: report.findings.len() + report.could_not_run.len(),
    })
}

/// The commit a seat's agent makes, as its supervisor knows it.
fn commit_of<'a>(
    seat: &'a Seat,
    common: &'a std::path::Path,
    branch: &'a str,
) -> crate::gate::agent::Commit<'a> {
    crate::gate::agent::Commit {
        worktree: &seat.worktree,
        common,
        base: &seat.base,
        task: &seat.task,
        branch,
        index: None,
    }
}

/// Completes the seat's task's phase, as the seat's session under its fence.
fn phase_done(task: &str, json: bool, seat: &Seat, opts: &FleetOptions) -> Result<Printed> {
    let mut store = opts.connect()?;
    let task = store.task(task)?;
    if task.id != seat.task {
        return Err(Error::input(format!(
            "lane {} may complete only its own task's phase ({}), not {}",
            seat.lane,
            seat.task,
            task.handle()
        )));
    }
    let holder = Holder::fenced(seat.session.clone(), seat.fence);
    let runner = crate::git::Runner::new(opts.vars.clone());
    // The branch's last commit releases the latches its gate run held back, before
    // the phase gate reads them.
    let common = crate::git::Git::open(&seat.repo, runner.clone())?
        .common_dir()
        .to_path_buf();
    let branch = crate::git::task_branch(&task.handle());
    let commit = commit_of(seat, &common, &branch);
    if let Err(e) = crate::gate::agent::settle(&commit) {
        tracing::warn!("lane {}: the gate's held-back releases: {e}", seat.lane);
    }
    let lanes = opts.repo.join("lanes");
    // The stage hooks run in the agent's files, so in the agent's lane's sandbox.
    let prepared = seat.hooks.prepare()?;
    let landed = crate::phase_done::complete_phase(
        &mut *store,
        &crate::phase_done::PhaseDone {
            task: &task.id,
            holder: Some(&holder),
            runner: &runner,
            lanes_dir: Some(&lanes),
            home: Some(&opts.state_dir),
            repo: Some(&seat.repo),
            confine: prepared.as_ref().map(|p| p.entry()),
            sandbox_env: &seat.hooks.env,
        },
    )?;
    let (out, err) = landed.report(json);
    Ok(Printed { out, err })
}

/// Keeps a watch: a byte now (whatever was committed before made no event) and one
/// per change of the store, already visible when it is written, until the caller
/// hangs up or the watch ends (the caller then reads end of stream and polls).
pub(super) fn watch(mut conn: UnixStream, opts: &FleetOptions) {
    let watch = match &opts.location {
        Location::Postgres(url) => listen(url).map(Watch::Listener),
        Location::Sqlite(_) => watch_dir(&opts.state_dir).map(Watch::Dir),
    };
    let Some(mut watch) = watch else {
        return;
    };
    if conn.write_all(&[1]).is_err() {
        return;
    }
    loop {
        let (changed, hung_up) = {
            let mut fds = [
                PollFd::new(watch.fd(), PollFlags::POLLIN),
                PollFd::new(conn.as_fd(), PollFlags::POLLIN),
            ];
            match poll(&mut fds, PollTimeout::NONE) {
                Ok(_) => {
                    let ready = |f: &PollFd| f.revents().is_some_and(|r| !r.is_empty());
                    (ready(&fds[0]), ready(&fds[1]))
                }
                Err(nix::errno::Errno::EINTR) => (false, false),
                Err(_) => return,
            }
        };
        // The caller never writes after its request: readable means it is gone.
        if hung_up {
            return;
        }
        if changed {
            match watch.drain() {
                Drained::Settle => std::thread::sleep(SETTLE),
                Drained::Visible => {}
                Drained::Gone => return,
            }
            if conn.write_all(&[1]).is_err() {
                return;
            }
        }
    }
}
