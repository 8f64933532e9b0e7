//! A store that cannot be written still serves reads; writes are refused naming the
//! file and why (read-only, or the disk is full) instead of "disk I/O error".
//!
//! Tests run as root, where `chmod` does not stop a write, so each scenario runs in a
//! private mount namespace (`unshare -m`): a read-only bind mount of the state
//! directory, or a small tmpfs that is then filled. Nothing outside the namespace sees
//! those mounts, and they vanish with it.

use crate::common;
use common::{Run, TestEnv};
use std::path::Path;

/// Runs `script` under `sh -e` in a private mount namespace. In it, `run NAME ARGS…`
/// runs spice and keeps its output for [`result`]; `$H` is the state directory and `$T`
/// the test's temporary directory.
fn in_namespace(env: &TestEnv, script: &str) {
    let prelude = r#"run() { n=$1; shift; "$S" "$@" >"$O/$n.out" 2>"$O/$n.err" && echo 0 >"$O/$n.rc" || echo $? >"$O/$n.rc"; }"#;
    let out = env.dir.path().join("out");
    std::fs::create_dir_all(&out).unwrap();
    let status = std::process::Command::new("unshare")
        .args(["-m", "sh", "-ec", &format!("{prelude}\n{script}")])
        .current_dir(&env.repo)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", env.dir.path())
        .env("SPICE_HOME", &env.home)
        .env("S", common::bin())
        .env("H", &env.home)
        .env("T", env.dir.path())
        .env("O", &out)
        .output()
        .expect("needs unshare(1) on PATH");
    assert!(
        status.status.success(),
        "needs root and mount namespaces (unshare -m, mount): {}",
        String::from_utf8_lossy(&status.stderr)
    );
}

fn result(env: &TestEnv, name: &str) -> Run {
    let read = |ext: &str| {
        let p = env.dir.path().join("out").join(format!("{name}.{ext}"));
        std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
    };
    Run {
        code: read("rc").trim().parse().unwrap(),
        stdout: read("out"),
        stderr: read("err"),
    }
}

fn two_tasks() -> TestEnv {
    let env = TestEnv::new();
    env.add(&["one"]);
    env.add(&["two"]);
    assert!(!Path::new(&format!("{}-wal", env.db().display())).exists());
    env
}

/// Regression (#14): a read-only state directory refused even `task list`, naming no file.
#[test]
#[ignore = "needs root and mount namespaces (unshare -m) for a read-only bind mount"]
fn a_read_only_state_directory_serves_reads_and_refuses_writes_naming_the_file() {
    let env = two_tasks();
    in_namespace(
        &env,
        r#"mount --bind "$H" "$H"; mount -o remount,bind,ro "$H"
        run list task list --json
        run add task add three
        run steer steer --force lane:core "use the v2 API"
        run check store check --json"#,
    );
    let tasks = result(&env, "list").json();
    assert_eq!(tasks.as_array().unwrap().len(), 2, "{tasks}");
    let db = env.db().display().to_string();
    for name in ["add", "steer"] {
        let err = result(&env, name).fails(1, &format!("{db}: read-only (its directory"));
        assert!(err.contains("Read-only file system"), "{err}");
        assert!(err.contains("nothing was written"), "{err}");
    }
    assert_eq!(result(&env, "check").json()["verdict"], "sound");
    assert_eq!(env.count("SELECT count(*) FROM tasks"), 2);
}

/// Regression (#14): a full disk read "disk I/O error", naming no file.
#[test]
#[ignore = "needs root and mount namespaces (unshare -m) for a small tmpfs"]
fn a_full_disk_serves_reads_and_refuses_writes_saying_the_disk_is_full() {
    let env = two_tasks();
    in_namespace(
        &env,
        r#"mkdir "$T/full"; mount -t tmpfs -o size=512k tmpfs "$T/full"
        cp "$H/spice.db" "$T/full/"
        dd if=/dev/zero of="$T/full/fill" bs=4k 2>/dev/null || true
        export SPICE_HOME="$T/full"
        run list task list --json
        run add task add three"#,
    );
    let tasks = result(&env, "list").json();
    assert_eq!(tasks.as_array().unwrap().len(), 2, "{tasks}");
    let full = env.dir.path().join("full");
    let err = result(&env, "add").fails(
        1,
        &format!(
            "{}/spice.db: the disk is full (0 bytes free in {})",
            full.display(),
            full.display()
        ),
    );
    assert!(!err.contains("disk I/O error"), "{err}");
}

/// The disk fills while the database is already open elsewhere (the WAL index exists):
/// the failed commit says the disk is full and names the file.
#[test]
#[ignore = "needs root, mount namespaces (unshare -m) and the sqlite3 shell"]
fn a_write_that_fills_the_disk_says_so() {
    let env = two_tasks();
    in_namespace(
        &env,
        r#"mkdir "$T/full"; mount -t tmpfs -o size=512k tmpfs "$T/full"
        cp "$H/spice.db" "$T/full/"
        export SPICE_HOME="$T/full"
        run first task add three
        (echo "SELECT count(*) FROM tasks;"; while [ ! -e "$T/release" ]; do sleep 0.05; done) \
            | sqlite3 "$T/full/spice.db" >"$T/held" &
        while [ ! -s "$T/held" ]; do sleep 0.05; done
        dd if=/dev/zero of="$T/full/fill" bs=1k 2>/dev/null || true
        run add task add "$(head -c 20000 /dev/zero | tr '\0' x)"
        touch "$T/release"; wait"#,
    );
    result(&env, "first").ok();
    let full = env.dir.path().join("full");
    let err = result(&env, "add").fails(1, "the disk is full (");
    assert!(
        err.contains(&format!("{}/spice.db", full.display())),
        "{err}"
    );
    assert!(err.contains("free some space and retry"), "{err}");
}
