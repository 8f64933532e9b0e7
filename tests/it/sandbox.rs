//! A lane's agent runs confined (`fleet::confine`, `sandbox`): a scripted agent tries
//! each escape an agent with its operator's permissions could make, and each is
//! refused, while the same agent's normal work (a commit on its branch, writes in its
//! worktree and temp directory, its steering on a command's stderr and in `spice
//! inbox`, `spice task phase --done`, the last three through the supervisor's desk)
//! succeeds and lands on main.
//!
//! Needs Landlock in the kernel (ABI 6 for the signal scope): ignored by a bare
//! `cargo test`, asked for by `.ci/run`, where it fails rather than skip.

use crate::common;

use common::{git, TestEnv};

/// Tries each escape, then works normally. Each attempt prints `escape NAME: refused`
/// or `escape NAME: ALLOWED`; the normal steps must succeed (`set -e` for them).
const AGENT: &str = r##"#!/bin/bash
report="$PWD/attempts.txt"
try() { name="$1"; shift; if ( "$@" ) >/dev/null 2>&1; then echo "escape $name: ALLOWED" >> "$report"; else echo "escape $name: refused" >> "$report"; fi; }
try checkout sh -c 'echo x > "$ESCAPE_REPO/escaped"'
try other_worktree sh -c 'echo x > "$ESCAPE_VICTIM/escaped"'
try outside sh -c 'echo x > "$ESCAPE_OUTSIDE/escaped"'
try move_main git update-ref refs/heads/main HEAD
try move_main_there git -C "$ESCAPE_REPO" update-ref refs/heads/main HEAD
try other_branch git update-ref refs/heads/spice/other/work HEAD
try new_branch git branch spice/forged HEAD
try git_config git config core.hooksPath /tmp/evil
try git_hooks sh -c 'echo "#!/bin/sh" > "$(git rev-parse --git-common-dir)/hooks/pre-commit"'
try state_manifest sh -c 'mkdir -p "$SPICE_HOME/beds/forged" && echo "{}" > "$SPICE_HOME/beds/forged/bed.json"'
try state_latch sh -c 'echo x > "$SPICE_HOME/forged-latch"'
try recording sh -c 'set -- "$SPICE_HOME"/recordings/*; test -f "$1" || exit 0; echo x >> "$1"'
try kill_outside kill -TERM "$ESCAPE_VICTIM_PID"
try store sh -c ': >> "$SPICE_HOME/spice.db"'
try store_wal sh -c ': >> "$SPICE_HOME/spice.db-wal"'
try other_inbox "$1" inbox lane:b
common=$(git rev-parse --path-format=absolute --git-common-dir)
loose=$(find "$common/objects" -type f -path '*/objects/[0-9a-f][0-9a-f]/*' | head -1)
try delete_history sh -c 'ls "$0"/objects/pack/*.pack && rm "$0"/objects/pack/*.pack' "$common"
try rewrite_object sh -c 'test -n "$0" && chmod u+w "$0" && : >> "$0"' "$loose"
try new_object sh -c 'mkdir -p "$0/objects/ff" && echo x > "$0/objects/ff/forged"' "$common"
try alternates sh -c 'echo /tmp >> "$0/objects/info/alternates"' "$common"
set -e
echo "escapes tried" >> "$report"
echo tmp > "$TMPDIR/scratch"
"$1" exec -- true 2> "$TMPDIR/exec.txt"
"$1" inbox --json > "$TMPDIR/inbox.json"
echo work > work.txt
git add work.txt attempts.txt
git commit -q -m "the agent's work"
"$1" task phase "$SPICE_TASK" --done --claimant "$SPICE_SESSION" > "$TMPDIR/done.txt" 2>&1
"##;

/// A committed profile `NAME` whose agent is `script` (run by bash with the spice
/// binary and the brief as arguments), headless.
pub(crate) fn scripted_profile(env: &TestEnv, name: &str, script: &str) {
    let agent = env.dir.path().join(format!("{name}.sh"));
    std::fs::write(&agent, script).unwrap();
    std::fs::create_dir_all(env.repo.join("profiles")).unwrap();
    std::fs::write(
        env.repo.join(format!("profiles/{name}.toml")),
        format!(
            "command = [\"/bin/bash\", \"{}\", \"{{spice}}\", \"{{brief}}\"]\nmode = \"headless\"\n",
            agent.display()
        ),
    )
    .unwrap();
    git(&env.repo, &["add", "profiles"]);
    git(&env.repo, &["commit", "-q", "-m", "profile"]);
}

