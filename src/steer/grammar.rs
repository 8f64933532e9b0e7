//! The ACK/NACK grammar: what a piece of assistant prose issues. An agent retires a
//! steering item by writing `ACK <key>: …` (or refuses it with `NACK <key>: reason`) in
//! its own prose, so this parser is the whole interface and must be exact: a directive
//! that is quoted, shown in code, negated or hypothetical never counts.
//!
//! The work is split by meaning: [`walk`] (the suppression walk shared by every reader)
//! decides which lines are shown rather than issued; `header` recognises directives on
//! issued lines (token, position, keys, separator); `clause` applies the use-versus-
//! mention vetoes; `markdown` holds the block-prefix rules both rely on. This file joins
//! the directives found into bodies: a body is the prose after a directive's header, up
//! to the next directive's lead-in, on any later line, shown lines included.
//!
//! Invariants: directives come out in source order; keys are stamps
//! ([`crate::stamp::is_stamp`]), deduplicated, and empty exactly for a keyless
//! directive, which has no body; nothing on a shown line starts a directive; text
//! without `ACK` costs one `memmem` scan and no allocation.

mod clause;
mod header;
mod markdown;
mod walk;

#[cfg(test)]
mod properties;
#[cfg(test)]
mod tests;

use memchr::memmem::Finder;
use serde::Serialize;

pub use walk::{walk, Line};

/// Whether a directive acknowledges an item or refuses it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Polarity {
    Ack,
    Nack,
}

/// What is wrong with a directive that is shaped like one but cannot act.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Problem {
    /// `ACK:` with no key: the agent answered, but nothing says which item.
    Keyless,
}

/// One directive issued by the text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Directive {
    pub polarity: Polarity,
    /// The keys, in order, deduplicated; empty exactly when `problem` is `Keyless`.
    pub keys: Vec<String>,
    /// 1-based line of the directive's header.
    pub line: usize,
    /// The prose after the key list up to the next directive, trimmed of whitespace and
    /// of dangling emphasis markers; `Some("")` when the agent wrote none (for a NACK
    /// the caller treats that as a problem). `None` for a keyless directive.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub problem: Option<Problem>,
}

/// A directive located in the whole text, before its body is cut out.
struct Located {
    found: header::Found,
    line: usize,
    line_start: usize,
}

/// Everything the text issues, in source order.
pub fn parse(text: &str) -> Vec<Directive> {
    let finder = Finder::new(b"ACK");
    let bytes = text.as_bytes();
    let Some(mut next_ack) = finder.find(bytes) else {
        return Vec::new();
    };
    let mut located = Vec::new();
    let mut found = Vec::new();
    for raw in walk::Blocks::new(text) {
        // Every line is walked (fences carry state), but only lines holding an `ACK`
        // are read, and the walk stops after the last one.
        let end = raw.start + raw.text.len();
        if next_ack >= end {
            continue;
        }
        match finder.find(&bytes[end..]) {
            Some(n) => next_ack = end + n,
            None => next_ack = usize::MAX,
        }
        if !raw.block && !walk::is_grep_context(raw.text) {
            header::scan(raw.text, &finder, &mut found);
        }
        located.extend(found.drain(..).map(|found| Located {
            found,
            line: raw.number,
            line_start: raw.start,
        }));
        if next_ack == usize::MAX {
            break;
        }
    }
    let leads: Vec<usize> = located
        .iter()
        .map(|l| l.line_start + l.found.lead)
        .collect();
    located
        .into_iter()
        .enumerate()
        .map(|(i, l)| {
            let keyless = l.found.keys.is_empty();
            let start = l.line_start + l.found.body;
            let end = leads.get(i + 1).map_or(text.len(), |&e| e.max(start));
            Directive {
                polarity: l.found.polarity,
                keys: l.found.keys,
                line: l.line,
                body: (!keyless).then(|| clean_body(&text[start..end])),
                problem: keyless.then_some(Problem::Keyless),
            }
        })
        .collect()
}

/// Trims whitespace, then emphasis markers left dangling at the end by the next
/// directive's header (`**ACK a:** x **ACK b:** y` gives `x`, not `x **`), and writes
/// line ends as `\n`.
fn clean_body(body: &str) -> String {
    let mut body = body.trim();
    for marker in ['*', '_'] {
        let kept = body.trim_end_matches(marker);
        let run = body.len() - kept.len();
        if run > 0 && kept.matches(marker).count() < run {
            body = kept.trim_end();
        }
    }
    if body.contains('\r') {
        body.replace("\r\n", "\n")
    } else {
        body.to_owned()
    }
}
