//! Fleet resilience through the real binary, with the scripted demo agent and fake
//! agents: the supervisor killed (-9) mid-run, an agent killed, an agent that dies at
//! once (crash-loop hold), a claim taken over while its agent works, and repeated
//! supervisor kills against the store's integrity.

use crate::common;
use common::procs::fleet_processes;
use common::{git, slow_profile, wait_for, TestEnv};
use std::time::{Duration, Instant};

/// A repository with `lanes` lanes (a, b, …) of `profile`, whose file is `profile_text`.
fn setup(lanes: usize, lane_extra: &str, profile_text: &str) -> TestEnv {
    let env = TestEnv::new();
    for (k, v) in [("user.email", "demo@spice"), ("user.name", "demo")] {
        git(&env.repo, &["config", k, v]);
    }
    git(&env.repo, &["checkout", "-q", "-b", "main"]);
    std::fs::create_dir_all(env.repo.join("lanes")).unwrap();
    std::fs::create_dir_all(env.repo.join("profiles")).unwrap();
    std::fs::write(env.repo.join("profiles/agent.toml"), profile_text).unwrap();
    for lane in ["a", "b", "c", "d"].iter().take(lanes) {
        std::fs::write(
            env.repo.join(format!("lanes/{lane}.toml")),
            format!("profile = \"agent\"\nphases = [\"todo\"]\n{lane_extra}"),
        )
        .unwrap();
    }
    git(&env.repo, &["add", "lanes", "profiles"]);
    git(&env.repo, &["commit", "-q", "-m", "lanes"]);
    env
}

fn ledger_kinds(env: &TestEnv, task: &str) -> Vec<String> {
    env.run(&["task", "show", task, "--json"]).json()["ledger"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["kind"].as_str().unwrap().to_string())
        .collect()
}

