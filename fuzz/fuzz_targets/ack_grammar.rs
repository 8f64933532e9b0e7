//! Fuzz target for `spice::steer::grammar::parse`: any UTF-8 text must parse without
//! panicking, and what comes out must keep the grammar's invariants (keys are stamps,
//! deduplicated, empty exactly for keyless directives, on the header's line or the
//! issued line after it; lines in range and in order; nothing issued from a shown line).
#![no_main]

use libfuzzer_sys::fuzz_target;
use spice::stamp::is_stamp;
use spice::steer::grammar::{parse, walk, Problem};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let directives = parse(text);
    if !text.contains("ACK") {
        assert!(directives.is_empty());
        return;
    }
    let lines: Vec<_> = walk(text).collect();
    let mut last = 0;
    for d in &directives {
        assert!(d.line >= last && d.line >= 1 && d.line <= lines.len());
        last = d.line;
        let header = &lines[d.line - 1];
        assert!(!header.shown);
        let keyless = d.problem == Some(Problem::Keyless);
        assert_eq!(d.keys.is_empty(), keyless);
        assert_eq!(d.body.is_none(), keyless);
        // Keys sit on the header's line, or on the next line when it is issued (a
        // header across a line break).
        let next = lines.get(d.line).filter(|l| !l.shown);
        for (i, key) in d.keys.iter().enumerate() {
            let on = |l: &spice::steer::grammar::Line| l.text.contains(key.as_str());
            assert!(is_stamp(key) && (on(header) || next.is_some_and(on)));
            assert!(!d.keys[..i].contains(key));
        }
    }
});
