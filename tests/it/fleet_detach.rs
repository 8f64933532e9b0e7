//! A supervisor that runs for days, through the real binary: `spice fleet up --detach`
//! returns once its lanes started, in a session of its own; a supervisor survives
//! SIGHUP (its terminal closing), detached or in the foreground; `spice fleet logs`
//! prints the fleet's log and `-f LANE` follows it; `spice fleet down` ends it.

use crate::common;
use common::{stays, wait_for, TestEnv};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use std::io::BufRead;
use std::process::Stdio;
use std::sync::mpsc;
use std::time::Duration;

/// A repository whose one lane, `a`, runs the built-in demo profile, and a task whose
/// agent waits for the operator's go-ahead (so the lane stays up, waiting).
fn setup() -> (TestEnv, String) {
    let env = TestEnv::with_lanes(&[("a", "profile = \"demo\"\nphases = [\"todo\"]\n")]);
    let task = env.add(&[
        "Wait for me",
        "--project",
        "demo",
        "--body",
        spice::demo::WAIT_MARKER,
    ]);
    (env, task)
}

/// `fleet logs LANE` for a lane no lane file defines is refused in one line naming it
/// and the lanes there are, as `fleet attach` refuses it; it used to print nothing
/// and succeed, which reads as a quiet lane.
#[test]
fn fleet_logs_refuses_an_unknown_lane() {
    let env = TestEnv::with_lanes(&[("a", "profile = \"demo\"\n"), ("b", "profile = \"demo\"\n")]);
    for args in [
        &["fleet", "logs", "zzz"][..],
        &["fleet", "logs", "-f", "zzz"],
    ] {
        let err = env.run(args).fails(2, "unknown lane 'zzz'");
        assert!(
            err.contains("/lanes/zzz.toml defines it (the lanes are a, b)"),
            "{args:?}: {err}"
        );
    }
    // A lane that exists gets the log's own answer: none written yet.
    env.run(&["fleet", "logs", "a"])
        .fails(2, "no fleet log yet at ");
}

/// A detached supervisor that never outlives the test: `fleet down` when dropped,
/// and every process of the state directory killed if the test failed.
struct Detached<'a> {
    env: &'a TestEnv,
    pid: u32,
}

impl Drop for Detached<'_> {
    fn drop(&mut self) {
        let _ = self.env.cmd(&["fleet", "down", "--wait", "20s"]).output();
        if std::thread::panicking() {
            for (pid, _) in common::procs::processes_of(&self.env.home) {
                let _ = kill(Pid::from_raw(pid as i32), Signal::SIGKILL);
            }
        }
    }
}

/// `spice fleet up --detach ARGS…` with the agents' HOME, as `env.fleet_up` gives it.
fn detach<'a>(env: &'a TestEnv, args: &[&str]) -> (common::Run, Option<Detached<'a>>) {
    let mut a = vec!["fleet", "up", "--detach"];
    a.extend_from_slice(args);
    let run = common::to_run(env.cmd(&a).env("HOME", env.agent_home()).output().unwrap());
    let pid = run
        .stdout
        .split("(pid ")
        .nth(1)
        .and_then(|r| r.split(')').next())
        .and_then(|p| p.parse().ok());
    (run, pid.map(|pid| Detached { env, pid }))
}

fn alive(pid: u32) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let state = stat
        .rsplit(')')
        .next()
        .and_then(|r| r.split_whitespace().next());
    state.is_some_and(|s| s != "Z")
}

/// The session id of a process (field 6 of its stat).
fn session_of(pid: u32) -> i64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .unwrap()
        .1
        .split_whitespace()
        .collect();
    fields[3].parse().unwrap()
}

