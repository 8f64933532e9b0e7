//! `profiles/NAME.toml`: how to run one agent CLI. The file's name is the profile's.
//!
//! ```toml
//! command = ["claude", "--session-id", "{session_id}", "--model={model}", "{brief}"]
//! resume = ["claude", "--resume", "{session_id}"]   # optional
//! mode = "pty"                                      # or "headless"; default "pty"
//! hooks = ["claude-post-tool-use"]                  # hook kinds the agent supports
//! deliver = "output"                                # or "message" (see `Deliver`)
//! [env]                                             # literal values
//! DISABLE_TELEMETRY = "1"
//! [transcript]                                      # absent: format "none"
//! format = "claude"   # "claude" | "codex" | "gemini" | "qwen" | "terminal" | "none"
//! dir = "{home}/.claude/projects/{cwd_slug}"
//! glob = "{session_id}.jsonl"
//! ```
//!
//! **Templates.** `command`, `resume` and the transcript's `dir` and `glob` are templates:
//! `{name}` is a placeholder, `{{` and `}}` are literal braces, and any other `{…}` is an
//! error located at the placeholder. Argv templates know `{session_id}`, `{brief}`,
//! `{brief_file}`, `{worktree}`, `{model}`, `{task}`, `{lane}` and `{spice}` (the running
//! spice binary). `{model}` is the only optional value: when the lane sets no model, every
//! argv element that uses it is left out, so write a flag and its value as one element
//! (`--model={model}`). `command[0]` is a bare program name (searched on `PATH`), an
//! absolute path, or exactly `{spice}`; it is what `fleet check` looks for.
//!
//! **Transcripts.** `dir` knows `{home}` (the agent's home directory), `{worktree}`,
//! `{cwd_slug}` (Claude Code's name for the worktree: every non-alphanumeric character
//! becomes `-`) and `{session_id}`, and must start with `/`, `{home}` or `{worktree}`.
//! `glob` is a path relative to `dir` where `*` matches within one path component and
//! `?` one character; it knows the same placeholders. The session's transcript is the
//! newest matching file modified since the launch whose recorded working directory (when
//! the format records one, as Codex's `session_meta` does) is the worktree. A glob that
//! uses `{session_id}` names the file outright (Claude's `--session-id`).
//!
//! Format `"terminal"` takes no `dir` or `glob`: a CLI spice has no decoder for is read
//! from the lane's own recording of its terminal (`transcript::terminal`), so its
//! prose's ACKs retire steering and a prompt it stops on is a turn's end.
//!
//! Built-in profiles (`claude`, `codex`, `gemini`, `qwen`, their print-mode twins
//! `claude-headless`, `codex-headless`, `gemini-headless` and `qwen-headless`, and
//! `demo`) are TOML under `builtin/`, compiled in and parsed by the same strict
//! parser; a file of the same name replaces one.

mod template;

pub use template::{expand_argv, Placeholder, Template, TemplateError};

use super::{check_env, ConfigError};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use toml::Spanned;
use Placeholder as P;

/// The profiles compiled into the binary, as (name, TOML text).
pub const BUILTIN: [(&str, &str); 9] = [
    ("claude", include_str!("builtin/claude.toml")),
    ("codex", include_str!("builtin/codex.toml")),
    (
        "claude-headless",
        include_str!("builtin/claude-headless.toml"),
    ),
    (
        "codex-headless",
        include_str!("builtin/codex-headless.toml"),
    ),
    ("demo", include_str!("builtin/demo.toml")),
    ("gemini", include_str!("builtin/gemini.toml")),
    (
        "gemini-headless",
        include_str!("builtin/gemini-headless.toml"),
    ),
    ("qwen", include_str!("builtin/qwen.toml")),
    ("qwen-headless", include_str!("builtin/qwen-headless.toml")),
];

/// How the agent runs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Interactive, under a PTY; steering is typed in when its turn ends.
    #[default]
    Pty,
    /// One process per turn (`claude -p`, `codex exec`); a clean exit ends the turn,
    /// and steering starts the next one as a resume. It runs under a PTY as well, so
    /// its output is recorded and `fleet attach` shows it, and no agent waits on a
    /// piped stdin.
    Headless,
}

