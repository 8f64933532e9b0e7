//! The shapes of a Claude Code line, read leniently ([`crate::transcript::lenient`]):
//! only the keys the decoder uses are materialised.

pub(super) use crate::transcript::lenient::{parse, Field, Flex, Loose};
use serde::de::IgnoredAny;
use serde::Deserialize;
use serde_json::Value;

/// One transcript line (also one `--output-format stream-json` event: the snake_case
/// twins of a few keys are that format's spelling).
#[derive(Deserialize, Default)]
#[serde(default)]
pub(super) struct Record {
    #[serde(rename = "type")]
    pub kind: Option<Loose>,
    pub subtype: Option<Loose>,
    #[serde(rename = "sessionId")]
    pub session_id: Option<Loose>,
    #[serde(rename = "session_id")]
    pub session_id_snake: Option<Loose>,
    pub version: Option<Loose>,
    pub claude_code_version: Option<Loose>,
    pub cwd: Option<Loose>,
    #[serde(rename = "gitBranch")]
    pub git_branch: Option<Loose>,
    /// `system/init` (stream-json) names the model at top level.
    pub model: Option<Loose>,
    pub timestamp: Option<Loose>,
    #[serde(rename = "isSidechain")]
    pub is_sidechain: Option<Loose>,
    #[serde(rename = "agentId")]
    pub agent_id: Option<Loose>,
    pub uuid: Option<Loose>,
    #[serde(rename = "requestId")]
    pub request_id: Option<Loose>,
    #[serde(rename = "parentUuid")]
    pub parent_uuid: Option<Loose>,
    #[serde(rename = "isMeta")]
    pub is_meta: Option<Loose>,
    #[serde(rename = "isCompactSummary")]
    pub is_compact_summary: Option<Loose>,
    /// `system/local_command` text.
    pub content: Option<Loose>,
    pub message: Option<Flex<Message, IgnoredAny>>,
    #[serde(rename = "toolUseResult")]
    pub tool_use_result: Option<Flex<ToolUseResult, IgnoredAny>>,
    #[serde(rename = "tool_use_result")]
    pub tool_use_result_snake: Option<Flex<ToolUseResult, IgnoredAny>>,
    #[serde(rename = "compactMetadata")]
    pub compact_metadata: Option<Flex<CompactMeta, IgnoredAny>>,
    pub data: Option<Flex<ProgressData, IgnoredAny>>,
    #[serde(rename = "parentToolUseID")]
    pub parent_tool_use_id: Option<Loose>,
    /// stream-json: set on the events of a subagent, to the Task call's id.
    #[serde(rename = "parent_tool_use_id")]
    pub parent_tool_use_id_snake: Option<Loose>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
pub(super) struct Message {
    pub id: Option<Loose>,
    pub model: Option<Loose>,
    pub content: Option<Flex<IgnoredAny, Vec<Flex<Block, IgnoredAny>>>>,
    pub stop_reason: Option<Loose>,
    pub usage: Option<Flex<Usage, IgnoredAny>>,
}

/// Every content block kind in one flat shape: `text`, `thinking`, `tool_use`,
/// `tool_result` (whose `content` nests text and image blocks).
#[derive(Deserialize, Default)]
#[serde(default)]
pub(super) struct Block {
    #[serde(rename = "type")]
    pub kind: Option<Loose>,
    pub text: Option<Loose>,
    pub thinking: Option<Loose>,
    pub id: Option<Loose>,
    pub name: Option<Loose>,
    pub input: Option<Value>,
    pub tool_use_id: Option<Loose>,
    pub content: Option<Flex<IgnoredAny, Vec<Flex<Block, IgnoredAny>>>>,
    pub is_error: Option<Loose>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
pub(super) struct Usage {
    pub input_tokens: Option<Loose>,
    pub output_tokens: Option<Loose>,
    pub cache_read_input_tokens: Option<Loose>,
    pub cache_creation_input_tokens: Option<Loose>,
}

/// The structured result beside a `tool_result`. Presence-only keys are
/// [`IgnoredAny`]: their content never matters, only that the Bash result shape
/// carries them.
#[derive(Deserialize, Default)]
#[serde(default)]
pub(super) struct ToolUseResult {
    #[serde(rename = "type")]
    pub kind: Option<Loose>,
    #[serde(rename = "filePath")]
    pub file_path: Option<Loose>,
    #[serde(rename = "agentId")]
    pub agent_id: Option<Loose>,
    pub stdout: Option<IgnoredAny>,
    pub interrupted: Option<Loose>,
    #[serde(rename = "returnCodeInterpretation")]
    pub return_code_interpretation: Option<IgnoredAny>,
    #[serde(rename = "backgroundTaskId")]
    pub background_task_id: Option<IgnoredAny>,
    /// 1.0.x `BashOutput`.
    #[serde(rename = "exitCode")]
    pub exit_code: Option<Loose>,
    /// 2.x `TaskOutput` of a background shell.
    pub task: Option<Flex<TaskInfo, IgnoredAny>>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
pub(super) struct TaskInfo {
    #[serde(rename = "exitCode")]
    pub exit_code: Option<Loose>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
pub(super) struct CompactMeta {
    pub trigger: Option<Loose>,
    #[serde(rename = "preTokens")]
    pub pre_tokens: Option<Loose>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
pub(super) struct ProgressData {
    #[serde(rename = "type")]
    pub kind: Option<Loose>,
    #[serde(rename = "agentId")]
    pub agent_id: Option<Loose>,
}
