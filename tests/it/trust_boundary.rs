//! What an agent can write is input, not truth (#39, defence in depth): the files an
//! unconfined agent can forge under the git directory never make spice delete,
//! move or trust anything outside what it owns.

use crate::common;
use common::{git, TestEnv};
use std::path::{Path, PathBuf};

/// A repository whose beds are all over a one-byte budget, with one real template.
fn bedded() -> TestEnv {
    let env = TestEnv::new();
    std::fs::write(
        env.repo.join("spice.toml"),
        "[testbed]\npaths = [\"build\"]\nwarm = [[\"sh\", \"-c\", \"mkdir -p build && echo x > build/x\"]]\n\
         pool = 2\ndisk_budget = \"1\"\n",
    )
    .unwrap();
    std::fs::write(env.repo.join(".gitignore"), "build/\n").unwrap();
    git(&env.repo, &["add", "."]);
    git(&env.repo, &["commit", "-q", "-m", "init"]);
    env.run(&["bed", "warm"]).ok();
    env
}

/// A live worktree with uncommitted work, beside the repository.
fn live_worktree(env: &TestEnv) -> PathBuf {
    let live = env.dir.path().join("live");
    git(
        &env.repo,
        &[
            "worktree",
            "add",
            "-q",
            "-b",
            "live",
            live.to_str().unwrap(),
        ],
    );
    std::fs::write(live.join("work.txt"), "uncommitted work\n").unwrap();
    live
}

