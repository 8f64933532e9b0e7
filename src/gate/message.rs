//! Commit messages: the subject's length, the body's wrap width, required trailers;
//! and the `Task`/`Task-Session` trailers spice adds to a task's commits.
//!
//! The message is read as git will store it: comment lines (`#`, or the configured
//! comment character) and everything under the scissors line dropped. A body line
//! that cannot be wrapped (a URL, a trailer, an indented or quoted block) is not held
//! to the width.

use super::config::CommitRules;

/// One problem with a message.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Problem {
    /// 1-based line of the message.
    pub line: usize,
    pub rule: String,
    pub message: String,
}

/// The trailers a task's commit carries.
pub fn task_trailers(task: Option<&str>, session: Option<&str>) -> Vec<(String, String)> {
    let mut out = Vec::new();
    if let Some(t) = task.filter(|t| !t.is_empty()) {
        out.push(("Task".to_string(), t.to_string()));
    }
    if let Some(s) = session.filter(|s| !s.is_empty()) {
        out.push(("Task-Session".to_string(), s.to_string()));
    }
    out
}

/// The message's lines as git keeps them (comments and the scissors' cut removed,
/// trailing blank lines trimmed).
pub fn cleaned(text: &str, comment: char) -> Vec<String> {
    let mut out = Vec::new();
    for l in text.lines() {
        if l.starts_with(comment) {
            if l.contains(" ------------------------ >8 ------------------------") {
                break;
            }
            continue;
        }
        out.push(l.trim_end().to_string());
    }
    while out.last().is_some_and(|l| l.is_empty()) {
        out.pop();
    }
    while out.first().is_some_and(|l| l.is_empty()) {
        out.remove(0);
    }
    out
}

/// The trailer block: the last paragraph, when every line of it is `Key: value`.
pub fn trailers(lines: &[String]) -> Vec<(String, String)> {
    let start = lines
        .iter()
        .rposition(|l| l.is_empty())
        .map_or(0, |i| i + 1);
    if start == 0 {
        return Vec::new(); // the subject alone is never a trailer block
    }
    let block = &lines[start..];
    let parsed: Vec<Option<(String, String)>> = block.iter().map(|l| trailer(l)).collect();
    if parsed.is_empty() || parsed.iter().any(Option::is_none) {
        return Vec::new();
    }
    parsed.into_iter().flatten().collect()
}

fn trailer(line: &str) -> Option<(String, String)> {
    let (k, v) = line.split_once(':')?;
    let key = k.trim_end();
    let token = !key.is_empty() && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '-');
    (token && !v.trim().is_empty()).then(|| (key.to_string(), v.trim().to_string()))
}

/// Every problem with `text` under `rules`, `required` naming trailers the message
/// must carry beyond the configured ones (a task's).
pub fn check(text: &str, comment: char, rules: &CommitRules, required: &[String]) -> Vec<Problem> {
    let lines = cleaned(text, comment);
    let mut out = Vec::new();
    let Some(subject) = lines.first() else {
        out.push(Problem {
            line: 1,
            rule: "commit.subject".into(),
            message: "the message is empty".into(),
        });
        return out;
    };
    if let Some(max) = rules.subject {
        let n = subject.chars().count() as u64;
        if n > max {
            out.push(Problem {
                line: 1,
                rule: "commit.subject".into(),
                message: format!("the subject is {n} characters, over {max}: say it shorter, and the rest in the body"),
            });
        }
    }
    if lines.len() > 1 && !lines[1].is_empty() {
        out.push(Problem {
            line: 2,
            rule: "commit.subject".into(),
            message: "a blank line must separate the subject from the body".into(),
        });
    }
    let found = trailers(&lines);
    if let Some(max) = rules.body {
        for (i, l) in lines.iter().enumerate().skip(1) {
            let n = l.chars().count() as u64;
            let unwrappable = l.starts_with([' ', '\t', '>'])
                || l.contains("://")
                || !l.contains(' ')
                || trailer(l).is_some_and(|(k, _)| found.iter().any(|(fk, _)| *fk == k));
            if n > max && !unwrappable {
                out.push(Problem {
                    line: i + 1,
                    rule: "commit.body".into(),
                    message: format!(
                        "line {} is {n} characters, over {max}: wrap the body at {max}",
                        i + 1
                    ),
                });
            }
        }
    }
    for name in rules.trailers.iter().chain(required) {
        if !found.iter().any(|(k, _)| k.eq_ignore_ascii_case(name)) {
            out.push(Problem {
                line: lines.len(),
                rule: "commit.trailer".into(),
                message: format!("the message carries no {name}: trailer (add \"{name}: …\" as the last paragraph)"),
            });
        }
    }
    out
}

