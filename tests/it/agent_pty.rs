//! Agents under real PTYs (`spice::agent`): the asciicast recording, input and
//! bracketed paste, the process group and its stop, exit statuses, pid + start time,
//! and a reader that drains output nobody asks for.

use serde_json::Value;
use spice::agent::{
    group_members, proc_stat, signal_group_if_same, signal_if_same, Agent, ExitStatus, LaunchSpec,
    Signal, TAIL_BYTES,
};
use spice::clock::ManualClock;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Generous: a slow CI machine fails a test here instead of hanging it.
const LIMIT: Duration = Duration::from_secs(60);

fn spec(argv: &[&str], dir: &Path) -> LaunchSpec {
    let mut spec = LaunchSpec::new(argv.iter().copied(), dir);
    spec.env = vec![
        ("PATH".into(), "/usr/local/bin:/usr/bin:/bin".into()),
        ("HOME".into(), dir.display().to_string()),
        ("TERM".into(), "xterm-256color".into()),
        ("LANG".into(), "C.UTF-8".into()),
    ];
    spec
}

fn sh(script: &str, dir: &Path) -> LaunchSpec {
    spec(&["sh", "-c", script], dir)
}

fn tail_text(agent: &Agent) -> String {
    String::from_utf8_lossy(&agent.screen_tail()).into_owned()
}

