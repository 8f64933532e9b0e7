//! `spice usage` and token budgets through the real binary: transcripts this test
//! writes, the public samples against an independent count (`tests/usage_count.py`),
//! price tables, and a scripted agent whose lane pauses at its budget, resumes when
//! it is raised, and stops when the operator says so.

use crate::common;
use common::{git, stays, wait_for, TestEnv};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

/// A Claude Code assistant line this test writes (one content block of message `id`).
fn assistant(session: &str, id: &str, at: &str, input: u64, output: u64, extra: Value) -> String {
    let mut v = json!({
        "type": "assistant", "sessionId": session, "requestId": format!("req-{id}"),
        "timestamp": at, "uuid": format!("{id}-{output}"),
        "message": {"id": id, "model": "claude-test", "role": "assistant",
            "content": [{"type": "text", "text": "working"}],
            "usage": {"input_tokens": input, "output_tokens": output,
                      "cache_read_input_tokens": 1000, "cache_creation_input_tokens": 10}},
    });
    if let (Some(o), Some(e)) = (v.as_object_mut(), extra.as_object()) {
        o.extend(e.clone());
    }
    v.to_string()
}

fn write(path: &Path, lines: &[String]) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, lines.join("\n") + "\n").unwrap();
}

/// Two sessions on two days: one message written on three lines (provisional figures
/// first), a sub-agent file, and a file that is not a transcript.
fn sample_dir(env: &TestEnv) -> PathBuf {
    let dir = env.dir.path().join("transcripts");
    let day1 = "2026-11-01T10:00:00.000Z";
    write(
        &dir.join("s1.jsonl"),
        &[
            assistant("s1", "m1", day1, 5, 3, json!({})),
            assistant("s1", "m1", day1, 5, 3, json!({})),
            assistant("s1", "m1", day1, 5, 170, json!({})),
            assistant("s1", "m2", day1, 7, 30, json!({})),
        ],
    );
    // The sub-agent's own file: its calls count once, under the parent's session.
    write(
        &dir.join("s1/subagents/agent-a1.jsonl"),
        &[assistant(
            "s1",
            "m3",
            day1,
            2,
            20,
            json!({"isSidechain": true, "agentId": "a1"}),
        )],
    );
    write(
        &dir.join("s2.jsonl"),
        &[assistant(
            "s2",
            "m4",
            "2026-11-03T09:00:00.000Z",
            1,
            1,
            json!({}),
        )],
    );
    std::fs::write(dir.join("notes.jsonl"), "{\"hello\": 1}\n").unwrap();
    dir
}

