//! Finding maxims' trigger words and phrases in an assistant message, in one pass.
//!
//! Every trigger word of every maxim becomes one entry of a single open-addressed
//! table of case-folded tokens; the text is tokenised once, each token hashed as it
//! is folded and looked up once, and a phrase is recognised at its last word by
//! comparing the few tokens before it (a ring of the last token ids). The cost is
//! one pass over the text whatever the number of maxims and words.
//!
//! A token is a run of ASCII letters, digits and `_`, or of any non-ASCII characters
//! among them; everything else separates (so `busy-wait` is the phrase `busy wait`).
//!
//! Prose only ([`for_each_prose_line`]): the contents of fenced blocks (```` ``` ````
//! or `~~~`) and block quotes (`>`) are skipped, since they show code, output or
//! someone else's words; an unfenced diff or patch (a line starting `diff --git`,
//! `--- a/`, `+++ b/`, `@@ `, `*** Begin Patch` or `Index: `) clips the rest of the
//! message, since nothing marks where it ends. A message that quotes a reminder back
//! (`[MAXIM `) is not heard at all ([`quotes_reminder`]).

use memchr::memmem;

/// Case-folded tokens of `text`, as trigger words are stored.
pub fn tokens(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    for c in text.chars() {
        if is_word_char(c) {
            cur.extend(c.to_lowercase());
        } else if !cur.is_empty() {
            out.push(std::mem::take(&mut cur));
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

fn is_word_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || !c.is_ascii()
}

/// Whether a message quotes one of the conscience's reminders back.
pub fn quotes_reminder(text: &str) -> bool {
    memmem::find(text.as_bytes(), b"[MAXIM ").is_some()
}

const CLIPS: &[&str] = &[
    "diff --git ",
    "--- a/",
    "+++ b/",
    "@@ ",
    "*** Begin Patch",
    "Index: ",
];

/// Calls `f(offset, line)` for each line of prose in `text`, with `gap` true when
/// skipped lines came before it (a phrase does not run across them).
pub fn for_each_prose_line(text: &str, mut f: impl FnMut(usize, &str, bool)) {
    let mut fence: Option<&str> = None;
    let mut gap = false;
    let mut at = 0;
    for line in text.split_inclusive('\n') {
        let start = at;
        at += line.len();
        let t = line.trim_start();
        if let Some(open) = fence {
            if t.starts_with(open) && t[open.len()..].trim().is_empty() {
                fence = None;
            }
            continue;
        }
        if t.starts_with("```") || t.starts_with("~~~") {
            let mark = &t[..3];
            fence = Some(if mark == "```" { "```" } else { "~~~" });
            gap = true;
            continue;
        }
        if CLIPS.iter().any(|c| t.starts_with(c)) {
            return;
        }
        if t.starts_with('>') {
            gap = true;
            continue;
        }
        f(start, line, gap);
        gap = false;
    }
}

/// A maxim's trigger found: which maxim (its index in the list given to
/// [`Matcher::new`]) and the byte offset of the word that completed it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hit {
    pub maxim: usize,
    pub at: usize,
}

const NONE: u32 = u32::MAX;
/// The longest phrase, in words.
const MAX_PHRASE: usize = 8;

/// The trigger words and phrases of a list of maxims, compiled.
pub struct Matcher {
    /// Open-addressed: (hash, token id); `NONE` id = empty slot.
    slots: Vec<(u64, u32)>,
    mask: usize,
    tokens: Vec<Box<[u8]>>,
    /// Per token id: the maxims it is a trigger word of.
    word_of: Vec<Vec<u32>>,
    /// Per token id: the phrases ending in it.
    phrase_end: Vec<Vec<u32>>,
    /// Each phrase: its token ids and its maxim.
    phrases: Vec<(Vec<u32>, u32)>,
    longest: usize,
    maxims: usize,
}

fn fold_hash(h: u64, b: u8) -> u64 {
    (h ^ b as u64).wrapping_mul(0x100000001b3)
}
const SEED: u64 = 0xcbf29ce484222325;

impl Matcher {
    /// Compiles `maxims`, each as (words, phrases), already case-folded
    /// (see [`tokens`]).
    pub fn new(maxims: &[(&[String], &[String])]) -> Matcher {
        let mut m = Matcher {
            slots: Vec::new(),
            mask: 0,
            tokens: Vec::new(),
            word_of: Vec::new(),
            phrase_end: Vec::new(),
            phrases: Vec::new(),
            longest: 0,
            maxims: maxims.len(),
        };
        let mut ids: std::collections::HashMap<String, u32> = Default::default();
        let mut id = |m: &mut Matcher, t: &str| -> u32 {
            *ids.entry(t.to_string()).or_insert_with(|| {
                m.tokens.push(t.as_bytes().into());
                m.word_of.push(Vec::new());
                m.phrase_end.push(Vec::new());
                (m.tokens.len() - 1) as u32
            })
        };
        for (i, (words, phrases)) in maxims.iter().enumerate() {
            for w in words.iter() {
                let t = id(&mut m, w);
                if !m.word_of[t as usize].contains(&(i as u32)) {
                    m.word_of[t as usize].push(i as u32);
                }
            }
            for p in phrases.iter() {
                let seq: Vec<u32> = p
                    .split(' ')
                    .take(MAX_PHRASE)
                    .map(|w| id(&mut m, w))
                    .collect();
                if seq.is_empty() {
                    continue;
                }
                let last = *seq.last().expect("not empty") as usize;
                m.phrase_end[last].push(m.phrases.len() as u32);
                m.phrases.push((seq, i as u32));
            }
        }
        let cap = (m.tokens.len() * 4).next_power_of_two().max(16);
        m.slots = vec![(0, NONE); cap];
        m.mask = cap - 1;
        for (i, t) in m.tokens.iter().enumerate() {
            let h = t.iter().fold(SEED, |h, &b| fold_hash(h, b));
            let mut s = h as usize & m.mask;
            while m.slots[s].1 != NONE {
                s = (s + 1) & m.mask;
            }
            m.slots[s] = (h, i as u32);
        }
        m.longest = m.tokens.iter().map(|t| t.len()).max().unwrap_or(0);
        m
    }

    fn lookup(&self, h: u64, folded: &[u8]) -> u32 {
        let mut s = h as usize & self.mask;
        loop {
            let (sh, id) = self.slots[s];
            if id == NONE {
                return NONE;
            }
            if sh == h && &*self.tokens[id as usize] == folded {
                return id;
            }
            s = (s + 1) & self.mask;
        }
    }

    /// The first trigger of each maxim in the prose of `text`, in text order. A
    /// message quoting a reminder back has none.
    pub fn find(&self, text: &str) -> Vec<Hit> {
        let mut hits = Vec::new();
        if self.tokens.is_empty() || quotes_reminder(text) {
            return hits;
        }
        let mut seen = vec![false; self.maxims];
        let mut ring = [NONE; MAX_PHRASE];
        let mut n: usize = 0;
        let mut buf: Vec<u8> = Vec::with_capacity(64);
        for_each_prose_line(text, |offset, line, gap| {
            if gap {
                ring = [NONE; MAX_PHRASE];
            }
            let bytes = line.as_bytes();
            let mut i = 0;
            while i < bytes.len() {
                let b = bytes[i];
                let word = b.is_ascii_alphanumeric() || b == b'_' || b >= 0x80;
                if !word {
                    i += 1;
                    continue;
                }
                let start = i;
                let mut h = SEED;
                let mut ascii = true;
                buf.clear();
                while i < bytes.len() {
                    let b = bytes[i];
                    if b.is_ascii_alphanumeric() || b == b'_' {
                        let l = b.to_ascii_lowercase();
                        buf.push(l);
                        h = fold_hash(h, l);
                    } else if b >= 0x80 {
                        ascii = false;
                        buf.push(b);
                    } else {
                        break;
                    }
                    i += 1;
                }
                if !ascii {
                    let folded = line[start..i].to_lowercase();
                    buf.clear();
                    buf.extend_from_slice(folded.as_bytes());
                    h = buf.iter().fold(SEED, |h, &b| fold_hash(h, b));
                }
                let id = if buf.len() <= self.longest {
                    self.lookup(h, &buf)
                } else {
                    NONE
                };
                ring[n % MAX_PHRASE] = id;
                n += 1;
                if id == NONE {
                    continue;
                }
                let at = offset + start;
                for &mx in &self.word_of[id as usize] {
                    if !seen[mx as usize] {
                        seen[mx as usize] = true;
                        hits.push(Hit {
                            maxim: mx as usize,
                            at,
                        });
                    }
                }
                for &p in &self.phrase_end[id as usize] {
                    let (seq, mx) = &self.phrases[p as usize];
                    if seen[*mx as usize] || seq.len() > n {
                        continue;
                    }
                    let matches = seq
                        .iter()
                        .rev()
                        .enumerate()
                        .all(|(back, t)| ring[(n - 1 - back) % MAX_PHRASE] == *t);
                    if matches {
                        seen[*mx as usize] = true;
                        hits.push(Hit {
                            maxim: *mx as usize,
                            at,
                        });
                    }
                }
            }
        });
        hits
    }
}

/// The sentence of `text` around byte `at`: from the end of the previous sentence
/// (`.`, `!` or `?` before whitespace, or a line break) to the end of this one, at
/// most [`SENTENCE_MAX`] characters.
pub fn sentence(text: &str, at: usize) -> String {
    let b = text.as_bytes();
    let at = at.min(b.len());
    let ends = |i: usize| {
        b[i] == b'\n'
            || (matches!(b[i], b'.' | b'!' | b'?')
                && b.get(i + 1).is_none_or(|c| c.is_ascii_whitespace()))
    };
    let start = (0..at).rev().find(|&i| ends(i)).map_or(0, |i| i + 1);
    let end =
        (at..b.len())
            .find(|&i| ends(i))
            .map_or(b.len(), |i| if b[i] == b'\n' { i } else { i + 1 });
    let s = text.get(start..end).unwrap_or(text).trim();
    if s.chars().count() > SENTENCE_MAX {
        let cut: String = s.chars().take(SENTENCE_MAX).collect();
        format!("{cut}…")
    } else {
        s.to_string()
    }
}

/// The longest sentence a reminder quotes.
pub const SENTENCE_MAX: usize = 300;

#[cfg(test)]
mod tests {
    use super::*;

    fn matcher(list: &[(&[&str], &[&str])]) -> Matcher {
        let owned: Vec<(Vec<String>, Vec<String>)> = list
            .iter()
            .map(|(w, p)| {
                (
                    w.iter().map(|s| s.to_string()).collect(),
                    p.iter().map(|s| tokens(s).join(" ")).collect(),
                )
            })
            .collect();
        let refs: Vec<(&[String], &[String])> = owned
            .iter()
            .map(|(w, p)| (w.as_slice(), p.as_slice()))
            .collect();
        Matcher::new(&refs)
    }

    fn found(m: &Matcher, text: &str) -> Vec<usize> {
        m.find(text).iter().map(|h| h.maxim).collect()
    }

    #[test]
    fn whole_words_case_folded() {
        let m = matcher(&[(&["poll"], &[]), (&["shim"], &[])]);
        assert_eq!(found(&m, "I will POLL the socket."), [0]);
        assert_eq!(found(&m, "Polling is fine; a shim_x is not a shim"), [1]);
        assert_eq!(found(&m, "the pollster says"), Vec::<usize>::new());
        assert_eq!(found(&m, "a shim, then poll"), [1, 0]);
        let m = matcher(&[(&["café"], &[])]);
        assert_eq!(found(&m, "au CAFÉ ce soir"), [0]);
    }

    #[test]
    fn contiguous_phrases() {
        let m = matcher(&[(&[], &["fall back"]), (&[], &["backwards compatible"])]);
        assert_eq!(found(&m, "then we fall back to the cache"), [0]);
        assert_eq!(found(&m, "we Fall\nBack"), [0]);
        assert_eq!(found(&m, "fall and back"), Vec::<usize>::new());
        assert_eq!(found(&m, "keep it backwards-compatible"), [1]);
        assert_eq!(found(&m, "back, fall"), Vec::<usize>::new());
        let hits = m.find("x. Then fall back now.");
        assert_eq!(
            sentence("x. Then fall back now.", hits[0].at),
            "Then fall back now."
        );
    }

    #[test]
    fn only_prose_is_read() {
        let m = matcher(&[(&["fallback"], &[])]);
        assert_eq!(
            found(&m, "```rust\nlet fallback = 1;\n```\nDone."),
            Vec::<usize>::new()
        );
        assert_eq!(found(&m, "```\nx\n```\nA fallback."), [0]);
        assert_eq!(found(&m, "> you said fallback\nok"), Vec::<usize>::new());
        assert_eq!(
            found(&m, "Patch:\ndiff --git a/x b/x\n+ fallback"),
            Vec::<usize>::new()
        );
        assert_eq!(
            found(&m, "Here:\n*** Begin Patch\n+fallback"),
            Vec::<usize>::new()
        );
        assert_eq!(found(&m, "x\n@@ -1 +1 @@\n-fallback"), Vec::<usize>::new());
        // Unfenced: the rest of the message is clipped, prose after it too.
        assert_eq!(
            found(&m, "--- a/f\n+++ b/f\nthen a fallback"),
            Vec::<usize>::new()
        );
    }

    #[test]
    fn a_quoted_reminder_is_not_heard() {
        let m = matcher(&[(&["fallback"], &[])]);
        assert_eq!(
            found(
                &m,
                "ACK 0abc: [MAXIM fallbacks] No fallback. Removed the fallback."
            ),
            Vec::<usize>::new()
        );
    }

    #[test]
    fn sentences_are_bounded() {
        let long = format!("{} poll", "word ".repeat(100));
        let s = sentence(&long, long.len() - 4);
        assert!(s.ends_with('…') && s.chars().count() == SENTENCE_MAX + 1);
        assert_eq!(sentence("a\nb poll c\nd", 4), "b poll c");
    }
}
