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
    /// Threads reading its piped stdout and stderr as they come (see [`Self::drained`]).
    drains: Vec<(Which, std::thread::JoinHandle<Vec<u8>>)>,
}

#[derive(Clone, Copy, PartialEq)]
enum Which {
    Out,
    Err,
}

impl Supervisor {
    /// Spawns `cmd` (a `spice fleet up` of `env`).
    pub fn spawn(env: &TestEnv, cmd: &mut Command) -> Supervisor {
        Supervisor {
            child: Some(cmd.spawn().expect("spice runs")),
            home: env.home.clone(),
            drains: Vec::new(),
        }
    }

    /// Reads its piped stdout and stderr on threads from now on, so a pipe nobody
    /// reads until the end never fills and blocks the supervisor (its lane events go
    /// to stderr as they happen); [`Self::wait_with_output`] gives what they read.
    pub fn drained(mut self) -> Supervisor {
        fn drain(mut r: impl std::io::Read + Send + 'static) -> std::thread::JoinHandle<Vec<u8>> {
            std::thread::spawn(move || {
                let mut b = Vec::new();
                let _ = r.read_to_end(&mut b);
                b
            })
        }
        let child = self.child_mut();
        let (out, err) = (child.stdout.take(), child.stderr.take());
        if let Some(o) = out {
            self.drains.push((Which::Out, drain(o)));
        }
        if let Some(e) = err {
            self.drains.push((Which::Err, drain(e)));
        }
        self
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
        let mut out = child.wait_with_output().expect("the supervisor ends");
        for (which, t) in self.drains.drain(..) {
            let read = t.join().unwrap_or_default();
            match which {
                Which::Out => out.stdout = read,
                Which::Err => out.stderr = read,
            }
        }
        out
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
