//! A real fixture crate with crates.io dependencies (taken from the local cargo cache,
//! offline): a worktree seeded from a warm template runs its first `cargo test`
//! without compiling a single dependency, where a cold worktree compiles them all
//! and without compiling the crate itself (its unchanged sources carry the template's
//! times); a source changed since the template's commit is compiled again.
//! Both first runs are timed and printed (figures, not assertions).

use crate::common;
use common::{git, TestEnv};
use std::path::Path;
use std::process::Command;
use std::time::Instant;

const CARGO_TOML: &str = r#"[package]
name = "bedfixture"
version = "0.1.0"
edition = "2021"

[dependencies]
itoa = "1"
memchr = "2"
"#;

const LIB: &str = r#"pub fn render(n: u64) -> String {
    let mut b = itoa::Buffer::new();
    b.format(n).to_string()
}

pub fn find(hay: &[u8]) -> Option<usize> {
    memchr::memchr(b'x', hay)
}

#[cfg(test)]
mod tests {
    #[test]
    fn works() {
        assert_eq!(super::render(42), "42");
        assert_eq!(super::find(b"abx"), Some(2));
    }
}
"#;

const BED: &str = r#"[testbed]
paths = ["target"]
warm = [["cargo", "test", "--offline", "--no-run"]]
key = ["Cargo.lock"]
"#;

