//! What needs the operator, first (issue #38): `spice fleet status` leads with one
//! queue, most urgent first, each entry with since when, its lane and task, what it is
//! about and the command that resolves it; `--json` carries the same as `needs`.

use crate::common;
use common::{wait_for, TestEnv};
use serde_json::Value;

fn needs(env: &TestEnv) -> Vec<Value> {
    env.run(&["fleet", "status", "--json"]).json()["needs"]
        .as_array()
        .unwrap_or_else(|| panic!("no needs in fleet status --json"))
        .clone()
}

#[test]
fn a_stale_claim_and_a_maxim_proposal_need_you_until_resolved() {
    let env = TestEnv::with_lanes(&[("a", "profile = \"demo\"\n")]);
    assert!(needs(&env).is_empty());
    let text = env.run(&["fleet", "status"]).ok().to_string();
    assert!(text.contains("Nothing needs you."), "{text}");
    let stale = env.add(&["Left behind", "--project", "demo"]);
    env.run(&[
        "task",
        "claim",
        &stale,
        "--claimant",
        "ghost",
        "--lane",
        "a",
        "--lease",
        "1s",
    ])
    .ok();
    let proposal = env.add(&["Maxim: no silent fallbacks", "--tag", "maxim-proposal"]);
    let queue = wait_for("the claim to lapse", 10, || {
        let q = needs(&env);
        (q.len() == 2).then_some(q)
    });
    // The stale claim first (more urgent), then the proposal.
    assert_eq!(queue[0]["kind"], "stale_claim", "{queue:?}");
    assert_eq!(queue[0]["task_id"], stale.as_str(), "{queue:?}");
    assert_eq!(queue[0]["lane"], "a", "{queue:?}");
    assert!(queue[0]["fence"].as_i64().is_some(), "{queue:?}");
    assert!(queue[0]["since"].as_str().is_some(), "{queue:?}");
    assert_eq!(queue[1]["kind"], "proposal", "{queue:?}");
    assert_eq!(queue[1]["task_id"], proposal.as_str(), "{queue:?}");
    let resolve = queue[0]["resolve"].as_str().unwrap().to_string();
    assert!(resolve.starts_with("spice task takeover "), "{resolve}");
    // The text leads with the same queue, aligned under headers, then the lanes.
    let text = env.run(&["fleet", "status"]).ok().to_string();
    let lines: Vec<&str> = text.lines().collect();
    let at = lines
        .iter()
        .position(|l| *l == "Needs you (2):")
        .unwrap_or_else(|| panic!("{text}"));
    let header = lines[at + 1];
    assert!(header.trim_start().starts_with("AGO"), "{text}");
    let column = header.find("RESOLVE WITH").unwrap();
    assert_eq!(
        lines[at + 2].find("spice task takeover"),
        Some(column),
        "{text}"
    );
    assert!(lines[at + 2].contains("stale_claim"), "{text}");
    assert!(lines[at + 3].contains("proposal"), "{text}");
    assert!(
        text.lines()
            .any(|l| l.starts_with("LANE") && l.contains("STATE")),
        "{text}"
    );
    // Resolved by the command it names: the operator's claim is live, so it is gone.
    let argv: Vec<&str> = resolve.split_whitespace().skip(1).collect();
    env.run(&argv).ok();
    let queue = needs(&env);
    assert_eq!(queue.len(), 1, "{queue:?}");
    assert_eq!(queue[0]["kind"], "proposal", "{queue:?}");
    env.run(&["task", "done", &proposal]).ok();
    assert!(needs(&env).is_empty());
}

/// An entry no lane state says (here a claim whose lease lapses with no commit at
/// all) is a `needs` event as it enters the queue, and runs the operator's `[notify]`
/// (default events) once.
#[test]
fn a_stale_claim_entering_the_queue_is_notified_once() {
    let env = TestEnv::with_lanes(&[("a", "profile = \"demo\"\nprojects = [\"demo\"]\n")]);
    let notified = env.dir.path().join("notified.jsonl");
    std::fs::write(
        env.repo.join("spice.toml"),
        "[notify]\ncommand = [\"sh\", \"-c\", \"cat >> \\\"$NOTIFIED\\\"\"]\n",
    )
    .unwrap();
    common::git(&env.repo, &["add", "spice.toml"]);
    common::git(&env.repo, &["commit", "-q", "-m", "notify"]);
    let _fleet = env.supervisor(
        env.cmd(&["fleet", "up"])
            .env("NOTIFIED", &notified)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null()),
    );
    wait_for("the lane to go idle", 30, || {
        (env.lane("a")["state"] == "idle").then_some(())
    });
    let stale = env.add(&["Left behind", "--project", "elsewhere"]);
    env.run(&[
        "task",
        "claim",
        &stale,
        "--claimant",
        "ghost",
        "--lease",
        "1s",
    ])
    .ok();
    let told = wait_for("the stale claim to be notified", 20, || {
        let text = std::fs::read_to_string(&notified).unwrap_or_default();
        text.lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .find(|e| e["event"] == "needs")
    });
    let detail = told["detail"].as_str().unwrap();
    assert!(
        detail.starts_with("stale_claim: the lease of ghost"),
        "{told}"
    );
    assert!(detail.contains("spice task takeover"), "{told}");
    common::stays("no second notification of the same entry", 5, || {
        let text = std::fs::read_to_string(&notified).unwrap_or_default();
        let needs = text
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|e| e["event"] == "needs")
            .count();
        match needs {
            1 => Ok(()),
            n => Err(format!("{n} needs notifications: {text}")),
        }
    });
}

/// Regression (issue 38): a lane's error stood in the queue for good: a worktree that
/// could not be made (released, next try in Ns) still "needed" the operator hours
/// after the lane had recovered and worked on. It leaves the queue when the lane
/// next launches an agent; the ledger and the log keep it.
#[test]
fn regression_an_error_leaves_the_queue_once_the_lane_recovers() {
    let env = TestEnv::new();
    common::git(&env.repo, &["commit", "-q", "--allow-empty", "-m", "root"]);
    let wts = env.dir.path().join("wts");
    std::fs::create_dir_all(env.repo.join("lanes")).unwrap();
    std::fs::write(
        env.repo.join("lanes/a.toml"),
        format!(
            "profile = \"demo\"\nphases = [\"todo\"]\nworktrees = \"{}\"\n",
            wts.display()
        ),
    )
    .unwrap();
    let task = env.add(&["Blocked place", "--project", "demo"]);
    let place = wts.join(format!("demo-{task}"));
    std::fs::create_dir_all(&place).unwrap();
    std::fs::write(place.join("precious.txt"), "mine").unwrap();
    let _fleet = env.fleet_up(&[]);
    let error = wait_for("the error in the queue", 30, || {
        needs(&env).into_iter().find(|n| n["kind"] == "error")
    });
    assert!(
        error["what"].as_str().unwrap().contains("next try in"),
        "{error}"
    );
    // The operator moves the obstacle away; the lane's next try launches the agent.
    std::fs::rename(&place, env.dir.path().join("moved")).unwrap();
    wait_for("the lane to launch its agent", 60, || {
        (!env.ledger_of(&task, "launched").is_empty()).then_some(())
    });
    wait_for("the error to leave the queue", 10, || {
        let q = needs(&env);
        (!q.iter().any(|n| n["kind"] == "error")).then_some(())
    });
    assert!(env.lane("a")["last_error"].is_null(), "{}", env.lane("a"));
}
