//! One session of a lane: its brief (with pending steering and what the previous
//! session was cut off in), the launch under the shim ([`Lane::launch`]), the loop
//! that follows the agent until it ends (`drive::drive` over `running::Running`),
//! and what its end records ([`Lane::finish`]). Also the two claim reads every loop
//! that holds a claim shares: [`holding`] and [`renew_claim`].

use super::budget::Paused;
use super::interrupted::Interrupted;
use super::machine::{End, Holding, Rules, Session};
use super::running::{Live, Running};
use super::{Lane, Work};
use crate::agent::{inflight, LaunchSpec};
use crate::config::profile::{Deliver, Format, Mode, Placeholder};
use crate::error::{Error, Result};
use crate::fleet::follow::{transcript_place, Follow};
use crate::fleet::{brief, launch};
use crate::store::{Authority, Holder, Item, LaneRow, LaneState};
use crate::task::Task;
use crate::transcript::discover::claude_slug;
use serde_json::json;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

impl Lane<'_> {
    /// Launches one session on the claim and follows it until it ends.
    pub(super) fn session(&mut self, program: &Path, work: &mut Work) -> Result<End> {
        let task = self.store.task(&work.claim.task_id)?;
        // A budget crossed before the launch pauses the lane with no agent running.
        match self.budget_pause(&task.id, &work.holder())? {
            Paused::Go => {}
            Paused::Stop | Paused::Stopping => return Ok(End::Stopping),
            Paused::Lost(Holding::Other(by)) => return Ok(End::Lost(by)),
            Paused::Lost(_) => return Ok(End::Finished),
        }
        let (live, mut machine) = self.launch(program, work, task)?;
        let clock = self.opts.clock.clone();
        let mut running = Running { lane: self, live };
        let end = super::drive::drive(&mut running, &mut machine, &*clock)?;
        let live = running.live;
        self.finish(live, machine, end)
    }

    /// Writes the brief, starts the agent under the shim and records the launch: the
    /// session as it starts running, and its machine.
    fn launch(&mut self, program: &Path, work: &mut Work, task: Task) -> Result<(Live, Session)> {
        let session = work.session.clone();
        let targets = launch::targets(&session, &self.cfg.name, &work.worktree);
        let successor = !self.row.lineage.is_empty();
        // A successor, or a headless session's next turn, continues the conversation.
        // The conversation a resumed session continues is the one the claim's sessions
        // launched on or the agent named (`lineage`); a claim whose sessions never
        // launched has none to resume, so it starts afresh.
        let conversation = self
            .row
            .conversation
            .clone()
            .filter(|_| (successor || work.turns > 0) && self.cfg.profile.resume.is_some());
        let mut resume = conversation.is_some();
        let mut conversation = conversation.unwrap_or_else(|| session.clone());
        // A flood is briefed as its newest few (`exec::newest`); the rest are
        // typed in later, a few at a time, as the agent waits for input.
        let inbox = self.store.inbox(&targets, false)?;
        let all: Vec<&Item> = inbox.iter().collect();
        let pending: Vec<Item> = crate::steer::exec::newest(&all)
            .0
            .into_iter()
            .cloned()
            .collect();
        let frame = (!all.is_empty()).then(|| crate::steer::exec::frame(&all, self.now()));
        let Interrupted {
            previous,
            quoted: interrupted,
            from: interrupted_from,
        } = self.interrupted(work, &session, successor);
        let text = brief::compose(&brief::BriefInput {
            as_messages: self.cfg.profile.deliver == Deliver::Message,
            task: &task,
            lane: &self.cfg.name,
            session: &session,
            spice: &self.opts.spice.display().to_string(),
            // What `spice session briefing` can open: the transcript the predecessor
            // wrote (a resume continues it), else the conversation's id.
            predecessor: (successor && work.turns == 0)
                .then(|| {
                    self.row
                        .transcript
                        .as_ref()
                        .or(self.row.conversation.as_ref())
                })
                .flatten()
                .map(String::as_str),
            interrupted: &interrupted,
            steering: frame.as_deref(),
        });
        let briefs = self.opts.state_dir.join("briefs");
        std::fs::create_dir_all(&briefs).map_err(|source| Error::Io {
            context: "failed to create briefs".into(),
            source,
        })?;
        let brief_file = briefs.join(format!("{session}.md"));
        std::fs::write(&brief_file, &text).map_err(|source| Error::Io {
            context: format!("failed to write {}", brief_file.display()),
            source,
        })?;
        // Told: the record goes before the agent starts (and may write its own).
        if let Some(p) = &previous {
            inflight::clear(&self.opts.state_dir, p);
        }
        let opts = self.opts;
        let cfg = self.cfg;
        let worktree = work.worktree.clone();
        let mut env = launch::environment(cfg, opts, &self.base, &session, &task.id);
        let slot = self.store.bed_slot(&worktree.display().to_string())?;
        env.extend(super::bed::environment(slot.as_ref()));
        // `{home}` is the HOME the agent gets (a lane's `[env] HOME` wins), which is
        // where it writes its transcript, not the supervisor's.
        let home = launch::home(&env).unwrap_or_else(|| opts.home.display().to_string());
        // The transcript must be where this host's agent looks for it (`resume_here`):
        // a successor on another host copies it there, or starts afresh.
        if resume && !self.resumable_here(&task.id, &session, &conversation, &worktree, &home)? {
            resume = false;
            conversation = session.clone();
        }
        let value = |p: Placeholder| -> Option<String> {
            Some(match p {
                Placeholder::SessionId => conversation.clone(),
                Placeholder::Brief => text.clone(),
                Placeholder::BriefFile => brief_file.display().to_string(),
                Placeholder::Worktree => worktree.display().to_string(),
                Placeholder::Model => cfg.lane.model.clone()?,
                Placeholder::Task => task.id.clone(),
                Placeholder::Lane => cfg.name.clone(),
                Placeholder::Spice => opts.spice.display().to_string(),
                Placeholder::Home => home.clone(),
                Placeholder::CwdSlug => claude_slug(&worktree),
            })
        };
        let hooks =
            crate::fleet::confine::commands(cfg, opts, &self.repo, &worktree, &work.claim.handle);
        let confined = crate::fleet::confine::session(cfg, opts, &hooks, &session, &value);
        let argv = launch::argv(cfg, opts, program, resume, &value, &confined);
        env.extend(confined.env.iter().cloned());
        let recordings = opts.state_dir.join("recordings");
        let _ = std::fs::create_dir_all(&recordings);
        let recording = recordings.join(format!("{session}.cast"));
        let launched_at = SystemTime::now();
        let agent = crate::agent::Agent::spawn(&LaunchSpec {
            argv,
            cwd: work.worktree.clone(),
            env,
            cols: 120,
            rows: 40,
            recording: Some(recording.clone()),
        })?;
        self.report.sessions.push(session.clone());
        let seated = opts.seats.sit(
            agent.pid(),
            crate::fleet::desk::Seat {
                lane: cfg.name.clone(),
                session: session.clone(),
                task: task.id.clone(),
                fence: work.fence,
                worktree: work.worktree.clone(),
                repo: self.repo.clone(),
                base: self.base.clone(),
                hooks,
            },
        );
        self.port.set(Some(agent.terminal()));
        self.store.note(
            &task.id,
            "launched",
            &session,
            json!({
                "lane": cfg.name, "phase": task.phase, "pid": agent.pid(), "resume": resume, "turn": work.turns + 1,
                "base": self.base, "push": cfg.lane.push, "worktree": work.worktree,
                "repo": self.repo,
                "sandbox": confined.status,
                "reads": crate::fleet::status::reads(&cfg.profile),
                "delivers": cfg.profile.deliver.describe(cfg.profile.mode),
                "conversation": conversation, "recording": recording,
                "steering_in_brief": pending.iter().map(|i| &i.key).collect::<Vec<_>>(),
                "interrupted": interrupted, "interrupted_from": interrupted_from,
            }),
        )?;
        if !pending.is_empty() {
            let keys: Vec<String> = pending.iter().map(|i| i.key.clone()).collect();
            self.store.mark_shown(&keys)?;
            work.briefed.extend(keys);
        }
        self.row.state = LaneState::Starting;
        self.row.state_note = None;
        // An agent launched is the lane recovered: an earlier error (a release and
        // retry, a lost claim) no longer needs the operator (it stays in the ledger
        // and the log).
        self.row.last_error = None;
        self.row.pid = Some(agent.pid());
        self.row.pid_start = Some(agent.start_time());
        self.row.recording = Some(recording.display().to_string());
        self.row.last_activity = Some(self.now());
        self.row.conversation = Some(conversation.clone());
        self.publish(true)?;

        let (exact, search) = transcript_place(cfg, &value);
        // A terminal's transcript is this session's own recording, never an earlier one.
        let known = match cfg.profile.transcript.as_ref().map(|t| t.format) {
            Some(Format::Terminal) => Some(recording.clone()),
            _ => self.row.transcript.clone().map(PathBuf::from).or(exact),
        };
        let follow = Follow::new(known, search, launched_at, targets.clone());
        // The conscience hears the agent's prose on a thread beside the lane.
        let scope = crate::conscience::Scope {
            lane: cfg.name.clone(),
            profile: Some(cfg.profile.name.clone()),
            project: task.project.clone(),
            phase: Some(task.phase.clone()),
        };
        let conscience =
            crate::conscience::watch::Watcher::start(crate::conscience::watch::Seat::at_rev(
                &opts.location,
                opts.clock.clone(),
                &self.repo,
                &self.base,
                &worktree,
                scope,
            ));
        let machine = Session::new(
            Rules {
                start_timeout: cfg.start_timeout,
                renew: cfg.renew,
                interactive: cfg.profile.mode == Mode::Pty,
                has_transcript: cfg.profile.transcript.is_some(),
                stall_after: cfg.stall_after,
                type_while_busy: cfg.profile.deliver == Deliver::Message,
            },
            opts.clock.monotonic(),
        );
        let live = Live {
            agent,
            follow,
            conscience,
            holder: work.holder(),
            pasted: pending.iter().map(|i| i.key.clone()).collect(),
            typed_busy: Vec::new(),
            idle_since: None,
            noted: (Some(conversation.clone()), None),
            task,
            session,
            worktree,
            recording,
            targets,
            seen_version: None,
            silent_start: None,
            budgets: None,
            hold_before: None,
            _seated: seated,
        };
        Ok((live, machine))
    }

    /// After the loop: the transcript's last words are read, the end is recorded, the
    /// transcript archived and the row published.
    fn finish(&mut self, live: Live, machine: Session, end: End) -> Result<End> {
        let Live {
            agent,
            mut follow,
            conscience,
            task,
            session,
            worktree,
            recording,
            mut noted,
            ..
        } = live;
        let cfg = self.cfg;
        let mut wrote = machine.wrote;
        self.row.state = machine.state;
        self.port.set(None);
        // Whatever the agent wrote last still counts (its final ACKs), and a
        // transcript not found yet is looked for once more, so that what a
        // successor resumes is known.
        follow.locate_now(&worktree);
        if let Some(report) = follow.poll(&worktree, &mut *self.store)? {
            conscience.hear(&report);
            if report.events > 0 {
                wrote = true;
                self.row.transcript = follow.path.as_ref().map(|p| p.display().to_string());
            }
            self.conversation_named(&task.id, &session, report.session_id, &mut noted)?;
        }
        // A headless turn that wrote nothing did no work (a login or config error, a
        // wrong flag): a death, with what the screen says, not a turn to wait after.
        let end = match end {
            End::Exited(_, true)
                if cfg.profile.mode == Mode::Headless
                    && cfg.profile.transcript.is_some()
                    && !wrote =>
            {
                End::Exited(
                    format!(
                        "exited cleanly without writing its transcript (its screen ends: {})",
                        agent.screen_words(160)
                    ),
                    false,
                )
            }
            other => other,
        };
        self.row.pid = None;
        self.row.pid_start = None;
        let how = match &end {
            End::Exited(how, _) => how.clone(),
            End::Finished => "stopped: its task left its hands".into(),
            End::Lost(by) => format!("stopped: claim taken over by {by}"),
            End::Stopping => "stopped with the supervisor".into(),
        };
        self.store
            .note(&task.id, "exited", &session, json!({ "how": how }))?;
        self.archive_transcript(&task.id, &session, follow.path.as_deref());
        if let Some(e) = agent.recording_error() {
            self.row.last_error = Some(format!("recording {}: {e}", recording.display()));
        }
        self.publish(true)?;
        Ok(end)
    }
}

