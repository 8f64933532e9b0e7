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
//! Without the agents installed (`npm ci --prefix tests/agents`) the tests say so and
//! pass, unless `CI` is set, where they fail.

use crate::common;
use crate::mock;
mod refusal;
mod restarts;
mod states;

use common::{git, wait_for, TestEnv};
use mock::{last_user_text, Logged, Mock, Step};
use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::{Duration, Instant};

#[derive(Clone, Copy, PartialEq, Debug)]
enum Agent {
    Claude,
    Codex,
}

/// How the lane runs the agent: the interactive built-in profile, or its print-mode
/// twin (`claude -p`, `codex exec`: one process per turn).
#[derive(Clone, Copy, PartialEq, Debug)]
enum Mode {
    Pty,
    Headless,
}

impl Agent {
    fn profile(self, mode: Mode) -> String {
        match mode {
            Mode::Pty => self.bin().to_string(),
            Mode::Headless => format!("{}-headless", self.bin()),
        }
    }

    fn bin(self) -> &'static str {
        match self {
            Agent::Claude => "claude",
            Agent::Codex => "codex",
        }
    }
}

/// Where the agent's binary is: the pinned install, else `PATH`.
fn find_agent(agent: Agent) -> Option<PathBuf> {
    let pinned = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/agents/node_modules/.bin")
        .join(agent.bin());
    if pinned.exists() {
        return Some(pinned);
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(agent.bin()))
        .find(|p| p.is_file())
}

/// The agent's binary. These tests are ignored unless asked for (`--include-ignored`,
/// as .ci/run does), and then a missing CLI is a failure, never a silent pass.
fn require(agent: Agent) -> PathBuf {
    find_agent(agent).unwrap_or_else(|| {
        panic!(
            "{} is not installed (npm ci --prefix tests/agents puts it in tests/agents/node_modules/.bin)",
            agent.bin()
        )
    })
}

/// Moves this thread (and so every process it spawns) into a new network namespace
/// whose only device is loopback. False, after saying why, when that is not allowed.
fn loopback_only() -> bool {
    if let Err(e) = nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNET) {
        eprintln!("no loopback-only network namespace ({e}); the agents run on the host network");
        return false;
    }
    let up = std::process::Command::new("ip")
        .args(["link", "set", "lo", "up"])
        .status();
    assert!(
        up.is_ok_and(|s| s.success()),
        "could not bring up lo in the new network namespace (is iproute2 installed?)"
    );
    true
}

/// One lane (`a`) of the agent's built-in profile on a fresh repository, the mock, and
/// the agents' HOME.
struct Fleet {
    agent: Agent,
    mode: Mode,
    env: TestEnv,
    mock: Mock,
    bin_dir: PathBuf,
    isolated: bool,
    up: Option<(Child, Instant)>,
    /// How many times `fleet up` was started (names its log files).
    starts: std::cell::Cell<usize>,
    started: Instant,
}

impl Fleet {
    fn new(agent: Agent, mode: Mode, script: Vec<Step>) -> Fleet {
        Fleet::with_mock(agent, mode, |l| Mock::start(l, script))
    }

    /// Like [`Fleet::new`], with the mock `serve` starts on the listener it is given.
    fn with_mock(
        agent: Agent,
        mode: Mode,
        serve: impl FnOnce(std::net::TcpListener) -> Mock,
    ) -> Fleet {
        let bin = require(agent);
        let started = Instant::now();
        let isolated = loopback_only();
        let mock = serve(std::net::TcpListener::bind("127.0.0.1:0").unwrap());
        let env = TestEnv::new();
        for (k, v) in [("user.email", "e2e@spice"), ("user.name", "e2e")] {
            git(&env.repo, &["config", k, v]);
        }
        git(&env.repo, &["checkout", "-q", "-b", "main"]);
        std::fs::write(env.repo.join("README"), "real agents\n").unwrap();
        git(&env.repo, &["add", "README"]);
        git(&env.repo, &["commit", "-q", "-m", "init"]);
        let f = Fleet {
            agent,
            mode,
            env,
            mock,
            bin_dir: bin.parent().unwrap().to_path_buf(),
            isolated,
            up: None,
            starts: std::cell::Cell::new(0),
            started,
        };
        std::fs::create_dir_all(f.env.repo.join("lanes")).unwrap();
        std::fs::write(f.env.repo.join("lanes/a.toml"), f.lane_file()).unwrap();
        f.write_agent_config();
        f
    }

    fn agent_home(&self) -> PathBuf {
        self.env.dir.path().join("agent-home")
    }

    /// Where lane a's worktrees go (the supervisor's default).
    fn worktrees(&self) -> PathBuf {
        self.env.home.join("worktrees/a")
    }

