//! The transcript of an agent CLI spice has no decoder for: its terminal, read back
//! from the lane's asciicast recording (`agent::record`), so the steering loop closes
//! for any CLI whose replies are prose on its screen.
//!
//! Each `[t, "o", text]` event goes through [`Lines`], which rebuilds the lines the
//! program wrote from the byte stream: escape sequences removed, a carriage return
//! returning to the line's start (a progress bar's redraws end as its last state), a
//! backspace or an erase applied. Lines come from the program's own line ends, never
//! from the terminal's width, so a long line the terminal wraps on screen is one
//! line here (the PTY's wrapping undone). What a decoder emits per recording line:
//! - the completed lines, joined, as one [`EventKind::AssistantText`]: what the
//!   ACK scanner reads, so `ACK <key>: …` printed by the agent retires the item;
//! - when the output stops on an unfinished line that reads as a prompt (it ends in
//!   `?`, `:`, `>`, `$`, `#` or `]`, then maybe a space), that prompt as text and a
//!   [`EventKind::TurnEnd`]: the agent waits for input, and a prompt that is a
//!   question is the agent asking (`transcript::turn`); the rest of that line, when
//!   it ends, is what was typed there: a [`EventKind::UserPrompt`].
//!
//! A prompt is read from where the output stops, so a pause in the middle of a line
//! that reads as one (`Summary:`) ends a turn early; when that line goes on with an
//! `ACK`, it is the agent's text after all, and the ACK counts.
//!
//! Invariants: lines of spice's own steering readout (`┌──`, `│`, `└──`: shown to
//! the agent, typed into it, echoed back) are never the agent's text, so echoing an
//! item can never acknowledge it; a line is at most [`MAX_LINE`] bytes (a longer
//! one is emitted in pieces) and cursor moves reach at most [`MAX_EDIT`], so memory is
//! bounded whatever the program prints, and no write costs more than copying
//! [`MAX_EDIT`] bytes; an escape sequence split across two events is carried to the
//! next, and no byte sequence (an escape followed by any character) can split one. Full-screen TUIs
//! that place text by cursor moves read as runs of words, not lines: their profiles
//! should name a transcript format instead.

use super::event::{Agent, Decoder, Event, EventKind, SessionMeta};

/// The longest line kept whole, in bytes; longer output is emitted in pieces.
pub const MAX_LINE: usize = 64 * 1024;
/// The longest line written over in place (after a carriage return or a cursor move),
/// in bytes: a longer one is emitted before the writing goes on, so no write costs
/// more than a copy of this many bytes.
pub const MAX_EDIT: usize = 4096;

/// Rebuilds printed lines from terminal output (see the module docs).
#[derive(Debug, Default)]
pub struct Lines {
    /// The line being written.
    line: String,
    /// The cursor's column in `line`, in chars; `None` at the end of the line (the
    /// common case, where printing appends).
    col: Option<usize>,
    esc: Esc,
    /// CSI parameters read so far.
    params: String,
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum Esc {
    #[default]
    Ground,
    /// After ESC.
    Escape,
    /// In a CSI sequence, before its final byte.
    Csi,
    /// In an OSC, DCS, SOS, PM or APC string, up to BEL or ST.
    Str,
    /// ESC inside such a string (maybe the start of ST).
    StrEscape,
    /// After a character-set designator, which takes one more character.
    Charset,
}

impl Lines {
    pub fn new() -> Lines {
        Lines::default()
    }

    /// Takes `text` in; each line it completes is handed to `done`.
    pub fn push(&mut self, text: &str, mut done: impl FnMut(String)) {
        let bytes = text.as_bytes();
        let mut i = 0;
        while i < bytes.len() {
            if self.esc == Esc::Ground {
                // A run of printable text: copied whole when the cursor is at the end.
                let run_end = bytes[i..]
                    .iter()
                    .position(|b| *b < 0x20 || *b == 0x7f)
                    .map_or(bytes.len(), |n| i + n);
                if run_end > i {
                    self.print(&text[i..run_end], &mut done);
                    i = run_end;
                    continue;
                }
            }
            let c = bytes[i];
            // A character after ESC (or a character-set designator) ends the sequence
            // and is printed: never consumed byte by byte, so no slice starts inside it.
            if c >= 0x80 && matches!(self.esc, Esc::Escape | Esc::Charset) {
                self.esc = Esc::Ground;
                continue;
            }
            i += 1;
            self.control(c, &mut done);
        }
    }

    /// The unfinished line, as far as it was written.
    pub fn pending(&self) -> &str {
        &self.line
    }

