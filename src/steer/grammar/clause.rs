//! Use versus mention: the context rules that discard a well-formed candidate because
//! the agent is talking about a directive rather than issuing one. The words each rule
//! reacts to are classed in [`super::words`].
//!
//! - *Quoted*: the token sits inside an inline code span or a double-quoted stretch
//!   of the line (`"Done. ACK k"`), or right after an opening quote or backtick
//!   (`` `ACK k: done` ``, `'ACK k'`, `“ACK k”`). Single quotes count only right before
//!   the token, since elsewhere they are mostly apostrophes.
//! - *Negated*: a negation (`not`, `never`, `no`, `don't`, `dont` …) stands before the
//!   token in its clause, at most [`NEGATION_REACH`] words before it: "I did not ACK k"
//!   issues nothing. A negation further away does not reach the token ("I did not
//!   touch the parser or its tests, ACK k: done" issues). A negated NACK is still a
//!   NACK: "I will not NACK k: …" answers the item, negatively.
//! - *Rejected*: a refusal (`refuse to`, `decline to`), a substitution (`instead of`,
//!   `rather than`) or a prohibition (`remove`, `avoid`, `stop`, `skip` …) within the
//!   same reach: "I refuse to ACK k", "Remove NACK k: from the docs". This discards
//!   either polarity.
//! - *Hypothetical*: the clause before the token holds a modal (`could`, `would`,
//!   `will`, `I'd` …, unless a negation follows it at once: "I could not reproduce it"
//!   states a fact), a condition or an example (`if`, `hypothetically`, `for example`,
//!   `e.g.`, `such as`, `the phrase`, `reply with` …), or a narration verb (`wrote`,
//!   `typed`, `said`, `mentioned` …), whatever the distance.
//! - *Named*: a determiner right before the token (`the`, `an`, `your`, `this`…) makes
//!   it a noun, the word talked about: "waiting for the ACK k" issues nothing.
//!
//! A turning connective (`so`, `therefore`, `thus`, `hence`, `but`) starts a new main
//! clause: it ends the reach of a negation, a rejection and a narration verb before it,
//! not of a modal, condition or example. "I could not reproduce it, so ACK k: x" and "I
//! wrote a test, so ACK k: x" issue; "If it fails, so ACK k" and "I would, but ACK k" do
//! not. Position alone never discards a token that has its key.
//!
//! The clause runs from the start of the line's content (or the end of the previous
//! directive's header on the same line) to the token, and restarts after `.`, `!`, `?`
//! and `;`, but not after `:`, which introduces what follows: in "for example: ACK k"
//! the example governs the directive, and a vetoed clause ending in `:` governs the
//! rest of the line ("For example: Done. ACK k" is all example; a negation's reach is
//! still counted in words). It never crosses a line break.
//!
//! Invariants: [`Clause`] reads each byte of a line at most once however many
//! candidates the line holds, so a huge line costs linear time; [`CodeSpans`] pairs
//! backtick runs in one pass.

use std::collections::HashMap;

use super::words::{self, Class};
use super::Polarity;

/// How many words may stand between a negation (or rejection) and the token it
/// reaches: "I refuse to ACK" (one), "I will not be able to ACK" (three), "Do not,
/// under any circumstances, ACK" (three). One more word and it reaches no further.
pub(super) const NEGATION_REACH: usize = 4;

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
    words::is_abbreviation(word) || (!word.is_empty() && word.bytes().all(|c| c.is_ascii_digit()))
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

/// What a clause (or, once it ended in `:`, what it introduced) holds against a token:
/// the word numbers of its last negation and rejection, and whether a hypothetical or
/// a narration verb was read.
#[derive(Default, Clone, Copy)]
struct Vetoes {
    negation: Option<usize>,
    rejection: Option<usize>,
    hypothetical: bool,
    narration: bool,
}

impl Vetoes {
    /// A turning connective: what a new main clause no longer hears.
    fn turn(&mut self) {
        self.negation = None;
        self.rejection = None;
        self.narration = false;
    }

    fn join(&mut self, other: Vetoes) {
        self.negation = self.negation.max(other.negation);
        self.rejection = self.rejection.max(other.rejection);
        self.hypothetical |= other.hypothetical;
        self.narration |= other.narration;
    }

