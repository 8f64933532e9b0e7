//! `spice fleet service install|uninstall` through the real binary, into a temporary
//! `XDG_CONFIG_HOME`: the unit it writes (this binary, the repository, restart on
//! failure, the state directory), the commands it prints, refusing to replace a
//! different unit without `--force`, and removing only what it wrote. The unit passes
//! `systemd-analyze verify` where that is installed (CI installs it).

use crate::common;
use common::{Run, TestEnv};
use std::path::PathBuf;
use std::process::Command;

fn setup() -> TestEnv {
    TestEnv::with_lanes(&[("a", "profile = \"demo\"\nphases = [\"todo\"]\n")])
}

fn config(env: &TestEnv) -> PathBuf {
    env.dir.path().join("config")
}

fn service(env: &TestEnv, args: &[&str]) -> Run {
    let mut a = vec!["fleet", "service"];
    a.extend_from_slice(args);
    common::to_run(
        env.cmd(&a)
            .env("XDG_CONFIG_HOME", config(env))
            .output()
            .unwrap(),
    )
}

/// The one unit under the temporary configuration, and its text.
fn unit(env: &TestEnv) -> (PathBuf, String) {
    let dir = config(env).join("systemd/user");
    let units: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "service"))
        .collect();
    assert_eq!(units.len(), 1, "{units:?}");
    let text = std::fs::read_to_string(&units[0]).unwrap();
    (units[0].clone(), text)
}

#[test]
fn install_writes_a_unit_that_restarts_the_supervisor_and_says_how_to_enable_it() {
    let env = setup();
    let run = service(&env, &["install"]);
    let out = run.ok();
    let (path, text) = unit(&env);
    let name = path.file_name().unwrap().to_str().unwrap().to_string();
    assert!(
        name.starts_with("spice-fleet-repo-") && name.ends_with(".service"),
        "{name}"
    );
    assert!(out.contains(&format!("wrote {}", path.display())), "{out}");
    assert!(
        out.contains(&format!(
            "systemctl --user daemon-reload && systemctl --user enable --now {name}"
        )),
        "{out}"
    );
    assert!(out.contains("loginctl enable-linger $USER"), "{out}");
    let bin = std::fs::canonicalize(common::bin()).unwrap();
    let repo = std::fs::canonicalize(&env.repo).unwrap();
    for line in [
        format!("ExecStart=\"{}\" \"fleet\" \"up\"", bin.display()),
        format!("WorkingDirectory={}", repo.display()),
        format!("Environment=\"SPICE_HOME={}\"", env.home.display()),
        "Restart=on-failure".to_string(),
        "RestartPreventExitStatus=2 3".to_string(),
        "KillMode=mixed".to_string(),
        "WantedBy=default.target".to_string(),
    ] {
        assert!(text.lines().any(|l| l == line), "{line:?} not in\n{text}");
    }
    assert!(text.contains("Environment=\"PATH="), "{text}");

    // The same unit again: nothing changes.
    assert!(service(&env, &["install"]).ok().contains("unchanged"));
    // A unit changed by hand is not replaced without --force.
    std::fs::write(&path, text.replace("RestartSec=10s", "RestartSec=1s")).unwrap();
    service(&env, &["install"]).fails(3, "pass --force to replace it");
    assert!(std::fs::read_to_string(&path)
        .unwrap()
        .contains("RestartSec=1s"));
    service(&env, &["install", "--force"]).ok();
    assert_eq!(std::fs::read_to_string(&path).unwrap(), text);
}

#[test]
fn uninstall_removes_the_unit_and_its_enablement_but_nothing_it_did_not_write() {
    let env = setup();
    service(&env, &["install"]).ok();
    let (path, text) = unit(&env);
    let name = path.file_name().unwrap().to_str().unwrap().to_string();
    // What `systemctl --user enable` leaves behind.
    let wants = path.parent().unwrap().join("default.target.wants");
    std::fs::create_dir_all(&wants).unwrap();
    std::os::unix::fs::symlink(&path, wants.join(&name)).unwrap();
    let out = service(&env, &["uninstall"]).ok().to_string();
    assert!(
        out.contains(&format!("removed {}", path.display())),
        "{out}"
    );
    assert!(
        out.contains(&format!(
            "systemctl --user stop {name} && systemctl --user daemon-reload"
        )),
        "{out}"
    );
    assert!(!path.exists());
    assert!(wants.join(&name).symlink_metadata().is_err());
    assert!(service(&env, &["uninstall"])
        .ok()
        .contains("nothing to remove"));
    // A file of that name spice did not write stays.
    std::fs::write(&path, text.lines().skip(1).collect::<Vec<_>>().join("\n")).unwrap();
    service(&env, &["uninstall"]).fails(3, "was not written by `spice fleet service install`");
    assert!(path.exists());
}

#[test]
fn install_refuses_a_repository_with_no_lane_to_run() {
    let env = TestEnv::new();
    service(&env, &["install"]).fails(2, "lanes");
    assert!(!config(&env).join("systemd/user").exists());
}

/// The unit as systemd reads it: no unknown key, no bad value, a command that runs.
#[test]
#[ignore = "needs systemd-analyze (apt: systemd; installed by .ci/run)"]
fn the_unit_passes_systemd_analyze_verify() {
    let env = setup();
    service(&env, &["install"]).ok();
    let (path, _) = unit(&env);
    // The user manager's lookup needs a runtime directory, not a running manager.
    let runtime = env.dir.path().join("runtime");
    std::fs::create_dir_all(&runtime).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&runtime, std::fs::Permissions::from_mode(0o700)).unwrap();
    let out = Command::new("systemd-analyze")
        .args(["verify", "--user"])
        .arg(&path)
        .env("XDG_RUNTIME_DIR", &runtime)
        .env("XDG_CONFIG_HOME", config(&env))
        .env("HOME", env.dir.path())
        .output()
        .expect("systemd-analyze runs");
    let run = common::to_run(out);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert_eq!(run.stderr.trim(), "", "systemd-analyze warned");
}

/// A unit carrying `SPICE_DATABASE_URL` with a password is the user's to read only,
/// and install says that agents (which read what their operator can) can read it.
#[test]
fn install_says_when_the_unit_holds_the_store_s_password() {
    let env = setup();
    let url = "postgresql://spice:hunter2@127.0.0.1:9/x";
    let run = common::to_run(
        env.cmd(&["fleet", "service", "install"])
            .env("XDG_CONFIG_HOME", config(&env))
            .env("SPICE_DATABASE_URL", url)
            .output()
            .unwrap(),
    );
    let out = run.ok();
    assert!(out.contains("the unit holds the store's password"), "{out}");
    assert!(!out.contains("hunter2"), "{out}");
    let (path, text) = unit(&env);
    assert!(text.contains(url), "{text}");
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&path).unwrap().permissions().mode();
    assert_eq!(mode & 0o077, 0, "{mode:o}");
    // Without a password, nothing is said.
    let env = setup();
    let run = common::to_run(
        env.cmd(&["fleet", "service", "install"])
            .env("XDG_CONFIG_HOME", config(&env))
            .env("SPICE_DATABASE_URL", "postgresql://spice@127.0.0.1:9/x")
            .output()
            .unwrap(),
    );
    assert!(!run.ok().contains("password"));
}
