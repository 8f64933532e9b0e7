//! The invariants every parse keeps, whatever the input: checked by the property tests
//! (`properties.rs`) and by the fuzz target (`fuzz/fuzz_targets/ack_grammar.rs`), which
//! calls [`check_invariants`] and nothing else, so what it checks is compiled and run
//! with every test run and the fuzz crate only adds libFuzzer around it.

use super::{parse, walk, Line, Problem};
use crate::stamp;

/// Panics when a parse of `text` breaks an invariant: directives in order, on issued
/// lines in range; keys that are stamps, deduplicated, on their header's line or the
/// issued line after it, and empty exactly for keyless directives; bodies trimmed;
/// nothing found in text without `ACK`.
pub fn check_invariants(text: &str) {
    let directives = parse(text);
    let lines: Vec<Line> = walk(text).collect();
    let mut last = 0;
    for d in &directives {
        assert!(
            d.line >= 1 && d.line <= lines.len(),
            "line {} of {}",
            d.line,
            lines.len()
        );
        assert!(d.line >= last, "out of order");
        last = d.line;
        let header = &lines[d.line - 1];
        assert!(!header.shown, "directive on a shown line {}", d.line);
        let keyless = d.problem == Some(Problem::Keyless);
        assert_eq!(d.keys.is_empty(), keyless);
        assert_eq!(d.body.is_none(), keyless);
        // A header may take its keys from the next line, which must be issued too.
        let next = lines.get(d.line).filter(|l| !l.shown);
        for (i, key) in d.keys.iter().enumerate() {
            assert!(stamp::is_stamp(key), "{key:?} is not a stamp");
            assert!(
                header.text.contains(key.as_str())
                    || next.is_some_and(|l| l.text.contains(key.as_str())),
                "{key:?} not on its line or the next issued one"
            );
            assert!(!d.keys[..i].contains(key), "{key:?} twice");
        }
        if let Some(body) = &d.body {
            assert_eq!(body.trim(), body, "body not trimmed");
        }
    }
    if !text.contains("ACK") {
        assert!(directives.is_empty());
    }
}
