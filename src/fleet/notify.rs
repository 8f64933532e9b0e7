//! Notifications: the operator's own command, run on the lane events they choose, so
//! that an agent needing them reaches them without anyone watching a screen
//! (`notify-send`, ntfy, a webhook through curl, a sound).
//!
//! ```toml
//! # spice.toml
//! [notify]
//! command = ["notify-send", "spice"]      # argv; the event is JSON on stdin and in SPICE_EVENT_*
//! on = ["asking", "merged", "held", "error", "budget", "needs"]   # default: these six
//! per_minute = 6                          # at most this many a minute (default 10)
//! debounce = "10s"                        # the same lane and event again within it: once (default 10s)
//! timeout = "30s"                         # each run's limit (default 30s)
//! ```
//!
//! `on` takes any lane event's name, plus `merged` (a `phase_done` whose branch was
//! merged). Invariants:
//! - one notification per lane per state change: the observer reports a change once,
//!   and the same lane's same event with the same detail again within `debounce` (a
//!   lane flapping between working and asking) is not sent twice;
//! - at most `per_minute` in any minute; what is dropped over the bound is counted and
//!   the next one sent says how many (`suppressed`);
//! - the command runs on a thread of its own, one at a time, in order, through the one
//!   runner (`stage::run`, with its timeout): a slow command never delays the events.

use super::events::{EventKind, LaneEvent};
use crate::config::ConfigError;
use serde::Deserialize;
use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::{Duration, Instant};
use toml::Spanned;

/// The events notified when `on` is not given.
pub const DEFAULT_ON: [&str; 6] = ["asking", "merged", "held", "error", "budget", "needs"];
pub const DEFAULT_PER_MINUTE: u32 = 10;
pub const DEFAULT_DEBOUNCE: Duration = Duration::from_secs(10);
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct NotifyToml {
    command: Spanned<Vec<String>>,
    on: Option<Vec<Spanned<String>>>,
    per_minute: Option<Spanned<i64>>,
    debounce: Option<Spanned<String>>,
    timeout: Option<Spanned<String>>,
}

/// The repository's `[notify]`.
#[derive(Debug, Clone, PartialEq)]
pub struct NotifyConfig {
    /// Never empty.
    pub command: Vec<String>,
    /// Event names (and `merged`).
    pub on: Vec<String>,
    pub per_minute: u32,
    pub debounce: Duration,
    pub timeout: Duration,
}

/// Every name `on` accepts.
fn known(name: &str) -> bool {
    name == "merged" || name == "budget" || EventKind::parse(name).is_some()
}

/// Parses the text of a `spice.toml` shown as `file`: `None` without `[notify]`.
pub fn parse(file: &Path, text: &str) -> Result<Option<NotifyConfig>, Vec<ConfigError>> {
    let Some(n) = crate::config::repo::section::<NotifyToml>(file, text, "notify")? else {
        return Ok(None);
    };
    let mut errs = Vec::new();
    let mut at = |offset: usize, why: String| errs.push(ConfigError::at(file, text, offset, why));
    if n.command
        .get_ref()
        .first()
        .is_none_or(|p| p.trim().is_empty())
    {
        at(
            n.command.span().start,
            "notify.command: name a program, e.g. [\"notify-send\", \"spice\"]".into(),
        );
    }
    let mut on = Vec::new();
    match &n.on {
        None => on.extend(DEFAULT_ON.iter().map(|s| s.to_string())),
        Some(list) => {
            for e in list {
                if known(e.get_ref()) {
                    on.push(e.get_ref().clone());
                } else {
                    let names: Vec<&str> = EventKind::ALL.iter().map(|k| k.as_str()).collect();
                    at(
                        e.span().start,
                        format!(
                            "notify.on: unknown event '{}' (one of: merged, budget, {})",
                            e.get_ref(),
                            names.join(", ")
                        ),
                    );
                }
            }
        }
    }
    let per_minute = match &n.per_minute {
        None => DEFAULT_PER_MINUTE,
        Some(p) if (1..=600).contains(p.get_ref()) => *p.get_ref() as u32,
        Some(p) => {
            at(
                p.span().start,
                format!(
                    "notify.per_minute: {} is not between 1 and 600",
                    p.get_ref()
                ),
            );
            DEFAULT_PER_MINUTE
        }
    };
    let mut duration = |v: &Option<Spanned<String>>, field: &str, default: Duration| match v {
        None => default,
        Some(s) => match crate::when::parse_duration(s.get_ref()) {
            Ok(d) if d <= Duration::from_secs(3600) => d,
            Ok(_) => {
                at(
                    s.span().start,
                    format!("notify.{field}: {} exceeds the maximum of 1h", s.get_ref()),
                );
                default
            }
            Err(e) => {
                at(s.span().start, format!("notify.{field}: {e}"));
                default
            }
        },
    };
    let debounce = duration(&n.debounce, "debounce", DEFAULT_DEBOUNCE);
    let timeout = duration(&n.timeout, "timeout", DEFAULT_TIMEOUT);
    if !errs.is_empty() {
        errs.sort_by_key(|e| (e.line, e.col));
        return Err(errs);
    }
    Ok(Some(NotifyConfig {
        command: n.command.into_inner(),
        on,
        per_minute,
        debounce,
        timeout,
    }))
}

