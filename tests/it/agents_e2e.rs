//! The fleet drives the real Claude Code and Codex CLIs (the npm packages pinned in
//! `tests/agents/package.json`), offline, against the mock model server in
//! `tests/mock`, started by each test on 127.0.0.1.
//!
//! Each test runs in a loopback-only network namespace when it can make one (root, or
//! wherever `unshare(CLONE_NEWNET)` is allowed): the test thread moves into a new
//! namespace before it binds the mock and spawns `spice`, so the supervisor, the agents
//! and the mock share a namespace whose only device is `lo`. Nothing the agents try can
//! leave the machine (the Codex TUI's announcement fetch cannot be switched off).
//!
//! The built-in `claude` and `codex` profiles are used as they ship; only the lane
//! (`model`, `[env]`: base URL, key) and the agents' own config in the HOME the fleet
//! gives them (Claude's onboarding and folder trust, Codex's model provider) are set.
//!
//! Without the agents installed (`npm install --no-save --prefix tests/agents`) the tests say so and
//! pass, unless `CI` is set, where they fail.

use crate::common;
use crate::mock;
mod any_cli;
mod fleet;
mod refusal;
mod restarts;
mod states;

pub(crate) use fleet::{screen_tail, Agent, Fleet, Mode};

use common::wait_for;
use mock::{last_user_text, Logged, Step};
use std::time::Instant;

/// The command the mock has the agent run first: long enough to steer it meanwhile.
/// None starts with `sleep`: Qwen Code refuses `sleep N` followed by more.
const SLOW: &str = "echo start; sleep 4; echo done";
/// The command the agent is killed in the middle of; its quotes come back escaped in
/// the CLIs' shell wrapping.
const LONG: &str = "echo start; sleep 120; echo 'never'";

