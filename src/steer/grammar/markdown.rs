//! Block-level Markdown prefixes, each an explicit rule with its CommonMark width:
//! indentation, list markers, task boxes, ATX headings and emphasis runs. The walk uses
//! them to find fences and quotes inside list items; the header uses them to find where a
//! line's content starts, which is where an issued directive sits.
//!
//! Invariants: every rule takes the bytes at a position and returns how many it consumed
//! (0 or `None` when it does not apply), never reads past the line and never allocates.

/// CommonMark: up to three spaces of indentation keep a block construct (fence, quote,
/// list item, heading, directive); four or more make indented code.
pub(super) const MAX_INDENT: usize = 3;
/// Tab stops every four columns, as in CommonMark, so a leading tab is already code.
const TAB_STOP: usize = 4;
/// Ordered list numbers have at most nine digits in CommonMark (`123456789.`).
const MAX_ORDINAL_DIGITS: usize = 9;
/// Spaces between a list marker and its content: 1 to 4; five or more would start
/// indented code inside the item.
const MAX_MARKER_GAP: usize = 4;
/// Nested markers on one line (`- 1. item`): more than this is noise, not a list.
const MAX_LIST_DEPTH: usize = 3;
/// ATX headings: `#` through `######`, then at least one space.
const MAX_HEADING: usize = 6;
/// `*`, `**`, `***` and the `_` forms: the emphasis a directive's header may wear.
pub(super) const MAX_EMPHASIS: usize = 3;

/// Columns and bytes of leading spaces and tabs.
pub(super) fn indent(s: &[u8]) -> (usize, usize) {
    let mut col = 0;
    for (i, &c) in s.iter().enumerate() {
        match c {
            b' ' => col += 1,
            b'\t' => col += TAB_STOP - col % TAB_STOP,
            _ => return (col, i),
        }
    }
    (col, s.len())
}

/// One list marker: `-`, `*`, `+`, or 1–9 digits then `.` or `)`; then 1–4 spaces or tabs.
fn list_marker(s: &[u8]) -> Option<usize> {
    let mark = match *s.first()? {
        b'-' | b'*' | b'+' => 1,
        b'0'..=b'9' => {
            let digits = s
                .iter()
                .take(MAX_ORDINAL_DIGITS + 1)
                .take_while(|c| c.is_ascii_digit())
                .count();
            match s.get(digits) {
                Some(b'.' | b')') if digits <= MAX_ORDINAL_DIGITS => digits + 1,
                _ => return None,
            }
        }
        _ => return None,
    };
    let gap = s[mark..]
        .iter()
        .take(MAX_MARKER_GAP + 1)
        .take_while(|&&c| c == b' ' || c == b'\t')
        .count();
    (1..=MAX_MARKER_GAP).contains(&gap).then_some(mark + gap)
}

/// A GFM task box after a list marker: `[ ]`, `[x]` or `[X]`, then at least one space.
fn task_box(s: &[u8]) -> Option<usize> {
    match s {
        [b'[', b' ' | b'x' | b'X', b']', rest @ ..] => {
            let gap = rest.iter().take_while(|&&c| c == b' ').count();
            (gap > 0).then_some(3 + gap)
        }
        _ => None,
    }
}

/// List markers (nested up to [`MAX_LIST_DEPTH`]) and a task box after them.
pub(super) fn list_prefix(s: &[u8]) -> usize {
    let mut at = 0;
    for _ in 0..MAX_LIST_DEPTH {
        match list_marker(&s[at..]) {
            Some(n) => at += n,
            None => break,
        }
    }
    if at > 0 {
        at += task_box(&s[at..]).unwrap_or(0);
    }
    at
}

/// An ATX heading opener: 1–6 `#`, then one or more spaces or tabs.
fn heading(s: &[u8]) -> usize {
    let hashes = s
        .iter()
        .take(MAX_HEADING + 1)
        .take_while(|&&c| c == b'#')
        .count();
    if hashes == 0 || hashes > MAX_HEADING {
        return 0;
    }
    let gap = s[hashes..]
        .iter()
        .take_while(|&&c| c == b' ' || c == b'\t')
        .count();
    if gap == 0 {
        0
    } else {
        hashes + gap
    }
}

/// Where a line's content starts: after at most [`MAX_INDENT`] spaces, list markers, a
/// task box and a heading opener, in that order (`  - [x] ## text`).
pub(super) fn content_start(s: &[u8]) -> usize {
    let (cols, mut at) = indent(s);
    if cols > MAX_INDENT {
        return at;
    }
    at += list_prefix(&s[at..]);
    at + heading(&s[at..])
}

pub(super) fn is_emphasis(c: u8) -> bool {
    c == b'*' || c == b'_'
}

/// Skips an emphasis run forwards, however long: markers are never part of a key or body.
pub(super) fn skip_emphasis(s: &[u8], at: usize) -> usize {
    at + s[at..].iter().take_while(|&&c| is_emphasis(c)).count()
}

/// Skips at most [`MAX_EMPHASIS`] emphasis markers backwards from `at`.
pub(super) fn skip_back_emphasis(s: &[u8], at: usize) -> usize {
    at - s[..at]
        .iter()
        .rev()
        .take(MAX_EMPHASIS)
        .take_while(|&&c| is_emphasis(c))
        .count()
}

/// Skips spaces and tabs forwards.
pub(super) fn skip_ws(s: &[u8], at: usize) -> usize {
    at + s[at..]
        .iter()
        .take_while(|&&c| c == b' ' || c == b'\t')
        .count()
}

/// Skips spaces and tabs backwards.
pub(super) fn skip_back_ws(s: &[u8], at: usize) -> usize {
    at - s[..at]
        .iter()
        .rev()
        .take_while(|&&c| c == b' ' || c == b'\t')
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_starts_after_each_prefix_rule() {
        let cases: &[(&str, usize)] = &[
            ("ACK", 0),
            ("   ACK", 3),
            ("- ACK", 2),
            ("* ACK", 2),
            ("+ ACK", 2),
            ("1. ACK", 3),
            ("12) ACK", 4),
            ("- [x] ACK", 6),
            ("- [ ] ACK", 6),
            ("## ACK", 3),
            ("###### ACK", 7),
            ("####### ACK", 0),
            ("#ACK", 0),
            ("- 1. ACK", 5),
            ("-ACK", 0),
            ("1234567890. ACK", 0),
            ("-      ACK", 0),
            ("  - ## ACK", 7),
            ("**ACK", 0),
        ];
        for &(line, want) in cases {
            assert_eq!(content_start(line.as_bytes()), want, "{line:?}");
        }
    }

    #[test]
    fn tabs_reach_code_indentation() {
        assert_eq!(indent(b"\tx"), (4, 1));
        assert_eq!(indent(b"  \tx"), (4, 3));
        assert_eq!(indent(b"   x"), (3, 3));
    }
}