/// `cargo ARGS` in `dir`, isolated from the outer cargo's target and flags.
fn cargo(dir: &Path, args: &[&str]) -> (bool, String, f64) {
    let t = Instant::now();
    let out = Command::new("cargo")
        .args(args)
        .current_dir(dir)
        .env_remove("CARGO_TARGET_DIR")
        .env_remove("CARGO_BUILD_TARGET_DIR")
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .env_remove("CARGO_INCREMENTAL")
        .output()
        .expect("cargo runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text, t.elapsed().as_secs_f64())
}

#[test]
fn a_seeded_worktree_runs_its_first_test_without_compiling_dependencies() {
    let env = TestEnv::new();
    git(&env.repo, &["checkout", "-q", "-b", "main"]);
    std::fs::create_dir_all(env.repo.join("src")).unwrap();
    std::fs::write(env.repo.join("Cargo.toml"), CARGO_TOML).unwrap();
    std::fs::write(env.repo.join("src/lib.rs"), LIB).unwrap();
    std::fs::write(env.repo.join(".gitignore"), "target/\n").unwrap();
    std::fs::write(env.repo.join("spice.toml"), BED).unwrap();
    let (ok, out, _) = cargo(&env.repo, &["generate-lockfile", "--offline"]);
    assert!(ok, "the dependencies are in the local cargo cache: {out}");
    git(&env.repo, &["add", "-A"]);
    commit(&env, &["-q", "-m", "crate"]);

    // The warm runs cargo as the operator's shell would: with their toolchain and
    // cargo cache (the test environment's HOME is a temporary one).
    let home = std::path::PathBuf::from(std::env::var("HOME").unwrap());
    let rustup =
        std::env::var("RUSTUP_HOME").unwrap_or_else(|_| home.join(".rustup").display().to_string());
    let cargo_home =
        std::env::var("CARGO_HOME").unwrap_or_else(|_| home.join(".cargo").display().to_string());
    let w = common::to_run(
        env.cmd(&["bed", "warm"])
            .env("RUSTUP_HOME", rustup)
            .env("CARGO_HOME", cargo_home)
            .env_remove("CARGO_TARGET_DIR")
            .output()
            .unwrap(),
    );
    w.ok();
    assert!(
        w.stderr.contains("Compiling memchr"),
        "the warm builds: {}",
        w.stderr
    );

    let cold = worktree(&env, "cold");
    let seeded = worktree(&env, "seeded");
    let s = seed(&env, &seeded);
    assert_eq!(s["seeded"], true, "{s:#}");
    assert_eq!(s["matched"], "exact", "{s:#}");

    let (ok_cold, out_cold, t_cold) = cargo(&cold, &["test", "--offline"]);
    let (ok_seed, out_seed, t_seed) = cargo(&seeded, &["test", "--offline"]);
    assert!(ok_cold, "{out_cold}");
    assert!(ok_seed, "{out_seed}");
    assert!(out_cold.contains("Compiling memchr"), "{out_cold}");
    for dep in ["itoa", "memchr"] {
        assert!(
            !out_seed.contains(&format!("Compiling {dep}")),
            "the seeded bed is fresh for cargo: {out_seed}"
        );
    }
    // The crate itself is fresh too: its sources, unchanged since the template's
    // commit, carry the template's times (a checkout dated them after its outputs).
    assert!(
        !out_seed.contains("Compiling bedfixture"),
        "nothing is compiled in a seeded worktree at the template's commit: {out_seed}"
    );
    assert!(s["sources_dated"].as_u64().unwrap() >= 3, "{s:#}");
    println!(
        "first `cargo test`: cold {t_cold:.2}s, seeded {t_seed:.2}s (ratio {:.2}); seeding by {} took {:.3}s",
        t_seed / t_cold,
        s["method"],
        s["seconds"].as_f64().unwrap()
    );

    // A commit after the template's: the worktree at it is seeded from the nearest
    // ancestor's template, and only what changed is compiled again.
    let changed = LIB.replace("b'x'", "b'y'").replace("Some(2)", "None");
    std::fs::write(env.repo.join("src/lib.rs"), changed).unwrap();
    commit(&env, &["-qam", "y"]);
    let next = worktree(&env, "next");
    let s = seed(&env, &next);
    assert_eq!(s["behind"], 1, "{s:#}");
    let (ok, out, _) = cargo(&next, &["test", "--offline"]);
    assert!(ok, "the changed source is what runs: {out}");
    assert!(out.contains("Compiling bedfixture"), "{out}");
    assert!(!out.contains("Compiling memchr"), "{out}");
}

/// `git commit ARGS` in the test's repository.
fn commit(env: &TestEnv, args: &[&str]) {
    let mut a = vec!["-c", "user.name=t", "-c", "user.email=t@t", "commit"];
    a.extend_from_slice(args);
    git(&env.repo, &a);
}

/// A new worktree `name` detached at main.
fn worktree(env: &TestEnv, name: &str) -> std::path::PathBuf {
    let wt = env.dir.path().join(name);
    git(
        &env.repo,
        &[
            "worktree",
            "add",
            "-q",
            "--detach",
            wt.to_str().unwrap(),
            "main",
        ],
    );
    wt
}

/// `spice bed seed WT --json`.
fn seed(env: &TestEnv, wt: &Path) -> serde_json::Value {
    env.run(&["bed", "seed", wt.to_str().unwrap(), "--json"])
        .json()
}

/// `PROGRAM ARGS` in `dir`, required to succeed.
fn must(dir: &Path, program: &str, args: &[&str]) -> String {
    let out = Command::new(program)
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap_or_else(|e| panic!("{program} must be installed (.ci/run installs it): {e}"));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{program} {args:?}: {text}");
    text
}

/// A small npm project whose dependency is a package tarball in the repository
/// (installed offline): the seeded worktree loads it without running `npm ci`.
#[test]
#[ignore = "needs node and npm"]
fn a_seeded_npm_project_has_its_node_modules() {
    let env = TestEnv::new();
    git(&env.repo, &["checkout", "-q", "-b", "main"]);
    let dep = env.dir.path().join("dep");
    std::fs::create_dir_all(&dep).unwrap();
    std::fs::write(
        dep.join("package.json"),
        r#"{"name":"bedfix-dep","version":"1.0.0","main":"index.js"}"#,
    )
    .unwrap();
    std::fs::write(dep.join("index.js"), "module.exports = (a, b) => a + b;\n").unwrap();
    must(
        &dep,
        "npm",
        &[
            "pack",
            "--silent",
            "--pack-destination",
            env.repo.to_str().unwrap(),
        ],
    );
    std::fs::write(
        env.repo.join("package.json"),
        r#"{"name":"proj","version":"1.0.0","private":true,"dependencies":{"bedfix-dep":"file:bedfix-dep-1.0.0.tgz"}}"#,
    )
    .unwrap();
    must(
        &env.repo,
        "npm",
        &["install", "--offline", "--no-audit", "--no-fund"],
    );
    std::fs::remove_dir_all(env.repo.join("node_modules")).unwrap();
    std::fs::write(env.repo.join(".gitignore"), "node_modules/\n").unwrap();
    std::fs::write(
        env.repo.join("spice.toml"),
        "[testbed]\npaths = [\"node_modules\"]\nwarm = [[\"npm\", \"ci\", \"--offline\", \"--no-audit\", \"--no-fund\"]]\nkey = [\"package-lock.json\"]\n",
    )
    .unwrap();
    git(&env.repo, &["add", "-A"]);
    commit(&env, &["-q", "-m", "npm"]);
    env.run(&["bed", "warm"]).ok();
    let seeded = worktree(&env, "seeded");
    let probe = ["-e", "console.log(require('bedfix-dep')(2, 3))"];
    let cold = Command::new("node")
        .args(probe)
        .current_dir(&seeded)
        .output()
        .unwrap();
    assert!(
        !cold.status.success(),
        "a cold worktree has no node_modules"
    );
    let s = seed(&env, &seeded);
    assert_eq!(s["seeded"], true, "{s:#}");
    assert_eq!(must(&seeded, "node", &probe).trim(), "5");
}
