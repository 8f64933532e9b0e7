//! The use-versus-mention guards as the protocol states them: a table of sentences
//! written for each guard, each polarity, the wrappers and fillers a header may wear,
//! and both sides of the negation's reach; then properties that a guarded directive
//! never retires an item, and that a turning connective or a negation moved out of
//! reach gives it back.

use proptest::prelude::*;

use super::clause::NEGATION_REACH;
use super::tests::Exp;
use super::*;
use crate::stamp;

const A: &str = "dMbnngX3j";
const B: &str = "dMbnpQ7kz";

/// (rule, input, expected).
#[rustfmt::skip]
const CASES: &[(&str, &str, &[Exp])] = &[
    // The sentences.
    ("refusal", "I refuse to ACK dMbnngX3j: this steering conflicts.", &[]),
    ("substitution", "Instead of ACK dMbnngX3j: I rewrote the module.", &[]),
    ("prohibition", "Remove ACK dMbnngX3j: from the docs", &[]),
    ("hypothetical", "Hypothetically ACK dMbnngX3j: done", &[]),
    ("connective", "I could not reproduce it, so ACK dMbnngX3j: handled.", &[("ack", &[A], "handled.")]),
    ("nack", "I will not NACK dMbnngX3j: the file is generated", &[("nack", &[A], "the file is generated")]),
    // Plain negation: not, never, no, contractions with and without the apostrophe.
    ("negation", "I did not ACK dMbnngX3j yet.", &[]),
    ("negation", "Never ACK dMbnngX3j: before the build is green", &[]),
    ("negation", "No ACK dMbnngX3j: yet, still running", &[]),
    ("negation", "I can't ACK dMbnngX3j: blocked on review", &[]),
    ("negation", "I won’t ACK dMbnngX3j: curly apostrophe", &[]),
    ("negation", "I cant ACK dMbnngX3j: no apostrophe", &[]),
    ("negation", "I wont ACK dMbnngX3j: no apostrophe", &[]),
    ("negation", "I dont ACK dMbnngX3j: no apostrophe", &[]),
    ("negation", "We didnt ACK dMbnngX3j: no apostrophe", &[]),
    ("negation", "It is not done, ACK dMbnngX3j: later", &[]),
    // Refusal, substitution and prohibition, whatever the polarity.
    ("refusal", "I am refusing to ACK dMbnngX3j: conflicts with the plan", &[]),
    ("refusal", "I decline to ACK dMbnngX3j: out of scope", &[]),
    ("refusal", "I declined to NACK dMbnngX3j: it is fine", &[]),
    ("refusal", "I refuse to NACK dMbnngX3j: I will do it", &[]),
    ("substitution", "Instead-of ACK dMbnngX3j, a question first", &[]),
    ("substitution", "Rather than ACK dMbnngX3j: I asked the operator", &[]),
    ("substitution", "I asked, rather than NACK dMbnngX3j: blindly", &[]),
    ("prohibition", "Please avoid NACK dMbnngX3j: in summaries", &[]),
    ("prohibition", "I avoided ACK dMbnngX3j: on purpose", &[]),
    ("prohibition", "Stop ACK dMbnngX3j spam in the logs", &[]),
    ("prohibition", "Skip ACK dMbnngX3j: for now", &[]),
    ("prohibition", "Delete the line with ACK dMbnngX3j: in it", &[]),
    // A negated NACK is still a NACK.
    ("nack", "I can't do that, NACK dMbnngX3j: the file is generated", &[("nack", &[A], "the file is generated")]),
    ("nack", "Never: NACK dMbnngX3j — generated", &[("nack", &[A], "generated")]),
    ("nack", "No, NACK dMbnngX3j: out of scope", &[("nack", &[A], "out of scope")]),
    // The reach: four words between the negation and the token, then no further.
    ("reach", "I did not change the public API, ACK dMbnngX3j: done", &[]),
    ("reach", "I did not change the old public API, ACK dMbnngX3j: done", &[("ack", &[A], "done")]),
    ("reach", "Removed it from the list, ACK dMbnngX3j: done", &[]),
    ("reach", "Removed it from the old list, ACK dMbnngX3j: done", &[("ack", &[A], "done")]),
    ("reach", "Instead of one big slow pass ACK dMbnngX3j: done", &[]),
    ("reach", "Instead of one big slow final pass ACK dMbnngX3j: done", &[("ack", &[A], "done")]),
    ("reach", "Not done: ACK dMbnngX3j", &[]),
    ("reach", "Not done: I checked every one of them. ACK dMbnngX3j: x", &[("ack", &[A], "x")]),
    ("reach", "I did not\nACK dMbnngX3j: a line break ends the clause", &[("ack", &[A], "a line break ends the clause")]),
    // A turning connective ends a negation's, a rejection's and a narration's reach.
    ("connective", "I refuse to guess, so ACK dMbnngX3j: asked the operator", &[("ack", &[A], "asked the operator")]),
    ("connective", "Instead of a rewrite I patched it, therefore ACK dMbnngX3j: patched", &[("ack", &[A], "patched")]),
    ("connective", "It never hung but NACK dMbnngX3j: the timeout stays", &[("nack", &[A], "the timeout stays")]),
    ("connective", "I wrote a regression test, so ACK dMbnngX3j: covered", &[("ack", &[A], "covered")]),
    ("connective", "He said it was fine, thus ACK dMbnngX3j: kept", &[("ack", &[A], "kept")]),
    ("connective", "It passed, so I refuse to ACK dMbnngX3j", &[]),
    ("connective", "Not a bug; ACK dMbnngX3j: works as intended", &[("ack", &[A], "works as intended")]),
    ("connective", "It did not fail. ACK dMbnngX3j: fine", &[("ack", &[A], "fine")]),
    // ... but not a modal's, a condition's or an example's.
    ("hypothetical", "If it fails, then ACK dMbnngX3j: retried", &[]),
    ("hypothetical", "For example, it failed, so ACK dMbnngX3j: x", &[]),
    ("hypothetical", "I would, but ACK dMbnngX3j", &[]),
    ("hypothetical", "Hypothetically, NACK dMbnngX3j: no", &[]),
    ("hypothetical", "I might ACK dMbnngX3j later", &[]),
    ("hypothetical", "I could ACK dMbnngX3j: done", &[]),
    ("hypothetical", "I'll ACK dMbnngX3j once CI is green", &[]),
    ("hypothetical", "I’d NACK dMbnngX3j: if asked", &[]),
    ("hypothetical", "e.g. NACK dMbnngX3j: generated", &[]),
    ("hypothetical", "The phrase ACK dMbnngX3j: done is what you want", &[]),
    ("narration", "You typed ACK dMbnngX3j: by mistake", &[]),
    ("narration", "I wrote ACK dMbnngX3j: in the changelog", &[]),
    // Position alone never discards a token with its key.
    ("position", "The tests pass and ACK dMbnngX3j: merged", &[("ack", &[A], "merged")]),
    ("position", "Tests pass ACK dMbnngX3j: merged", &[("ack", &[A], "merged")]),
    ("position", "Reran everything NACK dMbnngX3j: flaky upstream", &[("nack", &[A], "flaky upstream")]),
    // Quoted and named.
    ("quoted", "\"I refuse to ACK dMbnngX3j\" was the old reply", &[]),
    ("quoted", "`ACK dMbnngX3j: done` is the format", &[]),
    ("quoted", "‘ACK dMbnngX3j’", &[]),
    ("named", "Waiting on your ACK dMbnngX3j", &[]),
    // Guards over every wrapper and filler.
    ("wrapper", "I refuse to ACK `dMbnngX3j`: conflicts", &[]),
    ("wrapper", "I refuse to ACK (dMbnngX3j, dMbnpQ7kz): conflicts", &[]),
    ("wrapper", "I did not ACK **dMbnngX3j**: conflicts", &[]),
    ("wrapper", "Instead of **ACK dMbnngX3j:** a note", &[]),
    ("wrapper", "**ACK** `dMbnngX3j`: done", &[("ack", &[A], "done")]),
    ("wrapper", "- **NACK (dMbnngX3j):** I will not do this", &[("nack", &[A], "I will not do this")]),
    ("filler", "I refuse to ACK inbox item dMbnngX3j: conflicts", &[]),
    ("filler", "ACK inbox item dMbnngX3j: done", &[("ack", &[A], "done")]),
    ("filler", "ACK the dMbnngX3j: at a directive position", &[("ack", &[A], "at a directive position")]),
    ("filler", "Done, ACK the dMbnngX3j: a filler mid-clause ends the header", &[]),
    // A separator glued to the key is not a key.
    ("glued", "ACK -dMbnngX3j: glued", &[("keyless", &[], "")]),
    ("glued", "Done, ACK -dMbnngX3j: glued", &[]),
    ("glued", "ACK:dMbnngX3j glued", &[("keyless", &[], "")]),
    ("glued", "ACK: dMbnngX3j — spaced", &[("ack", &[A], "spaced")]),
    ("glued", "**ACK:** dMbnngX3j spaced", &[("ack", &[A], "spaced")]),
    ("glued", "NACK:\tdMbnngX3j, dMbnpQ7kz: generated", &[("nack", &[A, B], "generated")]),
    // A keyless directive is its own failure.
    ("keyless", "ACK: naming no key", &[("keyless", &[], "")]),
    ("keyless", "I refuse. NACK: no key", &[("keyless", &[], "")]),
    // Both polarities, in source order.
    ("order", "NACK dMbnngX3j: generated. ACK dMbnpQ7kz: done", &[("nack", &[A], "generated."), ("ack", &[B], "done")]),
    ("order", "ACK dMbnngX3j: done; I refuse to ACK dMbnpQ7kz: conflicts", &[("ack", &[A], "done; I refuse to ACK dMbnpQ7kz: conflicts")]),
    ("order", "I refuse to ACK dMbnngX3j, but NACK dMbnpQ7kz: conflicts", &[("nack", &[B], "conflicts")]),
    ("order", "I refuse to ACK\ndMbnngX3j: an open header is guarded too", &[]),
];

