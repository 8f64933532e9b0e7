//! Grammar throughput: `parse` over ~20 MB of ACK-free assistant prose and ~20 MB of
//! ACK-dense prose, against a plain `memchr::memmem` count of "ACK" over the same bytes
//! as the baseline (the issue's target: at least half the baseline's speed on ACK-free
//! text). Run with `cargo bench --bench grammar`.
//!
//! The corpora are generated deterministically here (a fixed-seed xorshift), so every
//! run measures the same bytes; each figure is the best of five runs.

use std::hint::black_box;
use std::time::{Duration, Instant};

use memchr::memmem;
use spice::stamp;
use spice::steer::grammar;

const TARGET_BYTES: usize = 20 << 20;
const RUNS: usize = 5;

/// xorshift64*: deterministic and dependency-free; quality is irrelevant here.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }
}

const WORDS: &[&str] = &[
    "the",
    "test",
    "suite",
    "now",
    "passes",
    "after",
    "I",
    "split",
    "file",
    "into",
    "three",
    "shards",
    "and",
    "moved",
    "fixtures",
    "to",
    "a",
    "shared",
    "module",
    "so",
    "each",
    "runs",
    "in",
    "parallel",
    "lease",
    "renewal",
    "was",
    "racing",
    "with",
    "takeover",
    "when",
    "clock",
    "jumped",
    "backwards",
    "store",
    "keeps",
    "one",
    "transaction",
    "per",
    "write",
    "allocator",
    "ranks",
    "ready",
    "tasks",
    "by",
    "inherited",
    "priority",
    "then",
    "claims",
    "first",
    "candidate",
    "that",
    "still",
    "fits",
    "filter",
    "see",
    "log",
    "below",
    "for",
    "details",
    "this",
    "change",
    "is",
    "small",
    "but",
    "touches",
    "error",
    "paths",
    "SQLite",
    "Rust",
    "JSON",
    "API",
    "HTTP",
    "stdout",
    "stderr",
    "worktree",
    "branch",
    "rebased",
    "onto",
    "main",
    "reviewer",
    "asked",
    "about",
    "naming",
    "kept",
    "old",
    "name",
    "since",
];

const CODE: &[&str] = &[
    "fn renew(&self, id: TaskId, fence: u64) -> Result<Lease> {",
    "    let tx = self.conn.transaction_with_behavior(Immediate)?;",
    "    let row = tx.query_row(SQL_CLAIM, params![id], Claim::from_row)?;",
    "    if row.fence != fence { return Err(Error::Fenced(id)); }",
    "    tx.commit()?;",
    "}",
    "$ cargo test --lib store::claims",
    "test store::claims::tests::renew_keeps_fence ... ok",
];

fn sentence(rng: &mut Rng, out: &mut String) {
    let n = 6 + rng.below(14);
    for i in 0..n {
        let w = rng.pick(WORDS);
        if i > 0 {
            out.push(' ');
        }
        match rng.below(20) {
            0 => {
                out.push('`');
                out.push_str(w);
                out.push_str("()`");
            }
            1 => {
                out.push_str("**");
                out.push_str(w);
                out.push_str("**");
            }
            _ => out.push_str(w),
        }
    }
    out.push_str(if rng.below(8) == 0 { ":" } else { "." });
}

