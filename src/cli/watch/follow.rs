//! `spice watch`'s loop: the files named and every transcript under the directories
//! named, followed until interrupted, woken by the file system (inotify, through
//! `notify`) instead of re-reading everything on a timer.
//!
//! Invariants:
//! - Files are followed by identity ([`Follower`]): a file renamed inside a followed
//!   directory goes on under its new name, nothing read again; a file renamed away from
//!   a named path (rotation) or deleted is read to its end first.
//! - What happens to a file is said once, in text and as a `--json` record
//!   (`{"file":…,"kind":"reset"|"rotated"|"renamed"|"removed",…}`): a deleted file is
//!   not an error on every tick. A file named on the command line that disappears is
//!   waited for; one found in a directory is dropped (and found again if it returns).
//! - Only the files an event names are read; every file is still looked at every
//!   [`SWEEP`] (a missed or overflowed event queue, a file system without inotify), and
//!   when no watcher can be had at all, every [`POLL`] as before.
//! - What a decoder skipped is said as it is met: each kind of record it does not
//!   know, once, with its first line (`"kind":"unread"`), and lines that are not
//!   records (`"kind":"malformed"`, with the count so far).

use crate::error::Result;
use crate::transcript::event::Event;
use crate::transcript::follow::{FileId, Follower, Restart};
use crate::transcript::render::{self, Style};
use crate::transcript::{jsonl, sanitize};
use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

/// How often every followed file is looked at even without an event.
const SWEEP: Duration = Duration::from_secs(5);
/// How often everything is re-read when the file system cannot be watched.
const POLL: Duration = Duration::from_millis(250);
/// The stdout buffer, and the size of the blocks of `--json` lines written to it.
const JSON_BLOCK: usize = 1 << 16;

pub(super) struct Options {
    pub json: bool,
    pub once: bool,
    pub style: Style,
}

/// One followed file and what it decodes as.
struct Followed {
    /// The path as named or found: printed, and the `"file"` of `--json` lines.
    shown: PathBuf,
    /// The path a symbolic link names points to, when it is one (events name it).
    real: Option<PathBuf>,
    label: String,
    follower: Follower,
    /// The start of its `--json` lines; `None` when the path is not UTF-8 (the lines
    /// are then `null`, as serde has it).
    json_prefix: Option<Vec<u8>>,
    /// Found in a followed directory (else named on the command line).
    in_dir: bool,
    /// Nothing is at its path (it was deleted or renamed away, and read to its end).
    missing: bool,
    /// The last read error said, so that it is said once.
    problem: Option<String>,
    /// How many unknown record kinds and malformed lines were said already.
    said: (usize, u64),
}

impl Followed {
    /// What the decoder skipped since the last call, to be said.
    fn skipped(&mut self) -> Vec<Record<'static>> {
        let unread = self.follower.unread();
        let mut news: Vec<Record> = unread.kinds()[self.said.0..]
            .iter()
            .map(|k| Record::Unread {
                kind: k.kind.clone(),
                line: k.first_line,
            })
            .collect();
        self.said.0 = unread.kinds().len();
        let malformed = self.follower.malformed();
        if malformed > self.said.1 {
            news.push(Record::Malformed {
                new: malformed - self.said.1,
                total: malformed,
            });
            self.said.1 = malformed;
        }
        news
    }
}

fn absolute(p: &Path) -> PathBuf {
    std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf())
}

fn open(shown: &Path, in_dir: bool) -> Result<Followed> {
    let agent = crate::transcript::detect_file(shown)?;
    let real = std::fs::canonicalize(shown)
        .ok()
        .filter(|r| *r != absolute(shown));
    Ok(Followed {
        shown: shown.to_path_buf(),
        real,
        label: label(shown),
        follower: Follower::new(shown, crate::transcript::decoder_fn(agent), None),
        json_prefix: jsonl::file_prefix(shown),
        in_dir,
        missing: false,
        problem: None,
        said: (0, 0),
    })
}

fn label(p: &Path) -> String {
    sanitize::for_terminal(
        &p.file_name()
            .map(|n| n.to_string_lossy().to_string())
            .unwrap_or_default(),
    )
}