impl Lane<'_> {
    /// Hands the ended session's transcript to the fleet's archiver (or archives it
    /// here when the lane runs without one).
    fn archive_transcript(&self, task: &str, session: &str, found: Option<&Path>) {
        let Some(path) = found
            .map(Path::to_path_buf)
            .or_else(|| self.row.transcript.as_ref().map(PathBuf::from))
            .filter(|p| p.is_file())
        else {
            return;
        };
        let job = crate::archive::worker::Job {
            task_id: task.to_string(),
            session: session.to_string(),
            transcript: path,
        };
        if !self
            .opts
            .archive
            .as_ref()
            .is_some_and(|q| q.send(job.clone()))
        {
            let bounds = crate::archive::worker::Bounds {
                archive: crate::archive::DEFAULT_MAX_BYTES,
                sessions: crate::config::housekeeping::DEFAULT_SESSIONS_MAX_BYTES,
            };
            crate::archive::worker::archive_one(
                &self.opts.state_dir,
                &self.opts.location,
                &self.opts.clock,
                bounds,
                &job,
            );
        }
    }

    /// Who holds the claim on `task` now, as the session `session` sees it
    /// ([`holding`]).
    pub(super) fn holding(&mut self, task: &str, session: &str) -> Result<Holding> {
        holding(&mut *self.store, task, session)
    }

    /// The one renewal every loop that holds a claim makes ([`renew_claim`]).
    pub(super) fn renew_claim(&mut self, task: &str, holder: &Holder) -> Result<Option<Holding>> {
        renew_claim(
            &mut *self.store,
            &mut self.row,
            self.cfg.lease,
            task,
            holder,
        )
    }

    /// Takes the conversation id the transcript gives (Codex names its own; a resume
    /// must use that name) and records conversation and transcript in the ledger when
    /// they changed since `noted`: what a successor after a restart resumes (`lineage`).
    pub(super) fn conversation_named(
        &mut self,
        task: &str,
        session: &str,
        id: Option<String>,
        noted: &mut (Option<String>, Option<String>),
    ) -> Result<()> {
        if let Some(id) = id.filter(|_| self.cfg.profile.resume.is_some()) {
            self.row.conversation = Some(id);
        }
        let now = (self.row.conversation.clone(), self.row.transcript.clone());
        if now.1.is_some() && now != *noted {
            self.store.note(
                task,
                "conversation",
                session,
                json!({ "conversation": now.0, "transcript": now.1 }),
            )?;
            *noted = now;
        }
        Ok(())
    }
}

