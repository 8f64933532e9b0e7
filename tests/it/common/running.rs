//! A `spice exec` kept running: its command ends only when the test lets it, and what
//! the wrapper writes on stderr is collected as it comes, so a test can see an item
//! shown mid-command.

use super::TestEnv;
use std::io::Read;
use std::path::PathBuf;
use std::process::{Child, Stdio};
use std::sync::mpsc::Receiver;
use std::time::Duration;

/// `spice exec` for lane `core` running a command that ends only when told to, with
/// its stderr collected as it comes.
pub struct Running {
    child: Child,
    stderr: Receiver<String>,
    seen: String,
    started: PathBuf,
    release: PathBuf,
}

impl Running {
    pub fn start(env: &TestEnv) -> Running {
        let started = env.dir.path().join("started");
        let release = env.dir.path().join("release");
        let script = format!(
            "touch '{}'; while [ ! -e '{}' ]; do sleep 0.05; done",
            started.display(),
            release.display()
        );
        let mut child = env
            .cmd(&["exec", "--", "sh", "-c", &script])
            .env("SPICE_LANE", "core")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stderr = child.stderr.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            let mut seen = Vec::new();
            while let Ok(n) = stderr.read(&mut buf) {
                if n == 0 {
                    break;
                }
                seen.extend_from_slice(&buf[..n]);
                let _ = tx.send(String::from_utf8_lossy(&seen).into_owned());
            }
        });
        let run = Running {
            child,
            stderr: rx,
            seen: String::new(),
            started,
            release,
        };
        super::wait_for("the command to start", 20, || {
            run.started.exists().then_some(())
        });
        run
    }

    /// Waits until the wrapper's stderr holds `needle`; everything it wrote so far.
    pub fn wait_text(&mut self, needle: &str) -> &str {
        while !self.seen.contains(needle) {
            match self.stderr.recv_timeout(Duration::from_secs(20)) {
                Ok(s) => self.seen = s,
                Err(_) => panic!(
                    "never saw {needle:?} on the wrapper's stderr: {}",
                    self.seen
                ),
            }
        }
        &self.seen
    }

    /// The wrapper's pid.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn still_running(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }

    pub fn finish(mut self) {
        std::fs::write(&self.release, "").unwrap();
        assert!(self.child.wait().unwrap().success());
    }
}
