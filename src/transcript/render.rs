//! The human view of events: one or a few lines each, sanitised for the terminal,
//! coloured when asked. Reasoning is left out unless requested. A failed result
//! shows why: the first meaningful lines of its output ([`error_lines`]), not the
//! first line whatever it is.

use super::event::{error_lines, ChangeKind, Event, EventKind};
use super::sanitize::for_terminal;

pub struct Style {
    pub color: bool,
    pub reasoning: bool,
}

const DIM: &str = "\x1b[2m";
const RED: &str = "\x1b[31m";
const GREEN: &str = "\x1b[32m";
const YELLOW: &str = "\x1b[33m";
const BLUE: &str = "\x1b[34m";
const BOLD: &str = "\x1b[1m";
const RESET: &str = "\x1b[0m";

/// The lines for one event, or `None` for events the view leaves out. Agent-written
/// text is sanitised before any colour is added, so only spice's own escapes remain.
pub fn event(e: &Event, style: &Style) -> Option<String> {
    let (code, text) = plain(e, style)?;
    let time = e
        .timestamp
        .map(|t| crate::when::short(t)[11..].to_string())
        .unwrap_or_else(|| format!("L{}", e.line));
    let sub = e
        .subagent
        .as_deref()
        .map(|s| format!("[{}] ", short(s)))
        .unwrap_or_default();
    let text = for_terminal(&format!("{sub}{text}"));
    Some(if style.color {
        format!("{DIM}{time}{RESET} {code}{text}{RESET}")
    } else {
        format!("{time} {text}")
    })
}

/// The colour and the uncoloured text of an event.
fn plain(e: &Event, style: &Style) -> Option<(&'static str, String)> {
    Some(match &e.kind {
        EventKind::SessionMeta(m) => {
            let mut parts = Vec::new();
            if let Some(a) = m.agent {
                parts.push(format!("{a:?}").to_lowercase());
            }
            for (k, v) in [
                ("session", &m.session_id),
                ("model", &m.model),
                ("cwd", &m.cwd),
                ("branch", &m.git_branch),
            ] {
                if let Some(v) = v {
                    parts.push(format!("{k} {v}"));
                }
            }
            (DIM, format!("· {}", parts.join(", ")))
        }
        EventKind::UserPrompt { text } => (BOLD, format!("you › {}", text.trim())),
        EventKind::InjectedContext { .. } => return None,
        EventKind::CompactionSummary { text } => (
            DIM,
            format!("  (summary after compaction: {} chars)", text.len()),
        ),
        EventKind::AssistantText { text, .. } => (BLUE, format!("agent › {}", text.trim())),
        EventKind::Reasoning { text } if style.reasoning => {
            (DIM, format!("  thinking: {}", text.trim()))
        }
        EventKind::Reasoning { .. } => return None,
        EventKind::ToolCall {
            name,
            command: Some(c),
            cwd,
            ..
        } => {
            let at = cwd
                .as_deref()
                .map(|d| format!("  ({d})"))
                .unwrap_or_default();
            (YELLOW, format!("$ {name}: {}{at}", c.trim()))
        }
        EventKind::ToolCall { name, input, .. } => {
            (YELLOW, format!("→ {name} {}", first_line(input, 160)))
        }
        EventKind::ToolResult {
            exit_code,
            failed: true,
            output,
            ..
        } => {
            let code = exit_code.map(|c| format!(" exit {c}")).unwrap_or_default();
            // Why it failed, the first line beside the mark, the others under it.
            let why = error_lines(output)
                .map(|e| format!(": {}", e.replace('\n', "\n      ")))
                .unwrap_or_default();
            (RED, format!("  ✗ failed{code}{why}"))
        }
        EventKind::ToolResult {
            exit_code, output, ..
        } => {
            let code = exit_code.map(|c| format!("exit {c} ")).unwrap_or_default();
            (DIM, format!("  ✓ {code}{}", first_line(output, 120)))
        }
        EventKind::FileChange { path, change, .. } => {
            let what = match change {
                ChangeKind::Add => "add".to_string(),
                ChangeKind::Update => "edit".to_string(),
                ChangeKind::Delete => "delete".to_string(),
                ChangeKind::Move { to } => format!("move → {to}"),
            };
            (GREEN, format!("  {what} {path}"))
        }
        EventKind::Commit { sha, message, .. } => (
            GREEN,
            format!(
                "  commit {} {}",
                sha.as_deref().unwrap_or("?"),
                message.as_deref().unwrap_or("")
            ),
        ),
        EventKind::Compaction {
            trigger,
            pre_tokens,
        } => (
            YELLOW,
            format!(
                "── compaction{}{} ──",
                trigger
                    .as_deref()
                    .map(|t| format!(" ({t})"))
                    .unwrap_or_default(),
                pre_tokens
                    .map(|t| format!(", {t} tokens before"))
                    .unwrap_or_default()
            ),
        ),
        EventKind::SubagentLink {
            agent_id,
            description,
            ..
        } => (
            DIM,
            format!(
                "  subagent {} {}",
                short(agent_id),
                description.as_deref().unwrap_or("")
            ),
        ),
        EventKind::TokenUsage { .. } => return None,
        EventKind::TurnEnd => (DIM, "  ⏎ waiting for input".to_string()),
    })
}

fn first_line(s: &str, max: usize) -> String {
    let l = s.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    super::event::excerpt(l.trim(), max)
}

fn short(id: &str) -> &str {
    &id[..id.len().min(12)]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostile_text_cannot_emit_escapes_but_colour_still_works() {
        let e = Event {
            line: 1,
            timestamp: None,
            subagent: None,
            kind: EventKind::AssistantText {
                text: "hi\x1b[2J\u{202E}".into(),
                message_id: None,
            },
        };
        let plain = event(
            &e,
            &Style {
                color: false,
                reasoning: false,
            },
        )
        .unwrap();
        assert!(
            !plain.contains('\x1b') && !plain.contains('\u{202E}'),
            "{plain:?}"
        );
        let coloured = event(
            &e,
            &Style {
                color: true,
                reasoning: false,
            },
        )
        .unwrap();
        assert_eq!(
            coloured.matches('\x1b').count(),
            4,
            "only spice's own colour codes: {coloured:?}"
        );
    }

    /// Regression (issue #14): a failure showed its first line, whatever it was.
    #[test]
    fn a_failure_shows_its_error_lines_not_its_first_line() {
        let e = Event {
            line: 7,
            timestamp: None,
            subagent: None,
            kind: EventKind::ToolResult {
                id: "c".into(),
                exit_code: Some(101),
                failed: true,
                output: "   Compiling x v0.1.0\nerror: expected `;`\n --> src/main.rs:2:5\n".into(),
            },
        };
        let style = Style {
            color: false,
            reasoning: false,
        };
        assert_eq!(
            event(&e, &style).unwrap(),
            "L7   ✗ failed exit 101: error: expected `;`\n      --> src/main.rs:2:5"
        );
    }
}
