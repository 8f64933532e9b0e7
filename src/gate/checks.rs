//! Repository-owned checks: commands in any language that the repository names in
//! `[[gate.check]]`, run at the repository's root with the paths in scope in
//! `SPICE_STAGED_PATHS` (one per line) and as a JSON array on stdin, through the
//! repository commands' one runner ([`crate::stage::run`]): stopped (their whole
//! process group) at their timeout, the end of their output kept for when they fail.
//! When the supervisor gates a confined agent's phase, they run in the agent's lane's
//! sandbox ([`super::Options::confine`]): they build and run the agent's files.

use super::config::Check;
use super::scan::Repo;
use super::Options;
use crate::stage::run::{self as runner, Job};

#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Not for these paths or this phase.
    Skipped,
    Passed,
    /// It ran and said no: its exit code (`None`: killed by a signal) and output.
    Failed {
        code: Option<i32>,
        output: String,
    },
    /// It could not be run, or did not finish in time.
    NotRun(String),
}

pub fn run(repo: &Repo, check: &Check, paths: &[String], opts: &Options) -> Outcome {
    let phase = opts.phase.as_deref();
    if !check.phases.is_empty() && !phase.is_some_and(|p| check.phases.iter().any(|x| x == p)) {
        return Outcome::Skipped;
    }
    let relevant: Vec<&String> = match &check.paths {
        Some(set) => paths.iter().filter(|p| set.is_match(p.as_str())).collect(),
        None => paths.iter().collect(),
    };
    if relevant.is_empty() {
        return Outcome::Skipped;
    }
    let listed = relevant
        .iter()
        .map(|p| p.as_str())
        .collect::<Vec<_>>()
        .join("\n");
    let o = runner::run(Job {
        argv: &check.run,
        cwd: repo.root.clone(),
        env: [
            ("SPICE_STAGED_PATHS".into(), listed),
            ("SPICE_GATE_CHECK".into(), check.name.clone()),
        ]
        .into_iter()
        .chain(opts.sandbox_env.iter().cloned())
        .collect(),
        stdin: serde_json::to_vec(&relevant).expect("strings serialise"),
        timeout: check.timeout,
        on_line: None,
        confine: opts.confine,
    });
    match o {
        runner::Outcome::Passed { .. } => Outcome::Passed,
        runner::Outcome::Failed { code, output } => Outcome::Failed { code, output },
        runner::Outcome::NotRun(why) => Outcome::NotRun(why),
        t @ runner::Outcome::TimedOut { .. } => Outcome::NotRun(t.summary(check.timeout)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn check(run: &[&str], timeout: Duration) -> Check {
        Check {
            name: "t".into(),
            run: run.iter().map(|s| s.to_string()).collect(),
            paths: None,
            path_patterns: vec![],
            phases: vec![],
            timeout,
        }
    }

    fn at(phase: Option<&str>) -> Options {
        Options {
            phase: phase.map(str::to_string),
            ..Default::default()
        }
    }

    fn repo() -> (tempfile::TempDir, Repo) {
        let d = tempfile::tempdir().unwrap();
        let r = Repo {
            root: d.path().to_path_buf(),
            common_dir: d.path().to_path_buf(),
            pin: None,
            index: None,
        };
        (d, r)
    }

    #[test]
    fn paths_arrive_in_the_environment_and_on_stdin() {
        let (_d, r) = repo();
        let c = check(
            &[
                "sh",
                "-c",
                "cat; echo; echo \"$SPICE_STAGED_PATHS\"; exit 3",
            ],
            Duration::from_secs(20),
        );
        let paths = vec!["a b.rs".to_string(), "c.rs".to_string()];
        match run(&r, &c, &paths, &at(None)) {
            Outcome::Failed { code, output } => {
                assert_eq!(code, Some(3));
                assert_eq!(output, "[\"a b.rs\",\"c.rs\"]\na b.rs\nc.rs");
            }
            o => panic!("{o:?}"),
        }
    }

    #[test]
    fn missing_slow_and_scoped_checks() {
        let (_d, r) = repo();
        let p = vec!["src/a.rs".to_string()];
        let missing = check(&["./no-such-check"], Duration::from_secs(5));
        assert_eq!(
            run(&r, &missing, &p, &at(None)),
            Outcome::NotRun("./no-such-check: not found".into())
        );
        // A grandchild holding the output open is stopped too.
        let slow = check(
            &["sh", "-c", "sleep 30 & sleep 30"],
            Duration::from_millis(300),
        );
        match run(&r, &slow, &p, &at(None)) {
            Outcome::NotRun(why) => assert!(why.starts_with("timed out after 0.3s"), "{why}"),
            o => panic!("{o:?}"),
        }
        let mut phased = check(&["false"], Duration::from_secs(5));
        phased.phases = vec!["todo".into()];
        assert_eq!(run(&r, &phased, &p, &at(Some("review"))), Outcome::Skipped);
        assert_eq!(run(&r, &phased, &p, &at(None)), Outcome::Skipped);
        assert!(matches!(
            run(&r, &phased, &p, &at(Some("todo"))),
            Outcome::Failed { .. }
        ));
        let mut scoped = check(&["false"], Duration::from_secs(5));
        let mut b = globset::GlobSetBuilder::new();
        b.add(globset::Glob::new("docs/**").unwrap());
        scoped.paths = Some(b.build().unwrap());
        assert_eq!(run(&r, &scoped, &p, &at(None)), Outcome::Skipped);
        assert_eq!(
            run(&r, &check(&["true"], Duration::from_secs(5)), &p, &at(None)),
            Outcome::Passed
        );
    }
}
