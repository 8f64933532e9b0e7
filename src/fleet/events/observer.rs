//! The [`Observer`]: reads what the lanes wrote since its cursor and turns it into
//! [`LaneEvent`]s (the table in the parent module says which record gives which).

use super::{EventKind, LaneEvent};
use crate::clock::Micros;
use crate::error::Result;
use crate::fleet::status::{claim_of_lane, lane_targets};
use crate::store::{Authority, Claim, LaneRow, LaneState, LedgerEntry, Target, TargetKind};
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// How long the observer waits before looking again when the store is out of reach.
const OUTAGE_PAUSE: Duration = Duration::from_millis(500);

/// How long a first showing waits before it is reported as a delivery of its own: the
/// lane marks an item shown just before it writes the ledger entry that says how.
pub const SETTLE: Duration = Duration::from_millis(500);
/// How long the observer waits for a commit before it looks anyway (a stop flag set
/// without a nudge is seen within this).
const QUIET_LOOK: Duration = Duration::from_secs(2);
/// How often the operator's queue is looked at for entries no lane state says.
const NEEDS_EVERY: Duration = Duration::from_secs(2);
/// Rows read from the ledger or the acknowledgments at a time.
const PAGE: usize = 500;

/// Follows the store and turns what changed into [`LaneEvent`]s.
pub struct Observer {
    store: Box<dyn Authority>,
    version: Option<i64>,
    ledger: i64,
    acks: i64,
    /// Each lane's row as last seen.
    rows: HashMap<String, LaneRow>,
    /// Session → lane, for entries that name only their session.
    sessions: HashMap<String, String>,
    /// Transcript path → lane, for acknowledgments (their source is the transcript).
    transcripts: HashMap<String, String>,
    handles: HashMap<String, String>,
    /// Task → the worktree reported for its current claim.
    worktrees: HashMap<String, String>,
    /// Keys whose delivery was reported (or that were shown before the observer began).
    delivered: HashSet<String>,
    /// A showing is waiting out [`SETTLE`]: poll even without a commit.
    deferred: bool,
    /// When it last read (see [`Authority::quiet_reread`]).
    read_at: std::time::Instant,
    /// The operator's queue entries no lane state says, as last seen, and when.
    needs: HashSet<String>,
    needs_at: std::time::Instant,
}

impl Observer {
    /// Starts at the store as it is now: only what happens from here on is reported.
    pub fn new(mut store: Box<dyn Authority>) -> Result<Observer> {
        let ledger = store.ledger_head()?;
        let acks = store.acks_head()?;
        let version = store.change_token().ok();
        let mut o = Observer {
            store,
            version,
            ledger,
            acks,
            rows: HashMap::new(),
            sessions: HashMap::new(),
            transcripts: HashMap::new(),
            handles: HashMap::new(),
            worktrees: HashMap::new(),
            delivered: HashSet::new(),
            deferred: false,
            read_at: std::time::Instant::now(),
            needs: HashSet::new(),
            needs_at: std::time::Instant::now(),
        };
        // Only entries that enter the queue from here on are reported.
        o.read_needs(&mut Vec::new())?;
        for r in o.store.lanes()? {
            o.learn_row(&r);
            o.rows.insert(r.name.clone(), r);
        }
        for c in o.store.claims()? {
            o.learn_claim(&c);
            if let Some(w) = &c.worktree {
                o.worktrees.insert(c.task_id.clone(), w.clone());
            }
        }
        for i in o.store.inbox(&[], false)? {
            if i.shown > 0 {
                o.delivered.insert(i.key);
            }
        }
        Ok(o)
    }

    /// The events since the last poll, oldest first; nothing (and no reads beyond one
    /// pragma) when no other connection committed since.
    pub fn poll(&mut self) -> Result<Vec<LaneEvent>> {
        let version = self.store.change_token().ok();
        let due = self
            .store
            .quiet_reread()
            .is_some_and(|d| self.read_at.elapsed() >= d);
        if version.is_some() && version == self.version && !self.deferred && !due {
            return Ok(Vec::new());
        }
        self.version = version;
        self.read_at = std::time::Instant::now();
        let settled = self.store.now()? - SETTLE.as_micros() as Micros;
        self.collect(settled)
    }

    /// Everything not yet reported, showings that have not settled included: the last
    /// read, once the lanes have stopped.
    pub fn drain(&mut self) -> Result<Vec<LaneEvent>> {
        self.version = self.store.change_token().ok();
        self.collect(Micros::MAX)
    }

