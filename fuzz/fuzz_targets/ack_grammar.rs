//! Fuzz target for `spice::steer::grammar::parse`: any UTF-8 text must parse without
//! panicking and keep the grammar's invariants, which live in the library
//! (`spice::steer::grammar::invariants::check_invariants`) so that the property tests
//! run them on every `cargo test` and this target adds only libFuzzer around them.
//!
//! Build and run (nightly, cargo-fuzz): `cargo fuzz run ack_grammar` from `fuzz/`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        spice::steer::grammar::invariants::check_invariants(text);
    }
});
