//! Lanes where they meet: a supervisor restarted under a working agent (twice, by
//! SIGKILL and cleanly), a review lane taking the task a todo lane just finished, and
//! what a lane does when it cannot prepare a worktree. Fake agents are the scripted
//! programs in `fixtures/agents/`.

mod common;
use common::procs::{fleet_processes, kill9};
use common::{git, wait_for, TestEnv};
use std::path::Path;

/// A repository on `main` with profiles/ and lanes/ directories and git identity.
fn repo() -> TestEnv {
    let env = TestEnv::new();
    for (k, v) in [("user.email", "t@spice"), ("user.name", "t")] {
        git(&env.repo, &["config", k, v]);
    }
    git(&env.repo, &["checkout", "-q", "-b", "main"]);
    std::fs::write(env.repo.join("README"), "a repository\n").unwrap();
    git(&env.repo, &["add", "README"]);
    git(&env.repo, &["commit", "-q", "-m", "start"]);
    std::fs::create_dir_all(env.repo.join("lanes")).unwrap();
    std::fs::create_dir_all(env.repo.join("profiles")).unwrap();
    env
}

fn fixture(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/agents")
        .join(name)
        .display()
        .to_string()
}

/// The fake Codex (names its own thread, resumes by that name, refuses any other).
fn fake_codex_profile(env: &TestEnv) {
    std::fs::write(
        env.repo.join("profiles/fakecodex.toml"),
        format!(
            "command = [\"bash\", \"{f}\", \"{{spice}}\"]\n\
             resume = [\"bash\", \"{f}\", \"{{spice}}\", \"resume\", \"{{session_id}}\"]\n\
             mode = \"pty\"\n[transcript]\nformat = \"codex\"\n\
             dir = \"{{home}}/.codex/sessions\"\nglob = \"*/*/*/rollout-*.jsonl\"\n",
            f = fixture("fake-codex.sh")
        ),
    )
    .unwrap();
}

fn write_lane(env: &TestEnv, name: &str, text: &str) {
    std::fs::write(env.repo.join(format!("lanes/{name}.toml")), text).unwrap();
}

/// Waits until lane `a` runs an agent for `session` (a new session after a restart)
/// and returns its shim's pid.
fn running(env: &TestEnv, lane: &str, not: &[String]) -> (String, u32) {
    wait_for("the lane's agent to run", 30, || {
        let l = env.lane(lane);
        let session = l["session"].as_str()?.to_string();
        let pid = l["pid"].as_u64()? as u32;
        (!not.contains(&session) && l["state"] == "working").then_some((session, pid))
    })
}

#[test]
fn regression_a_supervisor_killed_twice_resumes_the_agents_own_conversation() {
    // Before: `fleet up` wrote the lane's row before reading the previous one, so
    // after a restart the successor resumed spice's session id, which the fake Codex
    // (like the real one) has no rollout of: "No saved session found", three times,
    // and the lane was held.
    let env = repo();
    fake_codex_profile(&env);
    let slow = "profile = \"fakecodex\"\nphases = [\"todo\"]\n[env]\n\
                FAKE_CODEX_SECONDS = \"120\"\nFAKE_CODEX_RESUME_SECONDS = \"120\"\n";
    write_lane(&env, "a", slow);
    let task = env.add(&["Survive restarts", "--project", "demo"]);
    let mut seen = Vec::new();
    let mut sup = env.fleet_up(&[]);
    let (first, _) = running(&env, "a", &seen);
    let rollout = wait_for("the rollout to be found", 30, || {
        env.lane("a")["transcript"]
            .as_str()
            .filter(|t| t.contains("rollout-"))
            .map(String::from)
    });
    seen.push(first);
    let worktree = env.run(&["task", "show", &task, "--json"]).json()["claim"]["worktree"]
        .as_str()
        .unwrap()
        .to_string();
    for round in 1..=2 {
        kill9(&mut sup);
        wait_for("every process of the killed fleet to end", 20, || {
            fleet_processes(&env).is_empty().then_some(())
        });
        sup = env.fleet_up(&[]);
        let (session, _) = running(&env, "a", &seen);
        seen.push(session);
        let launches = env.ledger_of(&task, "launched");
        assert_eq!(launches.len(), round + 1, "{launches:?}");
        let last = &launches[round]["detail"];
        assert_eq!(last["resume"], true, "round {round}: {last}");
        // The conversation the agent named, not a spice session id.
        let thread = launches[0]["detail"]["conversation"].as_str().unwrap();
        assert_ne!(last["conversation"].as_str(), Some(thread));
        assert!(
            rollout.contains(last["conversation"].as_str().unwrap()),
            "round {round}: resumed {} but the rollout is {rollout}",
            last["conversation"]
        );
        let show = env.run(&["task", "show", &task, "--json"]).json();
        assert_eq!(show["claim"]["worktree"], worktree.as_str(), "{show}");
    }
    // The brief after the second restart points at the rollout.
    let brief = std::fs::read_to_string(
        env.home
            .join("briefs")
            .join(format!("{}.md", seen.last().unwrap())),
    )
    .unwrap();
    assert!(brief.contains(&rollout), "{brief}");
    // Let it finish this time.
    kill9(&mut sup);
    wait_for("the killed fleet to end", 20, || {
        fleet_processes(&env).is_empty().then_some(())
    });
    write_lane(
        &env,
        "a",
        "profile = \"fakecodex\"\nphases = [\"todo\"]\n[env]\nFAKE_CODEX_RESUME_SECONDS = \"0.2\"\n",
    );
    common::finished(env.fleet_up(&["--until-idle"]));
    let show = env.run(&["task", "show", &task, "--json"]).json();
    assert_eq!(show["phase"], "review", "{show}");
    assert!(env.ledger_of(&task, "held").is_empty(), "{show}");
    let exits: Vec<String> = env
        .ledger_of(&task, "exited")
        .iter()
        .map(|e| e["detail"]["how"].as_str().unwrap().to_string())
        .collect();
    // Only the last session ended, by finishing: no resume failed.
    assert_eq!(exits, ["stopped: its task left its hands"], "{show}");
}