/// How steering reaches the agent while it works.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Deliver {
    /// On the output of its commands (`spice exec`, the shell redirector) and its
    /// hooks, and typed in when its turn ends.
    #[default]
    Output,
    /// As the user's message only: typed into its terminal as soon as it is pending
    /// (a TUI that queues text typed while it works sends it when it can), or the
    /// next turn of a headless agent. For CLIs that tell their model to ignore
    /// directives found in tool output (Gemini CLI's `<untrusted_context>`).
    Message,
}

impl Deliver {
    /// How the lane row says it.
    pub fn describe(self, mode: Mode) -> &'static str {
        match (self, mode) {
            (Deliver::Output, _) => "command output",
            (Deliver::Message, Mode::Pty) => "typed message",
            (Deliver::Message, Mode::Headless) => "next turn",
        }
    }
}

/// A hook mechanism the agent offers for delivering steering between tool calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Hook {
    /// Claude Code's PostToolUse hook (`--settings` JSON, `additionalContext`).
    ClaudePostToolUse,
}

/// The transcript's format, which decides its decoder.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    Claude,
    Codex,
    /// Gemini CLI's session files (`transcript::gemini`).
    Gemini,
    /// Qwen Code's session files (`transcript::qwen`).
    Qwen,
    /// The lane's own recording of the agent's terminal: its replies read from its
    /// screen (`transcript::terminal`), for a CLI spice has no decoder for.
    Terminal,
    None,
}

impl Format {
    pub fn name(self) -> &'static str {
        match self {
            Format::Claude => "claude",
            Format::Codex => "codex",
            Format::Gemini => "gemini",
            Format::Qwen => "qwen",
            Format::Terminal => "terminal",
            Format::None => "none",
        }
    }
}

/// Where a session's transcript is and how to read it (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transcript {
    /// Never `None`: a profile with format "none" has no `Transcript`.
    pub format: Format,
    /// The directory and file pattern of the agent's own transcript; `None` exactly
    /// for format "terminal", whose transcript is the lane's recording.
    pub files: Option<(Template, Template)>,
}

impl Transcript {
    /// The transcript's directory, when the agent writes its own.
    pub fn dir(&self) -> Option<&Template> {
        self.files.as_ref().map(|(d, _)| d)
    }
}

/// Where a profile came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    Builtin,
    File(PathBuf),
}

/// A profile, checked: every template parsed, every name valid.
#[derive(Debug, Clone)]
pub struct Profile {
    pub name: String,
    pub source: Source,
    pub command: Vec<Template>,
    pub resume: Option<Vec<Template>>,
    pub mode: Mode,
    pub env: BTreeMap<String, String>,
    pub transcript: Option<Transcript>,
    pub hooks: Vec<Hook>,
    pub deliver: Deliver,
    /// What the agent itself keeps outside its worktree and may write when confined
    /// (its transcripts, settings, caches): `{home}/…` or absolute paths.
    pub writable: Vec<Template>,
}

impl Profile {
    /// The programs the profile runs (`command[0]`, then `resume[0]` if it differs), as
    /// written: a bare name, an absolute path, or `{spice}`.
    pub fn programs(&self) -> Vec<&str> {
        let mut out = vec![self.command[0].as_str()];
        if let Some(r) = &self.resume {
            if r[0].as_str() != out[0] {
                out.push(r[0].as_str());
            }
        }
        out
    }

    /// Whether the profile runs spice's own scripted demo agent (`{spice} demo-agent`),
    /// whatever file it came from: a copy of the built-in `demo` profile is the demo
    /// agent too, and gets its fake home, never the operator's `~/.claude`.
    pub fn runs_demo_agent(&self) -> bool {
        self.command.len() >= 2
            && self.command[0].as_str() == "{spice}"
            && self.command[1].as_str() == "demo-agent"
    }
}

