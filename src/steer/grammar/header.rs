//! Directive recognition on one issued line: the token, its header (keys and
//! separator), and the use-versus-mention checks of [`super::clause`].
//!
//! The header grammar, each part a named rule below:
//!
//! ```text
//! directive := emphasis? TOKEN emphasis? lead-sep? filler{0,3} keys tail
//! TOKEN     := "ACK" | "NACK", ALL CAPS, not joined to a word on either side
//! keys      := key (joiner filler{0,3} key)* | "(" key-list ")" | "[" key-list "]"
//! key       := wrapper? stamp wrapper? closer   (stamp: 9 base52 digits, optional -N)
//! wrapper   := ` `` " ' “” ‘’ «» ( ) [ ]
//! closer    := whitespace | : | , | . | ; | ) | ] | — | – | end of line (emphasis may come first)
//! joiner    := "," | "&" | "/" | "and" | ", and" | whitespace
//! tail      := emphasis? ")"* separator? emphasis?    separator: : , ; . — – - --
//! ```
//!
//! Position: a token with a key may stand anywhere on the line ("Done, so ACK k: x");
//! only the guards of [`super::clause`] discard it. At a *directive position* (the
//! start of the line's content, after indentation, list markers, task box, heading and
//! up to three emphasis markers; right after the previous directive's header; or after
//! `.` `!` `?` `;` `:` and a space) two looser shapes count too: filler words before
//! the key ("ACK inbox item k"), and a *keyless* header (a separator right after the
//! token, or nothing else on the line). Elsewhere the token must be followed by its key,
//! since "waiting on ACK for k" and "got an ACK." are prose about the word. A header
//! whose token ends the line with no key yet is *open*: its key may start the next line
//! ([`continued`]).
//!
//! A key ends at a closer: `ACK k/path`, `ACK k.rs`, `ACK k's` are not headers. A
//! lead separator glued to the key is not one either: `ACK -k` (a flag, to the eye)
//! names no key, so at a directive position it is keyless.
//!
//! Invariants: offsets are byte offsets into the line, on char boundaries; each
//! candidate is examined in time proportional to its own header, so a line costs linear
//! time in its length.

use memchr::memmem::Finder;

use super::clause::{self, Clause, CodeSpans};
use super::markdown::{
    content_start, indent, skip_back_emphasis, skip_back_ws, skip_emphasis, skip_ws, MAX_INDENT,
};
use super::Polarity;
use crate::stamp;

/// Filler words allowed between the token and a key ("ACK inbox key k").
const FILLERS: &[&str] = &[
    "inbox", "steering", "item", "items", "key", "keys", "for", "on", "of", "to", "the",
];
/// At most this many filler words before each key.
const MAX_FILLERS: usize = 3;

/// Wrappers allowed around a key alone: (opener, closer). Backtick runs are handled
/// apart, since their closer is a run of the same length.
const KEY_WRAPPERS: &[(&str, &str)] = &[
    ("\"", "\""),
    ("'", "'"),
    ("“", "”"),
    ("‘", "’"),
    ("«", "»"),
    ("(", ")"),
    ("[", "]"),
];

/// Brackets allowed around a whole key list: "ACK (k1, k2): done".
const LIST_BRACKETS: &[(u8, u8)] = &[(b'(', b')'), (b'[', b']')];

/// A directive found on one line.
pub(super) struct Found {
    pub polarity: Polarity,
    /// Empty for a keyless directive.
    pub keys: Vec<String>,
    /// Where the directive's lead-in starts: the previous directive's body ends here.
    pub lead: usize,
    /// Where its body starts (just after the header).
    pub body: usize,
    /// The header reached the end of the line with no key: the key may start the next
    /// line. Without one it is keyless if `positioned`, else nothing.
    pub open: bool,
    /// It stands at a directive position (see the module doc).
    pub positioned: bool,
}

/// A parsed header: its keys (empty: keyless or open), where its body starts, and
/// whether it is open.
struct Header {
    keys: Vec<String>,
    body: usize,
    open: bool,
}