#[test]
#[ignore = "needs Landlock in the kernel (.ci/run asks for it)"]
fn a_confined_agent_is_refused_every_escape_and_still_lands_its_work() {
    let env = TestEnv::with_lanes(&[
        ("a", "profile = \"escaper\"\nphases = [\"todo\"]\n"),
        // A second lane, given no work, to address an item to.
        ("b", "profile = \"escaper\"\nprojects = [\"none\"]\n"),
    ]);
    scripted_profile(&env, "escaper", AGENT);
    // A live worktree of another task, and a directory outside everything.
    let victim = env.dir.path().join("victim-wt");
    git(
        &env.repo,
        &[
            "worktree",
            "add",
            "-q",
            "-b",
            "spice/other/work",
            victim.to_str().unwrap(),
        ],
    );
    let victim_tip = git(&env.repo, &["rev-parse", "spice/other/work"]);
    let outside = env.dir.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    let mut sleeper = std::process::Command::new("sleep")
        .arg("120")
        .spawn()
        .unwrap();
    let task = env.add(&["Escape", "--project", "demo"]);
    let mine = env
        .run(&["steer", "lane:a", "mind the tests"])
        .ok()
        .trim()
        .to_string();
    let theirs = env
        .run(&["steer", "lane:b", "not yours"])
        .ok()
        .trim()
        .to_string();
    // History in a pack, and the next commit's objects loose: both the agent's to
    // try to destroy.
    git(&env.repo, &["repack", "-q", "-a", "-d"]);
    // The lane's env is the agent's: the test's targets go through the lane file.
    std::fs::write(
        env.repo.join("lanes/a.toml"),
        format!(
            "profile = \"escaper\"\nphases = [\"todo\"]\n[env]\nESCAPE_REPO = \"{}\"\nESCAPE_VICTIM = \"{}\"\nESCAPE_OUTSIDE = \"{}\"\nESCAPE_VICTIM_PID = \"{}\"\n",
            env.repo.display(),
            victim.display(),
            outside.display(),
            sleeper.id()
        ),
    )
    .unwrap();
    git(&env.repo, &["commit", "-q", "-am", "lane env"]);
    let main_before = git(&env.repo, &["rev-parse", "main"]);
    let run = common::finished(env.fleet_up(&["--until-idle", "--json"]));
    assert_eq!(env.lane("a")["sandbox"], "confined");
    let check = env.run(&["fleet", "check"]);
    assert!(
        check.ok().contains("confined"),
        "fleet check says what confinement the lane has: {}",
        check.stdout
    );

    // Every escape was refused, and left nothing behind.
    let branch = format!("spice/demo-{task}/work");
    let attempts = git(&env.repo, &["show", &format!("{branch}:attempts.txt")]);
    assert!(
        attempts.contains("escapes tried"),
        "{attempts}\n{}",
        run.stderr
    );
    assert!(!attempts.contains("ALLOWED"), "{attempts}");
    assert_eq!(attempts.matches("refused").count(), 20, "{attempts}");
    assert_eq!(
        git(&env.repo, &["rev-parse", "spice/other/work"]),
        victim_tip,
        "another task's branch moved"
    );
    for p in [
        env.repo.join("escaped"),
        victim.join("escaped"),
        outside.join("escaped"),
        env.home.join("beds/forged/bed.json"),
        env.home.join("forged-latch"),
    ] {
        assert!(!p.exists(), "{} was written", p.display());
    }
    let hooks_path = std::process::Command::new("git")
        .args(["config", "--get-all", "core.hooksPath"])
        .current_dir(&env.repo)
        .output()
        .unwrap();
    assert!(hooks_path.stdout.is_empty(), "core.hooksPath was set");
    assert!(
        sleeper.try_wait().unwrap().is_none(),
        "the agent signalled outside its lane"
    );
    sleeper.kill().unwrap();
    let _ = sleeper.wait();

    // Its normal work landed: the commit is on main through the desk.
    let done = std::fs::read_to_string(env.home.join("tmp/a/done.txt")).unwrap_or_default();
    assert!(done.contains("todo → review"), "{done}");
    assert_eq!(
        std::fs::read_to_string(env.home.join("tmp/a/scratch")).unwrap(),
        "tmp\n"
    );
    // Its steering reached it through the desk: its own item, never another lane's.
    let exec = std::fs::read_to_string(env.home.join("tmp/a/exec.txt")).unwrap_or_default();
    assert!(
        exec.contains(&mine) && exec.contains("mind the tests"),
        "{exec}"
    );
    assert!(!exec.contains(&theirs), "{exec}");
    let inbox = std::fs::read_to_string(env.home.join("tmp/a/inbox.json")).unwrap_or_default();
    assert!(inbox.contains(&mine) && !inbox.contains(&theirs), "{inbox}");
    let main_after = git(&env.repo, &["rev-parse", "main"]);
    assert_ne!(
        main_before, main_after,
        "nothing landed: {done}\n{}",
        run.stderr
    );
    assert_eq!(
        git(&env.repo, &["show", "main:work.txt"]).trim(),
        "work",
        "{done}"
    );
    // Its commit's objects were written where only it could, then copied into the
    // repository's own store as they merged: its directory gone, history stands.
    let lent = env.repo.join(".git/spice/objects");
    assert!(
        std::fs::read_dir(&lent).unwrap().count() >= 1,
        "no private object directory"
    );
    std::fs::remove_dir_all(&lent).unwrap();
    common::assert_history_whole(&env.repo);
    assert_eq!(git(&env.repo, &["show", "main:work.txt"]).trim(), "work");
    let launched = env.ledger_of(&task, "launched");
    assert!(
        launched[0]["detail"]["sandbox"]
            .as_str()
            .is_some_and(|s| s.starts_with("confined")),
        "{launched:?}"
    );
}

