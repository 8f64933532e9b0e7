//! Table-driven tests of the grammar: every example of the issue and tricky cases for
//! each rule, as input → the directives expected (polarity, keys, body).

use super::*;

/// Expected directive: `"ack"`, `"nack"` or `"keyless"`, its keys and its body.
pub(super) type Exp = (&'static str, &'static [&'static str], &'static str);

const A: &str = "dMbnngX3j";
const B: &str = "dMbnpQ7kz";
const C: &str = "dMbnq2HhR";

/// (rule, input, expected). Inputs use the three stamps above. One case per line, so
/// the table stays readable.
#[rustfmt::skip]
const CASES: &[(&str, &str, &[Exp])] = &[
    // The issue's examples.
    ("issue", "ACK dMbnngX3j: split the test file into three shards", &[("ack", &[A], "split the test file into three shards")]),
    ("issue", "- **ACK dMbnpQ7kz:** kept stdout untouched", &[("ack", &[B], "kept stdout untouched")]),
    ("issue", "ACK dMbnngX3j, dMbnpQ7kz: both applied", &[("ack", &[A, B], "both applied")]),
    ("issue", "NACK dMbnq2HhR: the file is generated; edits would be lost", &[("nack", &[C], "the file is generated; edits would be lost")]),
    ("issue", "ACK dMbnngX3j-2: rebased first", &[("ack", &["dMbnngX3j-2"], "rebased first")]),
    ("issue", "I would reply ACK dMbnngX3j once the build passes.", &[]),
    ("issue", "`ACK dMbnngX3j: done`", &[]),
    ("issue", "    ACK dMbnngX3j: done", &[]),
    ("issue", "ACK: will do", &[("keyless", &[], "")]),
    ("issue", "Ack dMbnngX3j: done", &[]),
    ("issue", "ACKNOWLEDGED dMbnngX3j", &[]),
    // Token: ALL CAPS, standalone.
    ("token", "ACKed dMbnngX3j: done", &[]),
    ("token", "NACKs dMbnngX3j: no", &[]),
    ("token", "ACK'd dMbnngX3j", &[]),
    ("token", "ACK-ed dMbnngX3j", &[]),
    ("token", "BACK dMbnngX3j: x", &[]),
    ("token", "FEEDBACK dMbnngX3j: x", &[]),
    ("token", "xACK dMbnngX3j: x", &[]),
    ("token", "nack dMbnngX3j: x", &[]),
    ("token", "NNACK dMbnngX3j: x", &[]),
    ("token", "NACK dMbnngX3j", &[("nack", &[A], "")]),
    ("token", "ACK\tdMbnngX3j\tdone", &[("ack", &[A], "done")]),
    // Keys: stamps with optional -N, lists.
    ("keys", "ACK dMbnngX3j and dMbnpQ7kz: both", &[("ack", &[A, B], "both")]),
    ("keys", "ACK dMbnngX3j, dMbnpQ7kz, and dMbnq2HhR: all three", &[("ack", &[A, B, C], "all three")]),
    ("keys", "ACK dMbnngX3j & dMbnpQ7kz: both", &[("ack", &[A, B], "both")]),
    ("keys", "ACK dMbnngX3j dMbnpQ7kz: both", &[("ack", &[A, B], "both")]),
    ("keys", "ACK dMbnngX3j, dMbnngX3j: twice", &[("ack", &[A], "twice")]),
    ("keys", "ACK dMbnngX3: too short", &[]),
    ("keys", "ACK dMbnngX3jj: too long", &[]),
    ("keys", "ACK dMbnngX3a: vowel", &[]),
    ("keys", "ACK dMbnngX3j-0: zero suffix", &[]),
    ("keys", "ACK dMbnngX3j-02: leading zero", &[]),
    ("keys", "ACK dMbnngX3j-12: suffix", &[("ack", &["dMbnngX3j-12"], "suffix")]),
    ("keys", "ACK dMbnngX3j, banana: one", &[("ack", &[A], "banana: one")]),
    ("keys", "ACK dMbnngX3j and fixed the rest", &[("ack", &[A], "and fixed the rest")]),
    ("keys", "ACK dMbnngX3jé: glued", &[]),
    ("keys", "ACK dMbnngX3j's point: taken", &[]),
    // Emphasis around the header.
    ("emphasis", "**ACK dMbnngX3j:** done", &[("ack", &[A], "done")]),
    ("emphasis", "**ACK dMbnngX3j**: done", &[("ack", &[A], "done")]),
    ("emphasis", "*ACK dMbnngX3j*", &[("ack", &[A], "")]),
    ("emphasis", "__ACK dMbnngX3j__ done", &[("ack", &[A], "done")]),
    ("emphasis", "***ACK dMbnngX3j:*** done", &[("ack", &[A], "done")]),
    ("emphasis", "**ACK** dMbnngX3j: done", &[("ack", &[A], "done")]),
    ("emphasis", "****ACK dMbnngX3j: four markers, then a token mid-line", &[("ack", &[A], "four markers, then a token mid-line")]),
    ("emphasis", "**ACK dMbnngX3j:** done **NACK dMbnpQ7kz:** no", &[("ack", &[A], "done"), ("nack", &[B], "no")]),
    ("emphasis", "**ACK dMbnngX3j:** done. **NACK dMbnpQ7kz:** no", &[("ack", &[A], "done."), ("nack", &[B], "no")]),
    // List markers, task boxes, headings, indentation.
    ("list", "- ACK dMbnngX3j: a", &[("ack", &[A], "a")]),
    ("list", "* ACK dMbnngX3j: a", &[("ack", &[A], "a")]),
    ("list", "+ ACK dMbnngX3j: a", &[("ack", &[A], "a")]),
    ("list", "1. ACK dMbnngX3j: a", &[("ack", &[A], "a")]),
    ("list", "12) NACK dMbnngX3j: a", &[("nack", &[A], "a")]),
    ("list", "- [x] ACK dMbnngX3j: a", &[("ack", &[A], "a")]),
    ("list", "- [ ] **ACK dMbnngX3j**: a", &[("ack", &[A], "a")]),
    ("list", "  - 1. ACK dMbnngX3j: nested", &[("ack", &[A], "nested")]),
    ("list", "-ACK dMbnngX3j: no gap, so a token mid-line", &[("ack", &[A], "no gap, so a token mid-line")]),
    ("heading", "## ACK dMbnngX3j", &[("ack", &[A], "")]),
    ("heading", "###### NACK dMbnngX3j: deep", &[("nack", &[A], "deep")]),
    ("heading", "####### ACK dMbnngX3j: seven, so a token mid-line", &[("ack", &[A], "seven, so a token mid-line")]),
    ("heading", "####### ACK inbox item dMbnngX3j: no fillers mid-line", &[]),
    ("heading", "#ACK: keyless mid-line", &[]),
    ("indent", "   ACK dMbnngX3j: three", &[("ack", &[A], "three")]),
    ("indent", "\tACK dMbnngX3j: tab", &[]),
    ("indent", "  \tACK dMbnngX3j: tab after spaces", &[]),
    // Wrappers around a key alone.
    ("wrapper", "ACK `dMbnngX3j`: done", &[("ack", &[A], "done")]),
    ("wrapper", "ACK ``dMbnngX3j``: done", &[("ack", &[A], "done")]),
    ("wrapper", "ACK \"dMbnngX3j\": done", &[("ack", &[A], "done")]),
    ("wrapper", "ACK 'dMbnngX3j': done", &[("ack", &[A], "done")]),
    ("wrapper", "ACK “dMbnngX3j”: done", &[("ack", &[A], "done")]),
    ("wrapper", "ACK ‘dMbnngX3j’, `dMbnpQ7kz`: done", &[("ack", &[A, B], "done")]),
    ("wrapper", "ACK **dMbnngX3j**: done", &[("ack", &[A], "done")]),
    ("wrapper", "ACK `dMbnngX3j: done`", &[]),
    ("wrapper", "ACK `dMbnngX3j, dMbnpQ7kz`: done", &[]),
    ("wrapper", "ACK \"dMbnngX3j: unclosed", &[]),
    ("wrapper", "ACK `dMbnngX3j``: mismatched", &[]),
    // Separators after the keys.
    ("separator", "ACK dMbnngX3j, done", &[("ack", &[A], "done")]),
    ("separator", "ACK dMbnngX3j — done", &[("ack", &[A], "done")]),
    ("separator", "ACK dMbnngX3j – done", &[("ack", &[A], "done")]),
    ("separator", "ACK dMbnngX3j - done", &[("ack", &[A], "done")]),
    ("separator", "ACK dMbnngX3j -- done", &[("ack", &[A], "done")]),
    ("separator", "ACK dMbnngX3j. Done", &[("ack", &[A], "Done")]),
    ("separator", "ACK dMbnngX3j; done", &[("ack", &[A], "done")]),
    ("separator", "ACK dMbnngX3j done", &[("ack", &[A], "done")]),
    ("separator", "ACK: dMbnngX3j — done", &[("ack", &[A], "done")]),
    // Filler words.
    ("filler", "ACK inbox key dMbnngX3j: done", &[("ack", &[A], "done")]),
    ("filler", "ACK for steering item dMbnngX3j: done", &[("ack", &[A], "done")]),
    ("filler", "NACK the Inbox item dMbnngX3j: no", &[("nack", &[A], "no")]),
    ("filler", "ACK key dMbnngX3j and key dMbnpQ7kz: both", &[("ack", &[A, B], "both")]),
    ("filler", "ACK for the inbox item dMbnngX3j: four fillers", &[]),
    ("filler", "ACK the build: passed", &[]),
    ("filler", "ACK inbox: done", &[("keyless", &[], "")]),
    // Keyless.
    ("keyless", "ACK - on it", &[("keyless", &[], "")]),
    ("keyless", "**ACK:** on it", &[("keyless", &[], "")]),
    ("keyless", "ACK", &[("keyless", &[], "")]),
    ("keyless", "NACK — no", &[("keyless", &[], "")]),
    ("keyless", "ACK received", &[]),
    ("keyless", "ACK: on it\nACK dMbnngX3j: done", &[("keyless", &[], ""), ("ack", &[A], "done")]),
    // Use versus mention.
    ("mention", "\"ACK dMbnngX3j: done\"", &[]),
    ("mention", "'ACK dMbnngX3j'", &[]),
    ("mention", "“ACK dMbnngX3j”", &[]),
    ("mention", "Then write `ACK dMbnngX3j`.", &[]),
    ("mention", "Done. `ACK dMbnngX3j: x`", &[]),
    ("mention", "Status: `x`. ACK dMbnngX3j: fine", &[("ack", &[A], "fine")]),
    ("mention", "`Done. ACK dMbnngX3j: x`", &[]),
    ("mention", "Reply with `ACK <key>: …`. So: ACK dMbnngX3j: done", &[("ack", &[A], "done")]),
    ("mention", "He wrote \"Done. ACK dMbnngX3j: x\"", &[]),
    ("mention", "He said “fine. ACK dMbnngX3j: x”", &[]),
    ("negation", "I did not ACK dMbnngX3j yet.", &[]),
    ("negation", "Not done: ACK dMbnngX3j", &[]),
    ("negation", "I won't; never: ACK dMbnngX3j", &[]),
    ("negation", "I could not reproduce it; ACK dMbnngX3j: nothing to fix", &[("ack", &[A], "nothing to fix")]),
    ("hypothetical", "I could write ACK dMbnngX3j", &[]),
    ("hypothetical", "For example, ACK dMbnngX3j: done", &[]),
    ("hypothetical", "For example: ACK dMbnngX3j: done", &[]),
    ("hypothetical", "e.g. ACK dMbnngX3j: done", &[]),
    ("hypothetical", "Use a form such as: ACK dMbnngX3j", &[]),
    ("hypothetical", "The phrase: ACK dMbnngX3j", &[]),
    ("hypothetical", "Reply with: ACK dMbnngX3j", &[]),
    ("hypothetical", "I'd say: ACK dMbnngX3j", &[]),
    ("hypothetical", "It should be: NACK dMbnngX3j", &[]),
    ("hypothetical", "I could not fix it. ACK dMbnngX3j: wontfix", &[("ack", &[A], "wontfix")]),
    // Position: anywhere; at a directive position (line start, after a sentence or
    // clause mark, after a directive) fillers and keyless headers count too.
    ("position", "Done. ACK dMbnngX3j: fixed", &[("ack", &[A], "fixed")]),
    ("position", "All good! NACK dMbnngX3j: no", &[("nack", &[A], "no")]),
    ("position", "Update: ACK dMbnngX3j: fixed", &[("ack", &[A], "fixed")]),
    ("position", "**Steering:** ACK dMbnngX3j: fixed", &[("ack", &[A], "fixed")]),
    ("position", "I ACK dMbnngX3j: fixed", &[("ack", &[A], "fixed")]),
    ("position", "so ACK dMbnngX3j", &[("ack", &[A], "")]),
    ("position", "(ACK dMbnngX3j)", &[("ack", &[A], "")]),
    ("position", "Done.ACK dMbnngX3j", &[("ack", &[A], "")]),
    ("position", "Done, ACK dMbnngX3j: kept the v2 client", &[("ack", &[A], "kept the v2 client")]),
    ("position", "Fixed the flaky test and ACK dMbnngX3j: retried three times", &[("ack", &[A], "retried three times")]),
    ("position", "All three pass (ACK dMbnngX3j, dMbnpQ7kz) and the lint is clean", &[("ack", &[A, B], "and the lint is clean")]),
    ("position", "Done, ACK inbox item dMbnngX3j: fillers need a directive position", &[]),
    ("position", "Done, ACK: keyless needs a directive position", &[]),
    ("position", "We got an ACK.", &[]),
    ("position", "Done. ACK: keyless at a sentence start", &[("keyless", &[], "")]),
    ("position", "ACK dMbnngX3j: a. NACK dMbnpQ7kz: b", &[("ack", &[A], "a."), ("nack", &[B], "b")]),
    ("position", "ACK dMbnngX3j: a; NACK dMbnpQ7kz: b", &[("ack", &[A], "a"), ("nack", &[B], "b")]),
    ("position", "ACK dMbnngX3j NACK dMbnpQ7kz: b", &[("ack", &[A], ""), ("nack", &[B], "b")]),
    ("position", "ACK dMbnngX3j: done ACK dMbnpQ7kz: b", &[("ack", &[A], "done"), ("ack", &[B], "b")]),
    ("named", "ACK dMbnngX3j: kept a NACK dMbnpQ7kz: b", &[("ack", &[A], "kept a NACK dMbnpQ7kz: b")]),
    ("narration", "ACK dMbnngX3j: done (see NACK dMbnpQ7kz)", &[("ack", &[A], "done (see NACK dMbnpQ7kz)")]),
    // Named: a determiner makes the token a noun.
    ("named", "Waiting for the ACK dMbnngX3j to land", &[]),
    ("named", "Done; your **NACK** dMbnngX3j: was right", &[]),
    ("named", "It was this ACK dMbnngX3j: old", &[]),
    // Narration about a directive.
    ("narration", "I mentioned ACK dMbnngX3j earlier", &[]),
    ("narration", "Earlier I wrote ACK dMbnngX3j: by mistake", &[]),
    ("narration", "He said ACK dMbnngX3j: fine", &[]),
    ("narration", "The log quoted NACK dMbnngX3j: generated", &[]),
    // A turning connective ends a negation's reach, not a hypothetical's.
    ("connective", "It did not fail again, so ACK dMbnngX3j: kept the v2 client", &[("ack", &[A], "kept the v2 client")]),
    ("connective", "I did not reproduce it, but ACK dMbnngX3j: nothing to fix", &[("ack", &[A], "nothing to fix")]),
    ("connective", "It did not change, therefore NACK dMbnngX3j: already the case", &[("nack", &[A], "already the case")]),
    ("connective", "It never hung, thus ACK dMbnngX3j: left as is", &[("ack", &[A], "left as is")]),
    ("connective", "It did not fail, hence ACK dMbnngX3j", &[("ack", &[A], "")]),
    ("connective", "Not a regression: so ACK dMbnngX3j: closed", &[("ack", &[A], "closed")]),
    ("connective", "It passed, so I did not ACK dMbnngX3j", &[]),
    ("connective", "It did not fail, so not ACK dMbnngX3j", &[]),
    ("connective", "If it fails again, so ACK dMbnngX3j: x", &[]),
    ("connective", "I would, but ACK dMbnngX3j: x", &[]),
    ("connective", "I could not reproduce it, but ACK dMbnngX3j: x", &[("ack", &[A], "x")]),
    ("connective", "For example: it failed, so ACK dMbnngX3j: x", &[]),
    ("connective", "So, ACK inbox item dMbnngX3j: fillers after a mark", &[]),
    // A header across a line break: ACK ending one line, the key opening the next.
    ("multiline", "All green, ACK\ndMbnngX3j: kept the v2 client", &[("ack", &[A], "kept the v2 client")]),
    ("multiline", "ACK\ndMbnngX3j: done", &[("ack", &[A], "done")]),
    ("multiline", "**ACK**\n**dMbnngX3j**: done", &[("ack", &[A], "done")]),
    ("multiline", "Done. NACK:\n dMbnngX3j, dMbnpQ7kz — generated", &[("nack", &[A, B], "generated")]),
    ("multiline", "Both done, ACK\n(dMbnngX3j, dMbnpQ7kz): merged\nand pushed", &[("ack", &[A, B], "merged\nand pushed")]),
    ("multiline", "ACK\ndMbnngX3j: a, so ACK dMbnpQ7kz: b", &[("ack", &[A], "a, so"), ("ack", &[B], "b")]),
    ("multiline", "ACK dMbnngX3j: a, ACK\ndMbnpQ7kz: b", &[("ack", &[A], "a,"), ("ack", &[B], "b")]),
    ("multiline", "ACK\n    dMbnngX3j: indented code", &[("keyless", &[], "")]),
    ("multiline", "ACK\n> dMbnngX3j: quoted", &[("keyless", &[], "")]),
    ("multiline", "ACK\n```\ndMbnngX3j\n```", &[("keyless", &[], "")]),
    ("multiline", "ACK\nsrc/a.rs:3: dMbnngX3j", &[("keyless", &[], "")]),
    ("multiline", "ACK\n\ndMbnngX3j: a blank line between", &[("keyless", &[], "")]),
    ("multiline", "Then, ACK\nnothing here", &[]),
    ("multiline", "Then, ACK", &[]),
    ("multiline", "I did not ACK\ndMbnngX3j: negated", &[]),
    ("multiline", "`ACK\ndMbnngX3j`: quoted", &[]),
    ("multiline", "Reply with: ACK\ndMbnngX3j", &[]),
    ("multiline", "    ACK\ndMbnngX3j: shown", &[]),
    ("multiline", "ACK\ndMbnngX3j/src: not a key", &[("keyless", &[], "")]),
    // A key ends at a closer.
    ("closer", "ACK dMbnngX3j/src/main.rs: fixed", &[]),
    ("closer", "ACK dMbnngX3j.rs: renamed", &[]),
    ("closer", "ACK dMbnngX3j+x: no", &[]),
    ("closer", "ACK dMbnngX3j#3: no", &[]),
    ("closer", "ACK dMbnngX3j-x: no", &[]),
    ("closer", "ACK dMbnngX3j@host: no", &[]),
    ("closer", "ACK dMbnngX3j, dMbnpQ7kz/x: first only", &[("ack", &[A], "dMbnpQ7kz/x: first only")]),
    ("closer", "ACK dMbnngX3j.", &[("ack", &[A], "")]),
    ("closer", "ACK dMbnngX3j.\tDone", &[("ack", &[A], "Done")]),
    ("closer", "ACK dMbnngX3j) done", &[("ack", &[A], "done")]),
    ("closer", "ACK dMbnngX3j] done", &[("ack", &[A], "done")]),
    ("closer", "ACK dMbnngX3j—done", &[("ack", &[A], "done")]),
    ("closer", "ACK dMbnngX3j;done", &[("ack", &[A], "done")]),
    ("closer", "ACK dMbnngX3j:done", &[("ack", &[A], "done")]),
    ("closer", "ACK dMbnngX3j,dMbnpQ7kz: both", &[("ack", &[A, B], "both")]),
    ("closer", "ACK **dMbnngX3j**/x: no", &[]),
    ("closer", "ACK `dMbnngX3j`/x: no", &[]),
    // Keys in brackets or parentheses.
    ("bracket", "ACK (dMbnngX3j): done", &[("ack", &[A], "done")]),
    ("bracket", "ACK [dMbnngX3j]: done", &[("ack", &[A], "done")]),
    ("bracket", "NACK [dMbnngX3j] — generated", &[("nack", &[A], "generated")]),
    ("bracket", "ACK (dMbnngX3j, dMbnpQ7kz): both", &[("ack", &[A, B], "both")]),
    ("bracket", "ACK [dMbnngX3j dMbnpQ7kz] both", &[("ack", &[A, B], "both")]),
    ("bracket", "ACK ( dMbnngX3j and dMbnpQ7kz ): both", &[("ack", &[A, B], "both")]),
    ("bracket", "ACK (dMbnngX3j), [dMbnpQ7kz]: both", &[("ack", &[A, B], "both")]),
    ("bracket", "ACK: (dMbnngX3j) done", &[("ack", &[A], "done")]),
    ("bracket", "- **ACK (dMbnngX3j):** done", &[("ack", &[A], "done")]),
    ("bracket", "ACK (dMbnngX3j: unclosed", &[]),
    ("bracket", "ACK [dMbnngX3j): mismatched", &[]),
    ("bracket", "ACK (dMbnngX3j)x: glued", &[]),
    ("bracket", "ACK(dMbnngX3j): glued to the token", &[]),
    // Suppression walk.
    ("fence", "```\nACK dMbnngX3j: in code\n```\nACK dMbnpQ7kz: out", &[("ack", &[B], "out")]),
    ("fence", "~~~md\nACK dMbnngX3j\n~~~\n", &[]),
    ("fence", "````\n```\nACK dMbnngX3j\n````\nACK dMbnpQ7kz", &[("ack", &[B], "")]),
    ("fence", "```\n~~~\nACK dMbnngX3j\n", &[]),
    ("fence", "- ```\n  ACK dMbnngX3j\n  ```\n- ACK dMbnpQ7kz: y", &[("ack", &[B], "y")]),
    ("fence", "``` ACK dMbnngX3j", &[]),
    ("quote", "> ACK dMbnngX3j: quoted", &[]),
    ("quote", "> ACK dMbnngX3j\nACK dMbnpQ7kz: mine", &[("ack", &[B], "mine")]),
    ("grep", "src/main.rs:12: ACK dMbnngX3j: from grep", &[]),
    ("grep", "src/a.rs-12- ACK dMbnngX3j", &[]),
    ("grep", "2024-05-01: ACK dMbnngX3j: dated", &[("ack", &[A], "dated")]),
    // Bodies.
    ("body", "ACK dMbnngX3j: line one\nline two\n\nNACK dMbnpQ7kz: no", &[("ack", &[A], "line one\nline two"), ("nack", &[B], "no")]),
    ("body", "ACK dMbnngX3j: see\n```\nNACK dMbnpQ7kz: shown\n```\nend", &[("ack", &[A], "see\n```\nNACK dMbnpQ7kz: shown\n```\nend")]),
    ("body", "ACK dMbnngX3j:\r\none\r\ntwo\r\n", &[("ack", &[A], "one\ntwo")]),
    ("body", "- **ACK dMbnngX3j:** a\n- **ACK dMbnpQ7kz:** b", &[("ack", &[A], "a"), ("ack", &[B], "b")]),
    ("body", "NACK dMbnngX3j:", &[("nack", &[A], "")]),
    ("body", "NACK dMbnngX3j:    \n\n", &[("nack", &[A], "")]),
    ("body", "ACK dMbnngX3j: **bold** result", &[("ack", &[A], "**bold** result")]),
    ("body", "Intro.\n\nACK dMbnngX3j: a\nACK: b\nACK dMbnpQ7kz: c", &[("ack", &[A], "a"), ("keyless", &[], ""), ("ack", &[B], "c")]),
];

fn render(d: &Directive) -> (String, Vec<String>, String) {
    let kind = match (d.problem, d.polarity) {
        (Some(Problem::Keyless), _) => "keyless",
        (None, Polarity::Ack) => "ack",
        (None, Polarity::Nack) => "nack",
    };
    (
        kind.into(),
        d.keys.clone(),
        d.body.clone().unwrap_or_default(),
    )
}

#[test]
fn table() {
    check_table(CASES);
}

/// Parses each case's input and fails with every case whose directives differ from
/// what it expects (shared by the guard table, `guard_tests`).
pub(super) fn check_table(cases: &[(&str, &str, &[Exp])]) {
    let mut failures = Vec::new();
    for &(rule, input, want) in cases {
        let got: Vec<_> = parse(input).iter().map(render).collect();
        let want: Vec<_> = want
            .iter()
            .map(|&(k, keys, body)| {
                let keys = keys.iter().map(|s| s.to_string()).collect();
                (k.to_string(), keys, body.to_string())
            })
            .collect();
        if got != want {
            failures.push(format!(
                "[{rule}] {input:?}\n   got  {got:?}\n   want {want:?}"
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases failed:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

#[test]
fn lines_are_the_headers_lines() {
    let text = "intro\n\n- ACK dMbnngX3j: a\n  more\n```\nACK dMbnq2HhR\n```\nx. NACK dMbnpQ7kz: b";
    let lines: Vec<usize> = parse(text).iter().map(|d| d.line).collect();
    assert_eq!(lines, [3, 8]);
    // A header across a line break is on the token's line.
    let text = "intro\nAll green, ACK\ndMbnngX3j: done\nNACK\ndMbnpQ7kz: no";
    let lines: Vec<usize> = parse(text).iter().map(|d| d.line).collect();
    assert_eq!(lines, [2, 4]);
}

#[test]
fn keyless_has_no_body_and_serializes_its_problem() {
    let d = &parse("ACK: sure")[0];
    assert_eq!(d.body, None);
    assert_eq!(
        serde_json::to_string(d).unwrap(),
        r#"{"polarity":"ack","keys":[],"line":1,"problem":"keyless"}"#
    );
    let d = &parse("NACK dMbnngX3j: generated")[0];
    assert_eq!(
        serde_json::to_string(d).unwrap(),
        r#"{"polarity":"nack","keys":["dMbnngX3j"],"line":1,"body":"generated"}"#
    );
}

#[test]
fn ack_free_text_is_empty() {
    assert!(parse("").is_empty());
    assert!(parse("ack, Ack, acknowledged, back, track").is_empty());
}

/// Quadratic behaviour on one huge line would make these take minutes.
#[test]
fn huge_lines_stay_linear() {
    let n = 40_000;
    for unit in [
        "ACK ",
        "could: ACK dMbnngX3j ",
        "x: ACK dMbnngX3j ",
        "` `` ACK ",
        "ACK dMbnngX3j ",
        "a-1-",
        "Done. ",
    ] {
        let text = unit.repeat(n);
        let _ = parse(&text);
        let _ = walk(&text).count();
    }
    let dots = format!("{}x: ACK dMbnngX3j", "a..".repeat(n));
    assert_eq!(parse(&dots).len(), 1);
    let keys = "dMbnngX3j, ".repeat(n);
    let d = parse(&format!("ACK {keys}: many"));
    assert_eq!(d[0].keys, [A]);
}
