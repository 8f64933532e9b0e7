//! A corrupt store: every write is refused, `store check` says what it found and what
//! to do, and `store restore` brings back the rolling backup, keeping the damaged file.

use crate::common;
use common::TestEnv;

fn pool(n: usize) -> String {
    let tasks: Vec<serde_json::Value> = (0..n)
        .map(|i| {
            serde_json::json!({
                "uuid": format!("00000000-0000-4000-8000-{i:012}"),
                "description": format!("task number {i} with a longer title to fill pages"),
                "status": "pending",
                "entry": "20261101T120000Z",
            })
        })
        .collect();
    serde_json::to_string(&tasks).unwrap()
}

/// A store of `n` tasks whose later pages are then overwritten; returns its bytes.
fn corrupt_store(env: &TestEnv, n: usize) -> Vec<u8> {
    env.run_stdin(&["task", "import", "--taskwarrior", "-"], &pool(n))
        .ok();
    let db = rusqlite::Connection::open(env.db()).unwrap();
    db.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
        .unwrap();
    drop(db);
    let mut bytes = std::fs::read(env.db()).unwrap();
    assert!(bytes.len() > 8 * 4096);
    // The task pages the import appended; the steering table's early pages stay intact,
    // so a write that touches only them does not trip over the damage by itself.
    let (start, end) = (bytes.len() / 2 / 4096 * 4096, bytes.len() - 4096);
    for b in &mut bytes[start..end] {
        *b = 0xA5;
    }
    std::fs::write(env.db(), &bytes).unwrap();
    bytes
}

fn backups(env: &TestEnv) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(env.home.join("backups"))
        .map(|d| {
            d.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// Regression (#14): `task list` said to run `spice store check`, which printed the
/// same sentence back, and `spice steer` on the same file succeeded.
#[test]
fn a_corrupt_store_refuses_every_write_and_check_says_what_it_found_and_what_to_do() {
    let env = TestEnv::new();
    let bytes = corrupt_store(&env, 300);

    env.run(&["steer", "--force", "lane:core", "use the v2 API"])
        .fails(4, "corrupt");
    let listed = env.run(&["task", "list"]).fails(4, "corrupt");
    assert!(listed.contains("spice store check"), "{listed}");
    env.run(&["task", "add", "one more"]).fails(4, "corrupt");
    assert_eq!(std::fs::read(env.db()).unwrap(), bytes, "left as it was");
    assert_eq!(
        backups(&env).len(),
        1,
        "the import's write took one backup, and the corrupt store none"
    );

    let r = env.run(&["store", "check"]);
    let err = r.fails(4, "corrupt");
    assert_ne!(err, listed, "check must not repeat the refusal");
    assert!(err.contains("spice store restore"), "{err}");
    assert!(
        r.stdout.contains("found: "),
        "SQLite's findings: {}",
        r.stdout
    );
    assert!(
        r.stdout.contains("what to do: run `spice store restore`"),
        "{}",
        r.stdout
    );

    let r = env.run(&["store", "check", "--json"]);
    assert_eq!(r.code, 4, "{}", r.stderr);
    let report: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(report["ok"], false);
    assert!(
        matches!(
            report["verdict"].as_str(),
            Some("corrupt" | "not-a-database")
        ),
        "{report}"
    );
    assert!(
        !report["problems"].as_array().unwrap().is_empty(),
        "{report}"
    );
    assert!(
        report["restorable"]
            .as_str()
            .unwrap()
            .contains("backups/spice-"),
        "{report}"
    );

    let out = env.run(&["store", "restore"]).ok().to_string();
    assert!(out.contains("restored "), "{out}");
    let aside: Vec<_> = std::fs::read_dir(&env.home)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            name.starts_with("spice.db.aside-")
                && !name.ends_with("-wal")
                && !name.ends_with("-shm")
        })
        .collect();
    assert_eq!(aside.len(), 1, "{aside:?}");
    assert_eq!(
        std::fs::read(&aside[0]).unwrap(),
        bytes,
        "kept aside, not deleted"
    );
    assert!(out.contains(&*aside[0].to_string_lossy()), "{out}");

    let tasks = env.run(&["task", "list", "--json"]).json();
    assert_eq!(tasks.as_array().unwrap().len(), 300);
    env.run(&["store", "check"]).ok();
    env.add(&["after the restore"]);
}

#[test]
fn store_check_takes_json() {
    let env = TestEnv::new();
    env.add(&["a task"]);
    let report = env.run(&["store", "check", "--json"]).json();
    assert_eq!(report["ok"], true, "{report}");
    assert_eq!(report["verdict"], "sound");
    assert_eq!(report["backups"].as_array().unwrap().len(), 1, "{report}");
}

#[test]
fn restore_refuses_a_sound_store_without_force_and_any_store_in_use() {
    let env = TestEnv::new();
    env.add(&["a task"]);
    env.run(&["store", "restore"])
        .fails(2, "passes its integrity check");
    // A connection held open by this process (another process to spice), as `fleet up`
    // or `serve` would hold one, idle between reads.
    let holder = rusqlite::Connection::open(env.db()).unwrap();
    holder
        .query_row("SELECT count(*) FROM tasks", [], |r| r.get::<_, i64>(0))
        .unwrap();
    let err = env
        .run(&["store", "restore", "--force"])
        .fails(3, "is in use by process");
    assert!(err.contains(&std::process::id().to_string()), "{err}");
    drop(holder);

    let out = env.run(&["store", "restore", "--force"]).ok().to_string();
    assert!(out.contains("kept as"), "{out}");
    let listed = env.run(&["store", "restore", "--list", "--json"]).json();
    assert_eq!(listed.as_array().unwrap().len(), 1);
}

#[test]
fn restore_from_a_file_that_is_not_a_sound_store_is_refused() {
    let env = TestEnv::new();
    env.add(&["a task"]);
    let junk = env.dir.path().join("junk.db");
    std::fs::write(
        &junk,
        b"not a database at all, just some bytes\n".repeat(200),
    )
    .unwrap();
    let err = env
        .run(&[
            "store",
            "restore",
            "--force",
            "--from",
            junk.to_str().unwrap(),
        ])
        .fails(2, "refusing to restore from it");
    assert!(err.contains("junk.db"), "{err}");
    assert_eq!(env.count("SELECT count(*) FROM tasks"), 1, "untouched");
}
