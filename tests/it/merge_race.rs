//! Git boundary 2 under contention, through the real binary: phase completions that
//! race into a `base` checked out in the operator's main work tree, and a holder whose
//! claim was taken over trying to land its branch anyway.
//!
//! Regression tests for two defects: concurrent `git merge --ff-only` runs in the
//! operator's checkout left it with staged deletions and untracked copies of merged
//! files (and every later merge refused); and `phase --done` merged and pushed before
//! the store refused a stale holder.

use crate::common;
use common::{git, to_run, Run, TestEnv};
use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

const ROUNDS: usize = 20;
const AT_ONCE: usize = 6;
/// Sections of `shared.txt`, far enough apart that edits to different ones merge cleanly.
const SECTION_GAP: usize = 4;

fn setup() -> TestEnv {
    let env = TestEnv::new();
    for (k, v) in [("user.email", "race@spice"), ("user.name", "race")] {
        git(&env.repo, &["config", k, v]);
    }
    git(&env.repo, &["checkout", "-q", "-b", "main"]);
    std::fs::write(env.repo.join("shared.txt"), shared_text(&[])).unwrap();
    git(&env.repo, &["add", "shared.txt"]);
    git(&env.repo, &["commit", "-q", "-m", "root"]);
    env
}

/// `shared.txt` with section `i` reading `edits[i]` where given, `base` elsewhere.
fn shared_text(edits: &[(usize, String)]) -> String {
    let mut s = String::new();
    for i in 0..AT_ONCE {
        let v = edits
            .iter()
            .find(|(j, _)| *j == i)
            .map_or("base", |(_, v)| v.as_str());
        s.push_str(&format!("section {i}: {v}\n"));
        for k in 0..SECTION_GAP {
            s.push_str(&format!("  filler {i}.{k}\n"));
        }
    }
    s
}

/// One task claimed by `claimant`, with a worktree holding one commit.
struct Task {
    id: String,
    claimant: String,
    wt: PathBuf,
    file: String,
}

