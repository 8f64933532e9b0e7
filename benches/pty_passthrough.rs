//! PTY pass-through: 100 MB of terminal output (`cat FILE`) through an agent's PTY and
//! its asciicast recorder (`spice::agent::Agent`, as the supervisor launches agents),
//! against `cat FILE > /dev/null` of the same bytes as the baseline, side by side
//! (alternating runs, medians). A third figure, the same PTY with no recording,
//! separates the terminal's cost from the recorder's.
//!
//! usage: cargo bench --bench pty_passthrough [-- MB [RUNS]]     (default 100 MB, 3 runs)
//!
//! The input is generated deterministically here (a fixed-seed xorshift): lines of
//! printable ASCII with some ANSI colour sequences, box-drawing characters and quotes
//! and backslashes (what an agent's TUI writes, and what JSON has to escape). A run
//! ends when the agent has exited and its output is fully read and the recording is
//! closed (`Agent::output_done`). Every recording is then checked: a valid asciicast
//! v2 header (`"version": 2`), `[time, "o", text]` events with non-decreasing times,
//! and output that is exactly the input with each `\n` turned into `\r\n` (the
//! terminal's ONLCR), so its bytes add up to the input size plus one per line.
//! Besides wall time, each PTY run reports this process's CPU time (the reader
//! thread's draining and recording, plus the main thread's 1 ms polling, the same in
//! both), which a machine shared with other work disturbs less than wall time.

use nix::libc;
use spice::agent::{Agent, LaunchSpec};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

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
}

const WORDS: &[&str] = &[
    "the",
    "agent",
    "runs",
    "cargo",
    "test",
    "in",
    "its",
    "worktree",
    "and",
    "reads",
    "src/fleet/lane.rs",
    "error[E0308]:",
    "mismatched",
    "types",
    "--> src/main.rs:42:7",
    "\"quoted\"",
    "C:\\path\\like",
    "ok",
    "42",
    "passed;",
    "0",
    "failed;",
    "{",
    "}",
    "=>",
    "│",
    "─",
    "✓",
    "…",
    "é",
];
const COLOURS: &[&str] = &["\x1b[1;32m", "\x1b[31m", "\x1b[2m", "\x1b[0m", "\x1b[K"];

/// About `bytes` of text: whole lines, never a `\r` or a tab.
fn corpus(bytes: usize) -> Vec<u8> {
    let mut rng = Rng(0x5eed_cafe_f00d_0001);
    let mut out = Vec::with_capacity(bytes + 256);
    while out.len() < bytes {
        let words = 3 + rng.below(16);
        for i in 0..words {
            if i > 0 {
                out.push(b' ');
            }
            if rng.below(12) == 0 {
                out.extend_from_slice(COLOURS[rng.below(COLOURS.len())].as_bytes());
            }
            out.extend_from_slice(WORDS[rng.below(WORDS.len())].as_bytes());
        }
        out.push(b'\n');
    }
    out
}

fn mb_per_s(bytes: usize, d: Duration) -> f64 {
    bytes as f64 / 1_048_576.0 / d.as_secs_f64()
}

fn median(mut xs: Vec<Duration>) -> Duration {
    xs.sort();
    xs[(xs.len() - 1) / 2]
}

/// The baseline: `cat FILE > /dev/null`, the whole process.
fn cat_to_null(input: &Path) -> Duration {
    let null = std::fs::File::create("/dev/null").expect("/dev/null");
    let t0 = Instant::now();
    let st = Command::new("cat")
        .arg(input)
        .stdout(null)
        .stderr(Stdio::inherit())
        .status()
        .expect("cat runs");
    let d = t0.elapsed();
    assert!(st.success(), "cat failed: {st}");
    d
}

/// CPU time (user + system) of this process so far: the PTY reader thread's work,
/// plus the main thread's polling, which is the same with and without a recording.
fn own_cpu() -> Duration {
    // SAFETY: a zeroed rusage is valid, and getrusage only fills it in.
    let ru = unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut ru);
        ru
    };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// `cat FILE` as an agent under a PTY, recorded to `recording` if given; from spawn to
/// the agent's exit with every byte read and the recording closed. Returns the wall
/// time and the CPU time this process (the supervisor's side) spent meanwhile.
fn through_pty(input: &Path, cwd: &Path, recording: Option<PathBuf>) -> (Duration, Duration) {
    let spec = LaunchSpec {
        argv: vec!["cat".into(), input.display().to_string()],
        cwd: cwd.to_path_buf(),
        env: vec![
            ("PATH".into(), std::env::var("PATH").unwrap_or_default()),
            ("HOME".into(), cwd.display().to_string()),
            ("TERM".into(), "xterm-256color".into()),
        ],
        cols: 120,
        rows: 40,
        recording,
    };
    let (t0, c0) = (Instant::now(), own_cpu());
    let mut agent = Agent::spawn(&spec).expect("spawn cat under a PTY");
    let st = loop {
        if agent.output_done() {
            if let Some(st) = agent.try_wait().expect("wait") {
                break st;
            }
        }
        std::thread::sleep(Duration::from_millis(1));
    };
    let (d, cpu) = (t0.elapsed(), own_cpu() - c0);
    assert!(st.success(), "cat under the PTY: {st}");
    if let Some(e) = agent.recording_error() {
        panic!("recording failed: {e}");
    }
    agent.stop(Duration::from_secs(1)).expect("reap");
    (d, cpu)
}

