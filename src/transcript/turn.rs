//! Where the agent's turn stands, read from its transcript: the tool calls of the
//! main conversation still waiting for their results, and the last thing the agent
//! said. What the lane makes of it (see `fleet::lane::machine`):
//!
//! - a turn that ended on a question ([`question`]) is the agent asking the operator;
//! - an open call of the agent's own ask-the-user tool ([`CallKind::Question`]) is a
//!   question put to the operator in a dialog;
//! - an open call of its sub-agent tool ([`CallKind::Subagent`]) is the agent waiting
//!   on its sub-agent;
//! - any other open call is a command running, or a permission prompt when the
//!   agent's screen shows one (the only thing read from the screen: the transcript
//!   does not say that a call waits for approval).
//!
//! Invariant: only the main conversation counts (a sub-agent's own calls and text
//! are its own), and a user's prompt or a turn's end closes every open call (an
//! interrupted call never gets a result).

use super::event::{Event, EventKind};

/// A tool call of the main conversation with no result yet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenCall {
    pub id: String,
    pub name: String,
    /// The shell command, where it is one.
    pub command: Option<String>,
    /// The raw arguments (an excerpt).
    pub input: String,
}

/// What kind of wait an open call is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallKind {
    /// The agent's own tool for asking the user (Claude Code's `AskUserQuestion`,
    /// Codex's `request_user_input`).
    Question,
    /// The agent's sub-agent tool (Claude Code's `Task`/`Agent`, Codex's
    /// `spawn_agent`).
    Subagent,
    /// Anything else: a command, an edit, a search.
    Other,
}

impl OpenCall {
    pub fn kind(&self) -> CallKind {
        match self.name.as_str() {
            "AskUserQuestion" | "request_user_input" | "ask_user" => CallKind::Question,
            "Task" | "Agent" | "spawn_agent" => CallKind::Subagent,
            _ => CallKind::Other,
        }
    }

    /// One line saying what the call is: its command, else its name and arguments.
    pub fn describe(&self, max: usize) -> String {
        let what = match &self.command {
            Some(c) => format!("{}: {c}", self.name),
            None if self.input.is_empty() || self.input == "{}" => self.name.clone(),
            None => format!("{} {}", self.name, self.input),
        };
        clip(&what, max)
    }
}

/// The turn as the transcript leaves it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Turn {
    /// Open calls, oldest first.
    pub open: Vec<OpenCall>,
    /// The agent's last text in the current turn (cleared when the user speaks).
    pub last_text: Option<String>,
    /// When the newest call was made, where the transcript says.
    pub last_call_at: Option<crate::clock::Micros>,
}

impl Turn {
    /// Takes one event in (events of sub-agents are ignored).
    pub fn observe(&mut self, e: &Event) {
        if e.subagent.is_some() {
            return;
        }
        match &e.kind {
            EventKind::ToolCall {
                id,
                name,
                command,
                input,
                ..
            } => {
                self.open.push(OpenCall {
                    id: id.clone(),
                    name: name.clone(),
                    command: command.clone(),
                    input: input.clone(),
                });
                self.last_call_at = e.timestamp.or(self.last_call_at);
            }
            EventKind::ToolResult { id, .. } => self.open.retain(|c| &c.id != id),
            EventKind::AssistantText { text, .. } => self.last_text = Some(text.clone()),
            // Claude Code may write a session's first prompt after the calls that
            // answer it; a prompt older than the newest call starts no turn.
            EventKind::UserPrompt { .. }
                if e.timestamp
                    .is_some_and(|t| self.last_call_at.is_some_and(|c| t < c)) => {}
            EventKind::UserPrompt { .. } => {
                self.open.clear();
                self.last_text = None;
            }
            EventKind::TurnEnd => self.open.clear(),
            _ => {}
        }
    }

    /// The call the agent waits on: a question or a sub-agent before anything else,
    /// else the oldest open call.
    pub fn waiting_on(&self) -> Option<&OpenCall> {
        self.open
            .iter()
            .find(|c| c.kind() != CallKind::Other)
            .or_else(|| self.open.first())
    }
}

/// The question a reply ends on, if it ends on one: its last sentence, when that
/// ends with `?` (closing quotes, brackets, emphasis and trailing whitespace aside).
/// A question inside a code block or in the middle of the reply is not one put to
/// the operator.
pub fn question(text: &str) -> Option<String> {
    let body = outside_code(text);
    let trimmed = body.trim_end_matches(|c: char| {
        c.is_whitespace() || matches!(c, '*' | '_' | '`' | ')' | ']' | '"' | '\'' | '”' | '’')
    });
    if !trimmed.ends_with('?') {
        return None;
    }
    // The last sentence: back to the previous sentence end or line break.
    let head = &trimmed[..trimmed.len() - 1];
    let start = head
        .rfind(['.', '!', '?', '\n'])
        .map(|i| i + 1)
        .unwrap_or(0);
    let sentence = trimmed[start..]
        .trim()
        .trim_start_matches(['-', '*', '#', '>', ' '])
        .trim();
    sentence
        .chars()
        .any(char::is_alphanumeric)
        .then(|| clip(sentence, 200))
}