#[test]
fn guard_table() {
    assert!(CASES.len() >= 60);
    super::tests::check_table(CASES);
}

/// How a guard treats a NACK, and whether a connective ends its reach.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    /// Discards an ACK only; reach counted in words; a connective ends it.
    Negation,
    /// Discards either polarity; reach counted in words; a connective ends it.
    Rejection,
    /// Discards either polarity, at any distance; a connective ends it.
    Narration,
    /// Discards either polarity, at any distance, across a connective.
    Hypothetical,
}

/// (words before the directive, how many words of them follow the guard word, kind).
const GUARDS: &[(&str, usize, Kind)] = &[
    ("I did not", 0, Kind::Negation),
    ("We never", 0, Kind::Negation),
    ("I cant", 0, Kind::Negation),
    ("I won't", 0, Kind::Negation),
    ("I could not", 0, Kind::Negation),
    ("I refuse to", 1, Kind::Rejection),
    ("I am refusing to", 1, Kind::Rejection),
    ("I decline to", 1, Kind::Rejection),
    ("Instead of", 0, Kind::Rejection),
    ("instead-of", 0, Kind::Rejection),
    ("Rather than", 0, Kind::Rejection),
    ("Please remove", 0, Kind::Rejection),
    ("We avoided", 0, Kind::Rejection),
    ("Skip", 0, Kind::Rejection),
    ("I wrote", 0, Kind::Narration),
    ("He said", 0, Kind::Narration),
    ("Hypothetically", 0, Kind::Hypothetical),
    ("If needed", 0, Kind::Hypothetical),
    ("For example", 0, Kind::Hypothetical),
    ("I could", 0, Kind::Hypothetical),
    ("I'd", 0, Kind::Hypothetical),
];