#[test]
fn regression_an_agent_left_by_a_killed_supervisor_is_ended_by_the_next() {
    // Before: the next supervisor overwrote the row naming the agent before reading
    // it, so an agent whose shim could not end it (here: stopped, so its parent-death
    // signal waits) ran on beside its successor.
    let env = repo();
    fake_codex_profile(&env);
    write_lane(
        &env,
        "a",
        "profile = \"fakecodex\"\nphases = [\"todo\"]\n[env]\n\
         FAKE_CODEX_SECONDS = \"120\"\nFAKE_CODEX_RESUME_SECONDS = \"120\"\n",
    );
    env.add(&["Orphan", "--project", "demo"]);
    let mut sup = env.fleet_up(&[]);
    let (first, shim) = running(&env, "a", &[]);
    let pid = nix::unistd::Pid::from_raw(shim as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGSTOP).unwrap();
    kill9(&mut sup);
    let mut sup = env.fleet_up(&[]);
    running(&env, "a", &[first]);
    let alive = || {
        std::fs::read_to_string(format!("/proc/{shim}/stat"))
            .ok()
            .and_then(|s| s.rsplit(')').next().map(|r| r.trim().to_string()))
            .is_some_and(|r| !r.starts_with('Z'))
    };
    wait_for(
        "the stopped agent of the killed supervisor to end",
        15,
        || (!alive()).then_some(()),
    );
    kill9(&mut sup);
}

#[test]
fn regression_home_in_a_profile_is_the_home_the_lane_gives_its_agent() {
    // Before: `{home}` expanded to the supervisor's HOME, so with a lane `[env] HOME`
    // the rollout was looked for where it is not, and a working agent was reported as
    // "waiting at a prompt".
    let env = repo();
    fake_codex_profile(&env);
    let lane_home = env.dir.path().join("lane-home");
    std::fs::create_dir_all(&lane_home).unwrap();
    write_lane(
        &env,
        "a",
        &format!(
            "profile = \"fakecodex\"\nphases = [\"todo\"]\nstart_timeout = \"1s\"\n[env]\n\
             HOME = \"{}\"\nFAKE_CODEX_SECONDS = \"3\"\n",
            lane_home.display()
        ),
    );
    let task = env.add(&["Own home", "--project", "demo"]);
    common::finished(env.fleet_up(&["--until-idle"]));
    let show = env.run(&["task", "show", &task, "--json"]).json();
    assert_eq!(show["phase"], "review", "{show}");
    let lane = env.lane("a");
    let transcript = lane["transcript"].as_str().unwrap_or_default();
    assert!(
        transcript.starts_with(lane_home.to_str().unwrap()),
        "{lane}"
    );
    assert!(lane["last_error"].is_null(), "{lane}");
}