type SpannedArgv = Spanned<Vec<Spanned<String>>>;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawProfile {
    command: SpannedArgv,
    resume: Option<SpannedArgv>,
    #[serde(default)]
    mode: Mode,
    #[serde(default)]
    env: BTreeMap<Spanned<String>, String>,
    transcript: Option<Spanned<RawTranscript>>,
    #[serde(default)]
    hooks: Vec<Hook>,
    #[serde(default)]
    deliver: Deliver,
    #[serde(default)]
    writable: Vec<Spanned<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTranscript {
    format: Format,
    dir: Option<Spanned<String>>,
    glob: Option<Spanned<String>>,
}

/// Parses and checks one profile. `file` is the path shown in errors; every problem
/// found in the file is returned.
pub fn parse(
    file: &Path,
    name: &str,
    text: &str,
    source: Source,
) -> Result<Profile, Vec<ConfigError>> {
    let raw: RawProfile =
        toml::from_str(text).map_err(|e| vec![ConfigError::from_toml(file, text, &e)])?;
    let mut errors = check_env(file, text, &raw.env);
    let mut at =
        |offset: usize, reason: String| errors.push(ConfigError::at(file, text, offset, reason));

    let command = argv(text, "command", &raw.command, &mut at);
    let resume = raw
        .resume
        .as_ref()
        .map(|r| argv(text, "resume", r, &mut at));
    if raw.mode == Mode::Headless
        && !command
            .iter()
            .any(|t| t.uses(P::Brief) || t.uses(P::BriefFile))
    {
        let reason = "mode \"headless\" needs {brief} or {brief_file} in 'command': \
                      the brief is the first turn's prompt";
        at(raw.command.span().start, reason.into());
    }

    let transcript = raw
        .transcript
        .as_ref()
        .and_then(|t| transcript(text, t, &mut at));
    let writable = raw
        .writable
        .iter()
        .filter_map(|w| {
            let t = template(text, "writable", w, &Placeholder::TRANSCRIPT, &mut at)?;
            let s = t.as_str();
            let rooted = s.starts_with('/') || s == "{home}" || s.starts_with("{home}/") || s.starts_with("{worktree}");
            if !rooted || s.split('/').any(|c| c == "..") {
                let reason = "'writable' entries must be absolute: start with '/', {home}/ or {worktree}, without '..'";
                at(w.span().start, reason.into());
                return None;
            }
            Some(t)
        })
        .collect();

    if !errors.is_empty() {
        return Err(errors);
    }
    Ok(Profile {
        name: name.to_string(),
        source,
        command,
        resume,
        mode: raw.mode,
        env: raw
            .env
            .into_iter()
            .map(|(k, v)| (k.into_inner(), v))
            .collect(),
        transcript,
        hooks: raw.hooks,
        deliver: raw.deliver,
        writable,
    })
}

/// Checks the `[transcript]` table; `None` for format "none" or when it has problems
/// (reported to `at`).
fn transcript(
    text: &str,
    table: &Spanned<RawTranscript>,
    at: &mut dyn FnMut(usize, String),
) -> Option<Transcript> {
    let t = table.get_ref();
    let mut located = |field: &str, value: &Option<Spanned<String>>| {
        let v = value.as_ref()?;
        let name = format!("transcript.{field}");
        let parsed = template(text, &name, v, &Placeholder::TRANSCRIPT, at);
        if matches!(t.format, Format::None | Format::Terminal) {
            let reason = format!(
                "'{name}' is meaningless with format \"{}\"{}",
                t.format.name(),
                if t.format == Format::Terminal {
                    " (the transcript is the lane's recording of the terminal)"
                } else {
                    ""
                }
            );
            at(v.span().start, reason);
        }
        parsed.map(|p| (p, v.span().start))
    };
    let dir = located("dir", &t.dir);
    let glob = located("glob", &t.glob);
    if let Some((dir, offset)) = &dir {
        let s = dir.as_str();
        if !(s.starts_with('/') || s.starts_with("{home}") || s.starts_with("{worktree}")) {
            let reason = "'transcript.dir' must be absolute: start with '/', {home} or {worktree}";
            at(*offset, reason.into());
        }
    }
    if let Some((glob, offset)) = &glob {
        let s = glob.as_str();
        if s.starts_with('/') || s.split('/').any(|c| c == ".." || c.is_empty()) {
            let reason = "'transcript.glob' must be a relative path under 'transcript.dir', \
                          without '..' or empty components";
            at(*offset, reason.into());
        }
    }
    match t.format {
        Format::None => return None,
        Format::Terminal => {
            return Some(Transcript {
                format: t.format,
                files: None,
            })
        }
        Format::Claude | Format::Codex | Format::Gemini | Format::Qwen => {}
    }
    for (field, value) in [("dir", &t.dir), ("glob", &t.glob)] {
        if value.is_none() {
            let format = t.format.name();
            let reason = format!(
                "missing field 'transcript.{field}' (needed to find a \"{format}\" transcript)"
            );
            at(table.span().start, reason);
        }
    }
    Some(Transcript {
        format: t.format,
        files: Some((dir?.0, glob?.0)),
    })
}

/// Parses an argv template array; problems go to `at` and the bad elements are dropped
/// (the caller returns the errors, so the partial result is never used).
fn argv(
    text: &str,
    field: &str,
    value: &SpannedArgv,
    at: &mut dyn FnMut(usize, String),
) -> Vec<Template> {
    let elements = value.get_ref();
    let Some(first) = elements.first() else {
        at(
            value.span().start,
            format!("'{field}' must not be empty: its first element is the program"),
        );
        return Vec::new();
    };
    let program = first.get_ref();
    let plain = !program.contains(['{', '}']);
    if !(program == "{spice}"
        || plain && !program.is_empty() && (!program.contains('/') || program.starts_with('/')))
    {
        at(
            first.span().start,
            format!(
                "{field}[0] must be a program name, an absolute path or {{spice}}, not '{program}'"
            ),
        );
    }
    elements
        .iter()
        .filter_map(|e| template(text, field, e, &Placeholder::ARGV, at))
        .collect()
}

/// Parses one spanned template, reporting a problem at its exact position.
fn template(
    text: &str,
    field: &str,
    value: &Spanned<String>,
    allowed: &[Placeholder],
    at: &mut dyn FnMut(usize, String),
) -> Option<Template> {
    Template::parse(value.get_ref(), allowed, field)
        .map_err(|e| at(value_offset(text, value, e.offset), e.reason))
        .ok()
}

/// The byte in `text` of offset `inner` inside a string value: exact when the value is
/// written without escapes (the usual case), else the start of the string.
fn value_offset(text: &str, value: &Spanned<String>, inner: usize) -> usize {
    let span = value.span();
    let raw = &text[span.clone()];
    let written = raw
        .strip_prefix(['"', '\''])
        .and_then(|r| r.strip_suffix(['"', '\'']));
    if written == Some(value.get_ref().as_str()) {
        span.start + 1 + inner
    } else {
        span.start
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtins_parse() {
        for (name, text) in BUILTIN {
            let file = PathBuf::from(format!("<built-in>/{name}.toml"));
            let p = parse(&file, name, text, Source::Builtin)
                .unwrap_or_else(|e| panic!("{name}: {}", e[0]));
            assert!(!p.command.is_empty());
            assert!(p.resume.is_some(), "{name} can resume");
            assert!(
                !p.writable.is_empty(),
                "{name} says what it writes in its HOME"
            );
        }
    }

    #[test]
    fn writable_entries_are_rooted() {
        let text =
            "command = [\"a\"]\nwritable = [\"{home}/.a\", \"rel\", \"{home}/../x\", \"/opt/a\"]\n";
        let e = parse(Path::new("p.toml"), "p", text, Source::Builtin).unwrap_err();
        let msgs: Vec<String> = e.iter().map(|e| e.to_string()).collect();
        assert_eq!(msgs.len(), 2, "{msgs:?}");
        assert!(
            msgs[0].starts_with("p.toml:2:26: 'writable' entries must be absolute"),
            "{msgs:?}"
        );
        let ok = "command = [\"a\"]\nwritable = [\"{home}/.a\", \"/opt/a\"]\n";
        let p = parse(Path::new("p.toml"), "p", ok, Source::Builtin).unwrap();
        assert_eq!(p.writable.len(), 2);
    }

    #[test]
    fn profile_errors_all_reported() {
        let text = "command = [\"./agent\", \"{sesion}\"]\nmode = \"headless\"\n[env]\nSPICE_LANE = \"x\"\n[transcript]\nformat = \"none\"\nglob = \"x\"\n";
        let errs = parse(Path::new("p.toml"), "p", text, Source::Builtin).unwrap_err();
        let mut lines: Vec<String> = errs.iter().map(|e| e.to_string()).collect();
        lines.sort();
        let want = [
            "p.toml:1:11: mode \"headless\" needs {brief}",
            "p.toml:1:12: command[0] must be a program name",
            "p.toml:1:24: unknown placeholder '{sesion}'",
            "p.toml:4:1: environment variable 'SPICE_LANE'",
            "p.toml:7:8: 'transcript.glob' is meaningless",
        ];
        assert_eq!(lines.len(), want.len(), "{lines:#?}");
        for (line, want) in lines.iter().zip(want) {
            assert!(
                line.starts_with(want),
                "{line:?} should start with {want:?}"
            );
        }
    }

    /// The argv a launcher gets from the built-in claude profile, with and without a model.
    #[test]
    fn claude_builtin_expands() {
        let (name, text) = BUILTIN[0];
        let p = parse(Path::new("claude.toml"), name, text, Source::Builtin).unwrap();
        let value = |model: Option<&'static str>| {
            move |ph: Placeholder| match ph {
                P::Model => model.map(String::from),
                P::SessionId => Some("S".to_string()),
                P::Brief => Some("do the task".to_string()),
                _ => Some(format!("<{}>", ph.name())),
            }
        };
        let argv = expand_argv(&p.command, &value(None));
        let want = [
            "claude",
            "--session-id",
            "S",
            "--dangerously-skip-permissions",
            "do the task",
        ];
        assert_eq!(argv, want);
        let argv = expand_argv(p.resume.as_ref().unwrap(), &value(Some("m")));
        assert_eq!(
            argv,
            [
                "claude",
                "--resume",
                "S",
                "--dangerously-skip-permissions",
                "--model=m",
                "do the task"
            ]
        );
        let t = p.transcript.unwrap();
        assert_eq!(
            (t.format, t.dir().unwrap().as_str()),
            (Format::Claude, "{home}/.claude/projects/{cwd_slug}")
        );
        assert_eq!(p.hooks, [Hook::ClaudePostToolUse]);
    }

    /// The built-in codex profile trusts the worktree with a whole `projects` table (a
    /// dotted `projects."<path>".trust_level` is ignored by Codex 0.171; a path may
    /// hold dots), and a resumed thread gets the brief as its next message.
    #[test]
    fn codex_builtin_trusts_the_worktree_and_resumes_with_the_brief() {
        let (name, text) = BUILTIN[1];
        let p = parse(Path::new("codex.toml"), name, text, Source::Builtin).unwrap();
        let value = |ph: Placeholder| match ph {
            P::Model => None,
            P::SessionId => Some("T".to_string()),
            P::Brief => Some("do the task".to_string()),
            P::Worktree => Some("/w/.tmp/wt".to_string()),
            _ => Some(format!("<{}>", ph.name())),
        };
        let trust = r#"projects={"/w/.tmp/wt"={trust_level="trusted"}}"#;
        let argv = expand_argv(&p.command, &value);
        assert!(argv.iter().any(|a| a == trust), "{argv:?}");
        assert_eq!(argv.last().unwrap(), "do the task");
        let argv = expand_argv(p.resume.as_ref().unwrap(), &value);
        assert!(argv.iter().any(|a| a == trust), "{argv:?}");
        assert_eq!(argv[argv.len() - 2..], ["T", "do the task"]);
        let parsed: toml::Table = trust.parse().unwrap();
        assert_eq!(
            parsed["projects"]["/w/.tmp/wt"]["trust_level"].as_str(),
            Some("trusted")
        );
    }

    #[test]
    fn escaped_strings_locate_at_their_start() {
        let text = "command = [\"a\", \"a\\tb{x}\"]\n";
        let errs = parse(Path::new("p.toml"), "p", text, Source::Builtin).unwrap_err();
        assert!(
            errs[0]
                .to_string()
                .starts_with("p.toml:1:17: unknown placeholder '{x}'"),
            "{}",
            errs[0]
        );
    }
}
