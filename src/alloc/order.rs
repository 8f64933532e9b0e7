//! The ranking kept between claims: what only the graph decides about the order of
//! the open tasks, computed once per graph generation and shared by every claim.
//!
//! [`super::rank_top`] orders the ready tasks by inherited priority, downstream
//! release, urgency, peer spread, locality and id. The first two are whole-graph
//! measures; the rest are cheap per task. An [`Order`] holds every open task whose
//! prerequisites are all done, sorted by the two graph measures (then id), with what
//! the cheap criteria and readiness read of it (cell, wait date, urgency's inputs).
//! A claim then needs only the claims and the clock: [`Order::top`] skips the claimed,
//! the waiting and the filtered, and orders each group of equal graph measures by the
//! rest, exactly as `rank_top` does (a property test holds them equal).
//!
//! An order is valid for as long as the graph's generation (tasks, dependencies, tags,
//! annotations; not claims) is unchanged: the store keeps it ([`Order::encode`]) under
//! that generation, so the next claim process reads it instead of ranking the graph,
//! and a process keeps the last one it used ([`cached`]). Readiness is never taken
//! from it: a claim re-checks it inside its own transaction.

use super::urgency::Parts;
use super::Filter;
use crate::clock::Micros;
use crate::store::ClaimSet;
use crate::task::{Priority, Task};
use std::collections::HashSet;
use std::sync::{Arc, Mutex};

/// One open task with no open prerequisite, as the order keeps it: its strings are
/// spans of the order's text, so reading a kept order allocates nothing per task.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Entry {
    id: Span,
    project: Option<Span>,
    phase: Span,
    wait: Option<Micros>,
    inherited: Option<Priority>,
    releases: u32,
    urgency: Parts,
}

/// Where a string lies in [`Order`]'s text.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Span {
    at: u32,
    len: u32,
}

/// The open tasks with no open prerequisite, by inherited priority and downstream
/// release (best first), then id; kept as [`Order::encode`]'s bytes, with the
/// entries' strings gathered in one text.
#[derive(Debug, Clone, PartialEq)]
pub struct Order {
    bytes: Vec<u8>,
    text: String,
    entries: Vec<Entry>,
}

/// What a claim ranks by besides the order: read afresh for each claim.
pub struct Moment<'a> {
    /// Tasks under any claim, live or lapsed.
    pub claimed: &'a dyn Claimed,
    /// Live claims held by claimants other than the caller, per (project, phase)
    /// (few cells hold claims: a list, each cell once).
    pub peers: &'a [((Option<&'a str>, &'a str), usize)],
    /// The cell of the caller's last claimed task.
    pub last: Option<(Option<&'a str>, &'a str)>,
    pub filter: &'a Filter,
    pub now: Micros,
}

/// The tasks under a claim, as [`Order::top`] asks of them.
pub trait Claimed {
    fn has(&self, id: &str) -> bool;
}

impl Claimed for HashSet<&str> {
    fn has(&self, id: &str) -> bool {
        self.contains(id)
    }
}

impl Claimed for ClaimSet {
    fn has(&self, id: &str) -> bool {
        self.contains(id)
    }
}

/// An entry of [`Order::of`] before it is encoded, borrowing the task's strings.
struct Row<'t> {
    id: &'t str,
    project: Option<&'t str>,
    phase: &'t str,
    wait: Option<Micros>,
    inherited: Option<Priority>,
    releases: u32,
    urgency: Parts,
}