/// Checks a recording against the input; returns (events, output bytes).
fn check_recording(path: &Path, input: &[u8]) -> (usize, usize) {
    let mut lines = BufReader::with_capacity(1 << 20, std::fs::File::open(path).unwrap()).lines();
    let header: serde_json::Value =
        serde_json::from_str(&lines.next().expect("a header line").unwrap()).expect("header JSON");
    assert_eq!(header["version"], 2, "{header}");
    assert_eq!(
        (header["width"].as_u64(), header["height"].as_u64()),
        (Some(120), Some(40))
    );
    assert!(header["timestamp"].is_i64(), "{header}");
    let (mut pos, mut cr, mut events, mut out_bytes, mut last_t) = (0usize, false, 0, 0, 0.0);
    for (n, line) in lines.enumerate() {
        let line = line.unwrap();
        let (t, kind, text): (f64, String, String) = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("event {}: {e}: {:.80}", n + 1, line));
        assert_eq!(kind, "o", "event {}", n + 1);
        assert!(t >= last_t, "event {}: time {t} before {last_t}", n + 1);
        last_t = t;
        events += 1;
        out_bytes += text.len();
        // The output is the input with ONLCR: every "\n" arrives as "\r\n".
        for &b in text.as_bytes() {
            if b == b'\r' && !cr && input.get(pos) == Some(&b'\n') {
                cr = true;
                continue;
            }
            assert_eq!(
                input.get(pos),
                Some(&b),
                "event {}: output differs at input byte {pos}",
                n + 1
            );
            assert!(b != b'\n' || cr, "a bare \\n at input byte {pos}");
            cr = false;
            pos += 1;
        }
    }
    assert_eq!(
        pos,
        input.len(),
        "the recording has {pos} of {} input bytes",
        input.len()
    );
    (events, out_bytes)
}

fn main() {
    // `cargo bench` passes `--bench`; positional arguments after `--` are ours.
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let mb: usize = args.first().map_or(100, |a| a.parse().expect("MB"));
    let runs: usize = args.get(1).map_or(3, |a| a.parse().expect("RUNS"));
    let dir = tempfile::tempdir().expect("tempdir");
    let input_path = dir.path().join("input.txt");
    let input = corpus(mb << 20);
    std::fs::File::create(&input_path)
        .and_then(|mut f| f.write_all(&input))
        .expect("write the input");
    let lines = input.iter().filter(|&&b| b == b'\n').count();
    let size = input.len();
    println!(
        "PTY pass-through: {:.1} MB ({lines} lines) of `cat FILE`, {runs} alternating runs, medians",
        size as f64 / 1_048_576.0
    );

    cat_to_null(&input_path); // page cache warm for everyone
    let (mut base, mut bare, mut rec) = (Vec::new(), Vec::new(), Vec::new());
    let (mut bare_cpu, mut rec_cpu) = (Vec::new(), Vec::new());
    for run in 0..runs {
        base.push(cat_to_null(&input_path));
        let (d, cpu) = through_pty(&input_path, dir.path(), None);
        bare.push(d);
        bare_cpu.push(cpu);
        let cast = dir.path().join(format!("run{run}.cast"));
        let (d, cpu) = through_pty(&input_path, dir.path(), Some(cast.clone()));
        rec.push(d);
        rec_cpu.push(cpu);
        let cast_size = std::fs::metadata(&cast).unwrap().len();
        let (events, out_bytes) = check_recording(&cast, &input);
        assert_eq!(
            out_bytes,
            size + lines,
            "recorded output bytes = input + one \\r per line"
        );
        if run == 0 {
            println!(
                "  recording: valid asciicast v2, {events} events, {out_bytes} output bytes = {size} input + {lines} CRs (ONLCR), file {:.1} MB",
                cast_size as f64 / 1_048_576.0
            );
        }
        std::fs::remove_file(&cast).ok();
    }
    let (b, p, r) = (median(base), median(bare), median(rec));
    let (pc, rc) = (median(bare_cpu), median(rec_cpu));
    println!(
        "  cat > /dev/null (baseline): {:7.3}s {:8.0} MB/s",
        b.as_secs_f64(),
        mb_per_s(size, b)
    );
    println!(
        "  PTY, no recording:          {:7.3}s {:8.0} MB/s  ratio to baseline {:.1}x slower; reader side {:.3} CPU-s",
        p.as_secs_f64(),
        mb_per_s(size, p),
        p.as_secs_f64() / b.as_secs_f64(),
        pc.as_secs_f64()
    );
    println!(
        "  PTY + asciicast recorder:   {:7.3}s {:8.0} MB/s  ratio to baseline {:.1}x slower; reader side {:.3} CPU-s; recorder adds {:.0}% wall, {:.0}% CPU over the bare PTY",
        r.as_secs_f64(),
        mb_per_s(size, r),
        r.as_secs_f64() / b.as_secs_f64(),
        rc.as_secs_f64(),
        (r.as_secs_f64() / p.as_secs_f64() - 1.0) * 100.0,
        (rc.as_secs_f64() / pc.as_secs_f64() - 1.0) * 100.0
    );
}
