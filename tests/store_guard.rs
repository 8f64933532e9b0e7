//! The store refuses databases it must not touch, and never recreates them.

mod common;
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