/// Makes `AT_ONCE` tasks, each on its own branch from `main` with a commit adding a
/// file of its own; even ones also edit their section of `shared.txt`, so merges of
/// them are merge commits touching one file. Independent steps run side by side.
fn tasks(env: &TestEnv, round: usize) -> Vec<Task> {
    let names: Vec<String> = (0..AT_ONCE).map(|i| format!("r{round}-{i}")).collect();
    let adds: Vec<_> = names
        .iter()
        .map(|n| {
            let mut c = env.cmd(&["task", "add", "--json", n, "--project", "race"]);
            c.stdout(Stdio::piped()).stderr(Stdio::piped());
            c.spawn().expect("spice runs")
        })
        .collect();
    let ids: Vec<String> = adds
        .into_iter()
        .map(|c| {
            to_run(c.wait_with_output().unwrap()).json()["id"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    // One at a time: concurrent `git worktree add`s read each other's half-written
    // metadata (spice serialises its own; these are the test's).
    for n in &names {
        let wt = env.dir.path().join("wt").join(n);
        let wt_s = wt.to_str().unwrap();
        git(
            &env.repo,
            &[
                "worktree",
                "add",
                "-q",
                "-b",
                &format!("spice/{n}"),
                wt_s,
                "main",
            ],
        );
    }
    std::thread::scope(|s| {
        let made: Vec<_> = names
            .iter()
            .zip(ids)
            .enumerate()
            .map(|(i, (n, id))| s.spawn(move || task(env, n, id, (i % 2 == 0).then_some(i))))
            .collect();
        made.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

fn task(env: &TestEnv, name: &str, id: String, section: Option<usize>) -> Task {
    let wt = env.dir.path().join("wt").join(name);
    let claimant = format!("c-{name}");
    let wt_s = wt.to_str().unwrap();
    env.run(&[
        "task",
        "claim",
        &id,
        "--claimant",
        &claimant,
        "--worktree",
        wt_s,
    ])
    .ok();
    let file = format!("{name}/work.txt");
    std::fs::create_dir_all(wt.join(name)).unwrap();
    std::fs::write(wt.join(&file), format!("{name}\n")).unwrap();
    if let Some(i) = section {
        let now = std::fs::read_to_string(wt.join("shared.txt")).unwrap();
        let line = format!("section {i}: ");
        let edited: String = now
            .lines()
            .map(|l| match l.starts_with(&line) {
                true => format!("{line}{name}\n"),
                false => format!("{l}\n"),
            })
            .collect();
        std::fs::write(wt.join("shared.txt"), edited).unwrap();
    }
    git(&wt, &["add", "-A"]);
    git(&wt, &["commit", "-q", "-m", &format!("work of {name}")]);
    Task {
        id,
        claimant,
        wt,
        file,
    }
}

fn phase_done(env: &TestEnv, t: &Task) -> std::process::Command {
    let mut c = env.cmd(&["task", "phase", &t.id, "--done", "--claimant", &t.claimant]);
    c.stdout(Stdio::piped()).stderr(Stdio::piped());
    c
}

/// The operator's checkout is clean and on the tip of `main`.
#[track_caller]
fn assert_checkout_clean(env: &TestEnv, round: usize) {
    let status = git(
        &env.repo,
        &["status", "--porcelain", "--untracked-files=all"],
    );
    assert!(
        status.is_empty(),
        "round {round}: the operator's checkout was left dirty:\n{status}"
    );
    let head = git(&env.repo, &["rev-parse", "HEAD"]);
    let tip = git(&env.repo, &["rev-parse", "refs/heads/main"]);
    assert_eq!(head, tip, "round {round}: HEAD is not the tip of main");
    let sym = git(&env.repo, &["symbolic-ref", "HEAD"]);
    assert_eq!(sym.trim(), "refs/heads/main", "round {round}");
}

/// A refusal is a conflict (exit 3) on one line saying what was in the way.
#[track_caller]
fn assert_clean_refusal(r: &Run, round: usize) {
    assert_eq!(r.code, 3, "round {round}: {}{}", r.stdout, r.stderr);
    let err = r.stderr.trim_end();
    assert!(
        err.starts_with("spice: ") && !err.contains('\n') && !err.contains("panicked"),
        "round {round}: not a one-line refusal: {err:?}"
    );
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// Six agents complete their phases at the same moment into `main`, which the
/// operator has checked out: every round the checkout ends clean at the new tip,
/// every branch lands (a refusal is one line and lands on one retry), and the merged
/// files are in the operator's tree.
#[test]
fn simultaneous_phase_completions_leave_the_checked_out_base_clean() {
    let env = setup();
    let mut times = Vec::new();
    let mut refused = 0;
    for round in 0..ROUNDS {
        let tasks = tasks(&env, round);
        let start = Instant::now();
        let children: Vec<_> = tasks
            .iter()
            .map(|t| phase_done(&env, t).spawn().expect("spice runs"))
            .collect();
        let runs: Vec<Run> = children
            .into_iter()
            .map(|c| to_run(c.wait_with_output().unwrap()))
            .collect();
        assert_checkout_clean(&env, round);
        for (t, r) in tasks.iter().zip(&runs) {
            if r.code != 0 {
                assert_clean_refusal(r, round);
                refused += 1;
                let again = to_run(phase_done(&env, t).output().unwrap());
                assert_eq!(
                    again.code, 0,
                    "round {round}: retry of {}: {}",
                    t.id, again.stderr
                );
                assert_checkout_clean(&env, round);
            }
        }
        times.push(start.elapsed());
        let unmerged = git(
            &env.repo,
            &[
                "branch",
                "--no-merged",
                "main",
                "--list",
                &format!("spice/r{round}-*"),
            ],
        );
        assert!(unmerged.is_empty(), "round {round}: not landed: {unmerged}");
        let open = env
            .run(&["task", "list", "--project", "race", "--json"])
            .json();
        for t in &tasks {
            let name = t.file.trim_end_matches("/work.txt");
            assert_eq!(
                std::fs::read_to_string(env.repo.join(&t.file)).unwrap(),
                format!("{name}\n"),
                "round {round}"
            );
            let task = open
                .as_array()
                .unwrap()
                .iter()
                .find(|x| x["id"] == t.id.as_str());
            assert_eq!(
                task.map(|x| &x["phase"]),
                Some(&"review".into()),
                "round {round}: {open}"
            );
        }
        let claims = env.run(&["task", "claims", "--json"]).json();
        assert_eq!(claims, serde_json::json!([]), "round {round}");
        let edits: Vec<(usize, String)> = (0..AT_ONCE)
            .step_by(2)
            .map(|i| (i, format!("r{round}-{i}")))
            .collect();
        assert_eq!(
            std::fs::read_to_string(env.repo.join("shared.txt")).unwrap(),
            shared_text(&edits),
            "round {round}"
        );
        for t in &tasks {
            std::fs::remove_dir_all(&t.wt).unwrap();
        }
        git(&env.repo, &["worktree", "prune"]);
    }
    let merges = git(&env.repo, &["rev-list", "--merges", "--count", "main"]);
    assert!(
        merges.trim().parse::<usize>().unwrap() >= ROUNDS,
        "{merges}"
    );
    let mut ms: Vec<u128> = times.iter().map(Duration::as_millis).collect();
    ms.sort();
    println!(
        "MERGE {AT_ONCE} simultaneous completions all landed in {} ms (median of {ROUNDS} \
         rounds; min {} ms, max {} ms; {refused} refused and retried)",
        median(times).as_millis(),
        ms[0],
        ms[ms.len() - 1]
    );
}
