//! The words the use-versus-mention guards of [`super::clause`] react to, each list a
//! class with one effect:
//!
//! - [`Class::Negation`]: `not`, `never`, `no`, any `n't` word and its apostrophe-less
//!   spelling (`dont`, `cant`, `wont`): a negated ACK is not issued; a NACK stays a NACK
//!   ("I will not NACK k: …" still refuses the item).
//! - [`Class::Rejection`]: refusal (`refuse`, `decline`), prohibition (`remove`,
//!   `avoid`, `stop`, `skip`, …) and, as two-word phrases, substitution (`instead of`,
//!   `rather than`): the directive after them is talked about, whatever its polarity.
//! - [`Class::Modal`]: `could`, `would`, `will`, `'d`, `'ll` … make the clause
//!   hypothetical, unless a negation follows at once: "I could not reproduce it" states
//!   a fact, as "I couldn't" does.
//! - [`Class::Conditional`]: conditions and examples (`if`, `hypothetically`,
//!   `example`, `e.g.`, `like`, `see` …), and the phrases of [`PHRASES`].
//! - [`Class::Narration`]: verbs that report writing or saying (`wrote`, `typed`,
//!   `said`, `mentioned`, `quoted` …): the directive is their object.
//! - [`Class::Connective`]: `so`, `therefore`, `thus`, `hence`, `but` turn the sentence.
//!
//! Comparisons ignore ASCII case. Invariant: a word has one class, so the lists are
//! disjoint (a unit test checks it).

/// What a word does to the clause it stands in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Class {
    Negation,
    Rejection,
    Modal,
    Conditional,
    Narration,
    Connective,
    Plain,
}

const NEGATIONS: &[&str] = &[
    "not", "never", "no", "nor", "neither", "cannot", "without", // the plain words
    "cant", "wont", "dont", "doesnt", "didnt", "isnt", "arent", "wasnt", "werent", "hasnt",
    "havent", "hadnt", "couldnt", "wouldnt", "shouldnt", "mustnt", "neednt", "shant",
    "aint", // contractions without their apostrophe
];

const REJECTIONS: &[&str] = &[
    "refuse",
    "refuses",
    "refused",
    "refusing",
    "decline",
    "declines",
    "declined",
    "declining",
    "remove",
    "removes",
    "removed",
    "removing",
    "avoid",
    "avoids",
    "avoided",
    "avoiding",
    "stop",
    "stops",
    "stopped",
    "stopping",
    "skip",
    "skips",
    "skipped",
    "skipping",
    "omit",
    "omits",
    "omitted",
    "omitting",
    "delete",
    "deletes",
    "deleted",
    "deleting",
    "forbid",
    "forbids",
    "forbade",
    "forbidden",
    "prevent",
    "prevents",
    "prevented",
    "refrain",
    "refrains",
    "refrained",
    "withhold",
    "withholds",
    "withheld",
];

const MODALS: &[&str] = &["could", "would", "should", "might", "may", "shall", "will"];

const CONDITIONALS: &[&str] = &[
    "if",
    "unless",
    "suppose",
    "supposing",
    "imagine",
    "hypothetically",
    "hypothetical",
    "theoretically",
    "example",
    "instance",
    "e.g",
    "eg",
    "i.e",
    "ie",
    "like",
    "see",
    "cf",
];

const NARRATIONS: &[&str] = &[
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
];

const CONNECTIVES: &[&str] = &["so", "therefore", "thus", "hence", "but"];

/// Two-word phrases, where either word alone is ordinary prose, and their class. The
/// words may be joined by spaces or a hyphen ("instead-of") but nothing else.
pub(super) const PHRASES: &[(&str, &str, Class)] = &[
    ("instead", "of", Class::Rejection),
    ("rather", "than", Class::Rejection),
    ("such", "as", Class::Conditional),
    ("reply", "with", Class::Conditional),
    ("replied", "with", Class::Conditional),
    ("respond", "with", Class::Conditional),
    ("answer", "with", Class::Conditional),
    ("the", "phrase", Class::Conditional),
    ("the", "string", Class::Conditional),
    ("the", "word", Class::Conditional),
    ("the", "token", Class::Conditional),
];

/// Words that make the token right after them a noun ("the ACK", "your NACK").
const DETERMINERS: &[&str] = &[
    "the", "a", "an", "this", "that", "these", "those", "my", "your", "his", "her", "its", "our",
    "their", "each", "every", "any", "some", "another",
];

/// A `.` after these does not end a sentence ("e.g. ACK k" is still an example).
const ABBREVIATIONS: &[&str] = &["e.g", "i.e", "eg", "ie", "cf", "vs", "viz"];

fn eq_any(word: &str, list: &[&str]) -> bool {
    list.iter().any(|w| w.eq_ignore_ascii_case(word))
}

fn ends_with_ci(word: &str, suffix: &str) -> bool {
    word.len() >= suffix.len()
        && word.is_char_boundary(word.len() - suffix.len())
        && word[word.len() - suffix.len()..].eq_ignore_ascii_case(suffix)
}

/// The class of one word (quotes already stripped).
pub(super) fn class(word: &str) -> Class {
    if eq_any(word, NEGATIONS) || ends_with_ci(word, "n't") || ends_with_ci(word, "n’t") {
        Class::Negation
    } else if eq_any(word, REJECTIONS) {
        Class::Rejection
    } else if eq_any(word, MODALS)
        || ["'d", "’d", "'ll", "’ll"]
            .iter()
            .any(|s| ends_with_ci(word, s))
    {
        Class::Modal
    } else if eq_any(word, CONDITIONALS) {
        Class::Conditional
    } else if eq_any(word, NARRATIONS) {
        Class::Narration
    } else if eq_any(word, CONNECTIVES) {
        Class::Connective
    } else {
        Class::Plain
    }
}

/// The class of the phrase `first second`, if they make one.
pub(super) fn phrase(first: &str, second: &str) -> Option<Class> {
    PHRASES
        .iter()
        .find(|(a, b, _)| a.eq_ignore_ascii_case(first) && b.eq_ignore_ascii_case(second))
        .map(|&(_, _, class)| class)
}

pub(super) fn is_determiner(word: &str) -> bool {
    eq_any(word, DETERMINERS)
}

pub(super) fn is_abbreviation(word: &str) -> bool {
    eq_any(word, ABBREVIATIONS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_word_has_one_class() {
        let lists: [(&[&str], Class); 6] = [
            (NEGATIONS, Class::Negation),
            (REJECTIONS, Class::Rejection),
            (MODALS, Class::Modal),
            (CONDITIONALS, Class::Conditional),
            (NARRATIONS, Class::Narration),
            (CONNECTIVES, Class::Connective),
        ];
        for (list, want) in lists {
            for w in list {
                assert_eq!(class(w), want, "{w}");
                assert_eq!(class(&w.to_uppercase()), want, "{w}");
            }
        }
        for (w, want) in [
            ("won't", Class::Negation),
            ("couldn’t", Class::Negation),
            ("I'd", Class::Modal),
            ("we’ll", Class::Modal),
            ("done", Class::Plain),
            ("instead", Class::Plain),
        ] {
            assert_eq!(class(w), want, "{w}");
        }
        assert_eq!(phrase("Instead", "of"), Some(Class::Rejection));
        assert_eq!(phrase("such", "as"), Some(Class::Conditional));
        assert_eq!(phrase("instead", "as"), None);
    }
}