    /// The lane: the built-in profile, a model name, and how to reach the mock.
    fn lane_file(&self) -> String {
        let env = match self.agent {
            Agent::Claude => format!(
                "ANTHROPIC_BASE_URL = \"{}\"\nANTHROPIC_API_KEY = \"dummy\"\n\
                 CLAUDE_CODE_MAX_RETRIES = \"0\"\nIS_SANDBOX = \"1\"\n",
                self.mock.url()
            ),
            Agent::Codex => "MOCK_KEY = \"dummy\"\n".to_string(),
        };
        format!(
            "profile = \"{}\"\nphases = [\"todo\"]\nmodel = \"mock-model\"\nlease = \"5m\"\n[env]\n{env}",
            self.agent.profile(self.mode)
        )
    }

    /// The agents' own config in the HOME the fleet gives them: Claude's finished
    /// onboarding, its approval of the key and trust in the lane's worktrees (one entry
    /// for the root covers every worktree under it); Codex's model provider.
    fn write_agent_config(&self) {
        let home = self.agent_home();
        match self.agent {
            Agent::Claude => {
                std::fs::create_dir_all(home.join(".claude")).unwrap();
                let mut projects = serde_json::Map::new();
                projects.insert(
                    self.worktrees().display().to_string(),
                    serde_json::json!({"hasTrustDialogAccepted": true, "hasCompletedProjectOnboarding": true}),
                );
                let state = serde_json::json!({
                    "hasCompletedOnboarding": true, "lastOnboardingVersion": "2.1.197",
                    "lastReleaseNotesSeen": "2.1.197", "numStartups": 1,
                    "customApiKeyResponses": {"approved": ["dummy"], "rejected": []},
                    "projects": projects,
                });
                std::fs::write(home.join(".claude.json"), state.to_string()).unwrap();
                std::fs::write(
                    home.join(".claude/settings.json"),
                    r#"{"skipDangerousModePermissionPrompt": true}"#,
                )
                .unwrap();
            }
            Agent::Codex => {
                std::fs::create_dir_all(home.join(".codex")).unwrap();
                std::fs::write(
                    home.join(".codex/config.toml"),
                    format!(
                        "model_provider = \"mock\"\n\
                         [model_providers.mock]\nname = \"mock\"\nbase_url = \"{}/v1\"\n\
                         wire_api = \"responses\"\nenv_key = \"MOCK_KEY\"\n\
                         request_max_retries = 0\nstream_max_retries = 0\n",
                        self.mock.url()
                    ),
                )
                .unwrap();
            }
        }
    }

