//! How the demo agent meets the gate: a brief may ask it to write a file of a given
//! length (`demo: write N lines`); when its commit is refused, it reads the gate's
//! findings for that file the way an agent would, shrinks the file to the size the
//! finding names, and commits again.

/// A brief line that makes the demo agent commit past the hooks (`--no-verify`), as
/// an agent working round the gate would.
pub const NO_VERIFY_MARKER: &str = "demo: commit --no-verify";

/// A brief line asking for a file of N lines.
pub const LINES_MARKER: &str = "demo: write ";

/// The number of lines the brief asks for (`demo: write 40 lines`).
pub fn lines_wanted(brief: &str) -> Option<u64> {
    brief.lines().find_map(|l| {
        l.trim()
            .strip_prefix(LINES_MARKER)?
            .strip_suffix(" lines")?
            .trim()
            .parse()
            .ok()
    })
}

/// The size a refused commit's findings ask `file` to shrink to: from a line
/// `FILE:1: file.lines: … to BASE or less …`, as the pre-commit hook prints them.
pub fn shrink_to(stderr: &str, file: &str) -> Option<u64> {
    stderr.lines().find_map(|l| {
        let rest = l.strip_prefix(file)?.strip_prefix(':')?;
        let (_, rest) = rest.split_once(": file.lines: ")?;
        let (_, after) = rest.split_once(" to ")?;
        after.split_whitespace().next()?.parse().ok()
    })
}

/// A shell command writing `n` numbered lines to `file`.
pub fn write_lines(file: &str, n: u64) -> String {
    format!("seq -f 'line %g of the demo agent'\"'\"'s work' {n} > {file}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_brief_names_a_length() {
        assert_eq!(lines_wanted("do it\ndemo: write 40 lines\n"), Some(40));
        assert_eq!(lines_wanted("demo: write many lines"), None);
        assert_eq!(lines_wanted("nothing"), None);
    }

    #[test]
    fn a_finding_names_the_size_to_shrink_to() {
        let err = "demo/t.txt:1: file.lines: 40 lines, past the flex ceiling 15 (base 10): \
                   split it to 10 or less; it is latched until then\n\
                   spice gate: commit refused (1 finding(s)); fix them and commit again\n";
        assert_eq!(shrink_to(err, "demo/t.txt"), Some(10));
        assert_eq!(shrink_to(err, "demo/other.txt"), None);
        let grew = "demo/t.txt:1: file.lines: 13 lines, latched at 12: it may not grow until \
                    it is back at the base 10; shrink it (split it) to 10 or less\n";
        assert_eq!(shrink_to(grew, "demo/t.txt"), Some(10));
    }
}
