//! Taskwarrior interchange: importing what `task export` writes, refusing what it
//! would not, and a round trip through the real `task` binary.

use crate::common;
use common::TestEnv;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

/// A graph in Taskwarrior's export shape: deps on earlier tasks (string and array
/// forms), some completed, deleted and waiting tasks, annotations and dates.
fn graph(n: usize) -> Vec<serde_json::Value> {
    let uuid = |i: usize| format!("{i:08x}-0000-4000-8000-000000000000");
    (0..n)
        .map(|i| {
            let status = [
                "pending",
                "pending",
                "pending",
                "completed",
                "deleted",
                "waiting",
            ][i % 6];
            let mut t = serde_json::json!({
                "id": i + 1,
                "uuid": uuid(i),
                "description": format!("task {i}"),
                "status": status,
                "entry": "20261101T120000Z",
                "modified": "20261102T120000Z",
                "project": format!("proj{}", i % 3),
                "tags": ["impl"],
                "urgency": 4.2,
            });
            if i % 6 == 3 || i % 6 == 4 {
                t["end"] = "20261103T120000Z".into();
            }
            if i % 6 == 5 {
                t["wait"] = "20991231T000000Z".into();
            }
            if i % 4 == 0 {
                t["priority"] = "H".into();
            }
            if i % 5 == 0 {
                t["annotations"] =
                    serde_json::json!([{"entry": "20261101T130000Z", "description": "a note"}]);
            }
            let deps: Vec<String> = [i.wrapping_sub(1), i.wrapping_sub(7)]
                .into_iter()
                .filter(|d| *d < i)
                .map(uuid)
                .collect();
            if !deps.is_empty() {
                t["depends"] = if i % 2 == 0 {
                    deps.join(",").into()
                } else {
                    serde_json::json!(deps)
                };
            }
            t
        })
        .collect()
}

/// uuid → (description, status, sorted depends) of a Taskwarrior export.
fn shape(export: &serde_json::Value) -> BTreeMap<String, (String, String, BTreeSet<String>)> {
    export
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            let deps: BTreeSet<String> = match &t["depends"] {
                serde_json::Value::Array(a) => {
                    a.iter().map(|d| d.as_str().unwrap().to_string()).collect()
                }
                serde_json::Value::String(s) => s.split(',').map(str::to_string).collect(),
                _ => BTreeSet::new(),
            };
            let status = match t["status"].as_str().unwrap() {
                // Taskwarrior 2.6 imports "waiting" as pending with the wait date kept.
                "waiting" => "pending",
                s => s,
            };
            (
                t["uuid"].as_str().unwrap().to_string(),
                (
                    t["description"].as_str().unwrap().to_string(),
                    status.to_string(),
                    deps,
                ),
            )
        })
        .collect()
}

#[test]
fn imports_an_export_and_writes_it_back() {
    let env = TestEnv::new();
    let input = serde_json::Value::Array(graph(120));
    let out = env
        .run_stdin(
            &["task", "import", "--taskwarrior", "-", "--json"],
            &input.to_string(),
        )
        .json();
    assert_eq!(out["added"], 120);
    assert_eq!(
        env.count("SELECT count(*) FROM tasks WHERE status = 'completed'"),
        20
    );
    // Importing again updates in place: no duplicates.
    let again = env
        .run_stdin(
            &["task", "import", "--taskwarrior", "-", "--json"],
            &input.to_string(),
        )
        .json();
    assert_eq!(again["updated"], 120);
    assert_eq!(env.count("SELECT count(*) FROM tasks"), 120);
    let exported = env.run(&["task", "export", "--taskwarrior"]).json();
    assert_eq!(shape(&exported), shape(&input));
    let first = &exported.as_array().unwrap()[0];
    assert_eq!(first["entry"], "20261101T120000Z");
    assert_eq!(first["annotations"][0]["description"], "a note");
    // Waiting tasks (wait in 2099) are not ready.
    let next = env
        .run(&["task", "next", "--json", "--limit", "1000"])
        .json();
    assert!(next
        .as_array()
        .unwrap()
        .iter()
        .all(|c| c["description"] != "task 5"));
}

