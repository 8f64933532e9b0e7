//! Argv and path templates: literal text with `{name}` placeholders.
//!
//! `{{` and `}}` are literal braces; any other `{…}` must name a placeholder the
//! template's field allows, or parsing fails at that byte. A parsed template keeps its
//! source text, and expanding it either fills every placeholder or yields nothing (an
//! absent value drops the whole argv element; see [`expand_argv`]).

use std::fmt;

/// A value a template can refer to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Placeholder {
    SessionId,
    Brief,
    BriefFile,
    Worktree,
    Model,
    Task,
    Lane,
    Spice,
    Home,
    CwdSlug,
}

use Placeholder as P;

impl Placeholder {
    pub const ALL: [Placeholder; 10] = [
        P::SessionId,
        P::Brief,
        P::BriefFile,
        P::Worktree,
        P::Model,
        P::Task,
        P::Lane,
        P::Spice,
        P::Home,
        P::CwdSlug,
    ];
    /// What `command`, `resume` and their elements may use.
    pub const ARGV: [Placeholder; 8] = [
        P::SessionId,
        P::Brief,
        P::BriefFile,
        P::Worktree,
        P::Model,
        P::Task,
        P::Lane,
        P::Spice,
    ];
    /// What the transcript's `dir` and `glob` may use.
    pub const TRANSCRIPT: [Placeholder; 4] = [P::Home, P::Worktree, P::CwdSlug, P::SessionId];

    pub fn name(self) -> &'static str {
        match self {
            P::SessionId => "session_id",
            P::Brief => "brief",
            P::BriefFile => "brief_file",
            P::Worktree => "worktree",
            P::Model => "model",
            P::Task => "task",
            P::Lane => "lane",
            P::Spice => "spice",
            P::Home => "home",
            P::CwdSlug => "cwd_slug",
        }
    }

    pub fn from_name(name: &str) -> Option<Placeholder> {
        Placeholder::ALL.into_iter().find(|p| p.name() == name)
    }
}

impl fmt::Display for Placeholder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{{{}}}", self.name())
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Piece {
    Text(String),
    Value(Placeholder),
}

/// A parsed template: literal text and placeholders.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Template {
    source: String,
    pieces: Vec<Piece>,
}

/// Why a template is refused, and the byte offset in its text where the problem starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TemplateError {
    pub offset: usize,
    pub reason: String,
}

impl Template {
    /// Parses `text`, accepting only the placeholders in `allowed`; `field` names the
    /// template in messages (`command`, `transcript.dir`).
    pub fn parse(
        text: &str,
        allowed: &[Placeholder],
        field: &str,
    ) -> Result<Template, TemplateError> {
        let mut pieces = Vec::new();
        let mut lit = String::new();
        let mut rest = text.char_indices().peekable();
        while let Some((i, c)) = rest.next() {
            match c {
                '{' if rest.peek().map(|p| p.1) == Some('{') => {
                    rest.next();
                    lit.push('{');
                }
                '}' if rest.peek().map(|p| p.1) == Some('}') => {
                    rest.next();
                    lit.push('}');
                }
                '}' => {
                    return Err(TemplateError {
                        offset: i,
                        reason: format!(
                            "unmatched '}}' in '{field}' (write '}}}}' for a literal brace)"
                        ),
                    })
                }
                '{' => {
                    let Some(len) = text[i + 1..].find('}') else {
                        return Err(TemplateError {
                            offset: i,
                            reason: format!(
                                "unclosed '{{' in '{field}' (write '{{{{' for a literal brace)"
                            ),
                        });
                    };
                    let name = &text[i + 1..i + 1 + len];
                    let known = Placeholder::from_name(name);
                    let Some(p) = known.filter(|p| allowed.contains(p)) else {
                        let list: Vec<String> = allowed.iter().map(|p| p.to_string()).collect();
                        let what = if known.is_some() {
                            format!("placeholder '{{{name}}}' is not available in '{field}'")
                        } else {
                            format!("unknown placeholder '{{{name}}}' in '{field}'")
                        };
                        return Err(TemplateError {
                            offset: i,
                            reason: format!("{what} (known: {})", list.join(", ")),
                        });
                    };
                    if !lit.is_empty() {
                        pieces.push(Piece::Text(std::mem::take(&mut lit)));
                    }
                    pieces.push(Piece::Value(p));
                    while rest.peek().is_some_and(|&(j, _)| j <= i + 1 + len) {
                        rest.next();
                    }
                }
                c => lit.push(c),
            }
        }
        if !lit.is_empty() {
            pieces.push(Piece::Text(lit));
        }
        Ok(Template {
            source: text.to_string(),
            pieces,
        })
    }

    /// The template as written.
    pub fn as_str(&self) -> &str {
        &self.source
    }

