//! `spice fleet logs [LANE] [-f] [-n N] [--json]`: the fleet's log as `fleet up` shows
//! it on a terminal.
//!
//! The log is what `fleet up` writes (`up::Sink`): `<state>/logs/fleet.log`, one JSON
//! object a line, rotated by size into `fleet.log.1`, `fleet.log.2`, … (the older the
//! higher; `crate::fleet::events::logfile`). It is read oldest file first, so events
//! come in the order they were logged. A lane event is drawn as `fleet up` draws it
//! (`render::lane_event_line`); any other record as `time LEVEL target: message
//! field=value…`; a line that is not JSON as it is, made safe for the terminal. With
//! LANE, only that lane's events; with `--json`, the objects as they are. A LANE no
//! lane file defines is refused, as every command naming a lane refuses it
//! (`cli::lanes::require`): its log would be empty, which reads as a quiet lane.
//!
//! Following (`-f`) goes on reading what is appended, and across a rotation: when the
//! path names another file than the one open, the rest of the open one is read first,
//! then the new one from its start. A record is never split across files and is
//! written with one `write`, so only the last line of the open file can be partial;
//! it waits for its end. Following ends when interrupted, never by itself: a
//! supervisor restarted (by systemd, say) goes on in the same log.

use super::super::{render, Env};
use crate::error::{Error, Result};
use crate::fleet::events::{EventKind, LaneEvent};
use std::collections::VecDeque;
use std::fs::File;
use std::io::{Read, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How often a follower looks for what was appended.
const FOLLOW_EVERY: Duration = Duration::from_millis(200);
/// How many of the last events `-f` shows first when `-n` is not given.
const FOLLOW_LINES: usize = 10;

pub(super) fn run(
    env: &Env,
    lane: Option<&str>,
    follow: bool,
    lines: Option<usize>,
    json: bool,
) -> Result<()> {
    if let Some(l) = lane {
        super::super::lanes::require(env, l)?;
    }
    let path = env.state_dir.join("logs").join("fleet.log");
    // The columns line up on the longest lane name the repository configures.
    let width = match (lane, env.repo_top.as_ref()) {
        (Some(l), _) => l.len(),
        (None, Some(top)) => std::fs::read_dir(top.join("lanes"))
            .map(|dir| {
                dir.flatten()
                    .filter_map(|e| e.file_name().to_str()?.strip_suffix(".toml").map(str::len))
                    .max()
                    .unwrap_or(1)
            })
            .unwrap_or(1),
        (None, None) => 1,
    };
    let show = Show { lane, json, width };
    if !follow && !path.exists() {
        return Err(Error::input(format!(
            "no fleet log yet at {}: `spice fleet up` writes it",
            path.display()
        )));
    }
    let keep = lines.or(follow.then_some(FOLLOW_LINES));
    let mut shown: VecDeque<String> = VecDeque::new();
    let mut out = std::io::stdout().lock();
    let mut emit = |line: String, out: &mut std::io::StdoutLock| -> std::io::Result<()> {
        match keep {
            Some(n) => {
                shown.push_back(line);
                if shown.len() > n {
                    shown.pop_front();
                }
                Ok(())
            }
            None => writeln!(out, "{line}"),
        }
    };
    let io = |source| Error::Io {
        context: format!("failed to read {}", path.display()),
        source,
    };
    for older in rotated(&path) {
        let text = std::fs::read(&older).unwrap_or_default();
        for line in text.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
            if let Some(l) = show.line(line) {
                emit(l, &mut out).map_err(io)?;
            }
        }
    }
    let mut tail = Tail::open(&path);
    tail.read(|line| match show.line(line) {
        Some(l) => emit(l, &mut out),
        None => Ok(()),
    })
    .map_err(io)?;
    for l in shown.drain(..) {
        writeln!(out, "{l}").map_err(io)?;
    }
    out.flush().map_err(io)?;
    if !follow {
        return Ok(());
    }
    loop {
        std::thread::sleep(FOLLOW_EVERY);
        tail.read(|line| match show.line(line) {
            Some(l) => writeln!(out, "{l}"),
            None => Ok(()),
        })
        .map_err(io)?;
        out.flush().map_err(io)?;
    }
}

/// The rotated files of `path` that exist, oldest first.
fn rotated(path: &Path) -> Vec<PathBuf> {
    let older = |n: usize| {
        let mut p = path.as_os_str().to_owned();
        p.push(format!(".{n}"));
        PathBuf::from(p)
    };
    let mut files: Vec<PathBuf> = (1..).map(older).take_while(|p| p.exists()).collect();
    files.reverse();
    files
}

/// How records are shown.
struct Show<'a> {
    lane: Option<&'a str>,
    json: bool,
    width: usize,
}

