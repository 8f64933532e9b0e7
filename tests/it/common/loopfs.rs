//! Scratch filesystems for the bed tests: a loop-mounted btrfs or XFS (`reflink=1`)
//! image in a temporary file, or a small tmpfs, mounted on a temporary directory and
//! unmounted (and its loop device detached) on drop, also when the test panics.
//!
//! These need root, loop devices and the mkfs tools; without them [`Mount::new`]
//! panics with a message naming what is missing, so a test asked to run never passes
//! silently.

use std::path::{Path, PathBuf};
use std::process::Command;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Btrfs,
    Xfs,
    /// A tmpfs of the given size in MiB (no image, no loop device).
    Tmpfs,
}

pub struct Mount {
    pub path: PathBuf,
    loop_dev: Option<String>,
    // Dropped after the unmount: holds the image and the mount point.
    _dir: tempfile::TempDir,
}

/// Runs a command, panicking with its output if it fails.
fn run(what: &str, cmd: &mut Command) -> String {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("{what}: cannot run {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{what}: {cmd:?} failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr).trim()
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// Finds a tool in PATH or the sbin directories (which a test's PATH may lack).
fn tool(name: &str, package: &str) -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/sbin", "/usr/bin"].map(PathBuf::from))
        .map(|d| d.join(name))
        .find(|p| p.is_file())
        .unwrap_or_else(|| {
            panic!("needs {name} (apt-get install {package}); not found in PATH or /usr/sbin")
        })
}

impl Mount {
    /// Makes and mounts a filesystem of `kind` and `mib` MiB.
    pub fn new(kind: Kind, mib: u64) -> Mount {
        // SAFETY: geteuid has no preconditions and cannot fail.
        let uid = unsafe { nix::libc::geteuid() };
        assert!(
            uid == 0,
            "needs root to mount a {kind:?} filesystem (running as uid {uid})"
        );
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("mnt");
        std::fs::create_dir(&path).unwrap();
        if kind == Kind::Tmpfs {
            run(
                "mounting a tmpfs",
                Command::new(tool("mount", "mount"))
                    .args([
                        "-t",
                        "tmpfs",
                        "-o",
                        &format!("size={mib}m"),
                        "spice-bed-test",
                    ])
                    .arg(&path),
            );
            return Mount {
                path,
                loop_dev: None,
                _dir: dir,
            };
        }
        assert!(
            Path::new("/dev/loop-control").exists(),
            "needs loop devices: /dev/loop-control is missing"
        );
        let (mkfs, package, opts): (_, _, &[&str]) = match kind {
            Kind::Btrfs => ("mkfs.btrfs", "btrfs-progs", &["-q"]),
            Kind::Xfs => ("mkfs.xfs", "xfsprogs", &["-q", "-m", "reflink=1"]),
            Kind::Tmpfs => unreachable!(),
        };
        let mkfs = tool(mkfs, package);
        let image = dir.path().join("image");
        let f = std::fs::File::create(&image).unwrap();
        f.set_len(mib << 20).unwrap();
        drop(f);
        let dev = run(
            "attaching a loop device",
            Command::new(tool("losetup", "mount"))
                .args(["--find", "--show"])
                .arg(&image),
        );
        // From here on the drop detaches the device, even if mkfs or mount fails.
        let mut m = Mount {
            path,
            loop_dev: Some(dev.clone()),
            _dir: dir,
        };
        run(
            "formatting the image",
            Command::new(&mkfs).args(opts).arg(&dev),
        );
        run(
            "mounting the image",
            Command::new(tool("mount", "mount")).arg(&dev).arg(&m.path),
        );
        m.path = m.path.canonicalize().unwrap();
        m
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        let mounted = std::fs::read_to_string("/proc/self/mounts")
            .unwrap_or_default()
            .lines()
            .any(|l| l.split(' ').nth(1) == Some(&*self.path.to_string_lossy()));
        if mounted {
            let ok = Command::new("umount")
                .arg(&self.path)
                .status()
                .is_ok_and(|s| s.success());
            if !ok {
                // Something still holds a file open: detach it now, freed when released.
                let _ = Command::new("umount").arg("-l").arg(&self.path).status();
            }
        }
        if let Some(dev) = &self.loop_dev {
            let _ = Command::new("losetup").args(["-d", dev]).status();
        }
    }
}
