//! The shapes of a Qwen Code session line, read leniently
//! ([`crate::transcript::lenient`]): only the keys the decoder uses are materialised;
//! a `ui_telemetry` payload, never read, is a scan.

use crate::transcript::lenient::{Flex, Loose};
use serde::de::IgnoredAny;
use serde::Deserialize;
use serde_json::Value;

#[derive(Deserialize, Default)]
#[serde(default)]
pub(super) struct Record {
    #[serde(rename = "type")]
    pub kind: Option<Loose>,
    pub subtype: Option<Loose>,
    pub timestamp: Option<Loose>,
    pub uuid: Option<Loose>,
    #[serde(rename = "sessionId")]
    pub session_id: Option<Loose>,
    pub cwd: Option<Loose>,
    pub version: Option<Loose>,
    #[serde(rename = "gitBranch")]
    pub git_branch: Option<Loose>,
    pub model: Option<Loose>,
    pub message: Option<Flex<Message, IgnoredAny>>,
    #[serde(rename = "usageMetadata")]
    pub usage: Option<Flex<Usage, IgnoredAny>>,
    #[serde(rename = "toolCallResult")]
    pub tool_call_result: Option<Flex<CallResult, IgnoredAny>>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
pub(super) struct Message {
    pub parts: Option<Flex<IgnoredAny, Vec<Flex<Part, IgnoredAny>>>>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
pub(super) struct Part {
    pub text: Option<Loose>,
    pub thought: Option<Loose>,
    #[serde(rename = "functionCall")]
    pub function_call: Option<Flex<Call, IgnoredAny>>,
    #[serde(rename = "functionResponse")]
    pub function_response: Option<Flex<Response, IgnoredAny>>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
pub(super) struct Call {
    pub id: Option<Loose>,
    pub name: Option<Loose>,
    /// Kept whole: its excerpt is the call's input.
    pub args: Option<Value>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
pub(super) struct Response {
    pub id: Option<Loose>,
    pub response: Option<Value>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
pub(super) struct Usage {
    #[serde(rename = "promptTokenCount")]
    pub prompt: Option<Loose>,
    #[serde(rename = "candidatesTokenCount")]
    pub candidates: Option<Loose>,
    #[serde(rename = "thoughtsTokenCount")]
    pub thoughts: Option<Loose>,
    #[serde(rename = "cachedContentTokenCount")]
    pub cached: Option<Loose>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
pub(super) struct CallResult {
    pub status: Option<Loose>,
    #[serde(rename = "resultDisplay")]
    pub display: Option<Flex<Display, IgnoredAny>>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
pub(super) struct Display {
    #[serde(rename = "exitCode")]
    pub exit_code: Option<Loose>,
    pub output: Option<Loose>,
}
