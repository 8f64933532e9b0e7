//! Test beds through the real binary: `spice bed warm` builds a template at a commit
//! (its commands' output shown as it comes), a failed warm is recorded and never used,
//! a fleet of demo agents seeds every lane's worktree from the one template (method,
//! slot and ports in the ledger), and `spice bed gc` evicts under a tiny budget but
//! never a template in use.

use crate::common;
use common::{git, TestEnv};
use serde_json::Value;
use std::os::unix::fs::MetadataExt;

const LANE: &str = "profile = \"demo\"\nphases = [\"todo\"]\nlease = \"5m\"\n";
const BED: &str = r#"[testbed]
paths = ["build"]
warm = [["sh", "-c", "mkdir -p build/deep && seq 1 20000 > build/deep/out.txt && echo warmed the bed"]]
key = ["deps.lock"]
ports = 2
"#;

fn bed_repo(toml: &str) -> TestEnv {
    let env = TestEnv::with_lanes(&[("a", LANE), ("b", LANE)]);
    std::fs::write(env.repo.join("spice.toml"), toml).unwrap();
    std::fs::write(env.repo.join("deps.lock"), "dep 1\n").unwrap();
    std::fs::write(env.repo.join(".gitignore"), "build/\n").unwrap();
    git(&env.repo, &["add", "spice.toml", "deps.lock", ".gitignore"]);
    git(&env.repo, &["commit", "-q", "-m", "bed"]);
    env
}

fn status(env: &TestEnv) -> Value {
    env.run(&["bed", "status", "--json"]).json()
}

