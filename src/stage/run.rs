//! The one runner for the repository's own commands: the gates' checks, the test
//! beds' warm commands and the fleet's stage hooks. A command runs in its own process
//! group with stdout and stderr through one pipe (its output keeps its order), gets
//! its input on stdin, and is stopped, with everything it started, at its timeout
//! (or when its caller says so: a background warm when the supervisor stops).
//! Each line of output can be handed on as it comes (progress), and the end of it is
//! kept for when it fails.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// At most this many lines of a command's output are kept (the last ones).
pub const KEPT_LINES: usize = 60;

/// One command to run.
pub struct Job<'a> {
    /// The program and its arguments; never empty.
    pub argv: &'a [String],
    pub cwd: PathBuf,
    /// Added to (or replacing in) the inherited environment.
    pub env: Vec<(String, String)>,
    /// Written to its stdin, which is then closed.
    pub stdin: Vec<u8>,
    pub timeout: Duration,
    /// Called with each line of output as it arrives.
    pub on_line: Option<&'a mut dyn FnMut(&str)>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Exit status 0, with the end of its output.
    Passed { output: String },
    /// It ran and said no: its exit code (`None`: killed by a signal) and output.
    Failed { code: Option<i32>, output: String },
    /// It could not be started.
    NotRun(String),
    /// It did not finish in time and was stopped, with the output it had given.
    TimedOut { output: String },
}

impl Outcome {
    pub fn passed(&self) -> bool {
        matches!(self, Outcome::Passed { .. })
    }

    /// The end of its output, if it ran.
    pub fn output(&self) -> &str {
        match self {
            Outcome::Passed { output }
            | Outcome::Failed { output, .. }
            | Outcome::TimedOut { output } => output,
            Outcome::NotRun(_) => "",
        }
    }

    /// One line: what happened.
    pub fn summary(&self, timeout: Duration) -> String {
        match self {
            Outcome::Passed { .. } => "passed".into(),
            Outcome::Failed { code: Some(c), .. } => format!("failed with exit code {c}"),
            Outcome::Failed { code: None, .. } => "killed by a signal".into(),
            Outcome::NotRun(why) => format!("could not run: {why}"),
            Outcome::TimedOut { .. } => {
                format!("timed out after {}s (stopped)", timeout.as_secs_f64())
            }
        }
    }
}

/// Runs `job` to its end or its timeout.
pub fn run(job: Job<'_>) -> Outcome {
    run_until(job, &AtomicBool::new(false))
}

/// How often a running command's caller is asked whether to stop it.
const STOP_EVERY: Duration = Duration::from_millis(100);

