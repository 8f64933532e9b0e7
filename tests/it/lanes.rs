//! Lanes where they meet: a supervisor restarted under a working agent (twice, by
//! SIGKILL and cleanly), a review lane taking the task a todo lane just finished, and
//! what a lane does when it cannot prepare a worktree. Fake agents are the scripted
//! programs in `fixtures/agents/`.

use crate::common;
use common::procs::fleet_processes;
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

/// Lane `a` of the fake Codex, whose first command takes 120 s and a resume's
/// `resume_secs`.
fn slow_codex_lane(env: &TestEnv, resume_secs: &str) {
    write_lane(
        env,
        "a",
        &format!(
            "profile = \"fakecodex\"\nphases = [\"todo\"]\n[env]\n\
             FAKE_CODEX_SECONDS = \"120\"\nFAKE_CODEX_RESUME_SECONDS = \"{resume_secs}\"\n"
        ),
    );
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
    slow_codex_lane(&env, "120");
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
        sup.kill9();
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
    sup.kill9();
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
    slow_codex_lane(&env, "120");
    env.add(&["Orphan", "--project", "demo"]);
    let mut sup = env.fleet_up(&[]);
    let (first, shim) = running(&env, "a", &[]);
    let pid = nix::unistd::Pid::from_raw(shim as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGSTOP).unwrap();
    sup.kill9();
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
    sup.kill9();
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

/// A `todo` lane and a `review` lane of the demo agent on one repository.
fn todo_and_review(env: &TestEnv, extra: &str) {
    for (name, phase) in [("core", "todo"), ("review", "review")] {
        write_lane(
            env,
            name,
            &format!("profile = \"demo\"\nphases = [\"{phase}\"]\nlease = \"5m\"\n{extra}"),
        );
    }
}

#[test]
fn regression_a_review_lane_takes_each_task_the_todo_lane_finished_on_its_first_claim() {
    // Before: the review lane claimed the task, could not make a worktree because the
    // branch was still checked out in the todo lane's, released it and claimed again,
    // about once a second, forever; with --until-idle it stopped at once instead.
    let env = repo();
    todo_and_review(&env, "");
    let tasks: Vec<String> = (1..=3)
        .map(|i| env.add(&[&format!("Task {i}"), "--project", "demo"]))
        .collect();
    let run = common::finished(env.fleet_up(&["--until-idle", "--json"]));
    let inbox = env.run(&["inbox", "--all", "--json"]).json();
    assert_eq!(
        inbox.as_array().map(Vec::len),
        Some(0),
        "no takeover told: {inbox}"
    );
    for task in &tasks {
        let show = env.run(&["task", "show", task, "--json"]).json();
        assert_eq!(show["status"], "completed", "{show}\n{}", run.stdout);
        let claims = env.ledger_of(task, "claimed");
        let lanes: Vec<&str> = claims
            .iter()
            .map(|c| c["detail"]["lane"].as_str().unwrap_or("?"))
            .collect();
        assert_eq!(
            lanes,
            ["core", "review"],
            "one claim per lane, no churn: {show}"
        );
        // Each phase's completion released its claim; nothing else did.
        assert_eq!(env.ledger_of(task, "released").len(), 2, "{show}");
        // The review agent worked where the todo lane's commit is.
        let handle = show["handle"].as_str().unwrap();
        let review_wt = env.home.join("worktrees/review").join(handle);
        let log = git(&review_wt, &["log", "--format=%s"]);
        assert!(log.contains("demo: "), "{log}");
        // The todo lane's worktree let go of the branch (it was clean: removed).
        let handoff = env.ledger_of(task, "handoff");
        assert_eq!(handoff.len(), 1, "{show}");
        assert_eq!(handoff[0]["detail"]["freed"]["action"], "removed", "{show}");
        let at = |e: &serde_json::Value| {
            chrono::DateTime::parse_from_rfc3339(e["at"].as_str().unwrap())
                .unwrap()
                .timestamp_micros()
        };
        let done = at(&env.ledger_of(task, "phase_completed")[0]);
        let launched = env.ledger_of(task, "launched");
        let review_start = at(launched
            .iter()
            .find(|l| l["detail"]["lane"] == "review")
            .unwrap());
        // The todo lane released the task itself: its agent was not told of a
        // takeover when the review lane claimed it at once.
        for e in env.ledger_of(task, "exited") {
            assert_eq!(
                e["detail"]["how"], "stopped: its task left its hands",
                "{show}"
            );
        }
        eprintln!(
            "LANES todo phase --done to the review lane's agent launched: {:.2}s",
            (review_start - done) as f64 / 1e6
        );
    }
}

/// The todo → review hand-off is a state, not an error: the review lane waits for the
/// todo lane's agent to finish with the branch, and says so as `worktree_wait` events,
/// never as `error`, and the operator's `[notify]` (default events, which include
/// `error`) is not run for it. Before: the wait was the lane row's `last_error`, printed
/// as `error - waiting for lane core's agent … to finish` and notified.
#[test]
fn regression_a_hand_off_between_phases_is_no_error_and_pages_no_one() {
    let env = repo();
    todo_and_review(&env, "");
    let notified = env.dir.path().join("notified.jsonl");
    std::fs::write(
        env.repo.join("spice.toml"),
        "[notify]\ncommand = [\"sh\", \"-c\", \"cat >> \\\"$NOTIFIED\\\"\"]\nper_minute = 600\n",
    )
    .unwrap();
    git(&env.repo, &["add", "spice.toml"]);
    git(&env.repo, &["commit", "-q", "-m", "notify"]);
    let tasks: Vec<String> = (1..=3)
        .map(|i| env.add(&[&format!("Task {i}"), "--project", "demo"]))
        .collect();
    let run = common::finished(
        env.supervisor(
            env.cmd(&["fleet", "up", "--until-idle", "--json"])
                .env("NOTIFIED", &notified)
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped()),
        )
        .drained(),
    );
    // `fleet up --json` writes its events to stderr, one JSON object a line.
    let events: Vec<serde_json::Value> = run
        .stderr
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let errors: Vec<_> = events.iter().filter(|e| e["event"] == "error").collect();
    assert!(
        errors.is_empty(),
        "a hand-off reported as an error: {errors:?}"
    );
    let waits: Vec<serde_json::Value> = tasks
        .iter()
        .flat_map(|t| env.ledger_of(t, "worktree_wait"))
        .collect();
    assert!(
        !waits.is_empty(),
        "no review claim waited for the todo lane's agent; the test proves nothing:\n{}",
        run.stderr
    );
    for w in &waits {
        let reason = w["detail"]["reason"].as_str().unwrap();
        assert!(
            events
                .iter()
                .any(|e| e["event"] == "worktree_wait" && e["detail"] == reason),
            "the wait {reason:?} is not a worktree_wait event:\n{}",
            run.stderr
        );
    }
    let paged = std::fs::read_to_string(&notified).unwrap_or_default();
    assert!(
        !paged.contains("waiting for"),
        "paged for a hand-off: {paged}"
    );
    assert!(!paged.contains("\"error\""), "paged an error: {paged}");
    for task in &tasks {
        let show = env.run(&["task", "show", task, "--json"]).json();
        assert_eq!(show["status"], "completed", "{show}");
    }
    // The lanes' rows end with no error left on them.
    for lane in ["core", "review"] {
        let l = env.lane(lane);
        assert!(l["last_error"].is_null(), "{l}");
    }
}