/// Finds every directive issued on `line`, in order. `resume` is where an open header
/// of the line before took its keys from this line: the scan starts after them.
pub(super) fn scan(line: &str, finder: &Finder<'_>, resume: Option<usize>, out: &mut Vec<Found>) {
    let b = line.as_bytes();
    let start = content_start(b);
    let mut clause = Clause::new(resume.unwrap_or(start));
    let mut spans: Option<CodeSpans> = None;
    let mut previous: Option<usize> = resume;
    for p in finder.find_iter(b) {
        let Some((t, polarity)) = token_at(line, p) else {
            continue;
        };
        if previous.is_some_and(|end| t < end) {
            continue;
        }
        let e = skip_back_emphasis(b, t);
        if clause::quoted_before(line, e) {
            continue;
        }
        let lead = position(b, e, start, previous);
        let positioned = lead.is_some();
        let Some(h) = header(line, p + 3, positioned) else {
            continue;
        };
        if h.keys.is_empty() && !positioned && !h.open {
            continue;
        }
        let spans = spans.get_or_insert_with(|| CodeSpans::new(b));
        if spans.contains(t) || clause.discards(line, t, spans, polarity) {
            continue;
        }
        out.push(Found {
            polarity,
            keys: h.keys,
            lead: lead.unwrap_or_else(|| mid_line_lead(b, e)),
            body: h.body,
            open: h.open,
            positioned,
        });
        previous = Some(h.body);
        clause.restart(h.body);
    }
}

/// The keys an open header of the line before finds at the start of `line` (after at
/// most three spaces), and where the body starts.
pub(super) fn continued(line: &str) -> Option<(Vec<String>, usize)> {
    let b = line.as_bytes();
    let (cols, at) = indent(b);
    if cols > MAX_INDENT {
        return None;
    }
    let (keys, end) = keys(line, at, true)?;
    Some((keys, tail(b, end)))
}

/// Where a token standing mid-line begins its lead-in: before the spaces and opening
/// brackets in front of it, so the previous body does not end in "(".
fn mid_line_lead(b: &[u8], e: usize) -> usize {
    let mut at = e;
    while at > 0 && matches!(b[at - 1], b' ' | b'\t' | b'(' | b'[') {
        at -= 1;
    }
    at
}

/// The token around an `ACK` found at `p`: `NACK` if an `N` precedes. ALL CAPS and
/// standalone: no letter or digit before it, and after it no letter or digit, nor a
/// letter joined by `'`, `’` or `-` ("ACK'd", "ACK-ed").
fn token_at(line: &str, p: usize) -> Option<(usize, Polarity)> {
    let b = line.as_bytes();
    let (t, polarity) = if p > 0 && b[p - 1] == b'N' {
        (p - 1, Polarity::Nack)
    } else {
        (p, Polarity::Ack)
    };
    if line[..t]
        .chars()
        .next_back()
        .is_some_and(char::is_alphanumeric)
    {
        return None;
    }
    let mut after = line[p + 3..].chars();
    match after.next() {
        Some(c) if c.is_alphanumeric() => None,
        Some('\'' | '’' | '-') if after.next().is_some_and(char::is_alphanumeric) => None,
        _ => Some((t, polarity)),
    }
}

/// Where the directive whose token (with its emphasis) starts at `e` begins its
/// lead-in, if it stands at an issued position.
fn position(b: &[u8], e: usize, start: usize, previous: Option<usize>) -> Option<usize> {
    if e == start {
        return Some(0);
    }
    let w = skip_back_ws(b, e);
    if let Some(end) = previous {
        if w <= end {
            return Some(end);
        }
    }
    if w == e {
        return None;
    }
    let c = w - b[..w]
        .iter()
        .rev()
        .take_while(|&&c| matches!(c, b'*' | b'_' | b')'))
        .count();
    let mark = c.checked_sub(1)?;
    match b[mark] {
        b'.' if !clause::abbreviation_before(b, mark) => Some(c),
        b'!' | b'?' => Some(c),
        // The mark belongs to neither body: "done; NACK k" leaves "done".
        b';' | b':' => Some(mark),
        _ => None,
    }
}

