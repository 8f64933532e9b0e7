//! What a transcript shows of the gate: commits the pre-commit or commit-msg hook
//! refused (their findings, as the agent saw them), commands that went round the
//! hooks (`git commit --no-verify` or `-n`, hooks switched off with
//! `core.hooksPath`), and edits of the rules themselves (`spice.toml`). Read from the commands and their output alone, so a briefing
//! flags them without a store.

use crate::gate::hooks::REFUSED;
use serde::Serialize;
/// How many finding lines a refusal keeps.
const FINDINGS_KEPT: usize = 8;

#[derive(Debug, Clone, Serialize)]
pub struct GateRefusal {
    pub command: String,
    /// The findings as the hook printed them, one per line (the first few).
    pub findings: Vec<String>,
    pub subagent: Option<String>,
    pub line: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct GateBypass {
    pub command: String,
    /// How it went round the hooks.
    pub how: String,
    pub subagent: Option<String>,
    pub line: u64,
}

/// A line of a hook's output that is a finding.
fn is_finding(line: &str) -> bool {
    const RULES: [&str; 4] = [
        ": file.lines: ",
        ": file.bytes: ",
        ": routine.lines: ",
        ": routine.complexity: ",
    ];
    RULES.iter().any(|r| line.contains(r))
        || (line.starts_with("check.") && line.contains(": failed"))
        || line.starts_with("commit message:")
}

/// The findings of a refused commit's output, if it is one.
pub fn refusal(command: &str, output: &str, failed: bool) -> Option<Vec<String>> {
    let findings: Vec<String> = output
        .lines()
        .map(str::trim_end)
        .filter(|l| is_finding(l))
        .take(FINDINGS_KEPT)
        .map(str::to_string)
        .collect();
    let refused =
        output.contains(REFUSED) || (failed && !findings.is_empty() && command.contains("commit"));
    refused.then_some(findings)
}

/// Shell words, quotes removed; good enough to find a command's options.
fn words(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quote: Option<char> = None;
    let mut any = false;
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some('"'), '\\') => cur.extend(chars.next()),
            (Some(_), c) => cur.push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                any = true;
            }
            (None, '\\') => cur.extend(chars.next()),
            (None, c) if c.is_whitespace() => {
                if any || !cur.is_empty() {
                    out.push(std::mem::take(&mut cur));
                }
                any = false;
            }
            (None, c) => cur.push(c),
        }
    }
    if any || !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// Whether `path` (as a transcript names it: absolute or relative) is a repository's
/// gate configuration.
pub fn is_gate_config(path: &str) -> bool {
    path == crate::gate::config::FILE || path.ends_with(&format!("/{}", crate::gate::config::FILE))
}

/// How `command` goes round the commit hooks, if it does.
pub fn bypass(command: &str) -> Option<String> {
    // One simple command at a time: split at the shell's separators (a rough cut:
    // a separator inside quotes splits a message, which only shortens it).
    for part in command.split(['\n', ';', '&', '|']) {
        let w = words(part);
        let Some(git) = w.iter().position(|x| x == "git" || x.ends_with("/git")) else {
            continue;
        };
        let mut i = git + 1;
        let mut hooks_off = None;
        // git's own options before the subcommand.
        while i < w.len() && w[i].starts_with('-') {
            let opt = &w[i];
            if opt == "-c" || opt == "-C" {
                if let Some(v) = w.get(i + 1) {
                    if opt == "-c" && v.to_ascii_lowercase().starts_with("core.hookspath=") {
                        hooks_off = Some(format!("hooks switched off with `-c {v}`"));
                    }
                }
                i += 2;
            } else {
                i += 1;
            }
        }
        if w.get(i).map(String::as_str) != Some("commit") {
            continue;
        }
        if hooks_off.is_some() {
            return hooks_off;
        }
        for opt in &w[i + 1..] {
            if opt == "--" {
                break;
            }
            if opt == "--no-verify" {
                return Some("`git commit --no-verify`".into());
            }
            // A cluster of short options (`-an`, `-nm msg`): letters up to the first
            // one that takes a value.
            if let Some(cluster) = opt.strip_prefix('-').filter(|c| !c.starts_with('-')) {
                for ch in cluster.chars() {
                    if ch == 'n' {
                        return Some(format!("`git commit {opt}` (-n is --no-verify)"));
                    }
                    if "mFCcSt".contains(ch) {
                        break;
                    }
                }
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commits_that_skip_the_hooks_are_seen() {
        for (cmd, seen) in [
            ("git commit --no-verify -m 'x'", true),
            ("git add . && git commit -nm 'quick'", true),
            ("git commit -an -m x", true),
            ("cd a; git -c core.hooksPath=/dev/null commit -m x", true),
            ("git -C /repo commit --no-verify", true),
            ("/usr/bin/git commit -n", true),
            ("git commit -m 'mention -n and --no-verify in text'", false),
            ("git commit -mn", false),
            ("git commit -m x", false),
            ("git push --no-verify", false),
            ("git log -n 3", false),
            ("echo git commit", false),
        ] {
            assert_eq!(bypass(cmd).is_some(), seen, "{cmd}: {:?}", bypass(cmd));
        }
    }

    #[test]
    fn the_gates_file_is_known_by_its_name() {
        assert!(is_gate_config("spice.toml"));
        assert!(is_gate_config("/work/repo/spice.toml"));
        assert!(!is_gate_config("notspice.toml"));
        assert!(!is_gate_config("spice.toml.bak"));
    }

    #[test]
    fn a_refused_commit_keeps_its_findings() {
        let out = "Exit code 1\nsrc/a.rs:1: file.lines: 40 lines, past the flex ceiling 15 (base 10): split it to 10 or less\n\
                   check.lint: failed:\n    bad\nspice gate: commit refused (2 finding(s)); fix them and commit again\n";
        let f = refusal("git commit -m x", out, true).unwrap();
        assert_eq!(f.len(), 2, "{f:?}");
        assert!(f[0].starts_with("src/a.rs:1: file.lines: 40 lines"));
        assert_eq!(f[1], "check.lint: failed:");
        // The output cut before the last line: the findings and the failure suffice.
        let cut = "src/a.rs:1: file.lines: 40 lines, past the flex ceiling 15";
        assert!(refusal("git commit -m x", cut, true).is_some());
        assert!(refusal("git commit -m x", cut, false).is_none());
        assert!(refusal("cargo test", "ok", true).is_none());
        let msg = "commit message:1: subject.length: 90 characters > 72\nspice gate: commit refused; fix the message and commit again\n";
        assert_eq!(refusal("git commit", msg, true).unwrap().len(), 1);
    }
}
