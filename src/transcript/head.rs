//! The first records of a transcript, read in constant memory however long their lines
//! are: which agent wrote the file ([`super::detect`]) and the session's identity
//! ([`super::discover`]) come from a few top-level fields, and a first line can be
//! megabytes (a large first prompt, inlined files, an image), so no line is ever held
//! whole or cut short.
//!
//! Invariants: each record is parsed straight from the file, every value but the few
//! fields wanted skipped as it is read; a line that is not JSON is skipped to its
//! newline; at most [`MAX_HEAD`] bytes are read in all.

use serde::de::{self, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use std::fmt;
use std::io::{BufRead, Read};

/// At most this many bytes are read looking at a file's first records.
pub const MAX_HEAD: u64 = 1 << 30;

/// What one record says about its file.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Record {
    /// Whether the record is a JSON object at all.
    pub object: bool,
    /// The top-level `type`, when a string.
    pub ty: Option<String>,
    pub has_payload: bool,
    pub has_id: bool,
    pub has_instructions: bool,
    pub has_git: bool,
    pub session_id: Option<String>,
    pub has_session_id: bool,
    pub has_parent_uuid: bool,
    /// `version` and `width`: an asciicast recording's header.
    pub has_version: bool,
    pub has_width: bool,
    /// `projectHash`: Gemini CLI's session header (the SHA-256 of the project's
    /// directory, in hex).
    pub has_project_hash: bool,
    pub project_hash: Option<String>,
    /// `provenance`: on every Qwen Code record (Claude Code writes none).
    pub has_provenance: bool,
    pub cwd: Option<String>,
    pub id: Option<String>,
    /// `payload.id` and `payload.cwd` (Codex's session_meta).
    pub payload_id: Option<String>,
    pub payload_cwd: Option<String>,
}

/// The records at the start of `r`, one per call to `f`, until `f` returns false, the
/// input ends, or [`MAX_HEAD`] bytes were read. Lines that are not JSON are skipped.
pub fn records(r: impl Read, mut f: impl FnMut(&Record) -> bool) {
    let mut r = std::io::BufReader::with_capacity(1 << 16, r.take(MAX_HEAD));
    loop {
        let parsed = {
            let mut de = serde_json::Deserializer::from_reader(&mut r);
            de.deserialize_any(RecordVisitor)
        };
        match parsed {
            Ok(rec) => {
                if !f(&rec) {
                    return;
                }
            }
            Err(e) if e.is_eof() => return,
            Err(_) => {
                // JSON has no raw newline inside a value: the line ends at the next one.
                if r.skip_until(b'\n').map_or(true, |n| n == 0) {
                    return;
                }
            }
        }
    }
}

/// A string value, or nothing for a value of any other type (skipped).
struct MaybeStr;

impl<'de> de::DeserializeSeed<'de> for MaybeStr {
    type Value = Option<String>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Option<String>, D::Error> {
        d.deserialize_any(Skip(|s: String| Some(s)))
    }
}

/// Skips any value; a string is handed to the function.
struct Skip<F>(F);

macro_rules! skip_scalar {
    ($($name:ident: $t:ty),*) => {$(
        fn $name<E: de::Error>(self, _: $t) -> Result<Self::Value, E> {
            Ok(None)
        }
    )*};
}

impl<'de, F: FnOnce(String) -> Option<String>> Visitor<'de> for Skip<F> {
    type Value = Option<String>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok((self.0)(v.to_string()))
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
        Ok((self.0)(v))
    }
    skip_scalar!(visit_bool: bool, visit_i64: i64, visit_u64: u64, visit_f64: f64);
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(None)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(None)
    }
}

struct RecordVisitor;