/// Every transcript under `dir` (sessions, sibling agent files, subagents/).
pub(super) fn jsonl_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "jsonl") {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// What wakes the loop.
enum Wake {
    Events {
        rx: mpsc::Receiver<notify::Result<notify::Event>>,
        // Dropping it stops the events.
        _watcher: notify::RecommendedWatcher,
    },
    Timer,
}

impl Wake {
    /// Watches `dirs` (their whole trees) and the directories holding `files` (a file
    /// is replaced by name, so its directory is what says so).
    fn new(dirs: &[PathBuf], files: &[PathBuf]) -> Wake {
        use notify::{RecursiveMode, Watcher};
        let (tx, rx) = mpsc::channel();
        let watched = notify::recommended_watcher(move |ev| {
            let _ = tx.send(ev);
        })
        .and_then(|mut w| {
            for d in dirs {
                w.watch(&absolute(d), RecursiveMode::Recursive)?;
            }
            let mut parents = BTreeSet::new();
            for f in files {
                for p in [Some(absolute(f)), std::fs::canonicalize(f).ok()]
                    .into_iter()
                    .flatten()
                {
                    if let Some(parent) = p.parent() {
                        parents.insert(parent.to_path_buf());
                    }
                }
            }
            for p in parents {
                w.watch(&p, RecursiveMode::NonRecursive)?;
            }
            Ok(w)
        });
        match watched {
            Ok(w) => Wake::Events { rx, _watcher: w },
            Err(e) => {
                eprintln!(
                    "spice: cannot watch for file changes ({e}): reading every {} ms instead",
                    POLL.as_millis()
                );
                Wake::Timer
            }
        }
    }
}

/// What the loop should look at next.
#[derive(Default)]
struct Todo {
    /// Re-list the followed directories.
    rescan: bool,
    /// Poll every followed file.
    all: bool,
    /// Poll these (absolute paths, the map's keys).
    files: BTreeSet<PathBuf>,
}

struct Watch {
    dirs: Vec<PathBuf>,
    /// `dirs`, absolute, as events name them.
    dirs_abs: Vec<PathBuf>,
    followed: BTreeMap<PathBuf, Followed>,
    opts: Options,
    out: std::io::BufWriter<std::io::StdoutLock<'static>>,
    /// `--json` lines, written directly (see jsonl) and handed to `out` in blocks as
    /// large as its buffer, which then passes them on without copying them.
    json: Vec<u8>,
    /// One poll's events (at most 8 MiB of lines), the allocation kept between polls.
    events: Vec<Event>,
    /// Files in the directories that could not be opened, with what was said.
    unreadable: std::collections::HashMap<PathBuf, String>,
}

/// The reader of stdout went away (a closed pipe): the watch ends quietly.
struct Closed;

/// Every followed file is held open (a file renamed away or deleted is read to its
/// end), so the soft limit on open files, often 1024, is raised to the hard one.
fn raise_open_files_limit() {
    use nix::libc::{getrlimit, rlimit, setrlimit, RLIMIT_NOFILE};
    let mut lim = rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: both calls only read or write the struct passed to them.
    unsafe {
        if getrlimit(RLIMIT_NOFILE, &mut lim) == 0 && lim.rlim_cur < lim.rlim_max {
            lim.rlim_cur = lim.rlim_max;
            setrlimit(RLIMIT_NOFILE, &lim);
        }
    }
}

pub(super) fn run(dirs: Vec<PathBuf>, files: Vec<PathBuf>, opts: Options) -> Result<()> {
    raise_open_files_limit();
    let mut w = Watch {
        dirs_abs: dirs.iter().map(|d| absolute(d)).collect(),
        dirs,
        followed: BTreeMap::new(),
        opts,
        // Block-buffered: stdout is line-buffered by default, a write call per event.
        out: std::io::BufWriter::with_capacity(JSON_BLOCK, std::io::stdout().lock()),
        json: Vec::new(),
        events: Vec::new(),
        unreadable: Default::default(),
    };
    for f in &files {
        let followed = open(f, false)?;
        w.followed.insert(absolute(f), followed);
    }
    let wake = if w.opts.once {
        Wake::Timer
    } else {
        Wake::new(&w.dirs, &files)
    };
    let mut todo = Todo {
        rescan: true,
        all: true,
        ..Todo::default()
    };
    loop {
        let again = match w.tick(std::mem::take(&mut todo)) {
            Ok(again) => again,
            Err(Closed) => return Ok(()),
        };
        if w.out.flush().is_err() {
            return Ok(());
        }
        if w.opts.once {
            return Ok(());
        }
        if let Some(again) = again {
            // A file went missing: the directories say at once whether it was renamed.
            todo = again;
            continue;
        }
        todo = match &wake {
            Wake::Events { rx, .. } => match rx.recv_timeout(SWEEP) {
                Ok(ev) => {
                    let mut todo = Todo::default();
                    w.note(ev, &mut todo);
                    while let Ok(ev) = rx.try_recv() {
                        w.note(ev, &mut todo);
                    }
                    todo
                }
                Err(_) => Todo {
                    rescan: true,
                    all: true,
                    ..Todo::default()
                },
            },
            Wake::Timer => {
                std::thread::sleep(POLL);
                Todo {
                    rescan: true,
                    all: true,
                    ..Todo::default()
                }
            }
        };
    }
}

impl Watch {
    /// Which files one file-system event concerns.
    fn note(&self, ev: notify::Result<notify::Event>, todo: &mut Todo) {
        use notify::EventKind;
        let ev = match ev {
            Ok(ev) if !ev.need_rescan() => ev,
            // An overflowed queue or a watch that failed: look at everything.
            _ => {
                todo.rescan = true;
                todo.all = true;
                return;
            }
        };
        // Opening and closing (ours too) change nothing.
        if matches!(ev.kind, EventKind::Access(_)) {
            return;
        }
        for p in &ev.paths {
            if let Some(key) = self.key_of(p) {
                todo.files.insert(key);
            } else if self.dirs_abs.iter().any(|d| p.starts_with(d))
                && (p.extension().is_some_and(|x| x == "jsonl")
                    || !matches!(
                        ev.kind,
                        EventKind::Modify(notify::event::ModifyKind::Data(_))
                    ))
            {
                // A new transcript, or a directory that came or went.
                todo.rescan = true;
            }
        }
    }

    fn key_of(&self, p: &Path) -> Option<PathBuf> {
        if self.followed.contains_key(p) {
            return Some(p.to_path_buf());
        }
        self.followed
            .iter()
            .find(|(_, f)| f.real.as_deref() == Some(p))
            .map(|(k, _)| k.clone())
    }

    /// One round: directories re-listed if asked, then the files asked for read.
    /// `Some` when it should be followed at once by another.
    fn tick(&mut self, todo: Todo) -> std::result::Result<Option<Todo>, Closed> {
        // A directory's file no longer at its path was renamed or deleted: which, the
        // directories say first, so that what was written under a new name is read
        // under that name.
        let moved = todo.files.iter().any(|k| {
            self.followed.get(k).is_some_and(|f| {
                f.in_dir
                    && std::fs::metadata(k)
                        .map_or(true, |m| Some((m.dev(), m.ino())) != f.follower.identity())
            })
        });
        if todo.rescan || moved {
            self.rescan()?;
        }
        let keys: Vec<PathBuf> = if todo.all {
            self.followed.keys().cloned().collect()
        } else {
            todo.files.into_iter().collect()
        };
        let mut again = None;
        for k in keys {
            if self.read(&k)? {
                again = Some(Todo {
                    rescan: true,
                    ..Todo::default()
                });
            }
        }
        Ok(again)
    }

    /// Picks up new files in the followed directories, recognises renamed ones by
    /// identity, and lets go of those that are gone.
    fn rescan(&mut self) -> std::result::Result<(), Closed> {
        let mut found = Vec::new();
        for d in &self.dirs {
            found.extend(jsonl_under(d));
        }
        for shown in found {
            let key = absolute(&shown);
            if self.followed.contains_key(&key) {
                continue;
            }
            let Ok(md) = std::fs::metadata(&shown) else {
                continue;
            };
            let id: FileId = (md.dev(), md.ino());
            if let Some(old) = self.renamed_from(id) {
                let mut f = self.followed.remove(&old).expect("key from the map");
                let from = f.shown.clone();
                f.follower.renamed(&shown);
                f.json_prefix = jsonl::file_prefix(&shown);
                f.label = label(&shown);
                f.shown = shown.clone();
                f.real = None;
                f.missing = false;
                self.followed.insert(key.clone(), f);
                self.record(&key, Record::Renamed { from: &from })?;
                // Lines written after the rename are read under the new name.
                let _ = self.read(&key)?;
                continue;
            }
            // A followed directory may hold files that are not transcripts (yet: a
            // new one is empty until its first line), retried at the next event; one
            // that cannot be opened at all is said once.
            match open(&shown, true) {
                Ok(f) => {
                    self.followed.insert(key.clone(), f);
                    self.unreadable.remove(&key);
                    let _ = self.read(&key)?;
                }
                Err(_) => {
                    if let Err(io) = std::fs::File::open(&shown) {
                        let said = io.to_string();
                        if self.unreadable.get(&key) != Some(&said) {
                            eprintln!("spice: failed to read {}: {said}", shown.display());
                            self.unreadable.insert(key, said);
                        }
                    }
                }
            }
        }
        let gone: Vec<PathBuf> = self
            .followed
            .iter()
            .filter(|(_, f)| f.in_dir && f.missing)
            .map(|(k, _)| k.clone())
            .collect();
        for k in gone {
            self.record(&k, Record::Removed { waiting: false })?;
            self.followed.remove(&k);
        }
        Ok(())
    }

    /// The followed file from a directory with identity `id` that is no longer at its
    /// own path: the same file under another name.
    fn renamed_from(&self, id: FileId) -> Option<PathBuf> {
        self.followed
            .iter()
            .filter(|(_, f)| f.in_dir && f.follower.identity() == Some(id))
            .find(|(_, f)| std::fs::metadata(&f.shown).map_or(true, |m| (m.dev(), m.ino()) != id))
            .map(|(k, _)| k.clone())
    }

    /// Reads one file to its end. True when it went missing from a directory (whether
    /// it was renamed is for the next rescan to say).
    fn read(&mut self, key: &Path) -> std::result::Result<bool, Closed> {
        let many = self.followed.len() > 1;
        loop {
            let Some(f) = self.followed.get_mut(key) else {
                return Ok(false);
            };
            self.events.clear();
            let restart = match f.follower.poll(&mut self.events) {
                Ok(r) => r,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    if f.missing {
                        return Ok(false);
                    }
                    f.missing = true;
                    if f.in_dir {
                        return Ok(true);
                    }
                    self.record(key, Record::Removed { waiting: true })?;
                    return Ok(false);
                }
                Err(e) => {
                    let said = e.to_string();
                    if f.problem.as_deref() != Some(said.as_str()) {
                        eprintln!("spice: failed to read {}: {said}", f.shown.display());
                        f.problem = Some(said);
                    }
                    return Ok(false);
                }
            };
            f.missing = false;
            f.problem = None;
            let caught_up = f.follower.caught_up();
            match restart {
                Restart::No => {}
                Restart::Reset { kept, truncated } => {
                    self.record(key, Record::Reset { kept, truncated })?
                }
                Restart::Rotated => self.record(key, Record::Rotated)?,
            }
            self.print_events(key, many)?;
            let skipped = self.followed.get_mut(key).map(Followed::skipped);
            for r in skipped.into_iter().flatten() {
                self.record(key, r)?;
            }
            if caught_up {
                return Ok(false);
            }
        }
    }

    fn print_events(&mut self, key: &Path, many: bool) -> std::result::Result<(), Closed> {
        let f = &self.followed[key];
        for e in &self.events {
            if self.opts.json {
                // `{"file":…,"event":…}`
                match &f.json_prefix {
                    Some(prefix) => {
                        self.json.extend_from_slice(prefix);
                        jsonl::write_event(&mut self.json, e);
                        self.json.push(b'}');
                    }
                    None => self.json.extend_from_slice(b"null"),
                }
                self.json.push(b'\n');
                if self.json.len() >= JSON_BLOCK {
                    self.out.write_all(&self.json).map_err(|_| Closed)?;
                    self.json.clear();
                }
                continue;
            }
            let Some(l) = render::event(e, &self.opts.style) else {
                continue;
            };
            if many {
                writeln!(self.out, "{} {l}", f.label)
            } else {
                writeln!(self.out, "{l}")
            }
            .map_err(|_| Closed)?;
        }
        self.out.write_all(&self.json).map_err(|_| Closed)?;
        self.json.clear();
        Ok(())
    }

    /// Says what happened to a file: a line of text, or a `--json` record.
    fn record(&mut self, key: &Path, r: Record) -> std::result::Result<(), Closed> {
        let f = &self.followed[key];
        let file = f.shown.to_string_lossy();
        let written = if self.opts.json {
            let v = match r {
                Record::Reset { kept, truncated } => serde_json::json!({
                    "file": file, "kind": "reset",
                    "reason": if truncated { "truncated" } else { "rewritten" },
                    "line": kept.line, "offset": kept.offset,
                }),
                Record::Rotated => serde_json::json!({"file": file, "kind": "rotated"}),
                Record::Renamed { from } => serde_json::json!({
                    "file": file, "kind": "renamed", "from": from.to_string_lossy(),
                }),
                Record::Removed { waiting } => {
                    serde_json::json!({"file": file, "kind": "removed", "waiting": waiting})
                }
                Record::Unread { kind, line } => serde_json::json!({
                    "file": file, "kind": "unread", "record": kind, "line": line,
                }),
                Record::Malformed { new, total } => serde_json::json!({
                    "file": file, "kind": "malformed", "lines": new, "total": total,
                }),
            };
            writeln!(self.out, "{}", sanitize::json_line(&v))
        } else {
            let name = &f.label;
            let text = match r {
                Record::Reset { kept, truncated } => {
                    let what = if truncated { "truncated" } else { "rewritten" };
                    match kept.line {
                        0 => format!("{name} was {what}: reading it again from the start"),
                        n => format!("{name} was {what} after line {n}: reading on from there"),
                    }
                }
                Record::Rotated => {
                    format!("{name} was replaced by a new file: reading it from the start")
                }
                Record::Renamed { from } => format!("{} was renamed to {name}", label(from)),
                Record::Removed { waiting: true } => {
                    format!("{name} is gone: waiting for it to come back")
                }
                Record::Removed { waiting: false } => format!("{name} was removed"),
                Record::Unread { kind, line } => format!(
                    "{name} line {line}: a record of type {:?} is not one spice reads (skipped, and any more like it)",
                    sanitize::one_line(&kind)
                ),
                Record::Malformed { new, total } => format!(
                    "{name}: {new} line(s) that are not JSON records skipped ({total} in all)"
                ),
            };
            writeln!(self.out, "── {text} ──")
        };
        written.map_err(|_| Closed)
    }
}

