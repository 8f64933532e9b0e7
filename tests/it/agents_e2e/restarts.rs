//! Real agents across supervisor restarts: one task, three sessions of one
//! conversation. The first two sessions are each stopped in the middle of a long
//! command by stopping their supervisor (SIGKILL, or a clean `fleet down`); the next
//! `fleet up` continues the claim with a successor that resumes the conversation, and
//! the third session completes the phase.
//!
//! Regression for "a restarted supervisor forgets what its lanes were doing": `fleet
//! up` wrote each lane's row before reading the previous one, so the conversation id,
//! transcript and lineage were gone at every start. Codex was resumed with spice's own
//! session id ("No saved session found"), Claude Code after a second restart with the
//! second session's ("No conversation found"), and each lane was held after three
//! deaths.
//!
//! The mock scripts each session by the number of briefs its conversation holds
//! (`Mock::start_per_brief`), so a resumed conversation that lost its history would
//! take the wrong step, and a request an agent makes while it is being killed takes
//! no later session's step.

use super::common::procs::{fleet_processes, kill9};
use super::{mock, screen_tail, Agent, Fleet, Mode};
use mock::{Logged, Mock, Step};
use std::time::{Duration, Instant};

/// What the first session runs when its supervisor goes.
/// (None starts with `sleep`: Qwen Code refuses `sleep N` followed by more.)
const FIRST: &str = "echo first; sleep 120; echo never-first";
/// What the second session runs when its supervisor goes.
const SECOND: &str = "echo second; sleep 121; echo never-second";
/// The third session's reply once its phase is done.
const FINISHED: &str = "The phase is done.";

/// How the supervisor goes between sessions.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Restart {
    /// SIGKILL to `spice fleet up`: the shims end their agents.
    Kill,
    /// `spice fleet down`: the supervisor stops its agents and exits.
    Down,
}

/// Whether `pid` names a live (not zombie) process.
fn alive(pid: i32) -> bool {
    stat(pid).is_some_and(|(state, _)| state != "Z")
}

/// A process's state and start time (`/proc/PID/stat` fields 3 and 22).
fn stat(pid: i32) -> Option<(String, u64)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let fields: Vec<&str> = text.rsplit_once(')')?.1.split_whitespace().collect();
    Some((fields.first()?.to_string(), fields.get(19)?.parse().ok()?))
}

/// Processes a test stopped (SIGSTOP): killed when it ends, however it ends, unless
/// their pids now name other processes.
struct Stopped(Vec<(i32, u64)>);

impl Stopped {
    fn new(pids: &[i32]) -> Stopped {
        Stopped(
            pids.iter()
                .filter_map(|p| stat(*p).map(|(_, start)| (*p, start)))
                .collect(),
        )
    }
}

impl Drop for Stopped {
    fn drop(&mut self) {
        for (pid, start) in &self.0 {
            if stat(*pid).is_some_and(|(_, s)| s == *start) {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(*pid),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
        }
    }
}

impl Fleet {
    /// SIGKILL to the supervisor, reaped.
    fn kill_supervisor(&mut self) {
        let (mut child, _) = self.up.take().expect("fleet up is running");
        kill9(&mut child);
    }

