//! The disk layer of test beds (`spice::bed`) on real filesystems: the machine's own
//! (ext4 or overlay), tmpfs, and loop-mounted btrfs and XFS images (which need root,
//! loop devices and the mkfs tools, hence ignored by a bare `cargo test`).

use crate::common;

use common::loopfs::{Kind, Mount};
use nix::sys::stat::{utimensat, UtimensatFlags};
use nix::sys::time::TimeSpec;
use spice::bed::{self, Method, PathState, SeedPath, SeedReport, SeedRequest};
use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Deterministic bytes that no filesystem compresses or deduplicates away.
fn noise(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

fn write(path: &Path, bytes: &[u8], mode: u32) {
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, bytes).unwrap();
    fs::set_permissions(path, fs::Permissions::from_mode(mode)).unwrap();
}

/// Gives every node under `root` distinct nanosecond times, children before their
/// directory (so filling a directory does not move its time afterwards).
fn stamp_times(root: &Path) {
    fn walk(p: &Path, n: &mut i64) {
        let m = fs::symlink_metadata(p).unwrap();
        if m.is_dir() {
            let mut names: Vec<_> = fs::read_dir(p)
                .unwrap()
                .map(|e| e.unwrap().path())
                .collect();
            names.sort();
            for c in names {
                walk(&c, n);
            }
        }
        *n += 1;
        let t = TimeSpec::new(1_600_000_000 + *n * 7, 123_456_789 + *n);
        let a = TimeSpec::new(1_600_000_000 - *n, 987_654_321 - *n);
        utimensat(None, p, &a, &t, UtimensatFlags::NoFollowSymlink).unwrap();
    }
    walk(root, &mut 0);
}

/// A template worktree: `target/` (modes, links of every kind, a fifo, a socket, an
/// empty directory), `node_modules/` (for hard links) and a nested `web/dist`.
fn make_template(root: &Path) {
    let t = root.join("target");
    write(&t.join("debug/app"), &noise(1, 3000), 0o755);
    write(
        &t.join("debug/.fingerprint/app-1/dep-bin-app"),
        b"dep",
        0o644,
    );
    write(&t.join("debug/deps/libfoo.rlib"), &noise(2, 200_000), 0o644);
    write(&t.join("secret"), b"only me", 0o600);
    write(&t.join("debug/empty-file"), b"", 0o640);
    std::os::unix::fs::symlink("deps/libfoo.rlib", t.join("debug/latest")).unwrap();
    std::os::unix::fs::symlink(t.join("debug/app"), t.join("debug/abs")).unwrap();
    std::os::unix::fs::symlink("/etc/hostname", t.join("debug/outside")).unwrap();
    std::os::unix::fs::symlink("../../nowhere", t.join("debug/dangling")).unwrap();
    nix::unistd::mkfifo(
        &t.join("debug/fifo"),
        nix::sys::stat::Mode::from_bits_truncate(0o600),
    )
    .unwrap();
    drop(std::os::unix::net::UnixListener::bind(t.join("debug/sock")).unwrap());
    fs::create_dir_all(t.join("empty")).unwrap();
    fs::set_permissions(t.join("debug/deps"), fs::Permissions::from_mode(0o711)).unwrap();
    let nm = root.join("node_modules");
    write(&nm.join("pkg/index.js"), b"module.exports = 1;\n", 0o644);
    write(&nm.join("pkg/package.json"), b"{}\n", 0o644);
    fs::create_dir_all(nm.join(".bin")).unwrap();
    std::os::unix::fs::symlink("../pkg/index.js", nm.join(".bin/tool")).unwrap();
    write(&root.join("web/dist/bundle.js"), &noise(3, 5000), 0o644);
    stamp_times(root);
}

fn request(tpl: &Path, dst: &Path) -> SeedRequest {
    SeedRequest {
        template: tpl.to_path_buf(),
        dest: dst.to_path_buf(),
        paths: vec![
            SeedPath::copy("target"),
            SeedPath::link("node_modules"),
            SeedPath::copy("web/dist"),
        ],
    }
}