/// Claim → brief → a slow command steered mid-run → ACK retired from the transcript →
/// briefing → the next instruction between turns → agent killed mid-command →
/// successor resumes the conversation on the same claim.
fn full_loop(agent: Agent, mode: Mode) {
    // An agent that takes steering as messages only (Gemini CLI) gets it after the
    // command's turn: one more step, the turn's end, before the ACK.
    let mut script = vec![
        Step::Shell(SLOW.into()),
        Step::Say("{acks}".into()),
        Step::Shell(LONG.into()),
        Step::Say("Resumed where I was.".into()),
    ];
    if agent.messages_only() {
        script.insert(1, Step::Say("The command is done.".into()));
    }
    let mut f = Fleet::new(agent, mode, script);
    let task = f.env.add(&["Real agent task", "--project", "demo"]);
    let handle = format!("demo-{task}");
    f.start();

    // 1. The lane claims the task, makes its worktree, and the agent starts with the brief.
    let first = f.mock.wait("the first turn", 60, |log| {
        log.iter().find(|l| l.turn).cloned()
    });
    f.report("fleet up -> first model request", first.at - f.up_at());
    assert!(
        last_user_text(&first).contains(&format!("You are working on task {handle}")),
        "the first turn is not the brief: {}",
        last_user_text(&first)
    );
    let lane = f.wait_lane("the claim", 10, |l| {
        l["claims"][0]["task"] == handle.as_str()
    });
    let worktree = f.worktrees().join(&handle);
    assert_eq!(
        lane["claims"][0]["worktree"],
        worktree.display().to_string()
    );
    assert!(worktree.join("README").exists());
    let session = lane["session"].as_str().unwrap().to_string();
    assert_eq!(lane["claims"][0]["session"], session.as_str());

    // 2-3. While the command runs, a steering item; it reaches the model with the
    // command's result.
    f.wait_command("sleep", 30);
    let (key, steered) = f.steer("Say the word pineapple when you are done.");
    let shown = f.wait_shown(&key, 60);
    f.report("spice steer -> item reaches the model", shown.at - steered);
    assert_eq!(f.mock.turns()[0].reply, mock::Reply::Shell(SLOW.into()));
    assert!(last_user_text(&shown).contains("pineapple"));
    if agent.messages_only() {
        assert_typed_message(agent, &shown, &key);
        eprintln!(
            "E2E {} steering delivered as the user's message ({})",
            agent.bin(),
            f.lane()["delivers"]
        );
    } else {
        assert!(
            last_user_text(&shown).contains("done"),
            "not the command's result"
        );
        assert_in_tool_result(agent, &shown, &key);
    }

    // 4. The agent writes the mock's ACK into its transcript; spice retires the item.
    let (transcript, _line) = f.wait_acked(&key, 30);
    let lane = f.lane();
    assert_eq!(lane["transcript"], transcript.as_str());

    // 5. The session's briefing lists the command and its exit code.
    let brief = f
        .env
        .run(&["session", "briefing", &transcript, "--json"])
        .json();
    let cmd = brief["commands"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["command"].as_str().is_some_and(|c| c.contains(SLOW)))
        .unwrap_or_else(|| panic!("{SLOW} not in the briefing: {brief}"));
    assert_eq!(cmd["exit_code"], 0, "{cmd}");

    // 6. Between turns, the next instruction: typed into the waiting interactive agent,
    // or the next `-p`/`exec` turn of a headless one. The agent is killed in the middle
    // of the command it starts; a successor resumes the conversation on the same claim.
    f.wait_lane("the turn to end", 30, |l| l["state"] == "waiting");
    let (next, steered) = f.steer("Run the long step now.");
    let shown = f.wait_shown(&next, 60);
    f.report(
        match f.mode {
            Mode::Pty => "between turns: spice steer -> typed message reaches the model",
            Mode::Headless => "between turns: spice steer -> next turn reaches the model",
        },
        shown.at - steered,
    );
    if f.mode == Mode::Headless {
        let lane = f.lane();
        assert_eq!(
            lane["session"],
            session.as_str(),
            "a turn is not a new session"
        );
        assert_eq!(lane["restarts"], 0, "{lane}");
    }
    f.wait_command("sleep", 30);
    let turns_before = f.mock.turns().len();
    let briefs_before = f
        .mock
        .turns()
        .last()
        .map_or(0, |l| mock::briefs(&l.body).len());
    // The successor's launch is the first one recorded after the kill; a headless
    // agent's later turns are launches too, and one may already follow by the time
    // this test reads the ledger, so `last()` would not be the successor's.
    let launches_before = f.env.ledger_of(&task, "launched").len();
    let pid = f.agent_pid();
    let killed = Instant::now();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    // The command dies with its agent: the shim ends the agent's whole tree.
    wait_for("the killed agent's command to be gone", 10, || {
        f.commands("sleep").is_empty().then_some(())
    });
    // The successor's first turn carries one brief more than the conversation held (its
    // own): a CLI that runs as two processes (Gemini CLI, Qwen Code) may still ask once
    // from the one the kill left, as its command is ended.
    let resumed = f.mock.wait("the successor's first turn", 60, |log| {
        log.iter()
            .filter(|l| l.turn)
            .skip(turns_before)
            .find(|l| mock::briefs(&l.body).len() > briefs_before)
            .cloned()
    });
    f.report(
        "agent killed mid-command -> successor's first request",
        resumed.at - killed,
    );
    let body = resumed.text();
    for earlier in [SLOW, &format!("ACK {key}: done")] {
        assert!(
            body.contains(earlier),
            "the successor's request lacks {earlier:?}"
        );
    }
    // The brief quotes the command the predecessor died in exactly as the agent asked
    // for it (not its CLI's shell wrapping): Claude Code leaves a call without a result
    // out of the resumed conversation, Codex keeps it. Qwen Code runs in two processes:
    // the one left when its agent is killed records the command's end (killed by the
    // shim, exit 143) in the transcript, so the call has its result and the resumed
    // history says how it ended (the brief may name it too).
    let told = last_user_text(&resumed);
    let quoted = format!("`{LONG}`");
    let launched = f.env.ledger_of(&task, "launched");
    let last = &launched
        .get(launches_before)
        .unwrap_or_else(|| panic!("no launch after the kill: {launched:?}"))["detail"];
    if agent == Agent::Qwen && told.contains("Exit Code: 143") {
        assert!(told.contains(LONG), "{told}");
        // Whether the shim still found the command running when it ended the agent
        // is a race with Qwen's second process ending it: either way it is named.
        let named = [serde_json::json!([]), serde_json::json!([quoted])];
        assert!(named.contains(&last["interrupted"]), "{last}");
    } else {
        assert!(
            told.contains("no result came back") && told.contains(&quoted),
            "the successor's brief does not quote the interrupted command as {quoted}: {told}\nlaunches: {launched:?}"
        );
        assert_eq!(last["interrupted"], serde_json::json!([quoted]), "{last}");
    }
    eprintln!(
        "E2E {} the interrupted call in the resumed history: {}; the brief names {} (from the {})",
        f.agent.profile(f.mode),
        history_has_call(&resumed, LONG),
        last["interrupted"],
        last["interrupted_from"].as_str().unwrap_or("?")
    );
    let lane = f.wait_lane("the successor", 10, |l| {
        l["session"].as_str().is_some_and(|s| s != session)
    });
    assert_eq!(lane["predecessors"][0], session.as_str(), "{lane}");
    assert_eq!(lane["restarts"], 1, "{lane}");
    assert_eq!(lane["claims"][0]["task"], handle.as_str());
    assert_eq!(lane["claims"][0]["session"], lane["session"]);
    assert_eq!(
        lane["claims"][0]["worktree"],
        worktree.display().to_string()
    );
    f.down();
    f.report("full loop, total", f.started.elapsed());
}

