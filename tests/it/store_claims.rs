//! The store's claim contract, one test body run against both backends: SQLite (the
//! embedded default) and PostgreSQL (`[store] url` in the state directory's
//! `config.toml`). Concurrent claimers in several processes never claim one task twice
//! and never take a task that waits on another; a stale fence is refused; a lapsed
//! lease (by the store's clock) is not free work and is taken over only explicitly.
//! PostgreSQL-only: a newer schema is refused untouched, parts not on it yet say so
//! (steering is on it: `tests/it/store_steering.rs`; the operator's edits:
//! `tests/it/store_edits.rs`).

use crate::common;
use common::{pg, TestEnv};
use std::collections::HashMap;

/// A hermetic environment and, for PostgreSQL, its database (dropped after the test).
struct Fleet {
    env: TestEnv,
    db: Option<pg::Database>,
}

fn sqlite() -> Fleet {
    Fleet {
        env: TestEnv::new(),
        db: None,
    }
}

fn postgres(test: &str) -> Option<Fleet> {
    let db = pg::Database::new(test)?;
    Some(Fleet {
        env: db.host(),
        db: Some(db),
    })
}

/// `$body` as two tests: `sqlite` and `postgres` (the latter ignored unless asked).
macro_rules! both {
    ($body:ident) => {
        mod $body {
            #[test]
            fn sqlite() {
                super::$body(&super::sqlite());
            }
            #[test]
            #[ignore = "needs PostgreSQL (SPICE_TEST_POSTGRES)"]
            fn postgres() {
                if let Some(f) = super::postgres(stringify!($body)) {
                    super::$body(&f);
                }
            }
        }
    };
}

both!(concurrent_claimers_never_claim_one_task_twice);
both!(a_stale_fence_is_refused);
both!(a_lapsed_lease_is_taken_over_explicitly);
both!(a_live_lease_is_taken_only_by_force_under_its_fence);

fn claim_json(f: &Fleet, args: &[&str]) -> serde_json::Value {
    let mut a = args.to_vec();
    a.push("--json");
    f.env.run(&a).json()
}

fn concurrent_claimers_never_claim_one_task_twice(f: &Fleet) {
    let first = f.env.add(&["first", "--priority", "H"]);
    let mut ready = vec![first.clone()];
    for i in 1..32 {
        ready.push(
            f.env
                .add(&[&format!("task {i}"), "--project", &format!("p{}", i % 3)]),
        );
    }
    let waiting: Vec<String> = (0..4)
        .map(|i| f.env.add(&[&format!("waits {i}"), "--depends", &first]))
        .collect();
    let env = std::sync::Arc::new(&f.env);
    let got: Vec<(String, i64, String)> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..8)
            .map(|w| {
                let env = env.clone();
                s.spawn(move || {
                    let me = format!("claimer-{w}");
                    let mut got = Vec::new();
                    loop {
                        let r = env.run(&["task", "next", "--claim", "--claimant", &me, "--json"]);
                        assert_eq!(r.code, 0, "{me}: {}", r.stderr);
                        let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
                        if v.is_null() {
                            break;
                        }
                        let fence = v["fence"].as_i64().unwrap();
                        got.push((v["id"].as_str().unwrap().to_string(), fence, me.clone()));
                    }
                    got
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| w.join().unwrap())
            .collect()
    });
    let mut owner: HashMap<&str, &str> = HashMap::new();
    for (id, _, me) in &got {
        if let Some(prev) = owner.insert(id, me) {
            panic!("task {id} claimed twice: by {prev} and by {me}");
        }
    }
    let mut fences: Vec<i64> = got.iter().map(|g| g.1).collect();
    fences.sort();
    fences.dedup();
    assert_eq!(fences.len(), got.len(), "a fence was handed out twice");
    let mut claimed: Vec<&str> = owner.keys().copied().collect();
    claimed.sort();
    let mut want: Vec<&str> = ready.iter().map(String::as_str).collect();
    want.sort();
    assert_eq!(
        claimed, want,
        "every ready task claimed once, none that waits"
    );
    for w in &waiting {
        assert!(
            !owner.contains_key(w.as_str()),
            "{w} waits on {first} but was claimed"
        );
    }
    let claims = f.env.run(&["task", "claims", "--json"]).json();
    assert_eq!(claims.as_array().unwrap().len(), 32);
}

