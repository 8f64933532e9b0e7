//! One fleet across hosts on one PostgreSQL authority (issue #18): each host is a
//! supervisor with a state directory of its own (`SPICE_HOST` names it) whose
//! `config.toml` names the same database; both work on one repository, as hosts
//! sharing a network filesystem would. Lanes name the hosts that may run them.
//!
//! - Each lane runs on one host: a lane for host b is not run by host a, and a lane
//!   any host may run is run by the first to take it while the other waits.
//! - kill -9 of host a's supervisor with demo agents working: its agents die; its
//!   lanes show the host lost; its claims go stale; host b takes the lane both may
//!   run and continues its claim with a successor session; the claim of the lane only
//!   host a may run is taken over explicitly from host b's CLI.
//! - A database restart mid-run (`pg_ctl restart`, on a cluster of the test's own):
//!   the supervisor and its lanes ride it out, and every task is claimed once and
//!   finished.

use crate::common;
use common::procs::processes_of;
use common::{git, pg, slow_profile, wait_for, Supervisor, TestEnv};
use spice::clock::SystemClock;
use spice::store::{Authority, LaneRow, Location};
use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;

/// A host: the fleet's repository, a state directory of its own naming `db`.
fn host(db: &pg::Database, repo: &Path) -> TestEnv {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::write(
        home.join("config.toml"),
        format!("[store]\nurl = \"{}\"\n", db.url),
    )
    .unwrap();
    TestEnv {
        dir,
        repo: repo.to_path_buf(),
        home,
    }
}

/// A repository whose lanes are `(name, extra lines)`, each of the slow demo agent on
/// phase todo.
fn repo(lanes: &[(&str, &str)], secs: u32) -> TestEnv {
    let env = TestEnv::new();
    for (k, v) in [("user.email", "demo@spice"), ("user.name", "demo")] {
        git(&env.repo, &["config", k, v]);
    }
    git(&env.repo, &["checkout", "-q", "-b", "main"]);
    std::fs::create_dir_all(env.repo.join("lanes")).unwrap();
    std::fs::create_dir_all(env.repo.join("profiles")).unwrap();
    std::fs::write(env.repo.join("profiles/agent.toml"), slow_profile(secs)).unwrap();
    for (name, extra) in lanes {
        std::fs::write(
            env.repo.join(format!("lanes/{name}.toml")),
            format!("profile = \"agent\"\nphases = [\"todo\"]\n{extra}"),
        )
        .unwrap();
    }
    git(&env.repo, &["add", "lanes", "profiles"]);
    git(&env.repo, &["commit", "-q", "-m", "lanes"]);
    env
}

fn up(env: &TestEnv, name: &str, args: &[&str]) -> Supervisor {
    let mut a = vec!["fleet", "up"];
    a.extend_from_slice(args);
    env.supervisor(
        env.cmd(&a)
            .env("SPICE_HOST", name)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped()),
    )
    .drained()
}

fn authority(db: &pg::Database) -> Box<dyn Authority> {
    spice::store::connect(&Location::Postgres(db.url.clone()), Arc::new(SystemClock)).unwrap()
}

fn lane(a: &mut dyn Authority, name: &str) -> Option<LaneRow> {
    a.lanes().unwrap().into_iter().find(|l| l.name == name)
}

/// The claim of lane `name`: (task, claimant, fence, live).
fn claim_of(a: &mut dyn Authority, name: &str) -> Option<(String, String, i64, bool)> {
    let now = a.now().unwrap();
    a.claims()
        .unwrap()
        .into_iter()
        .find(|c| c.lane.as_deref() == Some(name))
        .map(|c| {
            let live = c.is_live(now);
            (c.task_id, c.claimant, c.fence, live)
        })
}

fn kinds(a: &mut dyn Authority, task: &str) -> Vec<String> {
    a.ledger(task)
        .unwrap()
        .into_iter()
        .map(|e| e.kind)
        .collect()
}