/// `text` with each of `add` appended as a trailer unless a trailer of that name is
/// there; comments stay where they were (below the message).
pub fn add_trailers(text: &str, comment: char, add: &[(String, String)]) -> String {
    let lines = cleaned(text, comment);
    let found = trailers(&lines);
    let missing: Vec<&(String, String)> = add
        .iter()
        .filter(|(k, _)| !found.iter().any(|(fk, _)| fk.eq_ignore_ascii_case(k)))
        .collect();
    if missing.is_empty() {
        return text.to_string();
    }
    // Split the file into the message and what follows it (comments, the diff).
    let raw: Vec<&str> = text.lines().collect();
    let end = raw
        .iter()
        .rposition(|l| !l.starts_with(comment) && !l.trim().is_empty())
        .map_or(0, |i| i + 1);
    let cut = raw
        .iter()
        .position(|l| l.starts_with(comment) && l.contains(">8"))
        .unwrap_or(raw.len());
    let end = end.min(cut);
    let mut out: Vec<String> = raw[..end].iter().map(|s| s.to_string()).collect();
    if found.is_empty() {
        out.push(String::new());
    }
    for (k, v) in missing {
        out.push(format!("{k}: {v}"));
    }
    let rest = &raw[end..];
    if !rest.is_empty() {
        out.push(String::new());
        out.extend(
            rest.iter()
                .skip_while(|l| l.trim().is_empty())
                .map(|s| s.to_string()),
        );
    }
    let mut s = out.join("\n");
    s.push('\n');
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules() -> CommitRules {
        CommitRules {
            subject: Some(20),
            body: Some(30),
            trailers: vec!["Signed-off-by".into()],
        }
    }

    #[test]
    fn subject_body_and_trailers() {
        let ok = "Short subject\n\nA body that wraps well\nat thirty columns.\n\nSigned-off-by: A <a@x>\n# a comment that is very long and does not count at all\n";
        assert_eq!(check(ok, '#', &rules(), &[]), []);
        let bad = "A subject that is far too long\nno blank line, and a line that is much too wide for thirty\n";
        let p = check(bad, '#', &rules(), &["Task".to_string()]);
        let rules_hit: Vec<&str> = p.iter().map(|x| x.rule.as_str()).collect();
        assert_eq!(
            rules_hit,
            [
                "commit.subject",
                "commit.subject",
                "commit.body",
                "commit.trailer",
                "commit.trailer"
            ]
        );
        assert!(p[0].message.contains("30 characters, over 20"), "{p:?}");
        let url = "Subject\n\nsee https://example.com/a/very/long/path/that/cannot/wrap\n\nSigned-off-by: A\n";
        assert_eq!(check(url, '#', &rules(), &[]), []);
        assert_eq!(
            check("# only\n", '#', &rules(), &[])[0].message,
            "the message is empty"
        );
    }

    #[test]
    fn trailers_are_added_once_above_the_comments() {
        let add = task_trailers(Some("demo-abc"), Some("s-1"));
        let text = "Subject\n\n# Please enter the commit message\n# On branch x\n";
        let got = add_trailers(text, '#', &add);
        assert_eq!(
            got,
            "Subject\n\nTask: demo-abc\nTask-Session: s-1\n\n# Please enter the commit message\n# On branch x\n"
        );
        assert_eq!(add_trailers(&got, '#', &add), got);
        let with = "Subject\n\nBody.\n\nSigned-off-by: A\n";
        assert_eq!(
            add_trailers(with, '#', &add),
            "Subject\n\nBody.\n\nSigned-off-by: A\nTask: demo-abc\nTask-Session: s-1\n"
        );
        let lines = cleaned(&add_trailers(with, '#', &add), '#');
        assert_eq!(trailers(&lines).len(), 3);
    }
}
