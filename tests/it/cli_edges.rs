//! Edges of the command line: every listing takes `--json`, help says what a command
//! group does, steering and every other command naming a lane refuse lanes nothing
//! defines, and ids are shown and accepted by their shortest unique prefix.

use crate::common;
use crate::common::console;

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

/// Regression (issue 40): `spice budget raise zzz 1000` set a budget for a lane no
/// lane file defines ("budget zzz: 1000 tokens (0 used)", exit 0), as did `budget
/// stop zzz`; `fleet attach zzz` asked whether `spice fleet up` was running, and
/// `fleet lift` and `conscience scan --lane` took any name too. Each refuses it now in
/// the words of `spice steer lane:zzz`, naming the lanes that exist.
#[test]
fn regression_commands_naming_a_lane_refuse_one_no_lane_file_defines() {
    let env = TestEnv::new();
    // With no lane at all, the refusal says how to add one.
    let err = env
        .run(&["budget", "raise", "zzz", "1000"])
        .fails(2, "unknown lane 'zzz'");
    assert!(err.contains("lanes/zzz.toml"), "{err}");
    assert!(err.contains("`spice demo`"), "{err}");
    std::fs::create_dir_all(env.repo.join("lanes")).unwrap();
    for lane in ["b", "a"] {
        std::fs::write(
            env.repo.join(format!("lanes/{lane}.toml")),
            "profile = \"demo\"\n",
        )
        .unwrap();
    }
    // Prose two built-in maxims answer: the scan would publish their reminders.
    let transcript = env.dir.path().join("t.jsonl");
    std::fs::write(
        &transcript,
        json!({"type": "assistant", "uuid": "u1", "sessionId": "s1", "cwd": "/tmp/x",
               "timestamp": "2026-01-01T00:00:01.000Z",
               "message": {"id": "m1", "role": "assistant", "stop_reason": "end_turn",
                   "content": [{"type": "text", "text": "I will add a fallback shim."}]}})
        .to_string()
            + "\n",
    )
    .unwrap();
    let transcript = transcript.display().to_string();
    for args in [
        &["budget", "raise", "zzz", "1000"][..],
        &["budget", "raise", "zzz", "+5"],
        &["budget", "stop", "zzz"],
        &["fleet", "attach", "zzz"],
        &["fleet", "lift", "zzz"],
        &["conscience", "scan", &transcript, "--lane", "zzz"],
        &["task", "next", "--lane", "zzz"],
        &["steer", "lane:zzz", "x"],
        &["inbox", "lane:zzz"],
        &["conscience", "log", "--lane", "zzz"],
    ] {
        let err = env.run(args).fails(2, "unknown lane 'zzz'");
        assert!(
            err.contains("/lanes/zzz.toml defines it (the lanes are a, b)"),
            "{args:?}: {err}"
        );
    }
    assert_eq!(env.run(&["budget", "show", "--json"]).json(), json!([]));
    assert!(items(&env).is_empty(), "nothing stored");
    // A lane that exists is taken as before.
    assert_eq!(
        env.run(&["budget", "raise", "a", "1000"]).ok(),
        "budget a: 1000 tokens (0 used)\n"
    );
    env.run(&["budget", "stop", "a"]).ok();
    env.run(&["fleet", "attach", "a"])
        .fails(2, "is `spice fleet up` running?");
    env.run(&["fleet", "lift", "a"])
        .fails(2, "no lane named \"a\" has run");
    // A task's budget is named by its task, whatever the lane files say.
    let task = env.add(&["Metered"]);
    env.run(&["budget", "raise", &task, "50", "--task"]).ok();
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

/// The shortest prefix (at least 4 characters) of `id` that no other of `ids` shares.
fn shortest(id: &str, ids: &[String]) -> String {
    (4..=id.len())
        .map(|n| &id[..n])
        .find(|p| ids.iter().filter(|o| o.starts_with(p)).count() == 1)
        .unwrap_or(id)
        .to_string()
}

/// Regression: listings printed whole ids, and ids made in the same second share
/// their first 7–8 characters, so a prefix typed from memory was rarely unique. Text
/// listings now show each task as `PROJECT-prefix` with the shortest unique prefix,
/// and every command takes it back; JSON keeps the id and adds `short`.
#[test]
fn regression_listings_show_the_shortest_unique_prefix_and_commands_take_it() {
    let env = TestEnv::new();
    let a = env.add(&["First", "--project", "app"]);
    let b = env.add(&["Second", "--project", "app", "--depends", &a]);
    let c = env.add(&["Third", "--project", "web"]);
    let docs = env.run(&["task", "list", "--json"]).json();
    let ids: Vec<String> = docs
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(ids.len(), 3);
    let short = |id: &str| shortest(id, &ids);
    for t in docs.as_array().unwrap() {
        let id = t["id"].as_str().unwrap();
        assert_eq!(t["short"], short(id), "{t}");
        assert_eq!(id.len(), 9, "JSON keeps the whole id");
    }
    let list = env.run(&["task", "list"]).ok().to_string();
    for (id, project) in [(&a, "app"), (&b, "app"), (&c, "web")] {
        let shown = format!("{project}-{} ", short(id));
        assert!(
            list.lines().any(|l| l.starts_with(&shown)),
            "{shown:?} in\n{list}"
        );
        assert!(!list.contains(id.as_str()), "whole id shown:\n{list}");
        // Bare and as a handle, the shown prefix names the task.
        for typed in [short(id), format!("{project}-{}", short(id))] {
            let show = env.run(&["task", "show", &typed, "--json"]).json();
            assert_eq!(show["id"], id.as_str(), "{typed}");
        }
    }
    // The detail view keeps whole ids: it is where one looks an id up.
    let show = env.run(&["task", "show", &short(&b)]).ok().to_string();
    assert!(show.contains(&format!("waits on  {a}\n")), "{show}");
    let next = env.run(&["task", "next"]).ok().to_string();
    assert!(next.contains(&format!(" app-{} ", short(&a))), "{next}");
    env.run(&["task", "claim", &short(&c), "--claimant", "me"])
        .ok();
    let claims = env.run(&["task", "claims"]).ok().to_string();
    assert!(
        claims
            .lines()
            .any(|l| l.starts_with(&format!("web-{} ", short(&c)))),
        "{claims}"
    );
    let claims = env.run(&["task", "claims", "--json"]).json();
    assert_eq!(claims[0]["id"], c.as_str());
    assert_eq!(claims[0]["short"], short(&c));
}

/// Regression: `spice steer session:PREFIX` stored an item for a session named
/// PREFIX, which no session is; the item expired unseen. A unique prefix of a
/// session the store knows now names it; a prefix of two is refused.
#[test]
fn regression_steer_takes_a_session_by_its_unique_prefix() {
    let env = TestEnv::new();
    let one = "3f9c2a1e-0000-4000-8000-000000000001";
    let two = "3f9c2a1e-0000-4000-8000-000000000002";
    let a = env.add(&["First", "--project", "app"]);
    env.run(&["task", "claim", &a, "--claimant", one]).ok();
    env.run(&["steer", "session:3f9c2a1e", "mind the tests"])
        .ok();
    let item = &items(&env)[0];
    assert_eq!(item["target"], one, "{item}");
    assert_eq!(item["target_kind"], "session");
    let b = env.add(&["Second", "--project", "app"]);
    env.run(&["task", "claim", &b, "--claimant", two]).ok();
    env.run(&["steer", "session:3f9c2a1e", "x"])
        .fails(2, "ambiguous session '3f9c2a1e'");
    env.run(&["steer", &format!("session:{two}"), "x"]).ok();
    // A name a person chose is never completed into another.
    env.run(&["task", "claim", &env.add(&["Third"]), "--claimant", "meg"])
        .ok();
    env.run(&["steer", "session:me", "x"]).ok();
    assert_eq!(items(&env).last().unwrap()["target"], "me");
}

/// Regression: a title or steering text of several lines broke its listing's row (the
/// rest of a task's title began a line of its own; an item showed its first line
/// alone), and an escape sequence in a title reached the terminal. Each row is one
/// line now, all of the text on it, controls shown as stand-ins.
#[test]
fn regression_a_text_of_several_lines_stays_on_its_row() {
    let env = TestEnv::with_lanes(&[("a", "profile = \"demo\"\n")]);
    env.add(&["a title\nwith a newline and \x1b[2J an escape"]);
    let list = env.run(&["task", "list"]).ok().to_string();
    assert_eq!(list.lines().count(), 2, "{list}");
    assert!(
        list.contains("a title with a newline and \u{241b}[2J an escape"),
        "{list}"
    );
    env.run(&["steer", "lane:a", "first line\nsecond line\n\nthird"])
        .ok();
    let inbox = env.run(&["inbox"]).ok().to_string();
    assert_eq!(inbox.lines().count(), 2, "{inbox}");
    assert!(inbox.contains("first line second line third"), "{inbox}");
}