#[test]
fn detach_returns_with_the_lanes_started_and_the_supervisor_outlives_a_hangup() {
    let (env, task) = setup();
    let (run, sup) = detach(&env, &[]);
    let out = run.ok().to_string();
    let sup = sup.unwrap_or_else(|| panic!("no pid in {out}"));
    assert!(out.contains("lane a: started"), "{out}");
    assert!(out.contains("spice fleet logs -f"), "{out}");
    assert!(out.contains("spice fleet down"), "{out}");
    assert_eq!(
        env.run(&["fleet", "status", "--json"]).json()["supervisor_pid"],
        sup.pid,
        "the pid printed is the supervisor's"
    );
    // A session of its own: no terminal's hangup reaches it.
    assert_eq!(session_of(sup.pid), sup.pid as i64);
    assert_ne!(session_of(sup.pid), session_of(std::process::id()));
    // A second one is refused, naming the first.
    let again = detach(&env, &[]).0;
    again.fails(
        3,
        &format!("a supervisor already runs here (pid {})", sup.pid),
    );
    // SIGHUP (a `kill -HUP`, as a terminal's hangup would send) does not end it.
    kill(Pid::from_raw(sup.pid as i32), Signal::SIGHUP).unwrap();
    stays("the supervisor runs on after SIGHUP", 2, || {
        alive(sup.pid)
            .then_some(())
            .ok_or_else(|| "it ended".to_string())
    });
    wait_for("the agent to wait for input", 30, || {
        (env.lane("a")["state"] == "waiting").then_some(())
    });
    // Its lane events are in the fleet's log, drawn as `fleet up` draws them.
    let logs = env.run(&["fleet", "logs"]).ok().to_string();
    let handle = format!("demo-{task}");
    for event in ["claimed", "launched"] {
        assert!(
            logs.lines()
                .any(|l| l.contains(" a ") && l.contains(event) && l.contains(&handle)),
            "no {event} line in\n{logs}"
        );
    }
    let json = env
        .run(&["fleet", "logs", "a", "--json", "-n", "1"])
        .ok()
        .to_string();
    let last: serde_json::Value = serde_json::from_str(json.trim()).unwrap();
    assert_eq!(last["lane"], "a", "{json}");
    env.run(&["fleet", "logs", "b"])
        .fails(2, "unknown lane 'b': no ");

    // `fleet logs -f a` prints what is logged from now on: the steering typed into
    // the waiting agent.
    let mut follower = env
        .cmd(&["fleet", "logs", "-f", "a"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, rx) = mpsc::channel();
    let stdout = follower.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines() {
            if tx.send(line.unwrap_or_default()).is_err() {
                break;
            }
        }
    });
    let first = rx.recv_timeout(Duration::from_secs(10)).unwrap();
    assert!(first.contains(" a "), "{first}");
    env.run(&["steer", "lane:a", "go ahead"]).ok();
    let delivered = wait_for("the delivery in the followed log", 30, || {
        rx.try_iter()
            .find(|l| l.contains("delivered") || l.contains("acked"))
    });
    assert!(delivered.contains(&handle), "{delivered}");
    let _ = follower.kill();
    let _ = follower.wait();

    // `fleet down` ends it.
    let down = env.run(&["fleet", "down"]).ok().to_string();
    assert!(
        down.contains(&format!("stopped the supervisor (pid {})", sup.pid)),
        "{down}"
    );
    wait_for("the supervisor to be gone", 10, || {
        (!alive(sup.pid)).then_some(())
    });
}

/// A foreground supervisor whose terminal closes (SIGHUP) runs on, printing to
/// `<state>/logs/supervisor.out`, until `fleet down`; it used to die at once.
#[test]
fn a_foreground_supervisor_survives_its_terminal_closing() {
    let (env, _) = setup();
    let mut sup = env.fleet_up(&[]);
    wait_for("the agent to wait for input", 30, || {
        (env.lane("a")["state"] == "waiting").then_some(())
    });
    kill(Pid::from_raw(sup.id() as i32), Signal::SIGHUP).unwrap();
    stays("the supervisor runs on after SIGHUP", 2, || {
        match sup.try_wait() {
            Ok(None) => Ok(()),
            other => Err(format!("it ended: {other:?}")),
        }
    });
    assert_eq!(env.lane("a")["state"], "waiting");
    env.run(&["fleet", "down"]).ok();
    let run = sup.finished();
    // What it printed after the hangup went to the file, not the closed terminal.
    assert!(!run.stdout.contains("a: claimed"), "{}", run.stdout);
    let out = std::fs::read_to_string(env.home.join("logs/supervisor.out")).unwrap();
    assert!(out.contains("a: claimed"), "{out}");
}

/// A supervisor that fails before its lanes start: `--detach` shows what it printed
/// and exits with its code.
#[test]
fn detach_reports_a_supervisor_that_could_not_start() {
    let (env, _) = setup();
    std::fs::write(
        env.repo.join("spice.toml"),
        "[hooks]\nnot_a_hook = \"true\"\n",
    )
    .unwrap();
    common::git(&env.repo, &["add", "spice.toml"]);
    common::git(&env.repo, &["commit", "-q", "-m", "bad hooks"]);
    let (run, sup) = detach(&env, &[]);
    assert_eq!(run.code, 2, "{}\n{}", run.stdout, run.stderr);
    assert!(sup.is_none(), "{}", run.stdout);
    assert!(run.stderr.contains("not_a_hook"), "{}", run.stderr);
    assert!(
        run.stderr.contains("the supervisor exited"),
        "{}",
        run.stderr
    );
    assert!(env.run(&["fleet", "status", "--json"]).json()["supervisor_pid"].is_null());
}
