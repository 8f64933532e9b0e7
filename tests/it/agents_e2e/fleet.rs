//! The harness of the real-agent tests: which CLI and how it runs, the lane and the
//! agents' own config in the HOME the fleet gives them, `fleet up` in the background
//! and what the tests wait for.

use super::{common, mock};
use common::{git, wait_for, TestEnv};
use mock::{last_user_text, Logged, Mock, Step};
use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::{Duration, Instant};

#[derive(Clone, Copy, PartialEq, Debug)]
pub enum Agent {
    Claude,
    Codex,
    Gemini,
    Qwen,
    /// The tests' own one-tool agent (`tests/agents/onetool.sh`): a CLI spice has no
    /// decoder for, run by a profile file (`profiles/onetool.toml`) the test writes.
    OneTool,
}

/// How the lane runs the agent: the interactive built-in profile, or its print-mode
/// twin (`claude -p`, `codex exec`: one process per turn).
#[derive(Clone, Copy, PartialEq, Debug)]
pub enum Mode {
    Pty,
    Headless,
}

impl Agent {
    pub fn profile(self, mode: Mode) -> String {
        match mode {
            Mode::Pty => self.bin().to_string(),
            Mode::Headless => format!("{}-headless", self.bin()),
        }
    }

    /// Whether its profile delivers steering as the user's messages only (Gemini CLI
    /// tells its model to ignore directives in tool output).
    pub fn messages_only(self) -> bool {
        self == Agent::Gemini
    }

    pub fn bin(self) -> &'static str {
        match self {
            Agent::Claude => "claude",
            Agent::Codex => "codex",
            Agent::Gemini => "gemini",
            Agent::Qwen => "qwen",
            Agent::OneTool => "onetool",
        }
    }
}

