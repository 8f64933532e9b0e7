//! A lane's agent runs confined (`fleet::confine`, `sandbox`): a scripted agent tries
//! each escape an agent with its operator's permissions could make, and each is
//! refused, while the same agent's normal work (a commit on its branch, writes in its
//! worktree and temp directory, `spice task phase --done` through the supervisor's
//! desk) succeeds and lands on main.
//!
//! Needs Landlock in the kernel (ABI 6 for the signal scope): ignored by a bare
//! `cargo test`, asked for by `.ci/run`, where it fails rather than skip.

mod common;

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
try git_config git config core.hooksPath /tmp/evil
try git_hooks sh -c 'echo "#!/bin/sh" > "$(git rev-parse --git-common-dir)/hooks/pre-commit"'
try state_manifest sh -c 'mkdir -p "$SPICE_HOME/beds/forged" && echo "{}" > "$SPICE_HOME/beds/forged/bed.json"'
try state_latch sh -c 'echo x > "$SPICE_HOME/forged-latch"'
try recording sh -c 'set -- "$SPICE_HOME"/recordings/*; test -f "$1" || exit 0; echo x >> "$1"'
try kill_outside kill -TERM "$ESCAPE_VICTIM_PID"
set -e
echo "escapes tried" >> "$report"
echo tmp > "$TMPDIR/scratch"
echo work > work.txt
git add work.txt attempts.txt
git commit -q -m "the agent's work"
"$1" task phase "$SPICE_TASK" --done --claimant "$SPICE_SESSION" > "$TMPDIR/done.txt" 2>&1
"##;

#[test]
#[ignore = "needs Landlock in the kernel (.ci/run asks for it)"]
fn a_confined_agent_is_refused_every_escape_and_still_lands_its_work() {
    let env = TestEnv::with_lanes(&[("a", "profile = \"escaper\"\nphases = [\"todo\"]\n")]);
    let scripts = env.dir.path().join("scripts");
    std::fs::create_dir_all(&scripts).unwrap();
    let agent = scripts.join("escaper.sh");
    std::fs::write(&agent, AGENT).unwrap();
    std::fs::create_dir_all(env.repo.join("profiles")).unwrap();
    std::fs::write(
        env.repo.join("profiles/escaper.toml"),
        format!(
            "command = [\"/bin/bash\", \"{}\", \"{{spice}}\", \"{{brief}}\"]\nmode = \"headless\"\n",
            agent.display()
        ),
    )
    .unwrap();
    git(&env.repo, &["add", "profiles"]);
    git(&env.repo, &["commit", "-q", "-m", "profile"]);
    // A live worktree of another task, and a directory outside everything.
    let victim = env.dir.path().join("victim-wt");
    git(
        &env.repo,
        &[
            "worktree",
            "add",
            "-q",
            "-b",
            "spice/other",
            victim.to_str().unwrap(),
        ],
    );
    let outside = env.dir.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    let mut sleeper = std::process::Command::new("sleep")
        .arg("120")
        .spawn()
        .unwrap();
    let task = env.add(&["Escape", "--project", "demo"]);
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
    let check = env.run(&["fleet", "check"]);
    assert!(
        check.ok().contains("confined"),
        "fleet check says what confinement the lane has: {}",
        check.stdout
    );

    // Every escape was refused, and left nothing behind.
    let branch = format!("spice/demo-{task}");
    let attempts = git(&env.repo, &["show", &format!("{branch}:attempts.txt")]);
    assert!(
        attempts.contains("escapes tried"),
        "{attempts}\n{}",
        run.stderr
    );
    assert!(!attempts.contains("ALLOWED"), "{attempts}");
    assert_eq!(attempts.matches("refused").count(), 11, "{attempts}");
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
    let launched = env.ledger_of(&task, "launched");
    assert!(
        launched[0]["detail"]["sandbox"]
            .as_str()
            .is_some_and(|s| s.starts_with("confined")),
        "{launched:?}"
    );
}