    /// Polls after each commit (waiting on the store's change notification), every
    /// `every` while a showing settles, and at least every [`QUIET_LOOK`], and hands
    /// each event to `emit` until `stop` is set (its setter calls
    /// [`crate::store::nudge`]), then drains what is left.
    pub fn watch(
        mut self,
        every: Duration,
        stop: &AtomicBool,
        mut emit: impl FnMut(&LaneEvent),
    ) -> Result<()> {
        loop {
            if stop.load(Ordering::SeqCst) {
                self.drain()?.iter().for_each(&mut emit);
                return Ok(());
            }
            match self.poll() {
                Ok(events) => events.iter().for_each(&mut emit),
                // The store out of reach (a server restarting): the cursors are where
                // the last complete poll left them; look again once it is back.
                Err(e) if e.is_unreachable() => std::thread::sleep(OUTAGE_PAUSE),
                Err(e) => return Err(e),
            }
            // A claim lapses with no commit at all: the queue is looked at on a timer.
            if self.needs_at.elapsed() >= NEEDS_EVERY {
                let mut out = Vec::new();
                match self.read_needs(&mut out) {
                    Ok(()) => out.iter().for_each(&mut emit),
                    Err(e) if e.is_unreachable() => {}
                    Err(e) => return Err(e),
                }
            }
            let pause = if self.deferred {
                every
            } else {
                self.store
                    .quiet_reread()
                    .map_or(QUIET_LOOK, |d| d.min(QUIET_LOOK))
                    .max(every)
            };
            match self.version {
                // An error here is the next poll's to report.
                Some(v) => {
                    let _ = self.store.wait_change(v, pause);
                }
                None => std::thread::sleep(every),
            }
        }
    }

    /// The queue entries no lane state says that were not there at the last look.
    fn read_needs(&mut self, out: &mut Vec<LaneEvent>) -> Result<()> {
        self.needs_at = std::time::Instant::now();
        let now = self.store.now()?;
        let claims = self.store.claims()?;
        let needs = crate::fleet::needs::beyond_lanes(self.store.as_mut(), &[], &claims, now)?;
        let keys: HashSet<String> = needs.iter().map(|n| n.key()).collect();
        for n in needs.iter().filter(|n| !self.needs.contains(&n.key())) {
            out.push(LaneEvent {
                at: now,
                lane: n.lane.clone().unwrap_or_else(|| "-".into()),
                event: EventKind::Needs,
                task: n.task.clone(),
                session: None,
                keys: Vec::new(),
                detail: format!("{}: {} ({})", n.kind.as_str(), n.what, n.resolve),
            });
        }
        self.needs = keys;
        Ok(())
    }

    fn learn_row(&mut self, r: &LaneRow) {
        for s in r.session.iter().chain(&r.lineage) {
            self.sessions.insert(s.clone(), r.name.clone());
        }
        if let Some(t) = &r.transcript {
            self.transcripts.insert(t.clone(), r.name.clone());
        }
    }

    fn learn_claim(&mut self, c: &Claim) {
        self.handles.insert(c.task_id.clone(), c.handle.clone());
        if let Some(l) = &c.lane {
            self.sessions
                .entry(c.claimant.clone())
                .or_insert_with(|| l.clone());
        }
    }

    fn handle(&mut self, task_id: &str) -> Option<String> {
        if let Some(h) = self.handles.get(task_id) {
            return Some(h.clone());
        }
        let h = self.store.task(task_id).ok()?.handle();
        self.handles.insert(task_id.to_string(), h.clone());
        Some(h)
    }

