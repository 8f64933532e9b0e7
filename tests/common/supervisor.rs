//! A supervisor a test started, which never outlives the test: dropped while it still
//! runs (the test failed, or returned early), it is asked to stop (SIGTERM, so it
//! ends its agents), then killed; a failing test also kills every process left with
//! its state directory, so a hung agent cannot keep the test runner waiting.

use super::{procs, to_run, Run, TestEnv};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use std::path::PathBuf;
use std::process::{Child, Command, Output};
use std::time::{Duration, Instant};

pub struct Supervisor {
    child: Option<Child>,
    home: PathBuf,
}

impl Supervisor {
    /// Spawns `cmd` (a `spice fleet up` of `env`).
    pub fn spawn(env: &TestEnv, cmd: &mut Command) -> Supervisor {
        Supervisor {
            child: Some(cmd.spawn().expect("spice runs")),
            home: env.home.clone(),
        }
    }

    fn child(&self) -> &Child {
        self.child
            .as_ref()
            .expect("the supervisor was already waited for")
    }

    fn child_mut(&mut self) -> &mut Child {
        self.child
            .as_mut()
            .expect("the supervisor was already waited for")
    }

    pub fn id(&self) -> u32 {
        self.child().id()
    }

    pub fn wait(&mut self) -> std::io::Result<std::process::ExitStatus> {
        self.child_mut().wait()
    }

    pub fn try_wait(&mut self) -> std::io::Result<Option<std::process::ExitStatus>> {
        self.child_mut().try_wait()
    }

    pub fn kill(&mut self) -> std::io::Result<()> {
        self.child_mut().kill()
    }

    /// SIGKILL, the way a crash ends it, and reaps it.
    pub fn kill9(&mut self) {
        procs::kill9(self.child_mut())
    }

    /// Its stdout and stderr pipes (when the command piped them).
    pub fn stdout(&mut self) -> Option<std::process::ChildStdout> {
        self.child_mut().stdout.take()
    }

    pub fn stderr(&mut self) -> Option<std::process::ChildStderr> {
        self.child_mut().stderr.take()
    }

    pub fn wait_with_output(mut self) -> Output {
        let child = self
            .child
            .take()
            .expect("the supervisor was already waited for");
        child.wait_with_output().expect("the supervisor ends")
    }

    /// Waits for it to end by itself and requires that it succeeded.
    #[track_caller]
    pub fn finished(self) -> Run {
        let run = to_run(self.wait_with_output());
        assert_eq!(run.code, 0, "{}", run.stderr);
        run
    }
}

impl Drop for Supervisor {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            if child.try_wait().ok().flatten().is_none() {
                let pid = Pid::from_raw(child.id() as i32);
                let _ = kill(pid, Signal::SIGTERM);
                let deadline = Instant::now() + Duration::from_secs(10);
                while child.try_wait().ok().flatten().is_none() && Instant::now() < deadline {
                    std::thread::sleep(Duration::from_millis(50));
                }
                let _ = child.kill();
                let _ = child.wait();
            }
        }
        if std::thread::panicking() {
            for (pid, _) in procs::processes_of(&self.home) {
                let _ = kill(Pid::from_raw(pid as i32), Signal::SIGKILL);
            }
        }
    }
}
