//! Use versus mention: the context rules that discard a well-formed candidate because
//! the agent is talking about a directive rather than issuing one.
//!
//! - *Quoted*: the token sits inside an inline code span or a double-quoted stretch
//!   of the line (`"Done. ACK k"`), or right after an opening quote or backtick
//!   (`` `ACK k: done` ``, `'ACK k'`, `“ACK k”`). Single quotes count only right before
//!   the token, since elsewhere they are mostly apostrophes.
//! - *Vetoed*: its clause, before the token, holds a negation (`not`, `never`, any
//!   `n't` word…) or a hypothetical or narration word (`would`, `for example`, `e.g.`,
//!   `such as`, `the phrase`, `reply with`, `write`, `say`, `mentioned`, `see`…).
//!   A turning connective (`so`, `therefore`, `thus`, `hence`, `but`) ends the reach of
//!   a negation before it, not of a hypothetical: "It did not fail again, so ACK k: x"
//!   issues, "If it fails, so ACK k" does not.
//! - *Named*: a determiner right before the token (`the`, `an`, `your`, `this`…) makes
//!   it a noun, the word talked about: "waiting for the ACK k" issues nothing.
//!
//! The clause runs from the start of the line's content (or the end of the previous
//! directive's header on the same line) to the token, and restarts after `.`, `!`, `?`
//! and `;`, but not after `:`, which introduces what follows: in "for example: ACK k"
//! the example governs the directive, and a vetoed clause ending in `:` governs the
//! rest of the line ("For example: Done. ACK k" is all example). It never crosses a
//! line break.
//!
//! Invariants: [`Clause`] reads each byte of a line at most once however many
//! candidates the line holds, so a huge line costs linear time; [`CodeSpans`] pairs
//! backtick runs in one pass.

use std::collections::HashMap;

/// Words that negate what follows ("did not ACK k"). Any word ending in `n't` too.
const NEGATIONS: &[&str] = &["not", "never", "cannot", "nor", "without"];

/// Words that make the clause hypothetical, an example, or narration about writing.
/// Words ending in `'d` and `'ll` ("I'd", "we'll") count too.
const HYPOTHETICALS: &[&str] = &[
    "could",
    "would",
    "should",
    "might",
    "may",
    "shall",
    "will",
    "if",
    "unless",
    "suppose",
    "imagine",
    "example",
    "instance",
    "e.g",
    "eg",
    "i.e",
    "ie",
    "like",
    "write",
    "writes",
    "writing",
    "wrote",
    "written",
    "type",
    "types",
    "typing",
    "typed",
    "say",
    "says",
    "saying",
    "said",
    "mention",
    "mentions",
    "mentioned",
    "mentioning",
    "quote",
    "quotes",
    "quoted",
    "quoting",
    "see",
    "cf",
];

/// Words that turn the sentence, ending the reach of a negation before them.
const CONNECTIVES: &[&str] = &["so", "therefore", "thus", "hence", "but"];

/// Words that make the token right after them a noun ("the ACK", "your NACK").
const DETERMINERS: &[&str] = &[
    "the", "a", "an", "this", "that", "these", "those", "my", "your", "his", "her", "its", "our",
    "their", "each", "every", "any", "some", "another",
];

/// Two-word vetoes, where either word alone is ordinary prose.
const PHRASES: &[(&str, &str)] = &[
    ("such", "as"),
    ("reply", "with"),
    ("replied", "with"),
    ("respond", "with"),
    ("answer", "with"),
    ("the", "phrase"),
    ("the", "string"),
    ("the", "word"),
    ("the", "token"),
];

/// A `.` after these does not end a sentence ("e.g. ACK k" is still an example).
const ABBREVIATIONS: &[&str] = &["e.g", "i.e", "eg", "ie", "cf", "vs", "viz"];

/// Characters that open a quotation; a token right after one is mentioned.
const OPENING_QUOTES: &[char] = &['"', '\'', '`', '“', '‘', '«', '„'];

/// Quotes stripped from a word before it is compared with the lists.
const WORD_QUOTES: &[char] = &['“', '”', '‘', '’', '«', '»', '„'];

fn is_word_byte(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c >= 0x80
}

/// `'` and `.` join a word only between word bytes: "don't", "e.g".
fn joins(b: &[u8], i: usize) -> bool {
    matches!(b[i], b'\'' | b'.')
        && i > 0
        && is_word_byte(b[i - 1])
        && b.get(i + 1).is_some_and(|&c| is_word_byte(c))
}

fn eq_any(word: &str, list: &[&str]) -> bool {
    list.iter().any(|w| w.eq_ignore_ascii_case(word))
}