/// Waits until the screen shows `needle`; returns the screen.
fn wait_for(agent: &Agent, needle: &str) -> String {
    let deadline = Instant::now() + LIMIT;
    loop {
        let text = tail_text(agent);
        if text.contains(needle) {
            return text;
        }
        assert!(
            Instant::now() < deadline,
            "{needle:?} never appeared; screen: {text:?}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn exit(agent: &mut Agent) -> ExitStatus {
    agent
        .wait_timeout(LIMIT)
        .unwrap()
        .unwrap_or_else(|| panic!("agent still running; screen: {:?}", tail_text(agent)))
}

/// Parses a recording: the header, then every `(time, kind, data)` event.
fn read_cast(path: &Path) -> (Value, Vec<(f64, String, String)>) {
    let text = std::fs::read_to_string(path).unwrap();
    let mut lines = text.lines();
    let header: Value = serde_json::from_str(lines.next().expect("a header line")).unwrap();
    let events = lines
        .map(|l| {
            let v: Value =
                serde_json::from_str(l).unwrap_or_else(|e| panic!("bad line {l:?}: {e}"));
            let a = v.as_array().expect("an event is an array");
            assert_eq!(a.len(), 3, "{l}");
            (
                a[0].as_f64().expect("a time"),
                a[1].as_str().unwrap().to_string(),
                a[2].as_str().unwrap().to_string(),
            )
        })
        .collect();
    (header, events)
}

fn output_of(events: &[(f64, String, String)]) -> String {
    events
        .iter()
        .filter(|(_, k, _)| k == "o")
        .map(|(_, _, d)| d.as_str())
        .collect()
}

/// Polls until no live process is left in group `pgid` (SIGKILL is not instant).
fn assert_group_empties(pgid: u32) {
    let deadline = Instant::now() + LIMIT;
    loop {
        let left = group_members(pgid).unwrap();
        if left.is_empty() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "still alive in group {pgid}: {left:?}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn gone(pid: u32) -> bool {
    proc_stat(pid).unwrap().is_none_or(|s| s.state == 'Z')
}

fn background_pid(screen: &str) -> u32 {
    let at = screen.find("bg:").expect("the script prints bg:PID") + 3;
    let digits: String = screen[at..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().unwrap()
}

/// Records a program whose output splits the euro sign's three bytes across two
/// writes, well apart; returns the recording.
fn record_split_characters(dir: &Path) -> PathBuf {
    let cast = dir.join("casts/agent.cast");
    let mut s = sh(
        r#"printf 'hello\nw\303\266rld\n\342\202'; sleep 0.3; printf '\254 done\n\377!'"#,
        dir,
    );
    s.cols = 100;
    s.rows = 30;
    s.recording = Some(cast.clone());
    let clock = ManualClock::new(1_700_000_000_123_456);
    let mut agent = Agent::spawn_with_clock(&s, &clock).unwrap();
    assert_eq!(exit(&mut agent), ExitStatus::Code(0));
    cast
}

#[test]
fn output_is_recorded_as_a_valid_asciicast_with_characters_split_across_reads() {
    let dir = tempfile::tempdir().unwrap();
    let cast = record_split_characters(dir.path());
    let (header, events) = read_cast(&cast);
    assert_eq!(header["version"], 2);
    assert_eq!(header["width"], 100);
    assert_eq!(header["height"], 30);
    assert_eq!(header["timestamp"], 1_700_000_000);
    assert_eq!(header["env"]["TERM"], "xterm-256color");
    assert!(events.windows(2).all(|w| w[0].0 <= w[1].0), "{events:?}");
    // The terminal turns \n into \r\n; the stray byte becomes U+FFFD.
    assert_eq!(output_of(&events), "hello\r\nwörld\r\n€ done\r\n\u{FFFD}!");
}

#[test]
#[ignore = "needs asciinema (installed by .ci/run)"]
fn the_recording_plays_back_in_asciinema() {
    let dir = tempfile::tempdir().unwrap();
    let cast = record_split_characters(dir.path());
    let found = std::process::Command::new("asciinema")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        found,
        "asciinema is not installed (apt-get install asciinema)"
    );
    // It wants a terminal.
    let play = format!("asciinema cat '{}'", cast.display());
    let mut player = Agent::spawn(&sh(&play, dir.path())).unwrap();
    assert_eq!(exit(&mut player), ExitStatus::Code(0));
    let screen = String::from_utf8_lossy(&player.screen_tail()).replace('\r', "");
    assert!(
        screen.contains("hello\nwörld\n€ done\n\u{FFFD}!"),
        "{screen:?}"
    );
}

#[test]
fn typed_input_reaches_the_program() {
    let dir = tempfile::tempdir().unwrap();
    let mut agent = Agent::spawn(&sh("read line; echo got:$line", dir.path())).unwrap();
    agent.write_input(b"hello there\r").unwrap();
    assert_eq!(exit(&mut agent), ExitStatus::Code(0));
    wait_for(&agent, "got:hello there");
}

#[test]
fn a_paste_arrives_bracketed_and_is_submitted_with_enter() {
    let dir = tempfile::tempdir().unwrap();
    // No echo, so only what `cat -v` received is on the screen.
    let script = r#"stty -echo; printf '\033[?2004h'; exec cat -v"#;
    let mut agent = Agent::spawn(&sh(script, dir.path())).unwrap();
    wait_for(&agent, "\x1b[?2004h");
    agent.paste("first line\nsecond line").unwrap();
    let screen = wait_for(&agent, "second line^[[201~\r\n");
    assert!(
        screen.contains("^[[200~first line\r\n"),
        "the paste starts with its marker: {screen:?}"
    );
    agent.stop(Duration::from_secs(5)).unwrap();
}

#[test]
fn stop_terminates_the_whole_process_group_including_a_grandchild() {
    let dir = tempfile::tempdir().unwrap();
    let mut agent = Agent::spawn(&sh("sleep 100 & echo bg:$!; sleep 100", dir.path())).unwrap();
    let pid = agent.pid();
    let grandchild = background_pid(&wait_for(&agent, "bg:"));
    assert_eq!(proc_stat(grandchild).unwrap().unwrap().pgrp, pid as i32);
    assert_eq!(agent.try_wait().unwrap(), None);

    let status = agent.stop(Duration::from_secs(10)).unwrap();
    assert_eq!(status, ExitStatus::Signal(Signal::SIGTERM as i32));
    assert_group_empties(pid);
    assert!(gone(grandchild));
}

#[test]
fn stop_escalates_to_sigkill_when_term_is_ignored() {
    let dir = tempfile::tempdir().unwrap();
    // Ignored signals are inherited: neither the shell nor its children die of TERM
    // (nor of the hang-up the kernel sends when the session leader goes).
    let script = r#"trap '' TERM HUP; sleep 100 & echo bg:$!; sleep 100"#;
    let mut agent = Agent::spawn(&sh(script, dir.path())).unwrap();
    let grandchild = background_pid(&wait_for(&agent, "bg:"));

    let status = agent.stop(Duration::from_millis(300)).unwrap();
    assert_eq!(status, ExitStatus::Signal(Signal::SIGKILL as i32));
    assert_group_empties(agent.pid());
    assert!(gone(grandchild));
}

#[test]
fn stop_kills_a_straggler_that_outlives_its_leader() {
    let dir = tempfile::tempdir().unwrap();
    let script = r#"sh -c "trap '' TERM HUP; echo bg:\$\$; exec sleep 100" & sleep 100"#;
    let mut agent = Agent::spawn(&sh(script, dir.path())).unwrap();
    let straggler = background_pid(&wait_for(&agent, "bg:"));

    let status = agent.stop(Duration::from_millis(300)).unwrap();
    assert_eq!(status, ExitStatus::Signal(Signal::SIGTERM as i32));
    assert_group_empties(agent.pid());
    assert!(gone(straggler));
}

#[test]
fn exit_codes_and_deaths_by_signal_are_reported() {
    let dir = tempfile::tempdir().unwrap();
    let mut a = Agent::spawn(&sh("exit 3", dir.path())).unwrap();
    assert_eq!(exit(&mut a), ExitStatus::Code(3));
    // Observing the exit does not change it, and stop after the end only reaps.
    assert_eq!(a.try_wait().unwrap(), Some(ExitStatus::Code(3)));
    assert_eq!(a.stop(Duration::ZERO).unwrap(), ExitStatus::Code(3));

    let mut b = Agent::spawn(&sh("kill -USR1 $$", dir.path())).unwrap();
    let st = exit(&mut b);
    assert_eq!(st, ExitStatus::Signal(Signal::SIGUSR1 as i32));
    assert_eq!(st.shell_code(), 128 + Signal::SIGUSR1 as i32);
}

#[test]
fn the_agent_leads_its_own_session_with_the_pty_as_controlling_terminal() {
    let dir = tempfile::tempdir().unwrap();
    let mut agent = Agent::spawn(&spec(&["sleep", "100"], dir.path())).unwrap();
    let pid = agent.pid();
    let st = proc_stat(pid).unwrap().unwrap();
    assert_eq!(st.session, pid as i32);
    assert_eq!(st.pgrp, pid as i32);
    assert_eq!(
        st.tpgid, pid as i32,
        "the agent is the terminal's foreground group"
    );
    assert_eq!(st.start_time, agent.start_time());
    assert_eq!(
        std::fs::read_link(format!("/proc/{pid}/cwd")).unwrap(),
        dir.path()
    );
    // Ctrl-C typed into the terminal reaches the foreground group as SIGINT.
    agent.write_input(b"\x03").unwrap();
    assert_eq!(exit(&mut agent), ExitStatus::Signal(Signal::SIGINT as i32));
}

#[test]
fn the_environment_is_exactly_the_spec_plus_the_shell_portable_pty_adds() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = spec(&["env"], dir.path());
    s.env.push(("SPICE_LANE".into(), "core".into()));
    let mut agent = Agent::spawn(&s).unwrap();
    assert_eq!(exit(&mut agent), ExitStatus::Code(0));
    let deadline = Instant::now() + LIMIT;
    while !agent.output_done() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    let text = tail_text(&agent);
    let mut got: Vec<&str> = text.lines().map(|l| l.trim_end_matches('\r')).collect();
    got.retain(|l| !l.starts_with("SHELL="));
    got.sort_unstable();
    let mut want: Vec<String> = s.env.iter().map(|(k, v)| format!("{k}={v}")).collect();
    want.sort_unstable();
    assert_eq!(got, want);
}

#[test]
fn signal_if_same_refuses_a_pid_whose_start_time_differs() {
    let dir = tempfile::tempdir().unwrap();
    let mut agent = Agent::spawn(&spec(&["sleep", "100"], dir.path())).unwrap();
    let (pid, start) = (agent.pid(), agent.start_time());

    assert!(!signal_if_same(pid, start + 1, Signal::SIGTERM).unwrap());
    assert!(!signal_group_if_same(pid, start - 1, Signal::SIGTERM).unwrap());
    assert_eq!(
        agent.try_wait().unwrap(),
        None,
        "a wrong start time signals nothing"
    );
    assert!(!signal_if_same(i32::MAX as u32, start, Signal::SIGTERM).unwrap());

    assert!(signal_if_same(pid, start, Signal::SIGTERM).unwrap());
    assert_eq!(exit(&mut agent), ExitStatus::Signal(Signal::SIGTERM as i32));
}

#[test]
fn signal_group_if_same_reaches_the_whole_group() {
    let dir = tempfile::tempdir().unwrap();
    let mut agent = Agent::spawn(&sh("sleep 100 & echo bg:$!; sleep 100", dir.path())).unwrap();
    let grandchild = background_pid(&wait_for(&agent, "bg:"));
    assert!(signal_group_if_same(agent.pid(), agent.start_time(), Signal::SIGKILL).unwrap());
    assert_eq!(exit(&mut agent), ExitStatus::Signal(Signal::SIGKILL as i32));
    assert_group_empties(agent.pid());
    assert!(gone(grandchild));
}

#[test]
fn resizing_reaches_the_program_and_the_recording() {
    let dir = tempfile::tempdir().unwrap();
    let cast = dir.path().join("resize.cast");
    let mut s = sh("read x; stty size", dir.path());
    s.recording = Some(cast.clone());
    let mut agent = Agent::spawn(&s).unwrap();
    agent.resize(120, 40).unwrap();
    agent.write_input(b"\r").unwrap();
    assert_eq!(exit(&mut agent), ExitStatus::Code(0));
    drop(agent);
    let (_, events) = read_cast(&cast);
    assert!(
        events.iter().any(|(_, k, d)| k == "r" && d == "120x40"),
        "{events:?}"
    );
    assert!(output_of(&events).contains("40 120"), "{events:?}");
}

#[test]
fn eight_megabytes_nobody_reads_do_not_block_the_agent() {
    let dir = tempfile::tempdir().unwrap();
    let cast = dir.path().join("big.cast");
    let mut s = sh(
        r#"head -c 8388608 /dev/zero | tr '\0' x; echo; echo end"#,
        dir.path(),
    );
    s.recording = Some(cast.clone());
    let mut agent = Agent::spawn(&s).unwrap();
    assert_eq!(exit(&mut agent), ExitStatus::Code(0));
    drop(agent);
    let (_, events) = read_cast(&cast);
    let out = output_of(&events);
    assert_eq!(out.len(), 8_388_608 + "\r\nend\r\n".len());
    assert!(out.ends_with("xxx\r\nend\r\n"));
    assert!(out.bytes().take(8_388_608).all(|b| b == b'x'));
}

#[test]
fn the_screen_tail_is_bounded_and_holds_the_latest_output() {
    let dir = tempfile::tempdir().unwrap();
    let mut agent = Agent::spawn(&sh("seq 1 100000", dir.path())).unwrap();
    assert_eq!(exit(&mut agent), ExitStatus::Code(0));
    let tail = wait_for(&agent, "99999\r\n100000\r\n");
    assert!(tail.ends_with("100000\r\n"));
    assert!(agent.screen_tail().len() <= TAIL_BYTES);
}

#[test]
fn a_missing_program_or_directory_is_refused_and_leaves_no_recording() {
    let dir = tempfile::tempdir().unwrap();
    let cast = dir.path().join("never.cast");
    let mut s = spec(&["no-such-agent-binary"], dir.path());
    s.recording = Some(cast.clone());
    let err = Agent::spawn(&s).err().expect("spawn fails").to_string();
    assert!(err.contains("no-such-agent-binary"), "{err}");
    assert!(!err.contains('\n'), "one line: {err}");
    assert!(!cast.exists());

    let s = spec(&["true"], &dir.path().join("missing"));
    let err = Agent::spawn(&s).err().expect("spawn fails").to_string();
    assert!(err.contains("not a directory"), "{err}");
}