/// A demo agent hardened against its terminal going away: it ignores SIGHUP, and it
/// leaves a process in a session of its own (out of reach of the terminal and of any
/// process-group signal) running for minutes.
fn stubborn_profile(secs: u32) -> String {
    let run = |mode: &str| {
        format!(
            r#"["sh", "-c", "trap '' HUP; setsid sleep 300 & exec \"$0\" demo-agent {mode} --interactive --command-seconds {secs}", "{{spice}}", "{{session_id}}", "{{brief_file}}"]"#
        )
    };
    format!(
        "command = {}\nresume = {}\nmode = \"pty\"\n[transcript]\nformat = \"claude\"\ndir = \"{{home}}/.claude/projects/{{cwd_slug}}\"\nglob = \"{{session_id}}.jsonl\"\n",
        run(r#"--session-id \"$1\" --brief-file \"$2\""#),
        run(r#"--resume \"$1\""#),
    )
}

#[test]
fn supervisor_killed_mid_run_leaves_no_orphans_and_the_next_one_resumes_every_claim() {
    let env = setup(3, "lease = \"1m\"\n", &stubborn_profile(3));
    let tasks: Vec<String> = (0..3)
        .map(|i| env.add(&[&format!("Task {i}"), "--project", "demo"]))
        .collect();
    // An item for a lane that never runs stays pending throughout.
    let parked = env
        .run(&["steer", "--force", "lane:z", "never delivered"])
        .ok()
        .trim()
        .to_string();
    let mut sup = env.fleet_up(&[]);
    wait_for("three lanes working", 30, || {
        let l = env.lanes();
        l.iter()
            .all(|l| l["state"] == "working" && l["claims"].as_array().unwrap().len() == 1)
            .then_some(())
    });
    let acked = env
        .run(&["steer", "lane:a", "mind the tests"])
        .ok()
        .trim()
        .to_string();
    wait_for("lane a's agent to ACK", 30, || {
        (env.count(&format!("SELECT count(*) FROM acks WHERE key = '{acked}'")) > 0).then_some(())
    });
    assert!(!fleet_processes(&env).is_empty(), "agents are running");
    // Items the agents of lanes b and c have not seen yet when the supervisor dies.
    for lane in ["lane:b", "lane:c"] {
        env.run(&["steer", lane, "also update the changelog"]).ok();
    }
    sup.kill9();
    let killed = Instant::now();
    // No agent process survives its supervisor by more than 10 s.
    let gone = wait_for("the fleet's processes to end", 10, || {
        fleet_processes(&env).is_empty().then_some(killed.elapsed())
    });
    let claims_at_kill: Vec<(String, String)> = {
        let db = env.sql();
        let mut st = db
            .prepare("SELECT task_id, claimant FROM claims ORDER BY task_id")
            .unwrap();
        st.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap()
            .map(Result::unwrap)
            .collect()
    };
    assert_eq!(claims_at_kill.len(), 3, "every claim is still leased");
    let rows = |sql: &str| -> Vec<String> {
        let db = env.sql();
        let mut st = db.prepare(sql).unwrap();
        st.query_map([], |r| r.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect()
    };
    let acks_at_kill = rows("SELECT key || polarity || source || line FROM acks");
    let pending_at_kill = rows("SELECT key FROM steering WHERE state = 'pending'");

    // The next supervisor continues every claim with a successor and finishes the work.
    let restarted = Instant::now();
    let out = env.fleet_up(&["--until-idle", "--json"]).wait_with_output();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let recovered = restarted.elapsed();
    for t in &tasks {
        let kinds = ledger_kinds(&env, t);
        assert!(kinds.contains(&"successor".to_string()), "{t}: {kinds:?}");
        let show = env.run(&["task", "show", t, "--json"]).json();
        assert_eq!(show["phase"], "review", "{show}");
    }
    // The successor resumed its predecessor's conversation: one transcript per task.
    let l = env.lanes();
    for lane in &l {
        assert_eq!(lane["state"], "stopped");
    }
    let acks_now = rows("SELECT key || polarity || source || line FROM acks");
    let acks_lost = acks_at_kill
        .iter()
        .filter(|a| !acks_now.contains(a))
        .count();
    let kept = rows("SELECT key FROM steering WHERE state IN ('pending', 'acked')");
    let items_lost = pending_at_kill.iter().filter(|k| !kept.contains(k)).count();
    eprintln!(
        "FAULT supervisor kill -9 with 3 lanes working: every agent process gone {:.2}s after \
         the kill (orphans: 0); restart to every claim resumed by a successor and finished: \
         {:.1}s; claims lost 0/3, pending items lost {items_lost}/{}, acks lost {acks_lost}/{}",
        gone.as_secs_f64(),
        recovered.as_secs_f64(),
        pending_at_kill.len(),
        acks_at_kill.len()
    );
    assert_eq!((items_lost, acks_lost), (0, 0));
    let item = |k: &str| {
        env.run(&["inbox", "--all", "--json"])
            .json()
            .as_array()
            .unwrap()
            .iter()
            .find(|i| i["key"] == k)
            .cloned()
            .unwrap()
    };
    assert_eq!(item(&acked)["state"], "acked");
    assert_eq!(item(&parked)["state"], "pending");
    env.run(&["store", "check"]).ok();
    assert!(fleet_processes(&env).is_empty());
}

/// `fleet down` while the agent runs a command: the stop signal reaches the whole
/// group at once, so the command's wrapper notes itself before it goes, and the next
/// supervisor's successor is told exactly which command was stopped.
#[test]
fn a_command_stopped_by_fleet_down_is_named_to_the_successor() {
    let profile = |secs: u32| {
        format!(
            r#"["{{spice}}", "demo-agent", "--session-id", "{{session_id}}", "--brief-file", "{{brief_file}}", "--interactive", "--command-seconds", "{secs}"]"#
        )
    };
    let text = format!(
        "command = {}\nresume = [\"{{spice}}\", \"demo-agent\", \"--resume\", \"{{session_id}}\", \"--interactive\", \"--command-seconds\", \"0\"]\n\
         [transcript]\nformat = \"claude\"\ndir = \"{{home}}/.claude/projects/{{cwd_slug}}\"\nglob = \"{{session_id}}.jsonl\"\n",
        profile(30)
    );
    let env = setup(1, "lease = \"1m\"\n", &text);
    let task = env.add(&["Stopped mid-command", "--project", "demo"]);
    let sup = env.fleet_up(&[]);
    wait_for("the agent's command to run", 30, || {
        fleet_processes(&env).into_iter().find(|(_, cmd)| {
            cmd.contains(" exec -- ") && cmd.contains("git status --short; sleep 30")
        })
    });
    env.run(&["fleet", "down"]).ok();
    common::finished(sup);
    assert!(
        fleet_processes(&env).is_empty(),
        "{:?}",
        fleet_processes(&env)
    );
    common::finished(env.fleet_up(&["--until-idle", "--json"]));
    let launched: Vec<serde_json::Value> = env.run(&["task", "show", &task, "--json"]).json()
        ["ledger"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "launched")
        .cloned()
        .collect();
    assert_eq!(launched.len(), 2, "{launched:?}");
    let detail = &launched[1]["detail"];
    assert_eq!(
        detail["interrupted"],
        serde_json::json!(["`git status --short; sleep 30`"]),
        "{detail}"
    );
    assert_eq!(detail["interrupted_from"], "shim", "{detail}");
    assert!(
        std::fs::read_dir(env.home.join("interrupted"))
            .map(|d| d.count())
            .unwrap_or(0)
            == 0,
        "records left behind"
    );
}

/// A wrapper stopped by a signal (as the whole agent group is when the supervisor
/// stops it) notes its command for the shim before it forwards the signal: it may be
/// gone before the shim looks.
#[test]
fn a_wrapper_told_to_stop_notes_its_command_first() {
    let env = TestEnv::new();
    env.add(&["A task, so the store exists"]);
    // Runs `argv` under `spice exec` (with `session` as SPICE_SESSION if any), waits
    // for the command that starts with `running`, stops the wrapper with SIGTERM;
    // returns the wrapper's pid.
    let stopped = |argv: &[&str], session: Option<&str>, running: &str| {
        let mut cmd = env.cmd(&[&["exec", "--"][..], argv].concat());
        if let Some(s) = session {
            cmd.env("SPICE_SESSION", s);
        }
        let mut wrapper = cmd
            .stdin(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        wait_for("the wrapped command", 10, || {
            fleet_processes(&env)
                .into_iter()
                .find(|(_, cmd)| cmd.starts_with(running))
        });
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(wrapper.id() as i32),
            nix::sys::signal::Signal::SIGTERM,
        )
        .unwrap();
        assert_eq!(wrapper.wait().unwrap().code(), Some(143));
        wrapper.id()
    };
    let pid = stopped(
        &["bash", "-c", "sleep 30; echo never"],
        Some("s-2"),
        "sleep 30",
    );
    let note = env.home.join(format!("interrupted/s-2/{pid}.json"));
    let note: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&note).unwrap()).unwrap();
    assert_eq!(note["command"], "sleep 30; echo never");
    // Not under a fleet (no session): nothing is noted.
    stopped(&["sleep", "31"], None, "sleep 31");
    let noted: Vec<_> = std::fs::read_dir(env.home.join("interrupted"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert_eq!(noted, ["s-2"], "only the fleet's wrapper noted its command");
}

/// The shim records the commands its agent left running when the agent died, found
/// among the processes it ends (not in any transcript: this agent writes none), in
/// `<state>/interrupted/<session>.json`.
#[test]
fn the_shim_records_the_commands_a_killed_agent_left_running() {
    let env = TestEnv::new();
    env.add(&["A task, so the store exists"]);
    let bash_env = env.dir.path().join("bashenv");
    std::fs::write(&bash_env, env.run(&["shell-init", "bash"]).ok()).unwrap();
    // `sh` reads no BASH_ENV, so only the inner `bash -c` goes through `spice exec`.
    // The shim ends its whole terminal session: it gets one of its own, as under the
    // supervisor's PTY.
    let mut shim = env.cmd(&[
        "agent-shim",
        "--parent",
        &std::process::id().to_string(),
        "--",
        "sh",
        "-c",
        "bash -c 'sleep 60; echo never'; echo after",
    ]);
    shim.env("BASH_ENV", &bash_env).env("SPICE_SESSION", "s-1");
    // SAFETY: setsid is async-signal-safe.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut shim, || {
            nix::unistd::setsid()?;
            Ok(())
        });
    }
    let mut shim = shim.spawn().unwrap();
    let wrapper = wait_for("the command under spice exec", 10, || {
        fleet_processes(&env)
            .into_iter()
            .find(|(_, cmd)| cmd.contains(" exec -- ") && cmd.contains("sleep 60"))
    });
    let agent = wait_for("the agent", 10, || {
        fleet_processes(&env)
            .into_iter()
            .find(|(_, cmd)| cmd.starts_with("sh -c "))
    });
    assert_ne!(agent.0, wrapper.0);
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(agent.0 as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    let status = shim.wait().unwrap();
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&status),
        Some(9)
    );
    let record = std::fs::read_to_string(env.home.join("interrupted/s-1.json")).unwrap();
    let record: serde_json::Value = serde_json::from_str(&record).unwrap();
    assert_eq!(
        record["commands"],
        serde_json::json!(["sleep 60; echo never"])
    );
    assert!(
        fleet_processes(&env).is_empty(),
        "{:?}",
        fleet_processes(&env)
    );
}

