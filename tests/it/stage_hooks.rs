//! Stage hooks in a fleet of demo agents: the repository's `[hooks]` (`on_claim`,
//! `on_launch`, `on_phase_done`, `on_release`) run in the task's worktree with
//! `SPICE_*` in their environment and the event as JSON on stdin, each stage
//! succeeding, failing and timing out; each run is in the task's ledger
//! (`stage_hook`) and the lane's log (a `hook` event); a bad `[hooks]` keeps the fleet
//! from starting.

use crate::common;

use common::{git, wait_for, TestEnv};
use serde_json::Value;
use std::path::{Path, PathBuf};

const LANE: &str = "profile = \"demo\"\nphases = [\"todo\"]\nlease = \"5m\"\n";

/// A fleet of one demo lane whose `main` carries `spice.toml` = `toml`.
fn fleet(toml: &str) -> TestEnv {
    let env = TestEnv::with_lanes(&[("a", LANE)]);
    std::fs::write(env.repo.join("spice.toml"), toml).unwrap();
    // What the hooks leave in a worktree is ignored, as a repository's hooks must
    // keep it: untracked files refuse a phase completion.
    std::fs::write(env.repo.join(".gitignore"), "hook-*\nreleased.json\n").unwrap();
    git(&env.repo, &["add", "spice.toml", ".gitignore"]);
    git(&env.repo, &["commit", "-q", "-m", "hooks"]);
    env
}

/// A TOML array for `sh -c SCRIPT`.
fn sh(script: &str) -> String {
    format!(
        "[\"sh\", \"-c\", {}]",
        toml::Value::String(script.to_string())
    )
}

/// Adds a task whose brief carries `marker`; returns (id, handle).
fn task(env: &TestEnv, marker: &str) -> (String, String) {
    let id = env.add(&["Hooked", "--project", "demo", "--body", marker]);
    let handle = format!("demo-{id}");
    (id, handle)
}

fn worktree(env: &TestEnv, handle: &str) -> PathBuf {
    env.home.join("worktrees/a").join(handle)
}

fn hook_runs(env: &TestEnv, id: &str) -> Vec<Value> {
    env.ledger_of(id, "stage_hook")
        .into_iter()
        .map(|e| {
            let mut d = e["detail"].clone();
            d["actor"] = e["actor"].clone();
            d
        })
        .collect()
}