#[test]
#[ignore = "needs PostgreSQL (SPICE_TEST_POSTGRES)"]
fn a_killed_host_s_lanes_go_stale_and_the_other_host_continues_them() {
    let Some(db) = pg::Database::new("a_killed_host_s_lanes") else {
        return;
    };
    let fleet = repo(
        &[
            ("only_a", "hosts = [\"a\"]\nlease = \"6s\"\n"),
            ("any", "lease = \"6s\"\n"),
            ("only_b", "hosts = [\"b\"]\nlease = \"6s\"\n"),
        ],
        120,
    );
    let (a, b) = (host(&db, &fleet.repo), host(&db, &fleet.repo));
    for i in 0..3 {
        a.add(&[&format!("Task {i}"), "--project", "demo"]);
    }
    let mut store = authority(&db);

    // Host a runs the lanes it may; host b then runs its own and waits for `any`.
    let mut sup_a = up(&a, "a", &[]);
    wait_for("host a's two lanes working", 60, || {
        let s = &mut *store;
        (claim_of(s, "only_a").is_some()
            && claim_of(s, "any").is_some()
            && lane(s, "any")?.transcript.is_some())
        .then_some(())
    });
    let sup_b = up(&b, "b", &[]);
    wait_for("host b's lane working", 60, || {
        claim_of(&mut *store, "only_b").map(|_| ())
    });
    for (l, h) in [("only_a", "a"), ("any", "a"), ("only_b", "b")] {
        let row = lane(&mut *store, l).unwrap();
        assert_eq!(row.host.as_deref(), Some(h), "{row:?}");
        assert!(!row.host_lost);
    }
    assert!(!processes_of(&a.home).is_empty(), "host a's agents run");
    let (stuck, _, stale_fence, _) = claim_of(&mut *store, "only_a").unwrap();
    let (moved, moved_from, _, _) = claim_of(&mut *store, "any").unwrap();

    sup_a.kill9();
    // Its agents die with it (the shim's parent-death signal).
    wait_for("host a's agents to end", 15, || {
        processes_of(&a.home).is_empty().then_some(())
    });
    // Lane any's conversation cannot be read on host b (here: its transcript is gone):
    // b's successor must start afresh rather than resume into nothing.
    let written = lane(&mut *store, "any")
        .unwrap()
        .transcript
        .expect("a transcript");
    std::fs::remove_file(&written).unwrap();
    // Its lanes show the host lost once its heartbeat lapsed.
    wait_for("host a shown lost", 30, || {
        lane(&mut *store, "only_a")
            .is_some_and(|r| r.host_lost && r.host.as_deref() == Some("a"))
            .then_some(())
    });
    // The lane any host may run moves to host b, its claim to a successor session.
    wait_for("host b to continue lane any", 60, || {
        let row = lane(&mut *store, "any")?;
        let (task, claimant, _, live) = claim_of(&mut *store, "any")?;
        (row.host.as_deref() == Some("b") && task == moved && claimant != moved_from && live)
            .then_some(())
    });
    assert!(kinds(&mut *store, &moved).contains(&"successor".to_string()));
    let fresh = wait_for("host b's successor to start afresh", 30, || {
        let ledger = store.ledger(&moved).unwrap();
        ledger
            .iter()
            .rev()
            .find(|e| {
                e.kind == "launched"
                    && e.actor.as_deref() != Some(moved_from.as_str())
                    && e.detail["resume"] == false
            })
            .map(|e| (ledger.clone(), e.clone()))
    });
    let unavailable = fresh.0.iter().find(|e| e.kind == "resume_unavailable");
    let unavailable = unavailable.expect("resume_unavailable in the ledger");
    assert_eq!(unavailable.detail["transcript"], written.as_str());
    assert_eq!(
        fresh.1.detail["conversation"],
        fresh.1.actor.clone().unwrap().as_str()
    );
    // The claim only host a may work on goes stale, and is taken over explicitly.
    wait_for("lane only_a's claim to go stale", 30, || {
        let stale = b.run(&["task", "claims", "--stale", "--json"]).json();
        stale
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["id"] == stuck.as_str())
            .then_some(())
    });
    let took = b
        .run(&[
            "task",
            "takeover",
            &stuck,
            "--stale",
            &stale_fence.to_string(),
            "--claimant",
            "operator-on-b",
            "--json",
        ])
        .json();
    assert_eq!(took["claimant"], "operator-on-b", "{took}");
    assert!(took["fence"].as_i64().unwrap() > stale_fence, "{took}");
    // Host a's lane still does not run on host b.
    assert_eq!(
        lane(&mut *store, "only_a").unwrap().host.as_deref(),
        Some("a")
    );

    let out = b.run(&["fleet", "down"]);
    out.ok();
    let out = sup_b.wait_with_output();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("lane any runs on host a"), "{err}");
    assert!(
        err.contains("lane only_a runs only on hosts a; this is host b"),
        "{err}"
    );
    assert!(err.contains("lane any: taken from host a"), "{err}");
    // Nothing doubled: each task was claimed once, and holds one claim.
    let claims = store.claims().unwrap();
    for t in [&stuck, &moved] {
        assert_eq!(claims.iter().filter(|c| &c.task_id == t).count(), 1);
        let claimed = kinds(&mut *store, t)
            .iter()
            .filter(|k| *k == "claimed")
            .count();
        assert_eq!(claimed, 1, "{t}");
    }
    // Host b ended its row: its lanes are free, its host not lost.
    let row = lane(&mut *store, "only_b").unwrap();
    assert!(!row.host_lost, "{row:?}");
}