impl<'de> Visitor<'de> for RecordVisitor {
    type Value = Record;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON record")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Record, A::Error> {
        let mut r = Record {
            object: true,
            ..Record::default()
        };
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "type" => r.ty = map.next_value_seed(MaybeStr)?,
                "payload" => {
                    r.has_payload = true;
                    let (id, cwd) = map.next_value_seed(Payload)?;
                    r.payload_id = id;
                    r.payload_cwd = cwd;
                }
                "id" => {
                    r.has_id = true;
                    r.id = map.next_value_seed(MaybeStr)?;
                }
                "sessionId" => {
                    r.has_session_id = true;
                    r.session_id = map.next_value_seed(MaybeStr)?;
                }
                "cwd" => r.cwd = map.next_value_seed(MaybeStr)?,
                "projectHash" => {
                    r.has_project_hash = true;
                    r.project_hash = map.next_value_seed(MaybeStr)?;
                }
                other => {
                    match other {
                        "instructions" => r.has_instructions = true,
                        "git" => r.has_git = true,
                        "parentUuid" => r.has_parent_uuid = true,
                        "version" => r.has_version = true,
                        "width" => r.has_width = true,
                        "provenance" => r.has_provenance = true,
                        _ => {}
                    }
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(r)
    }
    // Anything but an object is a record that says nothing.
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Record, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Record::default())
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<Record, E> {
        Ok(Record::default())
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Record, E> {
        Ok(Record::default())
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Record, E> {
        Ok(Record::default())
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Record, E> {
        Ok(Record::default())
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Record, E> {
        Ok(Record::default())
    }
    fn visit_unit<E: de::Error>(self) -> Result<Record, E> {
        Ok(Record::default())
    }
}

/// `id` and `cwd` of a `payload` object (any other value: neither).
struct Payload;

impl<'de> de::DeserializeSeed<'de> for Payload {
    type Value = (Option<String>, Option<String>);
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(PayloadVisitor)
    }
}

struct PayloadVisitor;

impl<'de> Visitor<'de> for PayloadVisitor {
    type Value = (Option<String>, Option<String>);
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let (mut id, mut cwd) = (None, None);
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "id" => id = map.next_value_seed(MaybeStr)?,
                "cwd" => cwd = map.next_value_seed(MaybeStr)?,
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok((id, cwd))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok((None, None))
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<Self::Value, E> {
        Ok((None, None))
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
        Ok((None, None))
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
        Ok((None, None))
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
        Ok((None, None))
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
        Ok((None, None))
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok((None, None))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(bytes: &[u8]) -> Vec<Record> {
        let mut out = Vec::new();
        records(bytes, |r| {
            out.push(r.clone());
            true
        });
        out
    }

    #[test]
    fn fields_come_from_any_depth_of_line_and_the_rest_is_skipped() {
        let big = "x".repeat(3 << 20);
        let line = serde_json::json!({
            "message": {"content": [{"type": "text", "text": big}], "id": "inner"},
            "type": "user", "sessionId": "s1", "cwd": "/w", "parentUuid": null,
        });
        let mut bytes = format!("not json at all {{\n\n{line}\n[1,2]\n").into_bytes();
        bytes.extend_from_slice(br#"{"type":"session_meta","payload":{"id":"t1","cwd":"/c","base_instructions":{"text":"..."}}}"#);
        bytes.push(b'\n');
        bytes.extend_from_slice(b"{\"type\":\"user\",\"cut short");
        let got = all(&bytes);
        assert_eq!(got.len(), 3, "{got:?}");
        assert_eq!(got[0].ty.as_deref(), Some("user"));
        assert_eq!(got[0].session_id.as_deref(), Some("s1"));
        assert_eq!(got[0].cwd.as_deref(), Some("/w"));
        assert!(got[0].has_parent_uuid && got[0].has_session_id && !got[0].has_id);
        assert!(!got[1].object);
        assert!(got[2].has_payload);
        assert_eq!(got[2].payload_id.as_deref(), Some("t1"));
        assert_eq!(got[2].payload_cwd.as_deref(), Some("/c"));
    }

    #[test]
    fn reading_stops_when_asked() {
        let mut seen = 0;
        records(&b"{}\n{}\n{}\n"[..], |_| {
            seen += 1;
            seen < 2
        });
        assert_eq!(seen, 2);
    }
}
