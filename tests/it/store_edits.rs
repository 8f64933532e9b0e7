//! The operator's commands on both backends (#18): `task list` with its filters and
//! `--json`, `modify`, `annotate`, `dep`, `phase` to a named phase, `done`, `delete`,
//! `export` / `import`, and `budget`, `bed`, `conscience`, `archive`, `usage` and
//! `store path`. Each scenario is one test body: on SQLite it runs and checks itself;
//! on PostgreSQL it runs on both backends and every output, error (with its exit
//! code) and ledger must be the same, once what differs between any two runs (ids,
//! uuids, times, sequence numbers, temporary paths) is named alike.

use crate::common;
use common::backend::{self, both, Fleet};
use serde_json::Value;

/// What a scenario printed, step by step, with what differs between runs named alike.
#[derive(Default)]
struct Record {
    /// (what a run printed, the name it takes), longest first when replaced.
    names: Vec<(String, String)>,
    /// The test's temporary directory.
    dir: String,
    lines: Vec<String>,
}

/// Keys whose values are times, sequence numbers or per-run paths.
const BLANK: &[&str] = &[
    "entry",
    "modified",
    "end",
    "at",
    "seq",
    "claimed_at",
    "renewed_at",
    "lease_until",
    "updated",
    "short",
    "path",
    "seconds",
    "key",
];

fn letters(mut n: usize) -> String {
    let mut s = String::new();
    loop {
        s.insert(0, (b'a' + (n % 26) as u8) as char);
        n /= 26;
        if n == 0 {
            return s;
        }
        n -= 1;
    }
}

impl Record {
    /// Names every task's id and uuid not named yet, oldest id first (stamps sort as
    /// time does, so both backends name their tasks in the same order).
    fn learn(&mut self, f: &Fleet) {
        let all = f.env.run(&["task", "list", "--all", "--json"]).json();
        for t in all.as_array().unwrap() {
            let id = t["id"].as_str().unwrap().to_string();
            if self.names.iter().any(|(k, _)| *k == id) {
                continue;
            }
            let n = letters(self.names.len() / 2);
            self.names.push((id, format!("<t{n}>")));
            self.names
                .push((t["uuid"].as_str().unwrap().to_string(), format!("<u{n}>")));
        }
        self.names.sort_by_key(|(k, _)| std::cmp::Reverse(k.len()));
        self.dir = f.env.dir.path().display().to_string();
    }

    fn id(&self, name: &str) -> String {
        let want = format!("<t{name}>");
        self.names
            .iter()
            .find(|(_, n)| *n == want)
            .unwrap()
            .0
            .clone()
    }

    fn named(&self, text: &str) -> String {
        let mut out = text.replace(&self.dir, "<dir>");
        for (k, n) in &self.names {
            out = out.replace(k.as_str(), n);
        }
        out
    }

    /// A successful run's output: JSON with times blanked, or text.
    fn ok(&mut self, step: &str, run: common::Run) -> String {
        let out = run.ok().to_string();
        let shown = match serde_json::from_str::<Value>(&out) {
            Ok(mut v) => {
                blank(&mut v);
                v.to_string()
            }
            Err(_) => out.clone(),
        };
        self.lines.push(format!("{step}: {}", self.named(&shown)));
        out
    }

    /// A refused run: one `spice:` line, no panic, `code`; digits (fences, leases'
    /// times) are not compared.
    fn fails(&mut self, step: &str, run: common::Run, code: i32, needle: &str) {
        let e = run.fails(code, needle);
        let e: String = self
            .named(&e)
            .chars()
            .map(|c| if c.is_ascii_digit() { '#' } else { c })
            .collect();
        self.lines.push(format!("{step}: exit {code}: {e}"));
    }

