//! One lane's loop: reconcile → (hold) → allocate → worktree → launch → follow →
//! renew → next.
//!
//! Invariants:
//! - The claimant of a claim is the session that works on it. A session that ends
//!   with the task still claimed is followed by a successor that the claim passes to
//!   by renewal (`renew --successor`), never by release; the successor resumes the same
//!   conversation when the profile can.
//! - Three deaths within [`CRASH_WINDOW`] hold the lane, with a hold that doubles each
//!   time (`fleet::crash_loop`); the operator can lift it
//!   (`spice fleet lift`). The claim is renewed while held.
//! - Renewal is fenced. A claim taken over by someone else is noticed on the next
//!   tick: the agent is told through a steering item and stopped after
//!   [`LOST_GRACE`]; its worktree is kept.
//! - A claim released by its own session (phase completed) ends the session once its
//!   turn has ended (or after [`FINISH_GRACE`]): an interactive agent never exits by
//!   itself.
//! - The lane's state comes from the agent's transcript, not its screen: events mean
//!   working, a turn end (or the agent's text followed by [`QUIET_TURN_END`] of
//!   silence) means waiting for input, silence for [`STALL_AFTER`] means
//!   stalled; no transcript at all `start_timeout` after launch is reported with the
//!   words the agent's screen ends with. ACKs are read from the same transcript, with
//!   the checkpoint written in the same transaction (`transcript::acks::Scanner`).
//! - Steering reaches a working agent through `spice exec` on its commands' stderr
//!   (and the Claude Code hook); an agent waiting for input gets pending items typed
//!   into its PTY as one bracketed paste, each item at most once per session; a
//!   successor gets them at the top of its brief.
//! - A headless agent (one process per turn) that exits cleanly, having written to
//!   its transcript, has ended its turn, not died: its session waits, renewing the claim, until steering arrives, then
//!   runs the next turn as a resume of the same conversation with the items at the
//!   top of its brief. Same session, same claimant: no successor, no restart counted.
//! - Git moves only at claim time (`launch::worktree`); launching moves nothing.
//! - The lane's row in the store (`lanes`) is rewritten whenever what it reports
//!   changes, and with the agent's pid and start time, so the next supervisor can make
//!   sure an agent of a killed supervisor is gone before starting its successor.

mod bed;
mod budget;
mod crash_hold;
mod drive;
mod idle;
mod interrupted;
mod lineage;
mod machine;
mod pool;
mod prepare;
mod publish;
mod resume_here;
mod runner;
mod running;
mod session;
mod stages;

use machine::{Backoff, BetweenNext, End, Holding, Next, Renewer};
use prepare::Prepared;
pub use stages::{bases, check_beds, check_hooks, release_claims, unborn_bases, Released};

use super::activity::Activity;
use super::crash_loop::CrashLoop;
use super::{launch, FleetOptions, LaneReport};
use crate::agent::inflight;
use crate::alloc::{next, Filter};
use crate::config::fleet::LaneConfig;
use crate::config::profile::Mode;
use crate::error::{Error, Result};
use crate::stage::config::Stage;
use crate::store::{Authority, Claim, ClaimRequest, Holder, LaneRow, LaneState};
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const TICK: Duration = Duration::from_millis(250);
/// How often a lane whose store is out of reach asks again.
const OUTAGE_RETRY: Duration = Duration::from_secs(1);
/// How long a stopped agent gets between SIGTERM and SIGKILL.
const GRACE: Duration = Duration::from_secs(5);
/// How long an agent whose claim was taken over may go on after being told.
pub const LOST_GRACE: Duration = Duration::from_secs(10);
/// How long an agent may go on once its own session released the claim, if its
/// transcript never says its turn ended.
pub const FINISH_GRACE: Duration = Duration::from_secs(30);
/// Silence in the transcript, mid-turn, after which a lane is reported stalled
/// (unless the lane's `stall_after` says otherwise).
pub use crate::config::lane::STALL_AFTER;
/// Silence after the agent's text, with no stated turn end, after which its turn
/// counts as ended (Claude Code sometimes writes neither `end_turn` nor a turn
/// duration). A tool call that follows text comes within moments.
pub const QUIET_TURN_END: Duration = Duration::from_secs(5);

