//! The lane's finer states, read from a scripted agent's transcript (and its screen
//! for a permission prompt only): asking the operator (a question at the end of a
//! turn, the agent's own question tool, a permission prompt), waiting on its
//! sub-agent, done with its turn, errored; each change told once as a lane event and
//! run through the operator's `[notify]` command once.

use crate::common;
use common::{git, wait_for, TestEnv};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

struct Scripted {
    env: TestEnv,
    go: PathBuf,
    notified: PathBuf,
}

fn user(text: &str) -> Value {
    json!({"type": "user", "message": {"role": "user", "content": text}})
}

fn said(id: &str, text: &str, stop: &str) -> Value {
    json!({"type": "assistant", "message": {"id": id, "role": "assistant", "model": "m",
        "content": [{"type": "text", "text": text}], "stop_reason": stop}})
}

fn call(id: &str, name: &str, input: Value) -> Value {
    json!({"type": "assistant", "message": {"id": format!("m-{id}"), "role": "assistant",
        "model": "m", "content": [{"type": "tool_use", "id": id, "name": name, "input": input}],
        "stop_reason": "tool_use"}})
}

fn result(id: &str) -> Value {
    json!({"type": "user", "message": {"role": "user",
        "content": [{"type": "tool_result", "tool_use_id": id, "content": "ok"}]}})
}

impl Scripted {
    /// A repository whose lane `a` runs the scripted agent through `steps`, with a
    /// `[notify]` that appends each event to a file.
    fn new(steps: &[Value]) -> Scripted {
        Scripted::with_lane(steps, "")
    }

    /// Like [`Scripted::new`], with `extra` lines in the lane's file.
    fn with_lane(steps: &[Value], extra: &str) -> Scripted {
        let env = TestEnv::with_lanes(&[("a", "profile = \"demo\"\n")]);
        let dir = env.dir.path().to_path_buf();
        let go = dir.join("go");
        std::fs::create_dir_all(&go).unwrap();
        let steps_file = dir.join("steps.jsonl");
        let text: Vec<String> = steps.iter().map(Value::to_string).collect();
        std::fs::write(&steps_file, text.join("\n") + "\n").unwrap();
        let agent = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/agents/states-agent.py");
        std::fs::create_dir_all(env.repo.join("profiles")).unwrap();
        std::fs::write(
            env.repo.join("profiles/states.toml"),
            format!(
                "command = [\"python3\", \"{}\", \"{{session_id}}\"]\nmode = \"pty\"\n\
                 [transcript]\nformat = \"claude\"\ndir = \"{{home}}/t\"\nglob = \"{{session_id}}.jsonl\"\n",
                agent.display()
            ),
        )
        .unwrap();
        std::fs::write(
            env.repo.join("lanes/a.toml"),
            format!(
                "profile = \"states\"\nphases = [\"todo\"]\nwritable = [\"{}\"]\n{extra}[env]\nSTATES_STEPS = \"{}\"\nSTATES_GO = \"{}\"\n",
                go.display(),
                steps_file.display(),
                go.display()
            ),
        )
        .unwrap();
        let notified = dir.join("notified.jsonl");
        std::fs::write(
            env.repo.join("spice.toml"),
            "[notify]\ncommand = [\"sh\", \"-c\", \"cat >> \\\"$NOTIFIED\\\"\"]\n\
             on = [\"asking\", \"subagent\", \"waiting\", \"error\"]\nper_minute = 60\ndebounce = \"1s\"\n",
        )
        .unwrap();
        git(&env.repo, &["add", "."]);
        git(&env.repo, &["commit", "-q", "-m", "a scripted lane"]);
        Scripted { env, go, notified }
    }