/// Whether the conversation a request carries, before its last user message, holds a
/// call running `command`.
fn history_has_call(l: &Logged, command: &str) -> bool {
    let items = l.body["messages"]
        .as_array()
        .or_else(|| l.body["input"].as_array())
        .cloned()
        .unwrap_or_default();
    let last_user = items.iter().rposition(|m| m["role"] == "user");
    items[..last_user.unwrap_or(items.len())]
        .iter()
        .any(|m| m.to_string().contains(command))
}

/// Where the steering text sat in the turn that showed it: in the tool result itself
/// (`spice exec` on the command's stderr) or, for Claude, in the PostToolUse hook's
/// text beside it.
fn assert_in_tool_result(agent: Agent, l: &Logged, key: &str) {
    let needle = format!("[{key}]");
    match agent {
        Agent::Claude => {
            let msgs = l.body["messages"].as_array().unwrap();
            let last = msgs.iter().rev().find(|m| m["role"] == "user").unwrap();
            let blocks = last["content"].as_array().expect("blocks");
            let result = blocks
                .iter()
                .find(|b| b["type"] == "tool_result")
                .unwrap_or_else(|| panic!("not a tool result: {last}"));
            // `spice exec` puts it in the command's output; the PostToolUse hook in a
            // text block beside it. Either is what the model reads with the result.
            let how = if result.to_string().contains(&needle) {
                "spice exec, in the tool result"
            } else {
                assert!(last.to_string().contains(&needle), "not shown: {last}");
                "the PostToolUse hook, beside the tool result"
            };
            eprintln!("E2E claude steering delivered by {how}");
        }
        Agent::Codex => {
            let items = l.body["input"].as_array().unwrap();
            let out = items
                .iter()
                .rev()
                .find(|i| i["type"] == "function_call_output")
                .expect("a tool output");
            assert!(out.to_string().contains(&needle), "not in {out}");
            eprintln!("E2E codex steering delivered by spice exec, in the tool result");
        }
        Agent::Qwen => {
            let msgs = l.body["messages"].as_array().unwrap();
            let out = msgs
                .iter()
                .rev()
                .find(|m| m["role"] == "tool")
                .expect("a tool message");
            assert!(out.to_string().contains(&needle), "not in {out}");
            eprintln!("E2E qwen steering delivered by spice exec, in the tool result");
        }
        Agent::Gemini => unreachable!("Gemini CLI takes steering as messages only"),
        Agent::OneTool => unreachable!("tests/it/agents_e2e/any_cli.rs runs the one-tool agent"),
    }
}

/// The agent's turn ended (lane `waiting`); a steering item is typed into its
/// terminal as a new message and answered.
fn idle_typed(agent: Agent) {
    let mut f = Fleet::new(
        agent,
        Mode::Pty,
        vec![Step::Say("Ready for instructions.".into())],
    );
    let task = f.env.add(&["Wait for the operator", "--project", "demo"]);
    f.start();
    f.wait_lane("the agent to wait for input", 60, |l| {
        l["state"] == "waiting"
    });
    let (key, steered) = f.steer("Reply with the word mango.");
    let shown = f.wait_shown(&key, 30);
    f.report(
        "idle: spice steer -> typed message reaches the model",
        shown.at - steered,
    );
    assert!(last_user_text(&shown).contains("mango"));
    assert_typed_message(agent, &shown, &key);
    f.wait_acked(&key, 30);
    let show = f.env.run(&["task", "show", &task, "--json"]).json();
    let delivered = show["ledger"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["kind"] == "delivered")
        .unwrap_or_else(|| panic!("no delivery in the ledger: {show}"));
    assert_eq!(delivered["detail"]["keys"][0], key.as_str(), "{delivered}");
    f.down();
    f.report("idle, total", f.started.elapsed());
}