fn stages(runs: &[Value]) -> Vec<(String, String)> {
    runs.iter()
        .map(|r| {
            (
                r["stage"].as_str().unwrap().to_string(),
                r["outcome"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

fn pairs(p: &[(&str, &str)]) -> Vec<(String, String)> {
    p.iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect()
}

/// The lane's log (`<state>/logs/fleet.log`), one JSON object a line.
fn log(env: &TestEnv) -> Vec<Value> {
    std::fs::read_to_string(env.home.join("logs/fleet.log"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn events<'a>(log: &'a [Value], event: &str) -> Vec<&'a Value> {
    log.iter().filter(|e| e["event"] == event).collect()
}

fn show(env: &TestEnv, id: &str) -> Value {
    env.run(&["task", "show", id, "--json"]).json()
}

/// The demo agent's transcript whose brief holds `marker`, once one does.
fn transcript(env: &TestEnv, marker: &str) -> Option<String> {
    let projects = env.home.join("demo-home/.claude/projects");
    std::fs::read_dir(projects)
        .ok()?
        .flat_map(|d| std::fs::read_dir(d.unwrap().path()).unwrap())
        .map(|f| std::fs::read_to_string(f.unwrap().path()).unwrap())
        .find(|t| t.contains(marker))
}

/// Whether `main` holds `path`.
fn on_main(env: &TestEnv, path: &str) -> bool {
    std::process::Command::new("git")
        .args(["cat-file", "-e", &format!("main:{path}")])
        .current_dir(&env.repo)
        .status()
        .unwrap()
        .success()
}

/// The process `pid` has ended (gone, or a zombie nobody reaped yet).
fn ended(pid: &str) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit(')')
            .next()
            .unwrap_or("")
            .trim_start()
            .starts_with('Z'),
    }
}

/// A hook that starts a grandchild (its pid written to the lane's `TMPDIR`, which a
/// confined hook may write: [`pidfile`]) and outlives its 1s timeout.
fn hanging() -> String {
    sh("echo started; sleep 30 & echo $! > \"$TMPDIR/bg.pid\"; sleep 30")
}

/// Where [`hanging`] writes its grandchild's pid.
fn pidfile(env: &TestEnv) -> PathBuf {
    env.home.join("tmp/a/bg.pid")
}

#[track_caller]
fn gone_after_timeout(pidfile: &Path) {
    let pid = std::fs::read_to_string(pidfile)
        .unwrap_or_else(|e| panic!("{}: {e}", pidfile.display()))
        .trim()
        .to_string();
    wait_for(
        &format!("the hook's background process {pid} to be stopped"),
        10,
        || ended(&pid).then_some(()),
    );
}

#[test]
fn every_stage_runs_in_the_worktree_with_the_event_and_spice_variables() {
    let record = |stage: &str| {
        sh(&format!(
            "cat > hook-{stage}.json; env | grep '^SPICE_' | sort > hook-{stage}.env; echo {stage} ran"
        ))
    };
    let env = fleet(&format!(
        "[hooks]\non_claim = {}\non_launch = {}\non_phase_done = {}\non_release = {}\ntimeout = \"20s\"\n",
        record("on_claim"),
        record("on_launch"),
        record("on_phase_done"),
        record("on_release"),
    ));
    let (id, handle) = task(&env, "all stages pass");
    common::finished(env.fleet_up(&["--until-idle"]));

    // Every stage passed, in order, and the phase landed.
    let runs = hook_runs(&env, &id);
    assert_eq!(
        stages(&runs),
        pairs(&[
            ("on_claim", "passed"),
            ("on_launch", "passed"),
            ("on_phase_done", "passed"),
            ("on_release", "passed"),
        ]),
        "{runs:#?}"
    );
    assert!(on_main(&env, &format!("demo/{id}.txt")), "merged");
    let session = env.ledger_of(&id, "claimed")[0]["actor"]
        .as_str()
        .unwrap()
        .to_string();
    let wt = worktree(&env, &handle);
    for r in &runs {
        assert_eq!(r["exit_code"], 0, "{r}");
        assert_eq!(r["lane"], "a", "{r}");
        assert_eq!(r["actor"], session.as_str(), "{r}");
        assert_eq!(r["output"], format!("{} ran", r["stage"].as_str().unwrap()));
        assert!(r["duration_ms"].is_u64(), "{r}");
    }

    // What each hook was told, in the worktree it ran in.
    for stage in ["on_claim", "on_launch", "on_phase_done", "on_release"] {
        let read = |ext: &str| {
            let p = wt.join(format!("hook-{stage}.{ext}"));
            std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
        };
        let ev: Value = serde_json::from_str(&read("json")).unwrap();
        assert_eq!(ev["stage"], stage, "{ev}");
        assert_eq!(ev["task"], id.as_str(), "{ev}");
        assert_eq!(ev["handle"], handle.as_str(), "{ev}");
        assert_eq!(ev["phase"], "todo", "{ev}");
        assert_eq!(ev["lane"], "a", "{ev}");
        assert_eq!(ev["session"], session.as_str(), "{ev}");
        assert_eq!(ev["worktree"], wt.display().to_string(), "{ev}");
        assert_eq!(ev["base"], "main", "{ev}");
        assert_eq!(ev["bed"], Value::Null, "{ev}");
        let vars = read("env");
        for want in [
            format!("SPICE_STAGE={stage}"),
            format!("SPICE_TASK={id}"),
            format!("SPICE_HANDLE={handle}"),
            "SPICE_PHASE=todo".to_string(),
            "SPICE_LANE=a".to_string(),
            format!("SPICE_SESSION={session}"),
            format!("SPICE_WORKTREE={}", wt.display()),
            "SPICE_BASE=main".to_string(),
            format!("SPICE_HOME={}", env.home.display()),
        ] {
            assert!(
                vars.lines().any(|l| l == want),
                "{stage}: {want} in\n{vars}"
            );
        }
    }

    // The lane's log has a line for each run.
    let log = log(&env);
    let hooks: Vec<&str> = events(&log, "hook")
        .iter()
        .map(|e| e["detail"].as_str().unwrap())
        .collect();
    assert_eq!(hooks.len(), 4, "{log:#?}");
    assert!(hooks[0].starts_with("on_claim passed in "), "{hooks:?}");
    assert!(hooks[3].starts_with("on_release passed in "), "{hooks:?}");
    assert!(events(&log, "hook").iter().all(|e| e["lane"] == "a"));
}

/// A failing on_claim hands the claim back (the agent never starts), the lane says
/// why; the task is claimed again later, when the hook lets it.
#[test]
fn a_failing_on_claim_releases_the_claim_and_the_lane_backs_off_and_reports() {
    // The marker is in the lane's TMPDIR: the hook runs in the lane's sandbox.
    let env = fleet(&format!(
        "[hooks]\non_claim = {}\ntimeout = \"20s\"\n",
        sh("[ -e \"$TMPDIR/refused-once\" ] && exit 0; touch \"$TMPDIR/refused-once\"; echo 'setting up'; echo 'no database for this task' >&2; exit 3")
    ));
    let (id, handle) = task(&env, "claim refused");
    let run = common::to_run(env.fleet_up(&["--until-idle"]).wait_with_output());
    assert_ne!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stdout
            .contains(&format!("released {handle}, left pending")),
        "{}",
        run.stdout
    );

    let runs = hook_runs(&env, &id);
    assert_eq!(stages(&runs), pairs(&[("on_claim", "failed")]), "{runs:#?}");
    assert_eq!(runs[0]["exit_code"], 3);
    assert_eq!(runs[0]["output"], "setting up\nno database for this task");
    // Released, never launched, still to do and unclaimed.
    assert_eq!(env.ledger_of(&id, "released").len(), 1);
    assert!(env.ledger_of(&id, "launched").is_empty());
    let t = show(&env, &id);
    assert_eq!(t["claim"], Value::Null, "{t}");
    assert_eq!(t["phase"], "todo", "{t}");

    // The lane's log: the run, and the lane's error saying what it did.
    let log = log(&env);
    let hook = events(&log, "hook");
    assert_eq!(hook.len(), 1, "{log:#?}");
    let line = hook[0]["detail"].as_str().unwrap();
    assert!(
        line.contains("failed with exit code 3: no database for this task"),
        "{line}"
    );
    let err = events(&log, "error");
    assert!(
        err.iter().any(|e| {
            let d = e["detail"].as_str().unwrap();
            d.contains("on_claim hook") && d.contains(&format!("released {handle}"))
        }),
        "{log:#?}"
    );

    // Claimed again later: this time the hook lets it through, and the task lands.
    common::finished(env.fleet_up(&["--until-idle"]));
    let runs = hook_runs(&env, &id);
    assert_eq!(
        stages(&runs),
        pairs(&[("on_claim", "failed"), ("on_claim", "passed")]),
        "{runs:#?}"
    );
    assert_ne!(show(&env, &id)["phase"], "todo");
}

/// Regression (#40): `fleet up --until-idle` exited 0 when a failing on_claim left its
/// task pending; the run fails now, naming the task and the hook's complaint.
#[test]
fn regression_until_idle_fails_naming_the_task_a_failing_on_claim_left() {
    let env = fleet(&format!(
        "[hooks]\non_claim = {}\ntimeout = \"20s\"\n",
        sh("echo 'no database for this task' >&2; exit 3")
    ));
    let (id, handle) = task(&env, "left pending");
    let run = common::to_run(env.fleet_up(&["--until-idle"]).wait_with_output());
    assert_ne!(run.code, 0, "{}", run.stderr);
    let err = run.stderr.lines().last().unwrap_or_default();
    assert!(
        err.starts_with("spice: 1 of 1 lane(s) stopped with an error (a: ")
            && err.contains("on_claim hook")
            && err.contains("no database for this task")
            && err.contains(&format!("released {handle}, left pending")),
        "{}",
        run.stderr
    );
    let t = show(&env, &id);
    assert_eq!(t["status"], "pending", "{t}");
    assert_eq!(t["claim"], Value::Null, "{t}");
}

#[test]
fn an_on_claim_that_times_out_is_stopped_with_its_process_group_and_releases() {
    let env = fleet(&format!(
        "[hooks]\non_claim = {}\n[hooks.timeouts]\non_claim = \"1s\"\n",
        hanging()
    ));
    let pidfile = pidfile(&env);
    let (id, _) = task(&env, "claim times out");
    let run = common::to_run(env.fleet_up(&["--until-idle"]).wait_with_output());
    assert_ne!(run.code, 0, "{}", run.stderr);
    let runs = hook_runs(&env, &id);
    assert_eq!(
        stages(&runs),
        pairs(&[("on_claim", "timed_out")]),
        "{runs:#?}"
    );
    assert_eq!(runs[0]["exit_code"], Value::Null);
    assert_eq!(runs[0]["output"], "started");
    assert!(
        runs[0]["summary"]
            .as_str()
            .unwrap()
            .ends_with("timed out after 1s (stopped)"),
        "{runs:#?}"
    );
    gone_after_timeout(&pidfile);
    assert!(env.ledger_of(&id, "launched").is_empty());
    assert_eq!(show(&env, &id)["claim"], Value::Null);
    let log = log(&env);
    assert!(
        events(&log, "error")
            .iter()
            .any(|e| e["detail"].as_str().unwrap().contains("timed out after 1s")),
        "{log:#?}"
    );
}

/// A failing on_launch is a launch that failed: no agent starts, the claim is handed
/// back (its on_release runs first, undoing what on_claim did).
#[test]
fn a_failing_on_launch_starts_no_agent_and_hands_the_claim_back() {
    let env = fleet(&format!(
        "[hooks]\non_claim = {}\non_launch = {}\non_release = {}\ntimeout = \"20s\"\n",
        sh("echo claimed"),
        sh("echo 'port 5432 is taken' >&2; exit 4"),
        sh("cat > released.json; echo cleaned up"),
    ));
    let (id, handle) = task(&env, "launch refused");
    let run = common::to_run(env.fleet_up(&["--until-idle"]).wait_with_output());
    assert_ne!(run.code, 0, "{}", run.stderr);
    let runs = hook_runs(&env, &id);
    assert_eq!(
        stages(&runs),
        pairs(&[
            ("on_claim", "passed"),
            ("on_launch", "failed"),
            ("on_release", "passed"),
        ]),
        "{runs:#?}"
    );
    assert_eq!(runs[1]["exit_code"], 4);
    assert!(
        env.ledger_of(&id, "launched").is_empty(),
        "no agent started"
    );
    assert!(transcript(&env, "launch refused").is_none());
    assert_eq!(show(&env, &id)["claim"], Value::Null);
    let released: Value = serde_json::from_str(
        &std::fs::read_to_string(worktree(&env, &handle).join("released.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(released["stage"], "on_release");
    assert!(
        run.stdout.contains("on_launch hook") && run.stdout.contains("port 5432 is taken"),
        "{}",
        run.stdout
    );
    let log = log(&env);
    assert_eq!(events(&log, "hook").len(), 3, "{log:#?}");
    assert!(events(&log, "launched").is_empty(), "{log:#?}");
}

#[test]
fn an_on_launch_that_times_out_starts_no_agent() {
    let env = fleet(&format!(
        "[hooks]\non_launch = {}\ntimeout = \"1s\"\n",
        hanging()
    ));
    let pidfile = pidfile(&env);
    let (id, _) = task(&env, "launch times out");
    let run = common::to_run(env.fleet_up(&["--until-idle"]).wait_with_output());
    assert_ne!(run.code, 0, "{}", run.stderr);
    let runs = hook_runs(&env, &id);
    assert_eq!(
        stages(&runs),
        pairs(&[("on_launch", "timed_out")]),
        "{runs:#?}"
    );
    gone_after_timeout(&pidfile);
    assert!(env.ledger_of(&id, "launched").is_empty());
    assert_eq!(show(&env, &id)["claim"], Value::Null);
}

/// Waits for the agent's `task phase --done` to be refused by on_phase_done, then
/// checks what must (not) have happened: (task id, transcript).
fn refused_phase(env: &TestEnv, marker: &str) -> (String, String) {
    let (id, _) = task(env, marker);
    let sup = env.fleet_up(&[]);
    let t = wait_for("the agent to be told the phase was refused", 60, || {
        transcript(env, marker).filter(|t| t.contains("I could not complete the phase"))
    });
    // Nothing merged, the phase not completed, the claim still the lane's.
    assert!(!on_main(env, &format!("demo/{id}.txt")), "nothing merged");
    let s = show(env, &id);
    assert_eq!(s["phase"], "todo", "{s}");
    assert_eq!(s["claim"]["lane"], "a", "{s}");
    assert!(env.ledger_of(&id, "phase_completed").is_empty());
    drop(sup);
    (id, t)
}

/// The command result in `transcript` that carries `needle`.
fn result_with(transcript: &str, needle: &str) -> Value {
    transcript
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|v| v["type"] == "user" && v.to_string().contains(needle))
        .unwrap_or_else(|| panic!("no command result carries {needle:?}:\n{transcript}"))
}

#[test]
fn a_failing_on_phase_done_refuses_the_phase_with_its_output_to_the_agent() {
    let env = fleet(&format!(
        "[hooks]\non_phase_done = {}\ntimeout = \"20s\"\n",
        sh("echo 'running the suite'; echo 'test parser::empty ... FAILED' >&2; exit 1")
    ));
    let (id, t) = refused_phase(&env, "phase refused");
    let runs = hook_runs(&env, &id);
    assert_eq!(
        stages(&runs),
        pairs(&[("on_phase_done", "failed")]),
        "{runs:#?}"
    );
    // The refusal needs the operator (#38), with the hook's output.
    let needs = env.run(&["fleet", "status", "--json"]).json()["needs"].clone();
    assert!(
        needs
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n["kind"] == "merge_refused"
                && n["task_id"] == id.as_str()
                && n["what"]
                    .as_str()
                    .unwrap()
                    .starts_with("on_phase_done refused")),
        "{needs}"
    );
    let r = result_with(&t, "test parser::empty ... FAILED");
    let content = r["message"]["content"][0]["content"].as_str().unwrap();
    assert!(content.starts_with("Exit code 5\n"), "{content}");
    assert!(content.contains("running the suite\n"), "{content}");
    assert!(
        content.contains("spice: the on_phase_done hook (sh -c")
            && content.contains("failed with exit code 1; nothing was merged"),
        "{content}"
    );
    let log = log(&env);
    assert!(
        events(&log, "hook").iter().any(|e| e["detail"]
            .as_str()
            .unwrap()
            .ends_with("test parser::empty ... FAILED")),
        "{log:#?}"
    );
}

#[test]
fn an_on_phase_done_that_times_out_refuses_the_phase() {
    let env = fleet(&format!(
        "[hooks]\non_phase_done = {}\ntimeout = \"1s\"\n",
        hanging()
    ));
    let pidfile = pidfile(&env);
    let (id, t) = refused_phase(&env, "phase times out");
    let runs = hook_runs(&env, &id);
    assert_eq!(
        stages(&runs),
        pairs(&[("on_phase_done", "timed_out")]),
        "{runs:#?}"
    );
    gone_after_timeout(&pidfile);
    let r = result_with(&t, "timed out after 1s (stopped); nothing was merged");
    assert_eq!(r["message"]["content"][0]["is_error"], true, "{r}");
}

/// A failing on_release is reported (to the agent, the ledger, the lane's log) and
/// changes nothing else: the phase landed and the claim is gone.
#[test]
fn a_failing_on_release_is_reported_and_the_release_stands() {
    let env = fleet(&format!(
        "[hooks]\non_release = {}\ntimeout = \"20s\"\n",
        sh("echo 'could not drop database t1' >&2; exit 2")
    ));
    let (id, _) = task(&env, "release fails");
    common::finished(env.fleet_up(&["--until-idle"]));
    let runs = hook_runs(&env, &id);
    assert_eq!(
        stages(&runs),
        pairs(&[("on_release", "failed")]),
        "{runs:#?}"
    );
    assert!(on_main(&env, &format!("demo/{id}.txt")), "merged");
    let s = show(&env, &id);
    assert_ne!(s["phase"], "todo", "{s}");
    assert_eq!(s["claim"], Value::Null, "{s}");
    let t = transcript(&env, "release fails").unwrap();
    let r = result_with(&t, "the release stands");
    assert_eq!(r["message"]["content"][0]["is_error"], false, "{r}");
    assert!(
        r.to_string()
            .contains("failed with exit code 2: could not drop database t1"),
        "{r}"
    );
    let log = log(&env);
    assert!(
        events(&log, "hook").iter().any(|e| e["detail"]
            .as_str()
            .unwrap()
            .contains("could not drop database")),
        "{log:#?}"
    );
}

#[test]
fn an_on_release_that_times_out_is_stopped_and_the_release_stands() {
    let env = fleet(&format!(
        "[hooks]\non_release = {}\ntimeout = \"1s\"\n",
        hanging()
    ));
    let pidfile = pidfile(&env);
    let (id, _) = task(&env, "release times out");
    common::finished(env.fleet_up(&["--until-idle"]));
    let runs = hook_runs(&env, &id);
    assert_eq!(
        stages(&runs),
        pairs(&[("on_release", "timed_out")]),
        "{runs:#?}"
    );
    gone_after_timeout(&pidfile);
    assert!(on_main(&env, &format!("demo/{id}.txt")), "merged");
    assert_eq!(show(&env, &id)["claim"], Value::Null);
}

#[test]
fn a_bad_hooks_section_keeps_the_fleet_from_starting() {
    // Every problem, each located in the file base carries.
    let env = fleet(
        "[hooks]\non_claim = []\non_launch = [\"\"]\ntimeout = \"100h\"\n[hooks.timeouts]\non_release = \"soon\"\n",
    );
    let (id, _) = task(&env, "never claimed");
    let run = common::to_run(env.fleet_up(&["--until-idle"]).wait_with_output());
    assert_eq!(run.code, 2, "{}", run.stderr);
    let lines: Vec<&str> = run.stderr.lines().collect();
    assert_eq!(lines.len(), 4, "{}", run.stderr);
    let want = [
        "spice: spice.toml (at main):2:12: on_claim: an empty command",
        "spice: spice.toml (at main):3:13: on_launch: the program",
        "spice: spice.toml (at main):4:11: timeout: 100h exceeds the maximum of 24h",
        "spice: spice.toml (at main):6:14: timeouts.on_release: invalid duration",
    ];
    for (l, w) in lines.iter().zip(want) {
        assert!(l.starts_with(w), "{l:?} should start with {w:?}");
    }
    assert!(env.ledger_of(&id, "claimed").is_empty(), "nothing ran");
    // `fleet check` finds the same problems, without starting anything.
    let check = env.run(&["fleet", "check"]);
    assert_eq!(check.code, 2, "{}", check.stderr);
    assert!(check.stderr.contains(want[0]), "{}", check.stderr);
    assert!(
        check.stderr.contains("spice.toml (at main):6:14"),
        "{}",
        check.stderr
    );
    let check = env.run(&["fleet", "check", "--json"]);
    assert_eq!(check.code, 2, "{}", check.stderr);
    let doc: Value = serde_json::from_str(&check.stdout).unwrap();
    assert_eq!(
        doc["repository_errors"].as_array().unwrap().len(),
        4,
        "{doc:#}"
    );

    // A key that is not a stage, or the wrong type: one line, exit 2.
    std::fs::write(env.repo.join("spice.toml"), "[hooks]\non_clam = [\"x\"]\n").unwrap();
    git(&env.repo, &["commit", "-qam", "typo"]);
    let run = common::to_run(env.fleet_up(&["--until-idle"]).wait_with_output());
    run.fails(2, "spice.toml (at main):2:1: unknown field `on_clam`");
    std::fs::write(
        env.repo.join("spice.toml"),
        "[hooks]\non_claim = \"./x.sh\"\n",
    )
    .unwrap();
    git(&env.repo, &["commit", "-qam", "string"]);
    let run = common::to_run(env.fleet_up(&["--until-idle"]).wait_with_output());
    run.fails(2, "spice.toml (at main):2:12: invalid type");
    assert!(env.ledger_of(&id, "claimed").is_empty(), "nothing ran");

    // Only base counts: a bad [hooks] in the operator's uncommitted copy is not read.
    std::fs::write(env.repo.join("spice.toml"), "[hooks]\n").unwrap();
    git(&env.repo, &["commit", "-qam", "fixed"]);
    std::fs::write(env.repo.join("spice.toml"), "[hooks]\non_claim = []\n").unwrap();
    common::finished(env.fleet_up(&["--until-idle"]));
    assert_ne!(show(&env, &id)["phase"], "todo");
}
