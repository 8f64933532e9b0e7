//! `spice fleet up` in the foreground ([`run`]), and its report as it happens. An
//! observer thread ([`crate::fleet::events::Observer`], woken by the store's data
//! version) turns what the lanes write to the store into lane events, which go through
//! `tracing` to two sinks: the terminal and `<state>/logs/fleet.log`.
//!
//! Output contract: each event is one line on **stderr** (time, lane, event, task,
//! detail; with `--json`, one JSON object: `at`, `lane`, `event`, `task`, `session`,
//! `keys`, `detail`), written with one `write` to the unbuffered stderr, so it reaches
//! a pipe or file the moment it happens, terminal or not. The log file always holds
//! the JSON objects (10 MiB a file, three files). stdout keeps what it always carried,
//! the end-of-run report, so a script that reads it as one document is unaffected.
//! A supervisor without a terminal (`--detach`'s, or one whose terminal closed: see
//! `hangup`) writes the events to the log only.

use super::super::{render, Env};
use crate::config::fleet::LaneConfig;
use crate::error::{Error, Result};
use crate::fleet::events::logfile::{self, LogFile};
use crate::fleet::events::{EventKind, LaneEvent, Observer};
use crate::fleet::notify::{Notifier, NotifyConfig};
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tracing::field::{Field, Visit};
use tracing::{Event, Metadata, Subscriber};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};

/// `spice fleet up` in the foreground: checks what the lanes' bases carry, runs the
/// supervisor until it stops, and prints its report.
pub(super) fn run(env: &Env, until_idle: bool, json: bool, log_only: bool) -> Result<()> {
    super::super::launch_depth()?;
    let (repo, fleet) = super::load(env)?;
    super::runnable(&repo, &fleet)?;
    for (l, e) in fleet.unavailable() {
        eprintln!("spice: lane {} will not run: {e}", l.name);
    }
    let home = std::env::var_os("HOME")
        .map(std::path::PathBuf::from)
        .unwrap_or_default();
    let opts = super::options(env, repo, home, until_idle)?;
    let unborn = crate::fleet::lane::unborn_bases(&fleet, &opts);
    if !unborn.is_empty() {
        return Err(Error::input(super::check::no_base(&unborn)));
    }
    // The stage hooks each lane's base carries: a bad [hooks] stops the fleet here.
    let mut hooks = crate::fleet::lane::check_hooks(&fleet, &opts);
    hooks.extend(crate::fleet::check_housekeeping(&fleet, &opts));
    if let Some(last) = hooks.pop() {
        for e in &hooks {
            eprintln!("spice: {e}");
        }
        return Err(Error::from(last));
    }
    for e in crate::fleet::lane::check_beds(&fleet, &opts) {
        eprintln!("spice: {e} (the fleet runs; its worktrees start without a test bed)");
    }
    // The operator's [notify]: a bad one stops the fleet here, like [hooks].
    let notify = match crate::fleet::notify::at_rev(&opts.repo, &opts.base) {
        Ok(n) => n.map(|n| (n, opts.repo.clone())),
        Err(mut errs) => {
            let last = errs.pop().expect("an error");
            for e in &errs {
                eprintln!("spice: {e}");
            }
            return Err(Error::from(last));
        }
    };
    let stop = super::stop_on_signals();
    super::hangup::survive(&env.state_dir);
    let reporter = Reporter::start(env, json, !log_only, &fleet.lanes, notify)?;
    let reports = crate::fleet::up(&fleet, &opts, stop);
    if let Some(r) = reporter {
        r.finish();
    }
    let reports = reports?;
    if json {
        render::print_json(&reports);
    } else {
        for r in &reports {
            println!(
                "{}: claimed {}; {} session(s){}",
                r.lane,
                if r.claimed.is_empty() {
                    "nothing".to_string()
                } else {
                    r.claimed.join(", ")
                },
                r.sessions.len(),
                r.error
                    .as_deref()
                    .map(|e| format!("; error: {e}"))
                    .unwrap_or_default()
            );
        }
    }
    // A run that was to end by itself did not do its work if a lane stopped on an
    // error: say so in the exit status, not only in the report.
    match super::lanes_failed(&reports) {
        Some(failed) if until_idle => Err(Error::Other(failed)),
        _ => Ok(()),
    }
}

/// The `tracing` target lane events are emitted under.
pub const TARGET: &str = "spice::fleet::events";
/// How often the observer asks the store whether anyone committed.
const POLL: Duration = Duration::from_millis(100);

