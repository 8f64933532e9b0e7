//! Running a stage hook: the repository's command for one of the fleet's boundaries
//! ([`Stage`]), through the one runner ([`crate::stage::run`]), in the task's
//! worktree, with `SPICE_*` in its environment and the event as one JSON object on
//! its stdin, stopped with its process group at its timeout. Each run is recorded in
//! the task's ledger (`stage_hook`), which is also what puts it in the lane's log
//! (`fleet::events`).
//!
//! What a failure means is the caller's: a failing `on_claim` or `on_launch` hands
//! the claim back (the lane backs off), a failing `on_phase_done` refuses the phase
//! completion (exit 5, its output to the agent), a failing `on_release` is reported
//! and changes nothing else.

use super::config::{Hook, HooksConfig, Stage};
use super::run::{self as runner, Job, Outcome};
use crate::error::Result;
use crate::store::Authority;
use serde_json::{json, Value};
use std::path::Path;
use std::time::{Duration, Instant};

/// At most this many characters of a run's output go to the ledger (its end).
pub const LEDGER_OUTPUT: usize = 4000;

/// What a stage hook is told: the boundary and the task at it.
#[derive(Debug, Clone)]
pub struct Event<'a> {
    pub stage: Stage,
    pub task_id: &'a str,
    pub handle: &'a str,
    /// The task's phase (for `on_phase_done`, the phase being completed).
    pub phase: &'a str,
    pub lane: Option<&'a str>,
    /// The session that holds (or held) the claim.
    pub session: &'a str,
    pub worktree: &'a Path,
    /// The branch the task's branch merges into.
    pub base: &'a str,
    /// The state directory, when known (`SPICE_HOME`).
    pub home: Option<std::path::PathBuf>,
    /// The test bed seeded into the worktree, as the bed module describes it
    /// (`null` when none).
    pub bed: Option<Value>,
    /// The lane's sandbox, when the lane is confined: a hook runs in the agent's
    /// files (its build scripts, its tests), so it gets no more than the agent.
    pub confine: Option<crate::sandbox::Entry>,
    /// Variables the sandbox comes with (where git writes objects: `git::objects`).
    pub sandbox_env: Vec<(String, String)>,
}

impl Event<'_> {
    /// The JSON object on the hook's stdin.
    pub fn json(&self) -> Value {
        json!({
            "stage": self.stage,
            "task": self.task_id,
            "handle": self.handle,
            "phase": self.phase,
            "lane": self.lane,
            "session": self.session,
            "worktree": self.worktree,
            "base": self.base,
            "bed": self.bed.clone().unwrap_or(Value::Null),
        })
    }

    /// The variables the hook gets besides the inherited environment.
    pub fn environment(&self) -> Vec<(String, String)> {
        let mut env = vec![
            ("SPICE_STAGE".to_string(), self.stage.key().to_string()),
            ("SPICE_TASK".into(), self.task_id.to_string()),
            ("SPICE_HANDLE".into(), self.handle.to_string()),
            ("SPICE_PHASE".into(), self.phase.to_string()),
            ("SPICE_SESSION".into(), self.session.to_string()),
            ("SPICE_WORKTREE".into(), self.worktree.display().to_string()),
            ("SPICE_BASE".into(), self.base.to_string()),
            // A hook's shells are not an agent's: the shell redirector leaves them
            // alone (steering shown to a hook would count as delivered).
            ("SPICE_EXEC_ACTIVE".into(), "1".into()),
        ];
        if let Some(l) = self.lane {
            env.push(("SPICE_LANE".into(), l.to_string()));
        }
        if let Some(h) = &self.home {
            env.push(("SPICE_HOME".into(), h.display().to_string()));
        }
        env.extend(self.sandbox_env.iter().cloned());
        env
    }
}

/// One run of a stage hook.
#[derive(Debug, Clone)]
pub struct HookRun {
    pub stage: Stage,
    pub argv: Vec<String>,
    pub timeout: Duration,
    pub outcome: Outcome,
    pub duration: Duration,
}

impl HookRun {
    pub fn passed(&self) -> bool {
        self.outcome.passed()
    }

    /// `passed`, `failed`, `timed_out` or `not_run`.
    pub fn outcome_word(&self) -> &'static str {
        match self.outcome {
            Outcome::Passed { .. } => "passed",
            Outcome::Failed { .. } => "failed",
            Outcome::TimedOut { .. } => "timed_out",
            Outcome::NotRun(_) => "not_run",
        }
    }

    pub fn exit_code(&self) -> Option<i32> {
        match self.outcome {
            Outcome::Passed { .. } => Some(0),
            Outcome::Failed { code, .. } => code,
            _ => None,
        }
    }

    /// One line: `the on_claim hook (./claim.sh) failed with exit code 3`.
    pub fn summary(&self) -> String {
        format!(
            "the {} hook ({}) {}",
            self.stage,
            shown_argv(&self.argv),
            self.outcome.summary(self.timeout)
        )
    }

    /// [`HookRun::summary`] with the last line of its output, for one-line reports.
    pub fn summary_with_output(&self) -> String {
        match self.output_lines().last() {
            Some(l) if !self.passed() => format!("{}: {}", self.summary(), l.trim()),
            _ => self.summary(),
        }
    }

    /// The end of its output, a line each (what an agent is shown).
    pub fn output_lines(&self) -> Vec<String> {
        self.outcome.output().lines().map(str::to_string).collect()
    }

    /// The ledger entry's detail.
    pub fn detail(&self, ev: &Event<'_>) -> Value {
        let out = self.outcome.output();
        let cut = out.len().saturating_sub(LEDGER_OUTPUT);
        let cut = (cut..=out.len())
            .find(|&i| out.is_char_boundary(i))
            .unwrap_or(out.len());
        let mut detail = json!({
            "stage": self.stage,
            "argv": self.argv,
            "outcome": self.outcome_word(),
            "exit_code": self.exit_code(),
            "duration_ms": self.duration.as_millis() as u64,
            "timeout_ms": self.timeout.as_millis() as u64,
            "summary": self.summary(),
            "output": &out[cut..],
            "lane": ev.lane,
            "phase": ev.phase,
            "worktree": ev.worktree,
        });
        if let Outcome::NotRun(why) = &self.outcome {
            detail["error"] = json!(why);
        }
        detail
    }
}