    /// `fleet up`, its notifications appended to the file `notified`.
    fn up(&self) -> common::Supervisor {
        self.env.supervisor(
            self.env
                .cmd(&["fleet", "up"])
                .env("NOTIFIED", &self.notified)
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null()),
        )
    }

    /// Lets step `n` run and waits until the agent wrote it.
    fn step(&self, n: usize) {
        std::fs::write(self.go.join(n.to_string()), "").unwrap();
        wait_for(&format!("step {n}"), 20, || {
            self.go.join(format!("{n}.done")).exists().then_some(())
        });
    }

    /// Waits for lane a to be in `state` with `note`.
    fn state(&self, state: &str, note: Option<&str>) -> Value {
        let mut last = Value::Null;
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while std::time::Instant::now() < deadline {
            last = self.env.lane("a");
            if last["state"] == state && last["state_note"].as_str() == note {
                return last;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        panic!("lane a never became {state} ({note:?}): {last}");
    }

    /// Waits for the `n`th notification and returns it.
    fn notification(&self, n: usize) -> Value {
        let lines = wait_for(&format!("notification {n}"), 20, || {
            let text = std::fs::read_to_string(&self.notified).unwrap_or_default();
            let lines: Vec<Value> = text
                .lines()
                .filter(|l| !l.trim().is_empty())
                .map(|l| serde_json::from_str(l).unwrap())
                .collect();
            (lines.len() >= n).then_some(lines)
        });
        lines[n - 1].clone()
    }

    fn notifications(&self) -> usize {
        std::fs::read_to_string(&self.notified)
            .unwrap_or_default()
            .lines()
            .filter(|l| !l.trim().is_empty())
            .count()
    }
}

#[test]
fn each_state_is_told_apart_and_notified_once() {
    let steps = [
        json!({"lines": [user("look at the flag"), said("m1", "I read the code.\n\nShould I also remove the old flag?", "end_turn")]}),
        json!({"lines": [user("yes"), call("t1", "Task", json!({"description": "find the callers", "prompt": "find them"}))]}),
        json!({"lines": [result("t1"), call("q1", "AskUserQuestion", json!({"questions": [{"question": "Keep the alias?"}]}))]}),
        json!({"lines": [result("q1"), call("b1", "Bash", json!({"command": "rm -rf build"}))],
               "screen": "Bash command\n  rm -rf build\nDo you want to proceed?\n❯ 1. Yes\n  2. No"}),
        json!({"lines": [result("b1"), said("m5", "Removed the flag and the build directory.", "end_turn")]}),
        json!({"lines": [user("again"), said("m6", "API Error: 529 {\"type\":\"overloaded_error\"}", "stop_sequence")]}),
    ];
    let s = Scripted::new(&steps);
    s.env.add(&["Remove the flag", "--project", "demo"]);
    let _fleet = s.up();
    s.step(0);
    let l = s.state("asking", Some("Should I also remove the old flag?"));
    assert_eq!(l["needs_you"], true, "{l}");
    // At the top of what needs the operator (#38): the question and how to answer it.
    let needs = s.env.run(&["fleet", "status", "--json"]).json()["needs"].clone();
    assert_eq!(needs[0]["kind"], "asking", "{needs}");
    assert_eq!(needs[0]["lane"], "a", "{needs}");
    assert_eq!(
        needs[0]["what"], "Should I also remove the old flag?",
        "{needs}"
    );
    assert!(
        needs[0]["resolve"]
            .as_str()
            .unwrap()
            .starts_with("spice steer lane:a "),
        "{needs}"
    );
    let n = s.notification(1);
    assert_eq!(
        (n["kind"].as_str(), n["lane"].as_str()),
        (Some("asking"), Some("a")),
        "{n}"
    );
    assert_eq!(
        n["detail"], "needs you: Should I also remove the old flag?",
        "{n}"
    );
    assert!(n["task"].as_str().unwrap().starts_with("demo-"), "{n}");

    s.step(1);
    s.state(
        "subagent",
        Some("Task {\"description\":\"find the callers\",\"prompt\":\"find them\"}"),
    );
    assert_eq!(s.notification(2)["kind"], "subagent");

    s.step(2);
    let l = s.state(
        "asking",
        Some("AskUserQuestion {\"questions\":[{\"question\":\"Keep the alias?\"}]}"),
    );
    assert_eq!(l["needs_you"], true);
    assert_eq!(s.notification(3)["kind"], "asking");

    s.step(3);
    s.state(
        "asking",
        Some("permission prompt (Do you want to proceed?) for Bash: rm -rf build"),
    );
    let n = s.notification(4);
    assert!(
        n["detail"].as_str().unwrap().contains("permission prompt"),
        "{n}"
    );

    s.step(4);
    let l = s.state("waiting", None);
    assert_eq!(
        l["needs_you"], false,
        "done with its turn is not asking: {l}"
    );
    assert_eq!(s.notification(5)["kind"], "waiting");

    s.step(5);
    s.state(
        "errored",
        Some("API Error: 529 {\"type\":\"overloaded_error\"}"),
    );
    assert_eq!(s.notification(6)["kind"], "error");
    // Once per change: nothing more while the lane stays as it is.
    std::thread::sleep(std::time::Duration::from_millis(1500));
    assert_eq!(s.notifications(), 6);
    let log = std::fs::read_to_string(s.env.home.join("logs/fleet.log")).unwrap();
    let asking = log
        .lines()
        .filter(|l| l.contains("\"event\":\"asking\""))
        .count();
    assert_eq!(asking, 3, "{log}");
}

#[test]
fn a_bad_notify_section_stops_the_fleet_with_its_place() {
    let env = TestEnv::with_lanes(&[("a", "profile = \"demo\"\n")]);
    std::fs::write(
        env.repo.join("spice.toml"),
        "[notify]\ncommand = [\"notify-send\"]\non = [\"asking\", \"lunch\"]\n",
    )
    .unwrap();
    git(&env.repo, &["add", "spice.toml"]);
    git(&env.repo, &["commit", "-q", "-m", "notify"]);
    let run = env.run(&["fleet", "up", "--until-idle"]);
    assert_ne!(run.code, 0);
    assert!(
        run.stderr
            .contains("spice.toml (at main):3:17: notify.on: unknown event 'lunch'"),
        "{}",
        run.stderr
    );
    let check = env.run(&["fleet", "check", "--json"]);
    assert_eq!(check.code, 2, "{}", check.stderr);
    let doc: Value = serde_json::from_str(&check.stdout).unwrap();
    assert!(doc["repository_errors"][0]
        .as_str()
        .unwrap()
        .contains("notify.on"));
}

/// An assistant reply ending its turn, with the usage Claude Code records on it.
fn said_metered(id: &str, text: &str, input: u64, output: u64) -> Value {
    let mut v = said(id, text, "end_turn");
    v["message"]["usage"] = json!({"input_tokens": input, "output_tokens": output});
    v
}

/// The keys of the steering items typed into the lane's agent so far.
fn typed_keys(env: &TestEnv, task: &str) -> Vec<String> {
    env.ledger_of(task, "delivered")
        .iter()
        .flat_map(|e| e["detail"]["keys"].as_array().cloned().unwrap_or_default())
        .filter_map(|k| k.as_str().map(String::from))
        .collect()
}

/// A lane running its agent under a PTY crosses its token budget: it pauses once the
/// turn has ended (held, `budget: …`), the agent left running (same process, no new
/// launch) and nothing typed into it; `spice budget raise` resumes it, and the
/// steering that waited is typed in then.
#[test]
fn a_pty_lane_pauses_at_its_budget_with_its_agent_alive_and_a_raise_resumes_it() {
    let steps = [
        json!({"lines": [user("start"), said_metered("m1", "Read the code.", 100, 500)]}),
        json!({"lines": [user("carry on"), said_metered("m2", "Changed the code.", 100, 500)]}),
    ];
    let s = Scripted::with_lane(&steps, "budget_tokens = 1000\n");
    let task = s.env.add(&["Metered work", "--project", "demo"]);
    let _fleet = s.up();
    s.step(0);
    // 600 of 1000: done with its turn, within budget.
    let l = s.state("waiting", None);
    let pid = l["pid"].clone();
    assert!(pid.is_u64(), "{l}");
    wait_for("the first turn's tokens", 20, || {
        (s.env.lane("a")["budget"]["lane"]["used"] == 600).then_some(())
    });
    s.step(1);
    let l = wait_for("the lane to pause at its budget", 20, || {
        let l = s.env.lane("a");
        (l["state"] == "held").then_some(l)
    });
    assert_eq!(
        l["hold"]["reason"], "budget: lane used 1200 of 1000 tokens",
        "{l}"
    );
    assert!(l["hold"]["until"].is_null(), "{l}");
    assert_eq!(l["pid"], pid, "the agent is left running: {l}");
    let key = s
        .env
        .run(&["steer", "lane:a", "one more thing"])
        .ok()
        .trim()
        .to_string();
    common::stays("the paused agent left alone", 3, || {
        let l = s.env.lane("a");
        if l["state"] != "held" || l["pid"] != pid {
            return Err(format!("{l}"));
        }
        if typed_keys(&s.env, &task).contains(&key) {
            return Err(format!("{key} was typed into the paused agent"));
        }
        Ok(())
    });
    s.env.run(&["fleet", "lift", "a"]).fails(
        3,
        "go on with `spice budget raise a +N`, or end it with `spice budget stop a`",
    );
    let raised = s.env.run(&["budget", "raise", "a", "+2000"]);
    assert!(raised.ok().contains("3000 tokens"), "{}", raised.stdout);
    wait_for("the waiting steering typed in after the raise", 20, || {
        typed_keys(&s.env, &task).contains(&key).then_some(())
    });
    let l = s.env.lane("a");
    assert_ne!(l["state"], "held", "{l}");
    assert!(l["hold"].is_null(), "{l}");
    assert_eq!(l["pid"], pid, "the same agent goes on: {l}");
    assert_eq!(s.env.ledger_of(&task, "launched").len(), 1);
    let steps: Vec<Value> = s
        .env
        .ledger_of(&task, "budget")
        .iter()
        .map(|e| e["detail"]["step"].clone())
        .collect();
    assert_eq!(steps, [json!("paused"), json!("resumed")]);
}
