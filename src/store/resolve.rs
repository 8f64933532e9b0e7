//! Turning what a person types into a task id: a whole stamp, any unique prefix of
//! one, a handle `PROJECT-stamp` (or `PROJECT-prefix`), or a Taskwarrior uuid.
//!
//! Stamps are case-sensitive (`B` and `b` are different digits), so prefix lookups
//! are index range scans on the binary-collated id, never `LIKE`.
//!
//! The other way round, [`ShortIds`] is what listings show: the shortest prefix of each
//! id that no other task's id starts with, so what a person copies from a listing is
//! what [`resolve`] accepts. A task is never removed, so a prefix shown once can only
//! become ambiguous (and be refused, naming the matches), never name another task.
//! Sessions are resolved by prefix too ([`Store::resolve_session`]), among the sessions
//! the store knows.

use super::Store;
use crate::error::{Error, Result, SqlContext};
use crate::stamp;
use rusqlite::{params, OptionalExtension, Transaction};
use std::collections::HashMap;

/// The fewest characters a short id has, so ids keep their look while a store is
/// small (one task would otherwise be `d`).
pub const MIN_SHORT: usize = 4;

/// The shortest unique prefix of every task id (at least [`MIN_SHORT`] characters).
#[derive(Debug, Clone, Default)]
pub struct ShortIds {
    short: HashMap<String, usize>,
}

impl ShortIds {
    /// From every task id, in any order.
    pub fn new(mut ids: Vec<String>) -> ShortIds {
        ids.sort_unstable();
        let mut short = HashMap::with_capacity(ids.len());
        for (i, id) in ids.iter().enumerate() {
            let before = i.checked_sub(1).map(|j| ids[j].as_str());
            let len = length(id, before, ids.get(i + 1).map(String::as_str));
            short.insert(id.clone(), len);
        }
        ShortIds { short }
    }

    /// For a few task ids, each with its neighbours among every task id in sorted
    /// order (the greatest id below it and the least above): the same prefixes as
    /// [`ShortIds::new`] gives them, from a few index lookups instead of every id.
    pub fn around(near: Vec<(String, Option<String>, Option<String>)>) -> ShortIds {
        let short = near
            .into_iter()
            .map(|(id, before, after)| {
                let len = length(&id, before.as_deref(), after.as_deref());
                (id, len)
            })
            .collect();
        ShortIds { short }
    }

    /// The shortest unique prefix of `id`; the id itself if it is not a task's.
    pub fn id<'a>(&self, id: &'a str) -> &'a str {
        match self.short.get(id) {
            Some(&n) => &id[..n],
            None => id,
        }
    }

    /// `PROJECT-prefix` (or the prefix alone), which [`resolve`] takes as the handle.
    pub fn handle(&self, id: &str, project: Option<&str>) -> String {
        match project {
            Some(p) => format!("{p}-{}", self.id(id)),
            None => self.id(id).to_string(),
        }
    }
}

/// How much of `id` its short form keeps, given its neighbours in sorted order.
fn length(id: &str, before: Option<&str>, after: Option<&str>) -> usize {
    let common = |b: Option<&str>| {
        b.map_or(0, |b| {
            id.bytes()
                .zip(b.bytes())
                .take_while(|(x, y)| x == y)
                .count()
        })
    };
    let need = (common(before).max(common(after)) + 1).max(MIN_SHORT);
    // A prefix is typed as a stamp prefix: within the stamp, never into a collision
    // suffix (`X` and `X-2` are told apart only whole).
    if stamp::is_stamp(id) && need <= stamp::WIDTH {
        need
    } else {
        id.len()
    }
}

