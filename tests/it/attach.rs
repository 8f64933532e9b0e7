//! `spice fleet attach` through the real binary: the operator's client, itself under a
//! PTY, attached to a lane of the built-in `demo` profile. Covers typing, resizing and
//! detaching, following the lane from session to session until the fleet is down, what
//! an attached client costs the supervisor (nothing while the agent is quiet), and what
//! the demo agent shows on its terminal and in its recording.

use crate::common;
use common::{wait_for, Supervisor, TestEnv};
use spice::agent::{Agent, ExitStatus, LaunchSpec};
use std::time::{Duration, Instant};

/// A repository whose one lane, `a`, runs the built-in demo profile.
fn setup() -> TestEnv {
    TestEnv::with_lanes(&[("a", "profile = \"demo\"\nphases = [\"todo\"]\n")])
}

/// A task whose demo agent waits for the operator before it starts, and the
/// supervisor running it until nothing is left; returns once lane `a` waits for input.
fn waiting_lane(env: &TestEnv) -> (String, Supervisor, serde_json::Value) {
    let task = env.add(&[
        "Wait for me",
        "--project",
        "demo",
        "--body",
        spice::demo::WAIT_MARKER,
    ]);
    let sup = env.fleet_up(&["--until-idle", "--json"]);
    let lane = wait_for("the agent to wait for input", 30, || {
        let l = env.lane("a");
        (l["state"] == "waiting").then_some(l)
    });
    (task, sup, lane)
}

/// `spice fleet attach a` under a PTY of its own, as an operator's terminal runs it;
/// returns once its banner is on screen.
fn attach(env: &TestEnv) -> Agent {
    let client = Agent::spawn(&LaunchSpec {
        argv: vec![
            common::bin().display().to_string(),
            "fleet".into(),
            "attach".into(),
            "a".into(),
        ],
        cwd: env.repo.clone(),
        env: vec![
            ("PATH".into(), std::env::var("PATH").unwrap_or_default()),
            ("HOME".into(), env.dir.path().display().to_string()),
            ("SPICE_HOME".into(), env.home.display().to_string()),
            ("TERM".into(), "xterm".into()),
        ],
        cols: 100,
        rows: 30,
        recording: None,
    })
    .unwrap();
    wait_for("the attach banner", 10, || {
        screen(&client).contains("attached to lane a").then_some(())
    });
    client
}

fn screen(a: &Agent) -> String {
    String::from_utf8_lossy(&a.screen_tail()).to_string()
}

/// Ctrl-] and the client's exit; its last words reach its screen just after it exits.
fn detach(client: Agent) {
    leave(client, &["detached from lane a"]);
}