impl Order {
    /// The order of `tasks` (a snapshot's open tasks).
    pub fn of(tasks: &[Task]) -> Order {
        let g = super::shape::of(tasks);
        let m = &g.shape;
        let ready: Vec<usize> = (0..tasks.len())
            .filter(|&i| tasks[i].status.is_open() && g.waits_on[i].is_empty())
            .collect();
        let releases = m.releases(&ready);
        let mut rows: Vec<Row<'_>> = ready
            .iter()
            .zip(releases)
            .map(|(&i, releases)| {
                let t = &tasks[i];
                Row {
                    id: &t.id,
                    project: t.project.as_deref(),
                    phase: &t.phase,
                    wait: t.wait,
                    inherited: m.inherited[i],
                    releases: releases.min(u32::MAX as usize) as u32,
                    urgency: Parts::of(t),
                }
            })
            .collect();
        rows.sort_by(|a, b| {
            b.inherited
                .cmp(&a.inherited)
                .then(b.releases.cmp(&a.releases))
                .then_with(|| a.id.cmp(b.id))
        });
        Order::from_bytes(encode(&rows)).expect("an order reads its own bytes")
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    fn str(&self, span: Span) -> &str {
        &self.text[span.at as usize..(span.at + span.len) as usize]
    }

    /// The ids of the first `limit` ready tasks in `rank_top`'s order at `at`.
    pub fn top<'s>(&'s self, at: &Moment<'_>, limit: usize) -> Vec<&'s str> {
        // Few cells hold claims: comparing with each is cheaper than hashing each
        // candidate's cell.
        let peers = at.peers;
        let mut out: Vec<&str> = Vec::new();
        let mut start = 0;
        while start < self.entries.len() && out.len() < limit {
            let first = &self.entries[start];
            let len = self.entries[start..]
                .iter()
                .position(|e| e.inherited != first.inherited || e.releases != first.releases)
                .unwrap_or(self.entries.len() - start);
            let group = &self.entries[start..start + len];
            start += len;
            let mut placed: Vec<(f64, usize, bool, &str)> = group
                .iter()
                .filter(|e| e.wait.is_none_or(|w| w <= at.now))
                .map(|e| {
                    let cell = (e.project.map(|p| self.str(p)), self.str(e.phase));
                    (e, self.str(e.id), cell)
                })
                .filter(|(_, id, (project, phase))| {
                    !at.claimed.has(id) && at.filter.admits_cell(*project, phase)
                })
                .map(|(e, id, cell)| {
                    let peers = peers
                        .iter()
                        .find(|(c, _)| *c == cell)
                        .map_or(0, |(_, n)| *n);
                    (e.urgency.at(at.now), peers, at.last == Some(cell), id)
                })
                .collect();
            let order = |a: &(f64, usize, bool, &str), b: &(f64, usize, bool, &str)| {
                b.0.total_cmp(&a.0)
                    .then(a.1.cmp(&b.1))
                    .then(b.2.cmp(&a.2))
                    .then_with(|| a.3.cmp(b.3))
            };
            let wanted = limit - out.len();
            if placed.len() > wanted {
                placed.select_nth_unstable_by(wanted - 1, order);
                placed.truncate(wanted);
            }
            placed.sort_by(order);
            out.extend(placed.iter().map(|p| p.3));
        }
        out
    }

    /// The order as bytes, for the store to keep ([`Order::decode`] reads them back).
    pub fn encode(&self) -> Vec<u8> {
        self.bytes.clone()
    }

    /// Reads [`Order::encode`]'s bytes; `None` for anything else (a store written by
    /// another format is ranked afresh).
    pub fn decode(bytes: &[u8]) -> Option<Order> {
        Order::from_bytes(bytes.to_vec())
    }

    fn from_bytes(bytes: Vec<u8>) -> Option<Order> {
        let mut r = Reader {
            bytes: &bytes,
            at: 0,
            text: String::with_capacity(bytes.len()),
        };
        if r.u8()? != FORMAT {
            return None;
        }
        let n = r.u32()? as usize;
        let mut entries = Vec::with_capacity(n.min(bytes.len() / 16));
        for _ in 0..n {
            let id = r.str()?;
            let project = match r.u8()? {
                0 => None,
                _ => Some(r.str()?),
            };
            let phase = r.str()?;
            let wait = r.opt()?;
            let inherited = match r.u8()? {
                0 => None,
                1 => Some(Priority::L),
                2 => Some(Priority::M),
                3 => Some(Priority::H),
                _ => return None,
            };
            let releases = r.u32()?;
            let due = r.opt()?;
            let entry = r.i64()?;
            let (tags, annotations, flags) = (r.u8()?, r.u8()?, r.u8()?);
            entries.push(Entry {
                id,
                project,
                phase,
                wait,
                inherited,
                releases,
                urgency: Parts {
                    due,
                    entry,
                    tags,
                    annotations,
                    project: flags & 1 != 0,
                    next: flags & 2 != 0,
                },
            });
        }
        let (at, text) = (r.at, r.text);
        (at == bytes.len()).then_some(Order {
            bytes,
            text,
            entries,
        })
    }
}

/// The version of [`Order::encode`]'s bytes.
const FORMAT: u8 = 1;

fn encode(rows: &[Row<'_>]) -> Vec<u8> {
    let mut b = Vec::with_capacity(16 + rows.len() * 48);
    b.push(FORMAT);
    b.extend_from_slice(&(rows.len() as u32).to_le_bytes());
    for e in rows {
        put_str(&mut b, e.id);
        match e.project {
            Some(p) => {
                b.push(1);
                put_str(&mut b, p);
            }
            None => b.push(0),
        }
        put_str(&mut b, e.phase);
        put_opt(&mut b, e.wait);
        b.push(match e.inherited {
            None => 0,
            Some(Priority::L) => 1,
            Some(Priority::M) => 2,
            Some(Priority::H) => 3,
        });
        b.extend_from_slice(&e.releases.to_le_bytes());
        let u = &e.urgency;
        put_opt(&mut b, u.due);
        b.extend_from_slice(&u.entry.to_le_bytes());
        b.push(u.tags);
        b.push(u.annotations);
        b.push(u8::from(u.project) | (u8::from(u.next) << 1));
    }
    b
}

fn put_str(b: &mut Vec<u8>, s: &str) {
    b.extend_from_slice(&(s.len() as u32).to_le_bytes());
    b.extend_from_slice(s.as_bytes());
}

fn put_opt(b: &mut Vec<u8>, v: Option<i64>) {
    match v {
        Some(v) => {
            b.push(1);
            b.extend_from_slice(&v.to_le_bytes());
        }
        None => b.push(0),
    }
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
    /// The strings read so far, one after another.
    text: String,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.bytes.len())?;
        let head = &self.bytes[self.at..end];
        self.at = end;
        Some(head)
    }
    fn u8(&mut self) -> Option<u8> {
        self.take(1).map(|b| b[0])
    }
    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }
    fn i64(&mut self) -> Option<i64> {
        Some(i64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }
    fn opt(&mut self) -> Option<Option<i64>> {
        match self.u8()? {
            0 => Some(None),
            _ => self.i64().map(Some),
        }
    }
    /// The next string, added to the text; its span there.
    fn str(&mut self) -> Option<Span> {
        let n = self.u32()?;
        let s = std::str::from_utf8(self.take(n as usize)?).ok()?;
        let at = u32::try_from(self.text.len()).ok()?;
        self.text.push_str(s);
        Some(Span { at, len: n })
    }
}

/// The orders this process used last, by store and graph generation.
static CACHE: Mutex<Vec<(String, i64, Arc<Order>)>> = Mutex::new(Vec::new());

/// How many (store, generation) orders a process keeps.
const KEEP: usize = 4;

/// The newest order this process has for `store`, with its generation.
pub fn latest(store: &str) -> Option<(i64, Arc<Order>)> {
    let cache = CACHE.lock().unwrap_or_else(|e| e.into_inner());
    cache
        .iter()
        .find(|(s, _, _)| s == store)
        .map(|(_, g, o)| (*g, o.clone()))
}

/// Keeps `order` as `store`'s at `generation` (a store's older ones are dropped).
pub fn keep(store: &str, generation: i64, order: Arc<Order>) {
    let mut cache = CACHE.lock().unwrap_or_else(|e| e.into_inner());
    cache.retain(|(s, g, _)| s != store || *g > generation);
    if cache.iter().any(|(s, _, _)| s == store) {
        return;
    }
    cache.insert(0, (store.to_string(), generation, order));
    cache.truncate(KEEP);
}