#[test]
fn usage_of_files_groups_by_session_and_day_without_a_store() {
    let env = TestEnv::new();
    let dir = sample_dir(&env);
    let r = env.run(&["usage", "--json", dir.to_str().unwrap()]).json();
    let s1 = &r["groups"][0];
    assert_eq!(s1["key"], "s1", "{r}");
    // m1 once with its last figures, m2, the sub-agent's m3.
    assert_eq!(s1["tokens"]["input"], 5 + 7 + 2, "{r}");
    assert_eq!(s1["tokens"]["output"], 170 + 30 + 20, "{r}");
    assert_eq!(s1["tokens"]["cache_read"], 3000, "{r}");
    assert_eq!(r["groups"][1]["key"], "s2");
    assert_eq!(
        r["total"]["total"],
        14 + 220 + 3000 + 30 + 1 + 1 + 1010,
        "{r}"
    );
    assert_eq!(r["files"], 3, "{r}");
    assert_eq!(r["skipped"].as_array().unwrap().len(), 1, "{r}");
    assert!(!env.home.exists(), "no store was opened or made");

    let days = env
        .run(&["usage", "--by", "day", "--json", dir.to_str().unwrap()])
        .json();
    let keys: Vec<&str> = days["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["key"].as_str().unwrap())
        .collect();
    assert_eq!(keys, ["2026-11-01", "2026-11-03"]);

    let since = env
        .run(&[
            "usage",
            "--since",
            "2026-11-02",
            "--json",
            dir.to_str().unwrap(),
        ])
        .json();
    assert_eq!(since["total"]["total"], 1 + 1 + 1010, "{since}");

    let table = env.run(&["usage", dir.to_str().unwrap()]);
    let out = table.ok();
    assert!(out.starts_with("SESSION"), "{out}");
    assert!(out.lines().any(|l| l.starts_with("total")), "{out}");
}

#[test]
fn money_comes_only_from_the_operators_price_table_and_bad_tables_are_located() {
    let env = TestEnv::new();
    let dir = sample_dir(&env);
    let prices = env.dir.path().join("prices.toml");
    std::fs::write(
        &prices,
        "currency = \"USD\"\n[model.\"claude-*\"]\ninput = 1000000.0\noutput = 0.0\n",
    )
    .unwrap();
    let r = env
        .run(&[
            "usage",
            "--json",
            "--prices",
            prices.to_str().unwrap(),
            dir.to_str().unwrap(),
        ])
        .json();
    // A million per million tokens: the cost is the input count.
    assert_eq!(r["cost"], 15.0, "{r}");
    assert_eq!(r["currency"], "USD");
    let plain = env.run(&["usage", "--json", dir.to_str().unwrap()]).json();
    assert!(plain.get("cost").is_none(), "{plain}");

    std::fs::write(&prices, "[model.x]\ninput = 1.0\noutput = -1.0\n").unwrap();
    let p = prices.to_str().unwrap();
    env.run(&["usage", "--prices", p, dir.to_str().unwrap()])
        .fails(2, &format!("{p}:3:10: field 'output'"));
    std::fs::write(&prices, "[model.x]\ninput = 1.0\noutput = 1.0\nextra = 2\n").unwrap();
    env.run(&["usage", "--prices", p, dir.to_str().unwrap()])
        .fails(2, &format!("{p}:4:1"));
}

#[test]
fn bad_usage_arguments_are_one_line_errors() {
    let env = TestEnv::new();
    let dir = sample_dir(&env);
    let d = dir.to_str().unwrap();
    env.run(&["usage", "--by", "lane", d])
        .fails(2, "--by lane needs the store");
    env.run(&["usage", "--since", "yesterdayish", d])
        .fails(2, "--since 'yesterdayish'");
    env.run(&["usage", "/no/such/place"])
        .fails(2, "/no/such/place");
}

#[test]
#[ignore = "needs the real transcripts: SPICE_TRANSCRIPTS (set by .ci/run)"]
fn usage_of_the_public_transcripts_matches_an_independent_count() {
    let root = std::env::var_os("SPICE_TRANSCRIPTS").map(PathBuf::from).expect(
        "SPICE_TRANSCRIPTS must name the public transcripts (.ci/run sets it to ../shared/fixtures/transcripts)",
    );
    // The agents' own transcripts (spice-reference holds spice's output, not theirs).
    let dirs: Vec<PathBuf> = ["claude", "codex", "current"]
        .iter()
        .map(|d| root.join(d))
        .collect();
    for d in &dirs {
        assert!(d.is_dir(), "{} is missing", d.display());
    }
    let env = TestEnv::new();
    let mut args = vec!["usage".to_string(), "--json".to_string()];
    args.extend(dirs.iter().map(|d| d.display().to_string()));
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let spice = env.run(&refs).json();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/usage_count.py");
    let out = std::process::Command::new("python3")
        .arg(&script)
        .args(&dirs)
        .output()
        .expect("python3 runs (the independent count needs it)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let theirs: Value = serde_json::from_slice(&out.stdout).unwrap();
    for k in ["input", "output", "cache_read", "cache_creation"] {
        assert_eq!(spice["total"][k], theirs["total"][k], "total {k}");
    }
    assert!(
        spice["total"]["total"].as_u64().unwrap() > 1_000_000,
        "the samples hold real usage: {}",
        spice["total"]
    );
    let sessions = theirs["sessions"].as_object().unwrap();
    let groups = spice["groups"].as_array().unwrap();
    assert_eq!(groups.len(), sessions.len(), "{spice}\n{theirs}");
    for g in groups {
        let key = g["key"].as_str().unwrap();
        let t = &sessions[key];
        for k in ["input", "output", "cache_read", "cache_creation"] {
            assert_eq!(g["tokens"][k], t[k], "session {key} {k}");
        }
    }
}

/// A scripted headless agent (one turn per process) writing a Claude Code-format
/// transcript with usage: 600 tokens a turn (100 in, 500 out), one message a turn.
const AGENT: &str = r#"#!/usr/bin/env bash
# usage: metered-agent.sh SESSION_ID FIXTURES BRIEF_FILE
set -u
id=$1
. "$2/claude-transcript.sh"
rec user '{"role":"user","content":"(the brief)"}'
rec assistant "{\"id\":\"msg_${id}_$n\",\"role\":\"assistant\",\"model\":\"fake\",\"content\":[{\"type\":\"text\",\"text\":\"Working.\"}],\"stop_reason\":\"end_turn\",\"usage\":{\"input_tokens\":100,\"output_tokens\":500}}"
"#;

/// A scripted headless agent whose one turn runs a sub-agent the way Claude Code 2.x
/// records it: the parent's two calls (600 tokens), the sub-agent's call (500) in
/// `<session>/subagents/agent-sub1.jsonl`, and the parent's progress record echoing
/// that call (which counts nothing).
const AGENT_WITH_SUBAGENT: &str = r#"#!/usr/bin/env bash
set -u
id=$1
. "$2/claude-transcript.sh"
sub=$dir/$id/subagents/agent-sub1.jsonl
mkdir -p "${sub%/*}"
at=$(date -u +%Y-%m-%dT%H:%M:%S.%3NZ)
rec user '{"role":"user","content":"(the brief)"}'
rec assistant "{\"id\":\"msg_${id}_task\",\"role\":\"assistant\",\"model\":\"fake\",\"content\":[{\"type\":\"tool_use\",\"id\":\"toolu_1\",\"name\":\"Task\",\"input\":{\"description\":\"look\",\"prompt\":\"look\"}}],\"stop_reason\":\"tool_use\",\"usage\":{\"input_tokens\":100,\"output_tokens\":200}}"
m='{"id":"msg_sub_1","role":"assistant","model":"fake","content":[{"type":"text","text":"Found it."}],"stop_reason":"end_turn","usage":{"input_tokens":200,"output_tokens":300}}'
printf '{"type":"user","isSidechain":true,"agentId":"sub1","uuid":"sub-0","sessionId":"%s","cwd":"%s","timestamp":"%s","message":{"role":"user","content":"look"}}\n' "$id" "$PWD" "$at" >> "$sub"
printf '{"type":"assistant","isSidechain":true,"agentId":"sub1","uuid":"sub-1","sessionId":"%s","cwd":"%s","timestamp":"%s","requestId":"req_sub_1","message":%s}\n' "$id" "$PWD" "$at" "$m" >> "$sub"
printf '{"type":"progress","uuid":"p-1","sessionId":"%s","cwd":"%s","timestamp":"%s","parentToolUseID":"toolu_1","data":{"type":"agent_progress","agentId":"sub1","message":{"type":"assistant","message":%s}}}\n' "$id" "$PWD" "$at" "$m" >> "$f"
n=$((n + 1))
rec user '{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"Found it."}]}'
rec assistant "{\"id\":\"msg_${id}_end\",\"role\":\"assistant\",\"model\":\"fake\",\"content\":[{\"type\":\"text\",\"text\":\"Done.\"}],\"stop_reason\":\"end_turn\",\"usage\":{\"input_tokens\":100,\"output_tokens\":200}}"
"#;

fn metered_env(budget: u64) -> TestEnv {
    metered_env_running(budget, AGENT)
}

/// Lane `a` with `budget_tokens = budget`, running `script` headless (one turn a
/// process) with a Claude Code-format transcript.
fn metered_env_running(budget: u64, agent: &str) -> TestEnv {
    let env = TestEnv::with_lanes(&[("a", "profile = \"demo\"\n")]);
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/agents");
    let script = env.dir.path().join("metered-agent.sh");
    std::fs::write(&script, agent).unwrap();
    std::fs::create_dir_all(env.repo.join("profiles")).unwrap();
    let argv = format!(
        "[\"bash\", \"{s}\", \"{{session_id}}\", \"{f}\", \"{{brief_file}}\"]",
        s = script.display(),
        f = fixtures.display()
    );
    std::fs::write(
        env.repo.join("profiles/metered.toml"),
        format!(
            "command = {argv}\nresume = {argv}\nmode = \"headless\"\n[transcript]\nformat = \"claude\"\n\
             dir = \"{{home}}/.claude/projects/{{cwd_slug}}\"\nglob = \"{{session_id}}.jsonl\"\n"
        ),
    )
    .unwrap();
    std::fs::write(
        env.repo.join("lanes/a.toml"),
        format!("profile = \"metered\"\nphases = [\"todo\"]\nbudget_tokens = {budget}\n"),
    )
    .unwrap();
    git(&env.repo, &["add", "lanes", "profiles"]);
    git(&env.repo, &["commit", "-q", "-m", "metered lane"]);
    env
}

fn launches(env: &TestEnv, task: &str) -> usize {
    env.ledger_of(task, "launched").len()
}

fn budget_steps(env: &TestEnv, task: &str) -> Vec<String> {
    env.ledger_of(task, "budget")
        .iter()
        .map(|e| e["detail"]["step"].as_str().unwrap_or("").to_string())
        .collect()
}

/// The regression for budgets: crossing one pauses the lane after the turn (held,
/// reason "budget", the steering waiting), a raise resumes it, a stop ends it with
/// the claim kept.
#[test]
fn a_lane_pauses_at_its_budget_resumes_when_raised_and_stops_when_told() {
    let env = metered_env(1000);
    let task = env.add(&["Metered work", "--project", "demo"]);
    let mut sup = env.fleet_up(&[]);
    wait_for("the first turn", 60, || {
        (env.ledger_of(&task, "exited").len() == 1).then_some(())
    });
    // 600 of 1000: within budget, so steering starts the next turn.
    wait_for("the first turn's tokens counted", 30, || {
        let l = env.lane("a");
        (l["budget"]["lane"]["used"] == 600).then_some(())
    });
    let u = env.run(&["usage", "--by", "lane", "--json"]).json();
    assert_eq!(u["total"]["total"], 600, "{u}");
    assert_eq!(env.lane("a")["budget"]["lane"]["limit"], 1000);
    env.run(&["steer", "lane:a", "carry on"]).ok();
    wait_for("the second turn to end past the budget", 60, || {
        let l = env.lane("a");
        let reason = l["hold"]["reason"].as_str().unwrap_or("").to_string();
        reason.starts_with("budget:").then_some(())
    });
    let l = env.lane("a");
    assert_eq!(l["state"], "held", "{l}");
    assert_eq!(
        l["hold"]["reason"], "budget: lane used 1200 of 1000 tokens",
        "{l}"
    );
    assert!(
        l["hold"]["until"].is_null(),
        "a budget pause has no end time: {l}"
    );
    assert_eq!(l["budget"]["lane"]["used"], 1200, "{l}");
    assert_eq!(budget_steps(&env, &task), ["paused"]);
    // The pause needs the operator (#38): used against the limit, and what ends it.
    let needs = env.run(&["fleet", "status", "--json"]).json()["needs"].clone();
    let paused = needs
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["kind"] == "budget")
        .unwrap_or_else(|| panic!("no budget entry in {needs}"));
    assert_eq!(
        (paused["used"].as_u64(), paused["limit"].as_u64()),
        (Some(1200), Some(1000))
    );
    assert_eq!(
        paused["resolve"], "spice budget raise a +N, or spice budget stop a",
        "{paused}"
    );
    // Not a crash-loop hold: `fleet lift` refuses (a lifted row would stay over its
    // budget, paused) and names what ends the pause.
    env.run(&["fleet", "lift", "a"]).fails(
        3,
        "go on with `spice budget raise a +N`, or end it with `spice budget stop a`",
    );
    assert_eq!(env.lane("a")["hold"]["reason"], l["hold"]["reason"]);
    // Paused: new steering waits, no turn starts.
    env.run(&["steer", "lane:a", "one more thing"]).ok();
    stays("the paused lane starting no turn", 3, || {
        match launches(&env, &task) {
            2 => Ok(()),
            n => Err(format!("{n} launches")),
        }
    });
    let raised = env.run(&["budget", "raise", "a", "+2000"]);
    assert!(raised.ok().contains("3000 tokens"), "{}", raised.stdout);
    wait_for("the raised lane to run the waiting steering", 60, || {
        (launches(&env, &task) == 3 && env.ledger_of(&task, "exited").len() == 3).then_some(())
    });
    assert_eq!(budget_steps(&env, &task), ["paused", "resumed"]);
    // Stopped: the session ends as on `fleet down`, the claim kept.
    env.run(&["budget", "stop", "a"]).ok();
    let out = wait_for("the lane to stop", 60, || sup.try_wait().unwrap());
    assert!(out.success());
    assert_eq!(budget_steps(&env, &task), ["paused", "resumed", "stopped"]);
    let shown = env.run(&["task", "show", &task, "--json"]).json();
    assert!(
        shown["claim"].is_object(),
        "the claim is kept for a successor: {shown}"
    );
    let by_lane = env.run(&["usage", "--by", "lane", "--json"]).json();
    assert_eq!(by_lane["groups"][0]["key"], "a", "{by_lane}");
    assert_eq!(by_lane["groups"][0]["tokens"]["total"], 1800, "{by_lane}");
    let by_task = env.run(&["usage", "--by", "task", "--json"]).json();
    assert_eq!(by_task["groups"][0]["key"], task.as_str(), "{by_task}");
    let by_phase = env.run(&["usage", "--by", "phase", "--json"]).json();
    assert_eq!(by_phase["groups"][0]["key"], "todo", "{by_phase}");
}

/// Regression: the live totals a lane keeps for its budgets counted the session's
/// transcript only, not the files Claude Code 2.x writes its sub-agents' calls to, so
/// a lane whose sub-agents spent past the budget went on. Counted once: the parent's
/// progress record echoing the sub-agent's call adds nothing.
#[test]
fn a_sub_agents_tokens_count_toward_the_budget_once() {
    let env = metered_env_running(1000, AGENT_WITH_SUBAGENT);
    let task = env.add(&["Delegating work", "--project", "demo"]);
    let mut sup = env.fleet_up(&[]);
    // 600 of the parent's and 500 of its sub-agent's: past the budget after one turn.
    let l = wait_for("the turn to end past the budget", 60, || {
        let l = env.lane("a");
        let reason = l["hold"]["reason"].as_str().unwrap_or("").to_string();
        reason.starts_with("budget:").then_some(l)
    });
    assert_eq!(
        l["hold"]["reason"], "budget: lane used 1100 of 1000 tokens",
        "{l}"
    );
    assert_eq!(l["budget"]["lane"]["used"], 1100, "{l}");
    assert_eq!(budget_steps(&env, &task), ["paused"]);
    let by_lane = env.run(&["usage", "--by", "lane", "--json"]).json();
    assert_eq!(by_lane["groups"][0]["key"], "a", "{by_lane}");
    assert_eq!(by_lane["groups"][0]["tokens"]["total"], 1100, "{by_lane}");
    let by_task = env.run(&["usage", "--by", "task", "--json"]).json();
    assert_eq!(by_task["groups"][0]["tokens"]["total"], 1100, "{by_task}");
    env.run(&["budget", "stop", "a"]).ok();
    let out = wait_for("the lane to stop", 60, || sup.try_wait().unwrap());
    assert!(out.success());
}

#[test]
fn budget_commands_name_what_is_wrong() {
    let env = metered_env(1000);
    env.run(&["budget", "raise", "a", "lots"])
        .fails(2, "'lots': expected a number of tokens");
    env.run(&["budget", "raise", "nope", "--task", "5"])
        .fails(2, "nope");
    env.run(&["budget", "raise", "a", "5000"]).ok();
    env.run(&["budget", "raise", "a", "4000"])
        .fails(2, "cannot lower it to 4000");
    let shown = env.run(&["budget", "show", "--json"]).json();
    assert_eq!(shown[0]["name"], "a", "{shown}");
    assert_eq!(shown[0]["limit"], 5000, "{shown}");
}

/// Regression (issue 40): `spice budget show` listed only the budgets the operator
/// had raised, leaving out those a lane file's `budget_tokens` sets, and showed a
/// lane stopped at its budget as "no limit" with nothing said of the stop. It lists
/// each lane's budget in force, and a stop as asked, then as done.
#[test]
fn regression_budget_show_lists_lane_file_budgets_and_stopped_lanes() {
    let env = metered_env_running(1000, AGENT_WITH_SUBAGENT);
    let show = |env: &TestEnv| env.run(&["budget", "show"]).ok().to_string();
    let row = |used: u64, stop: bool, state: Value| {
        json!([{ "kind": "lane", "name": "a", "limit": 1000, "used": used, "stop": stop,
                 "state": state }])
    };
    assert_eq!(
        env.run(&["budget", "show", "--json"]).json(),
        row(0, false, Value::Null)
    );
    assert_eq!(show(&env), "lane a: 0 of 1000 tokens\n");
    env.add(&["Delegating work", "--project", "demo"]);
    let mut sup = env.fleet_up(&[]);
    wait_for("the turn to end past the budget", 60, || {
        let l = env.lane("a");
        let reason = l["hold"]["reason"].as_str().unwrap_or("").to_string();
        reason.starts_with("budget:").then_some(())
    });
    assert_eq!(show(&env), "lane a: 1100 of 1000 tokens\n");
    env.run(&["budget", "stop", "a"]).ok();
    let out = wait_for("the lane to stop", 60, || sup.try_wait().unwrap());
    assert!(out.success());
    assert_eq!(
        show(&env),
        "lane a: 1100 of 1000 tokens (stopped at its budget; claim kept)\n"
    );
    assert_eq!(
        env.run(&["budget", "show", "--json"]).json(),
        row(1100, false, json!("stopped"))
    );
    // A stop asked for while no supervisor runs the lane waits for one.
    env.run(&["budget", "stop", "a"]).ok();
    assert_eq!(show(&env), "lane a: 1100 of 1000 tokens (stop asked)\n");
    assert_eq!(
        env.run(&["budget", "show", "--json"]).json(),
        row(1100, true, json!("stop_asked"))
    );
}