/// The typed item arrived as a new user message (not with a tool result).
fn assert_typed_message(agent: Agent, l: &Logged, key: &str) {
    let needle = format!("[{key}]");
    let last = match agent {
        Agent::Claude | Agent::Qwen => l.body["messages"].as_array().unwrap().last().cloned(),
        Agent::Codex => l.body["input"].as_array().unwrap().last().cloned(),
        Agent::Gemini => l.body["contents"].as_array().unwrap().last().cloned(),
        Agent::OneTool => unreachable!("tests/it/agents_e2e/any_cli.rs runs the one-tool agent"),
    }
    .unwrap();
    assert_eq!(last["role"], "user", "{last}");
    assert!(!last.to_string().contains("functionResponse"), "{last}");
    assert!(last.to_string().contains(&needle), "{last}");
    assert!(!last.to_string().contains("tool_result"), "{last}");
}

#[test]
#[ignore = "needs the real agent CLIs (npm install --no-save --prefix tests/agents)"]
fn claude_pty_full_loop() {
    full_loop(Agent::Claude, Mode::Pty);
}

#[test]
#[ignore = "needs the real agent CLIs (npm install --no-save --prefix tests/agents)"]
fn claude_headless_full_loop() {
    full_loop(Agent::Claude, Mode::Headless);
}

#[test]
#[ignore = "needs the real agent CLIs (npm install --no-save --prefix tests/agents)"]
fn claude_pty_idle_agent_is_typed_to() {
    idle_typed(Agent::Claude);
}

#[test]
#[ignore = "needs the real agent CLIs (npm install --no-save --prefix tests/agents)"]
fn codex_pty_full_loop() {
    full_loop(Agent::Codex, Mode::Pty);
}

#[test]
#[ignore = "needs the real agent CLIs (npm install --no-save --prefix tests/agents)"]
fn codex_headless_full_loop() {
    full_loop(Agent::Codex, Mode::Headless);
}

#[test]
#[ignore = "needs the real agent CLIs (npm install --no-save --prefix tests/agents)"]
fn codex_pty_idle_agent_is_typed_to() {
    idle_typed(Agent::Codex);
}

/// Claude Code in a worktree it was never told to trust stops at its trust dialog and
/// writes no transcript; the lane reports it after `start_timeout`, quoting the
/// dialog, rather than showing "starting".
#[test]
#[ignore = "needs the real agent CLIs (npm install --no-save --prefix tests/agents)"]
fn claude_pty_untrusted_worktree_is_reported() {
    let mut f = Fleet::new(Agent::Claude, Mode::Pty, vec![]);
    let home = f.agent_home();
    let mut state: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(home.join(".claude.json")).unwrap()).unwrap();
    state["projects"] = serde_json::json!({});
    std::fs::write(home.join(".claude.json"), state.to_string()).unwrap();
    let lane = f.lane_file().replace(
        "lease = \"5m\"\n",
        "lease = \"5m\"\nstart_timeout = \"5s\"\n",
    );
    std::fs::write(f.env.repo.join("lanes/a.toml"), lane).unwrap();
    f.env.add(&["Behind the trust dialog", "--project", "demo"]);
    f.start();
    let lane = f.wait_lane("the silent start to be reported", 60, |l| {
        l["last_error"]
            .as_str()
            .is_some_and(|e| e.starts_with("no transcript 5s after launch"))
    });
    let error = lane["last_error"].as_str().unwrap();
    eprintln!("E2E claude untrusted worktree: {error}");
    assert!(error.to_lowercase().contains("trust"), "{error}");
    assert!(
        f.mock.turns().is_empty(),
        "the model was asked before trust"
    );
    f.down();
}

#[test]
#[ignore = "needs the real agent CLIs (npm install --no-save --prefix tests/agents)"]
fn gemini_pty_full_loop() {
    full_loop(Agent::Gemini, Mode::Pty);
}

#[test]
#[ignore = "needs the real agent CLIs (npm install --no-save --prefix tests/agents)"]
fn gemini_headless_full_loop() {
    full_loop(Agent::Gemini, Mode::Headless);
}

#[test]
#[ignore = "needs the real agent CLIs (npm install --no-save --prefix tests/agents)"]
fn qwen_pty_full_loop() {
    full_loop(Agent::Qwen, Mode::Pty);
}

#[test]
#[ignore = "needs the real agent CLIs (npm install --no-save --prefix tests/agents)"]
fn qwen_headless_full_loop() {
    full_loop(Agent::Qwen, Mode::Headless);
}
