//! A hermetic environment for driving the real `spice` binary: a temporary git
//! repository, a temporary `SPICE_HOME`, and a cleared environment.
#![allow(dead_code)]

pub mod backend;
pub mod clocked;
pub mod console;
pub mod loopfs;
pub mod pg;
pub mod procs;
pub mod running;
mod supervisor;
pub use supervisor::Supervisor;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

pub struct TestEnv {
    pub dir: tempfile::TempDir,
    pub repo: PathBuf,
    pub home: PathBuf,
}

/// What a run of the binary produced.
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    /// Asserts success and returns stdout.
    #[track_caller]
    pub fn ok(&self) -> &str {
        assert_eq!(
            self.code, 0,
            "expected success; stderr: {}\nstdout: {}",
            self.stderr, self.stdout
        );
        &self.stdout
    }
    /// Asserts failure with `code` and a one-line `spice: ` error containing `needle`.
    #[track_caller]
    pub fn fails(&self, code: i32, needle: &str) -> String {
        assert_eq!(
            self.code, code,
            "wrong exit code; stderr: {}\nstdout: {}",
            self.stderr, self.stdout
        );
        let err = self.stderr.trim_end();
        assert!(
            err.starts_with("spice: "),
            "error must start with 'spice: ': {err:?}"
        );
        assert!(!err.contains('\n'), "error must be one line: {err:?}");
        assert!(
            err.contains(needle),
            "error {err:?} should mention {needle:?}"
        );
        assert!(!err.contains("panicked"), "{err}");
        err.to_string()
    }
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(self.ok()).unwrap_or_else(|e| panic!("bad JSON {e}: {}", self.stdout))
    }
}

pub fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_spice"))
}

impl TestEnv {
    pub fn new() -> TestEnv {
        let dir = tempfile::tempdir().expect("tempdir");
        let repo = dir.path().join("repo");
        let home = dir.path().join("home");
        std::fs::create_dir_all(&repo).unwrap();
        let st = Command::new("git")
            .args(["init", "-q"])
            .current_dir(&repo)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .status()
            .expect("git runs");
        assert!(st.success());
        TestEnv { dir, repo, home }
    }

    /// A command for the binary with a cleared environment, `SPICE_HOME` set, run in the repo.
    pub fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new(bin());
        c.args(args)
            .current_dir(&self.repo)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", self.dir.path())
            .env("SPICE_HOME", &self.home)
            .stdin(Stdio::null());
        c
    }

    pub fn run(&self, args: &[&str]) -> Run {
        to_run(self.cmd(args).output().expect("spice runs"))
    }

    pub fn run_stdin(&self, args: &[&str], input: &str) -> Run {
        use std::io::Write;
        let mut child = self
            .cmd(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spice runs");
        child
            .stdin
            .take()
            .unwrap()
            .write_all(input.as_bytes())
            .unwrap();
        to_run(child.wait_with_output().unwrap())
    }

    /// Steers `target` with `--force` (no lane file needed: what these tests look at is
    /// the item, not the lane) and returns the new item's key.
    #[track_caller]
    pub fn steer_forced(&self, target: &str, msg: &str) -> String {
        let key = self
            .run(&["steer", "--force", target, msg])
            .ok()
            .trim()
            .to_string();
        assert!(spice::stamp::is_stamp(&key), "{key}");
        key
    }

    /// The steering item `key` as `spice inbox --all --json` shows it.
    #[track_caller]
    pub fn item(&self, key: &str) -> serde_json::Value {
        let all = self.run(&["inbox", "--all", "--json"]).json();
        all.as_array()
            .unwrap()
            .iter()
            .find(|i| i["key"] == key)
            .cloned()
            .unwrap_or_else(|| panic!("no item {key} in {all}"))
    }

    /// Adds a task and returns its id.
    pub fn add(&self, args: &[&str]) -> String {
        let mut a = vec!["task", "add", "--json"];
        a.extend_from_slice(args);
        self.run(&a).json()["id"].as_str().unwrap().to_string()
    }

    pub fn db(&self) -> PathBuf {
        self.home.join("spice.db")
    }

    /// A read-only look at the database, for assertions the CLI does not expose.
    pub fn sql(&self) -> rusqlite::Connection {
        rusqlite::Connection::open_with_flags(self.db(), rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .unwrap()
    }

    /// Writes behind spice's back, to build states the CLI refuses to create.
    pub fn sql_write(&self, sql: &str) {
        rusqlite::Connection::open(self.db())
            .unwrap()
            .execute_batch(sql)
            .unwrap();
    }

    pub fn count(&self, sql: &str) -> i64 {
        self.sql().query_row(sql, [], |r| r.get(0)).unwrap()
    }
}

pub fn to_run(o: Output) -> Run {
    Run {
        code: o.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
    }
}

pub fn shared_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared")
}