/// Looks everywhere a confined agent could find the store's password (its own
/// environment and argv, each ancestor's environment and command line), leaving
/// what it read in its temp directory; then lands its work.
const SNOOP: &str = r##"#!/bin/bash
out="$TMPDIR/seen"
mkdir -p "$out"
env > "$out/env.txt"
p=$$
: > "$out/refused.txt"
while [ "$p" -gt 1 ]; do
  cat "/proc/$p/environ" > "$out/environ.$p" 2>/dev/null || echo "refused environ $p" >> "$out/refused.txt"
  cat "/proc/$p/cmdline" > "$out/cmdline.$p" 2>/dev/null
  p=$(awk '{print $4}' "/proc/$p/stat")
done
set -e
"$1" exec -- true 2> "$TMPDIR/exec.txt"
echo work > work.txt
git add work.txt
git commit -q -m "the agent's work"
"$1" task phase "$SPICE_TASK" --done > "$TMPDIR/done.txt" 2>&1
"##;

/// Regression (#39): on PostgreSQL named by `SPICE_DATABASE_URL` alone, the agent's
/// own `spice` commands used a local `spice.db` ("unknown task"), so no agent could
/// complete its phase. Now they reach the store through the supervisor's desk: the
/// steering reaches the agent, its phase lands, and the password in the URL appears
/// nowhere the confined agent could read it (its environment, its ancestors' (the
/// supervisor's included: `/proc/PID/environ` is readable under Landlock, and spice
/// hides the value from it, `cli::secret`), the state directory, the repository).
#[test]
#[ignore = "needs Landlock in the kernel (.ci/run asks for it)"]
fn a_postgres_fleet_named_by_the_environment_alone_lands_its_work_and_keeps_its_password() {
    let Some(db) = common::pg::Database::new("sandbox_pg_env") else {
        return;
    };
    let secret = format!(
        "pw{}x{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    );
    let url = format!("{}&password={secret}", db.url);
    let env = TestEnv::with_lanes(&[("a", "profile = \"snoop\"\nphases = [\"todo\"]\n")]);
    scripted_profile(&env, "snoop", SNOOP);
    let run = |args: &[&str]| {
        common::to_run(
            env.cmd(args)
                .env("SPICE_DATABASE_URL", &url)
                .output()
                .unwrap(),
        )
    };
    let task = run(&["task", "add", "--json", "Land it", "--project", "demo"]).json()["id"]
        .as_str()
        .unwrap()
        .to_string();
    let item = run(&["steer", "lane:a", "keep it small"])
        .ok()
        .trim()
        .to_string();
    let sup = env.supervisor(
        env.cmd(&["fleet", "up", "--until-idle"])
            .env("SPICE_DATABASE_URL", &url)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped()),
    );
    let out = common::finished(sup.drained());

    let tmp = env.home.join("tmp/a");
    let done = std::fs::read_to_string(tmp.join("done.txt")).unwrap_or_default();
    assert!(done.contains("todo → review"), "{done}\n{}", out.stderr);
    assert_eq!(git(&env.repo, &["show", "main:work.txt"]).trim(), "work");
    let exec = std::fs::read_to_string(tmp.join("exec.txt")).unwrap_or_default();
    assert!(
        exec.contains(&item) && exec.contains("keep it small"),
        "{exec}"
    );
    assert!(
        !env.home.join("spice.db").exists(),
        "a SQLite store was made beside the PostgreSQL one"
    );
    let show = run(&["task", "show", &task, "--json"]).json();
    assert_eq!(show["phase"], "review", "{show}");
    // The agent read its ancestors' environments (Landlock does not stop that): the
    // supervisor's names the variable, and its value is gone from there.
    let supervisor_env = std::fs::read_dir(tmp.join("seen"))
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("environ."))
        .map(|e| std::fs::read(e.path()).unwrap_or_default())
        .find(|b| String::from_utf8_lossy(b).contains("SPICE_DATABASE_URL="));
    assert!(
        supervisor_env.is_some(),
        "the agent could not read the supervisor's environment: the check proves nothing"
    );
    let mut stack = vec![env.home.clone(), env.repo.clone()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if let Ok(bytes) = std::fs::read(&p) {
                let text = String::from_utf8_lossy(&bytes);
                assert!(
                    !text.contains(&secret),
                    "{} holds the password",
                    p.display()
                );
            }
        }
    }
}

