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
//! A header may run across a line break: `ACK` ending one line (an *open* header) takes
//! its keys from the start of the next line, if that line is issued; the directive's
//! line is the token's.
//!
//! Invariants: directives come out in source order; keys are stamps
//! ([`crate::stamp::is_stamp`]), deduplicated, on the header's line or the next, and
//! empty exactly for a keyless directive, which has no body; nothing on a shown line
//! starts a directive or gives one its keys; text without `ACK` costs one `memmem`
//! scan and no allocation.

mod clause;
mod header;
#[doc(hidden)]
pub mod invariants;
mod markdown;
mod walk;
mod words;

#[cfg(test)]
mod guard_tests;
#[cfg(test)]
mod properties;
#[cfg(test)]
mod tests;

use memchr::memmem::Finder;

pub use walk::{walk, Line};

pub use crate::store::vocab::{Directive, Polarity, Problem};

/// A directive located in the whole text, before its body is cut out: its header's
/// line, and where its lead-in and body start (byte offsets into the text).
struct Located {
    polarity: Polarity,
    keys: Vec<String>,
    line: usize,
    lead: usize,
    body: usize,
}

/// Everything the text issues, in source order.
pub fn parse(text: &str) -> Vec<Directive> {
    let finder = Finder::new(b"ACK");
    let bytes = text.as_bytes();
    let Some(mut next_ack) = finder.find(bytes) else {
        return Vec::new();
    };
    let mut located: Vec<Located> = Vec::new();
    let mut found = Vec::new();
    // The last directive found ended its line with no key yet: whether it stands at a
    // directive position (keyless if the next line does not give its key).
    let mut open: Option<bool> = None;
    for raw in walk::Blocks::new(text) {
        // Every line is walked (fences carry state), but only lines holding an `ACK`
        // (or continuing an open header) are read, and the walk stops after the last.
        let end = raw.start + raw.text.len();
        if next_ack >= end && open.is_none() {
            continue;
        }
        if next_ack < end {
            next_ack = finder.find(&bytes[end..]).map_or(usize::MAX, |n| end + n);
        }
        let issued = !raw.block && !walk::is_grep_context(raw.text);
        let mut resume = None;
        if let Some(positioned) = open.take() {
            // An open header is the last directive located; a shown line gives no keys.
            match (
                issued.then(|| header::continued(raw.text)).flatten(),
                located.last_mut(),
            ) {
                (Some((keys, body)), Some(last)) => {
                    last.keys = keys;
                    last.body = raw.start + body;
                    resume = Some(body);
                }
                _ if positioned => {}
                _ => {
                    located.pop();
                }
            }
        }
        if issued {
            header::scan(raw.text, &finder, resume, &mut found);
        }
        for f in found.drain(..) {
            open = f.open.then_some(f.positioned);
            located.push(Located {
                polarity: f.polarity,
                keys: f.keys,
                line: raw.number,
                lead: raw.start + f.lead,
                body: raw.start + f.body,
            });
        }
        if next_ack == usize::MAX && open.is_none() {
            break;
        }
    }
    if open == Some(false) {
        located.pop();
    }
    let leads: Vec<usize> = located.iter().map(|l| l.lead).collect();
    located
        .into_iter()
        .enumerate()
        .map(|(i, l)| {
            let keyless = l.keys.is_empty();
            let end = leads.get(i + 1).map_or(text.len(), |&e| e.max(l.body));
            Directive {
                polarity: l.polarity,
                keys: l.keys,
                line: l.line,
                body: (!keyless).then(|| clean_body(&text[l.body..end])),
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