/// Asserts that `dst_root/rel` is a faithful seed of `tpl_root/rel`: same types,
/// bytes, modes, link texts (absolute ones into the template moved to the
/// destination) and nanosecond times, special files left out.
fn assert_seeded(tpl_root: &Path, dst_root: &Path, rel: &Path) {
    let (src, dst) = (tpl_root.join(rel), dst_root.join(rel));
    let s = fs::symlink_metadata(&src).unwrap();
    let ft = s.file_type();
    if !(ft.is_dir() || ft.is_file() || ft.is_symlink()) {
        assert!(
            fs::symlink_metadata(&dst).is_err(),
            "special file copied: {dst:?}"
        );
        return;
    }
    let d = fs::symlink_metadata(&dst).unwrap_or_else(|e| panic!("{dst:?} missing: {e}"));
    assert_eq!(ft, d.file_type(), "{dst:?}");
    assert_eq!(
        (s.mtime(), s.mtime_nsec()),
        (d.mtime(), d.mtime_nsec()),
        "mtime of {dst:?}"
    );
    if ft.is_symlink() {
        let text = fs::read_link(&src).unwrap();
        let want = match text.strip_prefix(tpl_root) {
            Ok(inner) if text.is_absolute() => dst_root.join(inner),
            _ => text,
        };
        assert_eq!(fs::read_link(&dst).unwrap(), want, "link {dst:?}");
        return;
    }
    assert_eq!(s.mode(), d.mode(), "mode of {dst:?}");
    if ft.is_file() {
        assert_eq!(fs::read(&src).unwrap(), fs::read(&dst).unwrap(), "{dst:?}");
        assert_eq!(s.modified().unwrap(), d.modified().unwrap(), "{dst:?}");
        return;
    }
    let names = |p: &Path| {
        let mut v: Vec<_> = fs::read_dir(p)
            .unwrap()
            .map(|e| e.unwrap())
            .filter(|e| {
                let t = e.file_type().unwrap();
                t.is_dir() || t.is_file() || t.is_symlink()
            })
            .map(|e| e.file_name())
            .collect();
        v.sort();
        v
    };
    assert_eq!(names(&src), names(&dst), "entries of {dst:?}");
    for e in fs::read_dir(&src).unwrap() {
        assert_seeded(tpl_root, dst_root, &rel.join(e.unwrap().file_name()));
    }
}

/// What the machine itself says about reflinks in `dir`: `cp --reflink=always`.
fn cp_can_reflink(dir: &Path) -> bool {
    let (a, b) = (dir.join(".oracle-a"), dir.join(".oracle-b"));
    fs::write(&a, noise(9, 8192)).unwrap();
    let ok = Command::new("cp")
        .arg("--reflink=always")
        .arg(&a)
        .arg(&b)
        .stderr(std::process::Stdio::null())
        .status()
        .unwrap()
        .success();
    let _ = fs::remove_file(&a);
    let _ = fs::remove_file(&b);
    ok
}

