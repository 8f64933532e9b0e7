//! Who wrote a user-role message: the human, the harness (injected context), or a
//! compaction (its summary fed back).
//!
//! Codex gives all three the `user` role. The harness's blocks open with a known tag or
//! heading (`<environment_context>`, `# AGENTS.md instructions for …`, …), or wrap the
//! whole text in one `<tag>…</tag>`; summaries open with a fixed sentence.

pub(super) enum UserText {
    Prompt,
    Injected,
    Summary,
}

/// Openings of text the harness puts in the user's place.
const INJECTED: [&str; 12] = [
    "<environment_context>",
    "<user_instructions>",
    "# AGENTS.md instructions",
    "<permissions instructions>",
    "<collaboration_mode>",
    "<skills_instructions>",
    "<user_shell_command>",
    "<turn_aborted>",
    "<subagent_notification>",
    "<skill>",
    "<INSTRUCTIONS>",
    "<apps_instructions>",
];

/// How a compaction summary opens when fed back as a user message: Codex's own, and
/// the Claude-style one other harnesses write into rollouts.
const SUMMARY: [&str; 2] = [
    "Another language model started to solve this problem",
    "This session is being continued from a previous conversation",
];

pub(super) fn classify(text: &str) -> UserText {
    let t = text.trim_start();
    if INJECTED.iter().any(|m| t.starts_with(m)) || wrapped_in_tag(t) {
        UserText::Injected
    } else if SUMMARY.iter().any(|p| t.starts_with(p)) {
        UserText::Summary
    } else {
        UserText::Prompt
    }
}

/// `<name …>…</name>` around the whole text: a harness block, not typing.
fn wrapped_in_tag(t: &str) -> bool {
    let Some(rest) = t.strip_prefix('<') else {
        return false;
    };
    let end = rest
        .find(|c: char| c == '>' || c.is_whitespace())
        .unwrap_or(0);
    let name = &rest[..end];
    let closed = t
        .trim_end()
        .strip_suffix('>')
        .and_then(|s| s.strip_suffix(name));
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        && closed.is_some_and(|s| s.ends_with("</"))
}

/// Bare era: the cwd is only in `<environment_context><cwd>…</cwd>`.
pub(super) fn context_cwd(text: &str) -> Option<&str> {
    let start = text.find("<cwd>")? + "<cwd>".len();
    let len = text[start..].find("</cwd>")?;
    Some(text[start..start + len].trim())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tells_speakers_apart() {
        assert!(matches!(
            classify("<environment_context>\n<cwd>/w</cwd>"),
            UserText::Injected
        ));
        assert!(matches!(
            classify("<task-notification>done</task-notification>"),
            UserText::Injected
        ));
        assert!(matches!(
            classify("<b>bold</b> is what I want"),
            UserText::Prompt
        ));
        assert!(matches!(classify("fix the build"), UserText::Prompt));
        assert!(matches!(
            classify("Another language model started to solve this problem…"),
            UserText::Summary
        ));
        assert_eq!(
            context_cwd("<environment_context>\n  <cwd>/w/x</cwd>"),
            Some("/w/x")
        );
    }
}
