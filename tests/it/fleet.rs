//! `spice fleet up` with two lanes of the scripted demo agent on one repository, twice
//! in a row on the same state: claims, worktrees, steering delivered and retired from
//! the transcript, phases completed and merged, the next task claimed.

use crate::common;
use common::{git, wait_for, TestEnv};

fn setup() -> TestEnv {
    let lane = "profile = \"demo\"\nphases = [\"todo\"]\nlease = \"5m\"\n";
    TestEnv::with_lanes(&[("a", lane), ("b", lane)])
}

fn up(env: &TestEnv) -> serde_json::Value {
    let out = env
        .cmd(&["fleet", "up", "--until-idle", "--json"])
        .env("HOME", env.agent_home())
        .output()
        .unwrap();
    let r = common::to_run(out);
    r.json()
}

/// Every task handle the lanes of one run claimed.
fn claimed_in(reports: &serde_json::Value) -> Vec<String> {
    let lanes = reports.as_array().unwrap().iter();
    lanes
        .flat_map(|r| r["claimed"].as_array().unwrap().iter())
        .map(|c| c.as_str().unwrap().to_string())
        .collect()
}

#[test]
fn two_demo_lanes_run_the_loop_twice_on_the_same_state() {
    let env = setup();
    let first = env.add(&["First", "--project", "demo", "--priority", "H"]);
    let second = env.add(&["Second", "--project", "demo"]);
    let other = env.add(&["Other", "--project", "demo"]);
    // Waits on `first`, which only reaches review here (not done): never ready.
    let blocked = env.add(&["Blocked", "--project", "demo", "--depends", &first]);
    let key = env
        .run(&["steer", "lane:a", "keep the greeting short"])
        .ok()
        .trim()
        .to_string();

    let reports = up(&env);
    let claimed = claimed_in(&reports);
    assert_eq!(claimed.len(), 3, "{reports}");
    for r in reports.as_array().unwrap() {
        assert!(r["error"].is_null(), "{r}");
    }
    for t in [&first, &second, &other] {
        let s = env.run(&["task", "show", t, "--json"]).json();
        assert_eq!(s["phase"], "review", "{s}");
        assert!(s["claim"].is_null());
        let kinds: Vec<String> = s["ledger"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["kind"].as_str().unwrap().to_string())
            .collect();
        assert!(
            kinds.contains(&"claimed".into()) && kinds.contains(&"phase_completed".into()),
            "{kinds:?}"
        );
    }
    let b = env.run(&["task", "show", &blocked, "--json"]).json();
    assert_eq!(b["phase"], "todo");
    assert!(b["claim"].is_null());
    // Every task's work is merged into main.
    let log = git(&env.repo, &["log", "--oneline", "main"]);
    for t in [&first, &second, &other] {
        assert!(log.contains(&format!("demo: {t}")), "{log}");
    }
    // The steering item for lane a reached its agent and was retired from its transcript.
    let item = env.run(&["inbox", "--all", "--json"]).json();
    let item = item
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["key"] == key.as_str())
        .unwrap()
        .clone();
    assert_eq!(item["state"], "acked", "{item}");
    let source: String = env
        .sql()
        .query_row("SELECT source FROM acks WHERE key = ?1", [&key], |r| {
            r.get(0)
        })
        .unwrap();
    assert!(source.ends_with(".jsonl"), "{source}");
    // Worktrees per task, recordings per session.
    assert_eq!(
        std::fs::read_dir(env.home.join("recordings"))
            .unwrap()
            .count(),
        3
    );

    // Second run on the same state: only the new task is worked on.
    let fourth = env.add(&["Fourth", "--project", "demo"]);
    let reports = up(&env);
    let claimed = claimed_in(&reports);
    assert_eq!(claimed, [format!("demo-{fourth}")]);
    assert!(git(&env.repo, &["log", "--oneline", "main"]).contains(&format!("demo: {fourth}")));
}

#[test]
fn a_bad_lane_file_starts_nothing() {
    let env = setup();
    std::fs::write(
        env.repo.join("lanes/bad.toml"),
        "profile = \"demo\"\nlease = 5\n",
    )
    .unwrap();
    let r = common::to_run(env.cmd(&["fleet", "up", "--until-idle"]).output().unwrap());
    r.fails(2, "lanes/bad.toml:2:9");
    assert!(!env.home.join("worktrees").exists(), "nothing started");
}

