//! `SPICE_DEPTH`: every process spice launches carries its parent's depth plus one (a
//! scripted agent and a stage hook print theirs), and a command that starts agents
//! refuses at or past `SPICE_MAX_DEPTH` (default 2) with one line and exit 3, even
//! when it is an agent of the fleet that tries.

use crate::common;
use common::{git, TestEnv};

/// A lane of a scripted headless agent that writes its environment and what a
/// `spice fleet up` of its own said, then completes its phase; an `on_claim` hook
/// that writes its depth.
fn setup() -> TestEnv {
    let env = TestEnv::with_lanes(&[("a", "profile = \"envdump\"\nphases = [\"todo\"]\n")]);
    let fixtures = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/agents");
    let out = env.dir.path().join("out");
    std::fs::create_dir_all(&out).unwrap();
    // What the agent writes outside its worktree, granted to it by its lane.
    std::fs::write(
        env.repo.join("lanes/a.toml"),
        format!(
            "profile = \"envdump\"\nphases = [\"todo\"]\nwritable = [\"{}\"]\n",
            out.display()
        ),
    )
    .unwrap();
    let script = env.dir.path().join("envdump.sh");
    std::fs::write(
        &script,
        format!(
            "#!/usr/bin/env bash\nset -u\nspice=$1 id=$2\n. '{}/claude-transcript.sh'\n\
             env > '{out}/agent-env'\n\
             \"$spice\" fleet up --until-idle 2> '{out}/nested-err'; echo $? > '{out}/nested-code'\n\
             rec user '{{\"role\":\"user\",\"content\":\"go\"}}'\n\
             echo hi > hi.txt && git add hi.txt && git commit -qm hi\n\
             \"$spice\" task phase \"$SPICE_TASK\" --done --claimant \"$SPICE_SESSION\" > /dev/null\n\
             say \"Done.\"\n",
            fixtures.display(),
            out = out.display()
        ),
    )
    .unwrap();
    std::fs::create_dir_all(env.repo.join("profiles")).unwrap();
    std::fs::write(
        env.repo.join("profiles/envdump.toml"),
        format!(
            "command = [\"bash\", \"{}\", \"{{spice}}\", \"{{session_id}}\", \"{{brief_file}}\"]\nmode = \"headless\"\n\
             [transcript]\nformat = \"claude\"\n\
             dir = \"{{home}}/.claude/projects/{{cwd_slug}}\"\nglob = \"{{session_id}}.jsonl\"\n",
            script.display()
        ),
    )
    .unwrap();
    std::fs::write(
        env.repo.join("spice.toml"),
        format!(
            "[hooks]\non_claim = [\"sh\", \"-c\", \"echo $SPICE_DEPTH > '{}/hook-depth'\"]\n",
            out.display()
        ),
    )
    .unwrap();
    git(&env.repo, &["add", "profiles", "spice.toml", "lanes"]);
    git(&env.repo, &["commit", "-q", "-m", "envdump"]);
    env
}

fn out(env: &TestEnv, name: &str) -> String {
    std::fs::read_to_string(env.dir.path().join("out").join(name))
        .unwrap_or_else(|e| panic!("{name}: {e}"))
        .trim()
        .to_string()
}

fn up(env: &TestEnv, depth: Option<&str>) -> common::Run {
    env.add(&["Dump", "--project", "demo"]);
    let mut cmd = env.cmd(&["fleet", "up", "--until-idle"]);
    cmd.env("HOME", env.agent_home());
    if let Some(d) = depth {
        cmd.env("SPICE_DEPTH", d);
    }
    common::to_run(cmd.output().unwrap())
}

#[test]
fn the_depth_reaches_agents_and_hooks_one_deeper() {
    let env = setup();
    up(&env, None).ok();
    let agent_env = out(&env, "agent-env");
    assert!(
        agent_env.lines().any(|l| l == "SPICE_DEPTH=1"),
        "{agent_env}"
    );
    assert_eq!(out(&env, "hook-depth"), "1");
}

#[test]
fn an_agent_past_the_limit_cannot_start_a_fleet_of_its_own() {
    let env = setup();
    // This supervisor runs under an agent already: its agents are at depth 2.
    up(&env, Some("1")).ok();
    let agent_env = out(&env, "agent-env");
    assert!(
        agent_env.lines().any(|l| l == "SPICE_DEPTH=2"),
        "{agent_env}"
    );
    assert_eq!(out(&env, "hook-depth"), "2");
    assert_eq!(out(&env, "nested-code"), "3");
    let err = out(&env, "nested-err");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with(
            "spice: refusing to start agents: SPICE_DEPTH is 2, at or past the maximum 2"
        ),
        "{err}"
    );
}

#[test]
fn a_launch_past_the_limit_is_refused_with_one_line() {
    let env = setup();
    let r = up(&env, Some("2"));
    r.fails(
        3,
        "refusing to start agents: SPICE_DEPTH is 2, at or past the maximum 2",
    );
    assert!(!env.home.join("worktrees").exists(), "nothing started");
    assert!(env.run(&["task", "claims", "--json"]).json() == serde_json::json!([]));
    // The maximum is the operator's to raise.
    let mut cmd = env.cmd(&["fleet", "up", "--until-idle"]);
    cmd.env("HOME", env.agent_home())
        .env("SPICE_DEPTH", "2")
        .env("SPICE_MAX_DEPTH", "3");
    common::to_run(cmd.output().unwrap()).ok();
    assert_eq!(out(&env, "hook-depth"), "3");
    // Bad values are named.
    let mut cmd = env.cmd(&["fleet", "up", "--until-idle"]);
    cmd.env("SPICE_DEPTH", "deep");
    common::to_run(cmd.output().unwrap()).fails(2, "SPICE_DEPTH=\"deep\": not a whole number");
    let mut cmd = env.cmd(&["demo"]);
    cmd.env("SPICE_DEPTH", "5");
    common::to_run(cmd.output().unwrap()).fails(3, "SPICE_DEPTH is 5");
}
