//! Output: JSON documents for scripts, plain tables for people.
//!
//! JSON field names follow Taskwarrior where they overlap (`description` for the
//! title); times are RFC 3339 in UTC. Tables name tasks by their shortest unique
//! prefix ([`ShortIds`], as `PROJECT-prefix`), which every command takes back; JSON
//! keeps the whole id (and adds it as `short` in listings).

use crate::alloc::Candidate;
use crate::clock::Micros;
use crate::fleet::events::LaneEvent;
use crate::fleet::status::FleetStatus;
use crate::steer::grammar::Directive;
use crate::store::{Claim, Effect, Item, LedgerEntry, Outcome, ShortIds};
use crate::task::{priority_str, Task};
use crate::transcript::sanitize;
use crate::when;
use serde_json::{json, Value};

pub use crate::json::{claim_json, item_json, ledger_json, task_json, time};

pub fn print_json<T: serde::Serialize + ?Sized>(v: &T) {
    println!(
        "{}",
        serde_json::to_string(v).expect("JSON values serialise")
    );
}

/// A JSON array written to stdout element by element (buffered), for listings too
/// large to hold as one document: the bytes are those of [`print_json`] on the
/// whole list. A closed pipe ends the listing as an error the caller returns.
pub struct JsonArray {
    out: std::io::BufWriter<std::io::StdoutLock<'static>>,
    first: bool,
}

impl JsonArray {
    pub fn stdout() -> JsonArray {
        JsonArray {
            out: std::io::BufWriter::with_capacity(64 << 10, std::io::stdout().lock()),
            first: true,
        }
    }

    pub fn push<T: serde::Serialize + ?Sized>(&mut self, v: &T) -> crate::error::Result<()> {
        use std::io::Write;
        let sep: &[u8] = if self.first { b"[" } else { b"," };
        self.first = false;
        self.out.write_all(sep).map_err(write_error)?;
        serde_json::to_writer(&mut self.out, v)
            .map_err(|e| crate::error::Error::Other(format!("failed to write JSON: {e}")))
    }

    pub fn finish(mut self) -> crate::error::Result<()> {
        use std::io::Write;
        let end: &[u8] = if self.first { b"[]\n" } else { b"]\n" };
        self.out.write_all(end).map_err(write_error)?;
        self.out.flush().map_err(write_error)
    }
}

fn write_error(source: std::io::Error) -> crate::error::Error {
    crate::error::Error::Io {
        context: "failed to write to standard output".into(),
        source,
    }
}

pub fn candidate_json(t: &Task, c: &Candidate) -> Value {
    json!({
        "id": t.id,
        "handle": t.handle(),
        "description": t.title,
        "project": t.project,
        "phase": t.phase,
        "priority": t.priority,
        "inherited_priority": c.inherited_priority,
        "inherited_from": c.inherited_from,
        "releases": c.releases,
        "urgency": c.urgency,
        "peers": c.peers,
        "local": c.local,
        "due": time(t.due),
    })
}

pub fn claim_out(c: &Claim, json: bool) {
    if json {
        print_json(&claim_json(c));
    } else {
        println!(
            "{} claimed by {} (fence {}) until {}",
            c.handle,
            c.claimant,
            c.fence,
            when::rfc3339(c.lease_until)
        );
    }
}

/// Truncates to `n` characters for a table cell.
fn cell(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        let mut out: String = s.chars().take(n.saturating_sub(1)).collect();
        out.push('…');
        out
    }
}

/// `handle` (`PROJECT-id`, or the id alone) of task `id`, with the id shortened.
fn short_handle(short: &ShortIds, handle: &str, id: &str) -> String {
    match handle.strip_suffix(id) {
        Some(project) => format!("{project}{}", short.id(id)),
        None => handle.to_string(),
    }
}