/// The `[notify]` that `rev` carries (`git show`), shown as `spice.toml (at REV)`.
pub fn at_rev(repo: &Path, rev: &str) -> Result<Option<NotifyConfig>, Vec<ConfigError>> {
    use crate::config::repo::AtRev;
    match crate::config::repo::at_rev(repo, rev)? {
        // A base with no commit yet carries no configuration.
        AtRev::NoCommit | AtRev::NoFile => Ok(None),
        AtRev::Text { shown, text } => parse(Path::new(&shown), &text),
    }
}

/// The name an event is notified under: `merged` for a phase done whose branch merged.
pub fn name_of(e: &LaneEvent) -> &'static str {
    if e.event == EventKind::PhaseDone && e.detail.contains("branch merged") {
        "merged"
    } else {
        e.event.as_str()
    }
}

/// Which events go out: the configured names, debounced per lane, bounded per minute.
#[derive(Debug)]
pub struct Gate {
    on: Vec<String>,
    per_minute: u32,
    debounce: Duration,
    /// (lane, event, detail) → when it was last sent.
    last: HashMap<(String, String, String), Instant>,
    sent: VecDeque<Instant>,
    suppressed: u64,
}

/// What the gate decided for one event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Send it; `suppressed` were dropped over the bound since the last one sent.
    Send { suppressed: u64 },
    /// Not a chosen event, or the same one again within the debounce.
    Skip,
    /// Over the per-minute bound: counted.
    Dropped,
}

impl Gate {
    pub fn new(cfg: &NotifyConfig) -> Gate {
        Gate {
            on: cfg.on.clone(),
            per_minute: cfg.per_minute,
            debounce: cfg.debounce,
            last: HashMap::new(),
            sent: VecDeque::new(),
            suppressed: 0,
        }
    }

    pub fn offer(&mut self, e: &LaneEvent, now: Instant) -> Verdict {
        let name = name_of(e);
        // `merged` also matches `phase_done` when only that was chosen.
        let chosen = self.on.iter().any(|o| o == name)
            || (name == "merged" && self.on.iter().any(|o| o == "phase_done"));
        if !chosen {
            return Verdict::Skip;
        }
        let key = (e.lane.clone(), name.to_string(), e.detail.clone());
        if self
            .last
            .get(&key)
            .is_some_and(|t| now.saturating_duration_since(*t) < self.debounce)
        {
            return Verdict::Skip;
        }
        while self
            .sent
            .front()
            .is_some_and(|t| now.saturating_duration_since(*t) >= Duration::from_secs(60))
        {
            self.sent.pop_front();
        }
        if self.sent.len() >= self.per_minute as usize {
            self.suppressed += 1;
            return Verdict::Dropped;
        }
        self.sent.push_back(now);
        self.last.insert(key, now);
        Verdict::Send {
            suppressed: std::mem::take(&mut self.suppressed),
        }
    }
}

/// The event as the command gets it: one JSON object.
pub fn event_json(e: &LaneEvent, suppressed: u64) -> serde_json::Value {
    let at = chrono::DateTime::from_timestamp_micros(e.at)
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true));
    serde_json::json!({
        "at": at,
        "lane": e.lane,
        "event": e.event.as_str(),
        "kind": name_of(e),
        "task": e.task,
        "session": e.session,
        "keys": e.keys,
        "detail": e.detail,
        "suppressed": suppressed,
    })
}