#[test]
fn one_supervisor_per_state_directory_and_status_names_it() {
    let env = setup();
    let mut first = env.supervisor(
        env.cmd(&["fleet", "up"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null()),
    );
    let pid = first.id();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let mut status = serde_json::Value::Null;
    while std::time::Instant::now() < deadline {
        status = env.run(&["fleet", "status", "--json"]).json();
        if status["supervisor_pid"] == pid {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert_eq!(status["supervisor_pid"], pid, "{status}");
    assert_eq!(status["lanes"].as_array().unwrap().len(), 2);
    let second = common::to_run(env.cmd(&["fleet", "up", "--until-idle"]).output().unwrap());
    second.fails(3, "another supervisor holds");
    assert!(
        second.stderr.contains(&format!("(pid {pid})")),
        "{}",
        second.stderr
    );
    // `fleet down`: SIGTERM to the recorded pid (checked against its start time); the
    // supervisor stops its lanes and exits, and the lock is free at once.
    let down = env.run(&["fleet", "down"]).ok().to_string();
    assert!(
        down.contains(&format!("stopped the supervisor (pid {pid})")),
        "{down}"
    );
    assert!(first.wait().unwrap().success());
    assert!(env.run(&["fleet", "status", "--json"]).json()["supervisor_pid"].is_null());
    assert!(env
        .run(&["fleet", "down"])
        .ok()
        .contains("no supervisor running"));
}

#[test]
fn steering_is_typed_into_an_agent_waiting_for_input_and_answered() {
    let env = setup();
    std::fs::remove_file(env.repo.join("lanes/b.toml")).unwrap();
    let task = env.add(&[
        "Ask first",
        "--project",
        "demo",
        "--body",
        spice::demo::WAIT_MARKER,
    ]);
    let fleet = env.fleet_up(&["--until-idle", "--json"]);
    // The agent ends its first turn waiting; the lane says so, from the transcript.
    let waiting = wait_for("lane a to wait for input", 30, || {
        let l = env.lane("a");
        (l["state"] == "waiting").then_some(l)
    });
    assert_eq!(
        waiting["claims"][0]["task"],
        format!("demo-{task}"),
        "{waiting}"
    );
    let key = env
        .run(&["steer", "lane:a", "go ahead, and keep it short"])
        .ok()
        .trim()
        .to_string();
    common::finished(fleet);
    let items = env.run(&["inbox", "--all", "--json"]).json();
    assert_eq!(items[0]["key"], key.as_str());
    assert_eq!(items[0]["state"], "acked", "{items}");
    let show = env.run(&["task", "show", &task, "--json"]).json();
    assert_eq!(show["phase"], "review", "{show}");
    let kinds: Vec<&str> = show["ledger"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["kind"].as_str().unwrap())
        .collect();
    for k in ["launched", "delivered", "phase_completed", "exited"] {
        assert!(kinds.contains(&k), "{k} missing from {kinds:?}");
    }
    // The agent was stopped by the lane once its task left its hands: it never exits
    // by itself, like an interactive agent.
    let exited = show["ledger"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["kind"] == "exited")
        .unwrap();
    assert!(
        exited["detail"]["how"]
            .as_str()
            .unwrap()
            .contains("left its hands"),
        "{exited}"
    );
    let l = env.lane("a");
    assert_eq!(l["state"], "stopped", "{l}");
    assert!(l["last_error"].is_null(), "{l}");
}

/// A lane of a Codex-like agent (a scripted stand-in) whose transcript is named by a
/// thread id spice is never told: found by its recorded cwd, followed for ACKs, and
/// its id used to resume the conversation after the agent is killed.
#[test]
fn a_codex_rollout_is_found_by_cwd_followed_and_resumed_by_its_own_id() {
    let env = setup();
    std::fs::remove_file(env.repo.join("lanes/b.toml")).unwrap();
    let fake =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/agents/fake-codex.sh");
    std::fs::create_dir_all(env.repo.join("profiles")).unwrap();
    std::fs::write(
        env.repo.join("profiles/fakecodex.toml"),
        format!(
            "command = [\"bash\", \"{f}\", \"{{spice}}\"]\n\
             resume = [\"bash\", \"{f}\", \"{{spice}}\", \"resume\", \"{{session_id}}\"]\n\
             mode = \"pty\"\n[transcript]\nformat = \"codex\"\n\
             dir = \"{{home}}/.codex/sessions\"\nglob = \"*/*/*/rollout-*.jsonl\"\n",
            f = fake.display()
        ),
    )
    .unwrap();
    std::fs::write(
        env.repo.join("lanes/a.toml"),
        "profile = \"fakecodex\"\nphases = [\"todo\"]\n[env]\nFAKE_CODEX_SECONDS = \"30\"\n",
    )
    .unwrap();
    let task = env.add(&["Codex task", "--project", "demo"]);
    let key = env
        .run(&["steer", "lane:a", "say hello"])
        .ok()
        .trim()
        .to_string();
    let fleet = env.fleet_up(&["--until-idle", "--json"]);
    let first = wait_for("the rollout to be found", 30, || {
        let l = env.lane("a");
        l["transcript"]
            .as_str()
            .is_some_and(|t| t.contains("rollout-"))
            .then_some(l)
    });
    let rollout = first["transcript"].as_str().unwrap().to_string();
    let thread = rollout
        .trim_end_matches(".jsonl")
        .rsplit('-')
        .take(5)
        .collect::<Vec<_>>();
    let thread: String = thread.into_iter().rev().collect::<Vec<_>>().join("-");
    // Kill the agent mid-command: the successor resumes the thread by its own id.
    let pid = first["pid"].as_u64().unwrap() as i32;
    let agent = wait_for("the fake agent under the shim", 10, || {
        let kids = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).ok()?;
        kids.split_whitespace()
            .next()
            .and_then(|k| k.parse::<i32>().ok())
    });
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(agent),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    common::finished(fleet);
    let show = env.run(&["task", "show", &task, "--json"]).json();
    assert_eq!(show["phase"], "review", "{show}");
    let launches = env.ledger_of(&task, "launched");
    assert_eq!(launches.len(), 2, "{show}");
    assert_eq!(launches[1]["detail"]["resume"], true);
    assert_eq!(
        launches[1]["detail"]["conversation"],
        thread.as_str(),
        "{show}"
    );
    // The successor's brief points at what its predecessor did, in a form
    // `spice session briefing` opens (Codex names its own threads).
    let successor = launches[1]["actor"].as_str().unwrap();
    let brief =
        std::fs::read_to_string(env.home.join("briefs").join(format!("{successor}.md"))).unwrap();
    let pointer = brief
        .lines()
        .find_map(|l| l.split_once("Read what it did with: "))
        .map(|(_, cmd)| cmd.rsplit(' ').next().unwrap().to_string())
        .unwrap_or_else(|| panic!("no pointer to the predecessor in:\n{brief}"));
    let briefing = env
        .cmd(&["session", "briefing", &pointer, "--json"])
        .env("HOME", env.agent_home())
        .output()
        .map(common::to_run)
        .unwrap();
    assert_eq!(
        briefing.json()["session_id"],
        thread.as_str(),
        "{}",
        briefing.stderr
    );
    // The ACK was read from the rollout (the successor's command showed the item).
    let source: String = env
        .sql()
        .query_row("SELECT source FROM acks WHERE key = ?1", [&key], |r| {
            r.get(0)
        })
        .unwrap();
    assert_eq!(source, rollout);
    let items = env.run(&["inbox", "--all", "--json"]).json();
    assert_eq!(items[0]["state"], "acked", "{items}");
}

/// A lane may work in another repository than the one `fleet up` runs in: its
/// worktrees come from there and its work merges into that repository's branch.
#[test]
fn a_lane_works_in_the_repository_it_names() {
    let env = setup();
    std::fs::remove_file(env.repo.join("lanes/b.toml")).unwrap();
    let other = env.dir.path().join("other");
    std::fs::create_dir_all(&other).unwrap();
    git(&other, &["init", "-q", "-b", "trunk"]);
    for (k, v) in [("user.email", "o@spice"), ("user.name", "o")] {
        git(&other, &["config", k, v]);
    }
    std::fs::write(other.join("README"), "other\n").unwrap();
    git(&other, &["add", "."]);
    git(&other, &["commit", "-q", "-m", "other"]);
    std::fs::write(
        env.repo.join("lanes/a.toml"),
        "profile = \"demo\"\nrepo = \"../other\"\nphases = [\"todo\"]\n",
    )
    .unwrap();
    let task = env.add(&["Elsewhere", "--project", "demo"]);
    let reports = up(&env);
    assert_eq!(claimed_in(&reports), [format!("demo-{task}")], "{reports}");
    assert!(git(&other, &["log", "--oneline", "trunk"]).contains(&format!("demo: {task}")));
    assert!(!git(&env.repo, &["log", "--oneline", "--all"]).contains(&format!("demo: {task}")));
}

/// A compaction in the agent's transcript is noticed and recorded; the lane goes on.
#[test]
fn a_compaction_is_recorded_and_the_lane_goes_on() {
    let env = setup();
    std::fs::remove_file(env.repo.join("lanes/b.toml")).unwrap();
    let task = env.add(&[
        "Long one",
        "--project",
        "demo",
        "--body",
        spice::demo::COMPACT_MARKER,
    ]);
    let reports = up(&env);
    assert_eq!(claimed_in(&reports), [format!("demo-{task}")]);
    let show = env.run(&["task", "show", &task, "--json"]).json();
    assert_eq!(show["phase"], "review", "{show}");
    let compacted = show["ledger"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["kind"] == "compacted")
        .unwrap_or_else(|| panic!("no compaction recorded: {show}"));
    assert_eq!(compacted["detail"]["count"], 1);
    assert!(compacted["detail"]["transcript"]
        .as_str()
        .unwrap()
        .ends_with(".jsonl"));
}

/// A bare repository beside the test's, added to it as `origin`.
fn bare_origin(env: &TestEnv) -> std::path::PathBuf {
    let remote = env.dir.path().join("remote.git");
    git(
        env.dir.path(),
        &["init", "-q", "--bare", remote.to_str().unwrap()],
    );
    git(
        &env.repo,
        &["remote", "add", "origin", remote.to_str().unwrap()],
    );
    remote
}

/// Nothing is pushed unless the lane says so; with `push`, base goes to that remote
/// after each merge.
#[test]
fn base_is_pushed_only_when_the_lane_says_so() {
    let env = setup();
    let remote = bare_origin(&env);
    git(&env.repo, &["push", "-q", "origin", "main"]);
    std::fs::write(
        env.repo.join("lanes/a.toml"),
        "profile = \"demo\"\nphases = [\"todo\"]\npush = \"origin\"\n",
    )
    .unwrap();
    std::fs::write(
        env.repo.join("lanes/b.toml"),
        "profile = \"demo\"\nphases = [\"todo\"]\nenabled = false\n",
    )
    .unwrap();
    git(&env.repo, &["commit", "-q", "-am", "lane a pushes"]);
    git(&env.repo, &["push", "-q", "origin", "main"]);
    let task = env.add(&["Pushed", "--project", "demo"]);
    up(&env);
    let log = git(&remote, &["log", "--oneline", "main"]);
    assert!(log.contains(&format!("demo: {task}")), "{log}");
    // Lane b (no push) works; the remote does not move.
    std::fs::write(
        env.repo.join("lanes/a.toml"),
        "profile = \"demo\"\nphases = [\"todo\"]\nenabled = false\n",
    )
    .unwrap();
    std::fs::write(
        env.repo.join("lanes/b.toml"),
        "profile = \"demo\"\nphases = [\"todo\"]\n",
    )
    .unwrap();
    git(
        &env.repo,
        &["commit", "-q", "-am", "lane b works, without push"],
    );
    let before = git(&remote, &["rev-parse", "main"]);
    let other = env.add(&["Local only", "--project", "demo"]);
    up(&env);
    assert!(git(&env.repo, &["log", "--oneline", "main"]).contains(&format!("demo: {other}")));
    assert_eq!(git(&remote, &["rev-parse", "main"]), before);
}

/// The merge at phase completion goes where the supervisor's lane says (its `base`
/// and `push`), even when the lane files are not committed, so the task's worktree
/// holds none or an old version of them.
#[test]
fn the_merge_follows_the_running_lane_not_the_worktree_copy() {
    let env = setup();
    let remote = bare_origin(&env);
    git(&env.repo, &["branch", "dev"]);
    git(&env.repo, &["push", "-q", "origin", "main", "dev"]);
    // Uncommitted: the worktrees (from dev) carry the committed lanes, without base.
    std::fs::write(
        env.repo.join("lanes/a.toml"),
        "profile = \"demo\"\nphases = [\"todo\"]\nbase = \"dev\"\npush = \"origin\"\n",
    )
    .unwrap();
    std::fs::write(
        env.repo.join("lanes/b.toml"),
        "profile = \"demo\"\nenabled = false\n",
    )
    .unwrap();
    let main_before = git(&env.repo, &["rev-parse", "main"]);
    let task = env.add(&["Into dev", "--project", "demo"]);
    up(&env);
    let show = env.run(&["task", "show", &task, "--json"]).json();
    assert_eq!(show["phase"], "review", "{show}");
    assert!(
        git(&env.repo, &["log", "--oneline", "dev"]).contains(&format!("demo: {task}")),
        "not merged into the lane's base"
    );
    assert_eq!(git(&env.repo, &["rev-parse", "main"]), main_before);
    assert!(
        git(&remote, &["log", "--oneline", "dev"]).contains(&format!("demo: {task}")),
        "the lane's push did not happen"
    );
}

/// A worktree that cannot be prepared (its place is taken by something else) starts
/// nothing, hands the task back and says why.
#[test]
fn a_worktree_that_cannot_be_made_releases_the_claim() {
    let env = setup();
    std::fs::remove_file(env.repo.join("lanes/b.toml")).unwrap();
    let wts = env.dir.path().join("wts");
    std::fs::write(
        env.repo.join("lanes/a.toml"),
        format!("profile = \"demo\"\nworktrees = \"{}\"\n", wts.display()),
    )
    .unwrap();
    let task = env.add(&["Blocked place", "--project", "demo"]);
    std::fs::create_dir_all(wts.join(format!("demo-{task}"))).unwrap();
    std::fs::write(wts.join(format!("demo-{task}/precious.txt")), "mine").unwrap();
    let run = common::to_run(
        env.cmd(&["fleet", "up", "--until-idle", "--json"])
            .env("HOME", env.agent_home())
            .output()
            .unwrap(),
    );
    // The run stops there (--until-idle) and its exit status says so.
    assert_ne!(run.code, 0, "{}", run.stderr);
    let reports: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    let err = reports[0]["error"].as_str().unwrap_or_default().to_string();
    assert!(err.contains("could not prepare a worktree"), "{reports}");
    let show = env.run(&["task", "show", &task, "--json"]).json();
    assert!(show["claim"].is_null(), "{show}");
    assert_eq!(
        std::fs::read_to_string(wts.join(format!("demo-{task}/precious.txt"))).unwrap(),
        "mine"
    );
    let said = env.lane("a")["last_error"].as_str().unwrap().to_string();
    assert!(
        said.contains(&format!("released demo-{task}, left pending")),
        "{said}"
    );
}

/// One lane (`a`) of a headless profile running `fixtures/agents/fake-headless.sh`
/// with `extra` arguments (`SECONDS [deaf]`).
fn headless_env(extra: &str) -> TestEnv {
    let env = setup();
    std::fs::remove_file(env.repo.join("lanes/b.toml")).unwrap();
    let fake =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/agents/fake-headless.sh");
    std::fs::create_dir_all(env.repo.join("profiles")).unwrap();
    std::fs::write(
        env.repo.join("profiles/headless.toml"),
        format!(
            "command = [\"bash\", \"{f}\", \"{{spice}}\", \"{{session_id}}\", \"{{brief_file}}\"{extra}]\n\
             resume = [\"bash\", \"{f}\", \"{{spice}}\", \"{{session_id}}\", \"{{brief_file}}\"{extra}]\n\
             mode = \"headless\"\n[transcript]\nformat = \"claude\"\n\
             dir = \"{{home}}/.claude/projects/{{cwd_slug}}\"\nglob = \"{{session_id}}.jsonl\"\n",
            f = fake.display(),
            extra = extra
                .split_whitespace()
                .map(|a| format!(", \"{a}\""))
                .collect::<String>()
        ),
    )
    .unwrap();
    std::fs::write(
        env.repo.join("lanes/a.toml"),
        "profile = \"headless\"\nphases = [\"todo\"]\n",
    )
    .unwrap();
    env
}

/// Waits until `n` agent processes on `task` have exited and lane a waits, with no
/// agent, for steering.
fn ended_and_waiting(env: &TestEnv, task: &str, n: usize) {
    wait_for(&format!("{n} sessions or turns to end"), 30, || {
        let l = env.lane("a");
        (l["state"] == "waiting" && l["pid"].is_null() && env.ledger_of(task, "exited").len() == n)
            .then_some(())
    });
}

/// Headless mode: the agent ends each turn by exiting. A clean exit with steering
/// waiting starts the next turn (not a death), with the items at the top of its brief.
#[test]
fn a_headless_agent_gets_pending_steering_as_its_next_turn() {
    let env = headless_env("");
    let task = env.add(&["Headless", "--project", "demo"]);
    let fleet = env.fleet_up(&["--until-idle", "--json"]);
    wait_for("the first turn to run", 30, || {
        (env.lane("a")["state"] == "working").then_some(())
    });
    let key = env
        .run(&["steer", "lane:a", "go ahead"])
        .ok()
        .trim()
        .to_string();
    common::finished(fleet);
    let show = env.run(&["task", "show", &task, "--json"]).json();
    assert_eq!(show["phase"], "review", "{show}");
    let launches = env.ledger_of(&task, "launched");
    assert_eq!(launches.len(), 2, "{show}");
    assert_eq!(launches[1]["detail"]["steering_in_brief"][0], key.as_str());
    let items = env.run(&["inbox", "--all", "--json"]).json();
    assert_eq!(items[0]["state"], "acked", "{items}");
    // The clean end of the first turn was not a death.
    assert!(env.lane("a")["last_error"].is_null());
}

/// A headless turn that ends with no steering waiting is not a death either: the
/// session waits at rest (no agent process, no restart, no hold) until steering
/// arrives, then resumes its conversation in the same session.
#[test]
fn a_headless_agent_whose_turn_ended_waits_for_steering() {
    let env = headless_env("");
    let task = env.add(&["Headless wait", "--project", "demo"]);
    let fleet = env.fleet_up(&["--json"]);
    let lane = wait_for("the first turn to end", 30, || {
        let l = env.lane("a");
        (l["state"] == "waiting" && l["pid"].is_null()).then_some(l)
    });
    let session = lane["session"].as_str().unwrap().to_string();
    // Long enough for three quick deaths to have held the lane under the old rule.
    common::stays("a lane at rest, launched once", 3, || {
        let lane = env.lane("a");
        let rest = lane["state"] == "waiting"
            && lane["restarts"] == 0
            && lane["last_error"].is_null()
            && env.ledger_of(&task, "launched").len() == 1;
        if rest {
            Ok(())
        } else {
            Err(lane.to_string())
        }
    });

    let key = env
        .run(&["steer", "lane:a", "go ahead"])
        .ok()
        .trim()
        .to_string();
    wait_for("the task to be done", 30, || {
        let show = env.run(&["task", "show", &task, "--json"]).json();
        (show["phase"] == "review").then_some(())
    });
    env.run(&["fleet", "down"]).ok();
    common::finished(fleet);
    let launches = env.ledger_of(&task, "launched");
    assert_eq!(launches.len(), 2, "{launches:?}");
    let second = &launches[1];
    assert_eq!(second["actor"], session.as_str(), "{second}");
    assert_eq!(second["detail"]["resume"], true, "{second}");
    assert_eq!(second["detail"]["turn"], 2, "{second}");
    assert_eq!(
        second["detail"]["conversation"],
        session.as_str(),
        "{second}"
    );
    assert_eq!(second["detail"]["steering_in_brief"][0], key.as_str());
    let lane = env.lane("a");
    assert_eq!(lane["restarts"], 0, "{lane}");
    assert!(
        lane["predecessors"].as_array().is_none_or(|p| p.is_empty()),
        "{lane}"
    );
}

/// A lane whose agent binary is missing is reported and does not run; the others do.
#[test]
fn a_missing_agent_binary_stops_only_its_lane() {
    let env = setup();
    std::fs::create_dir_all(env.repo.join("profiles")).unwrap();
    std::fs::write(
        env.repo.join("profiles/ghost.toml"),
        "command = [\"no-such-agent-binary\", \"{brief}\"]\nmode = \"pty\"\n",
    )
    .unwrap();
    std::fs::write(env.repo.join("lanes/b.toml"), "profile = \"ghost\"\n").unwrap();
    let task = env.add(&["Still done", "--project", "demo"]);
    let out = env
        .cmd(&["fleet", "up", "--until-idle", "--json"])
        .env("HOME", env.agent_home())
        .output()
        .unwrap();
    let run = common::to_run(out);
    assert!(
        run.stderr.contains("lane b will not run") && run.stderr.contains("no-such-agent-binary"),
        "{}",
        run.stderr
    );
    let reports = run.json();
    assert_eq!(claimed_in(&reports), [format!("demo-{task}")], "{reports}");
    let b = reports
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["lane"] == "b")
        .unwrap();
    assert!(b["claimed"].as_array().unwrap().is_empty());
}

/// `fleet down` keeps claims leased for successors; `--release` hands them back.
#[test]
fn fleet_down_keeps_claims_unless_told_to_release_them() {
    let env = setup();
    std::fs::remove_file(env.repo.join("lanes/b.toml")).unwrap();
    let body = spice::demo::WAIT_MARKER;
    let first = env.add(&[
        "First",
        "--project",
        "demo",
        "--priority",
        "H",
        "--body",
        body,
    ]);
    let up_until_waiting = |task: &str| {
        let fleet = env.supervisor(
            env.cmd(&["fleet", "up"])
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null()),
        );
        wait_for("the agent to wait for input", 30, || {
            let l = env.lane("a");
            (l["state"] == "waiting" && l["claims"][0]["task"] == format!("demo-{task}"))
                .then_some(())
        });
        fleet
    };
    let mut fleet = up_until_waiting(&first);
    env.run(&["fleet", "down"]).ok();
    assert!(fleet.wait().unwrap().success());
    let claim = env.run(&["task", "show", &first, "--json"]).json()["claim"].clone();
    assert!(!claim.is_null(), "the claim stays leased for a successor");

    // The next supervisor finishes the kept claim with a successor, then takes the
    // next task; `down --release` hands that one back.
    let second = env.add(&["Second", "--project", "demo", "--body", body]);
    let mut fleet = up_until_waiting(&second);
    let down = env.run(&["fleet", "down", "--release"]).ok().to_string();
    assert!(fleet.wait().unwrap().success());
    assert!(down.contains(&format!("released demo-{second}")), "{down}");
    let show = env.run(&["task", "show", &second, "--json"]).json();
    assert!(show["claim"].is_null(), "{show}");
    let show = env.run(&["task", "show", &first, "--json"]).json();
    assert_eq!(show["phase"], "review", "{show}");
}

