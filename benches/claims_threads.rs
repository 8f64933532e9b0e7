//! Claims per second with long-lived claimers, PostgreSQL against SQLite in one run.
//!
//! For each claimer count C (default 1, 16, 64) and each backend, a fresh store gets a
//! pool of independent ready tasks (through `Authority::add_task`); then C threads,
//! each with its own connection (its own `store::connect`, made before the clock
//! starts), loop `alloc::next::claim_next` — the library path of
//! `spice task next --claim` — until it returns nothing. Prints claims/s per backend,
//! the ratio pg/sqlite, and the goal (PostgreSQL >= 1,000 claims/s at 64 claimers).
//! Every run is checked: each task claimed exactly once, under distinct fences.
//!
//! What it leaves out, on purpose: process start and connection set-up per claim
//! (`benches/claims_pg_vs_sqlite.sh` measures those, one process per claim). Set-up
//! includes each claimer's first read of the claims and its first (empty) claim
//! attempt, which prepare the session's statements and load the server's catalog
//! caches: a long-lived claimer pays that once, and with 64 claimers sharing 1,000
//! tasks (16 claims each) it would weigh as much as the claims.
//!
//! Run with `benches/claims_threads.sh [POOL] [C...]`, which starts a throwaway
//! PostgreSQL cluster (fsync on, as SQLite's `synchronous=FULL` syncs each commit) and
//! passes it in `SPICE_BENCH_POSTGRES`, a URL with `{db}` where the database name goes:
//! `cargo bench --bench claims_threads -- --pool 1000 --claimers 1,16,64`.

use spice::alloc::{next, Filter};
use spice::clock::SystemClock;
use spice::store::{self, Authority, ClaimRequest, Location, DEFAULT_LEASE};
use spice::task::NewTask;
use std::collections::HashSet;
use std::sync::{Arc, Barrier};
use std::time::Instant;

const GOAL: f64 = 1000.0;

struct Args {
    pool: usize,
    claimers: Vec<usize>,
}

fn args() -> Result<Args, String> {
    let mut a = Args {
        pool: 1000,
        claimers: vec![1, 16, 64],
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut value = |name: &str| it.next().ok_or(format!("{name} needs a value"));
        match arg.as_str() {
            // `cargo bench` passes `--bench` to every bench binary.
            "--bench" => {}
            "--pool" => {
                let v = value("--pool")?;
                a.pool = v.parse().map_err(|_| format!("--pool: not a count: {v}"))?;
            }
            "--claimers" => {
                let v = value("--claimers")?;
                a.claimers = v
                    .split(',')
                    .map(|c| c.trim().parse())
                    .collect::<Result<_, _>>()
                    .map_err(|_| format!("--claimers: not a list of counts: {v}"))?;
            }
            other => return Err(format!("unknown argument {other}")),
        }
    }
    Ok(a)
}

fn connect(loc: &Location) -> Box<dyn Authority> {
    store::connect(loc, Arc::new(SystemClock))
        .unwrap_or_else(|e| panic!("connecting to {loc:?}: {e}"))
}

/// A fresh store of `backend` for claimer count `c`, holding `pool` ready tasks.
fn fresh(backend: &str, c: usize, pool: usize, tmp: &std::path::Path, pg: &str) -> Location {
    let loc = match backend {
        "sqlite" => {
            let dir = tmp.join(format!("sqlite-{c}"));
            std::fs::create_dir_all(&dir).unwrap();
            Location::Sqlite(dir.join("spice.db"))
        }
        _ => {
            let name = format!("claims_{c}_{}", std::process::id());
            let mut admin =
                postgres::Client::connect(&pg.replace("{db}", "postgres"), postgres::NoTls)
                    .unwrap_or_else(|e| panic!("cannot reach PostgreSQL: {e}"));
            admin
                .batch_execute(&format!("CREATE DATABASE {name}"))
                .unwrap();
            Location::Postgres(pg.replace("{db}", &name))
        }
    };
    let mut s = connect(&loc);
    for i in 0..pool {
        s.add_task(
            NewTask {
                title: format!("pool task {i}"),
                ..Default::default()
            },
            &[],
        )
        .unwrap();
    }
    loc
}

