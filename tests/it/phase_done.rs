//! `task phase --done` as one operation: the holding is proved (a fenced renewal)
//! before anything is merged or pushed, and the phase is completed under the same
//! fence. Regression tests for a defect: the merge (and push) ran first and the store
//! refused a stale holder only afterwards, so a worker whose claim had been taken over
//! could still land its branch and push it.

use crate::common;
use common::{git, wait_for, Run, TestEnv};
use spice::clock::ManualClock;
use spice::store::{ClaimRequest, Holder, Store, Takeover};
use spice::task::NewTask;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// A repository on `main` with a lane `a` that pushes to a bare `origin`, and one task
/// claimed by `s1` on lane `a` under a one-second lease, its worktree one commit ahead.
struct Setup {
    env: TestEnv,
    remote: PathBuf,
    task: String,
    wt: PathBuf,
    fence: i64,
}

fn setup() -> Setup {
    let env = TestEnv::new();
    for (k, v) in [("user.email", "t@spice"), ("user.name", "t")] {
        git(&env.repo, &["config", k, v]);
    }
    git(&env.repo, &["checkout", "-q", "-b", "main"]);
    std::fs::create_dir_all(env.repo.join("lanes")).unwrap();
    std::fs::write(
        env.repo.join("lanes/a.toml"),
        "profile = \"demo\"\nphases = [\"todo\"]\npush = \"origin\"\n",
    )
    .unwrap();
    git(&env.repo, &["add", "lanes"]);
    git(&env.repo, &["commit", "-q", "-m", "lane a pushes"]);
    let remote = env.dir.path().join("remote.git");
    let remote_s = remote.to_str().unwrap();
    git(env.dir.path(), &["init", "-q", "--bare", remote_s]);
    git(&env.repo, &["remote", "add", "origin", remote_s]);
    git(&env.repo, &["push", "-q", "origin", "main"]);
    let task = env.add(&["Land me", "--project", "p"]);
    let wt = env.dir.path().join("wt");
    let wt_s = wt.to_str().unwrap();
    git(
        &env.repo,
        &["worktree", "add", "-q", "-b", "spice/p-land", wt_s, "main"],
    );
    let claim = env
        .run(&[
            "task",
            "claim",
            &task,
            "--claimant",
            "s1",
            "--lane",
            "a",
            "--worktree",
            wt_s,
            "--lease",
            "1s",
            "--json",
        ])
        .json();
    std::fs::write(wt.join("work.txt"), "work\n").unwrap();
    git(&wt, &["add", "work.txt"]);
    git(&wt, &["commit", "-q", "-m", "work"]);
    Setup {
        env,
        remote,
        task,
        wt,
        fence: claim["fence"].as_i64().unwrap(),
    }
}

impl Setup {
    /// Waits until the claim's lease has lapsed, then takes it over as `who`.
    fn take_over(&self, who: &str) -> i64 {
        wait_for("the lease to lapse", 30, || {
            let stale = self
                .env
                .run(&["task", "claims", "--stale", "--json"])
                .json();
            (!stale.as_array().unwrap().is_empty()).then_some(())
        });
        let fence = self.fence.to_string();
        let c = self.env.run(&[
            "task",
            "takeover",
            &self.task,
            "--stale",
            &fence,
            "--claimant",
            who,
            "--json",
        ]);
        c.json()["fence"].as_i64().unwrap()
    }

    fn phase_done(&self, claimant: &str, fence: Option<i64>) -> Run {
        let fence = fence.map(|f| f.to_string());
        let mut args = vec![
            "task",
            "phase",
            &self.task,
            "--done",
            "--claimant",
            claimant,
        ];
        if let Some(f) = &fence {
            args.extend(["--fence", f]);
        }
        self.env.run(&args)
    }

    fn main_tip(&self) -> String {
        git(&self.env.repo, &["rev-parse", "refs/heads/main"])
    }

    fn pushed_tip(&self) -> String {
        git(&self.remote, &["rev-parse", "refs/heads/main"])
    }