    /// Ends the unfinished line (the output ended), handing it to `done` if it holds
    /// anything.
    pub fn flush(&mut self, mut done: impl FnMut(String)) {
        if !self.line.is_empty() {
            done(std::mem::take(&mut self.line));
        }
        self.col = None;
    }

    fn print(&mut self, run: &str, done: &mut impl FnMut(String)) {
        // Writing over a long line would copy it per write: a line that long is
        // handed on first, and the writing starts a new one.
        if self.col.is_some() && self.line.len() > MAX_EDIT {
            self.col = None;
            done(std::mem::take(&mut self.line));
        }
        match self.col {
            None => self.line.push_str(run),
            Some(col) => {
                let mut chars: Vec<char> = self.line.chars().collect();
                let mut at = col;
                for c in run.chars() {
                    if at < chars.len() {
                        chars[at] = c;
                    } else {
                        chars.resize(at, ' ');
                        chars.push(c);
                    }
                    at += 1;
                }
                self.col = (at < chars.len()).then_some(at);
                self.line = chars.into_iter().collect();
            }
        }
        if self.line.len() >= MAX_LINE {
            self.col = None;
            done(std::mem::take(&mut self.line));
        }
    }

    fn control(&mut self, c: u8, done: &mut impl FnMut(String)) {
        match (self.esc, c) {
            (Esc::Ground, b'\n') => {
                self.col = None;
                done(std::mem::take(&mut self.line));
            }
            (Esc::Ground, b'\r') => self.col = Some(0),
            (Esc::Ground, 0x08) => {
                let len = self.line.chars().count();
                self.col = Some(self.col.unwrap_or(len).saturating_sub(1));
            }
            (Esc::Ground, b'\t') => {
                let at = self.col.unwrap_or_else(|| self.line.chars().count());
                let spaces = 8 - at % 8;
                self.print(&" ".repeat(spaces), done);
            }
            (Esc::Ground, 0x1b) => self.esc = Esc::Escape,
            (Esc::Ground, _) => {}
            (Esc::Escape, b'[') => {
                self.params.clear();
                self.esc = Esc::Csi;
            }
            (Esc::Escape, b']' | b'P' | b'X' | b'^' | b'_') => self.esc = Esc::Str,
            (Esc::Escape, b'(' | b')' | b'*' | b'+') => self.esc = Esc::Charset,
            (Esc::Escape, _) | (Esc::Charset, _) => self.esc = Esc::Ground,
            (Esc::Csi, 0x40..=0x7e) => {
                self.esc = Esc::Ground;
                self.csi(c, done);
            }
            (Esc::Csi, _) => {
                if self.params.len() < 32 {
                    self.params.push(c as char);
                }
            }
            (Esc::Str, 0x07) => self.esc = Esc::Ground,
            (Esc::Str, 0x1b) => self.esc = Esc::StrEscape,
            (Esc::Str, _) => {}
            (Esc::StrEscape, b'\\') => self.esc = Esc::Ground,
            (Esc::StrEscape, _) => self.esc = Esc::Str,
        }
    }

    /// A CSI sequence's effect on the line: erasures and horizontal cursor moves;
    /// styles and everything else change nothing here.
    fn csi(&mut self, fin: u8, done: &mut impl FnMut(String)) {
        // A count is at most a line long, whatever the program asks for.
        let n = self
            .params
            .trim_start_matches('?')
            .split(';')
            .next()
            .and_then(|p| p.parse::<usize>().ok())
            .map(|n| n.min(MAX_EDIT));
        let len = self.line.chars().count();
        let col = self.col.unwrap_or(len);
        match fin {
            // Erase in line: to its end, to the cursor, or all of it.
            b'K' => match n.unwrap_or(0) {
                0 => {
                    self.line = self.line.chars().take(col).collect();
                    self.col = None;
                }
                1 => {
                    let rest: String = self.line.chars().skip(col + 1).collect();
                    self.line = " ".repeat(col + 1) + &rest;
                    self.col = (col < self.line.chars().count()).then_some(col);
                }
                _ => {
                    self.line = " ".repeat(col);
                    self.col = None;
                }
            },
            // A cleared screen starts over.
            b'J' if n.unwrap_or(0) >= 2 => {
                self.line.clear();
                self.col = None;
            }
            b'C' => self.move_to(col.saturating_add(n.unwrap_or(1).max(1)), len),
            b'D' => self.move_to(col.saturating_sub(n.unwrap_or(1).max(1)), len),
            b'G' => self.move_to(n.unwrap_or(1).max(1) - 1, len),
            // A move to another row ends the line being written.
            b'B' | b'E' | b'H' | b'f' if !self.line.trim().is_empty() => {
                self.col = None;
                done(std::mem::take(&mut self.line));
            }
            _ => {}
        }
    }