/// One block of ordinary assistant prose: a paragraph, a list, a heading, a fence, a
/// quote or grep output.
fn prose_block(rng: &mut Rng, out: &mut String) {
    match rng.below(10) {
        0..=3 => {
            for _ in 0..1 + rng.below(4) {
                sentence(rng, out);
                out.push(' ');
            }
            out.push('\n');
        }
        4 | 5 => {
            for i in 0..2 + rng.below(4) {
                if rng.below(2) == 0 {
                    out.push_str("- ");
                } else {
                    out.push_str(&format!("{}. ", i + 1));
                }
                sentence(rng, out);
                out.push('\n');
            }
        }
        6 => {
            out.push_str("## ");
            out.push_str(rng.pick(WORDS));
            out.push(' ');
            out.push_str(rng.pick(WORDS));
            out.push('\n');
        }
        7 | 8 => {
            out.push_str("```rust\n");
            for _ in 0..2 + rng.below(8) {
                out.push_str(rng.pick(CODE));
                out.push('\n');
            }
            out.push_str("```\n");
        }
        _ => {
            out.push_str(if rng.below(2) == 0 {
                "> "
            } else {
                "src/store/claims.rs:118: "
            });
            sentence(rng, out);
            out.push('\n');
        }
    }
    out.push('\n');
}

/// Directive forms, issued and merely mentioned, for the dense corpus.
const DIRECTIVES: &[&str] = &[
    "ACK {k}: split the test file into three shards",
    "- **ACK {k}:** kept stdout untouched",
    "NACK {k}: the file is generated; edits would be lost",
    "ACK {k}, {k}: both applied",
    "ACK {k} and {k} — rebased first",
    "1. ACK inbox item `{k}`. Done.",
    "## NACK {k}",
    "Done. ACK {k}: fixed in the same commit",
    "I would reply ACK {k} once the build passes.",
    "`ACK {k}: done`",
    "    ACK {k}: shown as code",
    "> ACK {k}: quoted",
    "For example: ACK {k}: x",
    "I did not ACK {k} yet.",
    "ACK: will do",
    "Ack {k}: not the token; ACKNOWLEDGED {k}",
];

fn corpus(dense: bool) -> String {
    let mut rng = Rng(if dense { 0x5eed_dead } else { 0x5eed_f00d });
    let mut out = String::with_capacity(TARGET_BYTES + 4096);
    while out.len() < TARGET_BYTES {
        prose_block(&mut rng, &mut out);
        if dense {
            for _ in 0..1 + rng.below(2) {
                let form = rng.pick(DIRECTIVES);
                let mut line = String::new();
                for (i, part) in form.split("{k}").enumerate() {
                    if i > 0 {
                        line.push_str(&stamp::encode(rng.next() % stamp::MAX));
                    }
                    line.push_str(part);
                }
                out.push_str(&line);
                out.push('\n');
            }
        }
    }
    out
}

fn best_of(mut f: impl FnMut() -> usize) -> (Duration, usize) {
    let mut best = Duration::MAX;
    let mut result = 0;
    for _ in 0..RUNS {
        let start = Instant::now();
        result = black_box(f());
        best = best.min(start.elapsed());
    }
    (best, result)
}

fn mb_per_s(bytes: usize, d: Duration) -> f64 {
    bytes as f64 / (1 << 20) as f64 / d.as_secs_f64()
}

fn main() {
    println!(
        "{:<10} {:>9} {:>12} {:>12} {:>8} {:>11}",
        "corpus", "MB", "parse MB/s", "memmem MB/s", "ratio", "directives"
    );
    for (name, dense) in [("ack-free", false), ("ack-dense", true)] {
        let text = corpus(dense);
        let acks = memmem::find_iter(text.as_bytes(), b"ACK").count();
        assert_eq!(acks == 0, !dense, "{name} corpus has the wrong shape");
        let (parse, directives) = best_of(|| grammar::parse(black_box(&text)).len());
        let (base, _) = best_of(|| memmem::find_iter(black_box(text.as_bytes()), b"ACK").count());
        let (p, b) = (mb_per_s(text.len(), parse), mb_per_s(text.len(), base));
        println!(
            "{:<10} {:>9.1} {:>12.0} {:>12.0} {:>8.2} {:>11}",
            name,
            text.len() as f64 / (1 << 20) as f64,
            p,
            b,
            p / b,
            directives
        );
    }
    println!("ratio = parse speed / memmem speed over the same bytes (target on ack-free: >= 0.5)");
}