fn spice_dir(env: &TestEnv) -> PathBuf {
    env.repo.join(".git").join("spice")
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

fn template(id: &str, tree: &Path) -> String {
    serde_json::json!({
        "id": id, "commit": "0000000000000000000000000000000000000000", "key": [],
        "state": "ready", "created": "2000-01-01T00:00:00Z", "warm_seconds": 0.0,
        "usage": null, "error": null, "last_used": "2000-01-01T00:00:00Z", "tree": tree,
    })
    .to_string()
}

fn pooled(id: &str, path: &Path) -> String {
    serde_json::json!({
        "id": id, "path": path, "task": "t", "saved": null, "saved_files": 0,
        "pooled_at": "2000-01-01T00:00:00Z",
    })
    .to_string()
}

#[test]
fn forged_bed_and_pool_manifests_never_make_bed_gc_delete_outside_its_roots() {
    let env = bedded();
    let live = live_worktree(&env);
    let victim = env.dir.path().join("victim");
    write(&victim.join("keep.txt"), "precious\n");
    let beds = spice_dir(&env).join("beds");
    let pool = spice_dir(&env).join("pool");

    // An id that climbs out of the beds' root to the victim, its tree the live worktree.
    write(
        &beds.join("evil").join("bed.json"),
        &template("../../../../victim", &live),
    );
    // A well-formed id whose tree was swapped for a symlink to the live worktree.
    let swapped = beds.join("swapped");
    write(
        &swapped.join("bed.json"),
        &template("swapped", &swapped.join("tree")),
    );
    std::os::unix::fs::symlink(&live, swapped.join("tree")).unwrap();
    // Pool entries: one climbing out, one naming the live worktree, one a symlink.
    write(
        &pool.join("climb.json"),
        &pooled("../../../../victim", &victim),
    );
    write(&pool.join("named.json"), &pooled("named", &live));
    std::os::unix::fs::symlink(&live, pool.join("link")).unwrap();
    write(&pool.join("link.json"), &pooled("link", &pool.join("link")));

    let out = env.run(&["bed", "gc"]);
    let text = out.ok();
    assert!(victim.join("keep.txt").is_file(), "victim deleted: {text}");
    assert_eq!(
        std::fs::read_to_string(live.join("work.txt")).unwrap(),
        "uncommitted work\n",
        "live worktree touched: {text}"
    );
    assert!(git(&env.repo, &["worktree", "list"]).contains("live"));
    // The real template was evicted under the budget; every forgery was named.
    assert!(text.contains("evicted template"), "{text}");
    for name in ["evil/bed.json", "climb.json", "named.json"] {
        assert!(
            text.contains(&format!(
                "ignored manifest: {}",
                {
                    if name.contains('/') {
                        beds.join(name)
                    } else {
                        pool.join(name)
                    }
                }
                .display()
            )),
            "{name} not reported: {text}"
        );
    }
    let status = env.run(&["bed", "status", "--json"]).json();
    let ignored = status["unreadable"].as_array().unwrap();
    assert!(ignored.len() >= 3, "{status:#}");
}

#[test]
fn a_template_warmed_on_an_unmerged_branch_is_never_seeded_into_another_worktree() {
    let env = TestEnv::new();
    std::fs::write(
        env.repo.join("spice.toml"),
        "[testbed]\npaths = [\"build\"]\nkey = [\"deps.lock\"]\n\
         warm = [[\"sh\", \"-c\", \"mkdir -p build && git log -1 --format=%s > build/from\"]]\n",
    )
    .unwrap();
    std::fs::write(env.repo.join("deps.lock"), "dep 1\n").unwrap();
    std::fs::write(env.repo.join(".gitignore"), "build/\n").unwrap();
    git(&env.repo, &["add", "."]);
    git(&env.repo, &["commit", "-q", "-m", "base"]);
    // A task's worktree, one unmerged commit ahead, where its agent warms a template
    // (same key files as base).
    let task = env.dir.path().join("task");
    git(
        &env.repo,
        &[
            "worktree",
            "add",
            "-q",
            "-b",
            "task",
            task.to_str().unwrap(),
        ],
    );
    std::fs::write(task.join("poison.sh"), "echo poisoned\n").unwrap();
    git(&task, &["add", "poison.sh"]);
    git(&task, &["commit", "-q", "-m", "unmerged"]);
    let mut warm = env.cmd(&["bed", "warm"]);
    warm.current_dir(&task);
    let out = common::to_run(warm.output().unwrap());
    out.ok();
    // Another task's worktree at base: nothing to seed from.
    let other = env.dir.path().join("other");
    git(
        &env.repo,
        &[
            "worktree",
            "add",
            "-q",
            "-b",
            "other",
            other.to_str().unwrap(),
        ],
    );
    let seeded = env
        .run(&["bed", "seed", other.to_str().unwrap(), "--json"])
        .json();
    assert_ne!(seeded["seeded"], true, "{seeded:#}");
    assert!(!other.join("build").exists(), "{seeded:#}");
    // A template warmed at base is used.
    env.run(&["bed", "warm"]).ok();
    let seeded = env
        .run(&["bed", "seed", other.to_str().unwrap(), "--json"])
        .json();
    assert_eq!(seeded["seeded"], true, "{seeded:#}");
    assert_eq!(
        std::fs::read_to_string(other.join("build/from")).unwrap(),
        "base\n"
    );
}

use crate::common::console;

#[test]
fn the_console_refuses_a_budget_for_a_lane_that_does_not_exist() {
    let env = TestEnv::with_lanes(&[("a", "profile = \"demo\"\nphases = [\"todo\"]\n")]);
    env.run(&["task", "list"]).ok();
    let server = console::Server::start(&env, &[]);
    // Before: both were stored (200), and the stop later ended the first session of
    // whatever lane took the name.
    for lane in ["zzz", "..%2F..%2Fx"] {
        let r = server.post(
            &format!("/api/lanes/{lane}/budget"),
            &serde_json::json!({"action": "stop"}),
        );
        assert!(
            (400..500).contains(&r.status),
            "{lane}: {} {}",
            r.status,
            r.body
        );
    }
    let r = server.post(
        "/api/lanes/zzz/budget",
        &serde_json::json!({"action": "raise", "tokens": 1000}),
    );
    assert!(
        r.body.contains("unknown lane 'zzz'"),
        "{} {}",
        r.status,
        r.body
    );
    assert_eq!(env.count("SELECT count(*) FROM budgets"), 0);
    // A lane the repository defines is still served.
    let r = server.post(
        "/api/lanes/a/budget",
        &serde_json::json!({"action": "raise", "tokens": 1000}),
    );
    assert_eq!(r.status, 200, "{}", r.body);
}

#[test]
fn regression_a_silent_postgres_server_gives_a_one_line_error_within_connect_timeout() {
    // Before: a server that accepts and never answers hung past connect_timeout.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let held = std::thread::spawn(move || {
        let mut kept = Vec::new();
        for s in listener.incoming().take(4).flatten() {
            kept.push(s); // accepted, never answered
        }
        std::thread::sleep(std::time::Duration::from_secs(20));
    });
    let env = TestEnv::new();
    let url =
        format!("postgresql://spice@127.0.0.1:{port}/spice?connect_timeout=2&sslmode=disable");
    let started = std::time::Instant::now();
    let out = common::to_run(
        env.cmd(&["task", "list"])
            .env("SPICE_DATABASE_URL", &url)
            .output()
            .unwrap(),
    );
    let took = started.elapsed();
    assert_ne!(out.code, 0, "{}", out.stdout);
    assert!(took < std::time::Duration::from_secs(10), "took {took:?}");
    let err = out.stderr.trim();
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("no answer within 2s"), "{err}");
    drop(held);
}

