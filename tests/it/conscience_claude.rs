//! The real `claude -p` as the conscience's judge (issue #17), offline: the judge
//! command of `maxims/conscience.toml` is Claude Code in headless mode, its prompt on
//! stdin, talking to the mock model server on 127.0.0.1 (in a loopback-only network
//! namespace where allowed). Ignored unless asked for (`--include-ignored`); then a
//! missing CLI is a failure, never a silent pass.

use crate::common;
use crate::mock;

use common::TestEnv;
use mock::{Mock, Step};
use std::path::{Path, PathBuf};

/// The pinned Claude Code, else one on `PATH`.
fn claude() -> PathBuf {
    let pinned =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/agents/node_modules/.bin/claude");
    if pinned.exists() {
        return pinned;
    }
    std::env::var_os("PATH")
        .and_then(|p| {
            std::env::split_paths(&p)
                .map(|d| d.join("claude"))
                .find(|p| p.is_file())
        })
        .unwrap_or_else(|| {
            panic!("claude is not installed (npm install --no-save --prefix tests/agents puts it in tests/agents/node_modules/.bin)")
        })
}

/// Moves this thread (and what it spawns) into a network namespace with only
/// loopback, where allowed.
fn loopback_only() {
    if let Err(e) = nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNET) {
        eprintln!("no loopback-only network namespace ({e}); claude runs on the host network");
        return;
    }
    let up = std::process::Command::new("ip")
        .args(["link", "set", "lo", "up"])
        .status();
    assert!(
        up.is_ok_and(|s| s.success()),
        "could not bring up lo (is iproute2 installed?)"
    );
}

#[test]
#[ignore = "needs the real claude CLI (npm install --no-save --prefix tests/agents)"]
fn the_real_claude_p_judges_a_statement() {
    let claude = claude();
    loopback_only();
    let model = Mock::start(
        std::net::TcpListener::bind("127.0.0.1:0").unwrap(),
        vec![Step::Say("YES".into()), Step::Say("YES".into())],
    );
    let env = TestEnv::new();
    // The lane the scan publishes for (a lane no lane file defines is refused).
    std::fs::create_dir_all(env.repo.join("lanes")).unwrap();
    std::fs::write(env.repo.join("lanes/a.toml"), "profile = \"demo\"\n").unwrap();
    std::fs::create_dir_all(env.repo.join("maxims")).unwrap();
    std::fs::write(
        env.repo.join("maxims/conscience.toml"),
        format!(
            "[judge]\nargv = [\"{}\", \"-p\", \"--model\", \"mock-model\"]\ntimeout = \"60s\"\nattempts = 2\n",
            claude.display()
        ),
    )
    .unwrap();
    std::fs::write(
        env.repo.join("maxims/no-mocks.toml"),
        "message = \"Test against the real database, not a mock.\"\nwords = [\"mock\"]\njudges = true\n",
    )
    .unwrap();
    let transcript = env.dir.path().join("s1.jsonl");
    std::fs::write(
        &transcript,
        concat!(
            r#"{"type":"user","uuid":"u1","sessionId":"s1","cwd":"/tmp/x","timestamp":"2026-01-01T00:00:00.000Z","message":{"role":"user","content":"Do it."}}"#,
            "\n",
            r#"{"type":"assistant","uuid":"u2","sessionId":"s1","cwd":"/tmp/x","timestamp":"2026-01-01T00:00:01.000Z","message":{"id":"m1","role":"assistant","content":[{"type":"text","text":"I'll mock the database to save time."}],"stop_reason":"end_turn"}}"#,
            "\n"
        ),
    )
    .unwrap();
    let run = common::to_run(
        env.cmd(&[
            "conscience",
            "scan",
            &transcript.display().to_string(),
            "--lane",
            "a",
            "--json",
        ])
        .env("ANTHROPIC_BASE_URL", model.url())
        .env("ANTHROPIC_API_KEY", "dummy")
        .env("DISABLE_AUTOUPDATER", "1")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .env("DISABLE_TELEMETRY", "1")
        .env("CLAUDE_CODE_MAX_RETRIES", "0")
        .output()
        .unwrap(),
    );
    run.ok();
    let log = env.run(&["conscience", "log", "--json"]).json();
    let steps: Vec<(String, String)> = log
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["step"].as_str().unwrap().to_string(),
                e["detail"]["raw"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    let want: Vec<(String, String)> = [
        ("fired", ""),
        ("judge", "YES"),
        ("judge", "YES"),
        ("published", ""),
    ]
    .iter()
    .map(|(a, b)| (a.to_string(), b.to_string()))
    .collect();
    assert_eq!(steps, want, "{log:#}");
    // Each judge's prompt reached the model, worded differently, with the statement.
    let turns = model.turns();
    assert_eq!(
        turns.len(),
        2,
        "{:?}",
        turns.iter().map(|t| t.reply.clone()).collect::<Vec<_>>()
    );
    let prompts: Vec<String> = turns.iter().map(mock::last_user_text).collect();
    assert!(
        prompts
            .iter()
            .all(|p| p.contains("I'll mock the database to save time.")),
        "{prompts:?}"
    );
    assert_ne!(prompts[0], prompts[1]);
}
