//! The console answers its operator only (issue #39). Regression: on loopback the
//! console asks for no token, so a lane's agent could reach it like the operator's
//! browser and steer other lanes, take over claims, lift holds or raise budgets.
//!
//! A scripted agent (in an unconfined lane: the shim's descent is what counts, not
//! the sandbox) reads and writes the console from its own process and from a process
//! it detached with `setsid` and a double fork; each is answered 403 before its
//! request is read, and nothing is steered. The same requests from the test (the
//! operator) are answered. (Regression too: an unconfined lane's `TMPDIR` was never
//! created, so its agent's temporary files failed.)

use crate::common;
use crate::sandbox::scripted_profile;

use common::console::Server;
use common::{git, TestEnv};

/// `ask METHOD PATH BODY` speaks HTTP/1.1 over bash's `/dev/tcp`, as any program an
/// agent runs could.
const AGENT: &str = r##"#!/bin/bash
ask() {
  exec 3<>"/dev/tcp/127.0.0.1/$CONSOLE_PORT" || { echo "no connection"; return; }
  printf '%s %s HTTP/1.1\r\nHost: 127.0.0.1:%s\r\nContent-Type: application/json\r\nX-Spice: 1\r\nContent-Length: %s\r\nConnection: close\r\n\r\n%s' \
    "$1" "$2" "$CONSOLE_PORT" "${#3}" "$3" >&3
  cat <&3
  exec 3<&-
}
export -f ask
ask GET /api/status "" > "$TMPDIR/read.txt"
ask POST /api/steer '{"target":"lane:b","text":"steered by an agent"}' > "$TMPDIR/write.txt"
( setsid bash -c 'ask POST /api/steer "{\"target\":\"lane:b\",\"text\":\"steered by a detached agent\"}" > "$TMPDIR/detached.txt"' & )
# The detached request's answer, waited for (60 s: the test runs beside others).
for _ in $(seq 1 600); do [ -s "$TMPDIR/detached.txt" ] && break; sleep 0.1; done
set -e
echo work > work.txt
git add work.txt
git commit -q -m "the agent's work"
"$1" task phase "$SPICE_TASK" --done > "$TMPDIR/done.txt" 2>&1
"##;

#[test]
fn regression_a_lanes_agent_is_refused_by_the_console_and_the_operator_is_not() {
    let env = TestEnv::with_lanes(&[
        ("a", "profile = \"caller\"\nphases = [\"todo\"]\n"),
        ("b", "profile = \"caller\"\nprojects = [\"none\"]\n"),
    ]);
    scripted_profile(&env, "caller", AGENT);
    let srv = Server::start(&env, &[]);
    std::fs::write(
        env.repo.join("lanes/a.toml"),
        format!(
            "profile = \"caller\"\nphases = [\"todo\"]\nsandbox = \"off\"\n[env]\nCONSOLE_PORT = \"{}\"\n",
            srv.port()
        ),
    )
    .unwrap();
    git(&env.repo, &["commit", "-q", "-am", "lane env"]);
    env.add(&["Call the console", "--project", "demo"]);
    let run = common::finished(env.fleet_up(&["--until-idle", "--json"]));

    let answer =
        |f: &str| std::fs::read_to_string(env.home.join("tmp/a").join(f)).unwrap_or_default();
    for f in ["read.txt", "write.txt", "detached.txt"] {
        let a = answer(f);
        assert!(
            a.starts_with("HTTP/1.1 403") && a.contains("answers its operator only"),
            "{f}: {a}\n{}",
            run.stderr
        );
    }
    let done = answer("done.txt");
    assert!(done.contains("todo → review"), "{done}\n{}", run.stderr);
    let items = env
        .run(&["inbox", "lane:b", "--all", "--json"])
        .ok()
        .to_string();
    assert!(!items.contains("steered by"), "{items}");

    // The operator is answered.
    srv.get("/api/status").expect(200);
    let steered = srv.post(
        "/api/steer",
        &serde_json::json!({"target": "lane:b", "text": "steered by the operator"}),
    );
    assert!(steered.status / 100 == 2, "{}", steered.body);
    let items = env.run(&["inbox", "lane:b", "--json"]).ok().to_string();
    assert!(items.contains("steered by the operator"), "{items}");
}