    /// Every task's ledger, in the order the tasks were named.
    fn ledgers(&mut self, f: &Fleet) {
        let ids: Vec<String> = self
            .names
            .iter()
            .filter(|(_, n)| n.starts_with("<t"))
            .map(|(k, _)| k.clone())
            .collect();
        let mut ids = ids;
        ids.sort();
        for id in ids {
            let run = f.env.run(&["task", "ledger", &id, "--json"]);
            self.ok("ledger", run);
        }
    }
}

fn blank(v: &mut Value) {
    match v {
        Value::Object(m) => {
            for (k, x) in m.iter_mut() {
                if BLANK.contains(&k.as_str()) && !x.is_null() {
                    *x = Value::from("_");
                } else {
                    blank(x);
                }
            }
        }
        Value::Array(a) => a.iter_mut().for_each(blank),
        _ => {}
    }
}

/// `$body`'s two tests (`both!`): on SQLite it checks itself; on PostgreSQL it runs
/// on SQLite again too, and the two records must be the same line by line.
macro_rules! compared {
    ($body:ident, $test:ident) => {
        both!($test);
        fn $test(f: &Fleet) {
            let lines = $body(f);
            if f.db.is_some() {
                same(&lines, &$body(&backend::sqlite()));
            }
        }
    };
}

fn same(pg: &[String], sqlite: &[String]) {
    for (i, (p, s)) in pg.iter().zip(sqlite).enumerate() {
        assert_eq!(p, s, "step {i} differs (left: PostgreSQL, right: SQLite)");
    }
    assert_eq!(pg.len(), sqlite.len());
}

compared!(task_edits, task_edits_on);
compared!(import_and_export, import_and_export_on);
compared!(
    budgets_beds_and_the_conscience,
    budgets_beds_and_the_conscience_on
);
compared!(flows, flows_on);

/// Phase flows: a project's own and the default, a new task's first phase, completing
/// through a custom flow, a modify and an import into a flow's phases, and every
/// refusal, line by line the same on both backends.
fn flows(f: &Fleet) -> Vec<String> {
    let e = &f.env;
    let mut r = Record::default();
    r.ok("flow", e.run(&["task", "flow", "--json"]));
    r.ok(
        "flow",
        e.run(&["task", "flow", "--project", "web", "plan", "todo", "verify"]),
    );
    r.ok(
        "flow",
        e.run(&["task", "flow", "--project", "web", "--json"]),
    );
    r.ok("flow", e.run(&["task", "flow", "--project", "ops"]));
    e.add(&["page", "--project", "web"]);
    e.add(&["plain"]);
    r.learn(f);
    let (a, b) = (r.id("a"), r.id("b"));
    r.ok("show", e.run(&["task", "show", &a, "--json"]));
    for _ in 0..3 {
        r.ok("done", e.run(&["task", "phase", &a, "--done", "--json"]));
    }
    r.fails(
        "done",
        e.run(&["task", "phase", &a, "--done"]),
        3,
        "not open",
    );
    // The default flow for every project without its own.
    r.ok(
        "flow",
        e.run(&["task", "flow", "triage,todo,review", "--json"]),
    );
    e.add(&["fresh"]);
    e.add(&["other", "--project", "web"]);
    r.learn(f);
    let (c, d) = (r.id("c"), r.id("d"));
    r.ok("show", e.run(&["task", "show", &c, "--json"]));
    r.ok("phase", e.run(&["task", "phase", &b, "triage"]));
    r.fails(
        "phase",
        e.run(&["task", "phase", &d, "triage"]),
        2,
        "not in the flow",
    );
    // A task moves to another project only if its phase is in that one's flow.
    r.fails(
        "modify",
        e.run(&["task", "modify", &d, "--project", "ops"]),
        2,
        "flow",
    );
    r.fails(
        "modify",
        e.run(&["task", "modify", &c, "--project", "web"]),
        2,
        "flow",
    );
    r.ok("phase", e.run(&["task", "phase", &c, "todo"]));
    r.ok(
        "modify",
        e.run(&["task", "modify", &c, "--project", "web", "--json"]),
    );
    // Refusals: a flow that strands open tasks, and malformed flows.
    r.fails(
        "flow",
        e.run(&["task", "flow", "--project", "web", "plan", "verify"]),
        2,
        "drops phase 'todo'",
    );
    r.fails(
        "flow",
        e.run(&["task", "flow", "todo,review"]),
        2,
        "drops phase 'triage'",
    );
    r.fails(
        "flow",
        e.run(&["task", "flow", "a", "b", "a"]),
        2,
        "appears twice",
    );
    r.fails(
        "flow",
        e.run(&["task", "flow", "--project", "no good", "a"]),
        2,
        "project",
    );
    r.fails("flow", e.run(&["task", "flow", "bad phase"]), 2, "phase");
    r.ok("flow", e.run(&["task", "flow", "--json"]));
    r.ok("list", e.run(&["task", "list", "--all", "--json"]));
    r.ledgers(f);
    r.lines
}

