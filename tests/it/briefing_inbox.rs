//! `spice inbox --json` carries the agent's reply to each item, as the console shows
//! it (issue #14), through the real binary.

use crate::common;
use common::TestEnv;
use serde_json::Value;

fn steer(env: &TestEnv, msg: &str) -> String {
    env.run(&["steer", "--force", "lane:core", msg])
        .ok()
        .trim()
        .to_string()
}

fn item(all: &Value, key: &str) -> Value {
    all.as_array()
        .unwrap()
        .iter()
        .find(|i| i["key"] == key)
        .cloned()
        .unwrap_or_else(|| panic!("{key} not in {all}"))
}

/// Regression (issue #14): `inbox --json` had no reply although the console showed it.
#[test]
fn inbox_json_shows_the_ack_or_nack_that_retired_each_item() {
    let env = TestEnv::new();
    let acked = steer(&env, "split the test file");
    let refused = steer(&env, "edit the generated file");
    let pending = steer(&env, "rename the crate");
    let text = format!(
        "Done.\nACK {acked}: split into three shards\nNACK {refused}: the file is generated\n"
    );
    env.run_stdin(&["ack", "apply", "--source", "t1.jsonl"], &text)
        .ok();
    // A later answer to an item already retired is recorded but is not its reply.
    env.run_stdin(
        &["ack", "apply", "--source", "t2.jsonl"],
        &format!("ACK {acked}: said again\n"),
    )
    .ok();

    let all = env.run(&["inbox", "--all", "--json"]).json();
    let a = item(&all, &acked);
    assert_eq!(a["state"], "acked");
    assert_eq!(a["reply"]["polarity"], "ack", "{a}");
    assert_eq!(a["reply"]["body"], "split into three shards");
    assert_eq!(a["reply"]["source"], "t1.jsonl");
    assert_eq!(a["reply"]["line"], 2);
    assert!(a["reply"]["at"].as_str().unwrap().ends_with('Z'), "{a}");
    let r = item(&all, &refused);
    assert_eq!(r["state"], "refused");
    assert_eq!(r["reply"]["polarity"], "nack", "{r}");
    assert_eq!(r["reply"]["body"], "the file is generated");
    let p = item(&all, &pending);
    assert_eq!(p["state"], "pending");
    assert!(p.get("reply").is_some_and(Value::is_null), "{p}");

    // The pending-only listing has the key too.
    let open = env.run(&["inbox", "--json"]).json();
    assert!(item(&open, &pending)["reply"].is_null());
}
