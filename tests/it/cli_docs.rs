//! `spice completions` and `spice man` through the real binary (issue #40): the
//! scripts name the commands and complete them in bash, zsh and fish as those shells
//! run them (zsh and fish tests ignored unless asked for: `.ci/run` installs the
//! shells and runs them), a page is written for every
//! command `--help` lists, and each command's help says how to install its output;
//! neither offers what clap hides. The page is rendered with the system's `man -l` (or
//! `groff`): without either the rendering is skipped, saying so, except under `CI`,
//! where `.ci/run` installs them and their absence fails the test.

use crate::common;
use common::TestEnv;
use std::path::Path;
use std::process::Command;

/// The commands a `--help` lists, from its "Commands:" block (clap's `help` left out).
fn commands_in_help(help: &str) -> Vec<String> {
    help.lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        // A wrapped description continues on a line indented further.
        .filter(|l| !l.starts_with("   "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .map(str::to_string)
        .collect()
}

fn on_path(program: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {program}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

#[test]
fn the_bash_completion_parses_and_completes_the_commands() {
    let env = TestEnv::new();
    let script = env.run(&["completions", "bash"]).ok().to_string();
    let file = env.dir.path().join("spice.bash");
    std::fs::write(&file, &script).unwrap();
    let check = Command::new("bash").arg("-n").arg(&file).output().unwrap();
    assert!(
        check.status.success(),
        "bash -n refused the script: {}",
        String::from_utf8_lossy(&check.stderr)
    );
    // What bash offers after `spice ` and after `spice task `, as it would at a prompt.
    let offered = |line: &str| -> Vec<String> {
        let words: Vec<&str> = line.split(' ').collect();
        let quoted: Vec<String> = words.iter().map(|w| format!("'{w}'")).collect();
        let (cur, prev) = (words[words.len() - 1], words[words.len() - 2]);
        let probe = format!(
            "source '{}'; COMP_LINE='{line}'; COMP_POINT=${{#COMP_LINE}}; \
             COMP_WORDS=({}); COMP_CWORD={}; _spice spice '{cur}' '{prev}'; \
             printf '%s\\n' \"${{COMPREPLY[@]}}\"",
            file.display(),
            quoted.join(" "),
            words.len() - 1,
        );
        let out = Command::new("bash").args(["-c", &probe]).output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::to_string)
            .collect()
    };
    completes_the_commands(&env, "bash", &offered);
    // What spice runs itself, hidden from --help, is not offered either.
    for hidden in ["agent-shim", "demo-agent", "log-only"] {
        assert!(!script.contains(hidden), "{hidden} offered by\n{script}");
    }
    let words = offered("spice gate ");
    assert!(
        words.iter().any(|w| w == "check") && !words.iter().any(|w| w == "hook"),
        "{words:?}"
    );
}

#[test]
fn every_shell_gets_a_script_and_an_unknown_one_is_refused() {
    let env = TestEnv::new();
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let run = env.run(&["completions", shell]);
        assert!(run.ok().contains("spice"), "{shell}: {}", run.stdout);
        assert!(run.stderr.is_empty(), "{shell}: {}", run.stderr);
    }
    env.run(&["completions", "tcsh"]).fails(2, "tcsh");
}

#[test]
fn man_writes_a_page_for_every_command() {
    let env = TestEnv::new();
    let dir = env.dir.path().join("man/man1");
    let said = env
        .run(&["man", "--dir", dir.to_str().unwrap()])
        .ok()
        .to_string();
    // Every command `--help` lists, at every depth (`fleet service install`).
    let mut expected = Vec::new();
    let mut paths: Vec<Vec<String>> = vec![vec![]];
    while let Some(path) = paths.pop() {
        let mut args: Vec<&str> = path.iter().map(String::as_str).collect();
        args.push("--help");
        let help = env.run(&args).ok().to_string();
        for sub in commands_in_help(&help) {
            paths.push([path.clone(), vec![sub]].concat());
        }
        expected.push(
            ["spice".to_string()]
                .into_iter()
                .chain(path)
                .collect::<Vec<_>>()
                .join("-"),
        );
    }
    assert!(
        expected.contains(&"spice-task-add".to_string()),
        "{expected:?}"
    );
    for name in &expected {
        let page = dir.join(format!("{name}.1"));
        let text =
            std::fs::read_to_string(&page).unwrap_or_else(|e| panic!("{}: {e}", page.display()));
        assert!(
            text.contains(&format!(".TH {name} 1")),
            "{name}: no roff title header in:\n{text}"
        );
    }
    let written = std::fs::read_dir(&dir).unwrap().count();
    assert_eq!(written, expected.len(), "pages beyond those --help lists");
    assert!(
        said.contains(&format!("wrote {written} man pages")),
        "{said}"
    );
    assert!(!dir.join("spice-agent-shim.1").exists());
    render(&dir.join("spice-task-add.1"), "--json");
}

#[test]
fn man_without_dir_prints_the_top_page() {
    let env = TestEnv::new();
    let page = env.run(&["man"]).ok().to_string();
    assert!(page.contains(".TH spice 1"), "{page}");
    assert!(page.contains("completions"), "{page}");
}

#[test]
fn the_help_of_both_says_how_to_install() {
    let env = TestEnv::new();
    let help = env.run(&["completions", "--help"]).ok().to_string();
    assert!(
        help.contains("~/.local/share/bash-completion/completions/spice"),
        "{help}"
    );
    let help = env.run(&["man", "--help"]).ok().to_string();
    assert!(
        help.contains("spice man --dir ~/.local/share/man/man1"),
        "{help}"
    );
}

/// Formats `page` with the system's man (or groff) when there is one, and looks for
/// `needle` in the text; says on stderr when neither is installed, and fails under
/// `CI`, where `.ci/run` installs them.
fn render(page: &Path, needle: &str) {
    let out = if on_path("man") {
        Command::new("man")
            .arg("-l")
            .arg(page)
            .env("MANPAGER", "cat")
            .env("MANWIDTH", "100")
            .env("LC_ALL", "C")
            .output()
    } else if on_path("groff") {
        Command::new("groff")
            .args(["-man", "-Tascii"])
            .arg(page)
            .output()
    } else {
        assert!(
            std::env::var_os("CI").is_none(),
            "neither man nor groff is installed under CI (.ci/run installs man-db)"
        );
        eprintln!("cli_docs: skipped rendering: neither man nor groff is installed");
        return;
    }
    .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && text.contains(needle),
        "{} did not render: {}\n{text}",
        page.display(),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// What zsh's completion system offers for a command line: the script is loaded under
/// `compinit` in an interactive zsh on a pseudo-terminal (`zsh/zpty`), `compadd` is
/// wrapped to print each candidate it is given, and TAB is pressed at the end of the
/// line. (The markers are split in the source so the terminal's echo of it never
/// matches.)
const ZSH_CAPTURE: &str = r#"zmodload zsh/zpty
zpty z zsh -f -i
zpty -w z "PROMPT=; RPROMPT=; autoload -Uz compinit; compinit -u -D; source $2"
zpty -w z 'compadd() {
  local -a __hits __dscr; local __i
  builtin compadd -A __hits -D __dscr "$@"
  for __i in $__hits; do print -r -- "<h""it>$__i"; done
  builtin compadd "$@"
}'
zpty -w z 'finish() { print -r -- "<e""nd>"; exit }; zstyle ":completion:*" menu no; comppostfuncs=(finish)'
zpty -w z 'bindkey "^I" complete-word'
zpty -w -n z "$1"$'\t'
while zpty -r z line; do
  [[ $line == *'<end>'* ]] && break
  [[ $line == *'<hit>'* ]] && print -r -- "${${line#*<hit>}%%$'\r'*}"
done
zpty -d z
"#;

/// The commands `--help` lists, then `task`'s, then `task list`'s `--json`, each
/// offered by `offered` (what a shell completes after that line).
fn completes_the_commands(env: &TestEnv, shell: &str, offered: &dyn Fn(&str) -> Vec<String>) {
    let words = offered("spice ");
    let top = commands_in_help(env.run(&["--help"]).ok());
    assert!(top.len() > 10, "{top:?}");
    for cmd in &top {
        assert!(
            words.contains(cmd),
            "{shell}: {cmd} not offered after 'spice ': {words:?}"
        );
    }
    let words = offered("spice task ");
    for sub in commands_in_help(env.run(&["task", "--help"]).ok()) {
        assert!(
            words.contains(&sub),
            "{shell}: {sub} not offered after 'spice task ': {words:?}"
        );
    }
    let words = offered("spice task list --");
    assert!(words.iter().any(|w| w == "--json"), "{shell}: {words:?}");
    for hidden in ["agent-shim", "demo-agent"] {
        assert!(
            !offered("spice ").iter().any(|w| w == hidden),
            "{shell} offers {hidden}"
        );
    }
}

fn shell_output(mut cmd: Command, what: &str) -> Vec<String> {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("{what}: {e} (.ci/run installs it)"));
    assert!(
        out.status.success(),
        "{what}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| l.split('\t').next().unwrap_or_default().to_string())
        .collect()
}

#[test]
#[ignore = "needs zsh (apt: zsh; installed by .ci/run)"]
fn the_zsh_completion_completes_the_commands_in_zsh() {
    let env = TestEnv::new();
    let script = env.dir.path().join("_spice");
    std::fs::write(&script, env.run(&["completions", "zsh"]).ok()).unwrap();
    let capture = env.dir.path().join("capture.zsh");
    std::fs::write(&capture, ZSH_CAPTURE).unwrap();
    completes_the_commands(&env, "zsh", &|line| {
        let mut cmd = Command::new("timeout");
        cmd.args(["20", "zsh", "-f"])
            .arg(&capture)
            .arg(line)
            .arg(&script)
            .env("HOME", env.dir.path());
        shell_output(cmd, "zsh")
    });
}

#[test]
#[ignore = "needs fish (apt: fish; installed by .ci/run)"]
fn the_fish_completion_completes_the_commands_in_fish() {
    let env = TestEnv::new();
    let script = env.dir.path().join("spice.fish");
    std::fs::write(&script, env.run(&["completions", "fish"]).ok()).unwrap();
    completes_the_commands(&env, "fish", &|line| {
        let mut cmd = Command::new("fish");
        cmd.args(["--no-config", "-c"])
            .arg(format!(
                "source '{}'; complete -C '{line}'",
                script.display()
            ))
            .env("HOME", env.dir.path());
        shell_output(cmd, "fish")
    });
}