pub fn task_table(tasks: &[Task], claims: &[Claim], now: Micros, short: &ShortIds) {
    if tasks.is_empty() {
        println!("no tasks");
        return;
    }
    let claim_of: std::collections::HashMap<&str, &Claim> =
        claims.iter().map(|c| (c.task_id.as_str(), c)).collect();
    println!(
        "{:<24} {:<3} {:<10} {:<9} {:<14} TITLE",
        "HANDLE", "PRI", "PHASE", "STATUS", "CLAIM"
    );
    for t in tasks {
        let claim = match claim_of.get(t.id.as_str()) {
            Some(c) if c.is_live(now) => cell(&c.claimant, 14),
            Some(_) => "stale".to_string(),
            None => String::new(),
        };
        println!(
            "{:<24} {:<3} {:<10} {:<9} {:<14} {}",
            cell(&short.handle(&t.id, t.project.as_deref()), 24),
            priority_str(t.priority),
            cell(&t.phase, 10),
            t.status.as_str(),
            claim,
            crate::sanitize::one_line(&t.title)
        );
    }
}

pub fn candidate_table(tasks: &[Task], ranking: &[Candidate], short: &ShortIds) {
    if ranking.is_empty() {
        println!("nothing ready");
        return;
    }
    println!(
        "{:<4} {:<24} {:<3} {:<4} {:>8} {:>7} TITLE",
        "RANK", "HANDLE", "PRI", "INH", "RELEASES", "URGENCY"
    );
    for (i, c) in ranking.iter().enumerate() {
        let t = &tasks[c.index];
        println!(
            "{:<4} {:<24} {:<3} {:<4} {:>8} {:>7.1} {}",
            i + 1,
            cell(&short.handle(&t.id, t.project.as_deref()), 24),
            priority_str(t.priority),
            priority_str(c.inherited_priority),
            c.releases,
            c.urgency,
            crate::sanitize::one_line(&t.title)
        );
    }
}

pub fn claim_table(claims: &[Claim], now: Micros, short: &ShortIds) {
    if claims.is_empty() {
        println!("no claims");
        return;
    }
    println!(
        "{:<24} {:<20} {:>6} {:<12} WORKTREE",
        "HANDLE", "CLAIMANT", "FENCE", "LEASE"
    );
    for c in claims {
        let lease = if c.is_live(now) {
            when::span(c.lease_until - now)
        } else {
            format!("stale {}", when::span(now - c.lease_until))
        };
        println!(
            "{:<24} {:<20} {:>6} {:<12} {}",
            cell(&short_handle(short, &c.handle, &c.task_id), 24),
            cell(&c.claimant, 20),
            c.fence,
            lease,
            c.worktree.as_deref().unwrap_or("-")
        );
    }
}

pub fn ledger_table(entries: &[LedgerEntry]) {
    for e in entries {
        let detail = match &e.detail {
            Value::Object(m) if m.is_empty() => String::new(),
            v => v.to_string(),
        };
        println!(
            "{}  {:<16} {:<20} {:>6} {}",
            when::short(e.at),
            e.kind,
            e.actor.as_deref().unwrap_or("-"),
            e.fence.map(|f| f.to_string()).unwrap_or_default(),
            detail
        );
    }
}

pub fn task_detail(
    t: &Task,
    dependents: &[String],
    claim: Option<&Claim>,
    ledger: &[LedgerEntry],
    now: Micros,
) {
    println!("{}  {}", t.handle(), crate::sanitize::one_line(&t.title));
    println!("  status    {} (phase {})", t.status.as_str(), t.phase);
    println!("  priority  {}", priority_str(t.priority));
    println!("  uuid      {}", t.uuid);
    if let Some(d) = t.due {
        println!("  due       {}", when::short(d));
    }
    if !t.tags.is_empty() {
        println!("  tags      {}", t.tags.join(" "));
    }
    if !t.depends.is_empty() {
        println!("  waits on  {}", t.depends.join(" "));
    }
    if !dependents.is_empty() {
        println!("  unblocks  {}", dependents.join(" "));
    }
    if let Some(c) = claim {
        let state = if c.is_live(now) { "live" } else { "stale" };
        println!(
            "  claim     {} (fence {}, {state} until {})",
            c.claimant,
            c.fence,
            when::short(c.lease_until)
        );
    }
    if !t.body.is_empty() {
        println!();
        for line in t.body.lines() {
            println!("  {line}");
        }
    }
    for a in &t.annotations {
        println!("  {} {}", when::short(a.entry), a.description);
    }
    println!();
    ledger_table(ledger);
}

