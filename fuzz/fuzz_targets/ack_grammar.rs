//! Fuzz target for `spice::steer::grammar::parse`: any UTF-8 text must parse without
//! panicking, and what comes out must keep the grammar's invariants (keys are stamps,
//! deduplicated, empty exactly for keyless directives; lines in range and in order;
//! nothing issued from a shown line).
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
        for (i, key) in d.keys.iter().enumerate() {
            assert!(is_stamp(key) && header.text.contains(key.as_str()));
            assert!(!d.keys[..i].contains(key));
        }
    }
});