/// Runs `job` to its end, its timeout, or until `stop` is set: then it is stopped
/// (its whole process group) and reported as killed by a signal, with the output it
/// had given. The caller, who set `stop`, knows why.
pub fn run_until(job: Job<'_>, stop: &AtomicBool) -> Outcome {
    let Some(program) = job.argv.first() else {
        return Outcome::NotRun("an empty command".into());
    };
    // One pipe for stdout and stderr, so the output keeps its order. Close-on-exec:
    // a command started meanwhile by another thread (the other judge, another lane's
    // hook) must not inherit this pipe's write end, or this one's output would not
    // end until that command did.
    let (reader, writer) = match nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC) {
        Ok(p) => p,
        Err(e) => return Outcome::NotRun(format!("a pipe: {e}")),
    };
    let reader = std::fs::File::from(reader);
    let mut cmd = Command::new(program);
    cmd.args(&job.argv[1..])
        .current_dir(&job.cwd)
        // Every command spice runs is one deeper than spice (`agent::depth`).
        .env(crate::agent::depth::VAR, crate::agent::depth::child())
        .envs(job.env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::piped())
        .process_group(0);
    match writer.try_clone() {
        Ok(w2) => {
            cmd.stdout(w2).stderr(writer);
        }
        Err(e) => return Outcome::NotRun(format!("a pipe: {e}")),
    }
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Outcome::NotRun(format!("{program}: not found"));
        }
        Err(e) => return Outcome::NotRun(format!("{program}: {e}")),
    };
    // The command holds the only write ends now: the reader ends when it (and every
    // process it started) has closed them.
    drop(cmd);
    let mut stdin = child.stdin.take().expect("piped");
    let input = job.stdin;
    std::thread::spawn(move || {
        // A command that ignores stdin closes it early: that is its business. The
        // CLI restores SIGPIPE's default (`spice … | head` ends quietly), which would
        // end the whole process here: blocked in this thread, the write gets EPIPE.
        let mut pipe = nix::sys::signal::SigSet::empty();
        pipe.add(nix::sys::signal::Signal::SIGPIPE);
        let _ = pipe.thread_block();
        let _ = stdin.write_all(&input);
    });
    let (tx, rx) = mpsc::channel::<Option<String>>();
    std::thread::spawn(move || {
        let mut r = BufReader::new(reader);
        let mut buf = Vec::new();
        loop {
            buf.clear();
            match r.read_until(b'\n', &mut buf) {
                Ok(0) | Err(_) => break,
                Ok(_) => {
                    let line = String::from_utf8_lossy(&buf);
                    let line = line.trim_end_matches(['\n', '\r']).to_string();
                    if tx.send(Some(line)).is_err() {
                        return;
                    }
                }
            }
        }
        let _ = tx.send(None);
    });
    let deadline = Instant::now() + job.timeout;
    let mut kept: std::collections::VecDeque<String> = Default::default();
    let mut dropped = 0usize;
    let mut on_line = job.on_line;
    let pgid = nix::unistd::Pid::from_raw(child.id() as i32);
    loop {
        if stop.load(Ordering::SeqCst) {
            let _ = nix::sys::signal::killpg(pgid, nix::sys::signal::Signal::SIGKILL);
            let _ = child.wait();
            return Outcome::Failed {
                code: None,
                output: joined(&kept, dropped),
            };
        }
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left.min(STOP_EVERY)) {
            Ok(Some(line)) => {
                if let Some(f) = on_line.as_mut() {
                    f(&line);
                }
                kept.push_back(line);
                if kept.len() > KEPT_LINES {
                    kept.pop_front();
                    dropped += 1;
                }
            }
            Ok(None) | Err(mpsc::RecvTimeoutError::Disconnected) => break,
            Err(mpsc::RecvTimeoutError::Timeout) if Instant::now() < deadline => {}
            Err(mpsc::RecvTimeoutError::Timeout) => {
                let _ = nix::sys::signal::killpg(pgid, nix::sys::signal::Signal::SIGKILL);
                let _ = child.wait();
                return Outcome::TimedOut {
                    output: joined(&kept, dropped),
                };
            }
        }
    }
    let output = joined(&kept, dropped);
    match child.wait() {
        Ok(s) if s.success() => Outcome::Passed { output },
        Ok(s) => Outcome::Failed {
            code: s.code(),
            output,
        },
        Err(e) => Outcome::NotRun(format!("{program}: {e}")),
    }
}

