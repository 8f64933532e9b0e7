//! The runner's tests: real commands, real pipes and process groups.

use super::*;

fn job<'a>(argv: &'a [String], timeout: Duration) -> Job<'a> {
    Job {
        argv,
        cwd: std::env::temp_dir(),
        env: vec![("SPICE_T".into(), "v".into())],
        stdin: b"in".to_vec(),
        timeout,
        on_line: None,
        confine: None,
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

/// Whether `pid` is gone (or a zombie, which runs nothing).
fn gone(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit(')')
            .next()
            .is_some_and(|rest| rest.trim_start().starts_with('Z')),
    }
}

/// Waits (up to ten seconds) for the process whose id `pidfile` holds to be gone.
fn assert_ended(pidfile: &std::path::Path, what: &str) {
    let pid: i32 = std::fs::read_to_string(pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let until = Instant::now() + Duration::from_secs(10);
    while !gone(pid) && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(gone(pid), "the setsid child {pid} outlived {what}");
}

#[test]
fn regression_the_answer_is_read_at_exit_and_a_setsid_child_is_ended() {
    // Before: a judge that started a child under setsid (out of its process group)
    // holding stdout open had its "YES" reported as a timeout, and the child lived on.
    let d = tempfile::tempdir().unwrap();
    let pidfile = d.path().join("pid");
    let script = format!(
        "setsid sh -c 'echo $$ > {p}.tmp && mv {p}.tmp {p}; exec sleep 60' & \
         while [ ! -s {p} ]; do sleep 0.01; done; echo YES",
        p = pidfile.display()
    );
    let a = argv(&["sh", "-c", &script]);
    let started = Instant::now();
    let o = run(job(&a, Duration::from_secs(30)));
    assert_eq!(
        o,
        Outcome::Passed {
            output: "YES".into()
        }
    );
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "{:?}",
        started.elapsed()
    );
    assert_ended(&pidfile, "its command");
}

#[test]
fn a_setsid_child_is_ended_at_the_timeout_too() {
    let d = tempfile::tempdir().unwrap();
    let pidfile = d.path().join("pid");
    let script = format!(
        "setsid sh -c 'echo $$ > {p}.tmp && mv {p}.tmp {p}; exec sleep 60' </dev/null >/dev/null 2>&1 & \
         while [ ! -s {p} ]; do sleep 0.01; done; echo started; sleep 60",
        p = pidfile.display()
    );
    let a = argv(&["sh", "-c", &script]);
    let o = run(job(&a, Duration::from_millis(1500)));
    assert!(matches!(o, Outcome::TimedOut { .. }), "{o:?}");
    assert_ended(&pidfile, "the timeout");
}

#[test]
fn regression_one_huge_line_costs_a_bounded_amount() {
    // Before: a judge printing one 100 MB line took 411 MiB.
    let a = argv(&[
        "sh",
        "-c",
        "head -c 20000000 /dev/zero | tr '\\0' x; echo; echo after",
    ]);
    let o = run(job(&a, Duration::from_secs(60)));
    let out = o.output();
    assert!(o.passed(), "{}", &out[..out.len().min(200)]);
    assert!(out.len() < 2 * ending::MAX_LINE, "{} bytes kept", out.len());
    assert!(
        out.contains("(line cut: 20000000 bytes)"),
        "{}",
        &out[out.len() - 100..]
    );
    assert!(out.ends_with("after"));
}
