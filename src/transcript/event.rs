//! The one event model both agents' transcripts decode into.
//!
//! Decoders turn one line of a transcript into zero or more [`Event`]s, in file order,
//! and never fail on content: an unknown record type or key is skipped, a malformed
//! line is counted ([`Decoder::malformed`]) and skipped. Every event carries the
//! 1-based line it came from, so a steering acknowledgment or a briefing can point at
//! the exact place in the transcript.

use crate::clock::Micros;
use serde::Serialize;

/// Which agent wrote a transcript.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Agent {
    Claude,
    Codex,
    Gemini,
    Qwen,
    /// Any other CLI: its terminal recording read as its transcript
    /// ([`super::terminal`]).
    Terminal,
}

impl Agent {
    /// The name files, the store and `--json` use.
    pub fn name(self) -> &'static str {
        match self {
            Agent::Claude => "claude",
            Agent::Codex => "codex",
            Agent::Gemini => "gemini",
            Agent::Qwen => "qwen",
            Agent::Terminal => "terminal",
        }
    }

    /// The name people read.
    pub fn product(self) -> &'static str {
        match self {
            Agent::Claude => "Claude Code",
            Agent::Codex => "Codex",
            Agent::Gemini => "Gemini CLI",
            Agent::Qwen => "Qwen Code",
            Agent::Terminal => "Terminal",
        }
    }
}

