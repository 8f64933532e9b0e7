//! `spice exec` and the shell redirector: stdout byte-exact, exit codes and signals
//! kept, steering on stderr before, during and after the command.

use crate::common;
use common::TestEnv;
use std::io::Write;
use std::process::Stdio;

fn with_item(env: &TestEnv) -> String {
    env.run(&["steer", "--force", "lane:core", "please run the linter too"])
        .ok()
        .trim()
        .to_string()
}

#[test]
fn stdout_is_byte_exact_with_binary_data_through_pipes() {
    let env = TestEnv::new();
    let key = with_item(&env);
    let data: Vec<u8> = (0..=255u8).cycle().take(300_000).collect();
    let mut child = env
        .cmd(&["exec", "--", "cat"])
        .env("SPICE_LANE", "core")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let feed = data.clone();
    let writer = std::thread::spawn(move || stdin.write_all(&feed).unwrap());
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    assert!(out.status.success());
    assert_eq!(
        out.stdout, data,
        "stdout must be the command's bytes exactly"
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.matches(&key).count(), 2, "before and after: {err}");
}

#[test]
fn the_commands_stderr_and_exit_code_pass_through() {
    let env = TestEnv::new();
    with_item(&env);
    let out = env
        .cmd(&["exec", "--", "sh", "-c", "echo out; echo err >&2; exit 7"])
        .env("SPICE_LANE", "core")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(7));
    assert_eq!(out.stdout, b"out\n");
    assert!(String::from_utf8_lossy(&out.stderr).contains("err\n"));
    let out = env
        .cmd(&["exec", "--", "sh", "-c", "kill -9 $$"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(137), "death by signal 9 is 128+9");
    let r = common::to_run(
        env.cmd(&["exec", "--", "no-such-command-xyz"])
            .output()
            .unwrap(),
    );
    assert_eq!(r.code, 127, "{}", r.stderr);
    assert!(r.stderr.contains("no-such-command-xyz: command not found"));
}

#[test]
fn without_a_store_nothing_is_added() {
    let env = TestEnv::new();
    let out = env
        .cmd(&["exec", "--", "printf", "hi"])
        .env("SPICE_HOME", env.dir.path().join("nowhere"))
        .output()
        .unwrap();
    assert!(out.status.success());
    assert_eq!(out.stdout, b"hi");
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = env
        .cmd(&["exec", "--", "sh", "-c", "exit 3"])
        .env("SPICE_HOME", "/nonexistent")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3));
}

#[test]
fn nothing_pending_means_no_output_added() {
    let env = TestEnv::new();
    env.run(&["task", "list"]).ok(); // the store exists, the inbox is empty
    let out = env
        .cmd(&["exec", "--", "echo", "plain"])
        .env("SPICE_LANE", "core")
        .output()
        .unwrap();
    assert_eq!(out.stdout, b"plain\n");
    assert!(out.stderr.is_empty());
}

#[test]
fn sigterm_and_sigint_reach_the_whole_process_group() {
    let env = TestEnv::new();
    env.run(&["task", "list"]).ok();
    for (sig, code) in [(libc_sig::TERM, 143), (libc_sig::INT, 130)] {
        let marker = env.dir.path().join(format!("grandchild-{sig}"));
        // A grandchild must die too: the signal goes to the group. (A background job
        // of a non-interactive shell ignores SIGINT by POSIX rule, so the grandchild
        // runs in the foreground of the outer shell.)
        let script = format!(
            "sh -c 'echo $$ > {}; exec sleep 30'; echo after",
            marker.display()
        );
        let mut cmd = env.cmd(&["exec", "--", "sh", "-c", &script]);
        cmd.stdout(Stdio::null()).stderr(Stdio::null());
        // As from an operator's shell: the signals at their defaults. A test runner
        // started in the background (`cmd &`) ignores SIGINT, and the wrapper, like
        // any program, passes an ignored signal on to its command.
        // SAFETY: only sigaction between fork and exec.
        unsafe {
            std::os::unix::process::CommandExt::pre_exec(&mut cmd, || {
                use nix::sys::signal::{signal, SigHandler, Signal};
                signal(Signal::SIGINT, SigHandler::SigDfl).map_err(std::io::Error::from)?;
                signal(Signal::SIGTERM, SigHandler::SigDfl).map_err(std::io::Error::from)?;
                Ok(())
            });
        }
        let child = cmd.spawn().unwrap();
        // The grandchild has written its pid and become `sleep`: both shells are now
        // waiting on their children, where a shell's SIGINT rule applies.
        let gc: i32 = common::wait_for("the grandchild to exec sleep", 10, || {
            let pid: i32 = std::fs::read_to_string(&marker).ok()?.trim().parse().ok()?;
            let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).ok()?;
            (comm.trim() == "sleep").then_some(pid)
        });
        let st = std::process::Command::new("kill")
            .arg(format!("-{sig}"))
            .arg(child.id().to_string())
            .status()
            .unwrap();
        assert!(st.success());
        let out = child.wait_with_output().unwrap();
        assert_eq!(out.status.code(), Some(code), "signal {sig}");
        // Killed by the group signal; its parent (init, once orphaned) reaps it.
        let alive = || {
            std::path::Path::new(&format!("/proc/{gc}")).exists()
                && !std::fs::read_to_string(format!("/proc/{gc}/stat"))
                    .unwrap_or_default()
                    .contains(") Z")
        };
        common::wait_for(
            &format!("grandchild {gc} to die of signal {sig}"),
            10,
            || (!alive()).then_some(()),
        );
    }
}