/// Panics unless every object the refs of `repo` reach is there (`git fsck
/// --connectivity-only`).
pub fn assert_history_whole(repo: &Path) {
    let fsck = Command::new("git")
        .args(["fsck", "--connectivity-only", "--no-dangling"])
        .current_dir(repo)
        .output()
        .unwrap();
    assert!(
        fsck.status.success(),
        "{}",
        String::from_utf8_lossy(&fsck.stderr)
    );
}

/// Runs git in `dir` with a fixed identity; panics with git's stderr on failure.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@t")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@t")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Polls `f` every 100 ms until it returns `Some`, or panics after `secs` seconds
/// naming what it waited for.
pub fn wait_for<T>(what: &str, secs: u64, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(secs);
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "timed out after {secs}s waiting for {what}"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

/// Checks `f` every 100 ms for `secs` seconds, failing at the first check that
/// finds it false: for what must *not* happen within a window (a lane that must stay
/// at rest), observed throughout rather than slept through and looked at once.
#[track_caller]
pub fn stays(what: &str, secs: u64, mut f: impl FnMut() -> Result<(), String>) {
    let end = std::time::Instant::now() + std::time::Duration::from_secs(secs);
    while std::time::Instant::now() < end {
        if let Err(why) = f() {
            panic!("{what} did not hold: {why}");
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

impl TestEnv {
    /// A repository on `main`, with a git identity, whose committed `lanes/` holds one
    /// lane file per `(name, text)`.
    pub fn with_lanes(lanes: &[(&str, &str)]) -> TestEnv {
        let env = TestEnv::new();
        for (k, v) in [("user.email", "demo@spice"), ("user.name", "demo")] {
            git(&env.repo, &["config", k, v]);
        }
        git(&env.repo, &["checkout", "-q", "-b", "main"]);
        std::fs::create_dir_all(env.repo.join("lanes")).unwrap();
        for (name, text) in lanes {
            std::fs::write(env.repo.join(format!("lanes/{name}.toml")), text).unwrap();
        }
        git(&env.repo, &["add", "lanes"]);
        git(&env.repo, &["commit", "-q", "-m", "lanes"]);
        env
    }

    /// Every lane of `spice fleet status --json`.
    pub fn lanes(&self) -> Vec<serde_json::Value> {
        self.run(&["fleet", "status", "--json"]).json()["lanes"]
            .as_array()
            .unwrap()
            .clone()
    }

    /// One lane of `spice fleet status --json`.
    pub fn lane(&self, name: &str) -> serde_json::Value {
        self.lanes()
            .into_iter()
            .find(|l| l["lane"] == name)
            .unwrap_or_else(|| panic!("no lane {name} in fleet status"))
    }
}

impl TestEnv {
    /// The HOME fleet tests give their agents (where transcripts go).
    pub fn agent_home(&self) -> PathBuf {
        self.dir.path().join("agent-home")
    }

    /// `spice fleet up ARGS…` in the background, agents' HOME set, output captured;
    /// stopped if the test ends while it runs.
    pub fn fleet_up(&self, args: &[&str]) -> Supervisor {
        let mut a = vec!["fleet", "up"];
        a.extend_from_slice(args);
        self.supervisor(self.cmd(&a).stdout(Stdio::piped()).stderr(Stdio::piped()))
            .drained()
    }

    /// Spawns `cmd` (a `fleet up` built by the test) with the agents' HOME set, as a
    /// [`Supervisor`] that never outlives the test.
    pub fn supervisor(&self, cmd: &mut Command) -> Supervisor {
        Supervisor::spawn(self, cmd.env("HOME", self.agent_home()))
    }

    /// A task's ledger entries of one kind, oldest first.
    pub fn ledger_of(&self, task: &str, kind: &str) -> Vec<serde_json::Value> {
        let show = self.run(&["task", "show", task, "--json"]).json();
        show["ledger"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["kind"] == kind)
            .cloned()
            .collect()
    }
}

/// Waits for a supervisor to end by itself and requires that it succeeded.
#[track_caller]
pub fn finished(sup: Supervisor) -> Run {
    sup.finished()
}

/// A profile of the scripted demo agent (interactive, in a PTY, its transcript in
/// Claude Code's format) whose work commands take `secs` seconds each, so a test can
/// act while it works.
pub fn slow_profile(secs: u32) -> String {
    format!(
        r#"command = ["{{spice}}", "demo-agent", "--session-id", "{{session_id}}", "--brief-file", "{{brief_file}}", "--interactive", "--command-seconds", "{secs}"]
resume = ["{{spice}}", "demo-agent", "--resume", "{{session_id}}", "--interactive", "--command-seconds", "{secs}"]
mode = "pty"
[transcript]
format = "claude"
dir = "{{home}}/.claude/projects/{{cwd_slug}}"
glob = "{{session_id}}.jsonl"
"#
    )
}
