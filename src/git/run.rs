//! The seam through which spice runs `git`: one program, one controlled environment.
//!
//! Invariants: every git process starts from a cleared environment holding only the
//! variables in [`PASSED`] (taken from what the caller hands [`Runner::new`]; the
//! library never reads the process environment) plus fixed settings: no terminal
//! prompts, no pager, no editor, the C locale (so stderr can be quoted and matched),
//! and a ceiling that stops repository discovery at the directory git runs in. Nothing
//! like `GIT_DIR`, `GIT_WORK_TREE` or `GIT_INDEX_FILE` can leak in from an agent's
//! shell, and stdin is closed, so no git command can wait for a human.

use std::ffi::{OsStr, OsString};
use std::path::Path;
use std::process::{Command, Stdio};

/// The variables a git process inherits, when the caller provides them: where to find
/// `git`, the user's git configuration (identity, hooks path) and an identity given
/// through the environment. Everything else is dropped.
pub const PASSED: &[&str] = &[
    "PATH",
    "HOME",
    "XDG_CONFIG_HOME",
    "GIT_AUTHOR_NAME",
    "GIT_AUTHOR_EMAIL",
    "GIT_COMMITTER_NAME",
    "GIT_COMMITTER_EMAIL",
];

/// Settings every git process gets, whatever the caller passed.
const FIXED: &[(&str, &str)] = &[
    ("GIT_TERMINAL_PROMPT", "0"),
    ("GIT_PAGER", "cat"),
    ("PAGER", "cat"),
    ("GIT_EDITOR", "true"),
    ("LC_ALL", "C"),
    ("LANGUAGE", "C"),
];

/// How to run git: the program and the environment it gets.
#[derive(Debug, Clone)]
pub struct Runner {
    program: OsString,
    env: Vec<(OsString, OsString)>,
}

/// What a finished git process left: its exit code (`None` when killed by a signal)
/// and its output, decoded lossily (spice reads shas, ref names and paths from it).
#[derive(Debug, Clone)]
pub struct Output {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl Output {
    pub fn ok(&self) -> bool {
        self.code == Some(0)
    }
    /// The first non-empty line of stderr (else of stdout), for one-line errors.
    pub fn first_line(&self) -> String {
        let line = first_line(&self.stderr).or_else(|| first_line(&self.stdout));
        match (line, self.code) {
            (Some(l), _) => l.to_string(),
            (None, Some(c)) => format!("exit code {c}"),
            (None, None) => "killed by a signal".to_string(),
        }
    }
}

/// The first line with something on it, trimmed.
pub fn first_line(text: &str) -> Option<&str> {
    text.lines().map(str::trim).find(|l| !l.is_empty())
}

impl Runner {
    /// A runner for `git` (looked up on the passed `PATH`), keeping from `vars` only
    /// the names in [`PASSED`]. The CLI layer passes `std::env::vars_os()`.
    pub fn new<I, K, V>(vars: I) -> Runner
    where
        I: IntoIterator<Item = (K, V)>,
        K: AsRef<OsStr>,
        V: AsRef<OsStr>,
    {
        let env = vars
            .into_iter()
            .filter(|(k, _)| PASSED.iter().any(|p| OsStr::new(p) == k.as_ref()))
            .map(|(k, v)| (k.as_ref().to_owned(), v.as_ref().to_owned()))
            .collect();
        Runner {
            program: OsString::from("git"),
            env,
        }
    }

    /// Runs another program in git's place: a specific git build, or a fake in tests.
    pub fn with_program(mut self, program: impl Into<OsString>) -> Runner {
        self.program = program.into();
        self
    }

    /// Runs `git ARGS` in `dir` and waits for it. Only failing to start it is an
    /// error here; a non-zero exit is the caller's to judge.
    pub fn run<S: AsRef<OsStr>>(&self, dir: &Path, args: &[S]) -> std::io::Result<Output> {
        output(self.command(dir, args, &[]))
    }

    /// Like [`Runner::run`] with `extra` variables set (e.g. a scratch `GIT_INDEX_FILE`,
    /// which is never passed from the caller's environment).
    pub fn run_with<S: AsRef<OsStr>>(
        &self,
        dir: &Path,
        args: &[S],
        extra: &[(&str, &OsStr)],
    ) -> std::io::Result<Output> {
        output(self.command(dir, args, extra))
    }

