//! The ACK grammar's fuzz crate (`fuzz/`) depends on spice by path and has its own
//! lock file. `.ci/run` builds it with `--locked`, so a change to spice's
//! dependencies that leaves `fuzz/Cargo.lock` behind fails CI before any test runs.
//! This test catches that drift where every change is checked: in `cargo test`.

use std::path::Path;
use std::process::Command;

#[test]
fn the_fuzz_lock_file_follows_spices_dependencies() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    // `cargo metadata` resolves the whole graph without building it; with --locked it
    // fails exactly when the build would have to rewrite the lock file.
    let out = Command::new(cargo)
        .args(["metadata", "--locked", "--format-version", "1"])
        .arg("--manifest-path")
        .arg(root.join("fuzz/Cargo.toml"))
        .output()
        .expect("run cargo metadata");
    assert!(
        out.status.success(),
        "fuzz/Cargo.lock is stale; run `cargo update --manifest-path fuzz/Cargo.toml -w` and commit it:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