impl Store {
    /// The shortest unique prefixes of `ids` among every task id (those that are
    /// tasks'), from each one's neighbours in the id index: a listing of a few tasks
    /// (`task next`) reads a few rows, not every id.
    pub fn short_ids_of(&mut self, ids: &[&str]) -> Result<ShortIds> {
        self.read("reading task ids", |tx, _| {
            let mut st = tx.prepare_cached(
                "SELECT EXISTS (SELECT 1 FROM tasks WHERE id = ?1),
                        (SELECT max(id) FROM tasks WHERE id < ?1),
                        (SELECT min(id) FROM tasks WHERE id > ?1)",
            )?;
            let mut near = Vec::with_capacity(ids.len());
            for id in ids {
                let (known, before, after) =
                    st.query_row([id], |r| Ok((r.get::<_, bool>(0)?, r.get(1)?, r.get(2)?)))?;
                if known {
                    near.push((id.to_string(), before, after));
                }
            }
            Ok(ShortIds::around(near))
        })
    }

    /// The shortest unique prefix of every task id, for listings.
    pub fn short_ids(&mut self) -> Result<ShortIds> {
        self.read("reading task ids", |tx, _| {
            let mut st = tx.prepare_cached("SELECT id FROM tasks")?;
            let ids = st
                .query_map([], |r| r.get::<_, String>(0))?
                .collect::<std::result::Result<Vec<_>, _>>()?;
            Ok(ShortIds::new(ids))
        })
    }

    /// A session as typed: a session the store knows (a claimant, a lane's session or
    /// one in its lineage, an actor of the ledger) is itself; a prefix of at least
    /// [`MIN_SHORT`] characters of exactly one known session id (a uuid or a stamp, as
    /// spice makes them; names a person chose are never completed) is that session; a
    /// prefix of several is refused naming them; anything else is kept as typed (a
    /// session the store has not seen yet).
    pub fn resolve_session(&mut self, typed: &str) -> Result<String> {
        if typed.chars().count() < MIN_SHORT {
            return Ok(typed.to_string());
        }
        self.read("looking up a session", |tx, _| {
            let upper = format!("{typed}\u{10ffff}");
            let mut found: Vec<String> = Vec::new();
            let mut add = |s: String| {
                if s.starts_with(typed) && !found.contains(&s) {
                    found.push(s);
                }
            };
            for sql in [
                "SELECT DISTINCT claimant FROM claims WHERE claimant >= ?1 AND claimant < ?2",
                "SELECT DISTINCT actor FROM ledger WHERE actor >= ?1 AND actor < ?2",
                "SELECT session FROM lanes WHERE session >= ?1 AND session < ?2",
            ] {
                let mut st = tx.prepare_cached(sql)?;
                let rows = st.query_map(params![typed, upper], |r| r.get::<_, String>(0))?;
                for s in rows {
                    add(s?);
                }
            }
            let mut st = tx.prepare_cached("SELECT lineage FROM lanes")?;
            let rows = st.query_map([], |r| r.get::<_, String>(0))?;
            for l in rows {
                for s in serde_json::from_str::<Vec<String>>(&l?).unwrap_or_default() {
                    add(s);
                }
            }
            pick_session(typed, found)
        })
    }
}

/// The session `typed` names among the known sessions starting with it (`found`):
/// itself when known or when no spice-made id (uuid, stamp) starts with it, the one
/// that does, or an error naming several. Both backends decide by it.
pub(super) fn pick_session(typed: &str, mut found: Vec<String>) -> Result<String> {
    if found.iter().any(|s| s == typed) {
        return Ok(typed.to_string());
    }
    found.retain(|s| crate::task::looks_like_uuid(s) || stamp::is_stamp(s));
    match found.len() {
        0 => Ok(typed.to_string()),
        1 => Ok(found.remove(0)),
        n => {
            found.sort();
            let shown: Vec<&str> = found.iter().take(SHOWN).map(String::as_str).collect();
            let more = if n > SHOWN {
                format!(" and {} more", n - SHOWN)
            } else {
                String::new()
            };
            Err(Error::input(format!(
                "ambiguous session '{typed}': matches {}{more}; type more characters",
                shown.join(", ")
            )))
        }
    }
}

