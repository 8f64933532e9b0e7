//! Confinement for what a lane launches: Landlock, the kernel's unprivileged access
//! control, restricting writes to the paths a policy names and signals to the
//! confined processes themselves.
//!
//! Theory: a ruleset is built in the (possibly multi-threaded) launching process,
//! where building may allocate; the forked child, between `fork` and `exec`, only
//! makes two system calls ([`Entry::enter`]: `no_new_privs`, then
//! `landlock_restrict_self`), which allocate nothing. Reads and executions are left
//! open (the agent must read the toolchain and the repository); every kind of write
//! (making, removing, renaming, truncating, writing files, devices, links) is
//! refused outside the writable paths, and a confined process may signal only
//! processes confined by the same ruleset (Landlock's signal scope, ABI 6).
//!
//! Invariants:
//! - [`probe`] says what the kernel offers; nothing here degrades silently: a policy
//!   that cannot be fully enforced is reported by [`Prepared::status`], and a
//!   writable path that does not exist is named, not skipped quietly.
//! - The ruleset handles the write rights of the newest ABI the kernel has, so a
//!   right a newer kernel adds is refused too, never left open by omission.
//!
//! Not yet wired into launching lanes: `fleet check` and the lane rows will say what
//! each lane gets (issue #39).

use crate::error::{Error, Result};
use landlock::{
    AccessFs, CompatLevel, Compatible, PathBeneath, PathFd, Ruleset, RulesetAttr,
    RulesetCreatedAttr, Scope, ABI,
};
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};

/// What the running kernel offers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Offer {
    /// The Landlock ABI version, when Landlock is enabled.
    pub landlock: Option<i32>,
}

impl Offer {
    /// One line: what confinement a lane can have here.
    pub fn describe(&self) -> String {
        match self.landlock {
            Some(v) if v >= 6 => format!(
                "Landlock ABI {v}: writes confined to named paths, signals to the lane"
            ),
            Some(v) => format!(
                "Landlock ABI {v}: writes confined to named paths; signals not confined (ABI 6 needed)"
            ),
            None => "none: this kernel has no Landlock enabled".into(),
        }
    }
}

/// Asks the kernel which Landlock ABI it has (`landlock_create_ruleset` with the
/// version flag).
pub fn probe() -> Offer {
    const VERSION: u32 = 1; // LANDLOCK_CREATE_RULESET_VERSION
                            // SAFETY: the documented probe: no attribute pointer, size 0, the version flag;
                            // it creates nothing and returns the ABI version or a negative error.
    let v = unsafe {
        nix::libc::syscall(
            nix::libc::SYS_landlock_create_ruleset,
            std::ptr::null::<nix::libc::c_void>(),
            0usize,
            VERSION,
        )
    };
    Offer {
        landlock: (v > 0).then_some(v as i32),
    }
}

/// Where a confined process may write.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Policy {
    /// Directories (and everything beneath) or single files that stay writable.
    pub write: Vec<PathBuf>,
}

/// A ruleset built for a [`Policy`], ready to be entered by a child.
pub struct Prepared {
    fd: Option<OwnedFd>,
    /// Writable paths that did not exist, which the ruleset could not name.
    pub missing: Vec<PathBuf>,
    /// Whether every right asked for is enforced by this kernel.
    pub full: bool,
}

fn err(what: &str, e: impl std::fmt::Display) -> Error {
    Error::Other(format!("sandbox: {what}: {e}"))
}

impl Policy {
    /// Builds the ruleset (in the launching process; may allocate). `Ok` with no
    /// ruleset when the kernel has no Landlock: [`Prepared::status`] says so.
    pub fn prepare(&self) -> Result<Prepared> {
        let abi = ABI::V6;
        let writes = AccessFs::from_write(abi);
        let mut ruleset = Ruleset::default()
            .set_compatibility(CompatLevel::BestEffort)
            .handle_access(writes)
            .map_err(|e| err("handling writes", e))?
            .scope(Scope::Signal)
            .map_err(|e| err("scoping signals", e))?
            .create()
            .map_err(|e| err("creating the ruleset", e))?;
        let mut missing = Vec::new();
        for p in &self.write {
            let fd = match PathFd::new(p) {
                Ok(fd) => fd,
                Err(_) => {
                    missing.push(p.clone());
                    continue;
                }
            };
            // A file gets the rights a file can have; a directory all of them.
            let rights = if p.is_dir() {
                writes
            } else {
                writes & AccessFs::from_file(abi)
            };
            ruleset = ruleset
                .add_rule(PathBeneath::new(fd, rights))
                .map_err(|e| err(&format!("allowing writes under {}", p.display()), e))?;
        }
        let full = probe().landlock.is_some_and(|v| v >= abi as i32);
        Ok(Prepared {
            fd: ruleset.into(),
            missing,
            full,
        })
    }
}

