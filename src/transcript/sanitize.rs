//! Making agent-written text safe to print on a terminal.
//!
//! Transcripts hold whatever the agent and its tools printed: escape sequences that
//! would move the cursor, retitle the window or hide text, and bidi controls that
//! reorder what a reader sees. For the terminal view every C0/C1 control (except
//! newline and tab) becomes a visible stand-in and every bidi control becomes U+FFFD.
//! For JSON, nothing is dropped: bidi controls are written as `\uXXXX` escapes.

/// Bidi embedding, override, isolate and mark characters.
pub fn is_bidi(c: char) -> bool {
    matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' | '\u{200E}' | '\u{200F}' | '\u{061C}')
}

/// Text safe for a terminal: controls shown as Unicode control pictures (ESC → ␛).
pub fn for_terminal(s: &str) -> String {
    if !s
        .chars()
        .any(|c| (c.is_control() && c != '\n' && c != '\t') || is_bidi(c))
    {
        return s.to_string();
    }
    s.chars()
        .map(|c| match c {
            '\n' | '\t' => c,
            '\u{7f}' => '\u{2421}',
            c if (c as u32) < 0x20 => char::from_u32(0x2400 + c as u32).unwrap_or('\u{FFFD}'),
            c if c.is_control() || is_bidi(c) => '\u{FFFD}',
            c => c,
        })
        .collect()
}

/// A JSON document with bidi controls escaped (serde_json already escapes C0 controls).
pub fn json_line<T: serde::Serialize>(v: &T) -> String {
    let mut buf = Vec::new();
    write_json_line(&mut buf, v);
    // Only whole chars were written: serde_json output and `\uXXXX` escapes.
    String::from_utf8(buf).unwrap_or_else(|_| "null".into())
}

/// [`json_line`] into `buf` (cleared first), reusing its allocation: the same bytes,
/// without a newline.
pub fn write_json_line<T: serde::Serialize>(buf: &mut Vec<u8>, v: &T) {
    buf.clear();
    if serde_json::to_writer(&mut *buf, v).is_err() {
        buf.clear();
        buf.extend_from_slice(b"null");
        return;
    }
    // Every bidi control is encoded starting with byte 0xE2 or 0xD8: skip the char
    // walk for the usual text that has neither.
    let Some(first) = memchr::memchr2(0xE2, 0xD8, buf) else {
        return;
    };
    let Ok(s) = std::str::from_utf8(&buf[first..]) else {
        return;
    };
    if !s.chars().any(is_bidi) {
        return;
    }
    use std::fmt::Write;
    let mut escaped = String::with_capacity(s.len() + 16);
    for c in s.chars() {
        if is_bidi(c) {
            let _ = write!(escaped, "\\u{:04x}", c as u32);
        } else {
            escaped.push(c);
        }
    }
    buf.truncate(first);
    buf.extend_from_slice(escaped.as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_and_bidi_are_neutralised() {
        let hostile = "ok\x1b[2J\x1b]0;pwned\x07 \u{202E}txt.exe\u{9b}31m\nnext\tcol";
        let safe = for_terminal(hostile);
        assert!(!safe
            .chars()
            .any(|c| c.is_control() && c != '\n' && c != '\t'));
        assert!(!safe.chars().any(is_bidi));
        assert!(safe.contains("␛[2J") && safe.contains("\nnext\tcol"));
        let j = json_line(&serde_json::json!({ "t": hostile }));
        assert!(j.contains("\\u001b") && j.contains("\\u202e"));
        let mut reused = b"a stale line".to_vec();
        write_json_line(&mut reused, &serde_json::json!({ "t": hostile }));
        assert_eq!(reused, j.as_bytes(), "the buffer is cleared and refilled");
        let back: serde_json::Value = serde_json::from_str(&j).unwrap();
        assert_eq!(back["t"], hostile, "JSON keeps every character");
    }
}
