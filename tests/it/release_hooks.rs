//! `on_release` when a claim leaves a lane's hands without its phase completing: the
//! operator releasing it by hand (`spice task release`) and another claimant taking
//! it over once its lease lapsed. Either way the lane stops its agent, runs the
//! repository's `on_release` in the worktree (what `on_claim` began is undone), and
//! keeps the worktree as it is: it is not recycled into the pool.

use crate::common;
use common::{git, wait_for, TestEnv};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

const BED: &str = r#"[testbed]
paths = ["build"]
pool = 2

[hooks]
on_claim = ["sh", "-c", "echo claimed > hook-claimed"]
on_release = ["sh", "-c", "cat > hook-released.json"]
"#;

/// One lane of an agent that sleeps (it never completes its phase).
fn setup(lane_extra: &str) -> TestEnv {
    let lane = format!("profile = \"sleeper\"\nphases = [\"todo\"]\n{lane_extra}");
    let env = TestEnv::with_lanes(&[("a", &lane)]);
    std::fs::create_dir_all(env.repo.join("profiles")).unwrap();
    std::fs::write(
        env.repo.join("profiles/sleeper.toml"),
        "command = [\"sh\", \"-c\", \"exec sleep 300\"]\nmode = \"pty\"\n",
    )
    .unwrap();
    std::fs::write(env.repo.join("spice.toml"), BED).unwrap();
    std::fs::write(env.repo.join(".gitignore"), "build/\nhook-*\n").unwrap();
    git(&env.repo, &["add", "spice.toml", ".gitignore"]);
    git(&env.repo, &["commit", "-q", "-m", "hooks"]);
    env
}

fn claim_of(env: &TestEnv, task: &str) -> serde_json::Value {
    env.run(&["task", "show", task, "--json"]).json()["claim"].clone()
}

fn on_release_runs(env: &TestEnv, task: &str) -> Vec<serde_json::Value> {
    env.ledger_of(task, "stage_hook")
        .into_iter()
        .filter(|e| e["detail"]["stage"] == "on_release")
        .collect()
}

/// The lane ran on_release in `wt` for `task`, and kept the worktree out of the pool.
fn released_in_place(env: &TestEnv, task: &str, wt: &str) {
    let runs = wait_for("on_release to run", 60, || {
        let r = on_release_runs(env, task);
        (!r.is_empty()).then_some(r)
    });
    assert_eq!(runs.len(), 1, "{runs:#?}");
    assert_eq!(runs[0]["detail"]["outcome"], "passed", "{runs:#?}");
    let ev: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(std::path::Path::new(wt).join("hook-released.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(ev["stage"], "on_release", "{ev:#}");
    assert_eq!(ev["lane"], "a", "{ev:#}");
    assert!(std::path::Path::new(wt).join("hook-claimed").exists());
    assert!(env.ledger_of(task, "pool").is_empty(), "not recycled");
}

#[test]
fn a_claim_released_by_hand_runs_on_release_and_keeps_its_worktree() {
    let env = setup("lease = \"5m\"\n");
    let task = env.add(&["Sleep", "--project", "demo"]);
    let _sup = env.fleet_up(&[]);
    let claim = wait_for("the agent to run", 30, || {
        let c = claim_of(&env, &task);
        env.lane("a")["pid"].as_u64().map(|_| c)
    });
    let wt = claim["worktree"].as_str().unwrap().to_string();
    env.run(&[
        "task",
        "release",
        &task,
        "--claimant",
        claim["claimant"].as_str().unwrap(),
        "--fence",
        &claim["fence"].to_string(),
    ])
    .ok();
    released_in_place(&env, &task, &wt);
}

/// Regression (#40): `fleet down --release` released the lanes' claims after their
/// supervisor stopped, so no lane ran on_release: what on_claim began stayed.
#[test]
fn regression_fleet_down_release_runs_on_release_in_each_worktree() {
    let env = setup("lease = \"5m\"\n");
    let task = env.add(&["Sleep", "--project", "demo"]);
    let mut sup = env.fleet_up(&[]);
    let claim = wait_for("the agent to run", 30, || {
        let c = claim_of(&env, &task);
        env.lane("a")["pid"].as_u64().map(|_| c)
    });
    let wt = claim["worktree"].as_str().unwrap().to_string();
    let down = env.run(&["fleet", "down", "--release"]);
    assert!(sup.wait().unwrap().success());
    assert!(
        down.ok().contains(&format!("released demo-{task}")),
        "{}",
        down.stdout
    );
    assert!(down.stderr.is_empty(), "{}", down.stderr);
    assert!(claim_of(&env, &task).is_null());
    released_in_place(&env, &task, &wt);
    let run = &on_release_runs(&env, &task)[0];
    assert_eq!(run["actor"], claim["claimant"], "{run:#}");
    assert_eq!(run["detail"]["worktree"], wt.as_str(), "{run:#}");
}

#[test]
fn a_claim_taken_over_runs_on_release_once_its_agent_stopped() {
    let env = setup("lease = \"2s\"\nrenew = \"1s\"\n");
    let task = env.add(&["Sleep", "--project", "demo"]);
    let mut sup = env.fleet_up(&[]);
    wait_for("the agent to run", 30, || {
        env.lane("a")["pid"].as_u64().map(|_| ())
    });
    // The supervisor stops renewing (stopped, not dead): the lease lapses.
    let pid = Pid::from_raw(sup.id() as i32);
    kill(pid, Signal::SIGSTOP).unwrap();
    let claim = claim_of(&env, &task);
    let wt = claim["worktree"].as_str().unwrap().to_string();
    let fence = claim["fence"].to_string();
    wait_for("the lease to lapse and be taken over", 30, || {
        let r = env.run(&[
            "task",
            "takeover",
            &task,
            "--stale",
            &fence,
            "--claimant",
            "operator",
            "--lease",
            "10m",
        ]);
        (r.code == 0).then_some(())
    });

    kill(pid, Signal::SIGCONT).unwrap();
    released_in_place(&env, &task, &wt);
    assert_eq!(claim_of(&env, &task)["claimant"], "operator");
    sup.kill().unwrap();
}