    /// Nothing moved: base and the remote at `start`, the checkout clean, the phase
    /// not completed, the claim still the new holder's.
    #[track_caller]
    fn assert_nothing_landed(&self, start: &str, holder: &str, fence: i64) {
        assert_eq!(self.main_tip(), start, "base moved");
        assert_eq!(self.pushed_tip(), start, "something was pushed");
        assert_eq!(git(&self.env.repo, &["status", "--porcelain"]), "");
        let show = self.env.run(&["task", "show", &self.task, "--json"]).json();
        assert_eq!(show["phase"], "todo", "{show}");
        assert_eq!(show["claim"]["claimant"], holder, "{show}");
        assert_eq!(show["claim"]["fence"], fence, "{show}");
    }
}

/// The worker of an earlier holding (fence f1) by the same claimant, after the
/// claimant re-took the lapsed claim (fence f2): merges nothing, pushes nothing.
#[test]
fn a_worker_of_a_holding_taken_over_lands_nothing_and_pushes_nothing() {
    let s = setup();
    let start = s.main_tip();
    let new_fence = s.take_over("s1");
    let err = s
        .phase_done("s1", Some(s.fence))
        .fails(3, "that holding ended");
    assert!(err.contains(&format!("fence {}", s.fence)), "{err}");
    s.assert_nothing_landed(&start, "s1", new_fence);
    // The current holding lands, and base is pushed as the lane says.
    let out = s.phase_done("s1", Some(new_fence)).ok().to_string();
    assert!(out.contains("merged spice/p-land into main"), "{out}");
    let tip = git(&s.wt, &["rev-parse", "HEAD"]);
    assert_eq!(s.main_tip(), tip);
    assert_eq!(s.pushed_tip(), tip);
}

/// A holder without `--fence` is checked against the current holder: taken over by
/// someone else, it merges and pushes nothing either.
#[test]
fn a_holder_displaced_by_another_claimant_lands_nothing() {
    let s = setup();
    let start = s.main_tip();
    let new_fence = s.take_over("s2");
    s.phase_done("s1", None).fails(3, "held by s2");
    s.assert_nothing_landed(&start, "s2", new_fence);
    s.phase_done("s2", None).ok();
    assert_eq!(s.pushed_tip(), git(&s.wt, &["rev-parse", "HEAD"]));
}

/// A refused merge (the worktree is dirty) of a lapsed holding leaves the claim held,
/// its lease renewed by the proof, and nothing pushed.
#[test]
fn a_refused_merge_keeps_the_claim_and_pushes_nothing() {
    let s = setup();
    let start = s.main_tip();
    wait_for("the lease to lapse", 30, || {
        let stale = s.env.run(&["task", "claims", "--stale", "--json"]).json();
        (!stale.as_array().unwrap().is_empty()).then_some(())
    });
    std::fs::write(s.wt.join("stray.txt"), "uncommitted\n").unwrap();
    s.phase_done("s1", Some(s.fence))
        .fails(3, "uncommitted changes");
    assert_eq!(s.main_tip(), start);
    assert_eq!(s.pushed_tip(), start);
    let claims = s.env.run(&["task", "claims", "--json"]).json();
    assert_eq!(claims[0]["fence"], s.fence, "{claims}");
    let stale = s.env.run(&["task", "claims", "--stale", "--json"]).json();
    assert_eq!(stale, serde_json::json!([]), "the proof renewed the lease");
}

// The proof itself, against the store with a clock that moves only when told.

const MIN: Duration = Duration::from_secs(60);

fn store() -> (tempfile::TempDir, Store, ManualClock, String) {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(1_800_000_000_000_000);
    let mut store = Store::open_dir(dir.path(), Arc::new(clock.clone())).unwrap();
    let task = store
        .add_task(
            NewTask {
                title: "work".into(),
                ..NewTask::default()
            },
            &[],
        )
        .unwrap();
    (dir, store, clock, task.id)
}