/// `./claim.sh --fast`, for messages.
fn shown_argv(argv: &[String]) -> String {
    argv.iter()
        .map(|a| {
            if a.is_empty() || a.contains(char::is_whitespace) {
                format!("{a:?}")
            } else {
                a.clone()
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Runs `hook` for `ev` (each line of its output handed to `on_line` as it comes).
pub fn run_hook<'a>(
    hook: &'a Hook,
    ev: &Event<'_>,
    on_line: Option<&'a mut dyn FnMut(&str)>,
) -> HookRun {
    let started = Instant::now();
    let outcome = runner::run(Job {
        argv: &hook.argv,
        cwd: ev.worktree.to_path_buf(),
        env: ev.environment(),
        stdin: format!("{}\n", ev.json()).into_bytes(),
        timeout: hook.timeout,
        on_line,
        confine: ev.confine,
    });
    HookRun {
        stage: hook.stage,
        argv: hook.argv.clone(),
        timeout: hook.timeout,
        outcome,
        duration: started.elapsed(),
    }
}

/// Runs the stage's hook, if the repository has one, and records the run in the
/// task's ledger (`stage_hook`, by the event's session). `None`: no hook for it.
pub fn run_and_record(
    store: &mut dyn Authority,
    cfg: &HooksConfig,
    ev: &Event<'_>,
) -> Result<Option<HookRun>> {
    let Some(hook) = cfg.get(ev.stage) else {
        return Ok(None);
    };
    let run = run_hook(hook, ev, None);
    store.note(ev.task_id, "stage_hook", ev.session, run.detail(ev))?;
    Ok(Some(run))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hook(stage: Stage, argv: &[&str], timeout: Duration) -> Hook {
        Hook {
            stage,
            argv: argv.iter().map(|s| s.to_string()).collect(),
            timeout,
        }
    }

    fn event<'a>(stage: Stage, wt: &'a Path) -> Event<'a> {
        Event {
            stage,
            task_id: "t1",
            handle: "demo-t1",
            phase: "todo",
            lane: Some("a"),
            session: "s1",
            worktree: wt,
            base: "main",
            home: None,
            bed: None,
            confine: None,
            sandbox_env: Vec::new(),
        }
    }

    #[test]
    fn the_event_arrives_on_stdin_and_in_the_environment_in_the_worktree() {
        let d = tempfile::tempdir().unwrap();
        let h = hook(
            Stage::OnClaim,
            &[
                "sh",
                "-c",
                "cat > event.json; echo \"$SPICE_STAGE $SPICE_TASK $SPICE_LANE $SPICE_PHASE\"; pwd",
            ],
            Duration::from_secs(20),
        );
        let ev = event(Stage::OnClaim, d.path());
        let r = run_hook(&h, &ev, None);
        assert!(r.passed(), "{r:?}");
        let lines = r.output_lines();
        assert_eq!(lines[0], "on_claim t1 a todo");
        let here = std::fs::canonicalize(d.path()).unwrap();
        assert_eq!(std::fs::canonicalize(&lines[1]).unwrap(), here);
        let got: Value =
            serde_json::from_str(&std::fs::read_to_string(d.path().join("event.json")).unwrap())
                .unwrap();
        assert_eq!(got["stage"], "on_claim");
        assert_eq!(got["session"], "s1");
        assert_eq!(got["bed"], Value::Null);
        assert_eq!(got["worktree"], d.path().display().to_string());
        let detail = r.detail(&ev);
        assert_eq!(detail["outcome"], "passed");
        assert_eq!(detail["exit_code"], 0);
    }

    #[test]
    fn failures_and_timeouts_say_what_happened() {
        let d = tempfile::tempdir().unwrap();
        let ev = event(Stage::OnPhaseDone, d.path());
        let failing = hook(
            Stage::OnPhaseDone,
            &["sh", "-c", "echo one; echo 'the tests fail' >&2; exit 3"],
            Duration::from_secs(20),
        );
        let r = run_hook(&failing, &ev, None);
        assert_eq!(r.exit_code(), Some(3));
        assert_eq!(r.output_lines(), ["one", "the tests fail"]);
        assert_eq!(
            r.summary_with_output(),
            "the on_phase_done hook (sh -c \"echo one; echo 'the tests fail' >&2; exit 3\") \
             failed with exit code 3: the tests fail"
        );
        let slow = hook(
            Stage::OnPhaseDone,
            &["sh", "-c", "echo waiting; sleep 30"],
            Duration::from_millis(300),
        );
        let r = run_hook(&slow, &ev, None);
        assert_eq!(r.outcome_word(), "timed_out");
        assert_eq!(r.exit_code(), None);
        assert!(
            r.summary().ends_with("timed out after 0.3s (stopped)"),
            "{}",
            r.summary()
        );
        let missing = hook(Stage::OnRelease, &["./nope"], Duration::from_secs(5));
        let r = run_hook(&missing, &ev, None);
        assert_eq!(r.detail(&ev)["error"], "./nope: not found");
    }
}