fn ends_with_ci(word: &str, suffix: &str) -> bool {
    word.len() >= suffix.len()
        && word.is_char_boundary(word.len() - suffix.len())
        && word[word.len() - suffix.len()..].eq_ignore_ascii_case(suffix)
}

fn is_negation(word: &str) -> bool {
    eq_any(word, NEGATIONS) || ends_with_ci(word, "n't") || ends_with_ci(word, "n’t")
}

fn is_hypothetical(word: &str) -> bool {
    eq_any(word, HYPOTHETICALS)
        || ["'d", "’d", "'ll", "’ll"]
            .iter()
            .any(|s| ends_with_ci(word, s))
}

/// True if the `.` at `dot` ends an abbreviation or a number ("1. ACK k" inside a
/// sentence is an ordinal, not a full stop) rather than a sentence.
pub(super) fn abbreviation_before(b: &[u8], dot: usize) -> bool {
    // Abbreviations and ordinals are short; looking further back would make a line of
    // `a..a..a..` quadratic.
    const LONGEST: usize = 9;
    let from = dot.saturating_sub(LONGEST + 1);
    let len = b[from..dot]
        .iter()
        .rev()
        .take_while(|&&c| c.is_ascii_alphanumeric() || c == b'.')
        .count();
    if len > LONGEST {
        return false;
    }
    let word = std::str::from_utf8(&b[dot - len..dot]).unwrap_or("");
    let word = word.trim_start_matches('.');
    eq_any(word, ABBREVIATIONS) || (!word.is_empty() && word.bytes().all(|c| c.is_ascii_digit()))
}

/// True if a sentence mark at `at - 1` is followed by closers and then space or the end.
fn sentence_ends(b: &[u8], at: usize) -> bool {
    let rest = &b[at..];
    let closers = rest
        .iter()
        .take_while(|&&c| matches!(c, b'*' | b'_' | b')' | b'"' | b'\''))
        .count();
    rest.get(closers).is_none_or(|c| c.is_ascii_whitespace())
}

/// True when the token at `at` (after its emphasis was skipped back) follows an opening
/// quote or backtick.
pub(super) fn quoted_before(line: &str, at: usize) -> bool {
    line[..at]
        .chars()
        .next_back()
        .is_some_and(|c| OPENING_QUOTES.contains(&c))
}

/// The state of the clause being read, advanced incrementally along one line: whether
/// a negation or a hypothetical was seen, and whether a double quote is open.
pub(super) struct Clause {
    pos: usize,
    negated: bool,
    hypothetical: bool,
    prev: Option<(usize, usize)>,
    straight_quote: bool,
    curly_quotes: usize,
    /// A vetoed clause ended in `:`, so the rest of the line is what it introduced: by a
    /// negation (a connective ends it) and by a hypothetical (nothing does).
    introduced_negation: bool,
    introduced_hypothetical: bool,
}

impl Clause {
    pub(super) fn new(start: usize) -> Self {
        Clause {
            pos: start,
            negated: false,
            hypothetical: false,
            prev: None,
            straight_quote: false,
            curly_quotes: 0,
            introduced_negation: false,
            introduced_hypothetical: false,
        }
    }

    /// Starts a fresh clause at `at` (the end of an accepted directive's header).
    pub(super) fn restart(&mut self, at: usize) {
        *self = Clause::new(at);
    }

    /// Reads the line up to `to` and says whether a token there is discarded: its clause
    /// holds a veto, it sits inside double quotes, or a determiner names it. Code spans
    /// are read as one neutral word: what an agent quotes in code (`` `ACK <key>: …` ``)
    /// neither vetoes nor ends a clause.
    pub(super) fn discards(&mut self, line: &str, to: usize, spans: &CodeSpans) -> bool {
        let b = line.as_bytes();
        let mut i = self.pos;
        while i < to {
            if b[i] == b'`' {
                if let Some(end) = spans.starting_at(i) {
                    self.prev = None;
                    i = end;
                    continue;
                }
            }
            if is_word_byte(b[i]) {
                let mut j = i + 1;
                while j < to && (is_word_byte(b[j]) || joins(b, j)) {
                    j += 1;
                }
                self.word(line, i, j);
                i = j;
                continue;
            }
            let sentence_mark = match b[i] {
                b'.' => !abbreviation_before(b, i),
                b'!' | b'?' => true,
                b';' => {
                    self.end_clause();
                    false
                }
                b'"' => {
                    self.straight_quote = !self.straight_quote;
                    false
                }
                b':' => {
                    self.introduced_negation |= self.negated;
                    self.introduced_hypothetical |= self.hypothetical;
                    false
                }
                _ => false,
            };
            if sentence_mark && sentence_ends(b, i + 1) {
                self.end_clause();
            }
            i += 1;
        }
        self.pos = self.pos.max(to);
        let named = self.prev.is_some_and(|(pi, pj)| {
            eq_any(line[pi..pj].trim_matches(WORD_QUOTES), DETERMINERS)
                && pj <= to
                && b[pj..to]
                    .iter()
                    .all(|&c| matches!(c, b' ' | b'\t' | b'*' | b'_'))
        });
        self.negated
            || self.hypothetical
            || self.introduced_negation
            || self.introduced_hypothetical
            || self.straight_quote
            || self.curly_quotes > 0
            || named
    }