fn a_stale_fence_is_refused(f: &Fleet) {
    let id = f.env.add(&["fenced"]);
    let c = claim_json(f, &["task", "claim", &id, "--claimant", "a"]);
    let f1 = c["fence"].as_i64().unwrap().to_string();
    let r = claim_json(
        f,
        &["task", "renew", &id, "--claimant", "a", "--fence", &f1],
    );
    assert_eq!(
        r["fence"].as_i64().unwrap().to_string(),
        f1,
        "a plain renewal keeps the fence"
    );
    let s = claim_json(
        f,
        &["task", "renew", &id, "--claimant", "a", "--successor", "b"],
    );
    let f2 = s["fence"].as_i64().unwrap().to_string();
    assert_ne!(f1, f2, "a successor holds under a new fence");
    f.env
        .run(&["task", "renew", &id, "--claimant", "b", "--fence", &f1])
        .fails(3, "that holding ended");
    f.env
        .run(&["task", "release", &id, "--claimant", "a"])
        .fails(3, "it is held by b");
    f.env
        .run(&["task", "renew", &id, "--claimant", "a"])
        .fails(3, "the claim passed from a to b");
    f.env
        .run(&["task", "takeover", &id, "--stale", &f2, "--claimant", "c"])
        .fails(3, "its lease is still live");
    f.env
        .run(&["task", "claim", &id, "--claimant", "c"])
        .fails(3, "it is held by b");
    f.env
        .run(&["task", "release", &id, "--claimant", "b", "--fence", &f2])
        .ok();
    let kinds: Vec<String> = f
        .env
        .run(&["task", "ledger", &id, "--json"])
        .json()
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["kind"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(kinds, ["added", "claimed", "successor", "released"]);
}

fn a_lapsed_lease_is_taken_over_explicitly(f: &Fleet) {
    let id = f.env.add(&["lapses"]);
    let c = claim_json(
        f,
        &["task", "claim", &id, "--claimant", "a", "--lease", "1s"],
    );
    let fence = c["fence"].as_i64().unwrap();
    common::wait_for("the lease to lapse by the store's clock", 30, || {
        let stale = f.env.run(&["task", "claims", "--stale", "--json"]).json();
        (stale.as_array().unwrap().len() == 1).then_some(())
    });
    let next = f
        .env
        .run(&["task", "next", "--claim", "--claimant", "b", "--json"])
        .json();
    assert!(next.is_null(), "a lapsed claim is not free work: {next}");
    f.env
        .run(&["task", "claim", &id, "--claimant", "b"])
        .fails(3, "a lapsed lease is taken over with");
    f.env
        .run(&[
            "task",
            "takeover",
            &id,
            "--stale",
            &(fence + 1000).to_string(),
            "--claimant",
            "b",
        ])
        .fails(3, "is not current");
    let t = claim_json(
        f,
        &[
            "task",
            "takeover",
            &id,
            "--stale",
            &fence.to_string(),
            "--claimant",
            "b",
        ],
    );
    assert_eq!(t["claimant"], "b");
    assert!(t["fence"].as_i64().unwrap() > fence, "{t}");
    f.env
        .run(&[
            "task",
            "renew",
            &id,
            "--claimant",
            "a",
            "--fence",
            &fence.to_string(),
        ])
        .fails(3, "held by b");
    f.env
        .run(&[
            "task",
            "takeover",
            &id,
            "--stale",
            &fence.to_string(),
            "--claimant",
            "c",
        ])
        .fails(3, "is not current");
    let ledger = f.env.run(&["task", "ledger", &id, "--json"]).json();
    let kinds: Vec<&str> = ledger
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["added", "claimed", "takeover", "displaced"]);
    assert_eq!(
        ledger[2]["detail"]["forced"], false,
        "a lapsed lease is no force"
    );
    let displaced = &ledger[3];
    assert_eq!(displaced["actor"], "a");
    assert_eq!(displaced["fence"].as_i64(), Some(fence));
}