    fn move_to(&mut self, col: usize, len: usize) {
        let col = col.min(MAX_EDIT);
        if col >= len {
            self.line.extend(std::iter::repeat_n(' ', col - len));
            self.col = None;
        } else {
            self.col = Some(col);
        }
    }
}

/// Whether an unfinished line reads as a prompt waiting for input.
pub fn is_prompt(line: &str) -> bool {
    let t = line.trim_end();
    !t.is_empty()
        && t.len() < 400
        && line.len() - t.len() <= 1
        && matches!(t.chars().last(), Some('?' | ':' | '>' | '$' | '#' | ']'))
}

/// Whether a line is spice's own steering readout (the frame `steer::exec::frame`
/// draws), typed into or shown to the agent and echoed back, or only the markers of
/// the paste it was typed as: never the agent's text.
fn is_frame(line: &str) -> bool {
    let t = strip_paste_marks(line);
    t.is_empty() || t.starts_with('│') || t.starts_with("┌──") || t.starts_with("└──")
}

/// A terminal echoes the bracketed-paste markers it was typed as `^[[200~` and
/// `^[[201~` (ESC shown as `^[`), at the start of the paste's first line and the end
/// of its last.
fn strip_paste_marks(line: &str) -> &str {
    let mut t = line.trim();
    for mark in ["^[[200~", "^[[201~"] {
        t = t.strip_prefix(mark).unwrap_or(t).trim();
        t = t.strip_suffix(mark).unwrap_or(t).trim();
    }
    t
}

/// Decodes an asciicast v2 recording of an agent's terminal (see the module docs).
#[derive(Debug, Default)]
pub struct TerminalDecoder {
    lines: Lines,
    malformed: u64,
    /// The prompt the output last stopped on, while its line is unfinished: the
    /// rest of that line is what was typed.
    prompt: Option<String>,
    header_seen: bool,
}

impl TerminalDecoder {
    pub fn new() -> TerminalDecoder {
        TerminalDecoder::default()
    }
}

/// One asciicast event: `[seconds, code, data]` (the time is not needed).
#[derive(serde::Deserialize)]
struct Cast<'a>(serde::de::IgnoredAny, &'a str, std::borrow::Cow<'a, str>);

impl Decoder for TerminalDecoder {
    fn feed(&mut self, bytes: &[u8], line: u64, out: &mut Vec<Event>) {
        let event = |kind| Event {
            line,
            timestamp: None,
            subagent: None,
            kind,
        };
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return;
        }
        if bytes.first() == Some(&b'{') {
            if !self.header_seen {
                self.header_seen = true;
                out.push(event(EventKind::SessionMeta(SessionMeta {
                    agent: Some(Agent::Terminal),
                    ..SessionMeta::default()
                })));
            }
            return;
        }
        let Ok(Cast(_, code, data)) = serde_json::from_slice::<Cast>(bytes) else {
            self.malformed += 1;
            return;
        };
        if code != "o" {
            return;
        }
        let mut said = String::new();
        let mut typed = None;
        let prompt = &mut self.prompt;
        self.lines.push(&data, |l| {
            if let Some(p) = prompt.take() {
                let answer = l.strip_prefix(p.as_str()).unwrap_or(&l).trim();
                // Output that only paused on what read as a prompt goes on with the
                // agent's own prose: an ACK there is the agent's, never typed input.
                if answer.contains("ACK") && !is_frame(answer) {
                    if !said.is_empty() {
                        said.push('\n');
                    }
                    said.push_str(l.trim_end());
                    return;
                }
                if !answer.is_empty() && !is_frame(answer) {
                    typed = Some(answer.to_string());
                }
                return;
            }
            let l = l.trim_end();
            if l.trim().is_empty() || is_frame(l) {
                return;
            }
            if !said.is_empty() {
                said.push('\n');
            }
            said.push_str(l);
        });
        if !said.is_empty() {
            out.push(event(EventKind::AssistantText {
                text: said,
                message_id: None,
            }));
        }
        if let Some(text) = typed {
            out.push(event(EventKind::UserPrompt { text }));
        }
        let pending = self.lines.pending();
        if self.prompt.is_none() && is_prompt(pending) && !is_frame(pending) {
            self.prompt = Some(pending.to_string());
            out.push(event(EventKind::AssistantText {
                text: pending.trim().to_string(),
                message_id: None,
            }));
            out.push(event(EventKind::TurnEnd));
        }
    }

    fn malformed(&self) -> u64 {
        self.malformed
    }
}

#[cfg(test)]
mod tests;
