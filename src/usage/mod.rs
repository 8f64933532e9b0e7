//! `spice usage`: tokens per session, lane, task, phase or day, read from the
//! transcripts themselves, and money only from the operator's price table.
//!
//! This sits above the store and the transcript layer: [`crate::transcript::usage`]
//! says what each line counts (the extraction rules), this module says to whom. A
//! reading is given its [`Source`]s: files with the sessions that wrote them (from the
//! ledger's `launched` and `conversation` entries, [`sources`]), or bare files and
//! directories (the watch rung, no store). Every file is streamed a line at a time;
//! memory is one entry per group (and per model within it) plus one small entry per
//! distinct API call ([`Calls`], shared by the whole reading so a call recorded in two
//! files counts once), never the bytes read.
//!
//! A file several sessions wrote (a resumed conversation) is split between them by
//! time: a line belongs to the last session launched at or before its timestamp.

pub mod prices;

use crate::clock::Micros;
use crate::error::{Error, Result};
use crate::store::{LedgerEntry, SessionUsage, Tokens};
use crate::transcript::event::EventKind;
use crate::transcript::usage::{Calls, Meter};
use prices::Prices;
use serde::Serialize;
use std::collections::BTreeMap;
use std::io::BufRead;
use std::path::{Path, PathBuf};

/// What the groups are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum By {
    Session,
    Lane,
    Task,
    Phase,
    Day,
}

impl std::str::FromStr for By {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<By, String> {
        Ok(match s {
            "session" => By::Session,
            "lane" => By::Lane,
            "task" => By::Task,
            "phase" => By::Phase,
            "day" => By::Day,
            _ => return Err(format!("'{s}': expected session, lane, task, phase or day")),
        })
    }
}

impl By {
    /// Whether grouping this way needs the store (who wrote each file).
    pub fn needs_store(self) -> bool {
        matches!(self, By::Lane | By::Task | By::Phase)
    }
}

/// Who wrote a file from a moment on.
#[derive(Debug, Clone, PartialEq)]
pub struct Writer {
    pub from: Micros,
    pub session: String,
    pub lane: Option<String>,
    pub task: Option<String>,
    pub phase: Option<String>,
}

/// One transcript to read, and whose it is (empty: the file names its own session).
#[derive(Debug, Clone)]
pub struct Source {
    pub path: PathBuf,
    pub writers: Vec<Writer>,
}

/// A session the store knows whose transcript could not be read.
#[derive(Debug, Clone, Serialize)]
pub struct Missing {
    pub session: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    pub why: String,
}

/// Tokens as reported: the four kinds and their total.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Figures {
    pub input: u64,
    pub output: u64,
    pub cache_read: u64,
    pub cache_creation: u64,
    pub total: u64,
}

