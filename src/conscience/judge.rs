//! Judges: commands asked whether a statement violates a maxim, each answering exactly
//! `YES` or `NO` (after trimming whitespace; case matters, nothing else is read).
//!
//! Two judges run in parallel on differently worded prompts (the same command, the
//! prompt on stdin and in the `{prompt}` placeholder). A judge's answer that is not
//! exactly one of the two (or a command that failed) is asked again, up to the
//! configured attempts; then the check is abandoned, never read generously. A judge
//! past its timeout gave no answer (it is not asked again: a slow judge stays slow).
//!
//! The verdict: both YES confirms the violation (published); both NO dismisses it;
//! one YES and one NO is disputed, and a disputed check does not publish (the maxim
//! stays eligible); an abandoned or unanswered judge leaves the check unconfirmed.
//! Commands run through [`crate::stage::run`] (own process group, killed at timeout).

use crate::stage::run::{self, Job, Outcome};
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The judge command of `maxims/conscience.toml`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JudgeConfig {
    /// `{prompt}`, `{statement}`, `{maxim}` and `{message}` are replaced in each
    /// argument; the prompt is also written to stdin.
    pub argv: Vec<String>,
    #[serde(with = "secs")]
    pub timeout: Duration,
    /// How many times one judge is asked before its check is abandoned.
    pub attempts: u32,
}

mod secs {
    pub fn serialize<S: serde::Serializer>(
        d: &std::time::Duration,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        s.serialize_f64(d.as_secs_f64())
    }
}

/// One answer a judge gave (or did not).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Answer {
    /// 1 or 2.
    pub judge: u8,
    /// 1-based.
    pub attempt: u32,
    /// What it wrote, at most [`RAW_MAX`] characters; for a command that could not
    /// run or timed out, what happened.
    pub raw: String,
    /// `yes`, `no`, `invalid` (anything else, or a failed command), `timeout`.
    pub reading: Reading,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Reading {
    Yes,
    No,
    Invalid,
    Timeout,
}

/// The longest raw answer kept.
pub const RAW_MAX: usize = 500;

/// What the two judges decided together.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    /// Both said YES: publish.
    Confirmed,
    /// Both said NO.
    Dismissed,
    /// One YES, one NO: not published.
    Disputed,
    /// A judge gave no valid answer within its attempts.
    Abandoned,
    /// A judge timed out.
    Unanswered,
}

/// What a judge is asked about.
pub struct Question<'a> {
    pub maxim: &'a str,
    pub message: &'a str,
    pub statement: &'a str,
}

/// The two prompts, worded differently so that one phrasing's bias does not decide.
pub fn prompts(q: &Question<'_>) -> [String; 2] {
    [
        format!(
            "You are checking a coding agent's statement against a rule its operator set.\n\
             Rule ({}): {}\n\
             Statement: \"{}\"\n\
             Does the statement violate the rule? Answer with exactly one word: YES or NO.\n",
            q.maxim, q.message, q.statement
        ),
        format!(
            "An operator's maxim for coding agents says: {}\n\
             An agent working under it wrote: \"{}\"\n\
             Is the agent going against this maxim? Reply YES if it is, NO if it is not, \
             and nothing else.\n",
            q.message, q.statement
        ),
    ]
}

fn expand(arg: &str, q: &Question<'_>, prompt: &str) -> String {
    arg.replace("{prompt}", prompt)
        .replace("{statement}", q.statement)
        .replace("{maxim}", q.maxim)
        .replace("{message}", q.message)
}

fn clip(s: &str) -> String {
    if s.chars().count() > RAW_MAX {
        s.chars().take(RAW_MAX).collect::<String>() + "…"
    } else {
        s.to_string()
    }
}

/// Asks one judge until it answers YES or NO, its attempts run out, or it times out.
fn ask(cfg: &JudgeConfig, cwd: &Path, judge: u8, q: &Question<'_>, prompt: &str) -> Vec<Answer> {
    let argv: Vec<String> = cfg.argv.iter().map(|a| expand(a, q, prompt)).collect();
    let mut out = Vec::new();
    for attempt in 1..=cfg.attempts {
        let outcome = run::run(Job {
            argv: &argv,
            cwd: cwd.to_path_buf(),
            env: vec![
                ("SPICE_JUDGE".into(), judge.to_string()),
                ("SPICE_JUDGE_ATTEMPT".into(), attempt.to_string()),
            ],
            stdin: prompt.as_bytes().to_vec(),
            timeout: cfg.timeout,
            on_line: None,
            confine: None,
        });
        let (raw, reading) = match &outcome {
            Outcome::Passed { output } => (
                output.clone(),
                match output.trim() {
                    "YES" => Reading::Yes,
                    "NO" => Reading::No,
                    _ => Reading::Invalid,
                },
            ),
            Outcome::TimedOut { output } => (
                format!("{} {output}", outcome.summary(cfg.timeout)),
                Reading::Timeout,
            ),
            other => (
                format!("{}: {}", other.summary(cfg.timeout), other.output()),
                Reading::Invalid,
            ),
        };
        out.push(Answer {
            judge,
            attempt,
            raw: clip(raw.trim()),
            reading,
        });
        if reading != Reading::Invalid {
            break;
        }
    }
    out
}