/// Regression: Claude Code runs its Bash tool's `bash -c` with a socket as stdin, and
/// bash, seeing a socket and a top-level SHLVL, takes itself for a command run by rshd:
/// it read ~/.bashrc instead of BASH_ENV, so the redirector never ran and steering
/// reached the agent only through the hook. The lane's agents now get SHLVL=1.
#[test]
fn a_bash_command_with_a_socket_for_stdin_still_goes_through_spice_exec() {
    let env = setup();
    std::fs::remove_file(env.repo.join("lanes/b.toml")).unwrap();
    let agent = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/agents/socket-stdin-agent.py");
    std::fs::create_dir_all(env.repo.join("profiles")).unwrap();
    std::fs::write(
        env.repo.join("profiles/sock.toml"),
        format!(
            "command = [\"python3\", \"{}\", \"{{spice}}\"]\nmode = \"pty\"\n",
            agent.display()
        ),
    )
    .unwrap();
    std::fs::write(
        env.repo.join("lanes/a.toml"),
        "profile = \"sock\"\nphases = [\"todo\"]\n",
    )
    .unwrap();
    let task = env.add(&["Socket stdin", "--project", "demo"]);
    let reports = up(&env);
    assert_eq!(claimed_in(&reports), [format!("demo-{task}")], "{reports}");
    // The lane's private TMPDIR, the one place outside its worktree a confined
    // scripted agent may write.
    let seen = std::fs::read_to_string(env.home.join("tmp/a/redirected")).unwrap();
    assert_eq!(seen.trim(), "1", "the command did not run under spice exec");
}