pub fn run(
    cfg: &LaneConfig,
    opts: &FleetOptions,
    stop: &Arc<AtomicBool>,
    port: &super::attach::Port,
    activity: &Activity,
) -> LaneReport {
    idle::share_arenas();
    let mut report = LaneReport {
        lane: cfg.name.clone(),
        ..LaneReport::default()
    };
    let store = match opts.connect() {
        Ok(s) => s,
        Err(e) => {
            report.error = Some(e.to_string());
            report.failed = true;
            activity.idle(u64::MAX);
            return report;
        }
    };
    let mut lane = Lane {
        cfg,
        opts,
        stop,
        store,
        row: LaneRow {
            name: cfg.name.clone(),
            profile: Some(cfg.profile.name.clone()),
            ..LaneRow::default()
        },
        written: None,
        written_at: Instant::now(),
        report,
        crashes: CrashLoop::default(),
        base: opts.base.clone(),
        port,
        activity,
        busy: true,
        backoff: Backoff::new(prepare::BACKOFF_FIRST, prepare::BACKOFF_MAX),
        repo: opts.repo.clone(),
        halted: false,
        owned: opts.supervisor.is_none(),
        outage: false,
    };
    loop {
        match lane.run() {
            Ok(()) => break,
            // The store out of reach (a server restarting, the network): the lane waits
            // for it and runs again, continuing its claims with successor sessions.
            Err(e) if e.is_unreachable() && !lane.stopping() => lane.outage_wait(&e),
            Err(e) => {
                lane.row.last_error = Some(e.to_string());
                lane.report.error = Some(e.to_string());
                lane.report.failed = true;
                break;
            }
        }
    }
    // The row and the reminders of a lane another supervisor runs are not this one's.
    // The fenced write of the stopped row comes first: a supervisor another one
    // superseded meanwhile learns it there and leaves the reminders to the new runner.
    if lane.owned {
        lane.row.state = LaneState::Stopped;
        lane.row.pid = None;
        lane.row.pid_start = None;
        let _ = lane.publish(true);
    }
    if lane.owned {
        // No reminder of the conscience stays pending for an agent that will not see it.
        let _ = lane.store.expire_reminders(
            &cfg.name,
            "the supervisor stopped before the agent answered",
        );
    }
    std::mem::take(&mut lane.report)
}

struct Lane<'a> {
    cfg: &'a LaneConfig,
    opts: &'a FleetOptions,
    stop: &'a AtomicBool,
    store: Box<dyn Authority>,
    row: LaneRow,
    written: Option<LaneRow>,
    written_at: Instant,
    report: LaneReport,
    crashes: CrashLoop,
    /// The branch task branches start from and merge into.
    base: String,
    /// Where `fleet attach` finds the current agent's terminal.
    port: &'a super::attach::Port,
    /// Whether the fleet's `--until-idle` run may end (see `fleet::activity`).
    activity: &'a Activity,
    /// Whether this lane counts as busy there (it starts busy).
    busy: bool,
    /// The pause after a worktree could not be prepared, or a stage hook refused the
    /// claim (doubling).
    backoff: Backoff,
    /// The lane's repository, whose `base` carries the stage hooks.
    repo: PathBuf,
    /// The lane ends as on `fleet down`, its claim kept: the operator stopped it at its
    /// budget (`spice budget stop`), or another supervisor runs it now (see `publish`).
    halted: bool,
    /// This supervisor runs the lane (took it, see `fleet::hosts`), so its row is ours
    /// to write.
    owned: bool,
    /// The store is out of reach mid-session (said once; see `through_outage`).
    outage: bool,
}

impl Lane<'_> {
    /// The authority's clock, the one leases are judged by; the supervisor's own clock
    /// when the authority cannot be asked (a dropped connection: for stamps and
    /// reports only, the store judges every lease itself).
    fn now(&mut self) -> crate::clock::Micros {
        match self.store.now() {
            Ok(now) => now,
            Err(_) => self.opts.clock.now(),
        }
    }
}

