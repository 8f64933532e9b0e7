//! Edges of the command line: every listing takes `--json`, help says what a command
//! group does, steering refuses lanes nothing defines, and ids are shown and accepted
//! by their shortest unique prefix.

mod common;
#[path = "common/console.rs"]
mod console;

use common::TestEnv;
use serde_json::json;

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

fn items(env: &TestEnv) -> Vec<serde_json::Value> {
    env.run(&["inbox", "--all", "--json"])
        .json()
        .as_array()
        .unwrap()
        .clone()
}

/// Regression: `spice steer lane:NAME` stored an item for a lane no lane file
/// defines; nothing ever delivered it and it expired unseen. Refused now as the bare
/// form is; `--force` insists.
#[test]
fn regression_steer_refuses_a_lane_no_lane_file_defines() {
    let env = TestEnv::new();
    let err = env
        .run(&["steer", "lane:ghost", "use the v2 API"])
        .fails(2, "unknown lane 'ghost'");
    assert!(err.contains("lanes/ghost.toml"), "{err}");
    assert!(err.contains("--force"), "{err}");
    assert!(items(&env).is_empty(), "nothing stored");
    // The bare form says the same kind of no.
    env.run(&["steer", "ghost", "x"])
        .fails(2, "unknown target 'ghost'");

    let key = env
        .run(&["steer", "--force", "lane:ghost", "for a lane still to come"])
        .ok()
        .trim()
        .to_string();
    assert!(spice::stamp::is_stamp(&key), "{key}");
    std::fs::create_dir_all(env.repo.join("lanes")).unwrap();
    std::fs::write(env.repo.join("lanes/core.toml"), "profile = \"demo\"\n").unwrap();
    env.run(&["steer", "lane:core", "run the linter"]).ok();
    let targets: Vec<String> = items(&env)
        .iter()
        .map(|i| i["target"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(targets, ["ghost", "core"]);
    // Lane names are exact: a file in another case is another lane.
    env.run(&["steer", "lane:Core", "x"])
        .fails(2, "unknown lane 'Core'");
}

/// Regression: the console's steer took any lane too.
#[test]
fn regression_the_consoles_steer_refuses_an_unknown_lane() {
    let env = TestEnv::new();
    std::fs::create_dir_all(env.repo.join("lanes")).unwrap();
    std::fs::write(env.repo.join("lanes/a.toml"), "profile = \"demo\"\n").unwrap();
    let srv = console::Server::start(&env, &[]);
    srv.post("/api/steer", &json!({"target": "lane:ghost", "text": "x"}))
        .refused(400, "unknown lane 'ghost'");
    srv.post("/api/steer", &json!({"target": "lane:a", "text": "x"}))
        .expect(201);
    assert_eq!(items(&env).len(), 1);
    assert!(srv.stop().success());
}