    fn collect(&mut self, settled: Micros) -> Result<Vec<LaneEvent>> {
        let now = self.store.now()?;
        let rows = self.store.lanes()?;
        let claims = self.store.claims()?;
        for r in &rows {
            self.learn_row(r);
        }
        for c in &claims {
            self.learn_claim(c);
        }
        let mut out = Vec::new();
        let mut previous: Option<(String, String)> = None;
        loop {
            let page = self.store.ledger_since(self.ledger, PAGE)?;
            let full = page.len() == PAGE;
            for e in &page {
                self.ledger = e.seq;
                self.read_ledger_entry(e, &claims, previous.as_ref(), &mut out);
                previous = Some((e.task_id.clone(), e.kind.clone()));
            }
            if !full {
                break;
            }
        }
        for c in &claims {
            let (Some(lane), Some(wt)) = (&c.lane, &c.worktree) else {
                continue;
            };
            if self.worktrees.get(&c.task_id) == Some(wt) {
                continue;
            }
            self.worktrees.insert(c.task_id.clone(), wt.clone());
            // No record says when a worktree was set: just before its launch, if that
            // is in this read, else when it was claimed (it is prepared right after),
            // never later than what this read saw.
            let at = out
                .iter()
                .find(|e| e.event == EventKind::Launched && e.task.as_ref() == Some(&c.handle))
                .map_or(c.claimed_at.min(now), |e| e.at - 1);
            out.push(LaneEvent {
                at,
                lane: lane.clone(),
                event: EventKind::WorktreeReady,
                task: Some(c.handle.clone()),
                session: Some(c.claimant.clone()),
                keys: Vec::new(),
                detail: wt.clone(),
            });
        }
        self.read_acks(&rows, &claims, &mut out)?;
        self.read_showings(&rows, &claims, settled, &mut out)?;
        self.read_rows(rows, &mut out);
        out.sort_by_key(|e| e.at);
        Ok(out)
    }

    fn read_ledger_entry(
        &mut self,
        e: &LedgerEntry,
        claims: &[Claim],
        previous: Option<&(String, String)>,
        out: &mut Vec<LaneEvent>,
    ) {
        let d = &e.detail;
        let text = |k: &str| d[k].as_str().map(str::to_string);
        let actor = e.actor.clone();
        let of_actor = actor.as_ref().and_then(|a| self.sessions.get(a).cloned());
        let of_claim = claims
            .iter()
            .find(|c| c.task_id == e.task_id)
            .and_then(|c| c.lane.clone());
        let short = |s: &Option<String>| s.as_deref().map(short_id).unwrap_or_default();
        let (lane, event, detail) = match e.kind.as_str() {
            "claimed" => {
                self.worktrees.remove(&e.task_id);
                let phase = text("phase").unwrap_or_default();
                (
                    text("lane"),
                    EventKind::Claimed,
                    format!("phase {phase}, session {}", short(&actor)),
                )
            }
            "worktree_wait" => (
                text("lane").or(of_claim),
                EventKind::WorktreeWait,
                text("reason").unwrap_or_default(),
            ),
            "successor" => {
                let from = text("from");
                let lane = from
                    .as_ref()
                    .and_then(|f| self.sessions.get(f).cloned())
                    .or(of_claim);
                (
                    lane,
                    EventKind::Successor,
                    format!("session {} continues {}", short(&actor), short(&from)),
                )
            }
            "launched" => {
                let mut detail = format!(
                    "session {}, pid {}, turn {}",
                    short(&actor),
                    d["pid"],
                    d["turn"]
                );
                if d["resume"] == true {
                    detail.push_str(", resumed");
                }
                (text("lane"), EventKind::Launched, detail)
            }
            "delivered" => (
                of_actor,
                EventKind::Delivered,
                text("how").unwrap_or_else(|| "delivered".into()),
            ),
            "exited" => (of_actor, EventKind::Exited, text("how").unwrap_or_default()),
            "compacted" => (
                of_actor,
                EventKind::Compacted,
                format!(
                    "the agent's context was compacted (transcript line {})",
                    d["line"]
                ),
            ),
            "held" => (
                text("lane").or(of_actor),
                EventKind::Held,
                text("reason").unwrap_or_default(),
            ),
            "budget" => (
                text("lane").or(of_actor),
                EventKind::Budget,
                text("reason").unwrap_or_default(),
            ),
            "phase_completed" => {
                let to = text("to").unwrap_or_else(|| "completed".into());
                let mut detail = format!("{} → {to}", text("from").unwrap_or_default());
                // `task phase --done` merges a claimed worktree's branch first and
                // completes nothing if that fails.
                if self.worktrees.remove(&e.task_id).is_some() {
                    detail.push_str(", branch merged");
                }
                (of_actor, EventKind::PhaseDone, detail)
            }
            "done" => (of_actor, EventKind::PhaseDone, "task done".into()),
            "stage_hook" => (
                text("lane").or(of_actor).or(of_claim),
                EventKind::Hook,
                hook_line(d),
            ),
            "pool" => (text("lane").or(of_actor), EventKind::Recycled, pool_line(d)),
            "released" => {
                let by_completion = previous.is_some_and(|(t, k)| {
                    t == &e.task_id && (k == "phase_completed" || k == "done")
                });
                if by_completion {
                    return;
                }
                (of_actor, EventKind::Released, "claim released".into())
            }
            _ => return,
        };
        let Some(lane) = lane else {
            return; // not a lane's: a claim made by hand, say
        };
        if let Some(a) = &actor {
            if matches!(e.kind.as_str(), "claimed" | "successor" | "launched") {
                self.sessions.insert(a.clone(), lane.clone());
            }
        }
        let task = self.handle(&e.task_id);
        // The lane's own deliveries are each reported (a successor's brief repeats
        // what its predecessor was shown); they only keep a showing of the same item
        // from being reported again as a delivery of its own.
        let keys = match event {
            EventKind::Delivered => strings(&d["keys"]),
            _ => Vec::new(),
        };
        self.delivered.extend(keys.iter().cloned());
        let brief = strings(&d["steering_in_brief"]);
        self.delivered.extend(brief.iter().cloned());
        out.push(LaneEvent {
            at: e.at,
            lane: lane.clone(),
            event,
            task: task.clone(),
            session: actor.clone(),
            keys,
            detail,
        });
        if event == EventKind::Launched && !brief.is_empty() {
            out.push(LaneEvent {
                at: e.at,
                lane,
                event: EventKind::Delivered,
                task,
                session: actor,
                keys: brief,
                detail: "at the top of its brief".into(),
            });
        }
    }

