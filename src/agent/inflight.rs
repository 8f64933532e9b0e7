//! Commands in flight when an agent ends: the shell commands it had started through
//! `spice exec` that were still running when the agent exited or was killed. The shim
//! finds them among the processes it is about to end and records them in
//! `<state>/interrupted/<session>.json`; the session's successor (or, headless, its
//! next turn) gets them in its brief.
//!
//! Why not the transcript: an agent writes its transcript on its own schedule. Claude
//! Code killed a moment after starting a command may never have written the call, and
//! a resumed Claude conversation leaves a call without a result out, so without this
//! record the next session cannot know what was cut off.

use std::path::{Path, PathBuf};

/// Where the record of `session`'s interrupted commands is; none for a session id
/// that is not a plain name (spice's are UUIDs).
pub fn record_path(state_dir: &Path, session: &str) -> Option<PathBuf> {
    let plain = !session.is_empty()
        && session.len() <= 128
        && session
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    plain.then(|| {
        state_dir
            .join("interrupted")
            .join(format!("{session}.json"))
    })
}

/// The command a process runs, if it is a `spice exec` wrapper (`argv[0]` is this
/// program, `exec --` follows): the shell's `-c` string, else the argv joined.
pub fn command_of(argv: &[String]) -> Option<String> {
    let rest = match argv {
        [_, exec, dashes, rest @ ..] if exec == "exec" && dashes == "--" && !rest.is_empty() => {
            rest
        }
        _ => return None,
    };
    Some(match rest {
        [_, flag, cmd, ..] if flag.starts_with('-') && flag.ends_with('c') => cmd.clone(),
        _ => rest.join(" "),
    })
}

/// The commands that `spice exec` wrappers among `pids` run (the wrappers of this
/// very binary only), in pid order.
pub fn collect(pids: &[u32]) -> Vec<String> {
    let me = std::fs::read_link("/proc/self/exe").ok();
    let mut pids = pids.to_vec();
    pids.sort_unstable();
    pids.into_iter()
        .filter(|pid| me.is_some() && std::fs::read_link(format!("/proc/{pid}/exe")).ok() == me)
        .filter_map(|pid| {
            let raw = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
            let argv: Vec<String> = raw
                .split(|b| *b == 0)
                .filter(|a| !a.is_empty())
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect();
            command_of(&argv)
        })
        .collect()
}

/// Records `commands` for `session`; nothing to record writes nothing.
pub fn write(state_dir: &Path, session: &str, commands: &[String]) -> std::io::Result<()> {
    let Some(path) = record_path(state_dir, session).filter(|_| !commands.is_empty()) else {
        return Ok(());
    };
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let tmp = path.with_extension("json.tmp");
    std::fs::write(
        &tmp,
        serde_json::json!({ "commands": commands }).to_string(),
    )?;
    std::fs::rename(&tmp, &path)
}

/// The commands recorded for `session` (none if there is no readable record).
pub fn read(state_dir: &Path, session: &str) -> Vec<String> {
    let Some(Ok(text)) = record_path(state_dir, session).map(std::fs::read_to_string) else {
        return Vec::new();
    };
    serde_json::from_str::<serde_json::Value>(&text)
        .ok()
        .and_then(|v| {
            v["commands"].as_array().map(|a| {
                a.iter()
                    .filter_map(|c| c.as_str().map(str::to_string))
                    .collect()
            })
        })
        .unwrap_or_default()
}

/// Forgets `session`'s record, once its next session was told.
pub fn clear(state_dir: &Path, session: &str) {
    if let Some(p) = record_path(state_dir, session) {
        let _ = std::fs::remove_file(p);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn the_shell_string_of_a_wrapper_is_its_command() {
        assert_eq!(
            command_of(&v(&[
                "/x/spice",
                "exec",
                "--",
                "/bin/bash",
                "-c",
                "sleep 9; echo",
                "bash"
            ])),
            Some("sleep 9; echo".into())
        );
        assert_eq!(
            command_of(&v(&["spice", "exec", "--", "bash", "-lc", "make test"])),
            Some("make test".into())
        );
        assert_eq!(
            command_of(&v(&["spice", "exec", "--", "make", "-j2"])),
            Some("make -j2".into())
        );
        for other in [
            &["spice", "exec", "--"][..],
            &["spice", "agent-shim", "--", "claude"],
            &["bash", "-c", "x"],
        ] {
            assert_eq!(command_of(&v(other)), None, "{other:?}");
        }
    }

    #[test]
    fn a_record_is_read_back_and_cleared() {
        let dir = tempfile::tempdir().unwrap();
        assert!(read(dir.path(), "s1").is_empty());
        write(dir.path(), "s1", &[]).unwrap();
        assert!(!record_path(dir.path(), "s1").unwrap().exists());
        assert!(record_path(dir.path(), "../x").is_none());
        write(dir.path(), "s1", &v(&["sleep 120", "npm test"])).unwrap();
        assert_eq!(read(dir.path(), "s1"), v(&["sleep 120", "npm test"]));
        clear(dir.path(), "s1");
        assert!(read(dir.path(), "s1").is_empty());
    }
}
