//! The shapes of a Claude Code line, read leniently: only the keys the decoder uses are
//! materialised, everything else is skipped by serde_json without allocating (a Read
//! result's inlined file or a base64 image costs a scan, not a copy). Scalars are
//! [`Loose`] and object-or-string fields are [`Flex`], so a known key holding an
//! unexpected type reads as "absent" instead of failing the whole line; only broken
//! JSON, a non-object line or a duplicated key makes a line malformed.

use serde::de::value::{MapAccessDeserializer, SeqAccessDeserializer};
use serde::de::{Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use serde_json::Value;
use std::fmt;
use std::marker::PhantomData;

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

/// A scalar of whatever JSON type the line holds; containers are skipped.
#[derive(Debug)]
pub(super) enum Loose {
    Str(String),
    Int(i64),
    Bool(bool),
    Other,
}

impl Loose {
    pub fn str(&self) -> Option<&str> {
        match self {
            Loose::Str(s) => Some(s),
            _ => None,
        }
    }
}

/// Accessors over `Option<Loose>`, the form every field takes.
pub(super) trait Field {
    fn str(&self) -> Option<&str>;
    fn int(&self) -> Option<i64>;
    fn truthy(&self) -> bool;
}

impl Field for Option<Loose> {
    fn str(&self) -> Option<&str> {
        self.as_ref().and_then(Loose::str)
    }
    fn int(&self) -> Option<i64> {
        match self {
            Some(Loose::Int(n)) => Some(*n),
            _ => None,
        }
    }
    fn truthy(&self) -> bool {
        matches!(self, Some(Loose::Bool(true)))
    }
}

impl<'de> Deserialize<'de> for Loose {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Loose;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_str<E>(self, v: &str) -> Result<Loose, E> {
                Ok(Loose::Str(v.to_owned()))
            }
            fn visit_string<E>(self, v: String) -> Result<Loose, E> {
                Ok(Loose::Str(v))
            }
            fn visit_bool<E>(self, v: bool) -> Result<Loose, E> {
                Ok(Loose::Bool(v))
            }
            fn visit_i64<E>(self, v: i64) -> Result<Loose, E> {
                Ok(Loose::Int(v))
            }
            fn visit_u64<E>(self, v: u64) -> Result<Loose, E> {
                Ok(i64::try_from(v).map_or(Loose::Other, Loose::Int))
            }
            fn visit_f64<E>(self, _: f64) -> Result<Loose, E> {
                Ok(Loose::Other)
            }
            fn visit_unit<E>(self) -> Result<Loose, E> {
                Ok(Loose::Other)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Loose, A::Error> {
                IgnoredAny.visit_seq(seq).map(|_| Loose::Other)
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Loose, A::Error> {
                IgnoredAny.visit_map(map).map(|_| Loose::Other)
            }
        }
        d.deserialize_any(V)
    }
}

/// A field that is a string, an object `O` or an array `L` depending on the version
/// or the tool (`message.content`, `toolUseResult`, `tool_result.content`).
pub(super) enum Flex<O, L> {
    Str(String),
    Obj(O),
    List(L),
    Other,
}

impl<O, L> Flex<O, L> {
    pub fn obj(&self) -> Option<&O> {
        match self {
            Flex::Obj(o) => Some(o),
            _ => None,
        }
    }
}

impl<'de, O: Deserialize<'de>, L: Deserialize<'de>> Deserialize<'de> for Flex<O, L> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<O, L>(PhantomData<(O, L)>);
        impl<'de, O: Deserialize<'de>, L: Deserialize<'de>> Visitor<'de> for V<O, L> {
            type Value = Flex<O, L>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Flex::Str(v.to_owned()))
            }
            fn visit_string<E>(self, v: String) -> Result<Self::Value, E> {
                Ok(Flex::Str(v))
            }
            fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
                Ok(Flex::Other)
            }
            fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
                Ok(Flex::Other)
            }
            fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
                Ok(Flex::Other)
            }
            fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
                Ok(Flex::Other)
            }
            fn visit_unit<E>(self) -> Result<Self::Value, E> {
                Ok(Flex::Other)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
                L::deserialize(SeqAccessDeserializer::new(seq)).map(Flex::List)
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
                O::deserialize(MapAccessDeserializer::new(map)).map(Flex::Obj)
            }
        }
        d.deserialize_any(V(PhantomData))
    }
}

/// Reads one line: UTF-8, a JSON object, nothing after it. `None` is a malformed line.
pub(super) fn parse(bytes: &[u8]) -> Option<Record> {
    // SIMD validation: this check covers every byte of every line.
    let text = simdutf8::basic::from_utf8(bytes).ok()?;
    // A derived struct also accepts a JSON array (fields by position); only objects
    // are records.
    if text.trim_start().as_bytes().first() != Some(&b'{') {
        return None;
    }
    serde_json::from_str(text).ok()
}