/// Parses the header after the token (which ends at `a`). Filler words and keyless
/// headers are allowed only at a directive position (`loose`); an open header (the
/// line ends before any key) is returned either way.
fn header(line: &str, a: usize, loose: bool) -> Option<Header> {
    let b = line.as_bytes();
    let i = skip_emphasis(b, a);
    let s = skip_ws(b, i);
    let lead_sep = separator(b, s);
    if lead_sep.is_none() && s == i && s < b.len() {
        // Glued to what follows: "ACK`k`", "ACK(k)".
        return None;
    }
    let k = lead_sep.map_or(s, |n| skip_ws(b, skip_emphasis(b, s + n)));
    // A separator glued to what follows is part of it ("ACK -k" reads like a flag,
    // not a key): the header has no key.
    let glued = lead_sep.is_some_and(|n| {
        let after = skip_emphasis(b, s + n);
        after == k && after < b.len()
    });
    if let Some((keys, end)) = keys(line, k, loose).filter(|_| !glued) {
        return Some(Header {
            keys,
            body: tail(b, end),
            open: false,
        });
    }
    let f = if loose { skip_fillers(b, k) } else { k };
    let f = skip_ws(b, skip_emphasis(b, f));
    let f_sep = separator(b, f);
    let after = skip_ws(b, skip_emphasis(b, f + f_sep.unwrap_or(0)));
    let keyless = Header {
        keys: Vec::new(),
        body: after,
        open: after == b.len(),
    };
    if keyless.open || (loose && (lead_sep.is_some() || f_sep.is_some())) {
        return Some(keyless);
    }
    None
}

/// The key list at `at`: bare (each key in its own wrapper or none), else bracketed
/// as a whole.
fn keys(line: &str, at: usize, fillers: bool) -> Option<(Vec<String>, usize)> {
    let b = line.as_bytes();
    if let Some(found) = key_list(line, at, fillers) {
        return Some(found);
    }
    let &(_, close) = LIST_BRACKETS.iter().find(|(o, _)| b.get(at) == Some(o))?;
    let (keys, end) = key_list(line, skip_ws(b, at + 1), fillers)?;
    let c = skip_ws(b, skip_emphasis(b, end));
    (b.get(c) == Some(&close) && closes(line, c + 1)).then_some((keys, c + 1))
}

/// One or more keys joined by commas, `&`, `/`, `and` or spaces, deduplicated.
fn key_list(line: &str, at: usize, fillers: bool) -> Option<(Vec<String>, usize)> {
    let b = line.as_bytes();
    let mut keys: Vec<&str> = Vec::new();
    let (mut at, mut end) = (at, at);
    let skip = |at| if fillers { skip_fillers(b, at) } else { at };
    while let Some((key, e)) = key_token(line, skip_emphasis(b, skip(at))) {
        keys.push(key);
        end = e;
        let q = skip_ws(b, skip_emphasis(b, end));
        at = match joiner(b, q) {
            Some(n) => skip_ws(b, q + n),
            None if q > end => q,
            None => break,
        };
    }
    (!keys.is_empty()).then(|| (dedup(keys), end))
}

/// Keeps the first of each key, in order; a set only for lists too long to scan.
fn dedup(keys: Vec<&str>) -> Vec<String> {
    const LINEAR: usize = 16;
    if keys.len() <= LINEAR {
        let mut out: Vec<String> = Vec::with_capacity(keys.len());
        for key in keys {
            if !out.iter().any(|k| k == key) {
                out.push(key.to_owned());
            }
        }
        return out;
    }
    let mut seen = std::collections::HashSet::new();
    keys.into_iter()
        .filter(|k| seen.insert(*k))
        .map(str::to_owned)
        .collect()
}

