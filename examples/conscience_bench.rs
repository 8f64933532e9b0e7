//! The conscience's costs, for `benches/conscience.sh`. Prints one JSON document.
//!
//! ```text
//! conscience_bench scan [MIB] [RUNS]     MB/s of assistant prose: the ACK scanner over a
//!                                       transcript of it, and 50 maxims x 20 words over
//!                                       the same messages; the ratio
//! conscience_bench latency [N]          from an assistant message appended to its
//!                                       transcript to its reminder in the store: the
//!                                       lane's scan, the watcher, without judges and
//!                                       with a scripted judge (YES)
//! ```

use spice::clock::SystemClock;
use spice::conscience::judge::JudgeConfig;
use spice::conscience::maxim::Origin;
use spice::conscience::watch::{Maxims, Seat, Watcher};
use spice::conscience::{Book, Conscience, Maxim, Scope};
use spice::store::{Store, Target, TargetKind};
use spice::transcript::acks::Scanner;
use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

const MAXIMS: usize = 50;
const WORDS: usize = 20;

/// A deterministic generator (xorshift), so every run reads the same text.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

const COMMON: &[&str] = &[
    "the", "a", "to", "of", "and", "in", "is", "it", "that", "for", "on", "with", "as", "this",
    "I", "will", "now", "test", "file", "function", "change", "run", "build", "error", "fix",
    "check", "value", "return", "module", "struct", "field", "update", "read", "write", "line",
    "next", "then", "because", "should", "could", "cargo", "passes", "fails", "commit", "branch",
];

/// 50 maxims of 20 made-up trigger words each (a few of which the prose uses).
fn book() -> Book {
    let maxims = (0..MAXIMS)
        .map(|m| Maxim {
            name: format!("m{m}"),
            origin: Origin::Repository,
            message: format!("maxim {m}"),
            words: (0..WORDS).map(|w| format!("trig{m}x{w}")).collect(),
            phrases: vec![
                format!("phrase{m} start"),
                format!("another{m} phrase here"),
            ],
            lanes: vec![],
            profiles: vec![],
            projects: vec![],
            phases: vec![],
            judges: false,
        })
        .collect();
    Book {
        maxims,
        disabled: vec![],
        judge: None,
    }
}

/// Assistant messages of about 1.5 KiB, `mib` MiB in all: common words, code-ish
/// words, and now and then a trigger word.
fn prose(mib: usize) -> Vec<String> {
    let mut rng = Rng(0x9e3779b97f4a7c15);
    let mut out = Vec::new();
    let mut total = 0;
    while total < mib << 20 {
        let mut msg = String::new();
        while msg.len() < 1500 {
            let w = match rng.below(1000) {
                0 => format!("trig{}x{}", rng.below(MAXIMS), rng.below(WORDS)),
                1..=300 => format!("ident{}", rng.below(5000)),
                _ => COMMON[rng.below(COMMON.len())].to_string(),
            };
            msg.push_str(&w);
            msg.push_str(if rng.below(12) == 0 { ". " } else { " " });
        }
        total += msg.len();
        out.push(msg);
    }
    out
}

fn record(f: &mut impl Write, n: usize, text: &str) {
    let v = serde_json::json!({ "type": "assistant", "uuid": format!("u{n}"), "sessionId": "s1",
        "cwd": "/tmp/x", "timestamp": "2026-01-01T00:00:00.000Z",
        "message": { "id": format!("m{n}"), "role": "assistant",
            "content": [{ "type": "text", "text": text }], "stop_reason": "end_turn" } });
    writeln!(f, "{v}").unwrap();
}

fn writer() -> Vec<Target> {
    vec![Target {
        kind: TargetKind::Lane,
        name: "a".into(),
    }]
}

