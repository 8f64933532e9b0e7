//! The typed shape of a Codex line: only the fields the decoder reads.
//!
//! One [`Rec`] covers every shape (envelope, payload, bare ResponseItem, `exec --json`
//! event and item): field names never clash in meaning, only in JSON type, so every
//! field is lenient. A field of an unexpected type reads as absent instead of making
//! the line malformed. Unread fields (instructions, encrypted reasoning, rate limits,
//! histories) are skipped without being copied, and tool outputs are summarised while
//! parsed (an excerpt, the header, commit lines), so a line of several MB allocates
//! little more than its excerpt. Skipped values are scanned iteratively by serde_json,
//! so nesting there cannot overflow the stack; records nest at most [`MAX_NESTING`]
//! deep; values read as [`Value`] stop at serde_json's recursion limit, which makes the
//! line malformed.

use super::shell::{self, Style};
use crate::transcript::event::{excerpt, EXCERPT};
use serde::de::{self, Deserialize, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::Value;
use std::borrow::Cow;
use std::cell::Cell;
use std::fmt;

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
    pub metadata: Option<Value>,

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
    pub output: Option<Out>,
    pub aggregated_output: Option<Body>,
    pub formatted_output: Option<Body>,
    pub stdout: Option<Body>,
    pub replacement_history: HasCompaction,
    pub command: Option<Value>,
    pub git: Option<Value>,
    pub info: Option<Value>,
    pub action: Option<Value>,
    pub collaboration_mode: Option<Value>,
    pub changes: Option<Value>,
    pub usage: Option<Value>,
    pub result: Option<Value>,
    pub error: Option<Value>,
}

/// Drains whatever value a visitor was not expecting.
macro_rules! absent_otherwise {
    ($out:expr) => {
        fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
            Ok($out)
        }
        fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
            Ok($out)
        }
        fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
            Ok($out)
        }
        fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
            Ok($out)
        }
        fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok($out)
        }
    };
}

fn drain_seq<'de, A: SeqAccess<'de>>(mut a: A) -> Result<(), A::Error> {
    while a.next_element::<IgnoredAny>()?.is_some() {}
    Ok(())
}

fn drain_map<'de, A: MapAccess<'de>>(mut a: A) -> Result<(), A::Error> {
    while a.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
    Ok(())
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
                let _level = Level::enter();
                if _level.0 > MAX_NESTING {
                    return drain_map(a).map(|_| Nested(None));
                }
                let r = Rec::deserialize(de::value::MapAccessDeserializer::new(a))?;
                Ok(Nested(Some(Box::new(r))))
            }
        }
        d.deserialize_any(V)
    }
}

/// A string field, borrowed from the line when it has no escapes.
#[derive(Debug, Default, Clone)]
pub(super) struct Str<'a>(Option<Cow<'a, str>>);

impl<'a> Str<'a> {
    pub fn get(&self) -> Option<&str> {
        self.0.as_deref()
    }

    /// The value when present and not empty.
    pub fn non_empty(&self) -> Option<&str> {
        self.get().filter(|s| !s.is_empty())
    }

    pub fn is(&self, s: &str) -> bool {
        self.get() == Some(s)
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Str<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Str<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("any value")
            }
            fn visit_borrowed_str<E: de::Error>(self, s: &'de str) -> Result<Str<'de>, E> {
                Ok(Str(Some(Cow::Borrowed(s))))
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Str<'de>, E> {
                Ok(Str(Some(Cow::Owned(s.to_string()))))
            }
            absent_otherwise!(Str(None));
            fn visit_seq<A: SeqAccess<'de>>(self, a: A) -> Result<Str<'de>, A::Error> {
                drain_seq(a).map(|_| Str(None))
            }
            fn visit_map<A: MapAccess<'de>>(self, a: A) -> Result<Str<'de>, A::Error> {
                drain_map(a).map(|_| Str(None))
            }
        }
        d.deserialize_any(V)
    }
}

/// `arguments`: a JSON string for function calls, an object for `exec --json` MCP items.
#[derive(Debug, Default)]
pub(super) struct Args<'a>(pub Option<Cow<'a, str>>);

impl<'de: 'a, 'a> Deserialize<'de> for Args<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match Value::deserialize(d)? {
            Value::String(s) => Ok(Args(Some(Cow::Owned(s)))),
            Value::Null => Ok(Args(None)),
            v => Ok(Args(Some(Cow::Owned(v.to_string())))),
        }
    }
}

/// The `text` of content items (`input_text`, `output_text`, `summary_text`, …), or a
/// plain string.
#[derive(Debug, Default)]
pub(super) struct Texts<'a>(pub Vec<Cow<'a, str>>);

impl<'de: 'a, 'a> Deserialize<'de> for Texts<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Texts<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("content")
            }
            fn visit_borrowed_str<E: de::Error>(self, s: &'de str) -> Result<Texts<'de>, E> {
                Ok(Texts(vec![Cow::Borrowed(s)]))
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Texts<'de>, E> {
                Ok(Texts(vec![Cow::Owned(s.to_string())]))
            }
            absent_otherwise!(Texts(Vec::new()));
            fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<Texts<'de>, A::Error> {
                let mut texts = Vec::new();
                while let Some(item) = a.next_element::<TextItem<'de>>()? {
                    texts.extend(item.text.0);
                }
                Ok(Texts(texts))
            }
            fn visit_map<A: MapAccess<'de>>(self, a: A) -> Result<Texts<'de>, A::Error> {
                drain_map(a).map(|_| Texts(Vec::new()))
            }
        }
        d.deserialize_any(V)
    }
}

