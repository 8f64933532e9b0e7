//! The shapes of a Gemini CLI session line, read leniently
//! ([`crate::transcript::lenient`]): only the keys the decoder uses are materialised,
//! so a tool's long output is one string and everything else a scan.

use crate::transcript::lenient::{Flex, Loose};
use serde::de::IgnoredAny;
use serde::Deserialize;
use serde_json::Value;

/// One line: the header, a message, or the CLI's own `$set`/`$rewindTo` edits.
#[derive(Deserialize, Default)]
#[serde(default)]
pub(super) struct Record {
    #[serde(rename = "$set")]
    pub set: Option<IgnoredAny>,
    #[serde(rename = "$rewindTo")]
    pub rewind_to: Option<IgnoredAny>,
    #[serde(rename = "projectHash")]
    pub project_hash: Option<Loose>,
    #[serde(rename = "sessionId")]
    pub session_id: Option<Loose>,
    #[serde(rename = "startTime")]
    pub start_time: Option<Loose>,
    pub timestamp: Option<Loose>,
    pub id: Option<Loose>,
    #[serde(rename = "type")]
    pub kind: Option<Loose>,
    /// The model's text (a string), or a user message's parts.
    pub content: Option<Flex<IgnoredAny, Vec<Flex<Part, IgnoredAny>>>>,
    pub model: Option<Loose>,
    pub thoughts: Option<Flex<IgnoredAny, Vec<Flex<Thought, IgnoredAny>>>>,
    pub tokens: Option<Flex<Tokens, IgnoredAny>>,
    #[serde(rename = "toolCalls")]
    pub tool_calls: Option<Flex<IgnoredAny, Vec<Flex<Call, IgnoredAny>>>>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
pub(super) struct Part {
    pub text: Option<Loose>,
    #[serde(rename = "functionResponse")]
    pub function_response: Option<Flex<Response, IgnoredAny>>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
pub(super) struct Thought {
    pub subject: Option<Loose>,
    pub description: Option<Loose>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
pub(super) struct Tokens {
    pub input: Option<Loose>,
    pub output: Option<Loose>,
    pub cached: Option<Loose>,
    pub thoughts: Option<Loose>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
pub(super) struct Call {
    pub id: Option<Loose>,
    pub name: Option<Loose>,
    /// Kept whole: its excerpt is the call's input.
    pub args: Option<Value>,
    pub status: Option<Loose>,
    pub result: Option<Flex<IgnoredAny, Vec<Flex<Part, IgnoredAny>>>>,
}

/// A `functionResponse`: `response` is `{"output": TEXT}` or `{"error": …}`.
#[derive(Deserialize, Default)]
#[serde(default)]
pub(super) struct Response {
    pub id: Option<Loose>,
    pub response: Option<Value>,
}
