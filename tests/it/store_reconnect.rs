//! A long-lived connection to the PostgreSQL authority (a supervisor's lane, the
//! console, a claimer) outlives the server closing it: the request that meets the
//! closed connection fails as unreachable, in one line, and the next one connects
//! again. A supervisor runs for days; a server restart or an idle-connection timeout
//! must not end its lanes.

use crate::common;
use common::pg;
use spice::clock::SystemClock;
use spice::store::{Authority, ClaimRequest, Location};
use spice::task::NewTask;
use std::sync::Arc;
use std::time::{Duration, Instant};

fn new(title: &str) -> NewTask {
    NewTask {
        title: title.into(),
        ..Default::default()
    }
}

fn connect(db: &pg::Database) -> Box<dyn Authority> {
    spice::store::connect(&Location::Postgres(db.url.clone()), Arc::new(SystemClock)).unwrap()
}

/// Calls `f` until it succeeds (within 10 s); every failure on the way must say the
/// server is out of reach. Returns how many failed.
fn until_ok<T>(a: &mut dyn Authority, f: impl Fn(&mut dyn Authority) -> spice::Result<T>) -> usize {
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut failed = 0;
    loop {
        match f(a) {
            Ok(_) => return failed,
            Err(e) => {
                assert!(e.is_unreachable(), "not an unreachable error: {e}");
                assert!(!e.to_string().contains('\n'), "more than a line: {e}");
                failed += 1;
                assert!(Instant::now() < deadline, "never reconnected: {e}");
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }
}

/// Regression: a connection the server terminated stayed dead for the rest of the
/// process: every later request failed.
#[test]
#[ignore = "needs PostgreSQL (SPICE_TEST_POSTGRES)"]
fn a_terminated_connection_is_replaced_by_the_next_request() {
    let Some(db) = pg::Database::new("a_terminated_connection_is_replaced") else {
        return;
    };
    let mut a = connect(&db);
    let t = a.add_task(new("survives"), &[]).unwrap();
    // Listening and prepared statements belong to the old session: both are made again.
    let token = a.change_token().unwrap();
    let mut admin = db.client();
    let killed = admin
        .execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
             WHERE datname = current_database() AND pid <> pg_backend_pid()",
            &[],
        )
        .unwrap();
    assert!(killed >= 1, "the store's connection was not found");
    until_ok(&mut *a, |a| a.task(&t.id));
    let req = ClaimRequest {
        claimant: "after".into(),
        lane: None,
        worktree: None,
        lease: Duration::from_secs(60),
    };
    let claim = a.claim(&t.id, &req).unwrap();
    assert_eq!(claim.claimant, "after");
    // Changes may have been missed while it was gone: the token moved.
    assert_ne!(a.change_token().unwrap(), token);
}

/// A server restart: requests fail as unreachable while it is down, and the same
/// connection object works again once it is back, with nothing written twice.
#[test]
#[ignore = "needs PostgreSQL (SPICE_TEST_POSTGRES)"]
fn a_server_restart_is_survived_by_a_long_lived_connection() {
    let Some(db) = pg::Database::on_own_cluster("a_server_restart_is_survived") else {
        return;
    };
    let mut a = connect(&db);
    let t = a.add_task(new("before"), &[]).unwrap();
    db.cluster().unwrap().pg_ctl("stop").unwrap();
    let Err(e) = a.snapshot() else {
        panic!("a snapshot with the server stopped")
    };
    assert!(e.is_unreachable(), "{e}");
    assert!(!e.to_string().contains('\n'), "{e}");
    db.cluster().unwrap().pg_ctl("start").unwrap();
    until_ok(&mut *a, |a| a.snapshot());
    let s = a.snapshot().unwrap();
    assert_eq!(s.tasks.len(), 1);
    assert_eq!(s.tasks[0].id, t.id);
}