    /// The lane an item's target reaches now, if any.
    fn lane_of(&self, t: &Target, rows: &[LaneRow], claims: &[Claim]) -> Option<String> {
        match t.kind {
            TargetKind::Lane => Some(t.name.clone()),
            TargetKind::Session => self.sessions.get(&t.name).cloned(),
            TargetKind::Worktree => rows
                .iter()
                .find(|r| lane_targets(r, claim_of_lane(r, claims)).contains(t))
                .map(|r| r.name.clone()),
        }
    }

    fn current(&mut self, lane: &str, rows: &[LaneRow]) -> (Option<String>, Option<String>) {
        let row = rows.iter().find(|r| r.name == lane);
        let task = row
            .and_then(|r| r.task_id.clone())
            .and_then(|id| self.handle(&id));
        (task, row.and_then(|r| r.session.clone()))
    }

    fn read_acks(
        &mut self,
        rows: &[LaneRow],
        claims: &[Claim],
        out: &mut Vec<LaneEvent>,
    ) -> Result<()> {
        loop {
            let page = self.store.acks_since(self.acks, PAGE)?;
            let full = page.len() == PAGE;
            for (seq, a) in page {
                self.acks = seq;
                let event = match a.effect.as_str() {
                    "acked" => EventKind::Acked,
                    "refused" => EventKind::Refused,
                    _ => continue,
                };
                let lane = match self.transcripts.get(&a.source) {
                    Some(l) => Some(l.clone()),
                    None => match self.store.item(&a.key) {
                        Ok(item) => self.lane_of(&item.target, rows, claims),
                        Err(_) => None,
                    },
                };
                let Some(lane) = lane else { continue };
                let (task, session) = self.current(&lane, rows);
                let word = if event == EventKind::Acked {
                    "ACK"
                } else {
                    "NACK"
                };
                let body = a.body.lines().next().unwrap_or("").trim();
                out.push(LaneEvent {
                    at: a.at,
                    lane,
                    event,
                    task,
                    session,
                    detail: format!("{word} {}: {body}", a.key),
                    keys: vec![a.key],
                });
            }
            if !full {
                return Ok(());
            }
        }
    }

    /// Items shown for the first time by `spice exec` or the hook (the lane's own
    /// deliveries are named by the ledger, which is read first).
    fn read_showings(
        &mut self,
        rows: &[LaneRow],
        claims: &[Claim],
        settled: Micros,
        out: &mut Vec<LaneEvent>,
    ) -> Result<()> {
        self.deferred = false;
        for i in self.store.inbox(&[], false)? {
            if i.shown == 0 || self.delivered.contains(&i.key) {
                continue;
            }
            let shown_at = i.last_shown.unwrap_or(i.created);
            if shown_at > settled {
                self.deferred = true;
                continue;
            }
            self.delivered.insert(i.key.clone());
            let Some(lane) = self.lane_of(&i.target, rows, claims) else {
                continue;
            };
            let (task, session) = self.current(&lane, rows);
            out.push(LaneEvent {
                at: shown_at,
                lane,
                event: EventKind::Delivered,
                task,
                session,
                keys: vec![i.key],
                detail: "shown to the agent (a command's stderr or its hook)".into(),
            });
        }
        Ok(())
    }