/// An agent that writes no transcript (here: one stuck at a question on its screen,
/// as Claude Code at its folder-trust dialog) is reported after the lane's
/// `start_timeout`, with what its screen says, instead of showing "starting" for
/// minutes; the report goes once the transcript starts.
#[test]
fn an_agent_silent_at_a_prompt_is_reported_with_its_screen() {
    let env = setup();
    std::fs::remove_file(env.repo.join("lanes/b.toml")).unwrap();
    std::fs::create_dir_all(env.repo.join("profiles")).unwrap();
    // Asks, waits for a line on its terminal, then carries on as the demo agent.
    std::fs::write(
        env.repo.join("profiles/asks.toml"),
        r#"command = ["sh", "-c", "printf '\\033[1mDo you trust the files in this folder?\\033[0m\\r\\n> 1. Yes\\r\\n'; read answer; exec \"$0\" demo-agent --session-id \"$1\" --brief-file \"$2\" --interactive", "{spice}", "{session_id}", "{brief_file}"]
[transcript]
format = "claude"
dir = "{home}/.claude/projects/{cwd_slug}"
glob = "{session_id}.jsonl"
"#,
    )
    .unwrap();
    std::fs::write(
        env.repo.join("lanes/a.toml"),
        "profile = \"asks\"\nphases = [\"todo\"]\nstart_timeout = \"1s\"\n",
    )
    .unwrap();
    let task = env.add(&["Behind a dialog", "--project", "demo"]);
    let fleet = env.fleet_up(&["--until-idle", "--json"]);
    let lane = wait_for("the silent start to be reported", 20, || {
        let l = env.lane("a");
        l["last_error"]
            .as_str()
            .is_some_and(|e| e.starts_with("no transcript 1s after launch"))
            .then_some(l)
    });
    let error = lane["last_error"].as_str().unwrap();
    assert!(error.contains("spice fleet attach a"), "{error}");
    assert!(
        error.ends_with("its screen ends: Do you trust the files in this folder? > 1. Yes"),
        "{error}"
    );
    assert_eq!(lane["state"], "starting", "{lane}");
    // The operator answers through the agent's terminal; the report goes.
    let sock = env.home.join("attach/a.sock");
    let mut s = std::os::unix::net::UnixStream::connect(&sock).unwrap();
    std::io::Write::write_all(&mut s, &spice::fleet::attach::frame(b'i', b"1\r")).unwrap();
    common::finished(fleet);
    let show = env.run(&["task", "show", &task, "--json"]).json();
    assert_eq!(show["phase"], "review", "{show}");
    assert!(env.lane("a")["last_error"].is_null(), "{}", env.lane("a"));
}

