//! The suppression walk: splits text into lines and says which are *shown* (quoted,
//! code, grep output) rather than *issued*. Every reader of agent prose (the grammar
//! here, the transcript reader later) walks text through this one function, so a token
//! that is shown never acts anywhere.
//!
//! A line is shown when it sits inside a fenced code block (the opening and closing
//! fence lines included), starts with a `>` quote marker, is indented four or more
//! columns, or starts with a grep-style `path:N:` / `path-N-` location. Fences follow
//! CommonMark: the opener is three or more backticks or tildes under at most three
//! spaces (or after list markers), a backtick opener's info string has no backtick, and
//! only a run of the same character at least as long, followed by nothing but
//! whitespace, closes it; an unclosed fence runs to the end of the text.
//!
//! Invariants: lines are those of [`str::lines`] (split on `\n`, a `\r` before it
//! dropped), numbered from 1; the walk never trims a line, because four spaces in front
//! of a first line is the difference between shown code and an issued directive.

use memchr::memchr;

use super::markdown::{indent, list_prefix, MAX_INDENT};

/// Shortest fence run (CommonMark).
const MIN_FENCE: usize = 3;

/// One line of the text and whether it is shown rather than issued.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Line<'a> {
    /// 1-based line number in the text.
    pub number: usize,
    /// The line without its `\n` (or `\r\n`).
    pub text: &'a str,
    /// True when the line is shown (code fence, quote, 4+ column indent, grep context):
    /// nothing on it issues a directive.
    pub shown: bool,
}

/// Walks `text` line by line, in order, saying which lines are shown.
///
/// Lazy and allocation-free; it yields one [`Line`] per line of [`str::lines`].
pub fn walk(text: &str) -> impl Iterator<Item = Line<'_>> {
    Blocks::new(text).map(|raw| Line {
        number: raw.number,
        text: raw.text,
        shown: raw.block || is_grep_context(raw.text),
    })
}

/// A line as the parser sees it: where it starts and whether block structure (fence,
/// quote, indentation) shows it. The grep rule is left to the caller, which checks it
/// only on lines that could issue something.
pub(super) struct Raw<'a> {
    pub start: usize,
    pub number: usize,
    pub text: &'a str,
    pub block: bool,
}

/// An open fence: its character, its length, and how far a closer may be indented
/// (three columns past the list item that holds the fence).
#[derive(Clone, Copy)]
struct Fence {
    ch: u8,
    len: usize,
    closer_indent: usize,
}

impl Fence {
    fn open(s: &[u8], container: usize) -> Option<Fence> {
        let ch = *s.first()?;
        if ch != b'`' && ch != b'~' {
            return None;
        }
        let len = s.iter().take_while(|&&c| c == ch).count();
        if len < MIN_FENCE || (ch == b'`' && memchr(b'`', &s[len..]).is_some()) {
            return None;
        }
        Some(Fence {
            ch,
            len,
            closer_indent: container + MAX_INDENT,
        })
    }

    fn closes(&self, line: &[u8]) -> bool {
        let (cols, at) = indent(line);
        let run = line[at..].iter().take_while(|&&c| c == self.ch).count();
        cols <= self.closer_indent
            && run >= self.len
            && line[at + run..].iter().all(|&c| c == b' ' || c == b'\t')
    }
}

/// The block-structure half of the walk.
pub(super) struct Blocks<'a> {
    text: &'a str,
    pos: usize,
    number: usize,
    fence: Option<Fence>,
}

impl<'a> Blocks<'a> {
    pub(super) fn new(text: &'a str) -> Self {
        Blocks {
            text,
            pos: 0,
            number: 0,
            fence: None,
        }
    }

    fn classify(&mut self, line: &[u8]) -> bool {
        if let Some(fence) = self.fence {
            if fence.closes(line) {
                self.fence = None;
            }
            return true;
        }
        let (cols, at) = indent(line);
        if at == line.len() {
            return false;
        }
        if cols > MAX_INDENT {
            return true;
        }
        let markers = list_prefix(&line[at..]);
        let inner = at + markers;
        if line.get(inner) == Some(&b'>') {
            return true;
        }
        let container = if markers > 0 { cols + markers } else { 0 };
        match Fence::open(&line[inner..], container) {
            Some(fence) => {
                self.fence = Some(fence);
                true
            }
            None => false,
        }
    }
}

impl<'a> Iterator for Blocks<'a> {
    type Item = Raw<'a>;

    fn next(&mut self) -> Option<Raw<'a>> {
        if self.pos >= self.text.len() {
            return None;
        }
        let start = self.pos;
        let rest = &self.text[start..];
        let (mut line, advance) = match memchr(b'\n', rest.as_bytes()) {
            Some(n) => (&rest[..n], n + 1),
            None => (rest, rest.len()),
        };
        if advance > line.len() {
            line = line.strip_suffix('\r').unwrap_or(line);
        }
        self.pos += advance;
        self.number += 1;
        let block = self.classify(line.as_bytes());
        Some(Raw {
            start,
            number: self.number,
            text: line,
            block,
        })
    }
}