/// The kept lines, saying how many came before them.
fn joined(kept: &std::collections::VecDeque<String>, dropped: usize) -> String {
    let mut lines: Vec<&str> = kept.iter().map(String::as_str).collect();
    while lines.last().is_some_and(|l| l.trim().is_empty()) {
        lines.pop();
    }
    let text = lines.join("\n");
    if dropped == 0 {
        text
    } else {
        format!("… {dropped} lines before\n{text}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job<'a>(argv: &'a [String], timeout: Duration) -> Job<'a> {
        Job {
            argv,
            cwd: std::env::temp_dir(),
            env: vec![("SPICE_T".into(), "v".into())],
            stdin: b"in".to_vec(),
            timeout,
            on_line: None,
        }
    }

    fn argv(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn output_stdin_environment_and_exit_codes() {
        let a = argv(&["sh", "-c", "cat; echo; echo \"$SPICE_T\" >&2; exit 3"]);
        let mut seen = Vec::new();
        let mut f = |l: &str| seen.push(l.to_string());
        let mut j = job(&a, Duration::from_secs(20));
        j.on_line = Some(&mut f);
        assert_eq!(
            run(j),
            Outcome::Failed {
                code: Some(3),
                output: "in\nv".into()
            }
        );
        assert_eq!(seen, ["in", "v"]);
        let a = argv(&["true"]);
        assert!(run(job(&a, Duration::from_secs(20))).passed());
    }

    #[test]
    fn missing_and_slow_commands() {
        let a = argv(&["./no-such-command"]);
        assert_eq!(
            run(job(&a, Duration::from_secs(5))),
            Outcome::NotRun("./no-such-command: not found".into())
        );
        // A grandchild holding the output open is stopped too.
        let a = argv(&["sh", "-c", "echo started; sleep 30 & sleep 30"]);
        let t = Duration::from_millis(300);
        let o = run(job(&a, t));
        assert_eq!(
            o,
            Outcome::TimedOut {
                output: "started".into()
            }
        );
        assert_eq!(o.summary(t), "timed out after 0.3s (stopped)");
    }

    /// A command that never reads its stdin does not take the caller down with
    /// SIGPIPE, even where the caller restored SIGPIPE's default (as the CLI does).
    #[test]
    fn a_command_that_ignores_its_stdin_under_sigpipe_default() {
        use nix::sys::signal::{signal, SigHandler, Signal};
        // SAFETY: default dispositions install no handler; restored below.
        let before = unsafe { signal(Signal::SIGPIPE, SigHandler::SigDfl) }.unwrap();
        // It reads a byte (so the write has begun), then closes its stdin mid-write.
        let a = argv(&["sh", "-c", "head -c 1 >/dev/null; exec 0<&-; echo closed"]);
        let mut j = job(&a, Duration::from_secs(20));
        j.stdin = vec![b'x'; 4 << 20];
        let o = run(j);
        unsafe { signal(Signal::SIGPIPE, before) }.unwrap();
        assert_eq!(
            o,
            Outcome::Passed {
                output: "closed".into()
            }
        );
    }

    #[test]
    fn regression_a_command_run_beside_others_being_started_ends_when_it_does() {
        // Before: the pipe was not close-on-exec, so a slow command that another thread
        // started while this one's pipe was being handed to its child inherited the
        // write end and held the output open: the quick command "timed out" (two
        // judges in parallel, two lanes' hooks at once). Here another thread starts
        // slow commands as fast as it can while quick ones run.
        let done = AtomicBool::new(false);
        let quick = argv(&["sh", "-c", "echo done"]);
        std::thread::scope(|s| {
            let spawner = s.spawn(|| {
                let mut slow = Vec::new();
                while !done.load(Ordering::SeqCst) {
                    if let Ok(c) = Command::new("sleep")
                        .arg("20")
                        .stdin(Stdio::null())
                        .stdout(Stdio::null())
                        .stderr(Stdio::null())
                        .spawn()
                    {
                        slow.push(c);
                    }
                }
                for mut c in slow {
                    let _ = c.kill();
                    let _ = c.wait();
                }
            });
            let outcomes: Vec<Outcome> = (0..30)
                .map(|_| {
                    let mut j = job(&quick, Duration::from_secs(5));
                    j.stdin = Vec::new();
                    run(j)
                })
                .collect();
            done.store(true, Ordering::SeqCst);
            spawner.join().unwrap();
            for o in outcomes {
                assert_eq!(
                    o,
                    Outcome::Passed {
                        output: "done".into()
                    }
                );
            }
        });
    }

    #[test]
    fn a_stopped_command_and_its_children_are_killed() {
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let a = argv(&["sh", "-c", "echo started; sleep 30 & sleep 30"]);
        let mut seen = 0;
        let flag = stop.clone();
        let mut f = |_: &str| {
            seen += 1;
            flag.store(true, Ordering::SeqCst);
        };
        let mut j = job(&a, Duration::from_secs(60));
        j.on_line = Some(&mut f);
        let started = Instant::now();
        let o = run_until(j, &stop);
        assert_eq!(
            o,
            Outcome::Failed {
                code: None,
                output: "started".into()
            }
        );
        assert_eq!(seen, 1);
        // Well before either sleep (or the timeout) could end.
        assert!(started.elapsed() < Duration::from_secs(20));
    }

    #[test]
    fn long_output_keeps_its_end() {
        let a = argv(&[
            "sh",
            "-c",
            "i=1; while [ $i -le 100 ]; do echo line $i; i=$((i+1)); done",
        ]);
        let o = run(job(&a, Duration::from_secs(20)));
        let t = o.output();
        assert!(t.starts_with("… 40 lines before\nline 41\n"), "{t}");
        assert!(t.ends_with("line 100"));
    }
}