/// Runs the command for the events it is handed, one at a time, on its own thread.
pub struct Notifier {
    gate: Gate,
    tx: Option<mpsc::Sender<serde_json::Value>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Notifier {
    /// Starts the thread; commands run in `cwd` (the repository).
    pub fn start(cfg: NotifyConfig, cwd: PathBuf) -> Notifier {
        let (tx, rx) = mpsc::channel::<serde_json::Value>();
        let gate = Gate::new(&cfg);
        let thread = std::thread::Builder::new()
            .name("spice-notify".into())
            .spawn(move || {
                for event in rx {
                    run_one(&cfg, &cwd, &event);
                }
            })
            .ok();
        Notifier {
            gate,
            tx: Some(tx),
            thread,
        }
    }

    /// Offers one event: sent (in order, off this thread) when the gate lets it.
    pub fn offer(&mut self, e: &LaneEvent) {
        if let Verdict::Send { suppressed } = self.gate.offer(e, Instant::now()) {
            if let Some(tx) = &self.tx {
                let _ = tx.send(event_json(e, suppressed));
            }
        }
    }

    /// Waits for what was handed over to run (each run is bounded by its timeout).
    pub fn finish(mut self) {
        self.tx.take();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn run_one(cfg: &NotifyConfig, cwd: &Path, event: &serde_json::Value) {
    let s = |k: &str| event[k].as_str().unwrap_or("").to_string();
    let env = vec![
        ("SPICE_EVENT".to_string(), s("kind")),
        ("SPICE_EVENT_LANE".to_string(), s("lane")),
        ("SPICE_EVENT_TASK".to_string(), s("task")),
        ("SPICE_EVENT_DETAIL".to_string(), s("detail")),
        ("SPICE_EVENT_JSON".to_string(), event.to_string()),
    ];
    let outcome = crate::stage::run::run(crate::stage::run::Job {
        argv: &cfg.command,
        cwd: cwd.to_path_buf(),
        env,
        stdin: format!("{event}\n").into_bytes(),
        timeout: cfg.timeout,
        on_line: None,
        confine: None,
    });
    if !outcome.passed() {
        tracing::warn!(
            target: "spice::fleet::notify",
            "notify command {:?} for {} on lane {}: {}",
            cfg.command.join(" "),
            s("kind"),
            s("lane"),
            outcome.summary(cfg.timeout)
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(lane: &str, kind: EventKind, detail: &str) -> LaneEvent {
        LaneEvent {
            at: 0,
            lane: lane.into(),
            event: kind,
            task: None,
            session: None,
            keys: Vec::new(),
            detail: detail.into(),
        }
    }

    fn cfg(text: &str) -> Result<Option<NotifyConfig>, Vec<String>> {
        parse(Path::new("spice.toml"), text).map_err(|e| e.iter().map(|e| e.to_string()).collect())
    }

    #[test]
    fn the_section_is_strict_and_located() {
        assert_eq!(cfg("[gate]\n").unwrap(), None);
        let c = cfg("[notify]\ncommand = [\"notify-send\"]\n")
            .unwrap()
            .unwrap();
        assert_eq!(c.on, DEFAULT_ON.map(String::from).to_vec());
        assert_eq!((c.per_minute, c.debounce), (10, DEFAULT_DEBOUNCE));
        let e = cfg("[notify]\ncommand = []\non = [\"asking\", \"nope\"]\nper_minute = 0\ndebounce = \"soon\"\n")
            .unwrap_err();
        assert_eq!(e.len(), 4, "{e:?}");
        assert!(e[0].starts_with("spice.toml:2:11: notify.command"), "{e:?}");
        assert!(
            e[1].starts_with("spice.toml:3:17: notify.on: unknown event 'nope'"),
            "{e:?}"
        );
        assert!(
            e[2].starts_with("spice.toml:4:14: notify.per_minute"),
            "{e:?}"
        );
        assert!(
            e[3].starts_with("spice.toml:5:12: notify.debounce"),
            "{e:?}"
        );
        let e = cfg("[notify]\ncommand = [\"x\"]\nsound = true\n").unwrap_err();
        assert!(e[0].contains("unknown field `sound`"), "{e:?}");
    }

    #[test]
    fn one_per_change_debounced_and_bounded_per_minute() {
        let c = NotifyConfig {
            command: vec!["x".into()],
            on: vec!["asking".into(), "merged".into()],
            per_minute: 2,
            debounce: Duration::from_secs(10),
            timeout: DEFAULT_TIMEOUT,
        };
        let mut g = Gate::new(&c);
        let t0 = Instant::now();
        let s = |n: u64| t0 + Duration::from_secs(n);
        let ask = event("a", EventKind::Asking, "needs you: which one?");
        assert_eq!(g.offer(&ask, s(0)), Verdict::Send { suppressed: 0 });
        assert_eq!(
            g.offer(&ask, s(5)),
            Verdict::Skip,
            "the same again, debounced"
        );
        assert_eq!(
            g.offer(&event("a", EventKind::Waiting, "done"), s(5)),
            Verdict::Skip,
            "not chosen"
        );
        let merged = event("b", EventKind::PhaseDone, "todo → review, branch merged");
        assert_eq!(g.offer(&merged, s(6)), Verdict::Send { suppressed: 0 });
        let other = event("c", EventKind::Asking, "needs you: permission");
        assert_eq!(g.offer(&other, s(7)), Verdict::Dropped, "two a minute");
        assert_eq!(g.offer(&ask, s(30)), Verdict::Dropped);
        assert_eq!(g.offer(&other, s(61)), Verdict::Send { suppressed: 2 });
        assert_eq!(
            g.offer(&ask, s(62)),
            Verdict::Dropped,
            "s(6) and s(61) within a minute"
        );
        assert_eq!(g.offer(&ask, s(67)), Verdict::Send { suppressed: 1 });
    }
}