/// How many matches an ambiguity message lists.
const SHOWN: usize = 4;
/// How many rows one prefix lookup reads: enough to tell unique from ambiguous and to
/// say roughly how ambiguous, without scanning a huge prefix range.
pub(super) const PER_LOOKUP: usize = 64;

/// The three lookups [`resolve_by`] makes, so every backend resolves ids by the one
/// set of rules.
pub(super) trait Lookup {
    /// The id of the task with this (lowercase) uuid.
    fn by_uuid(&mut self, uuid: &str) -> Result<Option<String>>;
    /// `id` itself, if a task has it.
    fn exact(&mut self, id: &str) -> Result<Option<String>>;
    /// Up to [`PER_LOOKUP`] ids starting with `prefix` (in `project`, if given), in order.
    fn prefixed(&mut self, prefix: &str, project: Option<&str>) -> Result<Vec<String>>;
}

impl Lookup for &Transaction<'_> {
    fn by_uuid(&mut self, uuid: &str) -> Result<Option<String>> {
        self.prepare_cached("SELECT id FROM tasks WHERE uuid = ?1")
            .and_then(|mut st| st.query_row([uuid], |r| r.get(0)).optional())
            .ctx(|| format!("failed to look up task {uuid}"))
    }
    fn exact(&mut self, id: &str) -> Result<Option<String>> {
        // Prepared once per connection: the supervisor resolves on every tick.
        self.prepare_cached("SELECT id FROM tasks WHERE id = ?1")
            .and_then(|mut st| st.query_row([id], |r| r.get(0)).optional())
            .ctx(|| format!("failed to look up task {id}"))
    }
    fn prefixed(&mut self, prefix: &str, project: Option<&str>) -> Result<Vec<String>> {
        prefix_matches(self, prefix, project)
    }
}

pub fn resolve(tx: &Transaction<'_>, input: &str) -> Result<String> {
    resolve_by(&mut &*tx, input)
}

/// Resolves what a person typed (stamp, prefix, handle, uuid) through `l`.
pub(super) fn resolve_by(l: &mut impl Lookup, input: &str) -> Result<String> {
    let text = input.trim();
    if text.is_empty() {
        return Err(Error::input("empty task id"));
    }
    if crate::task::looks_like_uuid(text) {
        return l
            .by_uuid(&text.to_ascii_lowercase())?
            .ok_or_else(|| Error::input(format!("unknown task '{text}'")));
    }
    if stamp::is_stamp(text) {
        if let Some(id) = l.exact(text)? {
            return Ok(id);
        }
    }
    let mut matches: Vec<String> = Vec::new();
    // A handle: every '-' could separate the project from the stamp (projects may
    // themselves contain '-'; stamps only in their collision suffix).
    for (i, _) in text.match_indices('-') {
        let (project, rest) = (&text[..i], &text[i + 1..]);
        if project.is_empty() {
            continue;
        }
        if stamp::is_stamp(rest) || stamp::is_stamp_prefix(rest) {
            for id in l.prefixed(rest, Some(project))? {
                if !matches.contains(&id) {
                    matches.push(id);
                }
            }
        }
    }
    if stamp::is_stamp_prefix(text) {
        matches.extend(l.prefixed(text, None)?);
    }
    // A whole stamp also matches its own collision variants as a prefix; prefer it.
    if let Some(exact) = matches
        .iter()
        .find(|id| id.as_str() == text || text.ends_with(&format!("-{id}")))
    {
        return Ok(exact.clone());
    }
    match matches.len() {
        0 => Err(Error::input(format!("unknown task '{text}'"))),
        1 => Ok(matches.remove(0)),
        n => {
            let shown: Vec<&str> = matches.iter().take(SHOWN).map(String::as_str).collect();
            // Lookups stop at PER_LOOKUP rows, so a count that reached it is a floor.
            let plus = if n >= PER_LOOKUP { "+" } else { "" };
            let more = if n > SHOWN {
                format!(" and {}{plus} more", n - SHOWN)
            } else {
                String::new()
            };
            Err(Error::input(format!(
                "ambiguous task '{text}': matches {}{more}; type more characters",
                shown.join(", ")
            )))
        }
    }
}

