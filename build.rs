//! Links the `spice` binary as a position-dependent executable on Linux (glibc).
//!
//! `spice exec` wraps every command an agent runs, so its start-up is paid per
//! command. As a PIE, the dynamic loader applied ~28,000 relative relocations at each
//! start (touching and copying every page of `.data.rel.ro` they land in): about
//! 0.4 ms of the wrapper's cost (`benches/exec_true.py`). Linked with `-no-pie` the
//! linker resolves them once, at link time. The code stays position-independent; what
//! is given up is the randomised load address of the executable's own image (shared
//! libraries, the heap and the stacks are still randomised). ARCHITECTURE.md says why.
fn main() {
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let env = std::env::var("CARGO_CFG_TARGET_ENV").unwrap_or_default();
    if os == "linux" && env == "gnu" && std::env::var_os("SPICE_PIE").is_none() {
        println!("cargo:rustc-link-arg-bins=-no-pie");
    }
    println!("cargo:rerun-if-env-changed=SPICE_PIE");
    println!("cargo:rerun-if-changed=build.rs");
}