/// A headless agent that ends its turn without answering the item its turn began
/// with is not started again for that item (which would loop, turn after turn): the
/// lane waits for steering it has not been given yet.
#[test]
fn a_headless_agent_gets_one_turn_per_item_even_when_it_never_answers() {
    let env = headless_env("1 deaf");
    let task = env.add(&["Deaf", "--project", "demo"]);
    let fleet = env.fleet_up(&["--json"]);
    ended_and_waiting(&env, &task, 1);
    let first = env.run(&["steer", "lane:a", "one"]).ok().trim().to_string();
    ended_and_waiting(&env, &task, 2);
    // Not started again for the item it never answered.
    common::stays("two launches", 3, || {
        match env.ledger_of(&task, "launched").len() {
            2 => Ok(()),
            n => Err(format!("{n} launches")),
        }
    });
    let second = env.run(&["steer", "lane:a", "two"]).ok().trim().to_string();
    ended_and_waiting(&env, &task, 3);
    env.run(&["fleet", "down"]).ok();
    common::finished(fleet);
    let launches = env.ledger_of(&task, "launched");
    assert_eq!(launches.len(), 3, "{launches:?}");
    assert_eq!(
        launches[1]["detail"]["steering_in_brief"],
        serde_json::json!([first])
    );
    // The unanswered item is still pending, so it is repeated beside the new one.
    let mut third: Vec<String> = launches[2]["detail"]["steering_in_brief"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k.as_str().unwrap().to_string())
        .collect();
    third.sort();
    let mut both = vec![first, second];
    both.sort();
    assert_eq!(third, both);
}

