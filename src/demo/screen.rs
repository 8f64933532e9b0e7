//! The demo agent's terminal: what a watcher of its PTY (the lane's recording, `spice
//! fleet attach`) sees it do, in the shape a coding agent's screen has: the message it
//! works on (`> `), its replies (`● `), each command (`$ `) and then its output,
//! indented under it.
//!
//! Only a view: writes are flushed at once (a watcher sees a command while it runs)
//! and their failures ignored, since an agent with no one watching works on. A
//! command's output is capped at [`SHOWN_OUTPUT_LINES`]; the transcript keeps all.

use std::io::Write;

/// The most lines of one command's output the screen shows.
pub const SHOWN_OUTPUT_LINES: usize = 16;

pub struct Screen(Box<dyn Write>);

impl Screen {
    /// The process's stdout: the PTY under a lane.
    pub fn stdout() -> Screen {
        Screen(Box::new(std::io::stdout()))
    }

    pub fn message(&mut self, text: &str) {
        self.show(&marked("> ", text));
    }

    pub fn reply(&mut self, text: &str) {
        self.show(&marked("● ", text));
    }

    pub fn command(&mut self, command: &str) {
        self.show(&marked("$ ", command));
    }

    pub fn output(&mut self, text: &str) {
        self.show(&shown_output(text));
    }

    pub fn show(&mut self, text: &str) {
        let _ = self
            .0
            .write_all(text.as_bytes())
            .and_then(|()| self.0.flush());
    }
}

/// The line of a brief that names the task (the brief may open with steering), else
/// its first line.
pub fn task_line(brief: &str) -> &str {
    let mut lines = brief.lines().map(str::trim).filter(|l| !l.is_empty());
    let first = lines.clone().next().unwrap_or("(no brief)");
    lines
        .find(|l| l.starts_with("You are working on task"))
        .unwrap_or(first)
}

/// `mark` before the first line of `text`, the others indented under it.
fn marked(mark: &str, text: &str) -> String {
    let pad = " ".repeat(mark.chars().count());
    let mut out = String::new();
    for (i, line) in text.trim_end().lines().enumerate() {
        out.push_str(if i == 0 { mark } else { &pad });
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// Indented under its command, at most [`SHOWN_OUTPUT_LINES`] lines, then how many
/// more there were.
fn shown_output(text: &str) -> String {
    let lines: Vec<&str> = text.trim_end().lines().collect();
    let mut out: String = lines
        .iter()
        .take(SHOWN_OUTPUT_LINES)
        .map(|l| match l.trim_end() {
            "" => "\n".to_string(),
            l => format!("  {l}\n"),
        })
        .collect();
    if lines.len() > SHOWN_OUTPUT_LINES {
        out.push_str(&format!(
            "  … {} more lines\n",
            lines.len() - SHOWN_OUTPUT_LINES
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_are_marked_and_command_output_is_capped() {
        assert_eq!(
            marked("● ", "ACK k: yes\nACK j: no\n"),
            "● ACK k: yes\n  ACK j: no\n"
        );
        assert_eq!(shown_output(""), "");
        assert_eq!(shown_output("\nx\n"), "\n  x\n");
        let many: String = (1..=20).map(|i| format!("line {i}\n")).collect();
        let shown = shown_output(&many);
        assert!(shown.starts_with("  line 1\n"), "{shown}");
        assert!(
            shown.contains("  line 16\n") && !shown.contains("line 17"),
            "{shown}"
        );
        assert!(shown.ends_with("  … 4 more lines\n"), "{shown}");
    }

    #[test]
    fn the_task_line_is_found_below_steering() {
        let brief = "┌── spice: 1 steering item ──\n│ [k] hi\n└──\nYou are working on task demo-3 in lane a: X\n\nPhase: todo.";
        assert_eq!(
            task_line(brief),
            "You are working on task demo-3 in lane a: X"
        );
        assert_eq!(task_line("\n  Do the thing.\nmore"), "Do the thing.");
    }
}