impl Prepared {
    /// One line: what the child will get.
    pub fn status(&self) -> String {
        let mut s = match (&self.fd, self.full) {
            (None, _) => "not confined: no Landlock in this kernel".to_string(),
            (Some(_), true) => "confined (Landlock: writes and signals)".to_string(),
            (Some(_), false) => "partly confined (Landlock older than ABI 6)".to_string(),
        };
        if !self.missing.is_empty() {
            let names: Vec<String> = self
                .missing
                .iter()
                .map(|p| p.display().to_string())
                .collect();
            s.push_str(&format!(
                "; not found, so not writable: {}",
                names.join(", ")
            ));
        }
        s
    }

    /// What a child needs to enter the sandbox: `Copy`, so a `pre_exec` closure can
    /// own it. The [`Prepared`] must outlive the spawn (it holds the ruleset open).
    pub fn entry(&self) -> Entry {
        Entry(self.fd.as_ref().map(|f| f.as_raw_fd()))
    }
}

/// The ruleset's descriptor, for [`Entry::enter`] in a forked child.
#[derive(Debug, Clone, Copy)]
pub struct Entry(Option<std::os::fd::RawFd>);

impl Entry {
    /// Confines the calling process for good. Meant for a child between `fork` and
    /// `exec` (`Command::pre_exec`): two system calls, no allocation.
    pub fn enter(self) -> std::io::Result<()> {
        let Some(fd) = self.0 else {
            return Ok(());
        };
        // SAFETY: plain system calls on integers; nothing is allocated or locked.
        unsafe {
            if nix::libc::prctl(nix::libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            if nix::libc::syscall(nix::libc::SYS_landlock_restrict_self, fd, 0u32) != 0 {
                return Err(std::io::Error::last_os_error());
            }
        }
        Ok(())
    }
}

/// Whether `path` is one a [`Policy`] may name: absolute, with no `..`.
pub fn nameable(path: &Path) -> bool {
    path.is_absolute()
        && !path
            .components()
            .any(|c| matches!(c, std::path::Component::ParentDir))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::CommandExt;
    use std::process::Command;

    fn confined(p: &Prepared, script: &str) -> std::process::Output {
        let mut cmd = Command::new("sh");
        cmd.args(["-c", script]);
        let entry = p.entry();
        // SAFETY: `enter` makes two system calls and allocates nothing.
        unsafe {
            cmd.pre_exec(move || entry.enter());
        }
        cmd.output().unwrap()
    }

    #[test]
    #[ignore = "needs Landlock in the kernel (.ci/run asks for it)"]
    fn writes_are_confined_to_the_named_paths_and_signals_to_the_sandbox() {
        let offer = probe();
        assert!(offer.landlock.is_some(), "{}", offer.describe());
        let d = tempfile::tempdir().unwrap();
        let inside = d.path().join("inside");
        let outside = d.path().join("outside");
        std::fs::create_dir_all(&inside).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(outside.join("keep"), "x").unwrap();
        let p = Policy {
            write: vec![inside.clone(), "/dev/null".into(), d.path().join("nope")],
        }
        .prepare()
        .unwrap();
        assert_eq!(p.missing, vec![d.path().join("nope")]);
        assert!(
            p.status().contains("not found, so not writable"),
            "{}",
            p.status()
        );
        let o = confined(
            &p,
            &format!(
                "echo a > {i}/new && mkdir {i}/dir && echo hi > /dev/null && cat {o}/keep",
                i = inside.display(),
                o = outside.display()
            ),
        );
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        assert_eq!(String::from_utf8_lossy(&o.stdout), "x");
        for attempt in [
            format!("echo a > {}/new", outside.display()),
            format!("rm {}/keep", outside.display()),
            format!("mv {}/keep {}/moved", outside.display(), inside.display()),
            format!("mkdir {}/d", outside.display()),
        ] {
            let o = confined(&p, &attempt);
            assert!(!o.status.success(), "{attempt} was allowed");
        }
        assert!(outside.join("keep").is_file());
        if offer.landlock.is_some_and(|v| v >= 6) {
            // A process outside the sandbox cannot be signalled from inside it.
            let mut victim = Command::new("sleep").arg("30").spawn().unwrap();
            let o = confined(&p, &format!("kill -TERM {}", victim.id()));
            assert!(!o.status.success(), "signalled a process outside");
            assert!(victim.try_wait().unwrap().is_none());
            victim.kill().unwrap();
            victim.wait().unwrap();
        }
    }

    #[test]
    fn only_absolute_plain_paths_are_nameable() {
        assert!(nameable(Path::new("/a/b")));
        assert!(!nameable(Path::new("a/b")));
        assert!(!nameable(Path::new("/a/../b")));
    }
}
