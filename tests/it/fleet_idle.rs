//! Idle lanes sleep (#20): a lane with nothing eligible waits on the store's
//! generation of the graph and its claims, and on the next wait date, not on a
//! periodic re-rank. Each kind of change that can make work for it wakes it: a task
//! added by another process, a claim another lane's session released (its phase
//! completed), a wait date passing.

use crate::common;
use common::{wait_for, TestEnv};
use spice::clock::Clock;

const TODO: &str = "profile = \"demo\"\nphases = [\"todo\"]\nlease = \"5m\"\n";
const REVIEW: &str = "profile = \"demo\"\nphases = [\"review\"]\nlease = \"5m\"\n";

fn idle(env: &TestEnv, lane: &str) -> bool {
    env.lane(lane)["state"] == "idle"
}

/// The lanes that claimed `task`, in order, and when each claim was made.
fn claims_of(env: &TestEnv, task: &str) -> Vec<(String, String)> {
    env.ledger_of(task, "claimed")
        .iter()
        .map(|e| {
            (
                e["detail"]["lane"].as_str().unwrap_or_default().to_string(),
                e["at"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

fn status_of(env: &TestEnv, task: &str) -> String {
    let show = env.run(&["task", "show", task, "--json"]).json();
    show["status"].as_str().unwrap().to_string()
}

#[test]
fn an_idle_lane_wakes_for_a_new_task_a_released_claim_and_a_passing_wait_date() {
    let env = TestEnv::with_lanes(&[("t", TODO), ("r", REVIEW)]);
    let _sup = env.fleet_up(&[]);
    wait_for("both lanes idle", 60, || {
        (idle(&env, "t") && idle(&env, "r")).then_some(())
    });

    // Added by another process: the todo lane claims it; its session completes the
    // phase, which releases the claim, and the idle review lane takes the task.
    let added = env.add(&["Added later", "--project", "demo"]);
    wait_for("the added task reviewed and done", 120, || {
        (status_of(&env, &added) == "completed").then_some(())
    });
    let lanes: Vec<String> = claims_of(&env, &added).into_iter().map(|c| c.0).collect();
    assert_eq!(
        lanes,
        ["t", "r"],
        "claimed by the todo lane, then the review lane"
    );
    wait_for("both lanes idle again", 60, || {
        (idle(&env, "t") && idle(&env, "r")).then_some(())
    });

    // A task that waits until a moment a few seconds ahead: nothing else happens, so
    // only the lane's own timer can wake it, and not before that moment.
    let wait = spice::when::rfc3339(spice::clock::SystemClock.now() + 3_000_000);
    let at = spice::when::parse_date(&wait).unwrap();
    let doc = format!(
        r#"[{{"uuid":"5d1b4f4e-2f57-4d2a-9c59-8d0f3c1e7a21","description":"Waits a little",
             "status":"pending","project":"demo","entry":"20260101T000000Z","wait":"{wait}"}}]"#
    );
    let imported = env.run_stdin(&["task", "import", "--taskwarrior", "-", "--json"], &doc);
    imported.ok();
    let id = env.run(&["task", "list", "--json"]).json()[0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let (lane, when) = wait_for("the waiting task claimed once its date passed", 60, || {
        claims_of(&env, &id).into_iter().next()
    });
    assert_eq!(lane, "t");
    let claimed = spice::when::parse_date(&when).unwrap();
    assert!(
        claimed >= at,
        "claimed at {when}, before its wait date {wait}"
    );
}

/// Every wake-up of every thread of `pid` so far: the voluntary context switches (a
/// thread that sleeps, wakes and sleeps again makes one).
fn wake_ups(pid: u32) -> u64 {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return 0;
    };
    tasks
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("status")).ok())
        .filter_map(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))
                .and_then(|v| v.trim().parse::<u64>().ok())
        })
        .sum()
}

/// An idle supervisor sleeps: with nothing eligible, its threads wake for changes
/// and their own duties (a heartbeat every 2 s, the store's bell's look every second),
/// never on short timers. It used to wake about 60 times a second with four lanes
/// (each lane and attach listener 4 times, the event observer, heartbeat and warmer
/// threads 10 times each).
#[test]
fn an_idle_supervisor_wakes_a_few_times_a_second_at_most() {
    let lane = "profile = \"demo\"\nphases = [\"todo\"]\nprojects = [\"nothing-here\"]\n";
    let env = TestEnv::with_lanes(&[("a", lane), ("b", lane), ("c", lane), ("d", lane)]);
    env.add(&["Not for these lanes", "--project", "demo"]);
    let sup = env.fleet_up(&[]);
    wait_for("every lane idle", 60, || {
        ["a", "b", "c", "d"]
            .iter()
            .all(|l| idle(&env, l))
            .then_some(())
    });
    // A window to count in, not a wait for a condition: the rate is the measure.
    let window = std::time::Duration::from_secs(4);
    let before = wake_ups(sup.id());
    let start = std::time::Instant::now();
    std::thread::sleep(window);
    let woke = wake_ups(sup.id()) - before;
    let per_second = woke as f64 / start.elapsed().as_secs_f64();
    eprintln!("idle supervisor, 4 lanes: {woke} wake-ups in {window:?} ({per_second:.1}/s)");
    assert!(
        per_second < 15.0,
        "an idle supervisor woke {per_second:.1} times a second ({woke} in {window:?})"
    );
}

/// Idle lanes sleep until woken, so a stop must wake them: the signal handler nudges
/// the waiters. Stopped just after its lanes went idle, an unwoken supervisor would
/// see the flag only at each lane's 5 s backstop (`store::generation::GIVE_UP_EVERY`).
#[test]
fn an_idle_supervisor_stops_at_once() {
    let lane = "profile = \"demo\"\nphases = [\"todo\"]\nprojects = [\"nothing-here\"]\n";
    let env = TestEnv::with_lanes(&[("a", lane), ("b", lane), ("c", lane), ("d", lane)]);
    let sup = env.fleet_up(&[]);
    wait_for("every lane idle", 60, || {
        ["a", "b", "c", "d"]
            .iter()
            .all(|l| idle(&env, l))
            .then_some(())
    });
    let asked = std::time::Instant::now();
    env.run(&["fleet", "down"]).ok();
    sup.finished();
    assert!(
        asked.elapsed() < std::time::Duration::from_secs(3),
        "an idle supervisor took {:?} to stop",
        asked.elapsed()
    );
}

/// `--until-idle` with nothing eligible ends as soon as every lane has looked: the
/// last lane to find nothing nudges the others, which sleep until woken (without the
/// nudge, each would see the fleet quiet only at its 5 s backstop).
#[test]
fn an_until_idle_run_with_nothing_to_do_ends_at_once() {
    let lane = "profile = \"demo\"\nphases = [\"todo\"]\nprojects = [\"nothing-here\"]\n";
    let env = TestEnv::with_lanes(&[("a", lane), ("b", lane), ("c", lane), ("d", lane)]);
    env.add(&["Not for these lanes", "--project", "demo"]);
    let started = std::time::Instant::now();
    env.fleet_up(&["--until-idle"]).finished();
    assert!(
        started.elapsed() < std::time::Duration::from_secs(4),
        "an --until-idle run with nothing to do took {:?}",
        started.elapsed()
    );
}
