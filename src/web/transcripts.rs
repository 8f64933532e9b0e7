//! Decoded transcripts shared by every reader of the console: each file is decoded
//! once, then only its appended bytes are read ([`Follower`]), however many pages and
//! streams look at it.
//!
//! Invariants: the console never reads a path a request names; paths come only from
//! the store's lane rows, and only of lanes this host's supervisor runs (another
//! host's path names a file there; the routes say so instead). A transcript that is gone is read from the state
//! directory's archive (its copy decompressed in memory, decoded the same way). Memory is bounded: at most [`MAX_FILES`] files are kept, each
//! with its newest [`MAX_EVENTS`] events; older history is reported as dropped.

use crate::transcript::event::{Agent, Event};
use crate::transcript::follow::Follower;
use serde_json::{json, Value};
use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

pub const MAX_FILES: usize = 64;
pub const MAX_EVENTS: usize = 20_000;
/// Polls per refresh: each reads at most the follower's budget (8 MiB).
const MAX_POLLS: usize = 32;

/// One decoded file.
#[derive(Default)]
pub struct Decoded {
    follower: Option<Follower>,
    agent: Option<Agent>,
    events: VecDeque<Event>,
    /// Events dropped from the front to bound memory, since the last rewrite.
    dropped: usize,
    /// Bumped whenever the file was rewritten or truncated: lines start over.
    epoch: u64,
    /// The last problem reading the file (missing, unreadable, unknown format).
    problem: Option<String>,
    /// The archived copy being read, when the original is gone.
    archived: Option<crate::archive::Opened>,
}

impl Decoded {
    /// Reads what was appended since the last refresh.
    pub fn refresh(&mut self, path: &Path, state_dir: Option<&Path>) {
        if self.follower.is_none() {
            if self.archived.is_none() {
                self.archived = crate::archive::resolve(state_dir, path);
            }
            let at = self.archived.as_ref().map_or(path, |a| a.path());
            match crate::transcript::detect_file(at) {
                Ok(agent) => {
                    self.agent = Some(agent);
                    self.follower = Some(Follower::new(
                        at,
                        crate::transcript::decoder_fn(agent),
                        None,
                    ));
                    self.problem = None;
                }
                Err(e) => {
                    // An empty or missing file is normal right after a launch.
                    self.problem = Some(e.to_string());
                    return;
                }
            }
        }
        let f = self.follower.as_mut().expect("set above");
        for _ in 0..MAX_POLLS {
            let mut out = Vec::new();
            match f.poll(&mut out) {
                Ok(restart) => {
                    // Truncated, rewritten or replaced: the lines after `kept` are gone.
                    if let Some(kept) = restart.kept_lines() {
                        self.events.retain(|e| e.line <= kept);
                        if kept == 0 {
                            self.dropped = 0;
                        }
                        self.epoch += 1;
                    }
                }
                Err(e) => {
                    self.problem = Some(format!("{}: {e}", path.display()));
                    return;
                }
            }
            self.problem = None;
            self.events.extend(out);
            let over = self.events.len().saturating_sub(MAX_EVENTS);
            if over > 0 {
                self.events.drain(..over);
                self.dropped += over;
            }
            if f.caught_up() {
                break;
            }
        }
    }

    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// The last line decoded so far (0 when none).
    pub fn last_line(&self) -> u64 {
        self.events.back().map(|e| e.line).unwrap_or(0)
    }

    /// Up to `limit` events before line `before` (the newest when `None`).
    pub fn page(&self, before: Option<u64>, limit: usize) -> Value {
        let end = match before {
            Some(b) => self.events.partition_point(|e| e.line < b),
            None => self.events.len(),
        };
        let start = end.saturating_sub(limit);
        let events: Vec<&Event> = self.events.range(start..end).collect();
        json!({
            "agent": self.agent,
            "epoch": self.epoch,
            "events": events,
            "more": start > 0 || self.dropped > 0,
            "dropped": self.dropped,
            "last_line": self.last_line(),
            "malformed": self.follower.as_ref().map(Follower::malformed).unwrap_or(0),
            "problem": self.problem,
        })
    }

