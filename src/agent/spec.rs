//! What the supervisor asks to launch ([`LaunchSpec`]) and how an agent ended
//! ([`ExitStatus`]). A spec is checked whole before anything starts: a bad one
//! leaves no process, no PTY and no recording behind.

use crate::error::{Error, Result};
use nix::sys::signal::Signal;
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;

/// What to launch and how.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LaunchSpec {
    pub argv: Vec<String>,
    pub cwd: PathBuf,
    /// The agent's whole environment: added to a cleared one, so `PATH`, `HOME`,
    /// `TERM` and `LANG` must be given here explicitly. `PATH` also finds `argv[0]`.
    pub env: Vec<(String, String)>,
    pub cols: u16,
    pub rows: u16,
    /// Where to write the asciicast v2 recording, if anywhere.
    pub recording: Option<PathBuf>,
}

impl LaunchSpec {
    /// An 80×24 terminal, an empty environment and no recording.
    pub fn new<S: Into<String>>(
        argv: impl IntoIterator<Item = S>,
        cwd: impl Into<PathBuf>,
    ) -> Self {
        LaunchSpec {
            argv: argv.into_iter().map(Into::into).collect(),
            cwd: cwd.into(),
            env: Vec::new(),
            cols: 80,
            rows: 24,
            recording: None,
        }
    }

    pub(super) fn check(&self) -> Result<()> {
        if self.argv.first().is_none_or(|a| a.is_empty()) {
            return Err(Error::input("an agent needs a command: argv is empty"));
        }
        if !self.cwd.is_dir() {
            // portable-pty would silently start the agent in $HOME instead.
            return Err(Error::input(format!(
                "agent working directory {} is not a directory",
                self.cwd.display()
            )));
        }
        if self.cols == 0 || self.rows == 0 {
            return Err(Error::input(format!(
                "terminal size {}x{} is empty",
                self.cols, self.rows
            )));
        }
        for (k, v) in &self.env {
            if k.is_empty() || k.contains(['=', '\0']) || v.contains('\0') {
                return Err(Error::input(format!(
                    "environment variable {k:?} cannot be passed to an agent"
                )));
            }
        }
        Ok(())
    }
}

/// How an agent ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitStatus {
    /// It exited with this code.
    Code(i32),
    /// A signal (this number) killed it.
    Signal(i32),
}

impl ExitStatus {
    pub fn success(self) -> bool {
        self == ExitStatus::Code(0)
    }

    /// The code a shell would report: the exit code, or 128+N after signal N.
    pub fn shell_code(self) -> i32 {
        match self {
            ExitStatus::Code(c) => c,
            ExitStatus::Signal(s) => 128 + s,
        }
    }

    pub(super) fn from_std(st: std::process::ExitStatus) -> ExitStatus {
        match (st.code(), st.signal()) {
            (Some(c), _) => ExitStatus::Code(c),
            (None, Some(s)) => ExitStatus::Signal(s),
            // Neither: only stop/continue statuses, which `wait` does not return.
            (None, None) => ExitStatus::Code(1),
        }
    }
}

impl std::fmt::Display for ExitStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            ExitStatus::Code(c) => write!(f, "exited with code {c}"),
            ExitStatus::Signal(s) => match Signal::try_from(s) {
                Ok(sig) => write!(f, "killed by {sig}"),
                Err(_) => write!(f, "killed by signal {s}"),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_specs_are_refused_before_anything_starts() {
        let dir = std::env::temp_dir();
        let mut spec = LaunchSpec::new(Vec::<String>::new(), &dir);
        assert!(spec.check().is_err());
        spec.argv = vec!["true".into()];
        assert!(spec.check().is_ok());
        spec.cwd = dir.join("no such directory, surely");
        assert!(spec.check().is_err());
        spec.cwd = dir.clone();
        spec.cols = 0;
        assert!(spec.check().is_err());
        spec.cols = 80;
        spec.env = vec![("A=B".into(), "c".into())];
        assert!(spec.check().is_err());
    }

    #[test]
    fn exit_statuses_read_as_shells_report_them() {
        assert_eq!(ExitStatus::Code(3).shell_code(), 3);
        assert_eq!(ExitStatus::Signal(9).shell_code(), 137);
        assert_eq!(ExitStatus::Signal(15).to_string(), "killed by SIGTERM");
        assert!(ExitStatus::Code(0).success());
    }
}
