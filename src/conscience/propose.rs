//! Proposed maxims: what the operator had to say again and again, drafted as a maxim
//! for the operator to review. Never a maxim file written: a draft is filed as a task.
//!
//! The acknowledged steering items (the operator's corrections, not the conscience's
//! own reminders) are split into significant terms (case-folded words of three
//! letters or more, stop-words and numbers removed, a plural `s` folded). Terms are
//! taken by how many items share them, most first: a term that no maxim owns and
//! that at least `min` items not yet in a theme share makes a theme of those items.
//! Its trigger words are the forms of the term the items use, plus the other
//! unowned terms every item of the theme shares (at most [`MAX_WORDS`]); its message
//! is the operator's own words (the latest item). Every item is in one theme at most.

use super::matcher::tokens;
use super::Book;
use crate::store::{AckRecord, Item};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet, HashSet};

/// At most this many trigger words per draft.
pub const MAX_WORDS: usize = 5;

/// An item with the acknowledgments that answered it.
#[derive(Debug, Clone, Serialize)]
pub struct Evidence {
    pub item: Item,
    pub acks: Vec<AckRecord>,
}

/// A drafted maxim.
#[derive(Debug, Clone, Serialize)]
pub struct Draft {
    /// The theme's term: the proposal's identity (one task per theme, ever).
    pub theme: String,
    /// The maxim's file name, without `.toml`.
    pub name: String,
    pub words: Vec<String>,
    pub message: String,
    pub evidence: Vec<Evidence>,
    /// The stanza to put in `maxims/NAME.toml`.
    pub toml: String,
}

const STOP: &[&str] = &[
    "the", "and", "for", "are", "but", "not", "you", "your", "all", "any", "can", "had", "her",
    "was", "one", "our", "out", "get", "has", "him", "his", "how", "its", "may", "new", "now",
    "old", "see", "two", "way", "who", "did", "yes", "let", "put", "say", "she", "too", "use",
    "using", "used", "that", "this", "with", "have", "from", "they", "will", "would", "there",
    "their", "what", "about", "which", "when", "make", "made", "like", "time", "just", "know",
    "take", "into", "year", "some", "could", "them", "than", "then", "look", "only", "come",
    "over", "think", "also", "back", "after", "work", "first", "well", "even", "want", "because",
    "these", "give", "most", "very", "should", "must", "don", "doesn", "didn", "isn", "aren",
    "won", "wouldn", "shouldn", "please", "again", "instead", "still", "here", "where", "each",
    "every", "other", "such", "same", "being", "been", "were", "does", "doing", "done", "it's",
    "more", "less", "much", "many", "never", "always", "thing", "things", "need", "needs", "keep",
    "stop", "start", "sure", "ack", "nack", "task", "code", "agent",
];

/// The significant terms of `text`: (folded term, form as written).
fn terms(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut seen = HashSet::new();
    for t in tokens(text) {
        if t.chars().count() < 3
            || t.chars().all(|c| c.is_ascii_digit())
            || STOP.contains(&t.as_str())
        {
            continue;
        }
        let stem = fold(&t);
        if seen.insert((stem.clone(), t.clone())) {
            out.push((stem, t));
        }
    }
    out
}

fn fold(t: &str) -> String {
    match t.strip_suffix('s') {
        Some(s) if s.len() >= 4 && !s.ends_with('s') => s.to_string(),
        _ => t.to_string(),
    }
}