/// Seeds the sample template within `base` and checks everything a seeding keeps.
fn seed_and_check(base: &Path) -> (PathBuf, PathBuf, SeedReport) {
    let (tpl, dst) = (base.join("template"), base.join("worktree"));
    make_template(&tpl);
    fs::create_dir_all(&dst).unwrap();
    let reflink = cp_can_reflink(&dst);
    let report = bed::seed(&request(&tpl, &dst)).unwrap();
    for rel in ["target", "node_modules", "web/dist"] {
        assert_seeded(&tpl, &dst, Path::new(rel));
        assert_eq!(bed::state(&dst, Path::new(rel)).unwrap(), PathState::Seeded);
    }
    assert_eq!(report.method == Method::Reflink, reflink, "{report:#?}");
    let target = &report.paths[0];
    let copied = if reflink {
        Method::Reflink
    } else {
        report.method
    };
    assert_eq!(target.method, copied, "{report:#?}");
    assert_eq!(target.counts.files, 5);
    assert_eq!(target.counts.bytes, 3000 + 3 + 200_000 + 7);
    assert_eq!(target.counts.dirs, 6);
    assert_eq!(target.counts.symlinks, 4);
    assert_eq!(target.counts.absolute_links_kept, 1);
    assert_eq!(target.counts.special_skipped, 2);
    assert_eq!(target.rewritten_links.len(), 1);
    assert_eq!(
        target.rewritten_links[0].link,
        Path::new("target/debug/abs")
    );
    assert_eq!(target.rewritten_links[0].to, dst.join("target/debug/app"));
    // Hard links share the template's inodes.
    let nm = &report.paths[1];
    assert_eq!(nm.method, Method::HardLink, "{report:#?}");
    assert_eq!(nm.counts.by_method.get(&Method::HardLink), Some(&2));
    let (a, b) = (
        fs::metadata(tpl.join("node_modules/pkg/index.js")).unwrap(),
        fs::metadata(dst.join("node_modules/pkg/index.js")).unwrap(),
    );
    assert_eq!((a.dev(), a.ino()), (b.dev(), b.ino()));
    assert_eq!(report.total.files, 5 + 2 + 1);
    let leftovers: Vec<_> = fs::read_dir(&dst)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.contains("spice"))
        .collect();
    assert!(
        leftovers.is_empty(),
        "probe or staging left behind: {leftovers:?}"
    );
    let json = serde_json::to_value(&report).unwrap();
    assert_eq!(json["method"], report.method.name());
    assert_eq!(json["paths"][1]["method"], "hard_link");
    (tpl, dst, report)
}

#[test]
fn seeds_on_the_machines_filesystem_by_the_method_it_supports() {
    let t = tempfile::tempdir().unwrap();
    let (_, _, report) = seed_and_check(t.path());
    eprintln!(
        "local filesystem: {} ({:?})",
        report.method.name(),
        report.probe
    );
}

#[test]
fn seeds_on_tmpfs_by_a_copy() {
    let shm = Path::new("/dev/shm");
    let st = nix::sys::statfs::statfs(shm)
        .unwrap_or_else(|e| panic!("needs /dev/shm (a tmpfs) for this test: {e}"));
    assert_eq!(
        st.filesystem_type(),
        nix::sys::statfs::TMPFS_MAGIC,
        "needs /dev/shm to be a tmpfs"
    );
    let t = tempfile::tempdir_in(shm).unwrap();
    let (tpl, dst, report) = seed_and_check(t.path());
    assert_ne!(report.method, Method::Reflink, "tmpfs has no reflinks");
    assert_ne!(report.probe.ficlone, "ok");
    // tmpfs has no FIEMAP: real sizes fall back to st_blocks, and say so.
    let u = bed::added(&dst.join("target"), &[tpl.join("target")]).unwrap();
    assert!(u.fiemap_unsupported > 0, "{u:?}");
    assert!(
        u.note.as_deref().unwrap().contains("FIEMAP unavailable"),
        "{u:?}"
    );
    assert!(u.real >= 200_000, "a copy on tmpfs costs its size: {u:?}");
}

#[test]
fn seeded_mtimes_compare_as_cargo_compares_them() {
    // cargo's fingerprints call a unit fresh when no input is newer than its output:
    // equality must hold exactly, and a 1 ns difference must stay a difference.
    let t = tempfile::tempdir().unwrap();
    let (tpl, dst) = (t.path().join("t"), t.path().join("w"));
    write(&tpl.join("target/debug/dep-info"), b"x", 0o644);
    write(&tpl.join("target/debug/out"), b"y", 0o644);
    let at = |p: &Path, ns: i64| {
        let ts = TimeSpec::new(1_700_000_000, ns);
        utimensat(None, p, &ts, &ts, UtimensatFlags::NoFollowSymlink).unwrap();
    };
    at(&tpl.join("target/debug/dep-info"), 500_000_001);
    at(&tpl.join("target/debug/out"), 500_000_002);
    at(&tpl.join("target/debug"), 999_999_999);
    at(&tpl.join("target"), 1);
    fs::create_dir_all(&dst).unwrap();
    bed::seed(&SeedRequest {
        template: tpl.clone(),
        dest: dst.clone(),
        paths: vec![SeedPath::copy("target")],
    })
    .unwrap();
    let m = |root: &Path, p: &str| {
        fs::symlink_metadata(root.join(p))
            .unwrap()
            .modified()
            .unwrap()
    };
    for p in [
        "target",
        "target/debug",
        "target/debug/dep-info",
        "target/debug/out",
    ] {
        assert_eq!(m(&tpl, p), m(&dst, p), "{p}");
    }
    assert!(m(&dst, "target/debug/dep-info") < m(&dst, "target/debug/out"));
}