#[test]
#[ignore = "needs PostgreSQL (SPICE_TEST_POSTGRES)"]
fn a_database_restart_mid_run_loses_and_doubles_nothing() {
    let Some(db) = pg::Database::on_own_cluster("a_database_restart_mid_run") else {
        return;
    };
    let fleet = repo(&[("x", "lease = \"1m\"\n"), ("y", "lease = \"1m\"\n")], 6);
    let a = host(&db, &fleet.repo);
    let tasks: Vec<String> = (0..4)
        .map(|i| a.add(&[&format!("Task {i}"), "--project", "demo"]))
        .collect();
    let mut store = authority(&db);
    let sup = up(&a, "a", &["--until-idle", "--json"]);
    wait_for("both lanes working", 60, || {
        let s = &mut *store;
        (claim_of(s, "x").is_some() && claim_of(s, "y").is_some()).then_some(())
    });
    db.cluster().unwrap().pg_ctl("restart").unwrap();
    let out = sup.wait_with_output();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let reports: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    for r in reports.as_array().unwrap() {
        assert_eq!(r["failed"], false, "{r}");
    }
    let mut store = authority(&db);
    for t in &tasks {
        let task = store.task(t).unwrap();
        assert_eq!(task.phase, "review", "{t}");
        let claimed = kinds(&mut *store, t)
            .iter()
            .filter(|k| *k == "claimed")
            .count();
        assert_eq!(claimed, 1, "{t} claimed more than once");
    }
    assert!(store.claims().unwrap().is_empty());
}

/// One supervisor per host: a second supervisor registered under the same host name
/// (a restart elsewhere, or a mistake) supersedes the first, which stops every lane
/// and exits saying why; the second continues the lanes' claims with successors.
#[test]
#[ignore = "needs PostgreSQL (SPICE_TEST_POSTGRES)"]
fn a_supervisor_superseded_on_its_host_stops_its_lanes() {
    let Some(db) = pg::Database::new("a_supervisor_superseded") else {
        return;
    };
    let fleet = repo(&[("x", "lease = \"1m\"\n")], 120);
    let (first, second) = (host(&db, &fleet.repo), host(&db, &fleet.repo));
    let task = first.add(&["Task", "--project", "demo"]);
    let mut store = authority(&db);
    let sup1 = up(&first, "a", &[]);
    let (_, claimant, _, _) = wait_for("the first supervisor working", 60, || {
        claim_of(&mut *store, "x")
    });
    let _sup2 = up(&second, "a", &[]);
    let out = sup1.wait_with_output();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("was superseded by supervisor"), "{err}");
    // The second's successor works in the same worktree (under the first's state
    // directory): only processes that are not the second's count.
    wait_for("the first supervisor's agents to end", 15, || {
        let second_s: Vec<u32> = processes_of(&second.home).iter().map(|p| p.0).collect();
        let left: Vec<_> = processes_of(&first.home)
            .into_iter()
            .filter(|p| !second_s.contains(&p.0))
            .collect();
        left.is_empty().then_some(())
    });
    wait_for("the second supervisor to continue the claim", 60, || {
        let (t, c, _, live) = claim_of(&mut *store, "x")?;
        (t == task && c != claimant && live).then_some(())
    });
    assert!(kinds(&mut *store, &task).contains(&"successor".to_string()));
    assert_eq!(lane(&mut *store, "x").unwrap().host.as_deref(), Some("a"));
}