#[test]
fn a_killed_agent_is_followed_by_a_successor_on_the_same_claim_and_worktree() {
    let env = setup(1, "lease = \"1m\"\n", &slow_profile(4));
    let task = env.add(&["Task", "--project", "demo"]);
    let sup = env.fleet_up(&["--until-idle", "--json"]);
    let first = wait_for("the lane to work", 30, || {
        let l = env.lanes().remove(0);
        (l["state"] == "working").then_some(l)
    });
    let claim = first["claims"][0].clone();
    // Mid-command: the agent's first command (through `spice exec`) is running.
    wait_for("the agent's command to run", 10, || {
        fleet_processes(&env).into_iter().find(|(_, cmd)| {
            cmd.contains(" exec -- ") && cmd.contains("git status --short; sleep 4")
        })
    });
    // The agent itself (the shim's child), not the shim.
    let agent = wait_for("the demo agent's process", 10, || {
        fleet_processes(&env)
            .into_iter()
            .find(|(_, cmd)| cmd.contains(" demo-agent ") && !cmd.contains("agent-shim"))
    });
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(agent.0 as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    let killed = Instant::now();
    let second = wait_for("a successor session", 20, || {
        let l = env.lanes().remove(0);
        (l["session"] != first["session"] && !l["session"].is_null()).then_some(l)
    });
    eprintln!(
        "FAULT agent kill -9: successor launched {:.2}s after the kill, same claim and worktree",
        killed.elapsed().as_secs_f64()
    );
    assert_eq!(second["predecessors"][0], first["session"], "{second}");
    assert_eq!(second["restarts"], 1);
    assert_eq!(second["claims"][0]["task"], claim["task"]);
    assert_eq!(second["claims"][0]["worktree"], claim["worktree"]);
    // The death is in the ledger; the lane row's error went with the successor's
    // launch (the lane recovered by itself: nothing needs the operator).
    let exits = env.ledger_of(claim["task"].as_str().unwrap(), "exited");
    assert!(
        exits[0]["detail"]["how"]
            .as_str()
            .unwrap()
            .contains("SIGKILL"),
        "{exits:?}"
    );
    assert!(second["last_error"].is_null(), "{second}");
    // The successor's brief points at what its predecessor did, and that works.
    let brief = std::fs::read_to_string(
        env.home
            .join("briefs")
            .join(format!("{}.md", second["session"].as_str().unwrap())),
    )
    .unwrap();
    let how = brief
        .lines()
        .find_map(|l| l.split_once("Read what it did with: "))
        .map(|(_, cmd)| cmd.to_string())
        .unwrap_or_else(|| panic!("no pointer to the predecessor in:\n{brief}"));
    // ... and names the command it was killed in, which no result came back for.
    assert!(
        brief.contains("no result came back:\n- `git status --short; sleep 4`\n"),
        "the interrupted command is not named in:\n{brief}"
    );
    // Found by the shim among the processes it ended, not guessed from the transcript.
    let launched = env.run(&["task", "show", &task, "--json"]).json()["ledger"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "launched")
        .cloned()
        .collect::<Vec<_>>();
    assert_eq!(
        launched[1]["detail"]["interrupted_from"], "shim",
        "{:?}",
        launched[1]
    );
    let path = how.rsplit(' ').next().unwrap();
    let briefing = env
        .cmd(&["session", "briefing", path, "--json"])
        .env("HOME", env.agent_home())
        .output()
        .map(common::to_run)
        .unwrap()
        .json();
    assert!(
        !briefing["commands"].as_array().unwrap().is_empty(),
        "{briefing}"
    );
    let out = sup.wait_with_output();
    assert!(out.status.success());
    let show = env.run(&["task", "show", &task, "--json"]).json();
    assert_eq!(show["phase"], "review", "{show}");
    assert!(ledger_kinds(&env, &task).contains(&"successor".to_string()));
}

#[test]
fn an_agent_that_dies_at_once_holds_the_lane_until_lifted() {
    let env = setup(
        1,
        "",
        "command = [\"sh\", \"-c\", \"exit 3\"]\nmode = \"pty\"\n",
    );
    env.add(&["Task", "--project", "demo"]);
    let mut sup = env.fleet_up(&[]);
    let started = Instant::now();
    let held = wait_for("the hold", 30, || {
        let l = env.lanes().remove(0);
        (l["state"] == "held").then_some(l)
    });
    eprintln!(
        "FAULT agent dying at once: lane held {:.2}s after the fleet started, after {} deaths",
        started.elapsed().as_secs_f64(),
        held["restarts"].as_u64().unwrap_or(0) + 1
    );
    assert!(
        held["hold"]["reason"]
            .as_str()
            .unwrap()
            .contains("3 agent deaths"),
        "{held}"
    );
    assert!(
        held["hold"]["seconds_left"].as_i64().unwrap() > 20,
        "{held}"
    );
    assert!(held["last_error"]
        .as_str()
        .unwrap()
        .contains("exited with code 3"));
    let text = env.run(&["fleet", "status"]).ok().to_string();
    assert!(text.contains("spice fleet lift a"), "{text}");
    // First in the queue of what needs the operator (#38), with its countdown.
    let needs = env.run(&["fleet", "status", "--json"]).json()["needs"].clone();
    let held_need = needs
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["kind"] == "held")
        .unwrap_or_else(|| panic!("no held entry in {needs}"));
    assert_eq!(held_need["lane"], "a", "{held_need}");
    assert_eq!(held_need["resolve"], "spice fleet lift a", "{held_need}");
    assert!(
        held_need["seconds_left"].as_i64().unwrap() > 0,
        "{held_need}"
    );
    // Lifted: three more quick deaths, and a hold twice as long.
    env.run(&["fleet", "lift", "a"]).ok();
    let again = wait_for("the second hold", 30, || {
        let l = env.lanes().remove(0);
        (l["state"] == "held" && l["restarts"].as_u64().unwrap() >= 5).then_some(l)
    });
    assert!(
        again["hold"]["seconds_left"].as_i64().unwrap() > 50,
        "{again}"
    );
    env.cmd(&["fleet", "lift", "b"])
        .output()
        .map(common::to_run)
        .unwrap()
        .fails(2, "unknown lane 'b': no ");
    env.run(&["fleet", "down"]).ok();
    assert!(sup.wait().unwrap().success());
}