fn scan(mib: usize, runs: usize) -> serde_json::Value {
    let messages = prose(mib);
    let bytes: usize = messages.iter().map(|m| m.len()).sum();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.jsonl");
    let mut f = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
    record(&mut f, 0, "Hello.");
    for (i, m) in messages.iter().enumerate() {
        record(&mut f, i + 1, m);
    }
    drop(f);
    let c = Conscience::new(book());
    let scope = Scope {
        lane: "a".into(),
        ..Scope::default()
    };
    let (mut ack_best, mut con_best) = (f64::MAX, f64::MAX);
    let mut hits = 0;
    for run in 0..runs {
        let mut store = Store::open_dir(
            &dir.path().join(format!("state{run}")),
            Arc::new(SystemClock),
        )
        .unwrap();
        let t = Instant::now();
        let report = spice::transcript::acks::scan(&mut store, &path, writer()).unwrap();
        ack_best = ack_best.min(t.elapsed().as_secs_f64());
        assert_eq!(report.said.len(), messages.len() + 1);
        let t = Instant::now();
        hits = messages
            .iter()
            .map(|m| c.hits(&scope, m).len())
            .sum::<usize>();
        con_best = con_best.min(t.elapsed().as_secs_f64());
    }
    let mb = bytes as f64 / 1e6;
    let (ack, con) = (mb / ack_best, mb / con_best);
    serde_json::json!({
        "prose_mb": mb, "messages": messages.len(), "maxims": MAXIMS, "words_each": WORDS,
        "ack_scanner_mb_s": ack, "conscience_mb_s": con, "ratio": con / ack, "hits": hits,
    })
}

fn judge_script(dir: &Path) -> JudgeConfig {
    let p = dir.join("judge.sh");
    std::fs::write(&p, "#!/bin/sh\ncat >/dev/null\necho YES\n").unwrap();
    JudgeConfig {
        argv: vec!["sh".into(), p.display().to_string()],
        timeout: Duration::from_secs(10),
        attempts: 1,
    }
}

/// Milliseconds from each message appended to its maxim's reminder being in the store.
fn latencies(n: usize, judged: bool) -> Vec<f64> {
    let dir = tempfile::tempdir().unwrap();
    let mut b = book();
    if judged {
        b.judge = Some(judge_script(dir.path()));
        b.maxims.iter_mut().for_each(|m| m.judges = true);
    }
    let state = dir.path().join("state");
    let mut store = Store::open_dir(&state, Arc::new(SystemClock)).unwrap();
    let watcher = Watcher::start(Seat {
        store: spice::store::Location::Sqlite(state.join(spice::store::DB_FILE)),
        clock: Arc::new(SystemClock),
        maxims: Maxims::Book(b),
        worktree: dir.path().to_path_buf(),
        scope: Scope {
            lane: "a".into(),
            ..Scope::default()
        },
    });
    let path = dir.path().join("t.jsonl");
    let mut f = std::fs::File::create(&path).unwrap();
    record(&mut f, 0, "Hello.");
    let mut scanner = Scanner::new(&path, writer());
    scanner.scan(&mut store).unwrap();
    let mut out = Vec::new();
    for i in 0..n.min(MAXIMS) {
        let t = Instant::now();
        record(&mut f, i + 1, &format!("Now I will trig{i}x3 the parser."));
        let report = scanner.scan(&mut store).unwrap();
        watcher.hear(&report);
        while store
            .conscience_fired("a", &format!("m{i}"), 0)
            .unwrap()
            .is_none()
        {
            std::thread::sleep(Duration::from_micros(200));
        }
        out.push(t.elapsed().as_secs_f64() * 1e3);
    }
    out
}

fn summary(mut v: Vec<f64>) -> serde_json::Value {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    serde_json::json!({ "n": v.len(), "median_ms": v[v.len() / 2], "max_ms": v[v.len() - 1] })
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let num = |i: usize, d: usize| args.get(i).and_then(|a| a.parse().ok()).unwrap_or(d);
    let out = match args.first().map(String::as_str) {
        Some("scan") => scan(num(1, 20), num(2, 3)),
        Some("latency") => serde_json::json!({
            "without_judges": summary(latencies(num(1, 20), false)),
            "scripted_judge": summary(latencies(num(1, 20), true)),
        }),
        _ => {
            eprintln!("usage: conscience_bench scan [MIB] [RUNS] | latency [N]");
            std::process::exit(2);
        }
    };
    println!("{out}");
}