pub fn item_table(items: &[Item], now: Micros) {
    if items.is_empty() {
        println!("no steering items");
        return;
    }
    println!(
        "{:<11} {:<9} {:<28} {:>7} {:>5} TEXT",
        "KEY", "STATE", "TARGET", "AGE", "SHOWN"
    );
    for i in items {
        println!(
            "{:<11} {:<9} {:<28} {:>7} {:>5} {}",
            i.key,
            i.state.as_str(),
            cell(&i.target.to_string(), 28),
            when::span(now - i.created),
            i.shown,
            crate::sanitize::one_line(&i.text)
        );
    }
}

pub fn directive_line(d: &Directive) -> String {
    let pol = match d.polarity {
        crate::steer::grammar::Polarity::Ack => "ack",
        crate::steer::grammar::Polarity::Nack => "nack",
    };
    if d.problem.is_some() {
        return format!("line {}: {pol} without a key (keyless)", d.line);
    }
    let body = d.body.as_deref().unwrap_or("");
    format!(
        "line {}: {pol} {}: {}",
        d.line,
        d.keys.join(", "),
        body.replace('\n', " / ")
    )
}

pub fn outcome_line(o: &Outcome) -> String {
    let what = match o.effect {
        Effect::Acked => "acked",
        Effect::Refused => "refused",
        Effect::NoReason => "NACK without a reason: recorded, still pending",
        Effect::AlreadyClosed => "already closed: recorded, state unchanged",
        Effect::UnknownKey => "unknown key: recorded, nothing retired",
        Effect::NotAddressed => {
            "addressed to another lane, session or worktree: recorded, state unchanged"
        }
        Effect::Duplicate => "seen before at this line: nothing new",
    };
    format!("{} (line {}): {what}", o.key, o.line)
}

/// `fleet status` for people, drawn from the JSON document: what needs the operator
/// first (since when, its lane and task, what, and the command that resolves it), then
/// the lanes as an aligned table with headers. Durations are [`when::span`]'s.
pub fn fleet_status_table(doc: &FleetStatus, short: &ShortIds) {
    match doc.supervisor_pid {
        Some(pid) => println!("supervisor running (pid {pid})"),
        None => println!("no supervisor running"),
    }
    println!();
    if doc.needs.is_empty() {
        println!("Nothing needs you.");
    } else {
        println!("Needs you ({}):", doc.needs.len());
        let rows: Vec<Vec<String>> = doc
            .needs
            .iter()
            .map(|n| {
                vec![
                    when::seconds(n.since_seconds_ago),
                    serde_json::to_value(n.kind)
                        .ok()
                        .and_then(|v| v.as_str().map(str::to_string))
                        .unwrap_or_default(),
                    n.lane.clone().unwrap_or_else(|| "-".into()),
                    match (&n.task, &n.task_id) {
                        (Some(h), Some(id)) => short_handle(short, h, id),
                        (Some(h), None) => h.clone(),
                        _ => "-".into(),
                    },
                    terminal_line(&n.what, 100),
                    n.resolve.clone(),
                ]
            })
            .collect();
        print_aligned(
            &["AGO", "NEEDS", "LANE", "TASK", "WHAT", "RESOLVE WITH"],
            &rows,
            "  ",
        );
    }
    if doc.lanes.is_empty() {
        return;
    }
    println!();
    let rows: Vec<Vec<String>> = doc
        .lanes
        .iter()
        .map(|l| {
            let task = match l.claims.first() {
                Some(c) => short_handle(short, &c.task, &c.id),
                None => "-".into(),
            };
            let lease = match l.claims.first() {
                Some(c) if c.stale => "lapsed".into(),
                Some(c) => when::seconds(c.lease_left_seconds),
                None => "-".into(),
            };
            let active = l
                .last_activity_seconds_ago
                .map_or("-".into(), |a| format!("{} ago", when::seconds(a)));
            let tokens = match l.budget.lane.limit {
                Some(limit) => format!("{}/{limit}", l.budget.lane.used),
                None => l.budget.lane.used.to_string(),
            };
            let mut note = Vec::new();
            if let Some(n) = &l.state_note {
                note.push(terminal_line(n, 80));
            }
            match &l.hold {
                Some(h) if h.until.is_none() => {
                    note.push(format!("paused ({})", h.reason.as_deref().unwrap_or("")))
                }
                Some(h) => note.push(format!(
                    "held {} more; lift with: spice fleet lift {}",
                    when::seconds(h.seconds_left),
                    l.lane
                )),
                None => {}
            }
            if l.restarts > 0 {
                note.push(format!("{} restarts", l.restarts));
            }
            if let Some(e) = &l.last_error {
                note.push(format!("last error: {}", terminal_line(e, 100)));
            }
            vec![
                l.lane.clone(),
                l.profile.clone().unwrap_or_default(),
                l.sandbox.clone().unwrap_or_default(),
                l.state.clone(),
                task,
                lease,
                active,
                l.pending_steering.to_string(),
                tokens,
                note.join("; "),
            ]
        })
        .collect();
    print_aligned(
        &[
            "LANE",
            "PROFILE",
            "SANDBOX",
            "STATE",
            "TASK",
            "LEASE LEFT",
            "ACTIVE",
            "PENDING",
            "TOKENS",
            "NOTE",
        ],
        &rows,
        "",
    );
}