#[test]
fn a_claim_taken_over_while_its_agent_works_stops_the_agent_and_the_lane_goes_on() {
    let env = setup(1, "lease = \"3s\"\n", &slow_profile(4));
    let first = env.add(&["First", "--project", "demo", "--priority", "H"]);
    let second = env.add(&["Second", "--project", "demo"]);
    let sup = env.fleet_up(&["--until-idle", "--json"]);
    let working = wait_for("the lane to work", 30, || {
        let l = env.lanes().remove(0);
        (l["state"] == "working").then_some(l)
    });
    let claim = working["claims"][0].clone();
    assert_eq!(claim["task"], format!("demo-{first}"));
    // The supervisor hangs; its lease lapses; the operator takes the claim over.
    let pid = nix::unistd::Pid::from_raw(sup.id() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGSTOP).unwrap();
    let fence = claim["fence"].to_string();
    // Refused while the 3 s lease is live; taken once it lapsed.
    wait_for("the stopped supervisor's lease to lapse", 15, || {
        let r = env.run(&[
            "task",
            "takeover",
            &first,
            "--stale",
            &fence,
            "--claimant",
            "operator",
        ]);
        (r.code == 0).then_some(())
    });
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGCONT).unwrap();
    let resumed = Instant::now();
    let stopped = wait_for("the agent to be stopped", 30, || {
        ledger_kinds(&env, &first)
            .contains(&"exited".to_string())
            .then(|| resumed.elapsed())
    });
    eprintln!(
        "FAULT claim taken over while working: agent told at once, stopped {:.2}s after the \
         supervisor ran again (grace 10 s), worktree kept",
        stopped.as_secs_f64()
    );
    common::finished(sup);
    // The agent was told, through a steering item for its session, and stopped.
    let items = env.run(&["inbox", "--all", "--json"]).json();
    let told = items
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["target"] == working["session"])
        .unwrap_or_else(|| panic!("no item for the session: {items}"));
    assert!(
        told["text"]
            .as_str()
            .unwrap()
            .contains("taken over by operator"),
        "{told}"
    );
    let show = env.run(&["task", "show", &first, "--json"]).json();
    assert_eq!(show["claim"]["claimant"], "operator");
    let exited = show["ledger"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["kind"] == "exited")
        .cloned()
        .unwrap();
    assert!(
        exited["detail"]["how"]
            .as_str()
            .unwrap()
            .contains("taken over"),
        "{exited}"
    );
    // Its worktree is kept; the lane went on to the next task.
    assert!(std::path::Path::new(claim["worktree"].as_str().unwrap()).is_dir());
    let next = env.run(&["task", "show", &second, "--json"]).json();
    assert_eq!(next["phase"], "review", "{next}");
}

