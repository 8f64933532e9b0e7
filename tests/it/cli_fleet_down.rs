//! `spice fleet down` against a supervisor lock held by this test: a holder that has
//! not written its pid yet (a supervisor in its first instant) is waited for, never
//! reported as "no supervisor running" with nothing signalled.

use crate::common;
use common::TestEnv;
use std::io::Write;
use std::process::Stdio;

/// Takes the supervisor lock of `env` the way a starting supervisor does: the file
/// exists, is locked, and is still empty.
fn hold_empty_lock(env: &TestEnv) -> nix::fcntl::Flock<std::fs::File> {
    std::fs::create_dir_all(&env.home).unwrap();
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(env.home.join("supervisor.pid"))
        .unwrap();
    nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusiveNonblock)
        .map_err(|(_, e)| e)
        .unwrap()
}

/// Regression: with the pid file empty, `fleet down` printed "no supervisor running"
/// and exited 0, though a supervisor held the lock and went on running.
#[test]
fn regression_down_does_not_report_success_while_the_supervisor_is_starting() {
    let env = TestEnv::new();
    let _lock = hold_empty_lock(&env);
    let run = env.run(&["fleet", "down", "--wait", "1s"]);
    let err = run.fails(1, "a supervisor is starting");
    assert!(err.contains("nothing signalled"), "{err}");
    assert!(
        !run.stdout.contains("no supervisor running"),
        "{}",
        run.stdout
    );
}

/// A pid written while `fleet down` waits is the process it stops.
#[test]
fn down_stops_the_supervisor_whose_pid_appears_while_it_waits() {
    let env = TestEnv::new();
    let mut lock = hold_empty_lock(&env);
    let down = env
        .cmd(&["fleet", "down", "--wait", "30s"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stand_in = std::process::Command::new("sleep")
        .arg("300")
        .spawn()
        .unwrap();
    let pid = stand_in.id();
    let start = spice::agent::start_time(pid).unwrap().expect("sleep runs");
    write!(lock, "{pid} {start}").unwrap();
    lock.flush().unwrap();
    // The stand-in ends on the SIGTERM; its "supervisor" then lets the lock go.
    let status = stand_in.wait().unwrap();
    drop(lock);
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(status.signal(), Some(nix::libc::SIGTERM), "{status:?}");
    let run = common::to_run(down.wait_with_output().unwrap());
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.stdout, format!("stopped the supervisor (pid {pid})\n"));
}