    /// True if the template refers to `p`.
    pub fn uses(&self, p: Placeholder) -> bool {
        self.pieces.contains(&Piece::Value(p))
    }

    /// The placeholders used, in order of appearance.
    pub fn placeholders(&self) -> impl Iterator<Item = Placeholder> + '_ {
        self.pieces.iter().filter_map(|p| match p {
            Piece::Value(v) => Some(*v),
            Piece::Text(_) => None,
        })
    }

    /// The template with every placeholder replaced, or `None` if `value` has none for
    /// one of them.
    pub fn expand(&self, value: &dyn Fn(Placeholder) -> Option<String>) -> Option<String> {
        let mut out = String::new();
        for piece in &self.pieces {
            match piece {
                Piece::Text(t) => out.push_str(t),
                Piece::Value(p) => out.push_str(&value(*p)?),
            }
        }
        Some(out)
    }
}

impl fmt::Display for Template {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.source)
    }
}

/// Expands an argv template; an element whose placeholder has no value (an unset
/// `{model}`) is left out, so `--model={model}` disappears as a whole.
pub fn expand_argv(
    argv: &[Template],
    value: &dyn Fn(Placeholder) -> Option<String>,
) -> Vec<String> {
    argv.iter().filter_map(|t| t.expand(value)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use Placeholder as P;

    fn parse_argv(s: &str) -> Result<Template, TemplateError> {
        Template::parse(s, &Placeholder::ARGV, "command")
    }

    #[test]
    fn placeholders_and_escapes() {
        let t = parse_argv("--x={session_id}:{{lit}}/{lane}").unwrap();
        assert_eq!(
            t.placeholders().collect::<Vec<_>>(),
            [P::SessionId, P::Lane]
        );
        let v = |p: Placeholder| Some(p.name().to_uppercase());
        assert_eq!(t.expand(&v).unwrap(), "--x=SESSION_ID:{lit}/LANE");
        assert_eq!(parse_argv("plain").unwrap().expand(&v).unwrap(), "plain");
        assert_eq!(
            parse_argv("é{brief}é").unwrap().expand(&v).unwrap(),
            "éBRIEFé"
        );
        assert_eq!(parse_argv("}}{{").unwrap().expand(&v).unwrap(), "}{");
    }

    #[test]
    fn bad_templates_are_located() {
        let e = parse_argv("ab{nope}").unwrap_err();
        assert_eq!(e.offset, 2);
        assert!(
            e.reason
                .starts_with("unknown placeholder '{nope}' in 'command' (known: {session_id}"),
            "{}",
            e.reason
        );
        let e = parse_argv("x{home}").unwrap_err();
        assert_eq!(e.offset, 1);
        assert!(
            e.reason
                .starts_with("placeholder '{home}' is not available in 'command'"),
            "{}",
            e.reason
        );
        assert_eq!(parse_argv("a{brief").unwrap_err().offset, 1);
        assert!(parse_argv("a{brief")
            .unwrap_err()
            .reason
            .starts_with("unclosed '{'"));
        assert_eq!(parse_argv("ab}c").unwrap_err().offset, 2);
        assert_eq!(parse_argv("{}").unwrap_err().offset, 0);
        assert!(parse_argv("{}")
            .unwrap_err()
            .reason
            .starts_with("unknown placeholder '{}'"));
        // Placeholder names are exact: no spaces, no case folding.
        assert!(parse_argv("{ lane}").is_err());
        assert!(parse_argv("{LANE}").is_err());
    }

    #[test]
    fn unset_model_drops_its_element() {
        let argv: Vec<Template> = ["agent", "--model={model}", "{brief}"]
            .iter()
            .map(|s| parse_argv(s).unwrap())
            .collect();
        let none = |p: Placeholder| (p != P::Model).then(|| "hi".to_string());
        assert_eq!(expand_argv(&argv, &none), ["agent", "hi"]);
        let some = |p: Placeholder| Some(if p == P::Model { "m1" } else { "hi" }.to_string());
        assert_eq!(expand_argv(&argv, &some), ["agent", "--model=m1", "hi"]);
    }

    proptest::proptest! {
        /// Any text, braces doubled, is a template that expands back to itself; and no
        /// input makes the parser panic or point outside the text.
        #[test]
        fn escaped_text_round_trips(text in "\\PC*") {
            let escaped = text.replace('{', "{{").replace('}', "}}");
            let t = parse_argv(&escaped).unwrap();
            proptest::prop_assert_eq!(t.expand(&|_| None), Some(text.clone()));
            if let Err(e) = parse_argv(&text) {
                proptest::prop_assert!(text.is_char_boundary(e.offset) && e.offset < text.len());
            }
        }
    }
}