impl Show<'_> {
    /// The line to print for one record, or `None` when it is not shown.
    fn line(&self, raw: &[u8]) -> Option<String> {
        let text = String::from_utf8_lossy(raw);
        let Ok(serde_json::Value::Object(obj)) = serde_json::from_str::<serde_json::Value>(&text)
        else {
            return self
                .lane
                .is_none()
                .then(|| crate::transcript::sanitize::for_terminal(&text));
        };
        let field = |k: &str| obj.get(k).and_then(|v| v.as_str());
        if self.lane.is_some() && field("lane") != self.lane {
            return None;
        }
        if self.json {
            return Some(text.into_owned());
        }
        let at = field("at")
            .and_then(|t| crate::when::parse_date(t).ok())
            .unwrap_or(0);
        if let (Some(lane), Some(event)) =
            (field("lane"), field("event").and_then(EventKind::parse))
        {
            let e = LaneEvent {
                at,
                lane: lane.to_string(),
                event,
                task: field("task").map(str::to_string),
                session: field("session").map(str::to_string),
                keys: obj
                    .get("keys")
                    .and_then(|k| k.as_array())
                    .map(|k| {
                        k.iter()
                            .filter_map(|v| v.as_str().map(str::to_string))
                            .collect()
                    })
                    .unwrap_or_default(),
                detail: field("detail").unwrap_or("").to_string(),
            };
            return Some(render::lane_event_line(&e, self.width));
        }
        let mut line = format!(
            "{} {} {}:",
            render::clock_time(at),
            field("level").unwrap_or("info").to_uppercase(),
            field("target").unwrap_or("spice")
        );
        for (k, v) in obj
            .iter()
            .filter(|(k, _)| !["at", "level", "target"].contains(&k.as_str()))
        {
            let v = v
                .as_str()
                .map(str::to_string)
                .unwrap_or_else(|| v.to_string());
            if k == "message" {
                line.push_str(&format!(" {v}"));
            } else {
                line.push_str(&format!(" {k}={v}"));
            }
        }
        Some(crate::transcript::sanitize::for_terminal(&line))
    }
}

/// The current log file, read from where the last read stopped; reopened when the
/// path names another file (rotated) or the file shrank (truncated).
struct Tail {
    path: PathBuf,
    file: Option<File>,
    ino: u64,
    pos: u64,
    partial: Vec<u8>,
}

impl Tail {
    fn open(path: &Path) -> Tail {
        let mut t = Tail {
            path: path.to_path_buf(),
            file: None,
            ino: 0,
            pos: 0,
            partial: Vec::new(),
        };
        t.reopen();
        t
    }

    fn reopen(&mut self) {
        self.file = File::open(&self.path).ok();
        self.ino = self
            .file
            .as_ref()
            .and_then(|f| f.metadata().ok())
            .map_or(0, |m| m.ino());
        self.pos = 0;
        self.partial.clear();
    }

    /// Passes each complete line appended since the last read to `each`.
    fn read(&mut self, mut each: impl FnMut(&[u8]) -> std::io::Result<()>) -> std::io::Result<()> {
        loop {
            if let Some(f) = self.file.as_mut() {
                if f.metadata().is_ok_and(|m| m.len() < self.pos) {
                    self.reopen();
                    continue;
                }
                let mut new = Vec::new();
                let n = f.read_to_end(&mut new)?;
                self.pos += n as u64;
                self.partial.extend_from_slice(&new);
                if let Some(end) = self.partial.iter().rposition(|b| *b == b'\n') {
                    let complete: Vec<u8> = self.partial.drain(..=end).collect();
                    for line in complete.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
                        each(line)?;
                    }
                }
            }
            // Rotated (or created) since it was opened: the open file is read out.
            let now = std::fs::metadata(&self.path).map_or(0, |m| m.ino());
            if now == 0 || now == self.ino {
                return Ok(());
            }
            self.reopen();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn lines(t: &mut Tail) -> Vec<String> {
        let mut got = Vec::new();
        t.read(|l| {
            got.push(String::from_utf8_lossy(l).into_owned());
            Ok(())
        })
        .unwrap();
        got
    }

    fn append(p: &Path, text: &str) {
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(p)
            .unwrap();
        f.write_all(text.as_bytes()).unwrap();
    }

    /// A follower reads on across a rotation: the rest of the file it had open, then
    /// the new file from its start; a partial line waits for its end.
    #[test]
    fn following_goes_on_across_a_rotation_and_waits_for_a_whole_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("fleet.log");
        let mut t = Tail::open(&path);
        assert!(lines(&mut t).is_empty(), "no file yet");
        append(&path, "one\ntw");
        assert_eq!(lines(&mut t), ["one"]);
        append(&path, "o\n");
        assert_eq!(lines(&mut t), ["two"]);
        // Written to the old file just before the rotation, then a new file.
        append(&path, "three\n");
        std::fs::rename(&path, dir.path().join("fleet.log.1")).unwrap();
        append(&path, "four\n");
        assert_eq!(lines(&mut t), ["three", "four"]);
        assert_eq!(rotated(&path), [dir.path().join("fleet.log.1")]);
        // Truncated in place (a log of one file): read from the start again. (Seen
        // as a file shorter than the offset read to: a truncation refilled past that
        // offset before the next look cannot be told from growth. spice's own logs
        // rotate by rename, above.)
        std::fs::write(&path, "").unwrap();
        append(&path, "5\n");
        assert_eq!(lines(&mut t), ["5"]);
    }

    #[test]
    fn records_are_drawn_as_fleet_up_draws_them_and_kept_to_the_lane_asked() {
        let all = Show {
            lane: None,
            json: false,
            width: 1,
        };
        let event = br#"{"at":"2025-01-01T00:00:00Z","lane":"a","event":"claimed","task":"demo-X","session":"s","keys":[],"detail":"took it"}"#;
        let line = all.line(event).unwrap();
        assert!(
            line.contains("a claimed") && line.ends_with("demo-X         took it"),
            "{line}"
        );
        let other = br#"{"at":"2025-01-01T00:00:00Z","level":"warn","target":"spice::store","message":"no backup"}"#;
        assert!(all
            .line(other)
            .unwrap()
            .ends_with("WARN spice::store: no backup"));
        assert_eq!(all.line(b"not json").unwrap(), "not json");
        let b = Show {
            lane: Some("b"),
            json: true,
            width: 1,
        };
        assert_eq!(b.line(event), None);
        assert_eq!(b.line(other), None);
        let a = Show {
            lane: Some("a"),
            ..b
        };
        assert_eq!(a.line(event).unwrap().as_bytes(), event);
    }
}