/// #38: the operator forces a live claim away from a working agent (`--force`, the
/// console's "force…"): the lane's next renewal finds it gone, tells and stops the
/// agent, keeps the worktree and goes on.
#[test]
fn a_live_claim_forced_away_from_its_working_agent_stops_it_and_the_lane_goes_on() {
    let env = setup(1, "lease = \"30s\"\n", &slow_profile(30));
    let first = env.add(&["First", "--project", "demo", "--priority", "H"]);
    let sup = env.fleet_up(&[]);
    let working = wait_for("the lane to work", 30, || {
        let l = env.lanes().remove(0);
        (l["state"] == "working").then_some(l)
    });
    let fence = working["claims"][0]["fence"].to_string();
    env.run(&["task", "takeover", &first, "--stale", &fence])
        .fails(3, "still live");
    env.run(&["task", "takeover", &first, "--stale", &fence, "--force"])
        .ok();
    let second = env.add(&["Second", "--project", "demo"]);
    wait_for("the agent to be stopped", 30, || {
        ledger_kinds(&env, &first)
            .contains(&"exited".to_string())
            .then_some(())
    });
    let show = env.run(&["task", "show", &first, "--json"]).json();
    assert_eq!(show["claim"]["claimant"], "operator");
    assert!(std::path::Path::new(working["claims"][0]["worktree"].as_str().unwrap()).is_dir());
    wait_for("the lane to go on to the next task", 30, || {
        let l = env.lanes().remove(0);
        (l["claims"][0]["task"] == format!("demo-{second}")).then_some(())
    });
    env.run(&["fleet", "down"]).ok();
    common::finished(sup);
}

#[test]
fn twenty_supervisor_kills_leave_the_store_intact() {
    let env = setup(2, "lease = \"1m\"\n", &slow_profile(1));
    for i in 0..6 {
        env.add(&[&format!("Task {i}"), "--project", "demo"]);
    }
    for round in 0..20 {
        let mut sup = env.fleet_up(&[]);
        // Kill at a different moment each round: mid-claim, mid-launch, mid-scan.
        std::thread::sleep(Duration::from_millis(150 + 97 * (round % 7)));
        sup.kill9();
        let check = env.run(&["store", "check"]);
        assert!(check.ok().starts_with("ok"), "round {round}");
    }
    wait_for("the last agents to end", 10, || {
        fleet_processes(&env).is_empty().then_some(())
    });
    eprintln!("FAULT supervisor kill -9, 20 times: integrity_check ok 20/20, orphans 0");
}