/// The command starts with no signal blocked and SIGPIPE at its default, whatever the
/// wrapper blocks (the signals it forwards) or ignores (Rust's runtime ignores
/// SIGPIPE). std's posix_spawn keeps the parent's mask (rust-lang/rust#101077), so a
/// command started through it could not be stopped by its group's SIGTERM.
#[test]
fn the_command_starts_with_no_signal_blocked_and_sigpipe_at_its_default() {
    let env = TestEnv::new();
    env.run(&["task", "list"]).ok();
    let out = env
        .cmd(&["exec", "--", "cat", "/proc/self/status"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let status = String::from_utf8_lossy(&out.stdout);
    let mask = |name: &str| {
        let line = status
            .lines()
            .find(|l| l.starts_with(name))
            .unwrap_or_else(|| panic!("no {name} in {status}"));
        u64::from_str_radix(line[name.len()..].trim(), 16).unwrap()
    };
    assert_eq!(mask("SigBlk:"), 0, "blocked signals in the command");
    let sigpipe = 1u64 << (13 - 1);
    assert_eq!(
        mask("SigIgn:") & sigpipe,
        0,
        "SIGPIPE ignored in the command"
    );
}

mod libc_sig {
    pub const TERM: i32 = 15;
    pub const INT: i32 = 2;
}

#[test]
fn an_item_created_mid_command_is_pushed_while_it_runs() {
    let env = TestEnv::new();
    env.run(&["task", "list"]).ok();
    // The command says it has started, then runs until the test lets it go: an item
    // made after it started was made mid-command, and must be shown while the
    // command still runs.
    let mut run = common::running::Running::start(&env);
    let key = with_item(&env);
    run.wait_text(&key);
    assert!(
        run.still_running(),
        "the command was still waiting to be released"
    );
    run.finish();
}

#[test]
fn stdout_under_a_tty_matches_the_bare_command() {
    let env = TestEnv::new();
    with_item(&env);
    let run_script = |inner: &str| {
        let mut c = std::process::Command::new("script");
        c.args(["-qec", inner, "/dev/null"])
            .current_dir(&env.repo)
            .env("SPICE_HOME", &env.home)
            .env("SPICE_LANE", "core")
            .stdin(Stdio::null());
        c.output().unwrap()
    };
    let bin = common::bin();
    let wrapped = run_script(&format!(
        "{} exec -- printf 'a\\tb\\nc' 2>/dev/null",
        bin.display()
    ));
    let bare = run_script("printf 'a\\tb\\nc'");
    assert_eq!(wrapped.stdout, bare.stdout);
    assert!(!bare.stdout.is_empty());
}

#[test]
fn bash_redirector_runs_top_level_commands_through_exec_once() {
    let env = TestEnv::new();
    let key = with_item(&env);
    let init = env.run(&["shell-init", "bash"]).ok().to_string();
    let rc = env.dir.path().join("bashenv");
    std::fs::write(&rc, init).unwrap();
    let out = std::process::Command::new("bash")
        .args(["-c", "echo hi; bash -c 'echo nested'"])
        .current_dir(&env.repo)
        .env("BASH_ENV", &rc)
        .env("SPICE_HOME", &env.home)
        .env("SPICE_LANE", "core")
        .output()
        .unwrap();
    assert!(out.status.success());
    assert_eq!(out.stdout, b"hi\nnested\n");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        err.matches(&key).count(),
        2,
        "once before, once after; nested shells untouched: {err}"
    );
    // Positional parameters survive the re-run.
    let out = std::process::Command::new("bash")
        .args(["-c", "echo \"$0:$1:$2\"", "name", "a b", "c"])
        .env("BASH_ENV", &rc)
        .env("SPICE_HOME", &env.home)
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "name:a b:c\n");
    // Scripts run untouched (no BASH_EXECUTION_STRING).
    let script = env.dir.path().join("s.sh");
    std::fs::write(&script, "echo script\n").unwrap();
    let out = std::process::Command::new("bash")
        .arg(&script)
        .current_dir(&env.repo)
        .env("BASH_ENV", &rc)
        .env("SPICE_HOME", &env.home)
        .env("SPICE_LANE", "core")
        .output()
        .unwrap();
    assert_eq!(out.stdout, b"script\n");
    assert!(!String::from_utf8_lossy(&out.stderr).contains(&key));
}

#[test]
fn unanswered_items_are_shown_again_on_a_back_off() {
    let env = TestEnv::new();
    let key = with_item(&env);
    let out = env
        .cmd(&["exec", "--", "sleep", "2"])
        .env("SPICE_LANE", "core")
        .env("SPICE_EXEC_BACKOFF", "300ms,600ms")
        .output()
        .unwrap();
    assert!(out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    let shown = err.matches(&key).count();
    // Before, +0.3 s, +0.9 s, +1.5 s, after: timing may merge one, never more.
    assert!((4..=6).contains(&shown), "shown {shown} times: {err}");
    let recorded: i64 = env
        .sql()
        .query_row("SELECT shown FROM steering WHERE key = ?1", [&key], |r| {
            r.get(0)
        })
        .unwrap();
    assert_eq!(recorded as usize, shown, "every showing is counted");
    // Acknowledged items stop appearing.
    env.run_stdin(&["ack", "apply"], &format!("ACK {key}: done\n"))
        .ok();
    let out = env
        .cmd(&["exec", "--", "true"])
        .env("SPICE_LANE", "core")
        .output()
        .unwrap();
    assert!(!String::from_utf8_lossy(&out.stderr).contains(&key));
}
