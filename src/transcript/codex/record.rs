//! The typed shape of a Codex line: only the fields the decoder reads.
//!
//! One [`Rec`] covers every shape (envelope, payload, bare ResponseItem, `exec --json`
//! event and item): field names never clash in meaning, only in JSON type, so every
//! field is lenient ([`super::lenient`]). Unread fields (instructions, encrypted
//! reasoning, rate limits, histories) are skipped without being copied, and tool
//! outputs are summarised while parsed (an excerpt, the header, commit lines), so a line
//! of several MB allocates little more than its excerpt.
//!
//! Depth: skipped values are scanned iteratively by serde_json, records nest at most
//! [`MAX_NESTING`] deep, and values read whole as [`Value`] stop at serde_json's
//! recursion limit (the line is then malformed), so no line can overflow the stack.

use super::lenient::{
    absent_otherwise, drain_map, drain_seq, Args, Bool, Count, HasCompaction, Int, Key, Obj, Str,
    TextItem, Texts,
};
use super::shell::{self, Style};
use crate::transcript::event::{excerpt, EXCERPT};
pub(super) use crate::transcript::lenient::micros;
use serde::de::{self, Deserialize, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::Value;
use std::cell::Cell;
use std::fmt;

/// One line, or a record inside one: every field some shape uses, each optional.
/// Parsing moves a record several times (serde's field slots, the struct, its box), so
/// the large fields that few records carry (outputs, raw values) are boxed: the record
/// stays about half as big.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(default)]
pub(super) struct Rec<'a> {
    #[serde(borrow)]
    pub timestamp: Str<'a>,
    #[serde(rename = "type", borrow)]
    pub ty: Str<'a>,
    #[serde(borrow)]
    pub payload: Nested<'a>,
    #[serde(borrow)]
    pub item: Nested<'a>,
    pub record_type: Option<IgnoredAny>,
    pub metadata: Obj<Metadata>,

    #[serde(borrow)]
    pub id: Str<'a>,
    #[serde(borrow)]
    pub session_id: Str<'a>,
    #[serde(borrow)]
    pub thread_id: Str<'a>,
    #[serde(borrow)]
    pub call_id: Str<'a>,
    #[serde(borrow)]
    pub name: Str<'a>,
    #[serde(borrow)]
    pub namespace: Str<'a>,
    #[serde(borrow)]
    pub role: Str<'a>,
    #[serde(borrow)]
    pub phase: Str<'a>,
    #[serde(borrow)]
    pub kind: Str<'a>,
    #[serde(borrow)]
    pub status: Str<'a>,
    #[serde(borrow)]
    pub cli_version: Str<'a>,
    #[serde(borrow)]
    pub cwd: Str<'a>,
    #[serde(borrow)]
    pub model: Str<'a>,
    #[serde(borrow)]
    pub message: Str<'a>,
    #[serde(borrow)]
    pub input: Str<'a>,
    #[serde(borrow)]
    pub text: Str<'a>,
    #[serde(borrow)]
    pub server: Str<'a>,
    #[serde(borrow)]
    pub tool: Str<'a>,
    #[serde(borrow)]
    pub arguments: Args<'a>,
    #[serde(borrow)]
    pub content: Texts<'a>,
    #[serde(borrow)]
    pub summary: Texts<'a>,
    pub process_id: Key,
    pub exit_code: Int,
    pub success: Bool,
    pub output: Option<Box<Out>>,
    pub aggregated_output: Option<Box<Body>>,
    pub formatted_output: Option<Box<Body>>,
    pub stdout: Option<Box<Body>>,
    pub replacement_history: HasCompaction,
    pub command: Option<Box<Value>>,
    #[serde(borrow)]
    pub git: Obj<Git<'a>>,
    pub info: Obj<Info>,
    pub action: Option<Box<Value>>,
    #[serde(borrow)]
    pub collaboration_mode: Obj<Collaboration<'a>>,
    pub changes: Option<Box<Value>>,
    pub usage: Option<Box<Value>>,
    pub result: Option<Box<Value>>,
    pub error: Option<Box<Value>>,
}

#[derive(Debug, Default, serde::Deserialize)]
#[serde(default)]
pub(super) struct Metadata {
    pub compaction_output: Bool,
}

#[derive(Debug, Default, serde::Deserialize)]
#[serde(default)]
pub(super) struct Git<'a> {
    #[serde(borrow)]
    pub branch: Str<'a>,
}

#[derive(Debug, Default, serde::Deserialize)]
#[serde(default)]
pub(super) struct Collaboration<'a> {
    #[serde(borrow)]
    pub settings: Obj<Settings<'a>>,
}

/// `collaboration_mode.settings`: only its model.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(default)]
pub(super) struct Settings<'a> {
    #[serde(borrow)]
    pub model: Str<'a>,
}

/// `token_count.info`: only the cumulative totals.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(default)]
pub(super) struct Info {
    pub total_token_usage: Obj<Usage>,
}

#[derive(Debug, Default, Clone, Copy, serde::Deserialize)]
#[serde(default)]
pub(super) struct Usage {
    pub input_tokens: Count,
    pub output_tokens: Count,
    pub cached_input_tokens: Count,
}

