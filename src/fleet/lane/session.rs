//! One session of a lane: its brief (with pending steering and what the previous
//! session was cut off in), the launch under the shim, and the loop that follows the
//! agent until it ends: transcript scan → state, claim checks, fenced renewal, idle
//! paste, the silent-start report.

use super::budget::Paused;
use super::machine::{Action, End, Event, Holding, Rules, Session};
use super::{Lane, Work, GRACE, TICK};
use crate::agent::{inflight, LaunchSpec};
use crate::config::profile::{Mode, Placeholder};
use crate::error::{Error, Result};
use crate::fleet::follow::{transcript_place, Follow};
use crate::fleet::{brief, launch};
use crate::store::{Authority, Holder, Item, LaneRow, LaneState, Target, TargetKind};
use crate::transcript::discover::claude_slug;
use serde_json::json;
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::time::{Instant, SystemTime};

/// What the previous session (or turn) was in the middle of when it ended.
struct Interrupted {
    /// Whose record was read (and is cleared once the brief is written).
    previous: Option<String>,
    /// As the brief lists them.
    quoted: Vec<String>,
    /// "shim" or "transcript", for the ledger.
    from: Option<&'static str>,
}

impl Lane<'_> {
    /// What the previous session (a successor's predecessor, or this session's last
    /// turn) was in the middle of when it ended: the commands its shim found still
    /// running, else the call its transcript leaves without a result.
    fn interrupted(&self, work: &Work, session: &str, successor: bool) -> Interrupted {
        let first_after_predecessor = successor && work.turns == 0;
        let previous = if work.turns > 0 {
            Some(session.to_string())
        } else {
            first_after_predecessor
                .then(|| self.row.lineage.last().cloned())
                .flatten()
        };
        let mut recorded = previous
            .as_deref()
            .map(|p| inflight::read(&self.opts.state_dir, p))
            .unwrap_or_default();
        let mut interrupted_from = (!recorded.is_empty()).then_some("shim");
        // The call the transcript leaves unanswered: the fallback, and, when a
        // recorded command contains it (the agents wrap their commands in shell
        // set-up), the way to show that command as the agent wrote it.
        let unanswered = first_after_predecessor
            .then(|| self.row.transcript.as_deref().and_then(interrupted_call))
            .flatten();
        match unanswered {
            Some(call) if recorded.is_empty() => {
                recorded.push(call);
                interrupted_from = Some("transcript");
            }
            Some(call) => {
                for r in recorded.iter_mut() {
                    if r.contains(call.trim()) {
                        *r = call.clone();
                    }
                }
            }
            None => {}
        }
        let mut interrupted: Vec<String> = recorded
            .iter()
            .take(inflight::QUOTE_COMMANDS)
            .map(|c| inflight::quote(c))
            .collect();
        if recorded.len() > inflight::QUOTE_COMMANDS {
            interrupted.push(format!(
                "and {} more",
                recorded.len() - inflight::QUOTE_COMMANDS
            ));
        }
        Interrupted {
            previous,
            quoted: interrupted,
            from: interrupted_from,
        }
    }

    /// Launches one session on the claim and follows it until it ends.
    pub(super) fn session(&mut self, program: &Path, work: &mut Work) -> Result<End> {
        let task = self.store.task(&work.claim.task_id)?;
        let session = work.session.clone();
        // A budget crossed before the launch pauses the lane with no agent running.
        match self.budget_pause(&task.id, &Holder::fenced(session.clone(), work.fence))? {
            Paused::Go => {}
            Paused::Stop | Paused::Stopping => return Ok(End::Stopping),
            Paused::Lost(Holding::Other(by)) => return Ok(End::Lost(by)),
            Paused::Lost(_) => return Ok(End::Finished),
        }
        let targets = launch::targets(&session, &self.cfg.name, &work.worktree);
        let successor = !self.row.lineage.is_empty();
        // A successor, or a headless session's next turn, continues the conversation.
        // The conversation a resumed session continues is the one the claim's sessions
        // launched on or the agent named (`carry`); a claim whose sessions never
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
        let confined =
            crate::fleet::confine::session(cfg, opts, &self.repo, &worktree, &session, &value);
        let argv = launch::argv(cfg, opts, program, resume, &value, &confined);
        let recordings = opts.state_dir.join("recordings");
        let _ = std::fs::create_dir_all(&recordings);
        let recording = recordings.join(format!("{session}.cast"));
        let launched_at = SystemTime::now();
        let mut agent = crate::agent::Agent::spawn(&LaunchSpec {
            argv,
            cwd: work.worktree.clone(),
            env,
            cols: 120,
            rows: 40,
            recording: Some(recording.clone()),
        })?;
        self.report.sessions.push(session.clone());
        // The desk answers this session's agent (and all it starts) until it ends.
        let _seated = opts.seats.sit(
            agent.pid(),
            crate::fleet::desk::Seat {
                lane: cfg.name.clone(),
                session: session.clone(),
                task: task.id.clone(),
                fence: work.fence,
                worktree: work.worktree.clone(),
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
                "sandbox": confined.status,
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
        self.row.pid = Some(agent.pid());
        self.row.pid_start = Some(agent.start_time());
        self.row.recording = Some(recording.display().to_string());
        self.row.last_activity = Some(self.now());
        self.row.conversation = Some(conversation.clone());
        self.publish(true)?;

        let (exact, search) = transcript_place(cfg, &value);
        let known = self.row.transcript.clone().map(PathBuf::from).or(exact);
        let mut follow = Follow::new(known, search, launched_at, targets.clone());
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
        let mut pasted: HashSet<String> = pending.iter().map(|i| i.key.clone()).collect();
        let mut seen_version: Option<i64> = None;
        let holder = Holder::fenced(session.clone(), work.fence);
        let mut machine = Session::new(
            Rules {
                start_timeout: cfg.start_timeout,
                renew: cfg.renew,
                interactive: cfg.profile.mode == Mode::Pty,
                has_transcript: cfg.profile.transcript.is_some(),
                stall_after: cfg.stall_after,
            },
            Instant::now(),
        );
        let mut silent_start: Option<String> = None;
        // The conversation and transcript last written to the ledger for this session
        // (what a successor after a restart resumes, see `carry`).
        let mut noted: (Option<String>, Option<String>) = (Some(conversation.clone()), None);
        let end = 'session: loop {
            let mut actions = Vec::new();
            // What the transcript says.
            if let Some(report) = follow.poll(&work.worktree, &mut *self.store)? {
                conscience.hear(&report);
                if report.events > 0 {
                    self.row.last_activity = Some(self.now());
                    self.row.transcript = follow.path.as_ref().map(|p| p.display().to_string());
                }
                let named = self.conversation_named(
                    &task.id,
                    &session,
                    report.session_id.clone(),
                    &mut noted,
                );
                self.through_outage(named)?;
                if !report.keyless.is_empty() {
                    // The agent meant to answer but named no key: nothing is retired,
                    // and the ledger says so (the items stay pending and shown).
                    let noted = self.store.note(
                        &task.id,
                        "keyless_ack",
                        &session,
                        json!({ "transcript": report.path, "lines": report.keyless }),
                    );
                    self.through_outage(noted)?;
                }
                if report.compactions > 0 {
                    let noted = self.store.note(
                        &task.id,
                        "compacted",
                        &session,
                        json!({ "transcript": report.path, "count": report.compactions, "line": report.to_line }),
                    );
                    self.through_outage(noted)?;
                }
                actions.extend(machine.step(
                    Event::Transcript {
                        events: report.events,
                        turn_ended: report.turn_ended,
                        text_last: report.text_last,
                        turn: Some(report.turn.clone()),
                    },
                    Instant::now(),
                ));
            }
            // Its turn over, an agent past its budget waits for the operator.
            if machine.turn_over() && machine.watches_claim() {
                let paused = self.budget_pause(&task.id, &holder);
                match self.through_outage(paused)?.unwrap_or(Paused::Go) {
                    Paused::Go => {}
                    Paused::Stop | Paused::Stopping => {
                        agent.stop(GRACE)?;
                        break 'session End::Stopping;
                    }
                    Paused::Lost(h) => {
                        actions.extend(machine.step(Event::Claim(h), Instant::now()))
                    }
                }
            }
            if let Some(st) = agent.try_wait()? {
                let exited = Event::Exited {
                    how: st.to_string(),
                    clean: st.success(),
                };
                actions.extend(machine.step(exited, Instant::now()));
            } else if self.stopping() {
                actions.extend(machine.step(Event::Stopping, Instant::now()));
            }
            // Whose claim it is: re-read only when another connection committed
            // (the agent completing its phase, an operator's takeover); this
            // connection's own writes never change who holds it.
            let version = self.store.change_token().ok();
            let changed = version.is_none() || version != seen_version;
            seen_version = version;
            if changed && machine.watches_claim() {
                let holding = self.holding(&task.id, &session);
                match self.through_outage(holding)? {
                    Some(h) => actions.extend(machine.step(Event::Claim(h), Instant::now())),
                    // Asked again on the next tick.
                    None => seen_version = None,
                }
            }
            if machine.wants_screen(Instant::now()) {
                let screen = agent.screen_words(2000);
                let prompt = crate::transcript::turn::permission_prompt(&screen);
                actions.extend(machine.step(Event::Screen(prompt), Instant::now()));
            }
            let tick = Event::Tick {
                found: follow.path.is_some(),
            };
            actions.extend(machine.step(tick, Instant::now()));
            for action in actions {
                match action {
                    Action::ReportSilentStart => {
                        // The agent may be waiting at a prompt or dialog its
                        // transcript never shows (a trust or login screen): say so,
                        // with what its screen says, instead of "starting".
                        let hint = format!(
                            "no transcript {}s after launch: the agent may be waiting at a prompt \
                             (look with: spice fleet attach {}); its screen ends: {}",
                            cfg.start_timeout.as_secs(),
                            cfg.name,
                            agent.screen_words(160)
                        );
                        self.row.last_error = Some(hint.clone());
                        silent_start = Some(hint);
                    }
                    Action::ClearSilentStart => {
                        if let Some(hint) = silent_start.take() {
                            if self.row.last_error.as_deref() == Some(hint.as_str()) {
                                self.row.last_error = None;
                            }
                        }
                    }
                    Action::Renew => {
                        // A refusal says what the claim is now.
                        if let Some(h) = self.renew_claim(&task.id, &holder)? {
                            let seen = machine.step(Event::Claim(h), Instant::now());
                            for a in seen {
                                if let Action::TellTakenOver(by) = a {
                                    self.tell_taken_over(&task.handle(), &session, &by);
                                }
                            }
                        }
                    }
                    Action::TellTakenOver(by) => {
                        self.tell_taken_over(&task.handle(), &session, &by)
                    }
                    Action::Deliver => {
                        let delivered =
                            self.deliver(&agent, &targets, &task.id, &session, &mut pasted);
                        if self.through_outage(delivered)? == Some(true) {
                            machine.step(Event::Delivered, Instant::now());
                        }
                    }
                    Action::Stop(end) => {
                        agent.stop(GRACE)?;
                        break 'session end;
                    }
                    Action::Over(end) => break 'session end,
                }
            }
            self.row.state = machine.state;
            self.row.state_note.clone_from(&machine.note);
            let published = self.publish(false);
            self.through_outage(published)?;
            std::thread::sleep(TICK);
        };
        let mut wrote = machine.wrote;
        self.row.state = machine.state;
        self.port.set(None);
        // Whatever the agent wrote last still counts (its final ACKs), and a
        // transcript not found yet is looked for once more, so that what a
        // successor resumes is known.
        follow.locate_now(&work.worktree);
        if let Some(report) = follow.poll(&work.worktree, &mut *self.store)? {
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
            let bound = crate::archive::DEFAULT_MAX_BYTES;
            crate::archive::worker::archive_one(
                &self.opts.state_dir,
                &self.opts.location,
                &self.opts.clock,
                bound,
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

    /// Tells the session (a steering item) that `by` took its claim over.
    fn tell_taken_over(&mut self, handle: &str, session: &str, by: &str) {
        let note = format!(
            "Your claim on task {handle} was taken over by {by}. Stop working on it now: \
             do not commit or complete its phase. Your worktree is kept."
        );
        let target = Target {
            kind: TargetKind::Session,
            name: session.to_string(),
        };
        // A correction is never dropped in silence: a busy store is tried again, and
        // one that still refuses is said on the lane's row.
        let mut failed = None;
        for pause_ms in [0, 100, 400, 1600] {
            std::thread::sleep(std::time::Duration::from_millis(pause_ms));
            match self.store.steer(&target, &note, crate::store::DEFAULT_TTL) {
                Ok(_) => return,
                Err(e) => failed = Some(e),
            }
        }
        if let Some(e) = failed {
            self.row.last_error = Some(format!(
                "could not tell session {session} that {by} took its claim over: {e}"
            ));
        }
    }

    /// Types the pending steering not yet typed in (`pasted`) into an agent waiting
    /// for input, as one bracketed paste. True when something was typed.
    fn deliver(
        &mut self,
        agent: &crate::agent::Agent,
        targets: &[Target],
        task: &str,
        session: &str,
        pasted: &mut HashSet<String>,
    ) -> Result<bool> {
        let fresh: Vec<_> = self
            .store
            .inbox(targets, false)?
            .into_iter()
            .filter(|i| !pasted.contains(&i.key))
            .collect();
        if fresh.is_empty() {
            return Ok(false);
        }
        let fresh: Vec<&Item> = fresh.iter().collect();
        let text = crate::steer::exec::frame(&fresh, self.now());
        let keys: Vec<String> = crate::steer::exec::newest(&fresh)
            .0
            .iter()
            .map(|i| i.key.clone())
            .collect();
        let typed = match agent.paste(text.trim()) {
            Ok(()) => {
                self.store.mark_shown(&keys)?;
                self.store.note(
                    task,
                    "delivered",
                    session,
                    json!({ "keys": keys, "how": "typed into the idle agent's terminal" }),
                )?;
                true
            }
            Err(e) => {
                self.row.last_error = Some(e.to_string());
                false
            }
        };
        pasted.extend(keys);
        Ok(typed)
    }

    /// Takes the conversation id the transcript gives (Codex names its own; a resume
    /// must use that name) and records conversation and transcript in the ledger when
    /// they changed since `noted`: what a successor after a restart resumes (`carry`).
    fn conversation_named(
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

/// The call a transcript ends in the middle of (no result came back): its command,
/// or `(a NAME call)` for a tool that runs none. Unreadable: none.
fn interrupted_call(transcript: &str) -> Option<String> {
    let (_, events, malformed) = crate::transcript::read_file(Path::new(transcript)).ok()?;
    let call = crate::transcript::briefing::brief(transcript, &events, malformed).unfinished_call?;
    Some(
        call.command
            .unwrap_or_else(|| format!("(a {} call)", call.name)),
    )
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
        // Out of reach: tried again at the next renewal (a lease outlasts several).
        Err(e) if e.is_unreachable() => {
            row.last_error = Some(format!("renewing the claim: {e}"));
            Ok(None)
        }
        Err(e) => match holding(store, task, &holder.claimant)? {
            Holding::Ours => {
                row.last_error = Some(format!("renewing the claim: {e}"));
                Ok(None)
            }
            other => Ok(Some(other)),
        },
    }
}
