//! Edges of the command line: every listing takes `--json`, help says what a command
//! group does, steering refuses lanes nothing defines, and ids are shown and accepted
//! by their shortest unique prefix.

mod common;
use common::TestEnv;

/// Regression: `task flow --json` was refused, though every listing command takes it.
#[test]
fn regression_task_flow_takes_json() {
    let env = TestEnv::new();
    let doc = env.run(&["task", "flow", "--json"]).json();
    assert_eq!(
        doc,
        serde_json::json!({"project": null, "phases": ["todo", "review"]})
    );
    let doc = env
        .run(&["task", "flow", "--project", "web", "plan", "todo", "--json"])
        .json();
    assert_eq!(
        doc,
        serde_json::json!({"project": "web", "phases": ["plan", "todo"]})
    );
    // The text form is unchanged.
    assert_eq!(
        env.run(&["task", "flow", "--project", "web"]).ok(),
        "plan → todo\n"
    );
}

/// Regression: `spice --help` described `fleet` as "validate their configuration",
/// from before it ran anything.
#[test]
fn regression_fleet_help_says_what_fleet_does() {
    let env = TestEnv::new();
    let help = env.run(&["--help"]).ok().to_string();
    let line = help
        .lines()
        .find(|l| l.trim_start().starts_with("fleet"))
        .unwrap_or_else(|| panic!("no fleet line in {help}"));
    assert!(!line.contains("validate their configuration"), "{line}");
    for word in ["check", "run", "stop"] {
        assert!(line.contains(word), "{line}");
    }
    let fleet = env.run(&["fleet", "--help"]).ok().to_string();
    assert!(!fleet.contains("validate their configuration"), "{fleet}");
    assert!(fleet.contains("attach"), "{fleet}");
}