/// Records nest at most this deep (`payload.item`); deeper ones are skipped, which keeps
/// the stack small however deep a hostile line nests them.
const MAX_NESTING: u32 = 2;

thread_local! {
    static NESTING: Cell<u32> = const { Cell::new(0) };
}

/// One level of record nesting on this thread, left when dropped (also on errors).
struct Level(u32);

impl Level {
    fn enter() -> Self {
        Level(NESTING.with(|n| {
            n.set(n.get() + 1);
            n.get()
        }))
    }
}

impl Drop for Level {
    fn drop(&mut self) {
        NESTING.with(|n| n.set(n.get() - 1));
    }
}

/// A record inside a record (`payload`, `item`); anything but an object is absent.
#[derive(Debug, Default)]
pub(super) struct Nested<'a>(pub Option<Box<Rec<'a>>>);

impl<'de: 'a, 'a> Deserialize<'de> for Nested<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Nested<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a record")
            }
            fn visit_str<E: de::Error>(self, _: &str) -> Result<Nested<'de>, E> {
                Ok(Nested(None))
            }
            absent_otherwise!(Nested(None));
            fn visit_seq<A: SeqAccess<'de>>(self, a: A) -> Result<Nested<'de>, A::Error> {
                drain_seq(a).map(|_| Nested(None))
            }
            fn visit_map<A: MapAccess<'de>>(self, a: A) -> Result<Nested<'de>, A::Error> {
                let level = Level::enter();
                if level.0 > MAX_NESTING {
                    return drain_map(a).map(|_| Nested(None));
                }
                let r = Rec::deserialize(de::value::MapAccessDeserializer::new(a))?;
                Ok(Nested(Some(Box::new(r))))
            }
        }
        d.deserialize_any(V)
    }
}

/// A command's output, read while parsed: its start and any `git commit` summary lines.
#[derive(Debug, Default, Clone)]
pub(super) struct Body {
    /// At most [`EXCERPT`] bytes, cut on a char boundary and marked.
    pub excerpt: String,
    /// Lines shaped like git's `[branch sha] subject`, wherever they are in the output.
    pub commit_lines: String,
}

impl Body {
    pub fn of(text: &str) -> Self {
        Body {
            excerpt: excerpt(text, EXCERPT),
            commit_lines: commit_lines(text),
        }
    }
}

/// Lines that open with `[` (after indentation) and hold `] `: git's commit summary
/// shape. Found by jumping from `[` to `[`, so long outputs without them cost a memchr.
fn commit_lines(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut found = String::new();
    let mut next = 0;
    for at in memchr::memchr_iter(b'[', bytes) {
        if at < next || found.len() >= 1024 {
            continue;
        }
        let start = memchr::memrchr(b'\n', &bytes[..at]).map_or(0, |i| i + 1);
        let end = memchr::memchr(b'\n', &bytes[at..]).map_or(bytes.len(), |i| at + i);
        next = end;
        let indented = bytes[start..at].iter().all(|b| *b == b' ' || *b == b'\t');
        let line = &text[at..end];
        if indented && line.contains("] ") {
            found.push_str(line);
            found.push('\n');
        }
    }
    found
}

impl<'de> Deserialize<'de> for Body {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(TextVisitor(Body::of))
    }
}

/// A tool output: what [`shell::read`] makes of it, plus its body.
#[derive(Debug, Default, Clone)]
pub(super) struct Out {
    pub style: Style,
    pub exit: Option<i32>,
    /// Unified exec: the process still runs under this session id.
    pub running: Option<String>,
    pub body: Body,
}

impl Out {
    fn of(raw: &str) -> Self {
        let r = shell::read(raw);
        Out {
            style: r.style,
            exit: r.exit,
            running: r.running.map(str::to_string),
            body: Body::of(&r.body),
        }
    }
}

impl<'de> Deserialize<'de> for Out {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(TextVisitor(Out::of))
    }
}

/// Reads an output as text and summarises it in place (the text is not kept).
struct TextVisitor<T>(fn(&str) -> T);

impl<'de, T: Default> Visitor<'de> for TextVisitor<T> {
    type Value = T;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a tool output")
    }
    fn visit_str<E: de::Error>(self, s: &str) -> Result<T, E> {
        Ok((self.0)(s))
    }
    absent_otherwise!(T::default());
    // Newer outputs may be content items; their texts are the output.
    fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<T, A::Error> {
        let mut text = String::new();
        while let Some(item) = a.next_element::<TextItem>()? {
            if let Some(t) = item.text.get() {
                if !text.is_empty() {
                    text.push('\n');
                }
                text.push_str(t);
            }
        }
        Ok((self.0)(&text))
    }
    fn visit_map<A: MapAccess<'de>>(self, a: A) -> Result<T, A::Error> {
        let v = Value::deserialize(de::value::MapAccessDeserializer::new(a))?;
        match v.get("content") {
            Some(Value::String(s)) => Ok((self.0)(s)),
            _ => Ok((self.0)(&v.to_string())),
        }
    }
}