#[test]
fn hard_link_paths_fall_back_to_copies_across_devices() {
    let shm = tempfile::tempdir_in("/dev/shm").expect("needs /dev/shm for a second device");
    let local = tempfile::tempdir().unwrap();
    let (tpl, dst) = (shm.path().join("t"), local.path().join("w"));
    make_template(&tpl);
    fs::create_dir_all(&dst).unwrap();
    let tpl_dev = fs::metadata(&tpl).unwrap().dev();
    assert_ne!(
        tpl_dev,
        fs::metadata(&dst).unwrap().dev(),
        "needs two devices"
    );
    let report = bed::seed(&request(&tpl, &dst)).unwrap();
    let nm = &report.paths[1];
    assert!(nm.link);
    assert_eq!(
        nm.counts.by_method.get(&Method::HardLink),
        None,
        "{report:#?}"
    );
    assert_eq!(nm.counts.files, 2);
    assert!(
        report
            .fallbacks
            .iter()
            .any(|f| f.contains("node_modules: the template is on another device")),
        "{report:#?}"
    );
    for rel in ["target", "node_modules", "web/dist"] {
        assert_seeded(&tpl, &dst, Path::new(rel));
    }
}

#[test]
fn refusals_name_the_path_and_write_nothing() {
    let t = tempfile::tempdir().unwrap();
    let (tpl, dst) = (t.path().join("t"), t.path().join("w"));
    make_template(&tpl);
    std::os::unix::fs::symlink("/etc", tpl.join("etc-link")).unwrap();
    std::os::unix::fs::symlink(tpl.join("web"), tpl.join("web-link")).unwrap();
    write(&dst.join("target/mine"), b"precious", 0o644);
    let refused = |paths: Vec<SeedPath>| {
        let e = bed::seed(&SeedRequest {
            template: tpl.clone(),
            dest: dst.clone(),
            paths,
        })
        .unwrap_err();
        let err: spice::Error = e.into();
        assert_eq!(err.exit_code(), 2, "{err}");
        err.to_string()
    };
    assert_eq!(
        refused(vec![SeedPath::copy("../escape")]),
        "../escape: escapes the worktree through '..'"
    );
    assert_eq!(
        refused(vec![SeedPath::copy("/etc")]),
        "/etc: is absolute: bed paths are relative to the worktree"
    );
    assert_eq!(
        refused(vec![SeedPath::copy("web/dist"), SeedPath::copy("missing")]),
        format!("missing: missing from the template {}", tpl.display())
    );
    assert_eq!(
        refused(vec![SeedPath::copy("web/dist"), SeedPath::link("target")]),
        format!(
            "target: already exists in {} with content; seeding never writes over it",
            dst.display()
        )
    );
    assert_eq!(
        refused(vec![SeedPath::copy("etc-link/hostname")]),
        format!(
            "etc-link/hostname: passes through a symlink in the template ({})",
            tpl.join("etc-link").display()
        )
    );
    let e = bed::seed(&SeedRequest {
        template: tpl.clone(),
        dest: PathBuf::from("relative/w"),
        paths: vec![SeedPath::copy("web")],
    })
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        "relative/w: the destination must be an absolute path"
    );
    // Nothing was written: the existing file is intact, nothing else appeared.
    assert_eq!(fs::read(dst.join("target/mine")).unwrap(), b"precious");
    let entries: Vec<_> = fs::read_dir(&dst)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(entries, vec!["target"]);
    // A template path that is itself a symlink out of the template is seeded as the
    // link, never followed; an empty directory at the destination is not content.
    fs::remove_dir_all(dst.join("target")).unwrap();
    fs::create_dir(dst.join("target")).unwrap();
    let report = bed::seed(&SeedRequest {
        template: tpl.clone(),
        dest: dst.clone(),
        paths: vec![
            SeedPath::copy("etc-link"),
            SeedPath::copy("target"),
            SeedPath::copy("web-link"),
        ],
    })
    .unwrap();
    assert_eq!(
        fs::read_link(dst.join("etc-link")).unwrap(),
        Path::new("/etc")
    );
    assert_eq!(report.paths[0].counts.symlinks, 1);
    assert_eq!(report.paths[0].counts.absolute_links_kept, 1);
    // A seeded path that is an absolute link into the template is rewritten, and
    // reported under its own name.
    assert_eq!(
        fs::read_link(dst.join("web-link")).unwrap(),
        dst.join("web")
    );
    let moved = &report.paths[2].rewritten_links;
    assert_eq!(moved.len(), 1, "{report:#?}");
    assert_eq!(moved[0].link.as_os_str(), "web-link");
    assert_seeded(&tpl, &dst, Path::new("target"));
}