/// A headless agent killed mid-call gets a successor whose first turn is told what
/// was cut off (here from the transcript: this agent runs no real command); the
/// successor's later turns follow its own turns, so they neither repeat that nor
/// point at the predecessor again.
#[test]
fn only_the_first_turn_after_a_death_hears_about_the_interrupted_call() {
    let env = setup();
    std::fs::remove_file(env.repo.join("lanes/b.toml")).unwrap();
    let fake =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/agents/dies-mid-call.sh");
    std::fs::create_dir_all(env.repo.join("profiles")).unwrap();
    let argv = format!(
        "[\"bash\", \"{}\", \"{{session_id}}\", \"{{brief_file}}\"]",
        fake.display()
    );
    std::fs::write(
        env.repo.join("profiles/dies.toml"),
        format!(
            "command = {argv}\nresume = {argv}\nmode = \"headless\"\n[transcript]\n\
             format = \"claude\"\ndir = \"{{home}}/.claude/projects/{{cwd_slug}}\"\n\
             glob = \"{{session_id}}.jsonl\"\n"
        ),
    )
    .unwrap();
    std::fs::write(
        env.repo.join("lanes/a.toml"),
        "profile = \"dies\"\nphases = [\"todo\"]\n",
    )
    .unwrap();
    let task = env.add(&["Dies once", "--project", "demo"]);
    let fleet = env.fleet_up(&["--json"]);
    ended_and_waiting(&env, &task, 2);
    let key = env
        .run(&["steer", "lane:a", "go on"])
        .ok()
        .trim()
        .to_string();
    ended_and_waiting(&env, &task, 3);
    env.run(&["fleet", "down"]).ok();
    common::finished(fleet);
    let launches = env.ledger_of(&task, "launched");
    assert_eq!(launches.len(), 3, "{launches:?}");
    let (succ, next) = (&launches[1], &launches[2]);
    assert_eq!(
        succ["detail"]["interrupted"],
        serde_json::json!(["`sleep 120`"])
    );
    assert_eq!(succ["detail"]["interrupted_from"], "transcript");
    assert_eq!(
        next["actor"], succ["actor"],
        "the next turn is the same session"
    );
    assert_eq!(
        next["detail"]["interrupted"],
        serde_json::json!([]),
        "{next}"
    );
    assert_eq!(next["detail"]["steering_in_brief"][0], key.as_str());
    let brief = |l: &serde_json::Value| {
        let s = l["actor"].as_str().unwrap();
        let n = l["detail"]["turn"].as_u64().unwrap();
        let text = std::fs::read_to_string(env.home.join(format!("briefs/{s}.md"))).unwrap();
        (n, text)
    };
    // Each turn's brief file is rewritten: the last one is turn 2's.
    let (n, text) = brief(next);
    assert_eq!(n, 2);
    assert!(!text.contains("You continue an earlier session"), "{text}");
    assert!(!text.contains("no result came back"), "{text}");
}