fn prefix_matches(
    tx: &Transaction<'_>,
    prefix: &str,
    project: Option<&str>,
) -> Result<Vec<String>> {
    // Every id byte is below 0x7f, so [prefix, prefix+0x7f) is exactly the ids
    // starting with prefix.
    let upper = format!("{prefix}\u{7f}");
    let mut stmt = tx
        .prepare_cached(
            "SELECT id FROM tasks WHERE id >= ?1 AND id < ?2
               AND (?3 IS NULL OR project = ?3) ORDER BY id LIMIT ?4",
        )
        .ctx(|| "failed to prepare id lookup".into())?;
    let rows = stmt
        .query_map(params![prefix, upper, project, PER_LOOKUP as i64], |r| {
            r.get::<_, String>(0)
        })
        .ctx(|| format!("failed to look up task {prefix}"))?;
    rows.collect::<std::result::Result<Vec<_>, _>>()
        .ctx(|| format!("failed to look up task {prefix}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_ids_are_the_shortest_unique_prefixes() {
        let ids = [
            "dbB4k7Xq2",
            "dbB4k7Xq3",
            "dbB4m0000",
            "dc0000000",
            "dc0000000-2",
            "zz0000000",
        ];
        let short = ShortIds::new(ids.iter().map(|s| s.to_string()).collect());
        // Built from each id's neighbours alone, the same.
        let near = (0..ids.len())
            .map(|i| {
                let at = |j: Option<usize>| j.and_then(|j| ids.get(j)).map(|s| s.to_string());
                (ids[i].to_string(), at(i.checked_sub(1)), at(Some(i + 1)))
            })
            .collect();
        let around = ShortIds::around(near);
        for id in ids {
            assert_eq!(around.id(id), short.id(id), "{id}");
        }
        let got: Vec<&str> = ids.iter().map(|id| short.id(id)).collect();
        assert_eq!(
            got,
            [
                "dbB4k7Xq2",
                "dbB4k7Xq3",
                "dbB4m",
                "dc0000000",
                "dc0000000-2",
                "zz00"
            ]
        );
        assert_eq!(short.handle("dbB4m0000", Some("app")), "app-dbB4m");
        assert_eq!(short.handle("zz0000000", None), "zz00");
        assert_eq!(short.id("not-a-task"), "not-a-task");
    }

    /// What a listing shows is what resolve takes back, bare and as a handle, even
    /// for ids minted in one burst that share all but their last digits.
    #[test]
    fn every_short_id_resolves_to_its_task() {
        let clock = std::sync::Arc::new(crate::clock::ManualClock::new(1_795_000_000_000_000));
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open_dir(dir.path(), clock).unwrap();
        let mut ids = Vec::new();
        for i in 0..40 {
            let t = crate::task::NewTask {
                title: format!("t{i}"),
                project: Some(if i % 2 == 0 { "app" } else { "web" }.into()),
                ..Default::default()
            };
            ids.push(store.add_task(t, &[]).unwrap());
        }
        let short = store.short_ids().unwrap();
        // Asked for a few, each prefix is the one the whole listing gives it.
        let few: Vec<&str> = ids.iter().step_by(3).map(|t| t.id.as_str()).collect();
        let some = store.short_ids_of(&few).unwrap();
        for id in &few {
            assert_eq!(some.id(id), short.id(id), "{id}");
        }
        assert_eq!(some.id("not-a-task"), "not-a-task");
        for t in &ids {
            let s = short.id(&t.id);
            assert!(t.id.starts_with(s), "{s}");
            assert_eq!(store.resolve(s).unwrap(), t.id, "{s}");
            let h = short.handle(&t.id, t.project.as_deref());
            assert_eq!(store.resolve(&h).unwrap(), t.id, "{h}");
        }
    }
}