/// One thing that happened in a session.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Event {
    /// 1-based line of the transcript file the event came from.
    pub line: u64,
    /// When it happened, where the record says.
    pub timestamp: Option<Micros>,
    /// The subagent (sidechain) it belongs to, if not the main conversation.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subagent: Option<String>,
    #[serde(flatten)]
    pub kind: EventKind,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum EventKind {
    /// What the session is: emitted when first known and again when a field changes
    /// (Claude repeats cwd and branch per line; Codex sends turn contexts).
    SessionMeta(SessionMeta),
    /// Something the human typed.
    UserPrompt { text: String },
    /// Text the harness put in the user's place: environment context, instructions,
    /// hook output, slash-command expansions, system reminders.
    InjectedContext { text: String },
    /// The summary that starts the conversation again after a compaction.
    CompactionSummary { text: String },
    AssistantText {
        text: String,
        /// The API message id (Claude writes one line per content block of a message).
        #[serde(skip_serializing_if = "Option::is_none")]
        message_id: Option<String>,
    },
    /// Thinking / reasoning summaries: kept out of the default view.
    Reasoning { text: String },
    ToolCall {
        /// The id the result will refer to (Claude `tool_use.id`, Codex `call_id`).
        id: String,
        name: String,
        /// For shell tools: the command line as the agent wrote it.
        #[serde(skip_serializing_if = "Option::is_none")]
        command: Option<String>,
        /// For shell tools: the working directory the command ran in, where known.
        #[serde(skip_serializing_if = "Option::is_none")]
        cwd: Option<String>,
        /// The raw arguments, truncated to [`EXCERPT`] bytes when long.
        input: String,
    },
    ToolResult {
        id: String,
        /// The exit code where the transcript says it (it often does not).
        #[serde(skip_serializing_if = "Option::is_none")]
        exit_code: Option<i32>,
        failed: bool,
        /// The start of the output, at most [`EXCERPT`] bytes (on a char boundary).
        output: String,
    },
    FileChange {
        path: String,
        change: ChangeKind,
        /// The tool call that made it, when known.
        #[serde(skip_serializing_if = "Option::is_none")]
        call_id: Option<String>,
    },
    /// A `git commit` the agent ran, with what its output tells.
    Commit {
        #[serde(skip_serializing_if = "Option::is_none")]
        sha: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        message: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        call_id: Option<String>,
    },
    /// The context was compacted here; what follows starts from a summary.
    Compaction {
        #[serde(skip_serializing_if = "Option::is_none")]
        trigger: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        pre_tokens: Option<u64>,
    },
    /// A subagent was started (or its transcript is linked) from this session.
    SubagentLink {
        agent_id: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        description: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        call_id: Option<String>,
    },
    /// Token usage. Claude repeats usage on every line of one message with provisional
    /// figures: consumers keep the last event per `message_id` and `request_id`
    /// ([`crate::transcript::usage::Meter`] does). Codex reports cumulative totals
    /// (`cumulative: true`) whose `input_tokens` include the cached ones: the meter
    /// turns them into deltas.
    TokenUsage {
        #[serde(skip_serializing_if = "Option::is_none")]
        message_id: Option<String>,
        /// Claude's `requestId`: with the message id, what names one API call.
        #[serde(skip_serializing_if = "Option::is_none")]
        request_id: Option<String>,
        /// The model that answered, where the line says (a subagent's may differ).
        #[serde(skip_serializing_if = "Option::is_none")]
        model: Option<String>,
        input_tokens: u64,
        output_tokens: u64,
        cache_read_tokens: u64,
        cache_creation_tokens: u64,
        cumulative: bool,
    },
    /// The agent finished its turn and is waiting for input.
    TurnEnd,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct SessionMeta {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    pub agent: Option<Agent>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub git_branch: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ChangeKind {
    Add,
    Update,
    Delete,
    Move { to: String },
}

/// The longest output or argument excerpt an event carries, in bytes.
pub const EXCERPT: usize = 2000;

/// Cuts `s` to at most `max` bytes on a char boundary, marking the cut.
pub fn excerpt(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

/// How many lines [`error_lines`] keeps, and how long each may be (bytes).
pub const ERROR_LINES: usize = 3;
const ERROR_LINE_MAX: usize = 200;

/// Why a failed call failed, for a reader in a hurry: at most [`ERROR_LINES`] lines
/// of `output` (a result's output, the decoder having removed the agent's own
/// envelope such as an exit-code header), `\n`-separated, each trimmed and cut.
/// Blank lines, lines without a letter or digit and banners (`==== FAILURES ====`)
/// say nothing and are skipped; the lines start at the first that reads as an error
/// (`error`, `fatal`, `failed`, `denied`, `not found`…), else at the first line that
/// says something, so compiler progress or a traceback's frames do not crowd out the
/// message. `None` when nothing is left.
pub fn error_lines(output: &str) -> Option<String> {
    let meaningful: Vec<&str> = output
        .lines()
        .map(str::trim)
        .filter(|l| l.chars().any(char::is_alphanumeric) && !is_banner(l))
        .collect();
    let start = meaningful
        .iter()
        .position(|l| reads_as_error(l))
        .unwrap_or(0);
    let lines: Vec<String> = meaningful
        .iter()
        .skip(start)
        .take(ERROR_LINES)
        .map(|l| excerpt(l, ERROR_LINE_MAX))
        .collect();
    (!lines.is_empty()).then(|| lines.join("\n"))
}

/// `=== title ===`, `--- x ---`, `___ test ___`: decoration around a few words.
fn is_banner(line: &str) -> bool {
    let rule = |mut cs: std::str::Chars| -> bool {
        let Some(c) = cs.next() else { return false };
        c.is_ascii_punctuation() && cs.take(2).filter(|d| *d == c).count() == 2
    };
    rule(line.chars()) && rule(line.chars().rev().collect::<String>().chars())
}

fn reads_as_error(line: &str) -> bool {
    const WORDS: [&str; 12] = [
        "error",
        "fatal",
        "failed",
        "failure",
        "exception",
        "panicked",
        "denied",
        "cannot ",
        "could not",
        "no such",
        "not found",
        "refused",
    ];
    let lower = line.to_lowercase();
    WORDS.iter().any(|w| lower.contains(w))
}

/// A stateful line decoder for one transcript file.
pub trait Decoder {
    /// Decodes one line (without its newline) numbered `line` (1-based), appending
    /// events to `out`. Never panics on any input; malformed lines are counted.
    fn feed(&mut self, bytes: &[u8], line: u64, out: &mut Vec<Event>);
    /// How many lines could not be read as JSON objects.
    fn malformed(&self) -> u64;
    /// The records skipped because their kind is not one the decoder knows (a newer
    /// CLI's): what `spice watch` says was not understood.
    fn unread(&self) -> &Unread {
        static NONE: Unread = Unread::NONE;
        &NONE
    }
}

/// Records a decoder skipped for a kind it does not know, by kind, with the first
/// line of each. Bounded: past [`Unread::KINDS`] kinds, the rest are only counted.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Unread {
    kinds: Vec<UnreadKind>,
    others: u64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct UnreadKind {
    /// The record's kind as the file names it (`type`, or `type/subtype`).
    pub kind: String,
    pub first_line: u64,
    pub count: u64,
}

impl Unread {
    pub const NONE: Unread = Unread {
        kinds: Vec::new(),
        others: 0,
    };
    pub const KINDS: usize = 16;
    /// The longest kind kept, in bytes: the name is the file's, so bounded.
    const NAME: usize = 64;

    /// Notes a skipped record of `kind` at `line`.
    pub fn note(&mut self, kind: &str, line: u64) {
        let kind = excerpt(kind, Self::NAME);
        if let Some(k) = self.kinds.iter_mut().find(|k| k.kind == kind) {
            k.count += 1;
        } else if self.kinds.len() < Self::KINDS {
            self.kinds.push(UnreadKind {
                kind,
                first_line: line,
                count: 1,
            });
        } else {
            self.others += 1;
        }
    }

    pub fn kinds(&self) -> &[UnreadKind] {
        &self.kinds
    }

    /// Records counted past the named kinds.
    pub fn others(&self) -> u64 {
        self.others
    }

    pub fn is_empty(&self) -> bool {
        self.kinds.is_empty() && self.others == 0
    }
}

/// A commit the agent made, read from a shell command and its output: the command
/// must run `git commit`; the output's `[branch sha] subject` line gives sha and
/// message (the message falls back to `-m "…"` in the command).
pub fn commit_from(
    command: &str,
    output: &str,
    failed: bool,
) -> Option<(Option<String>, Option<String>)> {
    if failed || !runs_git_commit(command) {
        return None;
    }
    for line in output.lines() {
        let l = line.trim_start();
        let Some(rest) = l.strip_prefix('[') else {
            continue;
        };
        let Some((head, subject)) = rest.split_once("] ") else {
            continue;
        };
        // "[main 1a2b3c4] msg" or "[main (root-commit) 1a2b3c4] msg"
        let sha = head.split_whitespace().last().unwrap_or("");
        if (7..=40).contains(&sha.len()) && sha.bytes().all(|c| c.is_ascii_hexdigit()) {
            return Some((Some(sha.to_string()), Some(subject.trim().to_string())));
        }
    }
    Some((None, message_flag(command)))
}

fn runs_git_commit(command: &str) -> bool {
    let words: Vec<&str> = command
        .split(|c: char| c.is_whitespace() || c == ';' || c == '&' || c == '|' || c == '(')
        .filter(|w| !w.is_empty())
        .collect();
    // `git [global options] commit`: skip `-c k=v`, `-C dir` and other options.
    (0..words.len()).filter(|&i| words[i] == "git").any(|i| {
        let mut j = i + 1;
        while let Some(w) = words.get(j).filter(|w| w.starts_with('-')) {
            j += if matches!(
                *w,
                "-c" | "-C" | "--git-dir" | "--work-tree" | "--namespace"
            ) {
                2
            } else {
                1
            };
        }
        words.get(j) == Some(&"commit")
    })
}

fn message_flag(command: &str) -> Option<String> {
    let i = command.find("-m ")?;
    let rest = command[i + 3..].trim_start();
    let quote = rest.chars().next()?;
    if quote == '"' || quote == '\'' {
        let body = &rest[1..];
        let end = body.find(quote)?;
        Some(body[..end].to_string())
    } else {
        rest.split_whitespace().next().map(str::to_string)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unread_kinds_are_bounded_in_number_and_length() {
        let mut u = Unread::default();
        for i in 0..40 {
            u.note(&format!("kind{}", i % 20), i + 1);
        }
        u.note(&"x".repeat(10_000), 99);
        assert_eq!(u.kinds().len(), Unread::KINDS);
        assert_eq!(u.kinds()[3].kind, "kind3");
        assert_eq!((u.kinds()[3].first_line, u.kinds()[3].count), (4, 2));
        assert_eq!(u.others(), 4 * 2 + 1);
        let mut long = Unread::default();
        long.note(&"é".repeat(10_000), 1);
        assert!(long.kinds()[0].kind.len() <= Unread::NAME + 3);
    }

    #[test]
    fn commits_from_command_and_output() {
        let c = commit_from(
            "git add -A && git commit -m \"fix: x\"",
            "[main 1a2b3c4] fix: x\n 1 file changed",
            false,
        );
        assert_eq!(c, Some((Some("1a2b3c4".into()), Some("fix: x".into()))));
        let c = commit_from(
            "git commit -m 'init'",
            "[master (root-commit) abcdef0] init",
            false,
        );
        assert_eq!(c.unwrap().0.as_deref(), Some("abcdef0"));
        assert_eq!(commit_from("git commit -m 'x'", "", true), None);
        assert_eq!(commit_from("git log", "[main 1a2b3c4] x", false), None);
        let c = commit_from(
            "git -c user.name=x -C repo --no-pager commit -m y",
            "[main 1a2b3c4] y",
            false,
        );
        assert_eq!(c.unwrap().0.as_deref(), Some("1a2b3c4"));
        assert_eq!(
            commit_from("git commit -m 'wip'", "", false),
            Some((None, Some("wip".into())))
        );
        assert_eq!(excerpt("héllo", 2), "h…");
    }

    #[test]
    fn error_lines_skip_noise_and_start_at_the_error() {
        assert_eq!(
            error_lines("On branch main\n\nnothing to commit, working tree clean\n").as_deref(),
            Some("On branch main\nnothing to commit, working tree clean")
        );
        let cargo = "   Compiling x v0.1.0\nerror[E0425]: cannot find value `y`\n --> src/main.rs:2:5\n  |\n2 |     y\n  |     ^ not found\n";
        assert_eq!(
            error_lines(cargo).as_deref(),
            Some("error[E0425]: cannot find value `y`\n--> src/main.rs:2:5\n2 |     y")
        );
        let pytest = "====== test session starts ======\nplatform linux\ncollected 1 item\n\n===== FAILURES =====\n____ test_x ____\nE  assert 1 == 2\nt.py:3: AssertionError\n===== 1 failed in 0.01s =====";
        assert_eq!(
            error_lines(pytest).as_deref(),
            Some("t.py:3: AssertionError")
        );
        assert_eq!(error_lines(""), None);
        assert_eq!(error_lines("\n  \n----\n"), None);
        let long = format!("error: {}", "x".repeat(500));
        assert!(error_lines(&long).unwrap().len() <= ERROR_LINE_MAX + '…'.len_utf8());
    }
}