/// The observer thread and its sinks, for one run of `fleet up`.
pub(in crate::cli) struct Reporter {
    done: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Reporter {
    /// Starts reporting, unless another supervisor runs here (`fleet up` is about to
    /// be refused, and that supervisor's events are not this command's to print).
    pub(in crate::cli) fn start(
        env: &Env,
        json: bool,
        term: bool,
        lanes: &[LaneConfig],
        notify: Option<(NotifyConfig, std::path::PathBuf)>,
    ) -> Result<Option<Reporter>> {
        if crate::fleet::running(&env.state_dir).is_some() {
            return Ok(None);
        }
        let path = env.state_dir.join("logs").join("fleet.log");
        let log =
            LogFile::open(&path, logfile::LIMIT, logfile::FILES).map_err(|source| Error::Io {
                context: format!("failed to open {}", path.display()),
                source,
            })?;
        let sink = Sink {
            json,
            term,
            width: lanes.iter().map(|l| l.name.len()).max().unwrap_or(1),
            log: Mutex::new(log),
            log_failed: AtomicBool::new(false),
        };
        let dispatch = tracing::Dispatch::new(tracing_subscriber::registry().with(sink));
        // Anything else the library reports through tracing reaches the same sinks.
        crate::cli::report::redirect(Some(dispatch.clone()));
        let observer = Observer::new(env.authority()?)?;
        let done = Arc::new(AtomicBool::new(false));
        let thread = {
            let done = done.clone();
            std::thread::Builder::new()
                .name("spice-lane-events".into())
                .spawn(move || {
                    tracing::dispatcher::with_default(&dispatch, || {
                        // The operator's notifications hear every event as it is told.
                        let mut notifier = notify.map(|(cfg, cwd)| Notifier::start(cfg, cwd));
                        let told = observer.watch(POLL, &done, |e| {
                            emit(e);
                            if let Some(n) = notifier.as_mut() {
                                n.offer(e);
                            }
                        });
                        if let Err(e) = told {
                            eprintln!("spice: lane events stopped: {e}");
                        }
                        if let Some(n) = notifier {
                            n.finish();
                        }
                    })
                })
                .map_err(|source| Error::Io {
                    context: "failed to start the lane-event observer".into(),
                    source,
                })?
        };
        Ok(Some(Reporter {
            done,
            thread: Some(thread),
        }))
    }

    /// Reports what the stopped lanes wrote last, then ends the observer.
    pub(in crate::cli) fn finish(mut self) {
        crate::cli::report::redirect(None);
        self.done.store(true, Ordering::SeqCst);
        crate::store::nudge();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn emit(e: &LaneEvent) {
    let keys = e.keys.join(" ");
    tracing::info!(
        target: TARGET,
        at = e.at,
        lane = e.lane.as_str(),
        event = e.event.as_str(),
        task = e.task.as_deref(),
        session = e.session.as_deref(),
        keys = keys.as_str(),
        detail = e.detail.as_str(),
    );
}

/// Writes each event to stderr (a line or a JSON object) and to the log (JSON).
struct Sink {
    json: bool,
    /// Whether events go to stderr as well as to the log.
    term: bool,
    /// The longest lane name, so the columns line up.
    width: usize,
    log: Mutex<LogFile>,
    log_failed: AtomicBool,
}

impl<S: Subscriber> Layer<S> for Sink {
    fn enabled(&self, m: &Metadata<'_>, _: Context<'_, S>) -> bool {
        crate::cli::report::reported(m)
    }

    fn on_event(&self, event: &Event<'_>, _: Context<'_, S>) {
        let mut f = Fields::default();
        event.record(&mut f);
        let lane_event = f
            .lane_event()
            .filter(|_| event.metadata().target() == TARGET);
        let (line, json) = match &lane_event {
            Some(e) => (
                render::lane_event_line(e, self.width),
                render::lane_event_json(e),
            ),
            None => f.generic(event.metadata()),
        };
        if self.term && !super::hangup::hung_up() {
            let shown = if self.json { &json } else { &line };
            // One write per line: a reader of the pipe never sees half of one.
            let _ = std::io::stderr()
                .lock()
                .write_all(format!("{shown}\n").as_bytes());
        }
        let mut log = self.log.lock().unwrap_or_else(|p| p.into_inner());
        if let Err(e) = log.write_all(format!("{json}\n").as_bytes()) {
            if !self.log_failed.swap(true, Ordering::SeqCst) {
                eprintln!("spice: failed to write {}: {e}", log.path().display());
            }
        }
    }
}

/// An event's fields as recorded.
#[derive(Default)]
struct Fields {
    at: Option<i64>,
    values: Vec<(&'static str, String)>,
}

impl Visit for Fields {
    fn record_i64(&mut self, field: &Field, v: i64) {
        match field.name() {
            "at" => self.at = Some(v),
            name => self.values.push((name, v.to_string())),
        }
    }
    fn record_str(&mut self, field: &Field, v: &str) {
        self.values.push((field.name(), v.to_string()));
    }
    fn record_debug(&mut self, field: &Field, v: &dyn std::fmt::Debug) {
        self.values.push((field.name(), format!("{v:?}")));
    }
}

impl Fields {
    fn get(&self, name: &str) -> Option<&str> {
        self.values
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.as_str())
    }

    fn lane_event(&self) -> Option<LaneEvent> {
        Some(LaneEvent {
            at: self.at?,
            lane: self.get("lane")?.to_string(),
            event: EventKind::parse(self.get("event")?)?,
            task: self.get("task").map(str::to_string),
            session: self.get("session").map(str::to_string),
            keys: self
                .get("keys")
                .unwrap_or("")
                .split_whitespace()
                .map(str::to_string)
                .collect(),
            detail: self.get("detail").unwrap_or("").to_string(),
        })
    }

    /// Any other event: `time LEVEL target: message field=value…`, or JSON (what the
    /// library reports for the operator has the target `spice`: `INFO spice: …`).
    fn generic(&self, m: &Metadata<'_>) -> (String, String) {
        let now = chrono::Utc::now().timestamp_micros();
        let at = self.at.unwrap_or(now);
        let mut obj = serde_json::Map::new();
        obj.insert("at".into(), crate::when::rfc3339(at).into());
        obj.insert("level".into(), m.level().as_str().to_lowercase().into());
        obj.insert("target".into(), m.target().into());
        let mut text = format!("{} {} {}:", render::clock_time(at), m.level(), m.target());
        for (name, value) in &self.values {
            obj.insert((*name).into(), value.clone().into());
            if *name == "message" {
                text.push_str(&format!(" {value}"));
            } else {
                text.push_str(&format!(" {name}={value}"));
            }
        }
        (
            crate::transcript::sanitize::for_terminal(&text),
            crate::transcript::sanitize::json_line(&obj),
        )
    }
}