/// Runs both judges in parallel in `cwd`; every answer, in judge then attempt order,
/// and the verdict.
pub fn judge(cfg: &JudgeConfig, cwd: PathBuf, q: &Question<'_>) -> (Verdict, Vec<Answer>) {
    let [p1, p2] = prompts(q);
    let (a1, a2) = std::thread::scope(|s| {
        let second = s.spawn(|| ask(cfg, &cwd, 2, q, &p2));
        let first = ask(cfg, &cwd, 1, q, &p1);
        (first, second.join().unwrap_or_default())
    });
    let last = |a: &[Answer]| a.last().map_or(Reading::Invalid, |x| x.reading);
    let verdict = match (last(&a1), last(&a2)) {
        (Reading::Invalid, _) | (_, Reading::Invalid) => Verdict::Abandoned,
        (Reading::Timeout, _) | (_, Reading::Timeout) => Verdict::Unanswered,
        (Reading::Yes, Reading::Yes) => Verdict::Confirmed,
        (Reading::No, Reading::No) => Verdict::Dismissed,
        _ => Verdict::Disputed,
    };
    (verdict, a1.into_iter().chain(a2).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    /// A judge script in a temp dir: `body` is shell, with `$SPICE_JUDGE` (1 or 2)
    /// and a counter file per judge (`n`: how many times it was asked so far).
    fn script(dir: &std::path::Path, body: &str) -> JudgeConfig {
        let path = dir.join("judge.sh");
        let text = format!(
            "#!/bin/sh\nf=\"{}/count.$SPICE_JUDGE\"\nn=$(cat \"$f\" 2>/dev/null || echo 0)\nn=$((n+1))\necho $n > \"$f\"\nprompt=$(cat)\n{body}\n",
            dir.display()
        );
        std::fs::write(&path, text).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        JudgeConfig {
            argv: vec![path.display().to_string(), "{maxim}".into()],
            timeout: Duration::from_secs(20),
            attempts: 3,
        }
    }

    fn q() -> Question<'static> {
        Question {
            maxim: "fallbacks",
            message: "No silent fallbacks.",
            statement: "I'll fall back to the cache.",
        }
    }

    fn run_with(body: &str, f: impl FnOnce(&mut JudgeConfig)) -> (Verdict, Vec<Answer>) {
        let dir = tempfile::tempdir().unwrap();
        let mut cfg = script(dir.path(), body);
        f(&mut cfg);
        judge(&cfg, dir.path().to_path_buf(), &q())
    }

    fn readings(a: &[Answer]) -> Vec<(u8, u32, Reading)> {
        a.iter().map(|a| (a.judge, a.attempt, a.reading)).collect()
    }

    #[test]
    fn yes_from_both_confirms() {
        // The prompt reaches the judge on stdin, the maxim as an argument.
        let (v, a) = run_with(
            "case \"$prompt\" in *'fall back to the cache'*) [ \"$1\" = fallbacks ] && echo '  YES ';; *) echo NO;; esac",
            |_| {},
        );
        assert_eq!(v, Verdict::Confirmed);
        assert_eq!(readings(&a), [(1, 1, Reading::Yes), (2, 1, Reading::Yes)]);
        assert_eq!(a[0].raw, "YES");
    }

    #[test]
    fn no_from_both_dismisses() {
        let (v, _) = run_with("echo NO", |_| {});
        assert_eq!(v, Verdict::Dismissed);
    }

    #[test]
    fn garbage_then_yes_is_asked_again() {
        let (v, a) = run_with(
            "if [ $n -lt 2 ]; then echo 'Yes, it does.'; else echo YES; fi",
            |_| {},
        );
        assert_eq!(v, Verdict::Confirmed);
        assert_eq!(
            readings(&a),
            [
                (1, 1, Reading::Invalid),
                (1, 2, Reading::Yes),
                (2, 1, Reading::Invalid),
                (2, 2, Reading::Yes)
            ]
        );
        assert_eq!(a[0].raw, "Yes, it does.");
    }

    #[test]
    fn garbage_until_the_bound_abandons() {
        // Lowercase is not the protocol, nor is a failing command.
        let (v, a) = run_with(
            "if [ $SPICE_JUDGE = 1 ]; then echo yes; else echo YES; exit 1; fi",
            |c| c.attempts = 2,
        );
        assert_eq!(v, Verdict::Abandoned);
        assert_eq!(
            readings(&a),
            [
                (1, 1, Reading::Invalid),
                (1, 2, Reading::Invalid),
                (2, 1, Reading::Invalid),
                (2, 2, Reading::Invalid)
            ]
        );
        assert!(
            a[2].raw.starts_with("failed with exit code 1"),
            "{}",
            a[2].raw
        );
    }

    #[test]
    fn a_judge_past_its_timeout_gave_no_answer() {
        let (v, a) = run_with(
            "if [ $SPICE_JUDGE = 2 ]; then sleep 60; fi; echo YES",
            // Long enough for the judge that answers at once on a loaded machine (CI
            // runs the tests in parallel): 500 ms was not.
            |c| c.timeout = Duration::from_secs(5),
        );
        assert_eq!(v, Verdict::Unanswered);
        assert_eq!(
            readings(&a),
            [(1, 1, Reading::Yes), (2, 1, Reading::Timeout)]
        );
    }

    #[test]
    fn two_judges_disagreeing_do_not_confirm() {
        let (v, a) = run_with(
            "if [ $SPICE_JUDGE = 1 ]; then echo YES; else echo NO; fi",
            |_| {},
        );
        assert_eq!(v, Verdict::Disputed);
        assert_eq!(readings(&a), [(1, 1, Reading::Yes), (2, 1, Reading::No)]);
    }

    #[test]
    fn the_prompts_differ() {
        let [a, b] = prompts(&q());
        assert_ne!(a, b);
        assert!(
            a.contains("I'll fall back to the cache.")
                && b.contains("I'll fall back to the cache.")
        );
    }
}