/// Ctrl-] and the client's exit, saying one of `last` (its last words reach its
/// screen just after it exits); a client that already ended by itself is not typed to.
fn leave(mut client: Agent, last: &[&str]) {
    if client.try_wait().ok().flatten().is_none() {
        let _ = client.write_input(&[0x1d]);
    }
    assert_eq!(
        client.wait_timeout(Duration::from_secs(10)).unwrap(),
        Some(ExitStatus::Code(0))
    );
    let said = |s: &str| last.iter().any(|l| s.contains(l));
    let deadline = Instant::now() + Duration::from_secs(5);
    while !said(&screen(&client)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(said(&screen(&client)), "{}", screen(&client));
}

/// The CPU time (user + system, every thread) a process has used so far.
fn cpu_time(pid: u32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // The command name may hold spaces; the fields after it start at the state (3),
    // so utime (14) and stime (15) are the 12th and 13th.
    let fields: Vec<u64> = stat
        .rsplit_once(')')
        .unwrap()
        .1
        .split_whitespace()
        .skip(1)
        .map(|f| f.parse().unwrap_or(0))
        .collect();
    // SAFETY: sysconf only reads a constant of the system.
    let hz = unsafe { nix::libc::sysconf(nix::libc::_SC_CLK_TCK) } as f64;
    Duration::from_secs_f64((fields[10] + fields[11]) as f64 / hz)
}

/// The lane's asciicast: every output event's text, joined.
fn recorded_output(lane: &serde_json::Value) -> String {
    let cast = std::fs::read_to_string(lane["recording"].as_str().unwrap()).unwrap();
    cast.lines()
        .skip(1)
        .filter_map(|l| serde_json::from_str::<(f64, String, String)>(l).ok())
        .filter(|(_, kind, _)| kind == "o")
        .map(|(_, _, text)| text)
        .collect()
}

/// The operator attaches a terminal to a lane's agent: sees its screen, types a
/// message it acts on, resizes (recorded in the lane's asciicast), and detaches with
/// Ctrl-], leaving the agent running.
#[test]
fn the_operator_attaches_types_resizes_and_detaches() {
    let env = setup();
    let (task, sup, waiting) = waiting_lane(&env);
    let client = attach(&env);
    let cast = waiting["recording"].as_str().unwrap().to_string();
    client.resize(90, 20).unwrap();
    // The client polls its size and passes a change on; the agent's PTY records it.
    wait_for("the resize in the recording", 10, || {
        std::fs::read_to_string(&cast)
            .unwrap()
            .contains(r#""r","90x20""#)
            .then_some(())
    });
    client.write_input(b"go ahead\r").unwrap();
    // The agent's terminal echoes what was typed, through the attached client.
    wait_for("the echo of the typed message", 10, || {
        screen(&client).contains("go ahead").then_some(())
    });
    detach(client);
    // The agent kept running and acted on the message: the task is done.
    sup.finished();
    let show = env.run(&["task", "show", &task, "--json"]).json();
    assert_eq!(show["phase"], "review", "{show}");
    // Without a supervisor there is nothing to attach to.
    let r = env
        .cmd(&["fleet", "attach", "a"])
        .output()
        .map(common::to_run)
        .unwrap();
    r.fails(2, "is `spice fleet up` running?");
}

/// A client attached to a session that ends sees it end at once, though the fleet
/// goes on (the terminal's reader shuts the client's socket down, where it used to
/// drop only its own descriptor and leave the client attached to nothing until the
/// supervisor stopped), and follows the lane into its next task's session; it ends
/// when the fleet is down, where it used to end with the first session.
#[test]
fn an_attached_client_follows_its_lane_to_the_next_task_until_the_fleet_is_down() {
    let env = setup();
    let (_, mut sup, _) = waiting_lane(&env);
    let next = env.add(&["Next", "--project", "demo"]);
    let mut client = attach(&env);
    client.write_input(b"go ahead\r").unwrap();
    wait_for("the end of the first session on the client", 60, || {
        screen(&client)
            .contains("the session on lane a ended")
            .then_some(())
    });
    let still = sup.try_wait().unwrap();
    assert!(still.is_none(), "the supervisor ended first: {still:?}");
    wait_for("the next task's session on the client", 60, || {
        let s = screen(&client);
        (s.contains("lane a switched to session") && s.contains(&format!("task demo-{next}")))
            .then_some(())
    });
    sup.finished();
    let ended = client.wait_timeout(Duration::from_secs(30)).unwrap();
    assert_eq!(ended, Some(ExitStatus::Code(0)), "{}", screen(&client));
    wait_for("the client's last words", 5, || {
        screen(&client)
            .contains("the fleet is down; stopped following lane a")
            .then_some(())
    });
    let show = env.run(&["task", "show", &next, "--json"]).json();
    assert_eq!(show["phase"], "review", "{show}");
}

/// `fleet attach` follows its lane into a successor session: the agent is killed, the
/// lane starts a successor on the same claim, and the client says in one line which
/// session it switched to and shows that session's screen (the resumed agent's).
#[test]
fn an_attached_client_follows_its_lane_into_the_successor_session() {
    let env = setup();
    let (task, sup, waiting) = waiting_lane(&env);
    let first = waiting["session"].as_str().unwrap().to_string();
    let mut client = attach(&env);
    // The agent dies as a crash ends it: its whole process group, at once.
    let pid = waiting["pid"].as_u64().unwrap() as i32;
    nix::sys::signal::killpg(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    let successor = wait_for("the successor session in the store", 30, || {
        let l = env.lane("a");
        let s = l["session"].as_str()?.to_string();
        (s != first).then_some(s)
    });
    wait_for(
        "the switch and the successor's screen on the client",
        30,
        || {
            let s = screen(&client);
            (s.contains(&format!("the session on lane a ended ({first})"))
                && s.contains(&format!("lane a switched to session {successor}"))
                && s.contains("Continue where you left off."))
            .then_some(())
        },
    );
    // The successor finishes the task; the fleet (--until-idle) ends, and so does the
    // client, by itself.
    sup.finished();
    let ended = client.wait_timeout(Duration::from_secs(30)).unwrap();
    assert_eq!(ended, Some(ExitStatus::Code(0)), "{}", screen(&client));
    let show = env.run(&["task", "show", &task, "--json"]).json();
    assert_eq!(show["phase"], "review", "{show}");
    let launches = env.ledger_of(&task, "launched");
    assert_eq!(launches.len(), 2, "{show}");
    assert_eq!(launches[1]["actor"], successor.as_str());
}

/// Defect 8: with a client attached, the supervisor's attach thread spun on a
/// non-blocking socket (`recvfrom` returning EAGAIN, about 70% of a core) while the
/// agent was quiet. A quiet attached agent must cost about what a detached one does:
/// the lane's 250 ms ticks, well under a tenth of a core even in a debug build.
#[test]
fn regression_attached_client_of_a_quiet_agent_does_not_spin_the_supervisor() {
    let env = setup();
    let (task, sup, _) = waiting_lane(&env);
    let client = attach(&env);
    // A measurement window, not a wait for a condition: CPU time over wall time.
    let window = Duration::from_secs(3);
    let (cpu0, t0) = (cpu_time(sup.id()), Instant::now());
    std::thread::sleep(window);
    let (cpu, wall) = (cpu_time(sup.id()) - cpu0, t0.elapsed());
    assert_eq!(env.lane("a")["state"], "waiting", "the agent stayed quiet");
    let share = cpu.as_secs_f64() / wall.as_secs_f64();
    eprintln!("supervisor CPU with a client attached to a quiet agent: {cpu:?} in {wall:?}");
    assert!(
        share < 0.10,
        "the supervisor used {:.0}% of a core with a client attached to a quiet agent",
        share * 100.0
    );
    // Still attached and served: what is typed reaches the agent, which finishes.
    client.write_input(b"go ahead\r").unwrap();
    wait_for("the agent to finish its task", 30, || {
        let show = env.run(&["task", "show", &task, "--json"]).json();
        (show["phase"] == "review").then_some(())
    });
    detach(client);
    sup.finished();
}

/// Defect 9: the demo agent wrote nothing to its terminal, so its recording was a bare
/// header and an attached client saw only the banner. It shows the task it took, each
/// command and its output, the steering it saw and its ACK, the commit and the phase.
#[test]
fn regression_a_demo_agent_shows_its_work_on_its_terminal_and_in_its_recording() {
    let env = setup();
    let (task, sup, lane) = waiting_lane(&env);
    let client = attach(&env);
    // What the agent showed before the client attached comes first.
    wait_for("the agent's screen beyond the banner", 10, || {
        let s = screen(&client);
        (s.contains(&format!("task demo-{task}")) && s.contains("go-ahead")).then_some(())
    });
    client.write_input(b"go ahead\r").unwrap();
    // Steering sent while its first command runs is on that command's output.
    wait_for("the first command on the attached screen", 30, || {
        screen(&client)
            .contains("$ git status --short")
            .then_some(())
    });
    let key = env
        .run(&["steer", "lane:a", "keep it short"])
        .ok()
        .trim()
        .to_string();
    wait_for("the ACK on the attached screen", 30, || {
        screen(&client)
            .contains(&format!("ACK {key}: "))
            .then_some(())
    });
    wait_for("the end of the task on the attached screen", 30, || {
        screen(&client).contains("phase is complete").then_some(())
    });
    // The lane ends the session once the agent's turn after its phase is over: the
    // client may see that before its Ctrl-] (the clean-clone CI run did).
    leave(
        client,
        &["detached from lane a", "the session on lane a ended"],
    );
    sup.finished();
    let shown = recorded_output(&lane);
    for line in [
        format!("task demo-{task}"),
        "$ git status --short".to_string(),
        format!("ACK {key}: "),
        "git commit -m 'demo: ".to_string(),
        format!("demo: {task}"),
        format!("task phase {task} --done"),
        "phase is complete".to_string(),
    ] {
        assert!(
            shown.contains(&line),
            "{line:?} not in the recording:\n{shown}"
        );
    }
}