#[derive(Debug, Default)]
struct TextItem<'a> {
    text: Str<'a>,
}

impl<'de: 'a, 'a> Deserialize<'de> for TextItem<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = TextItem<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a content item")
            }
            fn visit_borrowed_str<E: de::Error>(self, _: &'de str) -> Result<TextItem<'de>, E> {
                Ok(TextItem::default())
            }
            fn visit_str<E: de::Error>(self, _: &str) -> Result<TextItem<'de>, E> {
                Ok(TextItem::default())
            }
            absent_otherwise!(TextItem::default());
            fn visit_seq<A: SeqAccess<'de>>(self, a: A) -> Result<TextItem<'de>, A::Error> {
                drain_seq(a).map(|_| TextItem::default())
            }
            fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<TextItem<'de>, A::Error> {
                let mut item = TextItem::default();
                while let Some(k) = a.next_key::<Cow<'de, str>>()? {
                    if k == "text" {
                        item.text = a.next_value()?;
                    } else {
                        a.next_value::<IgnoredAny>()?;
                    }
                }
                Ok(item)
            }
        }
        d.deserialize_any(V)
    }
}

/// `replacement_history`: only whether it holds a remote `compaction` item.
#[derive(Debug, Default)]
pub(super) struct HasCompaction(pub bool);

impl<'de> Deserialize<'de> for HasCompaction {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = HasCompaction;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a history")
            }
            fn visit_str<E: de::Error>(self, _: &str) -> Result<HasCompaction, E> {
                Ok(HasCompaction(false))
            }
            absent_otherwise!(HasCompaction(false));
            fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<HasCompaction, A::Error> {
                let mut found = false;
                while let Some(item) = a.next_element::<TypeOnly>()? {
                    found |= item.0;
                }
                Ok(HasCompaction(found))
            }
            fn visit_map<A: MapAccess<'de>>(self, a: A) -> Result<HasCompaction, A::Error> {
                drain_map(a).map(|_| HasCompaction(false))
            }
        }
        d.deserialize_any(V)
    }
}

/// A history item, read only for `"type": "compaction"`.
struct TypeOnly(bool);

impl<'de> Deserialize<'de> for TypeOnly {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = TypeOnly;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a history item")
            }
            fn visit_str<E: de::Error>(self, _: &str) -> Result<TypeOnly, E> {
                Ok(TypeOnly(false))
            }
            absent_otherwise!(TypeOnly(false));
            fn visit_seq<A: SeqAccess<'de>>(self, a: A) -> Result<TypeOnly, A::Error> {
                drain_seq(a).map(|_| TypeOnly(false))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<TypeOnly, A::Error> {
                let mut found = false;
                while let Some(k) = a.next_key::<Cow<'de, str>>()? {
                    if k == "type" {
                        found = a.next_value::<Str>()?.is("compaction");
                    } else {
                        a.next_value::<IgnoredAny>()?;
                    }
                }
                Ok(TypeOnly(found))
            }
        }
        d.deserialize_any(V)
    }
}

/// An exit code (an integer; anything else reads as absent).
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct Int(pub Option<i32>);

impl<'de> Deserialize<'de> for Int {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(Int(shell::as_i32(&Value::deserialize(d)?)))
    }
}

#[derive(Debug, Default, Clone, Copy)]
pub(super) struct Bool(pub Option<bool>);

impl<'de> Deserialize<'de> for Bool {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(Bool(Value::deserialize(d)?.as_bool()))
    }
}

/// An id written as a number or a string (unified-exec process ids).
#[derive(Debug, Default, Clone)]
pub(super) struct Key(pub Option<String>);

impl<'de> Deserialize<'de> for Key {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(Key(key(&Value::deserialize(d)?)))
    }
}

/// Session and process ids are numbers in arguments and text in outputs.
pub(super) fn key(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
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
        let mut commit_lines = String::new();
        for line in text.lines() {
            let l = line.trim_start();
            if l.starts_with('[') && l.contains("] ") && commit_lines.len() < 1024 {
                commit_lines.push_str(l);
                commit_lines.push('\n');
            }
        }
        Body {
            excerpt: excerpt(text, EXCERPT),
            commit_lines,
        }
    }
}

impl<'de> Deserialize<'de> for Body {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(Out::deserialize(d)?.body)
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
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Out;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a tool output")
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Out, E> {
                Ok(Out::of(s))
            }
            absent_otherwise!(Out::default());
            // Newer outputs may be content items; their texts are the output.
            fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<Out, A::Error> {
                let mut text = String::new();
                while let Some(item) = a.next_element::<TextItem>()? {
                    if let Some(t) = item.text.get() {
                        if !text.is_empty() {
                            text.push('\n');
                        }
                        text.push_str(t);
                    }
                }
                Ok(Out::of(&text))
            }
            fn visit_map<A: MapAccess<'de>>(self, a: A) -> Result<Out, A::Error> {
                let v = Value::deserialize(de::value::MapAccessDeserializer::new(a))?;
                let text = match v.get("content") {
                    Some(Value::String(s)) => s.clone(),
                    _ => v.to_string(),
                };
                Ok(Out::of(&text))
            }
        }
        d.deserialize_any(V)
    }
}
