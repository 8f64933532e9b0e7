//! Durations have one documented maximum (`spice::when::MAX_DURATION`, 10 years):
//! every duration field refuses more, naming the field, instead of overflowing.

use crate::common;
use common::TestEnv;

/// Regression (#14): `--lease 300000y` overflowed and claimed "until 1970-01-01".
#[test]
fn an_absurd_lease_is_refused_and_nothing_is_claimed() {
    let env = TestEnv::new();
    let id = env.add(&["a task"]);
    let err = env
        .run(&[
            "task",
            "next",
            "--claim",
            "--claimant",
            "me",
            "--lease",
            "300000y",
        ])
        .fails(2, "300000y exceeds the maximum duration of 10 years");
    assert!(err.contains("--lease"), "names the field: {err}");
    env.run(&["task", "claim", &id, "--claimant", "me", "--lease", "11y"])
        .fails(2, "--lease");
    assert_eq!(env.count("SELECT count(*) FROM claims"), 0);
    // The maximum itself is accepted, and its deadline is in the future.
    let claim = env
        .run(&[
            "task",
            "claim",
            &id,
            "--claimant",
            "me",
            "--lease",
            "10y",
            "--json",
        ])
        .json();
    let until = claim["lease_until"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(until.starts_with("20"), "lease ends after 2000: {claim}");
}

#[test]
fn an_absurd_steering_ttl_is_refused() {
    let env = TestEnv::new();
    env.add(&["a task"]);
    env.run(&["steer", "--force", "--ttl", "300000y", "lane:core", "hello"])
        .fails(2, "--ttl");
    assert_eq!(env.count("SELECT count(*) FROM steering"), 0);
}

#[test]
fn a_lane_file_with_an_absurd_duration_fails_fleet_check_at_its_line() {
    let env = TestEnv::with_lanes(&[(
        "x",
        "profile = \"demo\"\nphases = [\"todo\"]\nlease = \"300000y\"\n",
    )]);
    let r = env.run(&["fleet", "check"]);
    assert_ne!(r.code, 0, "fleet check must fail: {}", r.stdout);
    assert!(
        r.stderr.contains(
            "lanes/x.toml:3:9: field 'lease': 300000y exceeds the maximum duration of 10 years"
        ),
        "{}",
        r.stderr
    );
}