/// One claim being worked on: the task, its worktree and the holding.
struct Work {
    claim: Claim,
    session: String,
    fence: i64,
    worktree: PathBuf,
    /// Turns this session has finished (headless: one process per turn).
    turns: u32,
    /// Steering keys this session was given at the top of a brief: a headless session
    /// starts a turn for an item once, so an item its agent never answers cannot
    /// start turn after turn.
    briefed: HashSet<String>,
}

impl Work {
    /// A session's first turn on `claim`, held with `fence`.
    /// How its current session holds the claim.
    fn holder(&self) -> Holder {
        Holder::fenced(self.session.clone(), self.fence)
    }

    fn new(claim: Claim, session: String, fence: i64, worktree: PathBuf) -> Work {
        Work {
            claim,
            session,
            fence,
            worktree,
            turns: 0,
            briefed: HashSet::new(),
        }
    }
}

/// What became of working on a claim.
#[derive(Debug, Clone)]
enum Worked {
    /// The supervisor stops (the claim stays leased for a successor).
    Done,
    /// Nobody holds it any more (its session completed the phase, or someone
    /// released it by hand), as its last session and fence held it.
    Finished(Holder),
    /// Someone else holds it now: the worktree is kept as it is.
    Lost(Holder),
    /// A stage hook refused it before an agent started: handed back, the lane backs off.
    HandedBack,
}

/// What became of a headless session between two turns.
enum Between {
    /// Steering is waiting: the next turn is due.
    Next,
    /// The claim left the session's hands (released or taken over).
    Over,
    /// The supervisor is stopping.
    Stopping,
}

impl Drop for Lane<'_> {
    /// A lane that ended (or panicked) makes no more work for the others.
    fn drop(&mut self) {
        if self.busy {
            self.activity.idle(u64::MAX);
        }
    }
}