    /// Events after line `after`, at most `limit`.
    pub fn after(&self, after: u64, limit: usize) -> Vec<Event> {
        let start = self.events.partition_point(|e| e.line <= after);
        self.events.range(start..).take(limit).cloned().collect()
    }
}

/// The shared cache of decoded files.
#[derive(Default)]
pub struct Transcripts {
    files: Mutex<HashMap<PathBuf, Arc<Mutex<Decoded>>>>,
    /// Whose archive a gone transcript is read from.
    state_dir: Option<PathBuf>,
}

impl Transcripts {
    /// Reads a gone transcript from `state_dir`'s archive.
    pub fn with_archive(state_dir: &Path) -> Transcripts {
        Transcripts {
            files: Mutex::default(),
            state_dir: Some(state_dir.to_path_buf()),
        }
    }

    /// The decoded file at `path`, refreshed. Blocking: call from a blocking thread.
    pub fn get(&self, path: &Path) -> Arc<Mutex<Decoded>> {
        let entry = {
            let mut files = self.files.lock().unwrap_or_else(|p| p.into_inner());
            if !files.contains_key(path) && files.len() >= MAX_FILES {
                // Forget one that no reader holds; a later reader decodes it again.
                if let Some(k) = files
                    .iter()
                    .find(|(_, v)| Arc::strong_count(v) == 1)
                    .map(|(k, _)| k.clone())
                {
                    files.remove(&k);
                }
            }
            files.entry(path.to_path_buf()).or_default().clone()
        };
        entry
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .refresh(path, self.state_dir.as_deref());
        entry
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn line(i: u32, text: &str) -> String {
        json!({
            "type": "assistant", "uuid": format!("u{i}"), "parentUuid": null, "sessionId": "s",
            "timestamp": "2026-11-29T12:00:00.000Z",
            "message": {"role": "assistant", "id": format!("m{i}"), "content": [{"type": "text", "text": text}]},
        })
        .to_string()
            + "\n"
    }

    #[test]
    fn a_gone_transcript_is_read_from_the_archive() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("s.jsonl");
        std::fs::write(&p, line(1, "one") + &line(2, "two")).unwrap();
        let state = dir.path().join("state");
        let live = Transcripts::with_archive(&state)
            .get(&p)
            .lock()
            .unwrap()
            .page(None, 10);
        crate::archive::Archive::at(&state)
            .store(&p, None, 1)
            .unwrap();
        std::fs::remove_file(&p).unwrap();
        let archived = Transcripts::with_archive(&state)
            .get(&p)
            .lock()
            .unwrap()
            .page(None, 10);
        assert!(archived["problem"].is_null(), "{archived}");
        assert_eq!(archived, live);
        // Without the archive it is only missing.
        let gone = Transcripts::default()
            .get(&p)
            .lock()
            .unwrap()
            .page(None, 10);
        assert!(gone["problem"].is_string());
    }

    #[test]
    fn pages_follow_and_notice_rewrites() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t.jsonl");
        let cache = Transcripts::default();
        // Missing file: a problem, no events.
        let d = cache.get(&p);
        assert!(d.lock().unwrap().page(None, 10)["problem"].is_string());
        let mut f = std::fs::File::create(&p).unwrap();
        for i in 1..=5 {
            f.write_all(line(i, &format!("reply {i}")).as_bytes())
                .unwrap();
        }
        let d = cache.get(&p);
        let page = d.lock().unwrap().page(None, 2);
        assert_eq!(page["events"].as_array().unwrap().len(), 2);
        assert_eq!(page["more"], true);
        assert_eq!(page["last_line"], 5);
        let older = d.lock().unwrap().page(Some(4), 10);
        let texts = older["events"].as_array().unwrap().iter();
        assert_eq!(texts.filter(|e| e["type"] == "assistant_text").count(), 3);
        f.write_all(line(6, "six").as_bytes()).unwrap();
        let d = cache.get(&p);
        assert_eq!(d.lock().unwrap().after(5, 10).len(), 1);
        std::fs::write(&p, line(1, "new file")).unwrap();
        let d = cache.get(&p);
        let g = d.lock().unwrap();
        assert_eq!((g.epoch(), g.last_line()), (1, 1));
    }
}
