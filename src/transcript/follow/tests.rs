use super::*;
use crate::transcript::event::EventKind;
use std::io::Write;

/// Emits one prompt per line holding the line's text, so tests see exactly what was read.
#[derive(Default)]
struct Lines(u64);

impl Decoder for Lines {
    fn feed(&mut self, bytes: &[u8], line: u64, out: &mut Vec<Event>) {
        match std::str::from_utf8(bytes) {
            Ok(t) => out.push(Event {
                line,
                timestamp: None,
                subagent: None,
                kind: EventKind::UserPrompt {
                    text: t.to_string(),
                },
            }),
            Err(_) => self.0 += 1,
        }
    }
    fn malformed(&self) -> u64 {
        self.0
    }
}

fn lines() -> Box<dyn Decoder + Send> {
    Box::new(Lines::default())
}

fn texts(events: &[Event]) -> Vec<(u64, String)> {
    events
        .iter()
        .map(|e| match &e.kind {
            EventKind::UserPrompt { text } => (e.line, text.clone()),
            _ => unreachable!(),
        })
        .collect()
}

fn append(path: &Path, bytes: &[u8]) {
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .unwrap();
    f.write_all(bytes).unwrap();
    f.flush().unwrap();
}

#[test]
fn a_partial_line_waits_for_its_newline() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("t.jsonl");
    append(&p, b"one\ntw");
    let mut f = Follower::new(&p, lines, None);
    let mut out = Vec::new();
    f.poll(&mut out).unwrap();
    assert_eq!(texts(&out), [(1, "one".to_string())]);
    assert_eq!(f.checkpoint().offset, 4);
    out.clear();
    f.poll(&mut out).unwrap();
    assert!(out.is_empty(), "nothing new: the half line is held");
    append(&p, b"o\r\nthree\n");
    f.poll(&mut out).unwrap();
    assert_eq!(
        texts(&out),
        [(2, "two".to_string()), (3, "three".to_string())]
    );
}

#[test]
fn resuming_from_a_checkpoint_neither_repeats_nor_loses() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("t.jsonl");
    append(&p, b"a\nb\n");
    let mut f = Follower::new(&p, lines, None);
    let mut out = Vec::new();
    f.poll(&mut out).unwrap();
    let cp = f.checkpoint();
    append(&p, b"c\nd");
    let mut g = Follower::new(&p, lines, Some(cp));
    out.clear();
    assert_eq!(g.poll(&mut out).unwrap(), Restart::No);
    assert_eq!(texts(&out), [(3, "c".to_string())]);
    assert_eq!(
        g.checkpoint(),
        Checkpoint {
            offset: 6,
            line: 3,
            hash: prefix_hash(b"a\nb\nc\n")
        }
    );
}

#[test]
fn truncation_and_rewrites_restart_from_the_beginning() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("t.jsonl");
    append(&p, b"first\nsecond\n");
    let mut f = Follower::new(&p, lines, None);
    let mut out = Vec::new();
    f.poll(&mut out).unwrap();
    // Truncated: shorter than where we were.
    std::fs::write(&p, b"x\n").unwrap();
    out.clear();
    assert_eq!(f.poll(&mut out).unwrap(), Restart::Rewritten);
    assert_eq!(texts(&out), [(1, "x".to_string())]);
    // Rewritten with different content of a greater length.
    std::fs::write(&p, b"y\nmore lines\n").unwrap();
    out.clear();
    assert_eq!(f.poll(&mut out).unwrap(), Restart::Rewritten);
    assert_eq!(
        texts(&out),
        [(1, "y".to_string()), (2, "more lines".to_string())]
    );
    assert_eq!(
        f.checkpoint().hash,
        prefix_hash(b"y\nmore lines\n"),
        "the hash restarts too"
    );
    // A stored checkpoint that no longer matches the file's prefix.
    let stale = f.checkpoint();
    std::fs::write(&p, b"z\nmore lines\nand more\n").unwrap();
    let mut g = Follower::new(&p, lines, Some(stale));
    out.clear();
    assert_eq!(g.poll(&mut out).unwrap(), Restart::Rewritten);
    assert_eq!(out.len(), 3);
}

#[test]
fn long_lines_span_chunks() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("t.jsonl");
    let big = "x".repeat(5 * 1024 * 1024 + 17);
    append(&p, big.as_bytes());
    let mut f = Follower::new(&p, lines, None);
    let mut out = Vec::new();
    f.poll(&mut out).unwrap();
    assert!(out.is_empty());
    append(&p, b"\nend\n");
    f.poll(&mut out).unwrap();
    assert_eq!(out.len(), 2);
    assert_eq!(texts(&out)[0].1.len(), big.len());
    let mut g = Follower::new(&p, lines, Some(f.checkpoint()));
    out.clear();
    assert_eq!(g.poll(&mut out).unwrap(), Restart::No);
    assert!(out.is_empty());
}

#[test]
fn large_reads_ahead_and_match_small_reads_line_for_line() {
    let dir = tempfile::tempdir().unwrap();
    let whole = dir.path().join("whole.jsonl");
    let grown = dir.path().join("grown.jsonl");
    // More than two budgets, so several polls each read ahead on a second thread;
    // lines from a few bytes to 300 KB cross chunk boundaries, some end in CRLF.
    let mut bytes = Vec::new();
    let mut n = 0u64;
    while (bytes.len() as u64) < 2 * BUDGET + (3 << 20) {
        n += 1;
        let len = if n % 3 == 0 {
            n % 50
        } else {
            (n * 7919) % 300_000
        };
        bytes.extend_from_slice(format!("{n} ").as_bytes());
        bytes.resize(bytes.len() + len as usize, b'a' + (n % 26) as u8);
        bytes.extend_from_slice(if n % 5 == 0 { b"\r\n" } else { b"\n" });
    }
    bytes.extend_from_slice(b"partial");
    append(&whole, &bytes);
    let mut big = Follower::new(&whole, lines, None);
    let mut read_big = Vec::new();
    loop {
        big.poll(&mut read_big).unwrap();
        if big.caught_up() {
            break;
        }
    }
    // The same bytes appended 512 KiB at a time: every poll reads inline.
    let mut small = Follower::new(&grown, lines, None);
    let mut read_small = Vec::new();
    for piece in bytes.chunks(512 << 10) {
        append(&grown, piece);
        small.poll(&mut read_small).unwrap();
    }
    assert_eq!(read_big.len() as u64, n);
    assert!(texts(&read_big) == texts(&read_small), "the same lines");
    let end = (bytes.len() - "partial".len()) as u64;
    assert_eq!(big.checkpoint(), small.checkpoint());
    assert_eq!(big.checkpoint().offset, end);
    assert_eq!(big.checkpoint().line, n);
    assert_eq!(big.checkpoint().hash, prefix_hash(&bytes[..end as usize]));
}