/// Words no guard reacts to, and no determiner (which would name the token).
const NEUTRAL: &[&str] = &[
    "fix", "quietly", "parser", "tests", "again", "here", "now", "first", "it", "all", "today",
    "module",
];

/// Directive shapes that issue mid-line: (template, polarity).
const SHAPES: &[(&str, Polarity)] = &[
    ("ACK {k}: done", Polarity::Ack),
    ("ACK `{k}`: done", Polarity::Ack),
    ("**ACK {k}:** done", Polarity::Ack),
    ("ACK ({k}): done", Polarity::Ack),
    ("ACK {k}", Polarity::Ack),
    ("NACK {k}: no, generated", Polarity::Nack),
    ("NACK [{k}] — generated", Polarity::Nack),
    ("**NACK** {k}: out of scope", Polarity::Nack),
];

const PREAMBLES: &[&str] = &["", "Tests pass. ", "Update: ", "- ", "Done; "];

fn sentence(
    pre: &str,
    guard: &str,
    between: &[&str],
    connective: bool,
    shape: &str,
    k: &str,
) -> String {
    let mut s = format!("{pre}{guard}");
    for w in between {
        s.push(' ');
        s.push_str(w);
    }
    if connective {
        s.push_str(", so");
    }
    s.push(' ');
    s.push_str(&shape.replace("{k}", k));
    s
}