/// The operator may take a live claim (#38: "force", behind a confirmation in the
/// console), but only by saying so and only under the fence it saw; the ledger says
/// the lease was live, and the holder's next renewal finds it gone.
fn a_live_lease_is_taken_only_by_force_under_its_fence(f: &Fleet) {
    let id = f.env.add(&["busy"]);
    let c = claim_json(
        f,
        &["task", "claim", &id, "--claimant", "a", "--lease", "30m"],
    );
    let fence = c["fence"].as_i64().unwrap().to_string();
    let takeover = |fence: &str, force: bool| {
        let mut args = vec![
            "task",
            "takeover",
            &id,
            "--stale",
            fence,
            "--claimant",
            "op",
        ];
        if force {
            args.push("--force");
        }
        f.env.run(&args)
    };
    takeover(&fence, false).fails(3, "still live");
    let wrong = (c["fence"].as_i64().unwrap() + 1000).to_string();
    takeover(&wrong, true).fails(3, "is not current");
    let t = takeover(&fence, true).ok().to_string();
    assert!(t.contains("op"), "{t}");
    f.env
        .run(&["task", "renew", &id, "--claimant", "a", "--fence", &fence])
        .fails(3, "held by op");
    let ledger = f.env.run(&["task", "ledger", &id, "--json"]).json();
    let taken = ledger
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["kind"] == "takeover")
        .expect("a takeover entry");
    assert_eq!(taken["detail"]["forced"], true, "{taken}");
    assert_eq!(taken["detail"]["from"], "a", "{taken}");
}

#[test]
#[ignore = "needs PostgreSQL (SPICE_TEST_POSTGRES)"]
fn a_newer_schema_is_refused_untouched() {
    let Some(f) = postgres("a_newer_schema_is_refused_untouched") else {
        return;
    };
    f.env.add(&["first"]);
    let mut c = f.db.as_ref().unwrap().client();
    c.batch_execute("UPDATE spice_schema SET version = 99")
        .unwrap();
    let tables = |c: &mut postgres::Client| -> i64 {
        c.query_one(
            "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'",
            &[],
        )
        .unwrap()
        .get(0)
    };
    let before = tables(&mut c);
    let e = f
        .env
        .run(&["task", "add", "second"])
        .fails(4, "schema version 99 is newer");
    assert!(!e.contains("hunter"), "{e}");
    f.env
        .run(&["task", "claims"])
        .fails(4, "nothing was changed");
    let v: i32 = c
        .query_one("SELECT version FROM spice_schema", &[])
        .unwrap()
        .get(0);
    assert_eq!(v, 99);
    assert_eq!(tables(&mut c), before);
    let n: i64 = c
        .query_one("SELECT count(*) FROM tasks", &[])
        .unwrap()
        .get(0);
    assert_eq!(n, 1, "nothing was written");
}

#[test]
#[ignore = "needs PostgreSQL (SPICE_TEST_POSTGRES)"]
fn parts_not_on_postgres_say_so_in_one_line() {
    let Some(f) = postgres("parts_not_on_postgres_say_so_in_one_line") else {
        return;
    };
    f.env.add(&["t"]);
    for (args, says) in [
        (
            vec!["store", "check"],
            "spice store check works on a SQLite file",
        ),
        (
            vec!["store", "restore", "--list"],
            "spice store restore works on a SQLite file",
        ),
    ] {
        let e = f.env.run(&args).fails(2, says);
        assert!(e.contains("postgresql:///"), "names the store: {e}");
    }
    assert!(
        !f.env.home.join("spice.db").exists(),
        "no SQLite store was made beside it"
    );
}

#[test]
fn a_bad_store_url_is_one_located_line() {
    let env = TestEnv::new();
    std::fs::create_dir_all(&env.home).unwrap();
    std::fs::write(
        env.home.join("config.toml"),
        "[store]\nurl = \"mysql://u:pw@h/db\"\n",
    )
    .unwrap();
    let e = env
        .run(&["task", "claims"])
        .fails(2, "config.toml:2:7: [store] url: expected a postgres://");
    assert!(
        e.contains("mysql://u:***@h/db"),
        "no password in messages: {e}"
    );
    std::fs::write(
        env.home.join("config.toml"),
        "[store]\nurl = \"postgres://h/db\"\nextra = 1\n",
    )
    .unwrap();
    env.run(&["fleet", "status"])
        .fails(2, "config.toml:3:1: unknown field `extra`");
    let r = env
        .cmd(&["task", "claims"])
        .env("SPICE_DATABASE_URL", "sqlite:///x")
        .output()
        .unwrap();
    common::to_run(r).fails(2, "SPICE_DATABASE_URL: expected a postgres://");
    assert!(!env.home.join("spice.db").exists());
}