#[test]
fn malformed_exports_are_refused_whole() {
    let env = TestEnv::new();
    env.add(&["already here"]);
    let cases: Vec<(String, &str)> = vec![
        ("[{\"uuid\": ".into(), "invalid JSON at line 1"),
        ("{\"a\":1}".into(), "field 'uuid': missing"),
        (r#"[{"uuid":"00000000-0000-4000-8000-000000000001","description":7}]"#.into(), "field 'description'"),
        (
            r#"[{"uuid":"00000000-0000-4000-8000-000000000001","description":"x","priority":"X"}]"#.into(),
            "task 1 (uuid 00000000-0000-4000-8000-000000000001): field 'priority'",
        ),
        (
            r#"[{"uuid":"00000000-0000-4000-8000-000000000001","description":"x","depends":"00000000-0000-4000-8000-00000000dead"}]"#.into(),
            "unknown uuid 00000000-0000-4000-8000-00000000dead",
        ),
        (
            r#"[{"uuid":"00000000-0000-4000-8000-000000000001","description":"a","depends":["00000000-0000-4000-8000-000000000002"]},
                {"uuid":"00000000-0000-4000-8000-000000000002","description":"b","depends":["00000000-0000-4000-8000-000000000001"]}]"#.into(),
            "dependency cycle",
        ),
    ];
    for (text, needle) in cases {
        let r = env.run_stdin(&["task", "import", "--taskwarrior", "-"], &text);
        r.fails(2, needle);
        assert!(r.stderr.contains("<stdin>"), "{}", r.stderr);
        assert_eq!(
            env.count("SELECT count(*) FROM tasks"),
            1,
            "nothing written for {needle}"
        );
    }
    let missing = env.dir.path().join("nope.json");
    env.run(&["task", "import", "--taskwarrior", missing.to_str().unwrap()])
        .fails(2, "no such file");
}

/// Taskwarrior's `task`. The test that needs it is ignored unless asked for
/// (`--include-ignored`, as .ci/run does), and then its absence is a failure.
fn require_taskwarrior() {
    let found = Command::new("task")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        found,
        "taskwarrior (`task`) is not installed (apt-get install taskwarrior)"
    );
}

fn tw(data: &Path, args: &[&str], stdin: Option<&str>) -> String {
    use std::io::Write;
    let rc = data.join("taskrc");
    std::fs::write(
        &rc,
        format!("data.location={}\n", data.join("data").display()),
    )
    .unwrap();
    let mut child = Command::new("task")
        .args([
            "rc.confirmation=off",
            "rc.hooks=off",
            "rc.verbose=nothing",
            "rc.json.array=on",
        ])
        .args(args)
        .env("TASKRC", &rc)
        .env("TASKDATA", data.join("data"))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.unwrap_or("").as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "task {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
#[ignore = "needs taskwarrior (installed by .ci/run)"]
fn round_trip_through_real_taskwarrior_keeps_tasks_and_dependencies() {
    require_taskwarrior();
    let env = TestEnv::new();
    let original = serde_json::Value::Array(graph(60));
    env.run_stdin(
        &["task", "import", "--taskwarrior", "-"],
        &original.to_string(),
    )
    .ok();
    // spice → Taskwarrior
    let from_spice = env
        .run(&["task", "export", "--taskwarrior"])
        .ok()
        .to_string();
    let data = env.dir.path().join("tw");
    std::fs::create_dir_all(data.join("data")).unwrap();
    tw(&data, &["import", "-"], Some(&from_spice));
    let from_tw: serde_json::Value = serde_json::from_str(&tw(&data, &["export"], None)).unwrap();
    assert_eq!(
        shape(&from_tw),
        shape(&original),
        "Taskwarrior holds what spice exported"
    );
    // Taskwarrior → a fresh spice: still the same tasks and dependencies, phases kept.
    let env2 = TestEnv::new();
    env2.run_stdin(
        &["task", "import", "--taskwarrior", "-"],
        &from_tw.to_string(),
    )
    .ok();
    let back = env2.run(&["task", "export", "--taskwarrior"]).json();
    assert_eq!(shape(&back), shape(&original));
    assert!(back
        .as_array()
        .unwrap()
        .iter()
        .all(|t| t["phase"] == "todo"));
}
