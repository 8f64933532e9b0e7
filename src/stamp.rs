//! Base52 moment stamps: the identifiers of tasks, steering items and sessions.
//!
//! A stamp is the number of microseconds since the Unix epoch written in 9 digits
//! of the alphabet `0123456789BCDFGHJKLMNPQRSTVWXYZbcdfghjklmnpqrstvwxyz`. The alphabet
//! is in ASCII order, so the byte order of two stamps is their time order; it has no
//! vowels, so a stamp never spells a word. Nine digits cover 52^9 µs, until the year 2058.
//!
//! Invariants: a [`Minter`] never hands out the same or a smaller value twice (a burst
//! inside one microsecond takes the next free microsecond); stamps minted by different
//! processes in the same microsecond are told apart by the store, which appends `-N`
//! ([`with_suffix`]) when the plain stamp is taken.

use std::sync::Mutex;

/// The 52 digits, in ASCII (and so in sort) order.
pub const ALPHABET: &[u8; 52] = b"0123456789BCDFGHJKLMNPQRSTVWXYZbcdfghjklmnpqrstvwxyz";
/// Every stamp has exactly this many digits.
pub const WIDTH: usize = 9;
const BASE: u64 = 52;
/// The largest value that fits in [`WIDTH`] digits.
pub const MAX: u64 = 52u64.pow(WIDTH as u32) - 1;

/// Writes `micros` as a fixed-width stamp. Values past [`MAX`] saturate, which keeps
/// the order monotone instead of wrapping.
pub fn encode(micros: u64) -> String {
    let mut v = micros.min(MAX);
    let mut out = [b'0'; WIDTH];
    for slot in out.iter_mut().rev() {
        *slot = ALPHABET[(v % BASE) as usize];
        v /= BASE;
    }
    String::from_utf8(out.to_vec()).expect("alphabet is ASCII")
}

/// Value of one digit, or `None` for a character outside the alphabet.
pub fn digit_value(c: u8) -> Option<u64> {
    ALPHABET.iter().position(|&a| a == c).map(|p| p as u64)
}

/// Reads a stamp (with or without a `-N` suffix) back into microseconds.
pub fn decode(stamp: &str) -> Option<u64> {
    let (base, _) = split_suffix(stamp)?;
    base.bytes()
        .try_fold(0u64, |acc, c| Some(acc * BASE + digit_value(c)?))
}

/// Splits `XXXXXXXXX-N` into its stamp and suffix; `None` if the text is not stamp-shaped.
pub fn split_suffix(stamp: &str) -> Option<(&str, Option<u32>)> {
    let (base, suffix) = match stamp.split_once('-') {
        Some((b, s)) => {
            if s.is_empty() || s.starts_with('0') || !s.bytes().all(|c| c.is_ascii_digit()) {
                return None;
            }
            (b, Some(s.parse().ok()?))
        }
        None => (stamp, None),
    };
    if base.len() != WIDTH || !base.bytes().all(|c| digit_value(c).is_some()) {
        return None;
    }
    Some((base, suffix))
}

/// True if `text` is a whole stamp, optionally with a `-N` collision suffix.
pub fn is_stamp(text: &str) -> bool {
    split_suffix(text).is_some()
}

/// True if every character of `text` could appear in a stamp (used to validate prefixes).
pub fn is_stamp_prefix(text: &str) -> bool {
    !text.is_empty() && text.len() <= WIDTH && text.bytes().all(|c| digit_value(c).is_some())
}

/// The `n`th collision variant of `stamp`: `with_suffix("X", 2) == "X-2"`.
pub fn with_suffix(stamp: &str, n: u32) -> String {
    format!("{stamp}-{n}")
}

/// Hands out strictly increasing stamps within one process.
#[derive(Debug, Default)]
pub struct Minter {
    last: Mutex<u64>,
}

impl Minter {
    pub const fn new() -> Self {
        Minter {
            last: Mutex::new(0),
        }
    }

    /// A stamp for `now_micros`, or for the microsecond after the last one handed out
    /// if the clock has not moved on (a burst) or went backwards.
    pub fn mint(&self, now_micros: u64) -> String {
        let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
        let value = if now_micros > *last {
            now_micros
        } else {
            *last + 1
        };
        *last = value;
        encode(value)
    }
}

/// The process-wide minter used by the store.
pub static MINTER: Minter = Minter::new();

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn alphabet_is_sorted_and_vowel_free() {
        assert!(ALPHABET.windows(2).all(|w| w[0] < w[1]));
        assert!(!ALPHABET.iter().any(|c| b"AEIOUaeiou".contains(c)));
    }

    #[test]
    fn encodes_fixed_width() {
        assert_eq!(encode(0), "000000000");
        assert_eq!(encode(51), "00000000z");
        assert_eq!(encode(52), "000000010");
        assert_eq!(encode(MAX).len(), WIDTH);
        assert_eq!(encode(MAX + 10), encode(MAX));
        // 2026 fits with room to spare.
        assert_eq!(encode(1_795_000_000_000_000).len(), WIDTH);
    }

    #[test]
    fn burst_is_strictly_increasing() {
        let m = Minter::new();
        let stamps: Vec<String> = (0..1000).map(|_| m.mint(1_000_000)).collect();
        assert!(stamps.windows(2).all(|w| w[0] < w[1]));
        // A clock that steps back does not produce an older stamp.
        let later = m.mint(5);
        assert!(later > stamps[999]);
    }

    #[test]
    fn suffixes() {
        let s = encode(123_456_789);
        assert!(is_stamp(&s));
        assert!(is_stamp(&with_suffix(&s, 3)));
        assert!(!is_stamp(&format!("{s}-")));
        assert!(!is_stamp(&format!("{s}-0")));
        assert!(!is_stamp(&format!("{s}-x")));
        assert!(!is_stamp("AEIOU0000"));
        assert_eq!(decode(&with_suffix(&s, 3)), Some(123_456_789));
    }

    proptest! {
        #[test]
        fn order_is_time_order(a in 0..=MAX, b in 0..=MAX) {
            prop_assert_eq!(a.cmp(&b), encode(a).cmp(&encode(b)));
            prop_assert_eq!(decode(&encode(a)), Some(a));
        }
    }
}
