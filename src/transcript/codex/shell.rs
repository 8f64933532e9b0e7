//! Shell command lines and the exit-code styles of Codex tool outputs.
//!
//! Codex has reported a command's outcome in three shapes over its versions: a JSON
//! string `{"output","metadata":{"exit_code"}}` (`shell`, bare era to 0.77, and
//! `apply_patch` in 0.125), a text header (`Chunk ID`/`Wall time`/`Process exited with
//! code N`/`Output:` for unified exec, `Exit code: N` for freeform tools), and plain text,
//! which for `shell` means the call failed before or without running. [`read`]
//! reads any of them without deciding what plain text means; the caller knows the tool.

use serde_json::Value;
use std::borrow::Cow;

/// The command line a shell tool ran, from its argv: the script itself for
/// `bash -lc <script>` (what the agent wrote), otherwise the words shell-quoted.
pub(super) fn command_line(argv: &[&str]) -> String {
    if let [shell, flag, script] = argv {
        let base = shell.rsplit('/').next().unwrap_or(shell);
        if matches!(base, "bash" | "zsh" | "sh" | "dash") && matches!(*flag, "-lc" | "-c" | "-cl") {
            return (*script).to_string();
        }
    }
    let mut s = String::new();
    for (i, a) in argv.iter().enumerate() {
        if i > 0 {
            s.push(' ');
        }
        s.push_str(&quote(a));
    }
    s
}

fn quote(arg: &str) -> Cow<'_, str> {
    let safe = |c: char| c.is_ascii_alphanumeric() || "_@%+=:,./-".contains(c);
    if !arg.is_empty() && arg.chars().all(safe) {
        Cow::Borrowed(arg)
    } else {
        Cow::Owned(format!("'{}'", arg.replace('\'', r"'\''")))
    }
}

/// The strings of a JSON array (non-strings are skipped).
pub(super) fn strings(v: Option<&Value>) -> Option<Vec<&str>> {
    Some(v?.as_array()?.iter().filter_map(Value::as_str).collect())
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) enum Style {
    Json,
    Header,
    #[default]
    Plain,
}

/// What a tool output says about the command behind it.
#[derive(Debug)]
pub(super) struct Reading<'a> {
    pub style: Style,
    pub exit: Option<i32>,
    /// Unified exec: the process still runs under this session id.
    pub running: Option<&'a str>,
    /// The command's own output, without the envelope or header.
    pub body: Cow<'a, str>,
}

const HEADER_KEYS: [&str; 7] = [
    "Chunk ID:",
    "Wall time:",
    "Process exited with code ",
    "Process running with session ID ",
    "Original token count:",
    "Exit code:",
    "Total output lines:",
];

/// `{"output","metadata":{"exit_code"}}` inside an output string.
#[derive(serde::Deserialize)]
struct Wrapped<'a> {
    #[serde(borrow)]
    output: Option<Cow<'a, str>>,
    metadata: Option<Value>,
}

pub(super) fn read(raw: &str) -> Reading<'_> {
    if raw.starts_with('{') {
        if let Ok(Wrapped {
            output: Some(body),
            metadata,
        }) = serde_json::from_str(raw)
        {
            let exit = metadata
                .as_ref()
                .and_then(|m| m.get("exit_code"))
                .and_then(as_i32);
            return Reading {
                style: Style::Json,
                exit,
                running: None,
                body,
            };
        }
    }
    if !HEADER_KEYS.iter().any(|k| raw.starts_with(k)) {
        return Reading {
            style: Style::Plain,
            exit: None,
            running: None,
            body: Cow::Borrowed(raw),
        };
    }
    let mut out = Reading {
        style: Style::Header,
        exit: None,
        running: None,
        body: Cow::Borrowed(""),
    };
    let mut rest = raw;
    // The header is a handful of lines; stop at `Output:` so command output is never read as one.
    for _ in 0..8 {
        let (line, after) = rest.split_once('\n').unwrap_or((rest, ""));
        rest = after;
        if line == "Output:" {
            out.body = Cow::Borrowed(rest);
            break;
        }
        if let Some(n) = line
            .strip_prefix("Process exited with code ")
            .or_else(|| line.strip_prefix("Exit code: "))
        {
            out.exit = n.trim().parse().ok();
        } else if let Some(id) = line.strip_prefix("Process running with session ID ") {
            out.running = Some(id.trim());
        }
        if rest.is_empty() {
            break;
        }
    }
    out
}

/// The exit code inside Codex's plain-text sandbox failure
/// (`failed in sandbox … sandbox denied exec error, exit code: 2, stdout: …`).
pub(super) fn sandbox_exit(raw: &str) -> Option<i32> {
    if !raw.starts_with("failed in sandbox") {
        return None;
    }
    let rest = &raw[raw.find("exit code: ")? + "exit code: ".len()..];
    let end = rest
        .find(|c: char| !(c.is_ascii_digit() || c == '-'))
        .unwrap_or(rest.len());
    rest[..end].parse().ok()
}

/// Whether a plain-text tool output reads as an error report
/// (`write_stdin failed: …`, `tool call error: …`, `error: …`).
pub(super) fn reads_as_failure(raw: &str) -> bool {
    let head = raw.trim_start().lines().next().unwrap_or("");
    head.starts_with("tool call error")
        || head.starts_with("error:")
        || head.starts_with("Error:")
        || head
            .split_once(" failed")
            .is_some_and(|(w, _)| !w.is_empty() && !w.contains(' '))
}

pub(super) fn as_i32(v: &Value) -> Option<i32> {
    v.as_i64().and_then(|n| i32::try_from(n).ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn command_lines() {
        assert_eq!(command_line(&["/bin/bash", "-lc", "ls -la"]), "ls -la");
        assert_eq!(
            command_line(&["rg", "-n", "a b", "it's"]),
            r"rg -n 'a b' 'it'\''s'"
        );
    }

    #[test]
    fn every_output_style() {
        let r =
            read("Chunk ID: a\nWall time: 0 seconds\nProcess exited with code 3\nOutput:\nout\n");
        assert_eq!(
            (r.style, r.exit, r.running, &*r.body),
            (Style::Header, Some(3), None, "out\n")
        );
        let r = read("Chunk ID: a\nProcess running with session ID 42\nOutput:\n");
        assert_eq!((r.exit, r.running), (None, Some("42")));
        let r = read("Exit code: 0\nWall time: 1 seconds\nOutput:\nSuccess.");
        assert_eq!((r.exit, &*r.body), (Some(0), "Success."));
        let r = read(r#"{"output":"Exit code: 9\n","metadata":{"exit_code":2}}"#);
        assert_eq!(
            (r.style, r.exit, &*r.body),
            (Style::Json, Some(2), "Exit code: 9\n")
        );
        let r = read("error: Failed to find expected lines");
        assert_eq!((r.style, r.exit), (Style::Plain, None));
        let denied = "failed in sandbox LinuxSeccomp with execution error: sandbox denied exec error, exit code: 2, stdout: ";
        assert_eq!(sandbox_exit(denied), Some(2));
        assert!(reads_as_failure("write_stdin failed: stdin is closed"));
        assert!(reads_as_failure(
            "tool call error: tool call failed for `memory/x`"
        ));
        assert!(!reads_as_failure("Plan updated"));
    }
}