fn task_edits(f: &Fleet) -> Vec<String> {
    let e = &f.env;
    let mut r = Record::default();
    e.add(&[
        "alpha",
        "--project",
        "web",
        "--priority",
        "H",
        "--tag",
        "ui",
    ]);
    e.add(&["beta", "--project", "web", "--tag", "api"]);
    e.add(&["gamma"]);
    e.add(&["delta", "--project", "ops", "--due", "2030-01-01"]);
    r.learn(f);
    let (a, b, c, d) = (r.id("a"), r.id("b"), r.id("c"), r.id("d"));

    r.ok(
        "modify",
        e.run(&[
            "task",
            "modify",
            &a,
            "--title",
            "alpha two",
            "--priority",
            "none",
            "--tag",
            "x",
            "--untag",
            "ui",
            "--json",
        ]),
    );
    r.ok(
        "modify",
        e.run(&[
            "task",
            "modify",
            &b,
            "--project",
            "none",
            "--due",
            "2031-02-03",
            "--budget-tokens",
            "5000",
        ]),
    );
    r.fails(
        "modify",
        e.run(&["task", "modify", &c, "--title", "  "]),
        2,
        "non-empty title",
    );
    r.fails(
        "modify",
        e.run(&["task", "modify", &c, "--project", "no good"]),
        2,
        "project",
    );
    r.fails(
        "modify",
        e.run(&["task", "modify", &c, "--tag", "a b"]),
        2,
        "tag",
    );
    r.fails(
        "modify",
        e.run(&["task", "modify", "zzzzzzzz", "--title", "x"]),
        2,
        "zzzzzzzz",
    );

    r.ok(
        "annotate",
        e.run(&["task", "annotate", &c, "first", "note"]),
    );
    r.ok("annotate", e.run(&["task", "annotate", &c, "second"]));
    r.fails(
        "annotate",
        e.run(&["task", "annotate", &c]),
        2,
        "needs some text",
    );
    let show = r.ok("show", e.run(&["task", "show", &c, "--json"]));
    let notes: Vec<String> = serde_json::from_str::<Value>(&show).unwrap()["annotations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["description"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(notes, ["first note", "second"]);

    r.ok("dep", e.run(&["task", "dep", &b, "--on", &a]));
    r.ok("dep", e.run(&["task", "dep", &c, "--on", &b]));
    r.fails(
        "dep",
        e.run(&["task", "dep", &a, "--on", &c]),
        2,
        "dependency cycle",
    );
    r.fails(
        "dep",
        e.run(&["task", "dep", &a, "--on", &a]),
        2,
        "dependency cycle",
    );
    r.fails(
        "dep",
        e.run(&["task", "dep", &b, "--remove", &c]),
        2,
        "does not depend on",
    );
    r.ok("dep", e.run(&["task", "dep", &c, "--remove", &b]));

    r.ok("phase", e.run(&["task", "phase", &d, "review"]));
    r.fails(
        "phase",
        e.run(&["task", "phase", &d, "nonsense"]),
        2,
        "is not in the flow of",
    );
    r.fails(
        "phase",
        e.run(&["task", "phase", &c, "review", "--claimant", "alice"]),
        3,
        "not claimed",
    );

    r.ok(
        "claim",
        e.run(&["task", "claim", &a, "--claimant", "alice", "--json"]),
    );
    r.fails(
        "done",
        e.run(&["task", "done", &a]),
        3,
        "pass --claimant alice",
    );
    r.fails(
        "done",
        e.run(&["task", "done", &a, "--claimant", "bob"]),
        3,
        "held by alice",
    );
    r.fails(
        "done",
        e.run(&["task", "done", &a, "--claimant", "alice", "--fence", "999"]),
        3,
        "that holding ended",
    );
    r.fails(
        "delete",
        e.run(&["task", "delete", &a, "--claimant", "bob"]),
        3,
        "held by alice",
    );
    r.ok("done", e.run(&["task", "done", &a, "--claimant", "alice"]));
    assert_eq!(
        e.run(&["task", "claims", "--json"]).json(),
        serde_json::json!([])
    );
    r.fails("done", e.run(&["task", "done", &a]), 3, "already completed");
    r.ok("delete", e.run(&["task", "delete", &b]));
    r.fails(
        "delete",
        e.run(&["task", "delete", &b]),
        3,
        "already deleted",
    );

    for filter in [
        &["--json"][..],
        &["--all", "--json"],
        &["--project", "web", "--json"],
        &["--phase", "review", "--json"],
        &["--tag", "x", "--all", "--json"],
        &["--status", "completed", "--json"],
        &["--status", "deleted", "--status", "completed", "--json"],
        &["--project", "none-such", "--json"],
    ] {
        let mut args = vec!["task", "list"];
        args.extend_from_slice(filter);
        r.ok("list", e.run(&args));
    }
    let table = e.run(&["task", "list", "--all"]).ok().to_string();
    for title in ["alpha two", "beta", "gamma", "delta"] {
        assert!(table.contains(title), "{title} in {table}");
    }
    r.lines
        .push(format!("table: {} lines", table.lines().count()));
    r.fails(
        "list",
        e.run(&["task", "list", "--status", "sleeping"]),
        2,
        "sleeping",
    );
    r.ok("budgets", e.run(&["budget", "show", "--json"]));
    r.ledgers(f);
    r.lines
}

const A: &str = "aaaaaaaa-0000-4000-8000-000000000001";
const B: &str = "aaaaaaaa-0000-4000-8000-000000000002";

/// One task of a Taskwarrior export, pending, with `more` fields (JSON, no braces).
fn tw(uuid: &str, title: &str, more: &str) -> String {
    format!(
        r#"{{"uuid":"{uuid}","description":"{title}","status":"pending","entry":"20260101T000000Z"{more}}}"#
    )
}

fn import_and_export(f: &Fleet) -> Vec<String> {
    let e = &f.env;
    let mut r = Record::default();
    e.add(&["stored", "--project", "web"]);
    let file = e.dir.path().join("tw.json");
    let path = file.display().to_string();
    let import = |tasks: &[String], json: bool| {
        std::fs::write(&file, format!("[{}]", tasks.join(","))).unwrap();
        let mut args = vec!["task", "import", "--taskwarrior", &path];
        args.extend(json.then_some("--json"));
        e.run(&args)
    };
    let one = tw(
        A,
        "imported one",
        r#","project":"imp","tags":["t1"],"priority":"M",
           "annotations":[{"entry":"20260102T000000Z","description":"a note"}]"#,
    );
    let two = format!(
        r#"{{"uuid":"{B}","description":"imported two","status":"completed",
            "entry":"20260101T000000Z","end":"20260103T000000Z","depends":["{A}"]}}"#
    );
    r.ok("import", import(&[one, two], true));
    r.learn(f);
    // The same uuid again: an update, the export being the task's whole state.
    let again = tw(A, "imported one, again", r#","tags":["t2"]"#);
    r.ok("import", import(&[again], false));
    let cycle = [
        tw(A, "x", &format!(r#","depends":["{B}"]"#)),
        tw(B, "y", &format!(r#","depends":["{A}"]"#)),
    ];
    r.fails("import", import(&cycle, false), 2, "dependency cycle");
    let unknown = tw(
        A,
        "x",
        r#","depends":["bbbbbbbb-0000-4000-8000-000000000009"]"#,
    );
    r.fails("import", import(&[unknown], false), 2, "unknown uuid");
    let nowhere = tw(A, "x", r#","phase":"nowhere""#);
    r.fails(
        "import",
        import(&[nowhere], false),
        2,
        "'nowhere' is not in the flow",
    );
    r.fails(
        "import",
        e.run(&["task", "import", "--taskwarrior", "/no/such/file"]),
        2,
        "no such file",
    );
    let claimed = r.id("b");
    r.ok(
        "claim",
        e.run(&["task", "claim", &claimed, "--claimant", "carol", "--json"]),
    );
    let meanwhile = tw(A, "while claimed", "");
    r.fails("import", import(&[meanwhile], false), 3, "claimed by carol");
    r.ok("list", e.run(&["task", "list", "--all", "--json"]));
    let export = r.ok("export", e.run(&["task", "export", "--taskwarrior"]));
    // What one backend exports, the other imports whole.
    let other = backend::sqlite();
    let out = other.env.dir.path().join("export.json");
    std::fs::write(&out, &export).unwrap();
    let out = out.display().to_string();
    other
        .env
        .run(&["task", "import", "--taskwarrior", &out])
        .ok();
    let back = other.env.run(&["task", "list", "--all", "--json"]).json();
    assert_eq!(back.as_array().unwrap().len(), 3, "{back}");
    r.ledgers(f);
    r.lines
}

fn budgets_beds_and_the_conscience(f: &Fleet) -> Vec<String> {
    let e = &f.env;
    let mut r = Record::default();
    // The lanes the budgets and the scan name (an unknown lane is refused).
    std::fs::create_dir_all(e.repo.join("lanes")).unwrap();
    for lane in ["lane-a", "a"] {
        std::fs::write(
            e.repo.join(format!("lanes/{lane}.toml")),
            "profile = \"demo\"\n",
        )
        .unwrap();
    }
    e.add(&["metered"]);
    r.learn(f);
    let t = r.id("a");
    r.ok("budget", e.run(&["budget", "show", "--json"]));
    r.ok("budget", e.run(&["budget", "raise", "lane-a", "1000"]));
    r.ok("budget", e.run(&["budget", "raise", "lane-a", "+500"]));
    r.ok("budget", e.run(&["budget", "raise", &t, "200", "--task"]));
    r.fails(
        "budget",
        e.run(&["budget", "raise", "zzzzzzzz", "5", "--task"]),
        2,
        "zzzzzzzz",
    );
    r.fails(
        "budget",
        e.run(&["budget", "raise", "lane-a", "lots"]),
        2,
        "'lots'",
    );
    r.ok("budget", e.run(&["budget", "stop", "lane-a"]));
    r.ok("budget", e.run(&["budget", "show", "--json"]));
    r.ok("budget", e.run(&["budget", "show"]));

    r.ok("conscience", e.run(&["conscience", "log", "--json"]));
    std::fs::create_dir_all(e.repo.join("maxims")).unwrap();
    std::fs::write(
        e.repo.join("maxims/no-mocks.toml"),
        "message = \"Test against the real database, not a mock.\"\nwords = [\"mock\"]\n",
    )
    .unwrap();
    let transcript = e.dir.path().join("s1.jsonl");
    let line = |v: Value| format!("{v}\n");
    let said = |n: u32, text: &str| {
        line(
            serde_json::json!({ "type": "assistant", "uuid": format!("u{n}"),
            "sessionId": "s1", "cwd": "/tmp/x", "timestamp": "2026-01-01T00:00:00.000Z",
            "message": { "id": format!("m{n}"), "role": "assistant",
                "content": [{ "type": "text", "text": text }], "stop_reason": "end_turn" } }),
        )
    };
    std::fs::write(
        &transcript,
        said(1, "Then I will mock the database.") + &said(2, "Nothing else to say."),
    )
    .unwrap();
    let p = transcript.display().to_string();
    r.ok(
        "conscience",
        e.run(&["conscience", "scan", &p, "--lane", "a", "--json"]),
    );
    r.ok(
        "conscience",
        e.run(&["conscience", "log", "--lane", "a", "--json"]),
    );
    r.ok("conscience", e.run(&["conscience", "propose", "--json"]));

    std::fs::write(
        e.repo.join("spice.toml"),
        "[testbed]\npaths = [\"target\"]\nwarm = [[\"true\"]]\nkey = [\"spice.toml\"]\n",
    )
    .unwrap();
    r.ok("bed", e.run(&["bed", "status", "--json"]));
    r.ok("bed", e.run(&["bed", "gc", "--json"]));
    r.ok("archive", e.run(&["archive", "list", "--json"]));
    r.ok("usage", e.run(&["usage", "--by", "lane", "--json"]));
    let at = f.location().describe();
    assert_eq!(e.run(&["store", "path"]).ok().trim_end(), at);
    r.ledgers(f);
    r.lines
}

compared!(long_listings_cross_batches, long_listings_cross_batches_on);

/// A listing longer than PostgreSQL's batches (256 rows a fetch), with side rows on
/// some tasks only: every task gets exactly its own tags, dependencies and notes.
fn long_listings_cross_batches(f: &Fleet) -> Vec<String> {
    let mut a = f.authority();
    let mut ids: Vec<String> = Vec::new();
    for i in 0..600 {
        let new = spice::task::NewTask {
            title: format!("t{i}"),
            tags: if i % 3 == 0 { vec!["x".into()] } else { vec![] },
            ..Default::default()
        };
        let depends = if i % 5 == 4 {
            vec![ids[i - 1].clone()]
        } else {
            vec![]
        };
        let t = a.add_task(new, &depends).unwrap();
        if i % 7 == 0 {
            a.annotate(&t.id, &format!("note {i}")).unwrap();
        }
        ids.push(t.id);
    }
    drop(a);
    let mut r = Record::default();
    r.learn(f);
    let out = r.ok("list", f.env.run(&["task", "list", "--json"]));
    let rows: Vec<Value> = serde_json::from_str(&out).unwrap();
    assert_eq!(rows.len(), 600);
    for (i, row) in rows.iter().enumerate() {
        assert_eq!(row["id"], ids[i].as_str());
        let tags = row["tags"].as_array().unwrap().len();
        assert_eq!(tags, usize::from(i % 3 == 0), "{row}");
        let deps = row["depends"].as_array().unwrap().len();
        assert_eq!(deps, usize::from(i % 5 == 4), "{row}");
        let notes = row["annotations"].as_array().unwrap().len();
        assert_eq!(notes, usize::from(i % 7 == 0), "{row}");
    }
    let tagged = r.ok("list", f.env.run(&["task", "list", "--tag", "x", "--json"]));
    assert_eq!(
        serde_json::from_str::<Vec<Value>>(&tagged).unwrap().len(),
        200
    );
    r.lines
}

both!(two_edits_never_close_a_cycle_between_them);

/// Two `task dep` at once, each closing half of a cycle (a on b, b on a): one wins,
/// the other is refused naming the cycle, never both (SQLite's one writer; on
/// PostgreSQL the lock dependency edits take on `deps`).
fn two_edits_never_close_a_cycle_between_them(f: &Fleet) {
    for round in 0..6 {
        let a = f.env.add(&[&format!("a{round}")]);
        let b = f.env.add(&[&format!("b{round}")]);
        let runs: Vec<common::Run> = std::thread::scope(|s| {
            let one = s.spawn(|| f.env.run(&["task", "dep", &a, "--on", &b]));
            let two = s.spawn(|| f.env.run(&["task", "dep", &b, "--on", &a]));
            vec![one.join().unwrap(), two.join().unwrap()]
        });
        let won = runs.iter().filter(|r| r.code == 0).count();
        assert_eq!(won, 1, "round {round}: exactly one edge stands");
        for r in runs.iter().filter(|r| r.code != 0) {
            r.fails(2, "dependency cycle");
        }
        let deps = |id: &str| f.env.run(&["task", "show", id, "--json"]).json()["depends"].clone();
        let edges = [deps(&a), deps(&b)];
        let n: usize = edges.iter().map(|d| d.as_array().unwrap().len()).sum();
        assert_eq!(n, 1, "round {round}: {edges:?}");
    }
}

both!(a_commit_hooks_gate_run_is_in_the_tasks_ledger);

/// The pre-commit hook of a task's worktree records its gate run in the task's
/// ledger, wherever the store is.
fn a_commit_hooks_gate_run_is_in_the_tasks_ledger(f: &Fleet) {
    let e = &f.env;
    let task = e.add(&["gated"]);
    std::fs::write(e.repo.join("spice.toml"), "[gate]\njitter = 0.0\n").unwrap();
    std::fs::write(e.repo.join("a.txt"), "a\n").unwrap();
    common::git(&e.repo, &["add", "a.txt"]);
    let run = common::to_run(
        e.cmd(&["gate", "hook", "pre-commit"])
            .env("SPICE_TASK", &task)
            .env("SPICE_SESSION", "s-1")
            .output()
            .unwrap(),
    );
    run.ok();
    assert!(!run.stderr.contains("not recorded"), "{}", run.stderr);
    let runs = e.ledger_of(&task, "gate_run");
    assert_eq!(runs.len(), 1, "{runs:?}");
    assert_eq!(runs[0]["actor"], "s-1");
    assert_eq!(runs[0]["detail"]["clean"], true);
}

both!(a_flow_and_a_task_in_the_phase_it_drops_never_both_stand);

/// A flow that drops a phase and a task added into that phase at the same moment:
/// exactly one of them stands (PostgreSQL: the flow waits for the add's transaction
/// to end, by its table lock; SQLite: one writer at a time).
fn a_flow_and_a_task_in_the_phase_it_drops_never_both_stand(f: &Fleet) {
    for round in 0..6 {
        let web = format!("web{round}");
        f.env
            .run(&["task", "flow", "--project", &web, "plan", "todo", "verify"])
            .ok();
        let runs: Vec<common::Run> = std::thread::scope(|s| {
            let flow = s.spawn(|| {
                f.env
                    .run(&["task", "flow", "--project", &web, "plan", "verify"])
            });
            let add = s.spawn(|| {
                f.env
                    .run(&["task", "add", "x", "--project", &web, "--phase", "todo"])
            });
            vec![flow.join().unwrap(), add.join().unwrap()]
        });
        let won = runs.iter().filter(|r| r.code == 0).count();
        assert_eq!(won, 1, "round {round}: exactly one stands");
        if runs[0].code == 0 {
            runs[1].fails(2, "not in the flow");
        } else {
            runs[0].fails(2, "drops phase 'todo'");
        }
        let flow = f
            .env
            .run(&["task", "flow", "--project", &web])
            .ok()
            .to_string();
        let added = f
            .env
            .run(&["task", "list", "--project", &web, "--json"])
            .json();
        let in_todo = added.as_array().unwrap().len();
        assert_eq!(
            (flow.trim() == "plan → verify", in_todo),
            (runs[0].code == 0, usize::from(runs[1].code == 0)),
            "round {round}"
        );
    }
}