impl Lane<'_> {
    fn stopping(&self) -> bool {
        self.halted || self.stop.load(Ordering::SeqCst)
    }

    fn run(&mut self) -> Result<()> {
        // Only once this supervisor runs the lane (see `runner`).
        let Some(here) = self.take_here()? else {
            return Ok(());
        };
        // A previous supervisor's lane: its agent must be gone before anything else
        // starts, and what it reported carries over. Read before this supervisor's
        // first write replaces it.
        let previous = self.store.lane(&self.cfg.name)?;
        if let Some(prev) = &previous {
            self.row.restarts = prev.restarts;
            if here {
                self.row.pid = prev.pid;
                self.row.pid_start = prev.pid_start;
            }
        }
        self.publish(true)?;
        if let (Some(prev), true) = (&previous, here) {
            if let (Some(pid), Some(start)) = (prev.pid, prev.pid_start) {
                super::reap_orphan(pid, start);
            }
        }
        self.row.pid = None;
        self.row.pid_start = None;
        // A lane whose agent binary is missing does not run (`fleet up` said so at
        // its start); that is not a failure of the run.
        let program = match self.cfg.program.clone() {
            Ok(p) => p,
            Err(e) => {
                self.row.last_error = Some(e.to_string());
                self.report.error = Some(e.to_string());
                return Ok(());
            }
        };
        // The lane's own repository, if it names one (relative to the fleet's).
        let repo = match &self.cfg.lane.repo {
            Some(r) => self.opts.repo.join(r),
            None => self.opts.repo.clone(),
        };
        let git = crate::git::Git::open(&repo, crate::git::Runner::new(self.opts.vars.clone()))?;
        self.base = base_of(self.cfg, self.opts, &git, &repo)?;
        self.repo = repo;
        let inherited: Vec<Claim> = self
            .store
            .claims()?
            .into_iter()
            .filter(|c| c.lane.as_deref() == Some(self.cfg.name.as_str()))
            .collect();
        for claim in inherited {
            if self.stopping() {
                return Ok(());
            }
            // The ledger, not the row, says what the claim's sessions carried.
            let lineage::Carried {
                lineage,
                conversation,
                transcript,
            } = lineage::carried(&self.store.ledger(&claim.task_id)?, &claim.claimant);
            let session = uuid::Uuid::new_v4().to_string();
            let passed = self.store.renew(
                &claim.task_id,
                &Holder::fenced(claim.claimant.clone(), claim.fence),
                Some(&session),
                self.cfg.lease,
            )?;
            let holder = Holder::fenced(session.clone(), passed.fence);
            let worktree = match &claim.worktree {
                Some(w) if Path::new(w).is_dir() => PathBuf::from(w),
                _ => match self.prepare(&git, &claim, &holder)? {
                    Prepared::Ready(w) => {
                        // A worktree made afresh is a claim's start: its on_claim runs.
                        if let Some(why) = self.stage(Stage::OnClaim, &claim, &holder, &w)? {
                            self.hand_back(&claim, &holder, Some(&w), why)?;
                            continue;
                        }
                        w
                    }
                    Prepared::Over => continue,
                    Prepared::Failed(e) => {
                        self.could_not_prepare(&claim, &holder, e)?;
                        continue;
                    }
                },
            };
            self.report.claimed.push(claim.handle.clone());
            self.row.conversation = conversation;
            self.row.transcript = transcript;
            if self.row.transcript.is_none() {
                self.recover_conversation(&claim, &worktree)?;
            }
            self.row.lineage = lineage;
            let work = Work::new(claim, session, passed.fence, worktree);
            self.work_then_recycle(&git, &program, work)?;
            self.activity.progressed();
        }
        let filter = Filter {
            projects: self.cfg.lane.projects.clone(),
            phases: self.cfg.lane.phases.clone(),
        };
        while !self.stopping() {
            let session = uuid::Uuid::new_v4().to_string();
            let req = ClaimRequest {
                claimant: session.clone(),
                lane: Some(self.cfg.name.clone()),
                worktree: None,
                lease: self.cfg.lease,
            };
            self.set_busy(true);
            let seen = self.activity.generation();
            // Read before the look: a change made while it ranks ends the wait at once.
            let graph = self.store.generation();
            let Some(claim) = next::claim_next(&mut *self.store, &req, &filter)? else {
                self.row.state = LaneState::Idle;
                self.row.session = None;
                self.row.task_id = None;
                self.publish(false)?;
                self.busy = false;
                // With --until-idle, a lane ends only once no lane can make work for
                // it any more (a review lane waits for the todo lane).
                if self.activity.idle(seen) && self.opts.until_idle {
                    return Ok(());
                }
                self.idle_wait(graph);
                continue;
            };
            self.report.claimed.push(claim.handle.clone());
            let holder = Holder::fenced(session.clone(), claim.fence);
            // `None`: the claim was handed back (no worktree, or the repository's
            // on_claim refused it); the lane backs off before its next claim.
            let ready = match self.prepare(&git, &claim, &holder)? {
                Prepared::Ready(w) => match self.stage(Stage::OnClaim, &claim, &holder, &w)? {
                    None => Some(w),
                    Some(why) => {
                        self.hand_back(&claim, &holder, Some(&w), why)?;
                        None
                    }
                },
                Prepared::Over => {
                    self.activity.progressed();
                    continue;
                }
                Prepared::Failed(e) => {
                    self.could_not_prepare(&claim, &holder, e)?;
                    None
                }
            };
            let Some(worktree) = ready else {
                self.activity.progressed();
                if self.opts.until_idle {
                    return Ok(());
                }
                let pause = self.backoff.failed();
                self.sleep(pause);
                continue;
            };
            self.row.lineage.clear();
            self.row.conversation = None;
            self.row.transcript = None;
            let fence = claim.fence;
            let work = Work::new(claim, session, fence, worktree);
            let worked = self.work_then_recycle(&git, &program, work)?;
            self.activity.progressed();
            if matches!(worked, Worked::HandedBack) {
                if self.opts.until_idle {
                    return Ok(());
                }
                let pause = self.backoff.failed();
                self.sleep(pause);
            }
        }
        Ok(())
    }

    /// Counts this lane as busy (or not) in the fleet's [`Activity`].
    fn set_busy(&mut self, busy: bool) {
        if busy && !self.busy {
            self.activity.busy();
        }
        self.busy = busy;
    }

    /// A worktree could not be prepared for `claim`: nothing was started, so the task
    /// is handed back (rather than left to go stale), and the lane says why.
    fn could_not_prepare(&mut self, claim: &Claim, holder: &Holder, e: Error) -> Result<()> {
        let why = format!("could not prepare a worktree for {}: {e}", claim.handle);
        self.hand_back(claim, holder, None, why)
    }

    /// Hands `claim` back before any agent worked on it (the lane backs off before
    /// its next claim; with `--until-idle` it ends, its run failed) and says `why`.
    /// With its `worktree` prepared, the repository's on_release runs there first, so
    /// what an on_claim began is undone.
    fn hand_back(
        &mut self,
        claim: &Claim,
        holder: &Holder,
        worktree: Option<&Path>,
        why: String,
    ) -> Result<()> {
        let mut why = why;
        if let Some(wt) = worktree {
            if let Some(also) = self.stage(Stage::OnRelease, claim, holder, wt)? {
                why.push_str(&format!("; then {also}"));
            }
        }
        let released = self.store.release(&claim.task_id, holder).is_ok();
        self.row.last_error = Some(match (self.opts.until_idle, released) {
            // The run ends without trying again: the task it leaves undone makes it
            // a failed run (`fleet up --until-idle` exits non-zero naming it).
            (true, true) => {
                self.report.failed = true;
                format!("{why}; released {}, left pending", claim.handle)
            }
            // The store out of reach (a server restarting): the claim is still ours,
            // and a successor takes it up; nothing is left undone by this lane.
            (true, false) => format!(
                "{why}; {} stays claimed (its release did not reach the store)",
                claim.handle
            ),
            (false, _) => format!(
                "{why}; released {}, next try in {}s",
                claim.handle,
                self.backoff.next().as_secs()
            ),
        });
        self.report.error = self.row.last_error.clone();
        self.publish(false)
    }

    /// Runs sessions on one claimed task until it leaves our hands or the supervisor
    /// stops; what follows each session is `machine::after`'s decision.
    fn work_on(&mut self, program: &Path, mut work: Work) -> Result<Worked> {
        self.row.task_id = Some(work.claim.task_id.clone());
        loop {
            self.row.session = Some(work.session.clone());
            // Each session's first launch passes the repository's on_launch first; a
            // refusal is a launch that failed: the claim is handed back.
            if work.turns == 0 {
                let holder = Holder::fenced(work.session.clone(), work.fence);
                if let Some(why) =
                    self.stage(Stage::OnLaunch, &work.claim, &holder, &work.worktree)?
                {
                    let worktree = work.worktree.clone();
                    self.hand_back(&work.claim, &holder, Some(&worktree), why)?;
                    self.row.lineage.clear();
                    return Ok(Worked::HandedBack);
                }
                self.backoff.succeeded();
            }
            let end = self.session(program, &mut work)?;
            let handle = work.claim.handle.clone();
            let ours = matches!(end, End::Exited(..))
                && self.holding(&work.claim.task_id, &work.session)? == Holding::Ours;
            let headless = self.cfg.profile.mode == Mode::Headless;
            let next = machine::after(&end, ours, headless, &mut self.crashes, Instant::now());
            // A session no successor follows leaves no record of interrupted commands.
            let last = |lane: &mut Self| {
                inflight::clear(&lane.opts.state_dir, &work.session);
                lane.row.lineage.clear();
            };
            let how = match (next, end) {
                (Next::Done, End::Stopping) => return Ok(Worked::Done),
                (Next::Done, End::Lost(by)) => {
                    last(self);
                    self.row.last_error = Some(format!(
                        "lost the claim on {handle} to {by}; the agent was told and stopped, \
                         worktree kept"
                    ));
                    self.report.error = self.row.last_error.clone();
                    return Ok(Worked::Lost(work.holder()));
                }
                (Next::Done, End::Finished) => {
                    last(self);
                    return Ok(Worked::Finished(work.holder()));
                }
                (Next::Done, _) => {
                    last(self);
                    return self.released_or_done(&work);
                }
                // A headless agent ends each turn by exiting cleanly: the session
                // waits, like an interactive agent at its prompt, for steering to start
                // its next turn.
                (Next::BetweenTurns, _) => match self.between_turns(&work)? {
                    Between::Next => {
                        work.turns += 1;
                        continue;
                    }
                    Between::Over => {
                        last(self);
                        return self.released_or_done(&work);
                    }
                    Between::Stopping => return Ok(Worked::Done),
                },
                (Next::Hold(hold), End::Exited(how, _)) => {
                    self.row.last_error =
                        Some(format!("the agent on {handle} {how} before finishing"));
                    if self.hold(&work, hold)?.is_some() {
                        // Taken over while held (the row says so): the lane goes on
                        // with other work.
                        last(self);
                        self.report.error = self.row.last_error.clone();
                        return Ok(Worked::Lost(work.holder()));
                    }
                    how
                }
                (_, End::Exited(how, _)) => how,
                (_, _) => unreachable!("only an exit is followed by a successor"),
            };
            self.row.last_error = Some(format!("the agent on {handle} {how} before finishing"));
            if self.stopping() {
                return Ok(Worked::Done);
            }
            // The task is still ours: a successor continues the claim.
            let next_session = uuid::Uuid::new_v4().to_string();
            let passed = self.store.renew(
                &work.claim.task_id,
                &Holder::fenced(work.session.clone(), work.fence),
                Some(&next_session),
                self.cfg.lease,
            )?;
            self.row.lineage.push(work.session.clone());
            self.row.restarts += 1;
            work.fence = passed.fence;
            work.session = next_session;
            work.turns = 0;
            work.briefed.clear();
        }
    }

    /// A headless session between turns: its agent has exited cleanly, so the lane
    /// waits (renewing the claim) for steering it was not yet given at the top of a
    /// brief, which starts the next turn, or for the claim to leave the session's
    /// hands.
    fn between_turns(&mut self, work: &Work) -> Result<Between> {
        self.row.state = LaneState::Waiting;
        self.row.pid = None;
        self.row.pid_start = None;
        self.publish(true)?;
        let targets = launch::targets(&work.session, &self.cfg.name, &work.worktree);
        let holder = Holder::fenced(work.session.clone(), work.fence);
        let mut renewer = Renewer::new(self.cfg.renew, Instant::now());
        let mut seen_version: Option<i64> = None;
        loop {
            if self.stopping() {
                return Ok(Between::Stopping);
            }
            // Only another connection's commit (a steer, a takeover, a phase change)
            // can change what this waits for.
            let version = self.store.change_token().ok();
            if version.is_none() || version != seen_version {
                seen_version = version;
                // Past its budget, the lane pauses here (a raise, and it waits on).
                match self.budget_pause(&work.claim.task_id, &holder)? {
                    budget::Paused::Go => {}
                    budget::Paused::Stop | budget::Paused::Stopping => {
                        return Ok(Between::Stopping)
                    }
                    budget::Paused::Lost(_) => {
                        seen_version = None;
                        continue;
                    }
                }
                let holding = self.holding(&work.claim.task_id, &work.session)?;
                let fresh = holding == Holding::Ours
                    && self
                        .store
                        .inbox(&targets, false)?
                        .iter()
                        .any(|i| !work.briefed.contains(&i.key));
                match machine::between(&holding, fresh) {
                    None => {}
                    Some(BetweenNext::Turn) => return Ok(Between::Next),
                    Some(BetweenNext::Over) => return Ok(Between::Over),
                    Some(BetweenNext::Lost(by)) => {
                        self.row.last_error = Some(format!(
                            "lost the claim on {} to {by} between turns; worktree kept",
                            work.claim.handle
                        ));
                        self.report.error = self.row.last_error.clone();
                        return Ok(Between::Over);
                    }
                }
            }
            if renewer.due(Instant::now())
                && self.renew_claim(&work.claim.task_id, &holder)?.is_some()
            {
                // Refused: the claim changed hands or ended; the next look says how.
                seen_version = None;
            }
            self.publish(false)?;
            std::thread::sleep(TICK);
        }
    }
}

/// The branch a lane's task branches start from and merge into: its own `base`, else
/// the checked-out branch of the repository it names, else the fleet's.
pub(crate) fn base_of(
    cfg: &LaneConfig,
    opts: &FleetOptions,
    git: &crate::git::Git,
    repo: &Path,
) -> Result<String> {
    Ok(match (&cfg.lane.base, &cfg.lane.repo) {
        (Some(b), _) => b.clone(),
        (None, Some(_)) => git
            .launch_check(repo)?
            .branch
            .unwrap_or_else(|| "main".into()),
        (None, None) => opts.base.clone(),
    })
}