    /// Like [`Runner::run`] with `input` on git's standard input (a few lines: a
    /// thread writes it while git's output is read, so neither waits on the other).
    pub fn run_input<S: AsRef<OsStr>>(
        &self,
        dir: &Path,
        args: &[S],
        input: &[u8],
    ) -> std::io::Result<Output> {
        use std::io::Write;
        let mut cmd = self.command(dir, args, &[]);
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn()?;
        let mut stdin = child.stdin.take().expect("piped");
        let input = input.to_vec();
        let writer = std::thread::spawn(move || stdin.write_all(&input));
        let out = child.wait_with_output()?;
        // A git that exits without reading all of it has said why on stderr.
        let _ = writer.join();
        Ok(Output {
            code: out.status.code(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        })
    }

    /// [`Runner::run`] shielded from being stopped half-way, for a command that must
    /// finish once started (updating a checkout): it runs in a process group of its
    /// own, so a signal to the caller's group (an agent's lane stopped, ^C at a
    /// terminal) does not reach it, with the stop signals (TERM, INT, HUP, QUIT)
    /// blocked, so one sent to it by pid (an agent's shim ending the agent's tree)
    /// waits until it has exited, which is its end anyway. Only SIGKILL can cut it
    /// off, and every stopper in spice sends TERM seconds before KILL, far longer than
    /// a fast-forward takes.
    pub fn run_shielded<S: AsRef<OsStr>>(&self, dir: &Path, args: &[S]) -> std::io::Result<Output> {
        self.run_shielded_with(dir, args, &[])
    }

    /// [`Runner::run_shielded`] with `extra` variables set.
    pub fn run_shielded_with<S: AsRef<OsStr>>(
        &self,
        dir: &Path,
        args: &[S],
        extra: &[(&str, &OsStr)],
    ) -> std::io::Result<Output> {
        use nix::sys::signal::{SigSet, Signal};
        use std::os::unix::process::CommandExt;
        let mut cmd = self.command(dir, args, extra);
        cmd.process_group(0);
        let mut stops = SigSet::empty();
        for s in [
            Signal::SIGTERM,
            Signal::SIGINT,
            Signal::SIGHUP,
            Signal::SIGQUIT,
        ] {
            stops.add(s);
        }
        // SAFETY: only pthread_sigmask, async-signal-safe, between fork and exec.
        unsafe {
            cmd.pre_exec(move || Ok(stops.thread_block()?));
        }
        output(cmd)
    }

    fn command<S: AsRef<OsStr>>(
        &self,
        dir: &Path,
        args: &[S],
        extra: &[(&str, &OsStr)],
    ) -> Command {
        let mut cmd = Command::new(&self.program);
        cmd.args(args)
            .current_dir(dir)
            .env_clear()
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .envs(FIXED.iter().copied())
            .envs(extra.iter().copied())
            .stdin(Stdio::null());
        // Discovery may look at `dir` itself but never above it, so a path that is not
        // a work tree fails instead of silently resolving to an enclosing repository
        // (a home directory kept in git, say).
        if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
            cmd.env("GIT_CEILING_DIRECTORIES", parent);
        }
        cmd
    }
}

fn output(mut cmd: Command) -> std::io::Result<Output> {
    let out = cmd.output()?;
    Ok(Output {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_passed_variables_survive() {
        let r = Runner::new([
            ("PATH", "/bin"),
            ("GIT_DIR", "/elsewhere"),
            ("GIT_WORK_TREE", "/elsewhere"),
            ("GIT_INDEX_FILE", "/tmp/index"),
            ("HOME", "/home/u"),
        ]);
        let names: Vec<_> = r.env.iter().map(|(k, _)| k.to_str().unwrap()).collect();
        assert_eq!(names, ["PATH", "HOME"]);
    }

    #[test]
    fn a_shielded_command_goes_on_past_a_stop_signal_in_a_group_of_its_own() {
        let sh =
            Runner::new([("PATH", std::env::var("PATH").unwrap_or_default())]).with_program("sh");
        // The shell may let a pending signal end it as it exits; what counts is that
        // the signal did not stop it before its work was done.
        let script = "kill -TERM $$; kill -INT $$; echo alive; cut -d' ' -f5 /proc/$$/stat";
        let out = sh.run_shielded(Path::new("/"), &["-c", script]).unwrap();
        let mut lines = out.stdout.lines();
        assert_eq!(lines.next(), Some("alive"), "{out:?}");
        let group: i32 = lines.next().unwrap().parse().unwrap();
        assert_ne!(group, nix::unistd::getpgrp().as_raw());
        // Unshielded, the same signal ends it at once.
        let out = sh.run(Path::new("/"), &["-c", script]).unwrap();
        assert_eq!((out.code, out.stdout.as_str()), (None, ""), "{out:?}");
    }

    #[test]
    fn first_line_skips_blank_lines_and_falls_back() {
        let out = Output {
            code: Some(128),
            stdout: "out\n".into(),
            stderr: "\n  fatal: bad thing  \nmore\n".into(),
        };
        assert_eq!(out.first_line(), "fatal: bad thing");
        let quiet = Output {
            code: Some(1),
            stdout: String::new(),
            stderr: String::new(),
        };
        assert_eq!(quiet.first_line(), "exit code 1");
        assert_eq!(first_line(" \n\t\n"), None);
    }
}