/// A host that froze (its supervisor stopped by SIGSTOP: a paused VM, a suspended
/// laptop) loses its lane to the other host once its heartbeat lapsed. Woken again, it
/// learns it was superseded and stops its lanes, without writing over the row of the
/// host that runs the lane now: that row still shows host b's agent working.
#[test]
#[ignore = "needs PostgreSQL (SPICE_TEST_POSTGRES)"]
fn a_frozen_host_woken_after_losing_its_lane_leaves_the_new_runner_s_row_alone() {
    let Some(db) = pg::Database::new("a_frozen_host_woken") else {
        return;
    };
    let fleet = repo(&[("any", "lease = \"6s\"\n")], 120);
    let (a, b) = (host(&db, &fleet.repo), host(&db, &fleet.repo));
    let task = a.add(&["Task", "--project", "demo"]);
    let mut store = authority(&db);
    let sup_a = up(&a, "a", &[]);
    // Frozen at work, not mid-way through preparing its worktree (holding the
    // repository's worktree lock, which both hosts share here).
    let (_, claimant_a, _, _) = wait_for("host a working", 60, || {
        let row = lane(&mut *store, "any")?;
        (row.state == spice::store::LaneState::Working && row.transcript.is_some())
            .then(|| claim_of(&mut *store, "any"))
            .flatten()
    });
    let mut sup_b = up(&b, "b", &[]);

    let signal = |sig: &str, pid: u32| {
        let st = std::process::Command::new("kill")
            .args([sig, &pid.to_string()])
            .status()
            .unwrap();
        assert!(st.success(), "kill {sig} {pid}");
    };
    signal("-STOP", sup_a.id());
    // Host b's successor launched, its row written: what host a must leave alone.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(90);
    let row_b = loop {
        let row = lane(&mut *store, "any");
        let claim = claim_of(&mut *store, "any");
        if let (Some(row), Some((t, claimant, _, live))) = (row, claim) {
            if row.host.as_deref() == Some("b")
                && row.pid.is_some()
                && row.session.as_deref() == Some(claimant.as_str())
                && t == task
                && claimant != claimant_a
                && live
            {
                break row;
            }
        }
        if std::time::Instant::now() > deadline {
            signal("-CONT", sup_a.id());
            let lane = lane(&mut *store, "any");
            let _ = sup_b.kill();
            let err = String::from_utf8_lossy(&sup_b.wait_with_output().stderr).to_string();
            panic!("host b did not run lane any: {lane:?}\nhost b said:\n{err}");
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    };

    // Host a's transcript (readable here: one machine, two homes) was copied where
    // host b's agent looks, so the resume continues the conversation there.
    let restored = wait_for("host b's agent to resume its transcript", 30, || {
        let row = lane(&mut *store, "any")?;
        let b_home = b.dir.path().display().to_string();
        (row.state == spice::store::LaneState::Working
            && row.transcript.as_deref()?.starts_with(&b_home))
        .then_some(row)
    });
    assert!(kinds(&mut *store, &task).contains(&"transcript_restored".to_string()));
    let lines = std::fs::read_to_string(restored.transcript.as_deref().unwrap()).unwrap();
    assert!(lines.contains("Continue where you left off"), "{lines}");

    signal("-CONT", sup_a.id());
    let out = sup_a.wait_with_output();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("superseded by supervisor"), "{err}");
    let row = lane(&mut *store, "any").unwrap();
    assert_eq!(
        (row.host.as_deref(), row.pid, row.session.as_deref()),
        (Some("b"), row_b.pid, row_b.session.as_deref()),
        "host a wrote over host b's row: {row:?}"
    );
    assert_ne!(row.state, spice::store::LaneState::Stopped, "{row:?}");

    b.run(&["fleet", "down"]).ok();
    let out = sup_b.wait_with_output();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