#[test]
fn an_interrupted_seeding_is_not_taken_as_seeded() {
    let t = tempfile::tempdir().unwrap();
    let (tpl, dst) = (t.path().join("t"), t.path().join("w"));
    make_template(&tpl);
    // What a crash mid-seed leaves: a partial staging tree and nothing at the name.
    write(&dst.join("target.spice-seeding/debug/app"), b"half", 0o644);
    write(&dst.join("target.spice-seeding/junk"), b"junk", 0o644);
    let target = Path::new("target");
    assert_eq!(bed::state(&dst, target).unwrap(), PathState::Interrupted);
    assert_eq!(
        bed::state(&dst, Path::new("web/dist")).unwrap(),
        PathState::Absent
    );
    let report = bed::seed(&request(&tpl, &dst)).unwrap();
    assert!(report.paths[0].leftover_removed, "{report:#?}");
    assert!(!report.paths[1].leftover_removed);
    assert_eq!(bed::state(&dst, target).unwrap(), PathState::Seeded);
    assert!(!dst.join("target.spice-seeding").exists());
    assert!(!dst.join("target/junk").exists());
    assert_seeded(&tpl, &dst, target);
}

#[test]
#[ignore = "needs root to mount a small tmpfs"]
fn a_seeding_that_fails_midway_publishes_nothing() {
    let small = Mount::new(Kind::Tmpfs, 1);
    let t = tempfile::tempdir().unwrap();
    let tpl = t.path().join("t");
    write(&tpl.join("a/small"), b"fits", 0o644);
    write(&tpl.join("nested/deep/b/big"), &noise(4, 2 << 20), 0o644);
    let dst = small.path.join("w");
    fs::create_dir(&dst).unwrap();
    let e = bed::seed(&SeedRequest {
        template: tpl.clone(),
        dest: dst.clone(),
        paths: vec![SeedPath::copy("a"), SeedPath::copy("nested/deep/b")],
    })
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("w/nested/deep/b.spice-seeding/big") && e.contains("No space left"),
        "{e}"
    );
    let left: Vec<_> = fs::read_dir(&dst)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    // Not even the directories made for the nested path.
    assert!(left.is_empty(), "a failed seeding left {left:?}");
    for p in ["a", "nested/deep/b"] {
        assert_eq!(bed::state(&dst, Path::new(p)).unwrap(), PathState::Absent);
    }
}

#[test]
fn real_usage_counts_hard_links_once_and_copies_in_full() {
    let t = tempfile::tempdir().unwrap();
    let (tpl, dst) = (t.path().join("t"), t.path().join("w"));
    for i in 0..20 {
        write(&tpl.join(format!("target/f{i}")), &noise(i, 100_000), 0o644);
        write(
            &tpl.join(format!("cache/f{i}")),
            &noise(100 + i, 100_000),
            0o644,
        );
    }
    fs::create_dir_all(&dst).unwrap();
    bed::seed(&SeedRequest {
        template: tpl.clone(),
        dest: dst.clone(),
        paths: vec![SeedPath::copy("target"), SeedPath::link("cache")],
    })
    .unwrap();
    let linked = bed::added(&dst.join("cache"), &[tpl.as_path()]).unwrap();
    assert_eq!(linked.apparent, 2_000_000);
    assert!(
        linked.real <= 64 << 10,
        "only the directory is new: {linked:?}"
    );
    let all = bed::measure(&[&tpl, &dst]).unwrap();
    let alone = bed::measure(&[&tpl]).unwrap();
    assert_eq!(
        all.apparent,
        alone.apparent + 2_000_000,
        "linked inodes once: {all:?}"
    );
    let copied = bed::added(&dst.join("target"), &[tpl.as_path()]).unwrap();
    assert_eq!(copied.apparent, 2_000_000);
    if !cp_can_reflink(&dst) {
        assert!(
            copied.real >= 2_000_000,
            "a plain copy costs its size: {copied:?}"
        );
    }
}