/// Regression (#39): the repository's stage hooks ran with the operator's rights in
/// the agent's worktree, so an `on_phase_done = ["cargo", "test"]` ran whatever build
/// script the agent had written, unconfined. Hooks now run in the lane's sandbox
/// (`fleet::confine::commands`): each hook here tries to write outside it (refused),
/// writes the lane's `TMPDIR` (allowed), and the phase still lands. Their sibling, the
/// repository's gate checks that the phase gate runs on the agent's files, too.
#[test]
#[ignore = "needs Landlock in the kernel (.ci/run asks for it)"]
fn regression_stage_hooks_and_gate_checks_run_in_the_lanes_sandbox() {
    let env = TestEnv::with_lanes(&[("a", "profile = \"demo\"\nphases = [\"todo\"]\n")]);
    let outside = env.dir.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    // `key = [...]`, a command that says in `$TMPDIR/<file>` whether it could write
    // `<outside>/<file>`.
    let line = |key: &str, file: &str| {
        let script = format!(
            "if echo x > '{o}/{file}' 2>/dev/null; then echo escaped > \"$TMPDIR/{file}\"; \
             else echo refused > \"$TMPDIR/{file}\"; fi",
            o = outside.display()
        );
        format!(
            "{key} = [\"sh\", \"-c\", {}]\n",
            toml::Value::String(script)
        )
    };
    std::fs::write(
        env.repo.join("spice.toml"),
        format!(
            "[hooks]\n{}{}{}[[gate.check]]\nname = \"escape\"\n{}",
            line("on_claim", "on_claim"),
            line("on_phase_done", "on_phase_done"),
            line("on_release", "on_release"),
            line("run", "gate_check"),
        ),
    )
    .unwrap();
    git(&env.repo, &["add", "spice.toml"]);
    git(&env.repo, &["commit", "-q", "-m", "hooks"]);
    let main_before = git(&env.repo, &["rev-parse", "main"]);
    env.add(&["Hooked", "--project", "demo"]);
    let run = common::finished(env.fleet_up(&["--until-idle"]));
    for stage in ["on_claim", "on_phase_done", "on_release", "gate_check"] {
        assert!(
            !outside.join(stage).exists(),
            "{stage} wrote outside the sandbox"
        );
        let said =
            std::fs::read_to_string(env.home.join("tmp/a").join(stage)).unwrap_or_else(|e| {
                panic!(
                    "{stage} did not run or could not write TMPDIR: {e}\n{}",
                    run.stderr
                )
            });
        assert_eq!(said.trim(), "refused", "{stage}");
    }
    assert_ne!(
        main_before,
        git(&env.repo, &["rev-parse", "main"]),
        "the phase landed"
    );
}