    fn read_rows(&mut self, rows: Vec<LaneRow>, out: &mut Vec<LaneEvent>) {
        for r in rows {
            let task = r.task_id.clone().and_then(|id| self.handle(&id));
            let before = self.rows.get(&r.name);
            let event = |event, detail: String| LaneEvent {
                at: r.updated,
                lane: r.name.clone(),
                event,
                task: task.clone(),
                session: r.session.clone(),
                keys: Vec::new(),
                detail,
            };
            let mut new = Vec::new();
            if let Some(err) = &r.last_error {
                if before.and_then(|b| b.last_error.as_ref()) != Some(err) {
                    new.push(event(EventKind::Error, err.clone()));
                }
            }
            let was = before.map(|b| (b.state, b.state_note.clone()));
            let asked_again = r.state == LaneState::Asking
                && was.as_ref().is_some_and(|(_, n)| *n != r.state_note);
            if was.as_ref().map(|w| w.0) != Some(r.state) || asked_again {
                let note = r.state_note.clone();
                let about = |lead: &str, fallback: &str| match &note {
                    Some(n) => format!("{lead}: {n}"),
                    None => fallback.to_string(),
                };
                let what = match r.state {
                    LaneState::Waiting => Some((EventKind::Waiting, "done with its turn".into())),
                    LaneState::Asking => Some((
                        EventKind::Asking,
                        about("needs you", "needs you: it asks the operator"),
                    )),
                    LaneState::Subagent => Some((
                        EventKind::Subagent,
                        about("waiting on its sub-agent", "waiting on its sub-agent"),
                    )),
                    LaneState::Errored => Some((
                        EventKind::Error,
                        about("the agent failed", "the agent failed"),
                    )),
                    LaneState::Idle => Some((EventKind::Idle, "nothing ready for the lane".into())),
                    LaneState::Stalled => Some((
                        EventKind::Stalled,
                        about("stalled", "the transcript has not moved for a long time"),
                    )),
                    LaneState::Stopped => Some((EventKind::Stopped, "the lane stopped".into())),
                    // Held is reported from the ledger, which gives the reason.
                    _ => None,
                };
                if let Some((kind, detail)) = what {
                    new.push(event(kind, detail));
                }
            }
            out.extend(new);
            self.rows.insert(r.name.clone(), r);
        }
    }
}

/// `on_claim passed in 0.2s`, or what went wrong with the last line of its output.
/// A worktree pooled, taken from the pool, kept out of it, or beds evicted.
fn pool_line(d: &serde_json::Value) -> String {
    let s = |k: &str| d[k].as_str().unwrap_or("").to_string();
    match d["action"].as_str().unwrap_or("") {
        "pooled" => match d["saved"].as_str() {
            Some(r) => format!("worktree pooled for the next task; what it held beyond its commits is saved as {r}"),
            None => "worktree pooled for the next task".into(),
        },
        "taken" => format!("started in the pooled worktree of {} (its bed kept)", s("from_task")),
        "kept" => format!("worktree not pooled: {}", s("why")),
        "cold" => format!("the pool's worktree could not be used: {}", s("error")),
        "evicted" => match d["evicted"].as_array() {
            Some(e) => format!("{} bed(s) evicted to stay within the disk budget", e.len()),
            None => format!("eviction failed: {}", s("error")),
        },
        other => other.to_string(),
    }
}

fn hook_line(d: &serde_json::Value) -> String {
    let stage = d["stage"].as_str().unwrap_or("hook");
    let secs = d["duration_ms"].as_u64().unwrap_or(0) as f64 / 1000.0;
    if d["outcome"] == "passed" {
        return format!("{stage} passed in {secs:.1}s");
    }
    let summary = d["summary"].as_str().unwrap_or("failed");
    match d["output"].as_str().and_then(|o| o.lines().last()) {
        Some(last) if !last.trim().is_empty() => format!("{summary}: {}", last.trim()),
        _ => summary.to_string(),
    }
}

/// The first 8 characters of a session id: enough to tell sessions apart on a line.
fn short_id(s: &str) -> String {
    s.chars().take(8).collect()
}

fn strings(v: &serde_json::Value) -> Vec<String> {
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(|k| k.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}
