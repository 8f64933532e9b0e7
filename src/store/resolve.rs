//! Turning what a person types into a task id: a whole stamp, any unique prefix of
//! one, a handle `PROJECT-stamp` (or `PROJECT-prefix`), or a Taskwarrior uuid.
//!
//! Stamps are case-sensitive (`B` and `b` are different digits), so prefix lookups
//! are index range scans on the binary-collated id, never `LIKE`.

use crate::error::{Error, Result, SqlContext};
use crate::stamp;
use rusqlite::{params, OptionalExtension, Transaction};

/// How many matches an ambiguity message lists.
const SHOWN: usize = 4;
/// How many rows one prefix lookup reads: enough to tell unique from ambiguous and to
/// say roughly how ambiguous, without scanning a huge prefix range.
const PER_LOOKUP: usize = 64;

pub fn resolve(tx: &Transaction<'_>, input: &str) -> Result<String> {
    let text = input.trim();
    if text.is_empty() {
        return Err(Error::input("empty task id"));
    }
    if crate::task::looks_like_uuid(text) {
        return tx
            .prepare_cached("SELECT id FROM tasks WHERE uuid = ?1")
            .and_then(|mut st| {
                st.query_row([text.to_ascii_lowercase()], |r| r.get(0))
                    .optional()
            })
            .ctx(|| format!("failed to look up task {text}"))?
            .ok_or_else(|| Error::input(format!("unknown task '{text}'")));
    }
    if stamp::is_stamp(text) {
        // Prepared once per connection: the supervisor resolves on every tick.
        let hit: Option<String> = tx
            .prepare_cached("SELECT id FROM tasks WHERE id = ?1")
            .and_then(|mut st| st.query_row([text], |r| r.get(0)).optional())
            .ctx(|| format!("failed to look up task {text}"))?;
        if let Some(id) = hit {
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
            for id in prefix_matches(tx, rest, Some(project))? {
                if !matches.contains(&id) {
                    matches.push(id);
                }
            }
        }
    }
    if stamp::is_stamp_prefix(text) {
        matches.extend(prefix_matches(tx, text, None)?);
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