#[test]
fn regression_a_rollout_never_found_before_the_kill_is_found_by_the_next_supervisor() {
    // A supervisor killed within a second of a Codex launch never found the rollout
    // (it searches once a second), so the ledger named only spice's session id and
    // the successor resumed that: "No saved session found". Built here by removing
    // what the first supervisor learnt from the rollout.
    let env = repo();
    fake_codex_profile(&env);
    slow_codex_lane(&env, "0.2");
    let task = env.add(&["Found late", "--project", "demo"]);
    let mut sup = env.fleet_up(&[]);
    let (first, _) = running(&env, "a", &[]);
    let rollout = wait_for("the rollout to be found", 30, || {
        env.lane("a")["transcript"]
            .as_str()
            .filter(|t| t.contains("rollout-"))
            .map(String::from)
    });
    sup.kill9();
    wait_for("the killed fleet to end", 20, || {
        fleet_processes(&env).is_empty().then_some(())
    });
    env.sql_write(&format!(
        "DELETE FROM ledger WHERE kind = 'conversation' AND task_id = '{task}'; \
         UPDATE lanes SET transcript = NULL, conversation = '{first}'"
    ));
    let mut sup = env.fleet_up(&["--until-idle"]);
    let ended = wait_for("the fleet to finish", 30, || {
        sup.try_wait().unwrap().or_else(|| {
            // A successor that resumes the wrong conversation dies and is held:
            // stop waiting and say so.
            (!env.ledger_of(&task, "held").is_empty()).then(|| {
                sup.kill9();
                sup.try_wait().unwrap().unwrap()
            })
        })
    });
    assert!(env.ledger_of(&task, "held").is_empty(), "the lane was held");
    assert!(ended.success());
    let launches = env.ledger_of(&task, "launched");
    assert_eq!(launches.len(), 2, "{launches:?}");
    let resumed = launches[1]["detail"]["conversation"].as_str().unwrap();
    assert_ne!(resumed, first);
    assert!(
        rollout.contains(resumed),
        "resumed {resumed}; rollout {rollout}"
    );
    let show = env.run(&["task", "show", &task, "--json"]).json();
    assert_eq!(show["phase"], "review", "{show}");
}