/// Agent or operator text on one line, made safe for the terminal and cut at `max`
/// characters.
fn terminal_line(text: &str, max: usize) -> String {
    let flat = sanitize::one_line(text);
    if flat.chars().count() <= max {
        return flat;
    }
    let cut: String = flat.chars().take(max.saturating_sub(1)).collect();
    format!("{cut}…")
}

/// Prints `rows` under `headers`, each column as wide as its widest cell (the last one
/// not padded), every line starting with `indent`.
fn print_aligned(headers: &[&str], rows: &[Vec<String>], indent: &str) {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for r in rows {
        for (w, c) in widths.iter_mut().zip(r) {
            *w = (*w).max(c.chars().count());
        }
    }
    let line = |cells: Vec<&str>| {
        let last = cells.len().saturating_sub(1);
        let mut out = String::from(indent);
        for (i, (c, w)) in cells.iter().zip(&widths).enumerate() {
            if i == last {
                out.push_str(c);
            } else {
                out.push_str(c);
                out.push_str(&" ".repeat(w - c.chars().count() + 2));
            }
        }
        println!("{}", out.trim_end());
    };
    line(headers.to_vec());
    for r in rows {
        line(r.iter().map(String::as_str).collect());
    }
}

/// A moment as the operator's clock shows it: `14:03:27`.
pub fn clock_time(at: Micros) -> String {
    chrono::DateTime::from_timestamp_micros(at)
        .map(|t| {
            t.with_timezone(&chrono::Local)
                .format("%H:%M:%S")
                .to_string()
        })
        .unwrap_or_default()
}

/// One lane event on one line: time, lane, event, task, detail (agent words made safe
/// for the terminal).
pub fn lane_event_line(e: &LaneEvent, lane_width: usize) -> String {
    let detail = sanitize::for_terminal(&e.detail.replace(['\n', '\r'], " / "));
    format!(
        "{} {:<lane_width$} {:<14} {:<14} {}",
        clock_time(e.at),
        e.lane,
        e.event.as_str(),
        e.task.as_deref().unwrap_or("-"),
        detail
    )
    .trim_end()
    .to_string()
}

/// One lane event as a JSON object (a line of `fleet up --json` and of the log).
pub fn lane_event_json(e: &LaneEvent) -> String {
    sanitize::json_line(&json!({
        "at": when::rfc3339(e.at),
        "lane": e.lane,
        "event": e.event,
        "task": e.task,
        "session": e.session,
        "keys": e.keys,
        "detail": e.detail,
    }))
}