impl From<Tokens> for Figures {
    fn from(t: Tokens) -> Figures {
        Figures {
            input: t.input,
            output: t.output,
            cache_read: t.cache_read,
            cache_creation: t.cache_creation,
            total: t.total(),
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Group {
    pub key: String,
    /// For `--by session` from the store: the session's lane, task and phase.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lane: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub task: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    pub tokens: Figures,
    pub models: BTreeMap<String, Figures>,
    /// With a price table: what the priced models cost.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cost: Option<f64>,
    /// With a price table: the tokens of models it has no price for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unpriced_tokens: Option<u64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub by: By,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub since: Option<String>,
    pub groups: Vec<Group>,
    pub total: Figures,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cost: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub currency: Option<String>,
    pub files: u64,
    pub bytes: u64,
    pub malformed: u64,
    /// Files that are not transcripts (passed by path or found in a directory).
    pub skipped: Vec<String>,
    pub missing: Vec<Missing>,
}

/// How far a reading has got, for a progress line.
#[derive(Debug, Clone, Copy, Default)]
pub struct Progress {
    pub files: u64,
    pub of_files: u64,
    pub bytes: u64,
}

pub struct Options {
    pub by: By,
    pub since: Option<Micros>,
    pub prices: Option<Prices>,
}

#[derive(Default)]
struct Acc {
    labels: (Option<String>, Option<String>, Option<String>),
    models: BTreeMap<String, Tokens>,
}

/// Reads every source and groups its tokens. `progress` is called after each file and
/// every 64 MiB.
pub fn read(
    sources: &[Source],
    missing: Vec<Missing>,
    opts: &Options,
    progress: &mut dyn FnMut(Progress),
) -> Result<Report> {
    let mut groups: BTreeMap<String, Acc> = BTreeMap::new();
    let mut calls = Calls::default();
    let mut p = Progress {
        of_files: sources.len() as u64,
        ..Progress::default()
    };
    let (mut malformed, mut skipped) = (0, Vec::new());
    for src in sources {
        match read_one(src, opts, &mut calls, &mut groups, &mut p, progress) {
            Ok(m) => malformed += m,
            Err(Skip) => skipped.push(src.path.display().to_string()),
        }
        p.files += 1;
        progress(p);
    }
    let mut report = Report {
        by: opts.by,
        since: opts.since.map(crate::when::rfc3339),
        groups: Vec::new(),
        total: Figures::default(),
        cost: None,
        currency: opts.prices.as_ref().and_then(|p| p.currency.clone()),
        files: p.files - skipped.len() as u64,
        bytes: p.bytes,
        malformed,
        skipped,
        missing,
    };
    let mut total = Tokens::default();
    let mut total_cost = opts.prices.as_ref().map(|_| 0.0);
    for (key, acc) in groups {
        let mut t = Tokens::default();
        let (mut cost, mut unpriced) = (0.0, 0);
        for (model, m) in &acc.models {
            t += *m;
            match opts.prices.as_ref().map(|p| p.of(model)) {
                Some(Some(price)) => cost += price.cost(m),
                Some(None) => unpriced += m.total(),
                None => {}
            }
        }
        total += t;
        if let Some(c) = total_cost.as_mut() {
            *c += cost;
        }
        let priced = opts.prices.is_some();
        report.groups.push(Group {
            key,
            lane: acc.labels.0,
            task: acc.labels.1,
            phase: acc.labels.2,
            tokens: t.into(),
            models: acc.models.into_iter().map(|(k, v)| (k, v.into())).collect(),
            cost: priced.then_some(cost),
            unpriced_tokens: priced.then_some(unpriced),
        });
    }
    report.total = total.into();
    report.cost = total_cost;
    Ok(report)
}

/// Not a transcript.
struct Skip;

fn read_one(
    src: &Source,
    opts: &Options,
    calls: &mut Calls,
    groups: &mut BTreeMap<String, Acc>,
    p: &mut Progress,
    progress: &mut dyn FnMut(Progress),
) -> std::result::Result<u64, Skip> {
    let agent = crate::transcript::detect_file(&src.path).map_err(|_| Skip)?;
    let file = std::fs::File::open(&src.path).map_err(|_| Skip)?;
    let mut reader = std::io::BufReader::with_capacity(1 << 20, file);
    let mut decoder = crate::transcript::decoder(agent);
    let mut meter = Meter::new(agent);
    let stem = src
        .path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut session_named: Option<String> = None;
    let mut writer = src.writers.first();
    let (mut buf, mut events) = (Vec::new(), Vec::new());
    let mut since_report = 0u64;
    for line in 1u64.. {
        buf.clear();
        let n = match reader.read_until(b'\n', &mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n as u64,
        };
        p.bytes += n;
        since_report += n;
        if since_report >= 64 << 20 {
            since_report = 0;
            progress(*p);
        }
        events.clear();
        decoder.feed(buf.strip_suffix(b"\n").unwrap_or(&buf), line, &mut events);
        for e in &events {
            if let EventKind::SessionMeta(m) = &e.kind {
                if m.session_id.is_some() {
                    session_named.clone_from(&m.session_id);
                }
                continue;
            }
            let Some(c) = meter.observe(e, calls) else {
                continue;
            };
            if let Some(t) = c.timestamp {
                writer = src
                    .writers
                    .iter()
                    .rev()
                    .find(|w| w.from <= t)
                    .or(src.writers.first());
            }
            if opts
                .since
                .is_some_and(|s| c.timestamp.is_none_or(|t| t < s))
            {
                continue;
            }
            let session = writer
                .map(|w| w.session.as_str())
                .or(session_named.as_deref())
                .unwrap_or(&stem);
            let key = match opts.by {
                By::Session => session.to_string(),
                By::Lane => label(writer.and_then(|w| w.lane.as_deref())),
                By::Task => label(writer.and_then(|w| w.task.as_deref())),
                By::Phase => label(writer.and_then(|w| w.phase.as_deref())),
                By::Day => c
                    .timestamp
                    .map(|t| crate::when::rfc3339(t)[..10].to_string())
                    .unwrap_or_else(|| "unknown".into()),
            };
            let acc = groups.entry(key).or_insert_with(|| Acc {
                labels: match (opts.by, writer) {
                    (By::Session, Some(w)) => (w.lane.clone(), w.task.clone(), w.phase.clone()),
                    _ => (None, None, None),
                },
                ..Acc::default()
            });
            acc.models
                .entry(c.model.unwrap_or_else(|| "unknown".into()))
                .or_default()
                .apply(&c.delta);
        }
    }
    Ok(decoder.malformed())
}

fn label(v: Option<&str>) -> String {
    v.unwrap_or("-").to_string()
}

/// The files `paths` name: files as given, directories walked for `*.jsonl`, in
/// name order. A path that does not exist is an error naming it.
pub fn files(paths: &[PathBuf]) -> Result<Vec<Source>> {
    let mut out = Vec::new();
    for p in paths {
        let meta =
            std::fs::metadata(p).map_err(|e| Error::input(format!("{}: {e}", p.display())))?;
        if meta.is_dir() {
            let mut found = Vec::new();
            walk(p, &mut found).map_err(|e| Error::input(format!("{}: {e}", p.display())))?;
            found.sort();
            out.extend(found.into_iter().map(|path| Source {
                path,
                writers: Vec::new(),
            }));
        } else {
            out.push(Source {
                path: p.clone(),
                writers: Vec::new(),
            });
        }
    }
    Ok(out)
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let ty = entry.file_type()?;
        let path = entry.path();
        if ty.is_dir() {
            walk(&path, out)?;
        } else if ty.is_file() && path.extension().is_some_and(|e| e == "jsonl") {
            out.push(path);
        }
    }
    Ok(())
}

/// The transcripts the store knows, with the sessions that wrote them: every
/// session's `launched` entry (its task, lane, phase and start), the transcript its
/// `conversation` entries name (else the one its live usage was counted from), read
/// where it is, else from the archive when an `archived` entry names a readable
/// copy (a compressed copy in the state directory's archive is decompressed into
/// memory: the third value keeps it readable while the sources are read), with the
/// sub-agent files Claude Code 2.x keeps beside it. A session with no readable
/// transcript is listed as missing.
pub fn sources(
    ledger: &[LedgerEntry],
    live: &[SessionUsage],
    state_dir: Option<&Path>,
) -> (Vec<Source>, Vec<Missing>, Vec<crate::archive::Opened>) {
    struct S {
        writer: Writer,
        transcript: Option<String>,
        archived: Option<String>,
    }
    let mut sessions: BTreeMap<String, S> = BTreeMap::new();
    let text =
        |e: &LedgerEntry, k: &str| e.detail.get(k).and_then(|v| v.as_str()).map(String::from);
    for e in ledger {
        let Some(actor) = e.actor.clone() else {
            continue;
        };
        match e.kind.as_str() {
            "launched" => {
                sessions.entry(actor.clone()).or_insert_with(|| S {
                    writer: Writer {
                        from: e.at,
                        session: actor,
                        lane: text(e, "lane"),
                        task: Some(e.task_id.clone()),
                        phase: text(e, "phase"),
                    },
                    transcript: None,
                    archived: None,
                });
            }
            "conversation" => {
                if let (Some(s), Some(t)) = (sessions.get_mut(&actor), text(e, "transcript")) {
                    s.transcript = Some(t);
                }
            }
            // The transcript archive's seam: the copy a session's transcript was kept as.
            "archived" => {
                if let Some(s) = sessions.get_mut(&actor) {
                    s.archived = text(e, "archive").or_else(|| text(e, "path"));
                }
            }
            _ => {}
        }
    }
    // A session's live rows include its sub-agents' files: those are found from its
    // transcript below, never taken for it.
    let subagent_file = |p: &str| {
        Path::new(p)
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with("agent-"))
    };
    for u in live.iter().filter(|u| !subagent_file(&u.path)) {
        if let Some(s) = sessions.get_mut(&u.session) {
            if s.transcript.is_none() {
                s.transcript = Some(u.path.clone());
            }
        }
    }
    let mut by_path: BTreeMap<String, Vec<Writer>> = BTreeMap::new();
    let mut missing = Vec::new();
    let mut opened: Vec<crate::archive::Opened> = Vec::new();
    // The archived copy of a transcript that is gone, decompressed (one per file).
    let from_archive = |t: &str, opened: &mut Vec<crate::archive::Opened>| {
        let o = crate::archive::resolve(state_dir, Path::new(t))?;
        let p = o.path().display().to_string();
        opened.push(o);
        Some(p)
    };
    let mut copies: BTreeMap<String, Option<String>> = BTreeMap::new();
    for (_, s) in sessions {
        let readable = |p: &str| Path::new(p).is_file();
        let archived = match &s.transcript {
            Some(t) if !readable(t) => copies
                .entry(t.clone())
                .or_insert_with(|| from_archive(t, &mut opened))
                .clone(),
            _ => None,
        };
        let path = match (&s.transcript, &s.archived) {
            (Some(t), _) if readable(t) => t.clone(),
            _ if archived.is_some() => archived.expect("just checked"),
            (_, Some(a)) if readable(a) && !a.ends_with(".zst") => a.clone(),
            (t, a) => {
                missing.push(Missing {
                    session: s.writer.session.clone(),
                    path: t.clone(),
                    why: match (t, a) {
                        (None, _) => "no transcript recorded for it".into(),
                        (Some(_), Some(a)) => {
                            format!("transcript gone; its archive {a} cannot be read here")
                        }
                        (Some(_), None) => "transcript gone and not archived".into(),
                    },
                });
                continue;
            }
        };
        // Claude Code 2.x records a sub-agent's calls in files of their own beside the
        // session's transcript (the copy in the archive holds the transcript alone).
        if s.transcript.as_deref() == Some(path.as_str()) {
            let since = std::time::SystemTime::UNIX_EPOCH;
            for sub in crate::transcript::discover::claude_subagent_files(Path::new(&path), since) {
                let sub = sub.display().to_string();
                by_path.entry(sub).or_default().push(s.writer.clone());
            }
        }
        by_path.entry(path).or_default().push(s.writer);
    }
    let sources = by_path
        .into_iter()
        .map(|(path, mut writers)| {
            writers.sort_by_key(|w| w.from);
            Source {
                path: PathBuf::from(path),
                writers,
            }
        })
        .collect();
    (sources, missing, opened)
}