    fn end_clause(&mut self) {
        self.negated = false;
        self.hypothetical = false;
        self.prev = None;
    }

    fn word(&mut self, line: &str, i: usize, j: usize) {
        let raw = &line[i..j];
        if !raw.is_ascii() {
            self.curly_quotes += raw.matches('“').count();
            self.curly_quotes = self.curly_quotes.saturating_sub(raw.matches('”').count());
        }
        let word = raw.trim_matches(WORD_QUOTES);
        if is_negation(word) {
            self.negated = true;
        } else if eq_any(word, CONNECTIVES) {
            self.negated = false;
            self.introduced_negation = false;
        }
        if is_hypothetical(word) {
            self.hypothetical = true;
        }
        if let Some((pi, pj)) = self.prev {
            let prev = line[pi..pj].trim_matches(WORD_QUOTES);
            if PHRASES
                .iter()
                .any(|(a, b)| a.eq_ignore_ascii_case(prev) && b.eq_ignore_ascii_case(word))
            {
                self.hypothetical = true;
            }
        }
        self.prev = Some((i, j));
    }
}

/// The inline code spans of one line, paired as CommonMark does: a run of N backticks
/// opens a span that the next run of exactly N closes; a run with no partner is literal.
pub(super) struct CodeSpans {
    spans: Vec<(usize, usize)>,
}

impl CodeSpans {
    pub(super) fn new(b: &[u8]) -> Self {
        let mut runs = Vec::new();
        let mut i = 0;
        while let Some(p) = memchr::memchr(b'`', &b[i..]) {
            let start = i + p;
            let len = b[start..].iter().take_while(|&&c| c == b'`').count();
            runs.push((start, len));
            i = start + len;
        }
        let mut next_same = vec![None; runs.len()];
        let mut last_of_len: HashMap<usize, usize> = HashMap::new();
        for (k, &(_, len)) in runs.iter().enumerate().rev() {
            next_same[k] = last_of_len.insert(len, k);
        }
        let mut spans = Vec::new();
        let mut k = 0;
        while k < runs.len() {
            match next_same[k] {
                Some(close) => {
                    spans.push((runs[k].0, runs[close].0 + runs[close].1));
                    k = close + 1;
                }
                None => k += 1,
            }
        }
        CodeSpans { spans }
    }

    /// The end of the code span that opens at `at`, if one does.
    fn starting_at(&self, at: usize) -> Option<usize> {
        let k = self.spans.partition_point(|&(start, _)| start < at);
        self.spans.get(k).filter(|s| s.0 == at).map(|s| s.1)
    }

    /// True if byte `at` lies inside a code span (its backticks included).
    pub(super) fn contains(&self, at: usize) -> bool {
        let k = self.spans.partition_point(|&(start, _)| start <= at);
        k > 0 && at < self.spans[k - 1].1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vetoed(prefix: &str) -> bool {
        let line = format!("{prefix}ACK");
        let spans = CodeSpans::new(line.as_bytes());
        Clause::new(0).discards(&line, prefix.len(), &spans)
    }

    #[test]
    fn vetoes() {
        for yes in [
            "I did not: ",
            "I don't; no, I won’t: ",
            "For example: ",
            "e.g. ",
            "such as: ",
            "Reply with: ",
            "The phrase: ",
            "I'd say: ",
            "Never: ",
            "“Example”: ",
            "\"Done. ",
            "He said “done. ",
            "For example: Done. ",
        ] {
            assert!(vetoed(yes), "{yes:?}");
        }
        for no in [
            "",
            "Done. ",
            "I could not reproduce; ",
            "Would it? Yes. ",
            "Updated README.md. ",
            "Status: ",
            "Notably: ",
            "Reply: ",
            "He said \"fine\". ",
            "“Fine.” ",
            "Reply with `ACK <key>: …`. So: ",
            "`would`: ",
        ] {
            assert!(!vetoed(no), "{no:?}");
        }
    }

    #[test]
    fn code_spans_pair_equal_runs() {
        let b = b"a `x` b ``y ` z`` c ` d";
        let spans = CodeSpans::new(b);
        assert!(spans.contains(3));
        assert!(!spans.contains(6));
        assert!(spans.contains(12));
        assert!(!spans.contains(22));
    }
}