/// Where the agent's binary is: the pinned install, else `PATH`.
pub fn find_agent(agent: Agent) -> Option<PathBuf> {
    if agent == Agent::OneTool {
        return Some(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/agents/onetool.sh"));
    }
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
pub fn require(agent: Agent) -> PathBuf {
    find_agent(agent).unwrap_or_else(|| {
        panic!(
            "{} is not installed (npm install --no-save --prefix tests/agents puts it in tests/agents/node_modules/.bin)",
            agent.bin()
        )
    })
}

/// Moves this thread (and so every process it spawns) into a new network namespace
/// whose only device is loopback. False, after saying why, when that is not allowed.
pub fn loopback_only() -> bool {
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
pub struct Fleet {
    pub agent: Agent,
    pub mode: Mode,
    pub env: TestEnv,
    pub mock: Mock,
    pub bin_dir: PathBuf,
    pub isolated: bool,
    pub up: Option<(Child, Instant)>,
    /// How many times `fleet up` was started (names its log files).
    pub starts: std::cell::Cell<usize>,
    pub started: Instant,
}

impl Fleet {
    pub fn new(agent: Agent, mode: Mode, script: Vec<Step>) -> Fleet {
        Fleet::with_mock(agent, mode, |l| Mock::start(l, script))
    }

    /// Like [`Fleet::new`], with the mock `serve` starts on the listener it is given.
    pub fn with_mock(
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

    pub fn agent_home(&self) -> PathBuf {
        self.env.dir.path().join("agent-home")
    }

    /// Where lane a's worktrees go (the supervisor's default).
    pub fn worktrees(&self) -> PathBuf {
        self.env.home.join("worktrees/a")
    }

    /// The lane: the built-in profile, a model name, and how to reach the mock.
    pub fn lane_file(&self) -> String {
        let env = match self.agent {
            Agent::Claude => format!(
                "ANTHROPIC_BASE_URL = \"{}\"\nANTHROPIC_API_KEY = \"dummy\"\n\
                 CLAUDE_CODE_MAX_RETRIES = \"0\"\nIS_SANDBOX = \"1\"\n",
                self.mock.url()
            ),
            Agent::Codex => "MOCK_KEY = \"dummy\"\n".to_string(),
            Agent::Gemini => format!(
                "GOOGLE_GEMINI_BASE_URL = \"{}\"\nGEMINI_API_KEY = \"dummy\"\n",
                self.mock.url()
            ),
            Agent::Qwen => format!(
                "OPENAI_BASE_URL = \"{}/v1\"\nOPENAI_API_KEY = \"dummy\"\n\
                 OPENAI_MODEL = \"mock-model\"\n",
                self.mock.url()
            ),
            Agent::OneTool => format!("ONETOOL_URL = \"{}\"\n", self.mock.url()),
        };
        format!(
            "profile = \"{}\"\nphases = [\"todo\"]\nmodel = \"mock-model\"\nlease = \"5m\"\n[env]\n{env}",
            self.agent.profile(self.mode)
        )
    }

    /// The agents' own config in the HOME the fleet gives them: Claude's finished
    /// onboarding, its approval of the key and trust in the lane's worktrees (one entry
    /// for the root covers every worktree under it); Codex's model provider; Gemini
    /// CLI's and Qwen Code's auth type, no folder trust dialog, no retention sweep
    /// (Gemini) and no memory sub-agent (Qwen).
    pub fn write_agent_config(&self) {
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
            Agent::Gemini => {
                std::fs::create_dir_all(home.join(".gemini")).unwrap();
                let settings = serde_json::json!({
                    "security": {"auth": {"selectedType": "gemini-api-key"}, "folderTrust": {"enabled": false}},
                    "general": {"sessionRetention": {"enabled": false}, "enableAutoUpdate": false},
                });
                std::fs::write(home.join(".gemini/settings.json"), settings.to_string()).unwrap();
            }
            Agent::Qwen => {
                std::fs::create_dir_all(home.join(".qwen")).unwrap();
                let settings = serde_json::json!({
                    "security": {"auth": {"selectedType": "openai"}},
                    "ui": {"enableFollowupSuggestions": false},
                    "memory": {"enableManagedAutoMemory": false, "enableManagedAutoDream": false},
                    "general": {"enableAutoUpdate": false},
                });
                std::fs::write(home.join(".qwen/settings.json"), settings.to_string()).unwrap();
            }
            // Not its config but its whole description: the profile that runs it.
            Agent::OneTool => {
                let script = find_agent(Agent::OneTool).unwrap();
                std::fs::create_dir_all(self.env.repo.join("profiles")).unwrap();
                std::fs::write(
                    self.env.repo.join("profiles/onetool.toml"),
                    format!(
                        "command = [\"{}\", \"{{brief_file}}\"]\nmode = \"pty\"\n\
                         [transcript]\nformat = \"terminal\"\n",
                        script.display()
                    ),
                )
                .unwrap();
            }
        }
    }

    /// `spice fleet up` in the background, with the agents on `PATH`.
    pub fn start(&mut self) {
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
    pub fn supervisor_logs(&self) -> (PathBuf, PathBuf) {
        let dir = self.env.home.parent().unwrap().to_path_buf();
        let n = self.starts.get();
        self.starts.set(n + 1);
        (
            dir.join(format!("up-{n}.out")),
            dir.join(format!("up-{n}.err")),
        )
    }

    /// The end of what the last `fleet up` wrote on stderr.
    pub fn supervisor_said(&self) -> String {
        let n = self.starts.get().saturating_sub(1);
        let dir = self.env.home.parent().unwrap().to_path_buf();
        let text = std::fs::read_to_string(dir.join(format!("up-{n}.err"))).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    }

    pub fn up_at(&self) -> Instant {
        self.up.as_ref().unwrap().1
    }

    pub fn lane(&self) -> serde_json::Value {
        let s = self.env.run(&["fleet", "status", "--json"]).json();
        s["lanes"][0].clone()
    }

    pub fn wait_lane(
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

    pub fn steer(&self, text: &str) -> (String, Instant) {
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
    pub fn wait_shown(&self, key: &str, secs: u64) -> Logged {
        let needle = format!("[{key}]");
        let deadline = Instant::now() + Duration::from_secs(secs);
        loop {
            let found = self
                .mock
                .requests()
                .into_iter()
                .find(|l| l.turn && last_user_text(l).contains(&needle));
            if let Some(l) = found {
                return l;
            }
            if Instant::now() >= deadline {
                let lane = self.lane();
                panic!(
                    "timed out after {secs}s waiting for {needle} to reach the model; lane: {lane}\nmock:\n{}\nscreen (last output):\n{}\nsupervisor's stderr (last lines):\n{}",
                    self.mock.summary(),
                    screen_tail(&lane, 3000),
                    self.supervisor_said()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub fn item(&self, key: &str) -> serde_json::Value {
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
    pub fn wait_acked(&self, key: &str, secs: u64) -> (String, i64) {
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
    pub fn commands(&self, name: &str) -> Vec<u32> {
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
    pub fn wait_command(&self, name: &str, secs: u64) {
        let deadline = Instant::now() + Duration::from_secs(secs);
        while self.commands(name).is_empty() {
            if Instant::now() >= deadline {
                let lane = self.lane();
                panic!(
                    "timed out after {secs}s waiting for the agent to run {name}; lane: {lane}\nmock:\n{}\nscreen (last output):\n{}\nsupervisor's stderr (last lines):\n{}",
                    self.mock.summary(),
                    screen_tail(&lane, 3000),
                    self.supervisor_said()
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The agent process under the lane's shim.
    pub fn agent_pid(&self) -> i32 {
        let shim = self.lane()["pid"].as_i64().expect("lane has a pid") as i32;
        wait_for("the agent under the shim", 10, || {
            let kids =
                std::fs::read_to_string(format!("/proc/{shim}/task/{shim}/children")).ok()?;
            kids.split_whitespace().next()?.parse::<i32>().ok()
        })
    }

    /// `spice fleet down` and the supervisor's exit.
    pub fn down(&mut self) {
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

    pub fn report(&self, what: &str, d: Duration) {
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
pub fn screen_tail(lane: &serde_json::Value, chars: usize) -> String {
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