#[test]
fn a_fleet_seeds_every_lane_from_one_warm_template() {
    // Each claim's stage hook is told the bed (its event on stdin).
    let hooks =
        "[hooks]\non_claim = [\"sh\", \"-c\", \"cat > \\\"$TMPDIR/event-$SPICE_TASK.json\\\"\"]\n";
    // No pool: each lane's worktree is seeded from the template (tests/it/bed_pool.rs).
    let env = bed_repo(&format!("{BED}pool = 0\n{hooks}"));
    let w = env.run(&["bed", "warm"]);
    w.ok();
    assert!(
        w.stderr.contains("$ sh -c mkdir -p build/deep"),
        "{}",
        w.stderr
    );
    assert!(
        w.stderr.contains("  warmed the bed"),
        "progress as it comes: {}",
        w.stderr
    );
    let s = status(&env);
    let t = &s["templates"][0]["template"];
    assert_eq!(t["state"], "ready", "{s:#}");
    assert!(t["usage"]["apparent"].as_u64().unwrap() > 100_000, "{s:#}");
    let id = t["id"].as_str().unwrap().to_string();
    // Warming again at the same commit reuses it.
    env.run(&["bed", "warm", "--json"]).ok();
    assert_eq!(status(&env)["templates"].as_array().unwrap().len(), 1);

    let t1 = env.add(&["One", "--project", "demo"]);
    let t2 = env.add(&["Two", "--project", "demo"]);
    common::finished(env.fleet_up(&["--until-idle"]));
    let template_file =
        std::path::PathBuf::from(t["tree"].as_str().unwrap()).join("build/deep/out.txt");
    let tm = std::fs::metadata(&template_file).unwrap();
    let mut worktrees = Vec::new();
    for task in [&t1, &t2] {
        let bed = env.ledger_of(task, "bed");
        assert_eq!(bed.len(), 1, "{bed:#?}");
        let d = &bed[0]["detail"];
        assert_eq!(d["seeded"], true, "{d:#}");
        assert_eq!(d["template"], id.as_str(), "{d:#}");
        assert_eq!(d["matched"], "exact", "{d:#}");
        assert!(
            ["reflink", "copy_file_range", "copy"].contains(&d["method"].as_str().unwrap()),
            "{d:#}"
        );
        assert_eq!(d["ports"].as_array().unwrap().len(), 2, "{d:#}");
        worktrees.push(std::path::PathBuf::from(d["worktree"].as_str().unwrap()));
        let ev: Value = serde_json::from_str(
            // The hook runs in its lane's sandbox: it writes the lane's TMPDIR.
            &["a", "b"]
                .iter()
                .find_map(|l| {
                    std::fs::read_to_string(
                        env.home
                            .join("tmp")
                            .join(l)
                            .join(format!("event-{task}.json")),
                    )
                    .ok()
                })
                .unwrap(),
        )
        .unwrap();
        assert_eq!(ev["bed"]["ports"], d["ports"], "{ev:#}");
        assert_eq!(ev["bed"]["template"], id.as_str(), "{ev:#}");
    }
    // Both worktrees hold the seeded file, with its template's mtime.
    for wt in &worktrees {
        let f = wt.join("build/deep/out.txt");
        let m = std::fs::metadata(&f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        assert_eq!(
            (m.mtime(), m.mtime_nsec()),
            (tm.mtime(), tm.mtime_nsec()),
            "{}",
            f.display()
        );
        assert_eq!(m.len(), tm.len());
    }
}
#[test]
fn a_failed_warm_is_recorded_and_never_used() {
    let env = bed_repo(&BED.replace("echo warmed the bed", "echo broken >&2; exit 7"));
    let w = env.run(&["bed", "warm"]);
    assert_ne!(w.code, 0, "{}", w.stderr);
    assert!(w.stderr.contains("  broken"), "{}", w.stderr);
    assert!(w.stderr.contains("failed with exit code 7"), "{}", w.stderr);
    let s = status(&env);
    assert_eq!(s["templates"][0]["template"]["state"], "failed", "{s:#}");
    let task = env.add(&["Cold", "--project", "demo"]);
    common::finished(env.fleet_up(&["--until-idle"]));
    let bed = env.ledger_of(&task, "bed");
    assert_eq!(bed[0]["detail"]["seeded"], false, "{bed:#?}");
    assert_eq!(bed[0]["detail"]["method"], "cold", "{bed:#?}");
    // gc removes the failed one.
    let g = env.run(&["bed", "gc", "--json"]).json();
    assert_eq!(g[0]["why"], "failed warm", "{g:#}");
    assert_eq!(status(&env)["templates"], serde_json::json!([]));
}

#[test]
fn gc_under_a_tiny_budget_keeps_a_template_in_use() {
    let env = bed_repo(&format!("{BED}disk_budget = \"1KiB\"\n"));
    env.run(&["bed", "warm"]).ok();
    std::fs::write(env.repo.join("deps.lock"), "dep 2\n").unwrap();
    git(&env.repo, &["commit", "-q", "-am", "deps"]);
    env.run(&["bed", "warm"]).ok();
    let s = status(&env);
    let ids: Vec<String> = s["templates"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["template"]["id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(ids.len(), 2, "{s:#}");
    // The newer one is held (as a seeding would hold it).
    let lock = env.repo.join(format!(".git/spice/beds/{}.lock", ids[1]));
    let mut holder = std::process::Command::new("flock")
        .arg(&lock)
        .args(["sleep", "30"])
        .spawn()
        .unwrap();
    common::wait_for("the lock to be held", 10, || {
        let s = status(&env);
        (s["templates"][1]["busy"] == true).then_some(())
    });
    let g = env.run(&["bed", "gc", "--json"]).json();
    holder.kill().unwrap();
    let _ = holder.wait();
    let evicted: Vec<&str> = g
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["id"].as_str().unwrap())
        .collect();
    assert_eq!(evicted, [ids[0].as_str()], "{g:#}");
    let left = status(&env);
    assert_eq!(left["templates"].as_array().unwrap().len(), 1, "{left:#}");
    assert_eq!(left["templates"][0]["template"]["id"], ids[1].as_str());
}

/// A template the seeding refuses (a link on the way to its bed path, which would
/// lead the copy out of the template): the worktree stays cold, the ledger says why,
/// and the lane does its task anyway.
#[test]
fn a_bed_that_cannot_be_seeded_never_stops_a_lane() {
    let env = bed_repo(&BED.replace(r#"paths = ["build"]"#, r#"paths = ["build/deep"]"#));
    env.run(&["bed", "warm"]).ok();
    let tree = std::path::PathBuf::from(
        status(&env)["templates"][0]["template"]["tree"]
            .as_str()
            .unwrap(),
    );
    std::fs::rename(tree.join("build"), tree.join("elsewhere")).unwrap();
    std::os::unix::fs::symlink("elsewhere", tree.join("build")).unwrap();
    let task = env.add(&["Anyway", "--project", "demo"]);
    common::finished(env.fleet_up(&["--until-idle"]));
    let bed = env.ledger_of(&task, "bed");
    let d = &bed[0]["detail"];
    assert_eq!(d["seeded"], false, "{d:#}");
    assert_eq!(d["method"], "cold", "{d:#}");
    assert!(d["error"].as_str().unwrap().contains("build"), "{d:#}");
    let done = env.ledger_of(&task, "phase_completed");
    assert_eq!(done.len(), 1, "the lane did its task: {done:#?}");
}

/// The fleet warms a template in the background when base names a commit no template
/// matches by key (at its start, and when a dependency changes on base), says so on
/// its stderr, and a warm still running when it stops is stopped with it (its
/// commands killed) and leaves nothing behind.
#[test]
fn the_fleet_warms_in_the_background_when_base_moves_and_stops_a_warm_with_it() {
    let env = bed_repo(BED);
    let sup = env.fleet_up(&[]);
    let env = &env;
    let ready = |n: usize| {
        move || {
            let s = status(env);
            let t = s["templates"].as_array().cloned().unwrap_or_default();
            (t.len() == n && t.iter().all(|t| t["template"]["state"] == "ready")).then_some(t)
        }
    };
    let first = common::wait_for("a template warmed at start", 60, ready(1));
    let head = git(&env.repo, &["rev-parse", "HEAD"]);
    assert_eq!(first[0]["template"]["commit"], head.trim());
    // A commit that keeps the key needs no new template; one that changes it does.
    std::fs::write(env.repo.join("README"), "hello\n").unwrap();
    git(&env.repo, &["add", "README"]);
    git(&env.repo, &["commit", "-q", "-m", "readme"]);
    std::fs::write(env.repo.join("deps.lock"), "dep 2\n").unwrap();
    git(&env.repo, &["commit", "-q", "-am", "deps"]);
    let second = common::wait_for("a template for the new key", 60, ready(2));
    let head = git(&env.repo, &["rev-parse", "HEAD"]);
    assert_eq!(second[1]["template"]["commit"], head.trim(), "{second:#?}");
    // A slow warm, stopped by the supervisor's stop.
    let pidfile = env.home.join("warm.pid");
    let slow = BED.replace(
        "mkdir -p build/deep && seq 1 20000 > build/deep/out.txt && echo warmed the bed",
        &format!("echo $$ > {}; exec sleep 120", pidfile.display()),
    );
    std::fs::write(env.repo.join("spice.toml"), slow).unwrap();
    std::fs::write(env.repo.join("deps.lock"), "dep 3\n").unwrap();
    git(&env.repo, &["commit", "-q", "-am", "slow"]);
    let pid: i32 = common::wait_for("the slow warm to start", 60, || {
        std::fs::read_to_string(&pidfile).ok()?.trim().parse().ok()
    });
    assert_eq!(status(env)["templates"][2]["template"]["state"], "warming");
    env.run(&["fleet", "down"]).ok();
    let out = common::to_run(sup.wait_with_output());
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stderr
            .contains("in the background: no template matches its deps.lock"),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("ready, warmed in"), "{}", out.stderr);
    // The warm's command is gone, and so is its template (not a failed one).
    let gone = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None).is_err();
    assert!(gone, "the warm command {pid} still runs");
    let left = status(env);
    assert_eq!(left["templates"].as_array().unwrap().len(), 2, "{left:#}");
}

/// A `[testbed]` that does not parse: `fleet check` refuses it (exit 2, located in the
/// file base carries); `fleet up` says so and runs, its worktrees cold.
#[test]
fn a_bad_testbed_is_refused_by_fleet_check_and_reported_by_fleet_up() {
    let env = bed_repo(&BED.replace("ports = 2", "ports = 99"));
    let check = env.run(&["fleet", "check"]);
    assert_eq!(check.code, 2, "{}", check.stderr);
    assert!(
        check
            .stderr
            .contains("spice.toml (at main):5:9: ports: 99 must be between 0 and 64"),
        "{}",
        check.stderr
    );
    let task = env.add(&["Anyway", "--project", "demo"]);
    let run = common::finished(env.fleet_up(&["--until-idle"]));
    assert!(
        run.stderr
            .contains("ports: 99 must be between 0 and 64 (the fleet runs"),
        "{}",
        run.stderr
    );
    assert_eq!(env.ledger_of(&task, "phase_completed").len(), 1);
    let bed = env.ledger_of(&task, "bed");
    assert!(
        bed[0]["detail"]["error"]
            .as_str()
            .unwrap()
            .contains("ports"),
        "{bed:#?}"
    );
}

/// A supervisor killed, and its task's worktree lost meanwhile: the next supervisor
/// makes the worktree again for the same claim, and the bed keeps its slot and its
/// ports (the agent's conversation was told them).
#[test]
fn a_worktree_made_again_after_a_restart_keeps_its_ports() {
    let env = bed_repo(BED);
    std::fs::create_dir_all(env.repo.join("profiles")).unwrap();
    std::fs::write(
        env.repo.join("profiles/sleeper.toml"),
        "command = [\"sh\", \"-c\", \"echo \\\"$SPICE_SLOT $SPICE_PORTS\\\" >> \\\"$TMPDIR/ports.log\\\"; exec sleep 120\"]\nmode = \"pty\"\n",
    )
    .unwrap();
    std::fs::remove_file(env.repo.join("lanes/b.toml")).unwrap();
    std::fs::write(
        env.repo.join("lanes/a.toml"),
        "profile = \"sleeper\"\nphases = [\"todo\"]\nlease = \"5m\"\n",
    )
    .unwrap();
    env.run(&["bed", "warm"]).ok();
    let task = env.add(&["Sleep", "--project", "demo"]);
    // The lane's private TMPDIR: a confined agent writes there, not in the state directory.
    let log = env.home.join("tmp/a/ports.log");
    let lines = |n: usize| {
        let log = log.clone();
        move || {
            let text = std::fs::read_to_string(&log).ok()?;
            let l: Vec<String> = text.lines().map(str::to_string).collect();
            (l.len() >= n).then_some(l)
        }
    };
    let mut sup = env.fleet_up(&[]);
    let first = common::wait_for("the agent to start", 30, lines(1));
    let wt = env.run(&["task", "show", &task, "--json"]).json()["claim"]["worktree"]
        .as_str()
        .unwrap()
        .to_string();
    sup.kill9();
    std::fs::remove_dir_all(&wt).unwrap();
    let _sup = env.fleet_up(&[]);
    let both = common::wait_for("the successor to start", 30, lines(2));
    assert_eq!(both[1], first[0], "same slot and ports: {both:?}");
    assert!(std::path::Path::new(&wt)
        .join("build/deep/out.txt")
        .exists());
    let beds = env.ledger_of(&task, "bed");
    assert_eq!(beds.len(), 2, "{beds:#?}");
    assert_eq!(beds[0]["detail"]["ports"], beds[1]["detail"]["ports"]);
}

/// Regression (issue 40): `spice bed gc` under a budget it could not meet said
/// "nothing to evict" and never why. It says why in one line: no budget set, the beds
/// within it, or over it with what is left and why none of it may go (a template
/// being seeded from, the beds of task worktrees in use).
#[test]
fn regression_gc_says_why_it_evicts_nothing() {
    let env = bed_repo(&format!("{BED}pool = 0\n"));
    std::fs::create_dir_all(env.repo.join("profiles")).unwrap();
    std::fs::write(
        env.repo.join("profiles/sleeper.toml"),
        "command = [\"sh\", \"-c\", \"touch \\\"$TMPDIR/started\\\"; exec sleep 120\"]\nmode = \"pty\"\n",
    )
    .unwrap();
    std::fs::remove_file(env.repo.join("lanes/b.toml")).unwrap();
    std::fs::write(
        env.repo.join("lanes/a.toml"),
        "profile = \"sleeper\"\nphases = [\"todo\"]\nlease = \"5m\"\n",
    )
    .unwrap();
    git(&env.repo, &["add", "-A"]);
    git(&env.repo, &["commit", "-q", "-m", "a sleeping lane"]);
    env.run(&["bed", "warm"]).ok();
    let id = status(&env)["templates"][0]["template"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let gc = |env: &TestEnv| env.run(&["bed", "gc"]).ok().to_string();
    assert_eq!(
        gc(&env),
        "nothing to evict: [testbed] sets no disk_budget, so only failed warms are evicted\n"
    );
    // A task's worktree, seeded from the template, in use while its agent runs.
    env.add(&["Sleep", "--project", "demo"]);
    let _sup = env.fleet_up(&[]);
    common::wait_for("the agent to start", 30, || {
        env.home.join("tmp/a/started").exists().then_some(())
    });
    let budget = |b: &str| {
        std::fs::write(
            env.repo.join("spice.toml"),
            format!("{BED}pool = 0\ndisk_budget = \"{b}\"\n"),
        )
        .unwrap()
    };
    budget("1GiB");
    let within = gc(&env);
    assert!(
        within.starts_with("nothing to evict: all beds use ")
            && within.ends_with(" of real disk, within the budget of 1.0 GiB\n"),
        "{within}"
    );
    // Over the budget, with the template being seeded from (its lock held).
    budget("1KiB");
    let lock = env.repo.join(format!(".git/spice/beds/{id}.lock"));
    // `-o`: the lock is flock's own, not its sleep's, so killing flock frees it.
    let mut holder = std::process::Command::new("flock")
        .arg("-o")
        .arg(&lock)
        .args(["sleep", "30"])
        .spawn()
        .unwrap();
    common::wait_for("the lock to be held", 10, || {
        (status(&env)["templates"][0]["busy"] == true).then_some(())
    });
    let held = gc(&env);
    holder.kill().unwrap();
    let _ = holder.wait();
    let over = ", over the budget of 1.0 KiB, and none of what is left may go: \
                the beds of 1 task worktree(s) in use (";
    assert_eq!(held.lines().count(), 1, "{held}");
    assert!(
        held.starts_with("nothing to evict: all beds use "),
        "{held}"
    );
    assert!(held.contains(over), "{held}");
    assert!(
        held.ends_with(&format!("), template {id} (being warmed or seeded from)\n")),
        "{held}"
    );
    // Free, the template goes; what is left is the bed in use, and gc says so.
    let evicted = gc(&env);
    let lines: Vec<&str> = evicted.lines().collect();
    assert_eq!(lines.len(), 2, "{evicted}");
    assert!(
        lines[0].starts_with(&format!("evicted template {id} (")),
        "{evicted}"
    );
    assert!(
        lines[1].starts_with("still over: all beds use "),
        "{evicted}"
    );
    assert!(
        lines[1].contains(over) && lines[1].ends_with(')'),
        "{evicted}"
    );
    let again = gc(&env);
    assert!(
        again.starts_with("nothing to evict: all beds use "),
        "{again}"
    );
    assert!(again.contains(over) && again.ends_with(")\n"), "{again}");
    env.run(&["fleet", "down"]).ok();
}
