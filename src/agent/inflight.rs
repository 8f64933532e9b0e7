//! Commands in flight when an agent ends: the shell commands it had started through
//! `spice exec` that were still running when the agent exited or was killed. The shim
//! finds them among the processes it is about to end and records them in
//! `<state>/interrupted/<session>.json`; the session's successor (or, headless, its
//! next turn) gets them in its brief.
//!
//! A signal sent to the agent's whole process group (the supervisor stopping it, the
//! terminal hanging up) reaches the wrappers as soon as the agent, so they may be gone
//! before the shim looks. A wrapper that is told to stop by such a signal therefore
//! notes its own command first (`<state>/interrupted/<session>/<pid>.json`); the shim
//! keeps the notes made shortly before the agent ended ([`SIGNALLED_WITHIN`]), since an
//! older one is a command the agent saw end and lived on.
//!
//! Why not the transcript: an agent writes its transcript on its own schedule. Claude
//! Code killed a moment after starting a command may never have written the call, and
//! a resumed Claude conversation leaves a call without a result out, so without this
//! record the next session cannot know what was cut off.
//!
//! What a wrapper sees is the agent CLI's shell text, the agent's command inside it
//! (see [`wrapping`]); a record holds the command the agent asked to run.

mod wrapping;

pub use wrapping::agent_command;

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// How recent a wrapper's own note must be, when its agent ends, to count.
pub const SIGNALLED_WITHIN: Duration = Duration::from_secs(3);
/// The longest command text a brief quotes, and how many commands it lists.
pub const QUOTE_CHARS: usize = 300;
pub const QUOTE_COMMANDS: usize = 5;

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
/// program, `exec --` follows).
pub fn command_of(argv: &[String]) -> Option<String> {
    match argv {
        [_, exec, dashes, rest @ ..] if exec == "exec" && dashes == "--" => command_text(rest),
        _ => None,
    }
}

/// How a wrapped command reads: a shell's `-c` string, as the agent wrote it
/// ([`agent_command`]), else its argv joined.
pub fn command_text(argv: &[String]) -> Option<String> {
    match argv {
        [] => None,
        [sh, flag, cmd, ..] if wrapping::is_shell(sh) && wrapping::is_command_flag(flag) => {
            Some(agent_command(cmd))
        }
        _ => Some(argv.join(" ")),
    }
}

/// A program's path as `/proc/PID/exe` names it, without the mark of a replaced file.
fn exe(pid: &str) -> Option<PathBuf> {
    let p = std::fs::read_link(format!("/proc/{pid}/exe")).ok()?;
    let s = p.to_string_lossy();
    Some(match s.strip_suffix(" (deleted)") {
        Some(kept) => PathBuf::from(kept),
        None => p,
    })
}

/// The `spice exec` wrappers among `pids` (of this very program, even if its file
/// was replaced meanwhile) and their commands, in pid order.
pub fn collect(pids: &[u32]) -> Vec<(u32, String)> {
    let me = exe("self");
    let mut pids = pids.to_vec();
    pids.sort_unstable();
    pids.into_iter()
        .filter(|pid| me.is_some() && exe(&pid.to_string()) == me)
        .filter_map(|pid| {
            let raw = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
            let argv: Vec<String> = raw
                .split(|b| *b == 0)
                .filter(|a| !a.is_empty())
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect();
            Some((pid, command_of(&argv)?))
        })
        .collect()
}

fn millis(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// A wrapper's own note that a signal is stopping its command (see the module docs).
pub fn note_signalled(state_dir: &Path, session: &str, pid: u32, command: &str) {
    let Some(dir) = record_path(state_dir, session).map(|p| p.with_extension("")) else {
        return;
    };
    if std::fs::create_dir_all(&dir).is_err() {
        return;
    }
    let note = serde_json::json!({ "command": command, "at_ms": millis(SystemTime::now()) });
    let tmp = dir.join(format!("{pid}.tmp"));
    if std::fs::write(&tmp, note.to_string()).is_ok() {
        let _ = std::fs::rename(&tmp, dir.join(format!("{pid}.json")));
    }
}

/// Takes the wrappers' notes for `session` (removing them all): those made within
/// [`SIGNALLED_WITHIN`] before now, as (pid, command).
pub fn take_signalled(state_dir: &Path, session: &str) -> Vec<(u32, String)> {
    let Some(dir) = record_path(state_dir, session).map(|p| p.with_extension("")) else {
        return Vec::new();
    };
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Vec::new();
    };
    let oldest = millis(SystemTime::now() - SIGNALLED_WITHIN);
    let mut out: Vec<(u32, String)> = entries
        .flatten()
        .filter_map(|e| {
            let pid = e.path().file_stem()?.to_str()?.parse::<u32>().ok()?;
            let v: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(e.path()).ok()?).ok()?;
            if v["at_ms"].as_u64()? < oldest {
                return None;
            }
            Some((pid, v["command"].as_str()?.to_string()))
        })
        .collect();
    let _ = std::fs::remove_dir_all(&dir);
    out.sort();
    out
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

/// The commands recorded for `session` (none if there is no readable record), as the
/// agent wrote them: a record an older spice wrote may hold the CLI's wrapping.
pub fn read(state_dir: &Path, session: &str) -> Vec<String> {
    let Some(Ok(text)) = record_path(state_dir, session).map(std::fs::read_to_string) else {
        return Vec::new();
    };
    serde_json::from_str::<serde_json::Value>(&text)
        .ok()
        .and_then(|v| {
            v["commands"].as_array().map(|a| {
                a.iter()
                    .filter_map(|c| c.as_str().map(agent_command))
                    .collect()
            })
        })
        .unwrap_or_default()
}