/// `text` without fenced code blocks (a question in code is not asked).
fn outside_code(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if !fenced {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

/// The words of a permission prompt on an agent's screen, if it shows one: Claude
/// Code's "Do you want to proceed?" (and its edit and fetch variants), Codex's
/// approval requests.
pub fn permission_prompt(screen: &str) -> Option<&'static str> {
    const PROMPTS: [&str; 7] = [
        "Do you want to proceed?",
        "Do you want to make this edit",
        "Do you want to create",
        "Do you want to allow",
        "Would you like to run the following command?",
        "Would you like to make the following edits?",
        "Allow command?",
    ];
    PROMPTS.into_iter().find(|p| screen.contains(p))
}

fn clip(s: &str, max: usize) -> String {
    let one: String = s.split_whitespace().collect::<Vec<_>>().join(" ");
    if one.chars().count() <= max {
        return one;
    }
    let mut out: String = one.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(kind: EventKind) -> Event {
        Event {
            line: 1,
            timestamp: None,
            subagent: None,
            kind,
        }
    }

    fn call(id: &str, name: &str) -> EventKind {
        EventKind::ToolCall {
            id: id.into(),
            name: name.into(),
            command: None,
            cwd: None,
            input: "{}".into(),
        }
    }

    #[test]
    fn a_reply_ending_on_a_question_asks_it() {
        let cases = [
            (
                "Done. Shall I also update the docs?",
                Some("Shall I also update the docs?"),
            ),
            (
                "I found two options.\n\n**Which one do you prefer?**\n",
                Some("Which one do you prefer?"),
            ),
            (
                "- Should I keep the old flag?",
                Some("Should I keep the old flag?"),
            ),
            ("Is it fine? I went ahead and fixed it.", None),
            ("All tests pass.", None),
            ("```\nwhat?\n```", None),
            ("Run this:\n```sh\nls?\n```\nDone.", None),
            ("?", None),
        ];
        for (text, want) in cases {
            assert_eq!(question(text).as_deref(), want, "{text:?}");
        }
    }

    #[test]
    fn open_calls_follow_results_prompts_and_turn_ends() {
        let mut t = Turn::default();
        t.observe(&ev(call("a", "Bash")));
        t.observe(&ev(call("b", "Task")));
        assert_eq!(t.waiting_on().unwrap().kind(), CallKind::Subagent);
        t.observe(&ev(EventKind::ToolResult {
            id: "b".into(),
            exit_code: None,
            failed: false,
            output: String::new(),
        }));
        assert_eq!(t.waiting_on().unwrap().name, "Bash");
        // A sub-agent's own calls are not the main conversation's.
        let mut sub = ev(call("c", "AskUserQuestion"));
        sub.subagent = Some("x".into());
        t.observe(&sub);
        assert_eq!(t.open.len(), 1);
        t.observe(&ev(EventKind::TurnEnd));
        assert!(t.waiting_on().is_none());
        t.observe(&ev(EventKind::AssistantText {
            text: "Which?".into(),
            message_id: None,
        }));
        assert_eq!(t.last_text.as_deref(), Some("Which?"));
        t.observe(&ev(EventKind::UserPrompt { text: "go".into() }));
        assert_eq!(t.last_text, None);
    }

    /// Regression: Claude Code wrote a session's first prompt after the Bash call that
    /// answered it (seen in CI), and the late prompt closed the call, so the lane never
    /// looked for the permission prompt on the screen and never asked the operator.
    #[test]
    fn a_prompt_written_after_the_calls_that_answer_it_keeps_them_open() {
        let at = |t: i64, kind: EventKind| Event {
            timestamp: Some(t),
            ..ev(kind)
        };
        let mut t = Turn::default();
        t.observe(&at(2_000, call("a", "Bash")));
        t.observe(&at(
            1_000,
            EventKind::UserPrompt {
                text: "brief".into(),
            },
        ));
        assert_eq!(t.waiting_on().unwrap().name, "Bash");
        // A prompt after the call is the user speaking again: a new turn.
        t.observe(&at(3_000, EventKind::UserPrompt { text: "go".into() }));
        assert!(t.waiting_on().is_none());
        // Without timestamps a prompt still starts a turn.
        t.observe(&ev(call("b", "Bash")));
        t.observe(&ev(EventKind::UserPrompt {
            text: "again".into(),
        }));
        assert!(t.waiting_on().is_none());
    }

    #[test]
    fn permission_prompts_are_named_from_the_screen() {
        assert!(
            permission_prompt("Bash command  rm -rf x  Do you want to proceed? ❯ 1. Yes").is_some()
        );
        // Codex 0.171's approval prompt for a command asking to leave the sandbox, as
        // the TUI drew it (tests/it/agents_e2e/states.rs).
        let codex = "• Running touch made-by-the-agent Would you like to run the following \
            command? Environment: local Reason: The scripted step runs outside the sandbox. \
            $ touch made-by-the-agent › 1. Yes, proceed (y) 2. Yes, and don't ask again for \
            commands that start with `touch made-by-the-agent` (p) 3. No, and tell Codex \
            what to do differently (esc) Press enter to confirm or esc to cancel";
        assert_eq!(
            permission_prompt(codex),
            Some("Would you like to run the following command?")
        );
        assert!(permission_prompt("Thinking… esc to interrupt").is_none());
    }
}