/// A headless agent that exits 0 without writing its transcript did no work (a login
/// or config error): that is a death with its screen's words, and three of them hold
/// the lane, instead of a lane "waiting" forever on a turn that never happened.
#[test]
fn a_headless_agent_that_exits_without_a_transcript_is_a_death() {
    let env = setup();
    std::fs::remove_file(env.repo.join("lanes/b.toml")).unwrap();
    std::fs::create_dir_all(env.repo.join("profiles")).unwrap();
    std::fs::write(
        env.repo.join("profiles/broken.toml"),
        "command = [\"sh\", \"-c\", \"echo 'Error: invalid API key'\", \"{brief}\"]\n\
         mode = \"headless\"\n[transcript]\nformat = \"claude\"\n\
         dir = \"{home}/.claude/projects/{cwd_slug}\"\nglob = \"{session_id}.jsonl\"\n",
    )
    .unwrap();
    std::fs::write(
        env.repo.join("lanes/a.toml"),
        "profile = \"broken\"\nphases = [\"todo\"]\n",
    )
    .unwrap();
    env.add(&["Never starts", "--project", "demo"]);
    let fleet = env.fleet_up(&["--json"]);
    let lane = wait_for("the lane to be held", 30, || {
        let l = env.lane("a");
        (l["state"] == "held").then_some(l)
    });
    env.run(&["fleet", "down"]).ok();
    common::finished(fleet);
    let error = lane["last_error"].as_str().unwrap_or_default();
    assert!(
        error.contains("exited cleanly without writing its transcript (its screen ends: Error: invalid API key)"),
        "{lane}"
    );
}

