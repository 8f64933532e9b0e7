//! Lenient JSON field types for [`super::record::Rec`].
//!
//! Codex writes the same key with different JSON types across record types and
//! versions (`summary` is a list in reasoning and a string in turn contexts, `output`
//! is a string or content items, ids are strings or numbers). Each type here reads
//! what it expects and drains anything else as absent, so an odd field never makes a
//! line malformed. Drained values are skipped without being copied.

use serde::de::{self, Deserialize, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::Value;
use std::borrow::Cow;
use std::fmt;

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
pub(super) use absent_otherwise;

pub(super) fn drain_seq<'de, A: SeqAccess<'de>>(mut a: A) -> Result<(), A::Error> {
    while a.next_element::<IgnoredAny>()?.is_some() {}
    Ok(())
}

pub(super) fn drain_map<'de, A: MapAccess<'de>>(mut a: A) -> Result<(), A::Error> {
    while a.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
    Ok(())
}

/// A struct-shaped field: anything but an object reads as absent.
#[derive(Debug, Default)]
pub(super) struct Obj<T>(pub Option<T>);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Obj<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<T>(std::marker::PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for V<T> {
            type Value = Obj<T>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an object")
            }
            fn visit_str<E: de::Error>(self, _: &str) -> Result<Obj<T>, E> {
                Ok(Obj(None))
            }
            absent_otherwise!(Obj(None));
            fn visit_seq<A: SeqAccess<'de>>(self, a: A) -> Result<Obj<T>, A::Error> {
                drain_seq(a).map(|_| Obj(None))
            }
            fn visit_map<A: MapAccess<'de>>(self, a: A) -> Result<Obj<T>, A::Error> {
                T::deserialize(de::value::MapAccessDeserializer::new(a)).map(|t| Obj(Some(t)))
            }
        }
        d.deserialize_any(V(std::marker::PhantomData))
    }
}

/// A token count (a non-negative integer; anything else reads as absent).
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct Count(pub Option<u64>);

impl<'de> Deserialize<'de> for Count {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(Count(Value::deserialize(d)?.as_u64()))
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
pub(super) struct TextItem<'a> {
    pub text: Str<'a>,
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
        Ok(Int(super::shell::as_i32(&Value::deserialize(d)?)))
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