enum Record<'a> {
    Reset {
        kept: crate::transcript::follow::Checkpoint,
        truncated: bool,
    },
    Rotated,
    Renamed {
        from: &'a Path,
    },
    Removed {
        waiting: bool,
    },
    /// The first record of a kind the decoder does not know.
    Unread {
        kind: String,
        line: u64,
    },
    Malformed {
        new: u64,
        total: u64,
    },
}

/// Prints an archived transcript's events the way a followed file's are (its
/// original path as the `"file"` and the label), once: it is over.
pub(super) fn print_archived(
    a: &crate::archive::Opened,
    json: bool,
    style: &Style,
    many: bool,
) -> Result<()> {
    let shown = &a.entry.meta.original;
    let (_, events, _) = crate::transcript::read_file(a.path())?;
    let mut out = std::io::BufWriter::with_capacity(JSON_BLOCK, std::io::stdout().lock());
    let prefix = jsonl::file_prefix(shown);
    let tag = label(shown);
    let mut buf = Vec::new();
    let written = (|| -> std::io::Result<()> {
        if !json {
            writeln!(
                out,
                "── {} (archived {}: the original is gone) ──",
                sanitize::for_terminal(&shown.display().to_string()),
                crate::when::short(a.entry.meta.archived_at)
            )?;
        }
        for e in &events {
            if json {
                match &prefix {
                    Some(p) => {
                        buf.extend_from_slice(p);
                        jsonl::write_event(&mut buf, e);
                        buf.push(b'}');
                    }
                    None => buf.extend_from_slice(b"null"),
                }
                buf.push(b'\n');
                if buf.len() >= JSON_BLOCK {
                    out.write_all(&buf)?;
                    buf.clear();
                }
                continue;
            }
            let Some(l) = render::event(e, style) else {
                continue;
            };
            if many {
                writeln!(out, "{tag} {l}")?;
            } else {
                writeln!(out, "{l}")?;
            }
        }
        out.write_all(&buf)?;
        out.flush()
    })();
    // A closed pipe (`| head`) ends the output, as for followed files.
    let _ = written;
    Ok(())
}