/// An interactive agent whose transcript never states a turn's end (Claude Code at
/// times writes its reply with `stop_reason: null` and no turn duration) is waiting
/// once its text has been followed by a quiet spell, and gets steering typed in.
#[test]
fn a_reply_followed_by_quiet_ends_the_turn_even_unstated() {
    let env = setup();
    std::fs::remove_file(env.repo.join("lanes/b.toml")).unwrap();
    let fake =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/agents/quiet-pty.sh");
    std::fs::create_dir_all(env.repo.join("profiles")).unwrap();
    std::fs::write(
        env.repo.join("profiles/quiet.toml"),
        format!(
            "command = [\"bash\", \"{}\", \"{{session_id}}\"]\n[transcript]\nformat = \"claude\"\n\
             dir = \"{{home}}/.claude/projects/{{cwd_slug}}\"\nglob = \"{{session_id}}.jsonl\"\n",
            fake.display()
        ),
    )
    .unwrap();
    std::fs::write(
        env.repo.join("lanes/a.toml"),
        "profile = \"quiet\"\nphases = [\"todo\"]\n",
    )
    .unwrap();
    env.add(&["Quiet replies", "--project", "demo"]);
    let fleet = env.fleet_up(&["--json"]);
    wait_for("the lane to wait for input", 30, || {
        (env.lane("a")["state"] == "waiting").then_some(())
    });
    let key = env
        .run(&["steer", "lane:a", "say hi"])
        .ok()
        .trim()
        .to_string();
    wait_for("the typed item to be acked", 30, || {
        let items = env.run(&["inbox", "--all", "--json"]).json();
        (items[0]["key"] == key.as_str() && items[0]["state"] == "acked").then_some(())
    });
    env.run(&["fleet", "down"]).ok();
    common::finished(fleet);
}