/// What the text reports for `k`: its polarity, if any directive names it.
fn reported(text: &str, k: &str) -> Option<Polarity> {
    let found: Vec<_> = parse(text)
        .into_iter()
        .filter(|d| d.keys.iter().any(|x| x == k))
        .collect();
    assert!(found.len() <= 1, "{text:?}: {k} twice");
    found.first().map(|d| d.polarity)
}

fn key() -> impl Strategy<Value = String> {
    (0u64..1 << 40).prop_map(stamp::encode)
}

fn parts() -> impl Strategy<Value = (usize, usize, usize, String)> {
    (0..PREAMBLES.len(), 0..GUARDS.len(), 0..SHAPES.len(), key())
}

fn neutral(n: usize) -> impl Strategy<Value = Vec<&'static str>> {
    prop::collection::vec(prop::sample::select(NEUTRAL), n)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]

    /// A guard within its reach: an ACK is never reported, a NACK only when the guard
    /// is a plain negation (it still answers, negatively), and never as an ACK.
    #[test]
    fn a_guarded_directive_never_retires_an_item(
        (p, g, s, k) in parts(),
        n in 0..=NEGATION_REACH,
        words in neutral(NEGATION_REACH),
    ) {
        let (guard, after, kind) = GUARDS[g];
        let (shape, polarity) = SHAPES[s];
        let room = NEGATION_REACH - after;
        let text = sentence(PREAMBLES[p], guard, &words[..n.min(room)], false, shape, &k);
        let want = (kind == Kind::Negation && polarity == Polarity::Nack).then_some(Polarity::Nack);
        prop_assert_eq!(reported(&text, &k), want, "{}", text);
    }

    /// The same sentence with a turning connective before the directive issues it,
    /// unless the guard is a modal, a condition or an example.
    #[test]
    fn a_turning_connective_gives_it_back(
        (p, g, s, k) in parts(),
        n in 0..=NEGATION_REACH,
        words in neutral(NEGATION_REACH),
    ) {
        let (guard, _, kind) = GUARDS[g];
        let (shape, polarity) = SHAPES[s];
        let text = sentence(PREAMBLES[p], guard, &words[..n], true, shape, &k);
        let want = (kind != Kind::Hypothetical).then_some(polarity);
        prop_assert_eq!(reported(&text, &k), want, "{}", text);
    }

    /// A negation or rejection moved out of reach (more than `NEGATION_REACH` words
    /// before the token) no longer discards it; the others reach the whole clause.
    #[test]
    fn a_negation_out_of_reach_gives_it_back(
        (p, g, s, k) in parts(),
        extra in 1usize..6,
        words in neutral(NEGATION_REACH + 6),
    ) {
        let (guard, after, kind) = GUARDS[g];
        let (shape, polarity) = SHAPES[s];
        let n = NEGATION_REACH - after + extra;
        let text = sentence(PREAMBLES[p], guard, &words[..n], false, shape, &k);
        let want = matches!(kind, Kind::Negation | Kind::Rejection).then_some(polarity);
        prop_assert_eq!(reported(&text, &k), want, "{}", text);
    }
}
