//! Repository-owned checks: commands in any language that the repository names in
//! `[[gate.check]]`, run at the repository's root with the paths in scope in
//! `SPICE_STAGED_PATHS` (one per line) and as a JSON array on stdin, stopped (their
//! whole process group) at their timeout, their output kept for when they fail.

use super::config::Check;
use super::scan::Repo;
use std::io::{Read, Write};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::sync::mpsc;

/// At most this many lines of a failed check's output are shown (the last ones).
pub const SHOWN_LINES: usize = 60;

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

pub fn run(repo: &Repo, check: &Check, paths: &[String], phase: Option<&str>) -> Outcome {
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
    // One pipe for stdout and stderr, so the output keeps its order.
    let (reader, writer) = match nix::unistd::pipe() {
        Ok(p) => p,
        Err(e) => return Outcome::NotRun(format!("a pipe: {e}")),
    };
    let mut reader = std::fs::File::from(reader);
    let listed = relevant
        .iter()
        .map(|p| p.as_str())
        .collect::<Vec<_>>()
        .join("\n");
    let program = &check.run[0];
    let mut cmd = Command::new(program);
    cmd.args(&check.run[1..])
        .current_dir(&repo.root)
        .env("SPICE_STAGED_PATHS", &listed)
        .env("SPICE_GATE_CHECK", &check.name)
        .stdin(Stdio::piped())
        .process_group(0);
    match writer.try_clone() {
        Ok(w2) => {
            cmd.stdout(w2).stderr(writer);
        }
        Err(e) => return Outcome::NotRun(format!("a pipe: {e}")),
    }
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Outcome::NotRun(format!("{program}: not found"));
        }
        Err(e) => return Outcome::NotRun(format!("{program}: {e}")),
    };
    // The command holds the only write ends now: the reader ends when it (and every
    // process it started) has closed them.
    drop(cmd);
    let json = serde_json::to_vec(&relevant).expect("strings serialise");
    let mut stdin = child.stdin.take().expect("piped");
    std::thread::spawn(move || {
        // A check that ignores stdin closes it early: that is its business.
        let _ = stdin.write_all(&json);
    });
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut out = Vec::new();
        let _ = reader.read_to_end(&mut out);
        let _ = tx.send(out);
    });
    let pgid = nix::unistd::Pid::from_raw(child.id() as i32);
    let output = match rx.recv_timeout(check.timeout) {
        Ok(out) => out,
        Err(_) => {
            let _ = nix::sys::signal::killpg(pgid, nix::sys::signal::Signal::SIGKILL);
            let _ = child.wait();
            let secs = check.timeout.as_secs_f64();
            return Outcome::NotRun(format!("timed out after {secs}s (stopped)"));
        }
    };
    let status = match child.wait() {
        Ok(s) => s,
        Err(e) => return Outcome::NotRun(format!("{program}: {e}")),
    };
    if status.success() {
        return Outcome::Passed;
    }
    Outcome::Failed {
        code: status.code(),
        output: tail(&String::from_utf8_lossy(&output)),
    }
}

/// The last [`SHOWN_LINES`] lines, saying how many came before.
fn tail(text: &str) -> String {
    let lines: Vec<&str> = text.trim_end().lines().collect();
    if lines.len() <= SHOWN_LINES {
        return lines.join("\n");
    }
    let cut = lines.len() - SHOWN_LINES;
    format!("… {cut} lines before\n{}", lines[cut..].join("\n"))
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

    fn repo() -> (tempfile::TempDir, Repo) {
        let d = tempfile::tempdir().unwrap();
        let r = Repo {
            root: d.path().to_path_buf(),
            common_dir: d.path().to_path_buf(),
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
        match run(&r, &c, &paths, None) {
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
            run(&r, &missing, &p, None),
            Outcome::NotRun("./no-such-check: not found".into())
        );
        // A grandchild holding the output open is stopped too.
        let slow = check(
            &["sh", "-c", "sleep 30 & sleep 30"],
            Duration::from_millis(300),
        );
        match run(&r, &slow, &p, None) {
            Outcome::NotRun(why) => assert!(why.starts_with("timed out after 0.3s"), "{why}"),
            o => panic!("{o:?}"),
        }
        let mut phased = check(&["false"], Duration::from_secs(5));
        phased.phases = vec!["todo".into()];
        assert_eq!(run(&r, &phased, &p, Some("review")), Outcome::Skipped);
        assert_eq!(run(&r, &phased, &p, None), Outcome::Skipped);
        assert!(matches!(
            run(&r, &phased, &p, Some("todo")),
            Outcome::Failed { .. }
        ));
        let mut scoped = check(&["false"], Duration::from_secs(5));
        let mut b = globset::GlobSetBuilder::new();
        b.add(globset::Glob::new("docs/**").unwrap());
        scoped.paths = Some(b.build().unwrap());
        assert_eq!(run(&r, &scoped, &p, None), Outcome::Skipped);
        assert_eq!(
            run(&r, &check(&["true"], Duration::from_secs(5)), &p, None),
            Outcome::Passed
        );
    }

    #[test]
    fn long_output_keeps_its_end() {
        let text: String = (1..=100).map(|i| format!("line {i}\n")).collect();
        let t = tail(&text);
        assert!(t.starts_with("… 40 lines before\nline 41\n"), "{t}");
        assert!(t.ends_with("line 100"));
    }
}
