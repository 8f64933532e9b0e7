//! Lenient JSON record fields, shared by the JSON Lines decoders (Claude Code, Gemini
//! CLI, Qwen Code): a record is read into a derived struct naming only the keys the
//! decoder uses, so everything else is skipped by serde_json without allocating (an
//! inlined file, a base64 image, a telemetry payload costs a scan, not a copy).
//! Scalars are [`Loose`] and object-or-string-or-list fields are [`Flex`], so a known
//! key holding an unexpected type reads as "absent" instead of failing the whole
//! line; only broken JSON, a non-object line or a duplicated key makes a line
//! malformed ([`parse`]).

use crate::clock::Micros;
use serde::de::value::{MapAccessDeserializer, SeqAccessDeserializer};
use serde::de::{Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use std::fmt;
use std::marker::PhantomData;

/// A scalar of whatever JSON type the line holds; containers are skipped.
#[derive(Debug)]
pub enum Loose {
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
pub trait Field {
    fn str(&self) -> Option<&str>;
    fn int(&self) -> Option<i64>;
    fn truthy(&self) -> bool;
    /// A non-negative integer (a token count), else 0.
    fn count(&self) -> u64 {
        self.int().and_then(|n| u64::try_from(n).ok()).unwrap_or(0)
    }
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
pub enum Flex<O, L> {
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

/// The items of a list-valued field (none when it held something else).
pub fn items<O, T>(f: &Option<Flex<O, Vec<Flex<T, IgnoredAny>>>>) -> impl Iterator<Item = &T> {
    let list = match f {
        Some(Flex::List(l)) => l.as_slice(),
        _ => &[],
    };
    list.iter().filter_map(Flex::obj)
}

/// Reads one line into `R`: UTF-8, a JSON object, nothing after it. `None` is a
/// malformed line.
pub fn parse<'a, R: Deserialize<'a>>(bytes: &'a [u8]) -> Option<R> {
    // SIMD validation: this check covers every byte of every line.
    let text = simdutf8::basic::from_utf8(bytes).ok()?;
    // A derived struct also accepts a JSON array (fields by position); only objects
    // are records.
    if text.trim_start().as_bytes().first() != Some(&b'{') {
        return None;
    }
    serde_json::from_str(text).ok()
}

/// A record's RFC 3339 timestamp in microseconds. Codex, Gemini CLI and
/// Qwen Code write UTC as
/// `YYYY-MM-DDTHH:MM:SS[.fff]Z`, read here without chrono's general parser (it runs on
/// every line); anything else goes to chrono.
pub fn micros(s: &str) -> Option<Micros> {
    fast_micros(s.as_bytes()).or_else(|| {
        chrono::DateTime::parse_from_rfc3339(s)
            .ok()
            .map(|t| t.timestamp_micros())
    })
}

fn fast_micros(b: &[u8]) -> Option<Micros> {
    let [y0, y1, y2, y3, b'-', m0, m1, b'-', d0, d1, b'T', h0, h1, b':', n0, n1, b':', s0, s1, rest @ ..] =
        b
    else {
        return None;
    };
    let num = |ds: &[u8]| -> Option<i64> {
        ds.iter().try_fold(0i64, |acc, d| {
            d.is_ascii_digit().then(|| acc * 10 + i64::from(d - b'0'))
        })
    };
    let (year, month, day) = (
        num(&[*y0, *y1, *y2, *y3])?,
        num(&[*m0, *m1])?,
        num(&[*d0, *d1])?,
    );
    let (hour, minute, second) = (num(&[*h0, *h1])?, num(&[*n0, *n1])?, num(&[*s0, *s1])?);
    let (frac, tail) = match rest {
        [b'.', more @ ..] => {
            let digits = more.iter().take_while(|d| d.is_ascii_digit()).count();
            let micros = more[..digits.min(6)]
                .iter()
                .fold(0i64, |a, d| a * 10 + i64::from(d - b'0'));
            (
                micros * 10i64.pow(6 - digits.min(6) as u32),
                &more[digits..],
            )
        }
        _ => (0, rest),
    };
    if tail != b"Z"
        || !(1..=12).contains(&month)
        || !(1..=31).contains(&day)
        || hour > 23
        || minute > 59
        || second > 60
    {
        return None;
    }
    // Days from the civil date (Howard Hinnant's algorithm).
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * ((month + 9) % 12) + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(((days * 24 + hour) * 60 + minute) * 60_000_000 + second * 1_000_000 + frac)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_match_chrono() {
        for s in [
            "2026-11-29T21:03:00.836Z",
            "2025-09-10T18:58:38.331Z",
            "2026-01-01T00:00:00Z",
            "2024-02-29T23:59:59.123456789Z",
            "1999-12-31T12:00:00.5Z",
        ] {
            let chrono = chrono::DateTime::parse_from_rfc3339(s)
                .unwrap()
                .timestamp_micros();
            assert_eq!(fast_micros(s.as_bytes()), Some(chrono), "{s}");
        }
        assert_eq!(
            micros("2026-01-01T01:00:00+01:00"),
            Some(1_767_225_600_000_000)
        );
        assert_eq!(micros("yesterday"), None);
    }
}