/// On a copy-on-write filesystem: FICLONE is chosen, and one more seeded tree of
/// 50 MiB costs a small fraction of that, where a plain copy costs all of it.
fn cow_seeding(kind: Kind) {
    let fs_ = Mount::new(kind, 600);
    let root = &fs_.path;
    let tpl = root.join("template");
    for i in 0..200u64 {
        write(
            &tpl.join(format!("target/debug/deps/f{i:03}")),
            &noise(i, 256 << 10),
            0o644,
        );
    }
    write(&tpl.join("target/debug/app"), &noise(999, 4096), 0o755);
    std::os::unix::fs::symlink(tpl.join("target/debug/app"), tpl.join("target/abs")).unwrap();
    stamp_times(&tpl);
    // The link's text, rewritten into the worktree, is its apparent size.
    let files = 200 * (256 << 10) + 4096;
    let apparent = files + root.join("w2/target/debug/app").as_os_str().len() as u64;
    let mut seeded = Vec::new();
    for w in ["w1", "w2"] {
        let dst = root.join(w);
        fs::create_dir(&dst).unwrap();
        let report = bed::seed(&SeedRequest {
            template: tpl.clone(),
            dest: dst.clone(),
            paths: vec![SeedPath::copy("target")],
        })
        .unwrap();
        assert_eq!(report.method, Method::Reflink, "{kind:?}: {report:#?}");
        assert_eq!(report.probe.ficlone, "ok");
        assert_eq!(report.total.by_method.get(&Method::Reflink), Some(&201));
        assert!(report.fallbacks.is_empty(), "{report:#?}");
        assert_seeded(&tpl, &dst, Path::new("target"));
        seeded.push(dst.join("target"));
    }
    let base = [tpl.join("target"), seeded[0].clone()];
    let extra = bed::added(&seeded[1], &base).unwrap();
    assert_eq!(extra.apparent, apparent, "{extra:?}");
    assert_eq!(extra.fiemap_unsupported, 0, "{extra:?}");
    assert!(
        extra.real * 20 < extra.apparent,
        "{kind:?}: a reflinked tree should add under 5% of its size: {extra:?}"
    );
    // The control: a cold copy on the same filesystem costs its whole size.
    let cold = root.join("cold");
    fs::create_dir(&cold).unwrap();
    let st = Command::new("cp")
        .args(["-a", "--reflink=never"])
        .arg(tpl.join("target"))
        .arg(&cold)
        .status()
        .unwrap();
    assert!(st.success());
    let copy = bed::added(&cold.join("target"), &base).unwrap();
    assert!(copy.real >= files - (64 << 10), "{kind:?}: {copy:?}");
    let total = bed::measure(&[&tpl, &seeded[0], &seeded[1]]).unwrap();
    assert!(
        total.shared >= 50 << 20,
        "shared extents counted: {total:?}"
    );
    assert!(
        total.real < 2 * apparent,
        "three trees, one set of extents: {total:?}"
    );
}

#[test]
#[ignore = "needs root, loop devices and mkfs.btrfs/mkfs.xfs"]
fn btrfs_seeds_by_reflink_and_an_extra_tree_costs_little() {
    cow_seeding(Kind::Btrfs);
}

#[test]
#[ignore = "needs root, loop devices and mkfs.btrfs/mkfs.xfs"]
fn xfs_seeds_by_reflink_and_an_extra_tree_costs_little() {
    cow_seeding(Kind::Xfs);
}