    /// Whether these discard a token of `polarity` standing after word `words`.
    fn discard(&self, polarity: Polarity, words: usize) -> bool {
        let reaches = |at: Option<usize>| at.is_some_and(|n| words - n <= NEGATION_REACH);
        self.hypothetical
            || self.narration
            || reaches(self.rejection)
            || (polarity == Polarity::Ack && reaches(self.negation))
    }
}

/// The state of the clause being read, advanced incrementally along one line: its
/// vetoes, what an earlier clause ending in `:` introduced, and whether a double quote
/// is open.
pub(super) struct Clause {
    pos: usize,
    /// Words read on the line so far; a negation's reach is counted in them.
    words: usize,
    vetoes: Vetoes,
    introduced: Vetoes,
    /// The last word was a modal: hypothetical unless the next word negates it.
    modal: bool,
    prev: Option<(usize, usize)>,
    straight_quote: bool,
    curly_quotes: usize,
}

impl Clause {
    pub(super) fn new(start: usize) -> Self {
        Clause {
            pos: start,
            words: 0,
            vetoes: Vetoes::default(),
            introduced: Vetoes::default(),
            modal: false,
            prev: None,
            straight_quote: false,
            curly_quotes: 0,
        }
    }

    /// Starts a fresh clause at `at` (the end of an accepted directive's header).
    pub(super) fn restart(&mut self, at: usize) {
        *self = Clause::new(at);
    }

    /// Reads the line up to `to` and says whether a token of `polarity` there is
    /// discarded: its clause holds a veto that reaches it, it sits inside double quotes,
    /// or a determiner names it. Code spans are read as one neutral word: what an agent
    /// quotes in code (`` `ACK <key>: …` ``) neither vetoes nor ends a clause.
    pub(super) fn discards(
        &mut self,
        line: &str,
        to: usize,
        spans: &CodeSpans,
        polarity: Polarity,
    ) -> bool {
        let b = line.as_bytes();
        let mut i = self.pos;
        while i < to {
            if b[i] == b'`' {
                if let Some(end) = spans.starting_at(i) {
                    self.settle_modal();
                    self.words += 1;
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
                    self.settle_modal();
                    self.introduced.join(self.vetoes);
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
            words::is_determiner(line[pi..pj].trim_matches(WORD_QUOTES))
                && pj <= to
                && b[pj..to]
                    .iter()
                    .all(|&c| matches!(c, b' ' | b'\t' | b'*' | b'_'))
        });
        let mut vetoes = self.vetoes;
        vetoes.join(self.introduced);
        vetoes.hypothetical |= self.modal;
        vetoes.discard(polarity, self.words)
            || self.straight_quote
            || self.curly_quotes > 0
            || named
    }

    fn end_clause(&mut self) {
        self.vetoes = Vetoes::default();
        self.modal = false;
        self.prev = None;
    }

    /// A modal not followed by a negation makes the clause hypothetical.
    fn settle_modal(&mut self) {
        if std::mem::take(&mut self.modal) {
            self.vetoes.hypothetical = true;
        }
    }

    fn word(&mut self, line: &str, i: usize, j: usize) {
        let raw = &line[i..j];
        if !raw.is_ascii() {
            self.curly_quotes += raw.matches('“').count();
            self.curly_quotes = self.curly_quotes.saturating_sub(raw.matches('”').count());
        }
        self.words += 1;
        let word = raw.trim_matches(WORD_QUOTES);
        let mut class = words::class(word);
        if let Some((pi, pj)) = self.prev {
            let joined = line.as_bytes()[pj..i]
                .iter()
                .all(|&c| matches!(c, b' ' | b'\t' | b'-'));
            if joined {
                let prev = line[pi..pj].trim_matches(WORD_QUOTES);
                class = words::phrase(prev, word).unwrap_or(class);
            }
        }
        if class == Class::Negation {
            // "could not": a negated modal states a fact.
            self.modal = false;
        } else {
            self.settle_modal();
        }
        let v = &mut self.vetoes;
        match class {
            Class::Negation => v.negation = Some(self.words),
            Class::Rejection => v.rejection = Some(self.words),
            Class::Modal => self.modal = true,
            Class::Conditional => v.hypothetical = true,
            Class::Narration => v.narration = true,
            Class::Connective => {
                v.turn();
                self.introduced.turn();
            }
            Class::Plain => {}
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
        Clause::new(0).discards(&line, prefix.len(), &spans, Polarity::Ack)
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