fn req(who: &str, lease: Duration) -> ClaimRequest {
    ClaimRequest {
        claimant: who.into(),
        lane: None,
        worktree: None,
        lease,
    }
}

#[test]
fn the_proof_keeps_a_lapsed_lease_from_being_taken_over_and_never_shortens_one() {
    let (_d, mut s, clock, id) = store();
    let c = s.claim(&id, &req("a", MIN)).unwrap();
    clock.advance(2 * MIN);
    // Lapsed but not taken over: the holder may still prove its holding.
    let held = s
        .hold(&id, &Holder::new("a"), 10 * MIN, "complete the phase of")
        .unwrap();
    assert_eq!(held.fence, c.fence);
    assert!(held.is_live(s.now()));
    let t = Takeover {
        stale_fence: c.fence,
        claimant: "b".into(),
        lane: None,
        worktree: None,
        lease: MIN,
        force: false,
    };
    let e = s.takeover(&id, &t).unwrap_err();
    assert!(e.to_string().contains("still live"), "{e}");
    let shorter = s.hold(&id, &Holder::new("a"), MIN, "x").unwrap();
    assert_eq!(shorter.lease_until, held.lease_until);
}

#[test]
fn the_proof_refuses_another_claimant_and_a_stale_fence_in_the_callers_words() {
    let (_d, mut s, _clock, id) = store();
    let c = s.claim(&id, &req("a", MIN)).unwrap();
    let verb = "complete the phase of";
    let e = s.hold(&id, &Holder::new("b"), MIN, verb).unwrap_err();
    assert_eq!(e.exit_code(), 3);
    assert!(
        e.to_string()
            .starts_with("cannot complete the phase of task"),
        "{e}"
    );
    assert!(e.to_string().contains("held by a"), "{e}");
    let e = s
        .hold(&id, &Holder::fenced("a", c.fence + 100), MIN, verb)
        .unwrap_err();
    assert!(e.to_string().contains("that holding ended"), "{e}");
    s.release(&id, &Holder::new("a")).unwrap();
    let e = s.hold(&id, &Holder::new("a"), MIN, verb).unwrap_err();
    assert!(e.to_string().contains("not claimed"), "{e}");
}

#[test]
fn regression_the_agents_environment_never_chooses_where_a_phase_merges() {
    // Before: `SPICE_BASE=<branch> spice task phase ID --done` merged into that branch,
    // so main's gate and on_phase_done never ran.
    let env = TestEnv::with_lanes(&[("a", "profile = \"demo\"\nphases = [\"todo\"]\n")]);
    git(&env.repo, &["branch", "other"]);
    let task = env.add(&["Land me", "--project", "p"]);
    let wt = env.dir.path().join("wt");
    let wt_s = wt.to_str().unwrap();
    git(
        &env.repo,
        &["worktree", "add", "-q", "-b", "spice/p-land", wt_s, "main"],
    );
    env.run(&[
        "task",
        "claim",
        &task,
        "--claimant",
        "s1",
        "--lane",
        "a",
        "--worktree",
        wt_s,
        "--lease",
        "5m",
    ])
    .ok();
    std::fs::write(wt.join("work.txt"), "work\n").unwrap();
    git(&wt, &["add", "work.txt"]);
    git(&wt, &["commit", "-q", "-m", "work"]);
    let other_before = git(&env.repo, &["rev-parse", "other"]);
    let mut cmd = env.cmd(&["task", "phase", &task, "--done", "--claimant", "s1"]);
    cmd.current_dir(&wt)
        .env("SPICE_LANE", "a")
        .env("SPICE_SESSION", "s1")
        .env("SPICE_BASE", "other")
        .env("SPICE_PUSH", "nowhere");
    let out = common::to_run(cmd.output().unwrap());
    out.ok();
    assert_eq!(git(&env.repo, &["rev-parse", "other"]), other_before);
    let main_files = git(&env.repo, &["ls-tree", "--name-only", "main"]);
    assert!(main_files.contains("work.txt"), "{main_files}");
}
