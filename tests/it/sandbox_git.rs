//! A confined agent can write everything in its worktree, its `.git` file and its
//! worktree's git directory included; spice's own git there must not follow them
//! (issue #39). Regression: an agent pointed its `.git` at a git directory of its own
//! whose config names a `core.fsmonitor` program, and the supervisor's `git status`
//! during `spice task phase --done` ran that program with the supervisor's rights,
//! outside the sandbox; the merge took whatever branch the worktree's HEAD named.
//!
//! Needs Landlock (as `sandbox.rs`): ignored by a bare `cargo test`, run by `.ci/run`.

use crate::common;
use crate::sandbox::scripted_profile;

use common::{git, TestEnv};

/// Turn 1 commits its work, moves its worktree to a branch that is not its task's,
/// forges `.git`, and asks to complete its phase (refused). Turn 2 (the next steering
/// starts it: the agent is headless) goes back to its task's branch through the real
/// git directory, leaves the forged `.git` in place, and asks again (lands: spice's
/// git ignores the forged file).
const AGENT: &str = r##"#!/bin/bash
set -e
if [ ! -f "$TMPDIR/forged" ]; then
  touch "$TMPDIR/forged"
  echo work > work.txt
  git add work.txt
  git commit -q -m "the agent's work"
  git symbolic-ref --short HEAD > "$TMPDIR/branch"
  git rev-parse --absolute-git-dir > "$TMPDIR/admin"
  # A branch of its own, in the one directory of refs it may write.
  git checkout -q -b "$(cat "$TMPDIR/branch")-not-mine"
  printf '#!/bin/sh\necho "ran as uid $(id -u)" >> %s/PWNED\nexit 1\n' "$ESCAPE_OUTSIDE" > "$TMPDIR/evil.sh"
  chmod +x "$TMPDIR/evil.sh"
  fake="$TMPDIR/fake"
  head=$(git rev-parse HEAD)
  common=$(cd "$(git rev-parse --git-common-dir)" && pwd)
  # The forged git directory borrows the repository's objects and the agent's own.
  lent="$GIT_OBJECT_DIRECTORY"
  unset GIT_OBJECT_DIRECTORY GIT_ALTERNATE_OBJECT_DIRECTORIES
  git init -q "$fake"
  git -C "$fake" config core.fsmonitor "$TMPDIR/evil.sh"
  printf '%s/objects\n%s\n' "$common" "$lent" > "$fake/.git/objects/info/alternates"
  git -C "$fake" update-ref "refs/heads/$(cat "$TMPDIR/branch")" "$head"
  git -C "$fake" symbolic-ref HEAD "refs/heads/$(cat "$TMPDIR/branch")"
  cp "$(git rev-parse --git-dir)/index" "$fake/.git/index"
  echo "gitdir: $fake/.git" > .git
  "$1" task phase "$SPICE_TASK" --done > "$TMPDIR/done1.txt" 2>&1 || echo "refused rc=$?" >> "$TMPDIR/done1.txt"
  exit 0
fi
GIT_DIR="$(cat "$TMPDIR/admin")" GIT_WORK_TREE="$PWD" git checkout -q "$(cat "$TMPDIR/branch")"
"$1" task phase "$SPICE_TASK" --done > "$TMPDIR/done2.txt" 2>&1
"##;

#[test]
#[ignore = "needs Landlock in the kernel (.ci/run asks for it)"]
fn regression_a_forged_dot_git_never_runs_code_as_the_supervisor_nor_merges_another_branch() {
    let env = TestEnv::with_lanes(&[("a", "profile = \"forger\"\nphases = [\"todo\"]\n")]);
    scripted_profile(&env, "forger", AGENT);
    let outside = env.dir.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(
        env.repo.join("lanes/a.toml"),
        format!(
            "profile = \"forger\"\nphases = [\"todo\"]\n[env]\nESCAPE_OUTSIDE = \"{}\"\n",
            outside.display()
        ),
    )
    .unwrap();
    git(&env.repo, &["commit", "-q", "-am", "lane env"]);
    let task = env.add(&["Forge", "--project", "demo"]);
    let main_before = git(&env.repo, &["rev-parse", "main"]);
    let sup = env.fleet_up(&["--until-idle", "--json"]);
    let first_done = env.home.join("tmp/a/done1.txt");
    common::wait_for("the first turn's phase completion", 60, || {
        std::fs::read_to_string(&first_done)
            .ok()
            .filter(|t| t.contains("rc="))
    });
    env.run(&["steer", "lane:a", "go back to your own branch"])
        .ok();
    let run = common::finished(sup);

    let pwned = outside.join("PWNED");
    assert!(
        !pwned.exists(),
        "the forged git directory's program ran outside the sandbox: {}",
        std::fs::read_to_string(&pwned).unwrap_or_default()
    );
    let first = std::fs::read_to_string(env.home.join("tmp/a/done1.txt")).unwrap_or_default();
    assert!(
        first.contains("/work-not-mine, not the task's branch") && first.contains("refused"),
        "{first}\n{}",
        run.stderr
    );
    let second = std::fs::read_to_string(env.home.join("tmp/a/done2.txt")).unwrap_or_default();
    assert!(second.contains("todo → review"), "{second}\n{}", run.stderr);
    assert_ne!(main_before, git(&env.repo, &["rev-parse", "main"]));
    assert_eq!(git(&env.repo, &["show", "main:work.txt"]).trim(), "work");
    let merged = git(&env.repo, &["log", "--format=%s", "main"]);
    assert!(merged.contains("the agent's work"), "{merged}");
    assert!(
        env.ledger_of(&task, "launched").len() >= 2,
        "a second turn completed the phase"
    );
}
