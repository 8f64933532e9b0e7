use super::*;
use crate::transcript::event::EventKind;
use std::io::Write;
use std::os::unix::fs::MetadataExt;

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

fn reset(line: u64, prefix: &[u8], truncated: bool) -> Restart {
    Restart::Reset {
        kept: Checkpoint {
            offset: prefix.len() as u64,
            line,
            hash: prefix_hash(prefix),
        },
        truncated,
    }
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
    assert_eq!(f.poll(&mut out).unwrap(), reset(0, b"", true));
    assert_eq!(texts(&out), [(1, "x".to_string())]);
    // Rewritten with different content of a greater length.
    std::fs::write(&p, b"y\nmore lines\n").unwrap();
    out.clear();
    assert_eq!(f.poll(&mut out).unwrap(), reset(0, b"", false));
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
    assert_eq!(g.poll(&mut out).unwrap(), reset(0, b"", false));
    assert_eq!(out.len(), 3);
}

/// Issue #14: a file shrunk to a shorter prefix emitted the kept lines again.
#[test]
fn a_file_shrunk_to_a_prefix_is_not_read_again_and_says_what_it_kept() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("t.jsonl");
    let body: String = (1..=600).map(|i| format!("line {i}\n")).collect();
    append(&p, body.as_bytes());
    let mut f = Follower::new(&p, lines, None);
    let mut out = Vec::new();
    while !f.caught_up() || out.is_empty() {
        f.poll(&mut out).unwrap();
    }
    assert_eq!(out.len(), 600);
    // Cut in the middle of line 451: lines 1..=450 stand, and the half line waits.
    let cut = body.find("line 451\n").unwrap() + 4;
    std::fs::OpenOptions::new()
        .write(true)
        .open(&p)
        .unwrap()
        .set_len(cut as u64)
        .unwrap();
    let kept = body.find("line 451\n").unwrap();
    out.clear();
    assert_eq!(
        f.poll(&mut out).unwrap(),
        reset(450, &body.as_bytes()[..kept], true)
    );
    assert!(out.is_empty(), "nothing kept is emitted again: {out:?}");
    append(&p, b" again\nline 452\n");
    f.poll(&mut out).unwrap();
    assert_eq!(
        texts(&out),
        [
            (451, "line again".to_string()),
            (452, "line 452".to_string())
        ]
    );
    assert_eq!(
        f.checkpoint().hash,
        prefix_hash(&std::fs::read(&p).unwrap())
    );
    // A line rewritten in place (the same length): read again from there.
    let now = std::fs::read(&p).unwrap();
    let at = body.find("line 400\n").unwrap();
    let mut changed = now.clone();
    changed[at..at + 8].copy_from_slice(b"LINE 400");
    std::fs::write(&p, &changed).unwrap();
    out.clear();
    assert_eq!(f.poll(&mut out).unwrap(), reset(399, &changed[..at], false));
    assert_eq!(out.len(), 452 - 399);
    assert_eq!(texts(&out)[0], (400, "LINE 400".to_string()));
}

/// Issue #14: rotation (renamed away, a new file at the path) lost the lines written
/// just before the rename.
#[test]
fn a_rotated_file_is_read_to_its_end_before_the_new_one() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("t.jsonl");
    append(&p, b"a\n");
    let mut f = Follower::new(&p, lines, None);
    let mut out = Vec::new();
    f.poll(&mut out).unwrap();
    append(&p, b"b\nc\nunfinished");
    std::fs::rename(&p, dir.path().join("t.jsonl.1")).unwrap();
    append(&p, b"new 1\n");
    out.clear();
    let mut restarts = Vec::new();
    loop {
        let n = out.len();
        restarts.push((f.poll(&mut out).unwrap(), out.len() - n));
        if f.caught_up() {
            break;
        }
    }
    assert_eq!(
        texts(&out),
        [
            (2, "b".to_string()),
            (3, "c".to_string()),
            (4, "unfinished".to_string()),
            (1, "new 1".to_string())
        ]
    );
    // The new file's events come in a poll of their own that says so.
    assert_eq!(restarts.last(), Some(&(Restart::Rotated, 1)));
    assert!(restarts[..restarts.len() - 1]
        .iter()
        .all(|(r, _)| *r == Restart::No));
    let now = std::fs::metadata(&p).unwrap();
    assert_eq!(f.identity(), Some((now.dev(), now.ino())));
}

/// Issue #14: a deleted file was an error on every poll; now it is read to its end,
/// closed, `NotFound` until a file is there again, and the new one is read anew.
#[test]
fn a_deleted_file_is_finished_then_waited_for() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("t.jsonl");
    append(&p, b"a\n");
    let mut f = Follower::new(&p, lines, None);
    let mut out = Vec::new();
    f.poll(&mut out).unwrap();
    append(&p, b"b\n");
    std::fs::remove_file(&p).unwrap();
    out.clear();
    assert_eq!(f.poll(&mut out).unwrap(), Restart::No);
    assert_eq!(texts(&out), [(2, "b".to_string())]);
    for _ in 0..3 {
        let e = f.poll(&mut out).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::NotFound);
    }
    assert!(f.file.is_none(), "a deleted file is not held open");
    append(&p, b"again\n");
    out.clear();
    assert_eq!(f.poll(&mut out).unwrap(), Restart::Rotated);
    assert_eq!(texts(&out), [(1, "again".to_string())]);
}

/// Issue #14: followed by identity. A renamed file goes on where it was, and a copy of
/// the same bytes put in a file's place continues it instead of starting over.
#[test]
fn renamed_and_replaced_by_a_copy_continue_where_they_were() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("t.jsonl");
    let q = dir.path().join("renamed.jsonl");
    append(&p, b"a\nb\n");
    let mut f = Follower::new(&p, lines, None);
    let mut out = Vec::new();
    f.poll(&mut out).unwrap();
    let id = f.identity();
    std::fs::rename(&p, &q).unwrap();
    append(&q, b"c\n");
    f.renamed(&q);
    out.clear();
    assert_eq!(f.poll(&mut out).unwrap(), Restart::No);
    assert_eq!(texts(&out), [(3, "c".to_string())]);
    assert_eq!(f.identity(), id);
    // Replaced atomically by a longer copy (write a temporary file, rename it over).
    let tmp = dir.path().join("tmp");
    std::fs::write(&tmp, b"a\nb\nc\nd\n").unwrap();
    std::fs::rename(&tmp, &q).unwrap();
    out.clear();
    let mut restarts = Vec::new();
    while !f.caught_up() || restarts.is_empty() {
        restarts.push(f.poll(&mut out).unwrap());
    }
    assert!(restarts.iter().all(|r| *r == Restart::No), "{restarts:?}");
    assert_eq!(texts(&out), [(4, "d".to_string())]);
    assert_ne!(f.identity(), id);
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
