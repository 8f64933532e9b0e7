//! The protocol of the tests' one-tool agent (`tests/agents/onetool.sh`), a CLI spice
//! has no decoder for: the agent posts its whole conversation as plain text to
//! [`PATH`], entries headed `### user`, `### assistant` and `### output (exit N)`; the
//! mock answers `RUN <command>` (the agent runs it with `bash -c` and posts again) or
//! `SAY` and the text to print on the following lines (the agent prints it and waits
//! for the operator's next line).

use super::{Reply, Request};
use serde_json::Value;

pub const PATH: &str = "/onetool";

/// The header of the model's entries in the conversation.
const ASSISTANT: &str = "### assistant\n";

pub(crate) fn parse(body: &Value) -> Request<'_> {
    Request {
        body,
        turn: true,
        given: last_user_text(body),
    }
}

/// What follows the model's last entry: the command's output or the user's words.
pub fn last_user_text(body: &Value) -> String {
    let text = body.as_str().unwrap_or_default();
    let from = text.rfind(ASSISTANT).map_or(0, |i| i + ASSISTANT.len());
    // Past the model's own entry, to the next heading.
    let rest = &text[from..];
    let next = if from == 0 {
        0
    } else {
        rest.find("### ").unwrap_or(rest.len())
    };
    rest[next..].to_string()
}

pub(crate) fn respond(reply: &Reply) -> warp::http::Response<String> {
    let body = match reply {
        Reply::Shell(cmd) | Reply::Escalated(cmd) => format!("RUN {cmd}\n"),
        Reply::Text(t) => format!("SAY\n{t}\n"),
        Reply::Other => "SAY\nDone.\n".to_string(),
    };
    warp::http::Response::builder()
        .status(200)
        .header("content-type", "text/plain")
        .body(body)
        .unwrap()
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_given_text_is_what_follows_the_models_last_entry() {
        let conv = "### user\nbrief\n### assistant\nRUN ls\n### output (exit 0)\na [KEY]\n";
        let given = super::last_user_text(&serde_json::json!(conv));
        assert_eq!(given, "### output (exit 0)\na [KEY]\n");
        assert_eq!(
            super::last_user_text(&serde_json::json!("### user\nbrief\n")),
            "### user\nbrief\n"
        );
    }
}