    /// `spice fleet up` in the background, with the agents on `PATH`.
    fn start(&mut self) {
        let path = format!(
            "{}:{}",
            self.bin_dir.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        // Files, not pipes: a pipe nobody reads until the end can fill and block the
        // supervisor; and what it said is there to show when a wait times out.
        let (out, err) = self.supervisor_logs();
        let child = self
            .env
            .cmd(&["fleet", "up", "--json"])
            .env("HOME", self.agent_home())
            .env("PATH", path)
            .stdout(std::fs::File::create(out).unwrap())
            .stderr(std::fs::File::create(err).unwrap())
            .spawn()
            .unwrap();
        self.up = Some((child, Instant::now()));
    }

    /// Where the supervisor's stdout and stderr go (appended to by each `start`).
    fn supervisor_logs(&self) -> (PathBuf, PathBuf) {
        let dir = self.env.home.parent().unwrap().to_path_buf();
        let n = self.starts.get();
        self.starts.set(n + 1);
        (
            dir.join(format!("up-{n}.out")),
            dir.join(format!("up-{n}.err")),
        )
    }

    /// The end of what the last `fleet up` wrote on stderr.
    fn supervisor_said(&self) -> String {
        let n = self.starts.get().saturating_sub(1);
        let dir = self.env.home.parent().unwrap().to_path_buf();
        let text = std::fs::read_to_string(dir.join(format!("up-{n}.err"))).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    }

    fn up_at(&self) -> Instant {
        self.up.as_ref().unwrap().1
    }

    fn lane(&self) -> serde_json::Value {
        let s = self.env.run(&["fleet", "status", "--json"]).json();
        s["lanes"][0].clone()
    }

    fn wait_lane(
        &self,
        what: &str,
        secs: u64,
        f: impl Fn(&serde_json::Value) -> bool,
    ) -> serde_json::Value {
        let mut last = serde_json::Value::Null;
        let deadline = Instant::now() + Duration::from_secs(secs);
        while Instant::now() < deadline {
            last = self.lane();
            if f(&last) {
                return last;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let transcript = last["transcript"]
            .as_str()
            .and_then(|p| std::fs::read_to_string(p).ok())
            .unwrap_or_default();
        let tail: Vec<&str> = transcript.lines().rev().take(6).collect();
        panic!(
            "timed out after {secs}s waiting for {what}; lane: {last}\nmock:\n{}\nscreen (last output):\n{}\ntranscript (last lines, newest first):\n{}\nsupervisor's stderr (last lines):\n{}",
            self.mock.summary(),
            screen_tail(&last, 3000),
            tail.join("\n"),
            self.supervisor_said()
        );
    }

    fn steer(&self, text: &str) -> (String, Instant) {
        let at = Instant::now();
        let key = self
            .env
            .run(&["steer", "lane:a", text])
            .ok()
            .trim()
            .to_string();
        (key, at)
    }

    /// The first turn request whose new input carries `key`.
    fn wait_shown(&self, key: &str, secs: u64) -> Logged {
        self.mock
            .wait(&format!("[{key}] to reach the model"), secs, |log| {
                log.iter()
                    .find(|l| l.turn && last_user_text(l).contains(&format!("[{key}]")))
                    .cloned()
            })
    }

    fn item(&self, key: &str) -> serde_json::Value {
        let all = self.env.run(&["inbox", "--all", "--json"]).json();
        all.as_array()
            .unwrap()
            .iter()
            .find(|i| i["key"] == key)
            .cloned()
            .unwrap_or_else(|| panic!("no item {key} in {all}"))
    }

    /// Waits for `key` to be ACKed and checks the record: its source is the lane's
    /// transcript and that line holds the ACK. Returns (source, line).
    fn wait_acked(&self, key: &str, secs: u64) -> (String, i64) {
        wait_for(&format!("{key} to be acked"), secs, || {
            (self.item(key)["state"] == "acked").then_some(())
        });
        let (source, line): (String, i64) = self
            .env
            .sql()
            .query_row(
                "SELECT source, line FROM acks WHERE key = ?1 AND polarity = 'ack'",
                [key],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .unwrap();
        let text = std::fs::read_to_string(&source).unwrap();
        let at = text.lines().nth(line as usize - 1).unwrap_or_default();
        assert!(
            at.contains(&format!("ACK {key}")),
            "line {line} of {source} does not hold the ACK: {at}"
        );
        (source, line)
    }

    /// The processes named `name` that run with this fleet's state directory in their
    /// environment (commands the agent started).
    fn commands(&self, name: &str) -> Vec<u32> {
        let needle = format!("SPICE_HOME={}", self.env.home.display());
        let Ok(dir) = std::fs::read_dir("/proc") else {
            return Vec::new();
        };
        dir.flatten()
            .filter_map(|e| {
                let pid = e.file_name().to_str()?.parse::<u32>().ok()?;
                let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).ok()?;
                let environ = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
                (comm.trim() == name && environ.split(|b| *b == 0).any(|v| v == needle.as_bytes()))
                    .then_some(pid)
            })
            .collect()
    }

    /// Waits until the agent runs a command named `name`.
    fn wait_command(&self, name: &str, secs: u64) {
        wait_for(&format!("the agent to run {name}"), secs, || {
            (!self.commands(name).is_empty()).then_some(())
        });
    }

    /// The agent process under the lane's shim.
    fn agent_pid(&self) -> i32 {
        let shim = self.lane()["pid"].as_i64().expect("lane has a pid") as i32;
        wait_for("the agent under the shim", 10, || {
            let kids =
                std::fs::read_to_string(format!("/proc/{shim}/task/{shim}/children")).ok()?;
            kids.split_whitespace().next()?.parse::<i32>().ok()
        })
    }

    /// `spice fleet down` and the supervisor's exit.
    fn down(&mut self) {
        let Some((mut child, _)) = self.up.take() else {
            return;
        };
        self.env.run(&["fleet", "down"]).ok();
        let deadline = Instant::now() + Duration::from_secs(20);
        while child.try_wait().unwrap().is_none() {
            assert!(Instant::now() < deadline, "fleet up did not stop");
            std::thread::sleep(Duration::from_millis(100));
        }
        let status = child.wait().unwrap();
        assert!(
            status.success(),
            "fleet up failed: {}",
            self.supervisor_said()
        );
    }

    fn report(&self, what: &str, d: Duration) {
        eprintln!(
            "E2E {} {what}: {:.2}s{}",
            self.agent.profile(self.mode),
            d.as_secs_f64(),
            if self.isolated { "" } else { " (host network)" }
        );
    }
}

impl Drop for Fleet {
    fn drop(&mut self) {
        if let Some((mut child, _)) = self.up.take() {
            let _ = self.env.run(&["fleet", "down"]);
            let deadline = Instant::now() + Duration::from_secs(15);
            while child.try_wait().ok().flatten().is_none() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(100));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// The end of what the lane's agent wrote to its terminal (from its asciicast
/// recording), control sequences made visible, for failure messages.
fn screen_tail(lane: &serde_json::Value, chars: usize) -> String {
    let Some(path) = lane["recording"].as_str() else {
        return "(no recording)".into();
    };
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let out: String = text
        .lines()
        .skip(1)
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|e| e[1] == "o")
        .filter_map(|e| e[2].as_str().map(str::to_string))
        .collect();
    let out: String = out
        .chars()
        .map(|c| if c == '\u{1b}' { '␛' } else { c })
        .collect();
    let skip = out.chars().count().saturating_sub(chars);
    out.chars().skip(skip).collect()
}

/// The command the mock has the agent run first: long enough to steer it meanwhile.
const SLOW: &str = "sleep 4; echo done";
/// The command the agent is killed in the middle of; its quotes come back escaped in
/// the CLIs' shell wrapping.
const LONG: &str = "sleep 120; echo 'never'";

/// Claim → brief → a slow command steered mid-run → ACK retired from the transcript →
/// briefing → the next instruction between turns → agent killed mid-command →
/// successor resumes the conversation on the same claim.
fn full_loop(agent: Agent, mode: Mode) {
    let script = vec![
        Step::Shell(SLOW.into()),
        Step::Say("{acks}".into()),
        Step::Shell(LONG.into()),
        Step::Say("Resumed where I was.".into()),
    ];
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
    assert!(
        last_user_text(&shown).contains("done"),
        "not the command's result"
    );
    assert!(last_user_text(&shown).contains("pineapple"));
    assert_in_tool_result(agent, &shown, &key);

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
    let resumed = f.mock.wait("the successor's first turn", 60, |log| {
        log.iter().filter(|l| l.turn).nth(turns_before).cloned()
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
    // out of the resumed conversation, Codex keeps it.
    let told = last_user_text(&resumed);
    let quoted = format!("`{LONG}`");
    assert!(
        told.contains("no result came back") && told.contains(&quoted),
        "the successor's brief does not quote the interrupted command as {quoted}: {told}\nlaunches: {:?}",
        f.env.ledger_of(&task, "launched")
    );
    let launched = f.env.ledger_of(&task, "launched");
    let last = &launched
        .get(launches_before)
        .unwrap_or_else(|| panic!("no launch after the kill: {launched:?}"))["detail"];
    assert_eq!(last["interrupted"], serde_json::json!([quoted]), "{last}");
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
        Agent::Claude => l.body["messages"].as_array().unwrap().last().cloned(),
        Agent::Codex => l.body["input"].as_array().unwrap().last().cloned(),
    }
    .unwrap();
    assert_eq!(last["role"], "user", "{last}");
    assert!(last.to_string().contains(&needle), "{last}");
    assert!(!last.to_string().contains("tool_result"), "{last}");
}

#[test]
#[ignore = "needs the real claude and codex CLIs (npm ci --prefix tests/agents)"]
fn claude_pty_full_loop() {
    full_loop(Agent::Claude, Mode::Pty);
}

#[test]
#[ignore = "needs the real claude and codex CLIs (npm ci --prefix tests/agents)"]
fn claude_headless_full_loop() {
    full_loop(Agent::Claude, Mode::Headless);
}

#[test]
#[ignore = "needs the real claude and codex CLIs (npm ci --prefix tests/agents)"]
fn claude_pty_idle_agent_is_typed_to() {
    idle_typed(Agent::Claude);
}

#[test]
#[ignore = "needs the real claude and codex CLIs (npm ci --prefix tests/agents)"]
fn codex_pty_full_loop() {
    full_loop(Agent::Codex, Mode::Pty);
}

#[test]
#[ignore = "needs the real claude and codex CLIs (npm ci --prefix tests/agents)"]
fn codex_headless_full_loop() {
    full_loop(Agent::Codex, Mode::Headless);
}

#[test]
#[ignore = "needs the real claude and codex CLIs (npm ci --prefix tests/agents)"]
fn codex_pty_idle_agent_is_typed_to() {
    idle_typed(Agent::Codex);
}

/// Claude Code in a worktree it was never told to trust stops at its trust dialog and
/// writes no transcript; the lane reports it after `start_timeout`, quoting the
/// dialog, rather than showing "starting".
#[test]
#[ignore = "needs the real claude and codex CLIs (npm ci --prefix tests/agents)"]
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