/// The drafts for themes recurring in at least `min` of `items` (already filtered to
/// acknowledged corrections), given the maxims in force.
pub fn drafts(items: &[Evidence], book: &Book, min: usize) -> Vec<Draft> {
    let min = min.max(1);
    let owned: HashSet<String> = book
        .maxims
        .iter()
        .flat_map(|m| m.words.iter().chain(m.phrases.iter()))
        .flat_map(|w| w.split(' ').map(fold).collect::<Vec<_>>())
        .collect();
    let per_item: Vec<Vec<(String, String)>> = items.iter().map(|e| terms(&e.item.text)).collect();
    let mut df: BTreeMap<&str, BTreeSet<usize>> = BTreeMap::new();
    for (i, ts) in per_item.iter().enumerate() {
        for (stem, _) in ts {
            df.entry(stem.as_str()).or_default().insert(i);
        }
    }
    let mut order: Vec<(&str, usize)> = df.iter().map(|(t, s)| (*t, s.len())).collect();
    order.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    let mut used: HashSet<usize> = HashSet::new();
    let mut taken_names: HashSet<String> = book.maxims.iter().map(|m| m.name.clone()).collect();
    let mut out = Vec::new();
    for (term, _) in order {
        if owned.contains(term) {
            continue;
        }
        let group: Vec<usize> = df[term]
            .iter()
            .copied()
            .filter(|i| !used.contains(i))
            .collect();
        if group.len() < min {
            continue;
        }
        let forms = |stem: &str| -> BTreeSet<String> {
            group
                .iter()
                .flat_map(|&i| {
                    per_item[i]
                        .iter()
                        .filter(|(s, _)| s == stem)
                        .map(|(_, f)| f.clone())
                })
                .collect()
        };
        let mut words: Vec<String> = forms(term).into_iter().collect();
        let mut shared: Vec<(&str, usize)> = df
            .iter()
            .filter(|(t, s)| {
                **t != term && !owned.contains(**t) && group.iter().all(|i| s.contains(i))
            })
            .map(|(t, s)| (*t, s.len()))
            .collect();
        shared.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
        for (t, _) in shared {
            for f in forms(t) {
                if words.len() < MAX_WORDS && !words.contains(&f) {
                    words.push(f);
                }
            }
        }
        words.truncate(MAX_WORDS);
        used.extend(group.iter().copied());
        let latest = group
            .iter()
            .max_by_key(|&&i| (items[i].item.created, i))
            .expect("a group has items");
        let message = items[*latest]
            .item
            .text
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        let mut name: String = term
            .chars()
            .filter(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '_')
            .collect();
        if name.is_empty() {
            name = "proposed".into();
        }
        let base = name.clone();
        let mut n = 2;
        while taken_names.contains(&name) {
            name = format!("{base}-{n}");
            n += 1;
        }
        taken_names.insert(name.clone());
        let toml = stanza(&name, &message, &words);
        out.push(Draft {
            theme: term.to_string(),
            name,
            words,
            message,
            evidence: group.iter().map(|&i| items[i].clone()).collect(),
            toml,
        });
    }
    out
}

fn stanza(name: &str, message: &str, words: &[String]) -> String {
    #[derive(Serialize)]
    struct T<'a> {
        message: &'a str,
        words: &'a [String],
    }
    let body = toml::to_string(&T { message, words }).unwrap_or_default();
    format!("# maxims/{name}.toml\n{body}")
}

/// The task body of a draft: the evidence (each item and the ACKs that answered it)
/// and the stanza to merge.
pub fn body(d: &Draft) -> String {
    let mut s = format!(
        "The operator corrected agents {} times on \"{}\". A maxim would remind the next agent.\n\
         Review it; to adopt it, add the file below (spice never edits maxims itself).\n\nEvidence:\n",
        d.evidence.len(),
        d.theme
    );
    for e in &d.evidence {
        s.push_str(&format!(
            "- {} (for {} {}): {}\n",
            e.item.key,
            e.item.target.kind.as_str(),
            e.item.target.name,
            e.item.text.split_whitespace().collect::<Vec<_>>().join(" ")
        ));
        for a in e.acks.iter().filter(|a| a.effect == "acked") {
            s.push_str(&format!(
                "  {} at {}:{}: {}\n",
                a.polarity.to_uppercase(),
                a.source,
                a.line,
                a.body
            ));
        }
    }
    s.push_str(&format!("\n```toml\n{}```\n", d.toml));
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{ItemState, Target, TargetKind};

    fn item(key: &str, text: &str, at: i64) -> Evidence {
        Evidence {
            item: Item {
                key: key.into(),
                target: Target {
                    kind: TargetKind::Lane,
                    name: "a".into(),
                },
                text: text.into(),
                state: ItemState::Acked,
                created: at,
                expires: at + 1,
                shown: 1,
                last_shown: None,
                closed_at: None,
                problem: None,
            },
            acks: vec![],
        }
    }

    #[test]
    fn a_recurring_theme_is_drafted_with_unowned_words() {
        let items = vec![
            item(
                "k1",
                "Don't mock the database in tests; use the real sqlite file.",
                1,
            ),
            item(
                "k2",
                "Again: no mocks of the database, run against sqlite.",
                2,
            ),
            item(
                "k3",
                "Stop adding a fallback when the config is missing.",
                3,
            ),
            item("k4", "The README typo.", 4),
        ];
        let book = super::super::maxim::compile(std::path::Path::new("maxims"), &[]).unwrap();
        let d = drafts(&items, &book, 2);
        assert_eq!(d.len(), 1, "{d:?}");
        // "fallback" is owned by a built-in: no theme; "database" and "sqlite" shared.
        assert_eq!(d[0].theme, "database");
        assert_eq!(d[0].words, ["database", "mock", "mocks", "sqlite"]);
        assert_eq!(
            d[0].message,
            "Again: no mocks of the database, run against sqlite."
        );
        assert_eq!(d[0].evidence.len(), 2);
        let parsed = super::super::maxim::parse_maxim(
            std::path::Path::new("x.toml"),
            &d[0].name,
            d[0].toml.split_once('\n').unwrap().1,
        )
        .unwrap();
        assert_eq!(parsed.words, d[0].words);
        assert!(drafts(&items, &book, 3).is_empty());
    }
}