/// A key, alone in its optional wrapper and followed by a closer: returns the stamp and
/// the end of the wrapper.
fn key_token(line: &str, p: usize) -> Option<(&str, usize)> {
    let b = line.as_bytes();
    let ticks = b[p..].iter().take_while(|&&c| c == b'`').count();
    let (open, close): (usize, &str) = if ticks > 0 {
        (ticks, &line[p..p + ticks])
    } else {
        KEY_WRAPPERS
            .iter()
            .find(|(o, _)| line[p..].starts_with(o))
            .map_or((0, ""), |&(o, c)| (o.len(), c))
    };
    let s = p + open;
    let run = b[s..]
        .iter()
        .take(stamp::WIDTH + 1)
        .take_while(|c| c.is_ascii_alphanumeric())
        .count();
    let mut e = s + run;
    if b.get(e) == Some(&b'-') && b.get(e + 1).is_some_and(u8::is_ascii_digit) {
        e += 1 + b[e + 1..].iter().take_while(|c| c.is_ascii_digit()).count();
    }
    let key = &line[s..e];
    if run != stamp::WIDTH || !stamp::is_stamp(key) {
        return None;
    }
    if !close.is_empty() {
        if !line[e..].starts_with(close) || (ticks > 0 && b.get(e + ticks) == Some(&b'`')) {
            return None;
        }
        e += close.len();
    }
    closes(line, e).then_some((key, e))
}

/// True if a key may end at `at`: what follows (past emphasis) is whitespace, the end of
/// the line, or one of `: , ; ) ] — –`, or a `.` not followed by a letter or digit
/// ("k." ends a sentence, "k.rs" names a file).
fn closes(line: &str, at: usize) -> bool {
    let rest = &line[skip_emphasis(line.as_bytes(), at)..];
    let mut chars = rest.chars();
    match chars.next() {
        None => true,
        Some('.') => !chars.next().is_some_and(char::is_alphanumeric),
        Some(c) => c.is_whitespace() || matches!(c, ':' | ',' | ';' | ')' | ']' | '—' | '–'),
    }
}

/// Skips up to [`MAX_FILLERS`] filler words, each followed by whitespace, or by a
/// separator for the last one ("ACK inbox: done" is keyless, not nothing).
fn skip_fillers(b: &[u8], mut at: usize) -> usize {
    for _ in 0..MAX_FILLERS {
        let len = b[at..]
            .iter()
            .take_while(|c| c.is_ascii_alphabetic())
            .count();
        let word = &b[at..at + len];
        if len == 0
            || !FILLERS
                .iter()
                .any(|f| f.as_bytes().eq_ignore_ascii_case(word))
        {
            break;
        }
        let next = skip_ws(b, at + len);
        if next == at + len {
            if separator(b, next).is_some() {
                at = next;
            }
            break;
        }
        at = next;
    }
    at
}

/// A list joiner at `q`: `,`, `&` or `/` (then optionally `and`), or `and` alone.
fn joiner(b: &[u8], q: usize) -> Option<usize> {
    let and_at = |i: usize| {
        let word = b.get(i..i + 3)?;
        (word.eq_ignore_ascii_case(b"and") && matches!(b.get(i + 3), Some(b' ' | b'\t')))
            .then_some(3)
    };
    match b.get(q)? {
        b',' | b'&' | b'/' => {
            let s = skip_ws(b, q + 1);
            Some(and_at(s).map_or(1, |n| s + n - q))
        }
        _ => and_at(q),
    }
}

/// A separator after the keys: `:` `,` `;` `.` `—` `–`, or one or two `-`.
fn separator(b: &[u8], at: usize) -> Option<usize> {
    let rest = &b[at..];
    match rest.first()? {
        b':' | b',' | b';' | b'.' => Some(1),
        b'-' => Some(if rest.get(1) == Some(&b'-') { 2 } else { 1 }),
        _ if rest.starts_with("—".as_bytes()) || rest.starts_with("–".as_bytes()) => Some(3),
        _ => None,
    }
}

/// Where the body starts after the last key: past closing emphasis and brackets (the
/// token's own "(ACK k)"), one separator, more emphasis (`**ACK k:**`) and spaces.
fn tail(b: &[u8], end: usize) -> usize {
    let i = skip_emphasis(b, end);
    let i = skip_emphasis(
        b,
        i + b[i..]
            .iter()
            .take_while(|&&c| c == b')' || c == b']')
            .count(),
    );
    let s = skip_ws(b, i);
    let i = separator(b, s).map_or(i, |n| s + n);
    skip_ws(b, skip_emphasis(b, i))
}