#[test]
fn regression_a_takeover_during_a_crash_loop_hold_ends_the_hold_not_the_lane() {
    // Before: the hold loop passed the renewal's refusal up, and the lane's thread
    // ended with "cannot renew …" for the rest of the run.
    let env = repo();
    std::fs::write(
        env.repo.join("profiles/dies.toml"),
        "command = [\"sh\", \"-c\", \"exit 3\"]\nmode = \"pty\"\n",
    )
    .unwrap();
    write_lane(
        &env,
        "a",
        "profile = \"dies\"\nphases = [\"todo\"]\nrenew = \"1s\"\n",
    );
    let task = env.add(&["Crashes", "--project", "demo"]);
    let mut sup = env.fleet_up(&[]);
    wait_for("the hold", 30, || {
        (env.lane("a")["state"] == "held").then_some(())
    });
    // The lease lapses (a suspended machine, say) and the operator takes it over.
    env.sql_write("UPDATE claims SET lease_until = 1");
    let fence = env.run(&["task", "show", &task, "--json"]).json()["claim"]["fence"]
        .as_i64()
        .unwrap();
    env.run(&[
        "task",
        "takeover",
        &task,
        "--stale",
        &fence.to_string(),
        "--claimant",
        "operator",
    ])
    .ok();
    let lane = wait_for("the lane to notice", 20, || {
        let l = env.lane("a");
        (l["state"] != "held").then_some(l)
    });
    assert!(
        lane["last_error"]
            .as_str()
            .is_some_and(|e| e.contains("lost the claim") && e.contains("while the lane was held")),
        "{lane}"
    );
    // The lane goes on: idle (nothing else is ready), not stopped by an error.
    wait_for("the lane to be idle", 20, || {
        (env.lane("a")["state"] == "idle").then_some(())
    });
    sup.kill9();
}

#[test]
fn regression_until_idle_fails_when_a_lane_stopped_on_an_error() {
    // Before: `fleet up --until-idle` exited 0 though every lane had errored.
    let env = repo();
    // Worktrees under a regular file: `fleet check` passes, the lane cannot make its
    // task's worktree, releases the task and (with --until-idle) stops on that error.
    let not_a_dir = env.dir.path().join("a-file");
    std::fs::write(&not_a_dir, "").unwrap();
    write_lane(
        &env,
        "a",
        &format!(
            "profile = \"demo\"\nphases = [\"todo\"]\nworktrees = \"{}\"\n",
            not_a_dir.display()
        ),
    );
    env.add(&["Anything", "--project", "demo"]);
    let run = common::to_run(
        env.cmd(&["fleet", "up", "--until-idle"])
            .env("HOME", env.agent_home())
            .output()
            .unwrap(),
    );
    let err = run.stderr.lines().last().unwrap_or_default().to_string();
    assert_ne!(run.code, 0, "{}", run.stderr);
    assert!(
        err.starts_with("spice: ") && err.contains("1 of 1 lane(s) stopped with an error (a: "),
        "{}",
        run.stderr
    );
}

/// A lane whose repository is bare has no branch to start from: before, `fleet check`
/// passed it and the lane stopped on the error once running; now the run is refused
/// before anything starts, naming the lane.
#[test]
fn a_lane_on_a_bare_repository_is_refused_before_the_run() {
    let env = repo();
    let bare = env.dir.path().join("bare.git");
    git(
        env.dir.path(),
        &["init", "-q", "--bare", bare.to_str().unwrap()],
    );
    write_lane(
        &env,
        "a",
        &format!(
            "profile = \"demo\"\nphases = [\"todo\"]\nrepo = \"{}\"\n",
            bare.display()
        ),
    );
    let task = env.add(&["Anything", "--project", "demo"]);
    let run = env.run(&["fleet", "up", "--until-idle"]);
    run.fails(2, "1 lane(s) cannot start: lane a: ");
    assert!(env.ledger_of(&task, "claimed").is_empty());
}