/// A password in the state directory's `config.toml` is in a file every agent can
/// read (reads are not confined): `fleet check` says so, and where the password is
/// safe instead.
#[test]
fn fleet_check_says_a_password_in_config_toml_is_readable_by_agents() {
    let env = TestEnv::with_lanes(&[("a", "profile = \"demo\"\n")]);
    std::fs::create_dir_all(&env.home).unwrap();
    std::fs::write(
        env.home.join("config.toml"),
        "[store]\nurl = \"postgresql://spice:hunter2@127.0.0.1:9/x\"\n",
    )
    .unwrap();
    let check = env.run(&["fleet", "check"]);
    let out = check.ok();
    assert!(
        out.contains("store: the password in") && out.contains("SPICE_DATABASE_URL instead"),
        "{out}"
    );
    assert!(!out.contains("hunter2"), "{out}");
    let json = env.run(&["fleet", "check", "--json"]).json();
    assert!(json["password_file"]
        .as_str()
        .is_some_and(|p| p.ends_with("config.toml")));
    // Without a password in the file, nothing is said.
    std::fs::write(
        env.home.join("config.toml"),
        "[store]\nurl = \"postgresql://spice@127.0.0.1:9/x\"\n",
    )
    .unwrap();
    assert!(!env.run(&["fleet", "check"]).ok().contains("password"));
}

/// The lane's row says what confinement its agent has, never silently none: a lane
/// with `sandbox = "off"` says it is not confined, in `fleet status` and its JSON.
#[test]
fn fleet_status_says_what_confinement_each_lane_has() {
    let env = TestEnv::with_lanes(&[
        ("a", "profile = \"demo\"\nsandbox = \"off\"\n"),
        ("b", "profile = \"demo\"\n"),
    ]);
    let lanes = env.lanes();
    let of = |name: &str| {
        lanes.iter().find(|l| l["lane"] == name).unwrap()["sandbox"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    };
    assert_eq!(of("a"), "not confined (sandbox = \"off\")");
    let b = of("b");
    assert!(
        b == "confined" || b.contains("confined"),
        "lane b says nothing of its sandbox: {b:?}"
    );
    let table = env.run(&["fleet", "status"]);
    let out = table.ok();
    assert!(out.contains("SANDBOX"), "{out}");
    assert!(out.contains("not confined (sandbox = \"off\")"), "{out}");
}