/// Who holds the claim on `task` now, as the session `session` sees it.
///
/// A claim held by someone else after this session released it itself (its phase
/// completed, and the next phase's lane claimed the task at once) is released,
/// not taken over: the agent is told nothing and stopped once its turn ends.
pub(super) fn holding(store: &mut dyn Authority, task: &str, session: &str) -> Result<Holding> {
    Ok(match store.claim_on(task)? {
        Some(c) if c.claimant == session => Holding::Ours,
        Some(c) => {
            let released_by_us = store
                .ledger(task)?
                .iter()
                .any(|e| e.kind == "released" && e.actor.as_deref() == Some(session));
            if released_by_us {
                Holding::Released
            } else {
                Holding::Other(c.claimant)
            }
        }
        None => Holding::Released,
    })
}

/// The one renewal every loop that holds a claim makes (fenced, for `lease`): `None`
/// when it was renewed (or the store was busy: tried again next time; the lane's
/// `row` says why), else what the claim is now.
pub(super) fn renew_claim(
    store: &mut dyn Authority,
    row: &mut LaneRow,
    lease: std::time::Duration,
    task: &str,
    holder: &Holder,
) -> Result<Option<Holding>> {
    match store.renew(task, holder, None, lease) {
        Ok(_) => Ok(None),
        // Out of reach, or trouble in the store itself (busy, I/O): tried again at the
        // next renewal (a lease outlasts several).
        Err(e) if e.is_unreachable() || matches!(e, Error::Sqlite { .. } | Error::Io { .. }) => {
            row.last_error = Some(format!("renewing the claim: {e}"));
            Ok(None)
        }
        // Refused (or the task gone): what the claim is now says why.
        Err(e) => match holding(store, task, &holder.claimant)? {
            Holding::Ours => {
                row.last_error = Some(format!("renewing the claim: {e}"));
                Ok(None)
            }
            other => Ok(Some(other)),
        },
    }
}