/// A grep-style location at the start of the line (after at most three spaces): within
/// the first word, `PATH:N:` (match lines, `path:line:col:` too) or `PATH-N-` (context
/// lines), N a line number without leading zero. PATH must not be all digits (`10:30:`
/// is a time), and the `-` form needs a `.`, `/` or `\` in PATH, since prose has words
/// like `UTF-8-encoded` and grep's paths almost always have one.
pub(super) fn is_grep_context(line: &str) -> bool {
    let b = line.as_bytes();
    let (cols, at) = indent(b);
    if cols > MAX_INDENT {
        return false;
    }
    let word = &b[at..];
    let word = &word[..word
        .iter()
        .position(|c| c.is_ascii_whitespace())
        .unwrap_or(word.len())];
    let (mut non_digit, mut pathy) = (false, false);
    for (i, &d) in word.iter().enumerate() {
        if (d == b':' || d == b'-') && i > 0 && non_digit && (d == b':' || pathy) {
            let digits = word[i + 1..]
                .iter()
                .take_while(|c| c.is_ascii_digit())
                .count();
            if digits > 0 && word[i + 1] != b'0' && word.get(i + 1 + digits) == Some(&d) {
                return true;
            }
        }
        non_digit |= !d.is_ascii_digit();
        pathy |= matches!(d, b'.' | b'/' | b'\\');
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shown(text: &str) -> Vec<bool> {
        walk(text).map(|l| l.shown).collect()
    }

    #[test]
    fn lines_match_str_lines() {
        for text in ["", "a", "a\n", "a\r\nb", "\n\n", "a\rb\n", "x\r"] {
            let ours: Vec<&str> = walk(text).map(|l| l.text).collect();
            assert_eq!(ours, text.lines().collect::<Vec<_>>(), "{text:?}");
        }
    }

    #[test]
    fn fences_close_only_on_same_char_at_least_as_long() {
        let text = "````\n```\nin\n~~~~\n`````\nout";
        assert_eq!(shown(text), [true, true, true, true, true, false]);
        let text = "~~~\n```\n~~\n~~~ \nout";
        assert_eq!(shown(text), [true, true, true, true, false]);
    }

    #[test]
    fn closer_with_trailing_text_does_not_close() {
        assert_eq!(shown("```\n``` x\n```\nout"), [true, true, true, false]);
    }

    #[test]
    fn backtick_info_string_with_backtick_is_not_a_fence() {
        assert_eq!(shown("``` a`b\nout"), [false, false]);
        assert_eq!(shown("~~~ a`b\nin"), [true, true]);
    }

    #[test]
    fn unclosed_fence_runs_to_the_end() {
        assert_eq!(shown("x\n```rust\na\n\nb"), [false, true, true, true, true]);
    }

    #[test]
    fn fence_indent_and_list_items() {
        assert_eq!(shown("   ```\nin\n   ```\nout"), [true, true, true, false]);
        // Four spaces: indented code, not a fence, so the next line is not inside one.
        assert_eq!(shown("    ```\nout"), [true, false]);
        assert_eq!(shown("- ```\n  in\n  ```\nout"), [true, true, true, false]);
        // A closer indented past the container's three columns is content.
        assert_eq!(shown("```\n    ```\nin"), [true, true, true]);
    }

    #[test]
    fn quotes_indents_and_tabs() {
        assert_eq!(
            shown("> q\n>q\n   > q\n- > q\nx"),
            [true, true, true, true, false]
        );
        assert_eq!(shown("    x\n\tx\n  \tx\n   x"), [true, true, true, false]);
        assert_eq!(shown("    \n"), [false]);
    }

    #[test]
    fn quoted_fence_does_not_open_a_block() {
        assert_eq!(shown("> ```\nout"), [true, false]);
    }

    #[test]
    fn grep_locations() {
        for yes in [
            "src/main.rs:12: ACK k",
            "src/main.rs:12:5: x",
            "Makefile:3:x",
            "src/a.rs-12-",
            "src/a-b.rs-7- ctx",
            "  C:\\x\\a.rs:9: y",
        ] {
            assert!(is_grep_context(yes), "{yes:?}");
        }
        for no in [
            "ACK k: done",
            "10:30: meeting",
            "UTF-8-encoded",
            "src/a.rs:012: x",
            "src/a.rs:12 x",
            ":12: x",
            "dMbnngX3j-2: done",
            "2024-05-01 notes",
            "Note: 12:",
            "",
        ] {
            assert!(!is_grep_context(no), "{no:?}");
        }
    }
}