/// Forgets `session`'s record (and any wrapper notes), once its next session was
/// told or when no session follows it.
pub fn clear(state_dir: &Path, session: &str) {
    if let Some(p) = record_path(state_dir, session) {
        let _ = std::fs::remove_file(&p);
        let _ = std::fs::remove_file(p.with_extension("json.tmp"));
        let _ = std::fs::remove_dir_all(p.with_extension(""));
    }
}

/// Removes every record whose session is not in `keep` (the current claimants): what
/// a session no successor followed left behind.
pub fn prune(state_dir: &Path, keep: &[String]) {
    let Ok(entries) = std::fs::read_dir(state_dir.join("interrupted")) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let session = name.split('.').next().unwrap_or_default();
        if !keep.iter().any(|k| k == session) {
            let p = e.path();
            let _ = if p.is_dir() {
                std::fs::remove_dir_all(p)
            } else {
                std::fs::remove_file(p)
            };
        }
    }
}

/// How a brief quotes a command: on one line (a line break shows as ` ↵ `), in
/// backquotes; past [`QUOTE_CHARS`] characters, its start and its end (a heredoc
/// shows its first line, a long pipeline where it ends).
pub fn quote(command: &str) -> String {
    let one = command
        .trim()
        .lines()
        .map(str::trim_end)
        .collect::<Vec<_>>()
        .join(" ↵ ")
        .replace('`', "'");
    let n = one.chars().count();
    if n <= QUOTE_CHARS {
        return format!("`{one}`");
    }
    let half = QUOTE_CHARS / 2;
    let head: String = one.chars().take(half).collect();
    let tail: String = one.chars().skip(n - half).collect();
    format!("`{head} … {tail}`")
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
        // Only a shell's -c is a command string.
        assert_eq!(
            command_of(&v(&["spice", "exec", "--", "grep", "-c", "x", "f"])),
            Some("grep -c x f".into())
        );
        for other in [
            &["spice", "exec", "--"][..],
            &["spice", "agent-shim", "--", "claude"],
            &["bash", "-c", "x"],
        ] {
            assert_eq!(command_of(&v(other)), None, "{other:?}");
        }
    }

    /// Defect 7: the brief quoted Claude Code's and Codex's shell set-up, cut before the
    /// agent's command appeared.
    #[test]
    fn a_record_holds_the_agents_command_not_its_clis_wrapping() {
        let claude = "source /root/.claude/shell-snapshots/snapshot-bash-1796000000000-k3x9qa.sh \
                      2>/dev/null || true && shopt -u extglob 2>/dev/null || true && eval \
                      'sleep 120; echo '\"'\"'never'\"'\"'' < /dev/null && pwd -P >| /tmp/claude-4f0c-cwd";
        let argv = [
            "/x/spice",
            "exec",
            "--",
            "/bin/bash",
            "-c",
            claude,
            "/bin/bash",
        ];
        assert_eq!(
            command_of(&v(&argv)).as_deref(),
            Some("sleep 120; echo 'never'")
        );
        // A record an older spice wrote, wrapping and all.
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "s1", &v(&[claude, "make -j2"])).unwrap();
        let read = read(dir.path(), "s1");
        assert_eq!(read, v(&["sleep 120; echo 'never'", "make -j2"]));
        assert_eq!(quote(&read[0]), "`sleep 120; echo 'never'`");
    }

    #[test]
    fn a_wrapper_note_counts_only_while_recent() {
        let dir = tempfile::tempdir().unwrap();
        note_signalled(dir.path(), "s1", 42, "make test");
        note_signalled(dir.path(), "s1", 7, "sleep 9");
        let old = dir.path().join("interrupted/s1/9.json");
        std::fs::write(&old, r#"{"command":"ls","at_ms":1}"#).unwrap();
        assert_eq!(
            take_signalled(dir.path(), "s1"),
            vec![(7, "sleep 9".to_string()), (42, "make test".to_string())]
        );
        assert!(!dir.path().join("interrupted/s1").exists());
        assert!(take_signalled(dir.path(), "s1").is_empty());
    }

    #[test]
    fn prune_keeps_the_claimants_records_only() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "keep", &v(&["a"])).unwrap();
        write(dir.path(), "gone", &v(&["b"])).unwrap();
        note_signalled(dir.path(), "gone2", 1, "c");
        prune(dir.path(), &v(&["keep"]));
        assert_eq!(read(dir.path(), "keep"), v(&["a"]));
        assert!(read(dir.path(), "gone").is_empty());
        assert!(!dir.path().join("interrupted/gone2").exists());
    }

    #[test]
    fn a_quote_is_one_short_line() {
        assert_eq!(quote("  sleep 1\n"), "`sleep 1`");
        assert_eq!(quote("cat > f <<EOF\nx\nEOF"), "`cat > f <<EOF ↵ x ↵ EOF`");
        let long = format!("{}{}", "x".repeat(QUOTE_CHARS), "sleep 9");
        let q = quote(&long);
        assert!(q.starts_with("`xxx") && q.ends_with("xsleep 9`"), "{q}");
        assert_eq!(q.chars().count(), QUOTE_CHARS + 5);
        assert_eq!(quote("echo `date`"), "`echo 'date'`");
    }
}