    /// Waits until nothing of the stopped fleet runs: no process with its state
    /// directory in its environment or its cwd under it, and none of `pids`.
    fn wait_gone(&self, pids: &[i32], after: Instant) -> Duration {
        let alive = |pid: i32| {
            std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
                s.rsplit(')')
                    .next()
                    .and_then(|r| r.split_whitespace().next())
                    != Some("Z")
            })
        };
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            let left = fleet_processes(&self.env);
            let recorded: Vec<i32> = pids.iter().copied().filter(|p| alive(*p)).collect();
            if left.is_empty() && recorded.is_empty() {
                return after.elapsed();
            }
            assert!(
                Instant::now() < deadline,
                "processes of the stopped fleet still run 15s later: {left:?}; recorded pids alive: {recorded:?}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The first turn request of the conversation's `n`-th session (one holding `n`
    /// briefs). Fails at once, saying why, if the lane is held meanwhile.
    fn wait_session(&self, n: usize, task: &str, secs: u64) -> Logged {
        let deadline = Instant::now() + Duration::from_secs(secs);
        let mut checked = Instant::now();
        loop {
            let found = self
                .mock
                .turns()
                .into_iter()
                .find(|l| mock::briefs(&l.body).len() == n);
            if let Some(l) = found {
                return l;
            }
            let late = Instant::now() >= deadline;
            if late || checked.elapsed() >= Duration::from_secs(1) {
                checked = Instant::now();
                let lane = self.lane();
                if late || lane["state"] == "held" {
                    panic!(
                        "{} waiting for session {n}'s first request; lane: {lane}\n{}\nmock:\n{}",
                        if late {
                            "timed out"
                        } else {
                            "the lane was held"
                        },
                        self.sessions_told(task),
                        self.mock.summary(),
                    );
                }
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Fleet {
    /// Each session launched on `task`: whether it resumed, which conversation, how it
    /// ended and the last words on its screen (for failure messages).
    fn sessions_told(&self, task: &str) -> String {
        let exits = self.env.ledger_of(task, "exited");
        self.env
            .ledger_of(task, "launched")
            .iter()
            .map(|l| {
                let how = exits
                    .iter()
                    .find(|e| e["actor"] == l["actor"])
                    .map_or("(running)".to_string(), |e| e["detail"]["how"].to_string());
                let screen = visible(&screen_tail(&l["detail"], 4000));
                let skip = screen.chars().count().saturating_sub(300);
                format!(
                    "  session {} resume={} conversation={} ended: {how}\n    screen ends: {}",
                    l["actor"],
                    l["detail"]["resume"],
                    l["detail"]["conversation"],
                    screen.chars().skip(skip).collect::<String>()
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// Terminal output (as `screen_tail` shows it, ESC as `␛`) without its control
/// sequences, runs of blanks made one space.
fn visible(screen: &str) -> String {
    let mut out = String::new();
    let mut chars = screen.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '␛' {
            out.push(if c.is_control() { ' ' } else { c });
            continue;
        }
        match chars.next() {
            Some('[') => while chars.next().is_some_and(|x| !('@'..='~').contains(&x)) {},
            Some(']') => while chars.next().is_some_and(|x| x != '\u{7}' && x != '␛') {},
            _ => {}
        }
    }
    out.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// One lane, one task, three sessions; between them the supervisor goes `how` while
/// the agent runs a long command, and `fleet up` starts again.
fn across_restarts(agent: Agent, mode: Mode, how: Restart) {
    let scripts = vec![
        vec![Step::Shell(FIRST.into())],
        vec![Step::Shell(SECOND.into())],
        vec![Step::Shell("{done}".into()), Step::Say(FINISHED.into())],
    ];
    let mut f = Fleet::with_mock(agent, mode, |l| Mock::start_per_brief(l, scripts));
    let what = match how {
        Restart::Kill => "supervisor kill -9",
        Restart::Down => "fleet down",
    };
    let task = f
        .env
        .add(&["Work across supervisor restarts", "--project", "demo"]);
    let handle = format!("demo-{task}");
    let worktree = f.worktrees().join(&handle).display().to_string();
    f.start();
    let mut sessions: Vec<String> = Vec::new();
    let mut stopped_at = Instant::now();
    for round in 0..3 {
        let first = f.wait_session(round + 1, &task, 60);
        // The conversation is the original one: every earlier session's brief, in
        // order, then this session's.
        let claimants = mock::briefs(&first.body);
        assert_eq!(
            claimants[..round],
            sessions[..],
            "session {}'s first request does not carry the earlier sessions' briefs",
            round + 1
        );
        let session = claimants[round].clone();
        if round == 0 {
            f.report("fleet up -> first model request", first.at - f.up_at());
        } else {
            f.report(
                &format!("{what} #{round} -> successor's first model request"),
                first.at - stopped_at,
            );
        }
        // The agent works in the claim's worktree (both name their cwd to the model).
        assert!(
            first.text().contains(&worktree),
            "session {}'s first request does not name the worktree {worktree}",
            round + 1
        );
        sessions.push(session.clone());
        if round == 2 {
            break;
        }
        // While the agent sleeps in its command, the lane row is steady.
        f.wait_command("sleep", 30);
        let lane = f.wait_lane("the session to hold the claim", 10, |l| {
            l["session"] == session.as_str() && l["claims"][0]["session"] == session.as_str()
        });
        assert_eq!(lane["claims"][0]["task"], handle.as_str(), "{lane}");
        assert_eq!(lane["claims"][0]["worktree"], worktree.as_str(), "{lane}");
        assert_eq!(
            lane["predecessors"],
            serde_json::json!(sessions[..round]),
            "session {} does not follow the earlier ones directly; lane: {lane}\n{}",
            round + 1,
            f.sessions_told(&task)
        );
        // Once the lane has found the session's transcript, its row names the
        // conversation (Codex's thread id is read from the rollout).
        f.wait_lane("the lane to find the transcript", 10, |l| {
            l["transcript"].is_string()
        });
        let shim = f.lane()["pid"].as_i64().expect("the lane records a pid") as i32;
        let agent_pid = f.agent_pid();
        stopped_at = Instant::now();
        match how {
            Restart::Kill => f.kill_supervisor(),
            Restart::Down => f.down(),
        }
        let gone = f.wait_gone(&[shim, agent_pid], stopped_at);
        f.report(
            &format!("{what} #{} -> no agent process left", round + 1),
            gone,
        );
        f.start();
    }

    // The third session completes the phase (the command its brief gives) and the
    // lane, with nothing else to do, goes idle.
    let lane = f.wait_lane("the phase to be done and the lane idle", 60, |l| {
        l["state"] == "idle" && l["claims"].as_array().is_some_and(|c| c.is_empty())
    });
    assert!(lane["hold"].is_null(), "{lane}");
    let show = f.env.run(&["task", "show", &task, "--json"]).json();
    assert_eq!(show["phase"], "review", "{show}");
    let done = f.env.ledger_of(&task, "phase_completed");
    assert_eq!(done.len(), 1, "{done:?}");
    assert_eq!(done[0]["actor"], sessions[2].as_str(), "{done:?}");
    assert!(
        f.mock
            .turns()
            .iter()
            .any(|l| l.reply == mock::Reply::Text(FINISHED.into())),
        "the agent never finished its turn:\n{}",
        f.mock.summary()
    );
    // The claim passed along the sessions by renewal (`renew --successor`), never
    // released and re-claimed, and the lane was never held.
    let passed: Vec<(String, String)> = f
        .env
        .ledger_of(&task, "successor")
        .iter()
        .map(|e| {
            (
                e["detail"]["from"].as_str().unwrap_or_default().to_string(),
                e["actor"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    let expected: Vec<(String, String)> = sessions
        .windows(2)
        .map(|w| (w[0].clone(), w[1].clone()))
        .collect();
    assert_eq!(passed, expected, "the claim's successions");
    assert_eq!(f.env.ledger_of(&task, "claimed").len(), 1);
    assert!(f.env.ledger_of(&task, "held").is_empty());
    // Each successor resumed the one conversation: the first session's id for Claude
    // Code, the thread id Codex gave its rollout.
    let launched = f.env.ledger_of(&task, "launched");
    let actors: Vec<&str> = launched
        .iter()
        .filter_map(|e| e["actor"].as_str())
        .collect();
    assert_eq!(actors, sessions, "one launch per session");
    let resumed: Vec<bool> = launched
        .iter()
        .map(|e| e["detail"]["resume"] == true)
        .collect();
    assert_eq!(resumed, [false, true, true], "{launched:?}");
    assert_eq!(
        launched[1]["detail"]["conversation"], launched[2]["detail"]["conversation"],
        "{launched:?}"
    );
    // Codex names its own thread; the others resume the id spice gave the first.
    if agent != Agent::Codex {
        assert_eq!(
            launched[2]["detail"]["conversation"],
            sessions[0].as_str(),
            "{launched:?}"
        );
    }
    f.down();
    f.report(&format!("across two {what}s, total"), f.started.elapsed());
}

/// The processes that run with `SPICE_SESSION=session` in their environment: a
/// session's agent and the commands it started.
fn session_processes(session: &str) -> Vec<(i32, String)> {
    let needle = format!("SPICE_SESSION={session}");
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| {
            let pid = e.file_name().to_str()?.parse::<i32>().ok()?;
            let environ = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
            let ours = environ.split(|b| *b == 0).any(|v| v == needle.as_bytes());
            let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
            (ours && alive(pid)).then(|| (pid, String::from_utf8_lossy(&cmd).replace('\0', " ")))
        })
        .collect()
}

/// A duplicate of the supervisor's PTY master for the lane's agent (`pidfd_getfd`), so
/// that the agent's terminal does not hang up when the supervisor dies: a hangup
/// sends SIGCONT with its SIGHUP, which would wake a stopped shim.
fn hold_terminal(supervisor: u32) -> std::os::fd::OwnedFd {
    use std::os::fd::FromRawFd;
    let fd = std::fs::read_dir(format!("/proc/{supervisor}/fd"))
        .unwrap()
        .flatten()
        .find(|e| {
            std::fs::read_link(e.path())
                .is_ok_and(|t| t.to_str().is_some_and(|t| t.ends_with("ptmx")))
        })
        .and_then(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .expect("the supervisor holds a PTY master");
    // SAFETY: two syscalls that take integers and return new descriptors (or -1),
    // each owned by exactly one OwnedFd.
    unsafe {
        let pidfd = nix::libc::syscall(nix::libc::SYS_pidfd_open, supervisor, 0) as i32;
        assert!(
            pidfd >= 0,
            "pidfd_open: {}",
            std::io::Error::last_os_error()
        );
        let pidfd = std::os::fd::OwnedFd::from_raw_fd(pidfd);
        use std::os::fd::AsRawFd;
        let dup = nix::libc::syscall(nix::libc::SYS_pidfd_getfd, pidfd.as_raw_fd(), fd, 0) as i32;
        assert!(dup >= 0, "pidfd_getfd: {}", std::io::Error::last_os_error());
        std::os::fd::OwnedFd::from_raw_fd(dup)
    }
}

/// The agent of a killed supervisor whose shim could not end it (the shim stopped,
/// as on a frozen machine) is ended by the next supervisor, from the pid and start
/// time the lane row recorded, before the successor starts; the successor still
/// resumes the conversation and completes the phase.
#[test]
#[ignore = "needs the real agent CLIs (npm install --no-save --prefix tests/agents)"]
fn codex_pty_agent_left_by_a_killed_supervisor_is_ended_by_the_next() {
    let scripts = vec![
        vec![Step::Shell(FIRST.into())],
        vec![Step::Shell("{done}".into()), Step::Say(FINISHED.into())],
    ];
    let mut f = Fleet::with_mock(Agent::Codex, Mode::Pty, |l| {
        Mock::start_per_brief(l, scripts)
    });
    let task = f.env.add(&["Outlive a stuck shim", "--project", "demo"]);
    f.start();
    let first = f.wait_session(1, &task, 60);
    let session = mock::briefs(&first.body)[0].clone();
    f.wait_command("sleep", 30);
    f.wait_lane("the lane to find the transcript", 10, |l| {
        l["transcript"].is_string()
    });
    let shim = f.lane()["pid"].as_i64().expect("the lane records a pid") as i32;
    let agent_pid = f.agent_pid();
    let mut left: Vec<i32> = session_processes(&session)
        .iter()
        .map(|(p, _)| *p)
        .collect();
    left.extend([shim, agent_pid]);
    let _cleanup = Stopped::new(&left);
    let _terminal = hold_terminal(f.up.as_ref().unwrap().0.id());
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(shim),
        nix::sys::signal::Signal::SIGSTOP,
    )
    .unwrap();
    f.kill_supervisor();
    // A stopped shim cannot act on its parent's death: only the next supervisor can
    // end what it runs.
    assert!(
        alive(shim) && alive(agent_pid),
        "the stuck agent ended by itself"
    );
    let restarted = Instant::now();
    f.start();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let still = session_processes(&session);
        if still.is_empty() && !alive(shim) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "20s after the restart, processes of the killed supervisor's session still run \
             (shim {shim} alive: {}, agent {agent_pid} alive: {}): {still:?}; lane: {}\n{}",
            alive(shim),
            alive(agent_pid),
            f.lane(),
            f.sessions_told(&task)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let gone = Instant::now();
    f.report(
        "kill -9 with the shim stopped -> the next supervisor ended its agent",
        gone - restarted,
    );
    let second = f.wait_session(2, &task, 60);
    assert!(
        gone <= second.at,
        "the successor asked the model before the old agent was gone"
    );
    assert_eq!(mock::briefs(&second.body)[0], session.as_str());
    let lane = f.wait_lane("the phase to be done and the lane idle", 60, |l| {
        l["state"] == "idle" && l["claims"].as_array().is_some_and(|c| c.is_empty())
    });
    assert!(lane["hold"].is_null(), "{lane}");
    let launched = f.env.ledger_of(&task, "launched");
    assert_eq!(launched.len(), 2, "one successor: {launched:?}");
    let done = f.env.ledger_of(&task, "phase_completed");
    assert_eq!(done.len(), 1, "{done:?}");
    f.down();
    f.report("stuck shim, total", f.started.elapsed());
}

#[test]
#[ignore = "needs the real agent CLIs (npm install --no-save --prefix tests/agents)"]
fn claude_pty_resumes_its_conversation_across_supervisor_kills() {
    across_restarts(Agent::Claude, Mode::Pty, Restart::Kill);
}

#[test]
#[ignore = "needs the real agent CLIs (npm install --no-save --prefix tests/agents)"]
fn claude_headless_resumes_its_conversation_across_supervisor_kills() {
    across_restarts(Agent::Claude, Mode::Headless, Restart::Kill);
}

#[test]
#[ignore = "needs the real agent CLIs (npm install --no-save --prefix tests/agents)"]
fn codex_pty_resumes_its_conversation_across_supervisor_kills() {
    across_restarts(Agent::Codex, Mode::Pty, Restart::Kill);
}

#[test]
#[ignore = "needs the real agent CLIs (npm install --no-save --prefix tests/agents)"]
fn codex_headless_resumes_its_conversation_across_supervisor_kills() {
    across_restarts(Agent::Codex, Mode::Headless, Restart::Kill);
}

#[test]
#[ignore = "needs the real agent CLIs (npm install --no-save --prefix tests/agents)"]
fn claude_pty_resumes_its_conversation_across_fleet_down_and_up() {
    across_restarts(Agent::Claude, Mode::Pty, Restart::Down);
}

#[test]
#[ignore = "needs the real agent CLIs (npm install --no-save --prefix tests/agents)"]
fn codex_pty_resumes_its_conversation_across_fleet_down_and_up() {
    across_restarts(Agent::Codex, Mode::Pty, Restart::Down);
}

#[test]
#[ignore = "needs the real agent CLIs (npm install --no-save --prefix tests/agents)"]
fn gemini_pty_resumes_its_conversation_across_supervisor_kills() {
    across_restarts(Agent::Gemini, Mode::Pty, Restart::Kill);
}

#[test]
#[ignore = "needs the real agent CLIs (npm install --no-save --prefix tests/agents)"]
fn qwen_pty_resumes_its_conversation_across_supervisor_kills() {
    across_restarts(Agent::Qwen, Mode::Pty, Restart::Kill);
}
