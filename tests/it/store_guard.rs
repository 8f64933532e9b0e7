//! The store refuses databases it must not touch, and never recreates them.

use crate::common;
use common::TestEnv;

#[test]
fn a_database_from_a_newer_spice_is_refused() {
    let env = TestEnv::new();
    env.add(&["keep me"]);
    rusqlite::Connection::open(env.db())
        .unwrap()
        .pragma_update(None, "user_version", 99)
        .unwrap();
    env.run(&["task", "list"])
        .fails(4, "schema version 99, written by a newer spice");
    let n: i64 = rusqlite::Connection::open(env.db())
        .unwrap()
        .query_row("SELECT count(*) FROM tasks", [], |r| r.get(0))
        .unwrap();
    assert_eq!(n, 1);
}

#[test]
fn a_file_that_is_not_sqlite_is_refused_and_left_alone() {
    let env = TestEnv::new();
    std::fs::create_dir_all(&env.home).unwrap();
    let junk = b"this is not a database, but it is somebody's file\n".repeat(100);
    std::fs::write(env.db(), &junk).unwrap();
    env.run(&["task", "list"])
        .fails(4, "is not a SQLite database");
    env.run(&["task", "add", "x"]).fails(4, "refusing");
    assert_eq!(std::fs::read(env.db()).unwrap(), junk, "never recreated");
}

#[test]
fn damaged_pages_are_refused_not_repaired() {
    let env = TestEnv::new();
    for i in 0..200 {
        env.add(&[&format!(
            "task number {i} with a longer title to fill pages"
        )]);
    }
    // Checkpoint the WAL into the main file, then scribble over its middle pages.
    let db = rusqlite::Connection::open(env.db()).unwrap();
    db.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
        .unwrap();
    drop(db);
    let mut bytes = std::fs::read(env.db()).unwrap();
    assert!(bytes.len() > 8 * 4096);
    let end = bytes.len() - 4096;
    for b in &mut bytes[4096..end] {
        *b = 0xA5;
    }
    std::fs::write(env.db(), &bytes).unwrap();
    let r = env.run(&["task", "list"]);
    r.fails(4, "corrupt");
    assert_eq!(std::fs::read(env.db()).unwrap(), bytes, "left as it was");
    env.run(&["store", "check"]).fails(4, "");
}

#[test]
fn a_foreign_sqlite_database_is_refused() {
    let env = TestEnv::new();
    std::fs::create_dir_all(&env.home).unwrap();
    let db = rusqlite::Connection::open(env.db()).unwrap();
    db.execute_batch("CREATE TABLE recipes (name TEXT); INSERT INTO recipes VALUES ('soup');")
        .unwrap();
    drop(db);
    env.run(&["task", "list"]).fails(4, "not spice's");
}

/// Regression: opening a second store in a process that already had one read the
/// file's header with a plain open/close, and that close dropped SQLite's POSIX locks
/// for the whole process. Another process then believed it was the last connection,
/// checkpointed and removed the WAL, and the first connection's later commits were
/// invisible to everyone else (a fleet lane's claims "vanished" for its agents).
#[test]
fn a_second_store_in_one_process_keeps_the_first_ones_commits_visible() {
    use std::sync::Arc;
    let env = TestEnv::new();
    env.add(&["seed"]);
    let clock = Arc::new(spice::clock::SystemClock);
    let mut first = spice::store::Store::open(&env.db(), clock.clone()).unwrap();
    first.list(&Default::default()).unwrap();
    let second = spice::store::Store::open(&env.db(), clock).unwrap();
    // Another process opens and closes the database.
    env.run(&["task", "list"]).ok();
    let t = first
        .add_task(
            spice::task::NewTask {
                title: "after".into(),
                ..Default::default()
            },
            &[],
        )
        .unwrap();
    let listed = env.run(&["task", "list", "--json"]).json();
    assert!(
        listed
            .as_array()
            .unwrap()
            .iter()
            .any(|x| x["id"] == t.id.as_str()),
        "a commit of the first connection must be visible to other processes: {listed}"
    );
    drop(second);
}

fn side_files(env: &TestEnv) -> Vec<String> {
    std::fs::read_dir(&env.home)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n != "spice.db")
        .collect()
}

/// Regression (#14): the journal mode was switched to WAL before the schema check, so a
/// refused foreign file had its header (bytes 18-19) rewritten.
#[test]
fn a_foreign_sqlite_database_is_refused_without_writing_a_byte() {
    let env = TestEnv::new();
    std::fs::create_dir_all(&env.home).unwrap();
    let db = rusqlite::Connection::open(env.db()).unwrap();
    db.execute_batch("CREATE TABLE recipes (name TEXT); INSERT INTO recipes VALUES ('soup');")
        .unwrap();
    drop(db);
    let before = std::fs::read(env.db()).unwrap();
    env.run(&["task", "list"]).fails(4, "not spice's");
    env.run(&["task", "add", "x"]).fails(4, "not spice's");
    env.run(&["store", "check"]).fails(4, "not spice's");
    assert_eq!(
        std::fs::read(env.db()).unwrap(),
        before,
        "not a byte written"
    );
    assert_eq!(
        side_files(&env),
        Vec::<String>::new(),
        "nothing created beside it"
    );
}

/// Regression (#14): the same, for a database a newer spice left in rollback mode.
#[test]
fn a_database_from_a_newer_spice_is_refused_without_writing_a_byte() {
    let env = TestEnv::new();
    env.add(&["keep me"]);
    let db = rusqlite::Connection::open(env.db()).unwrap();
    db.pragma_update(None, "user_version", 99).unwrap();
    db.query_row("PRAGMA journal_mode = DELETE", [], |_| Ok(()))
        .unwrap();
    drop(db);
    // What the earlier writes left beside it (a backup, the verified-write record).
    let _ = std::fs::remove_dir_all(env.home.join("backups"));
    let _ = std::fs::remove_file(env.home.join("spice.db.verified"));
    let before = std::fs::read(env.db()).unwrap();
    env.run(&["task", "list"])
        .fails(4, "schema version 99, written by a newer spice");
    env.run(&["task", "add", "x"]).fails(4, "newer spice");
    let unchanged = std::fs::read(env.db()).unwrap() == before;
    assert!(unchanged, "not a byte written by task list or task add");
    let r = env.run(&["store", "check", "--json"]);
    assert_eq!(r.code, 4);
    assert!(r.stdout.contains("\"verdict\":\"newer\""), "{}", r.stdout);
    assert_eq!(
        std::fs::read(env.db()).unwrap(),
        before,
        "not a byte written"
    );
    assert_eq!(
        side_files(&env),
        Vec::<String>::new(),
        "nothing created beside it"
    );
}