/// Drains the store at `loc` with `c` claimer threads; returns claims per second.
fn drain(loc: &Location, c: usize, pool: usize) -> f64 {
    let start = Arc::new(Barrier::new(c + 1));
    let workers: Vec<_> = (0..c)
        .map(|w| {
            let loc = loc.clone();
            let start = start.clone();
            std::thread::spawn(move || {
                let mut s = connect(&loc);
                let req = ClaimRequest {
                    claimant: format!("c{w}"),
                    lane: None,
                    worktree: None,
                    lease: DEFAULT_LEASE,
                };
                // Connection set-up, outside the clock as the connection itself is:
                // the session's first statements prepare, plan and load the server's
                // catalog caches; a long-lived claimer pays that once.
                s.claim_view(&req.claimant, None)
                    .unwrap_or_else(|e| panic!("claimer c{w}: {e}"));
                s.claim_first_ready(&[], &req, &Filter::default())
                    .unwrap_or_else(|e| panic!("claimer c{w}: {e}"));
                start.wait();
                let mut got = Vec::new();
                while let Some(claim) = next::claim_next(s.as_mut(), &req, &Filter::default())
                    .unwrap_or_else(|e| panic!("claimer c{w}: {e}"))
                {
                    got.push((claim.task_id, claim.fence));
                }
                got
            })
        })
        .collect();
    start.wait();
    let t0 = Instant::now();
    let got: Vec<(String, i64)> = workers
        .into_iter()
        .flat_map(|w| w.join().unwrap())
        .collect();
    let secs = t0.elapsed().as_secs_f64();
    let tasks: HashSet<&str> = got.iter().map(|g| g.0.as_str()).collect();
    let fences: HashSet<i64> = got.iter().map(|g| g.1).collect();
    assert_eq!(got.len(), pool, "{loc:?}: {} claims of {pool}", got.len());
    assert_eq!(tasks.len(), pool, "{loc:?}: a task was claimed twice");
    assert_eq!(fences.len(), pool, "{loc:?}: a fence was handed out twice");
    assert_eq!(connect(loc).claims().unwrap().len(), pool);
    pool as f64 / secs
}

fn main() {
    let a = args().unwrap_or_else(|e| {
        eprintln!("claims_threads: {e}");
        std::process::exit(2);
    });
    let Ok(pg) = std::env::var("SPICE_BENCH_POSTGRES") else {
        eprintln!(
            "claims_threads: SPICE_BENCH_POSTGRES is not set \
             (run benches/claims_threads.sh, which starts a throwaway cluster)"
        );
        std::process::exit(2);
    };
    let tmp = tempfile::tempdir().unwrap();
    println!(
        "long-lived claimers (one connection each, alloc::next::claim_next), pool of {} ready tasks",
        a.pool
    );
    println!(
        "{:>8} {:>15} {:>12} {:>9}",
        "claimers", "sqlite claims/s", "pg claims/s", "pg/sqlite"
    );
    let mut at_most = None;
    for &c in &a.claimers {
        let sqlite = fresh("sqlite", c, a.pool, tmp.path(), &pg);
        let on_sqlite = drain(&sqlite, c, a.pool);
        let postgres = fresh("pg", c, a.pool, tmp.path(), &pg);
        let on_pg = drain(&postgres, c, a.pool);
        println!(
            "{c:>8} {on_sqlite:>15.0} {on_pg:>12.0} {:>9.2}",
            on_pg / on_sqlite
        );
        at_most = Some((c, on_pg));
    }
    if let Some((c, rate)) = at_most {
        println!(
            "goal: PostgreSQL >= {GOAL:.0} claims/s at 64 claimers; at {c}: {rate:.0} ({})",
            if rate >= GOAL { "met" } else { "not met" }
        );
    }
}
