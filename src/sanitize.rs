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

/// Text for one row of a listing: safe for a terminal, and every run of whitespace
/// (newlines and tabs among it) one space, so a title, prompt or steering text of
/// several lines stays on its row.
pub fn one_line(s: &str) -> String {
    for_terminal(&s.split_whitespace().collect::<Vec<_>>().join(" "))
}

/// A JSON document with bidi controls escaped (serde_json already escapes C0 controls).
pub fn json_line<T: serde::Serialize>(v: &T) -> String {
    let s = serde_json::to_string(v).unwrap_or_else(|_| "null".into());
    // Every bidi control is encoded starting with byte 0xE2 or 0xD8: skip the char
    // walk for the usual text that has neither.
    if memchr::memchr2(0xE2, 0xD8, s.as_bytes()).is_none() || !s.chars().any(is_bidi) {
        return s;
    }
    s.chars()
        .map(|c| {
            if is_bidi(c) {
                format!("\\u{:04x}", c as u32)
            } else {
                c.to_string()
            }
        })
        .collect()
}

/// Appends `s` as a JSON string with the bytes [`json_line`] gives it: serde_json's
/// escapes (`\"`, `\\`, `\b \f \n \r \t`, other C0 controls as `\u00xx`) and bidi
/// controls as `\uXXXX`; everything else as is.
pub fn write_json_str(out: &mut Vec<u8>, s: &str) {
    let bytes = s.as_bytes();
    out.reserve(bytes.len() + 2);
    out.push(b'"');
    // `bytes[run..i]` is plain text not yet copied.
    let mut run = 0;
    let mut i = 0;
    let mut control = *b"\\u0000";
    while i < bytes.len() {
        // Eight bytes at a time to the first one that needs a look.
        if let Some(word) = bytes.get(i..i + 8) {
            let mut w = [0u8; 8];
            w.copy_from_slice(word);
            let look = needs_look(u64::from_le_bytes(w));
            if look == 0 {
                i += 8;
                continue;
            }
            i += (look.trailing_zeros() / 8) as usize;
        }
        let b = bytes[i];
        let escape: &[u8] = match b {
            b'"' => b"\\\"",
            b'\\' => b"\\\\",
            b'\n' => b"\\n",
            b'\r' => b"\\r",
            b'\t' => b"\\t",
            0x08 => b"\\b",
            0x0c => b"\\f",
            0..=0x1f => {
                control[4] = HEX[(b >> 4) as usize];
                control[5] = HEX[(b & 0xf) as usize];
                &control
            }
            // Lead bytes, so `i` is a char boundary: is it a bidi control?
            0xE2 | 0xD8 => {
                let c = s[i..].chars().next().unwrap_or('\0');
                if !is_bidi(c) {
                    i += 1;
                    continue;
                }
                out.extend_from_slice(&bytes[run..i]);
                let code = c as u32;
                out.extend_from_slice(b"\\u");
                for shift in [12, 8, 4, 0] {
                    out.push(HEX[((code >> shift) & 0xf) as usize]);
                }
                i += c.len_utf8();
                run = i;
                continue;
            }
            _ => {
                i += 1;
                continue;
            }
        };
        out.extend_from_slice(&bytes[run..i]);
        out.extend_from_slice(escape);
        i += 1;
        run = i;
    }
    out.extend_from_slice(&bytes[run..]);
    out.push(b'"');
}

const HEX: [u8; 16] = *b"0123456789abcdef";

/// The bytes of `w` (little-endian) that are a C0 control, `"`, `\\`, or 0xE2 / 0xD8
/// (the lead bytes of every bidi control), each marked by its high bit. Bytes above a
/// marked one may be marked wrongly (a borrow carries up), so only the lowest mark is
/// exact: it is the first byte that needs a look, and all the caller uses.
fn needs_look(w: u64) -> u64 {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let zero = |v: u64| v.wrapping_sub(ONES) & !v & HIGH;
    // Bytes below 0x20 (the trick holds for bounds up to 0x80).
    let below_space = w.wrapping_sub(ONES * 0x20) & !w & HIGH;
    below_space
        | zero(w ^ (ONES * u64::from(b'"')))
        | zero(w ^ (ONES * u64::from(b'\\')))
        | zero(w ^ (ONES * 0xE2))
        | zero(w ^ (ONES * 0xD8))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_keeps_a_listing_row_on_its_line() {
        assert_eq!(
            one_line("  a title\r\nwith\ta newline\n\n\x1b[2Jand more "),
            "a title with a newline \u{241b}[2Jand more"
        );
        assert_eq!(one_line(""), "");
    }

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
        let back: serde_json::Value = serde_json::from_str(&j).unwrap();
        assert_eq!(back["t"], hostile, "JSON keeps every character");
    }
}
