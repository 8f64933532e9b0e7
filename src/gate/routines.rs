//! Routine caps: every function's length in lines and its cyclomatic complexity, from
//! a real parse (tree-sitter grammars for Rust, Python, JavaScript, TypeScript and
//! Go), never from regular expressions.
//!
//! Complexity is McCabe's: 1, plus one for every branch point in the routine's own
//! body (conditions, loops, match or switch arms past the first, `catch`/`except`
//! clauses, short-circuit `&&`/`||`/`??`, conditional expressions). A nested routine
//! (a closure, an inner function) is a routine of its own: its branches are not its
//! parent's. Lengths count the routine's lines, first to last.

use tree_sitter::{Language, Node, Parser};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lang {
    Rust,
    Python,
    JavaScript,
    TypeScript,
    Tsx,
    Go,
}

impl Lang {
    /// The language of a path, by extension.
    pub fn of(path: &str) -> Option<Lang> {
        let ext = path.rsplit_once('.')?.1;
        Some(match ext {
            "rs" => Lang::Rust,
            "py" | "pyi" => Lang::Python,
            "js" | "mjs" | "cjs" | "jsx" => Lang::JavaScript,
            "ts" | "mts" | "cts" => Lang::TypeScript,
            "tsx" => Lang::Tsx,
            "go" => Lang::Go,
            _ => return None,
        })
    }

    fn language(self) -> Language {
        match self {
            Lang::Rust => tree_sitter_rust::LANGUAGE.into(),
            Lang::Python => tree_sitter_python::LANGUAGE.into(),
            Lang::JavaScript => tree_sitter_javascript::LANGUAGE.into(),
            Lang::TypeScript => tree_sitter_typescript::LANGUAGE_TYPESCRIPT.into(),
            Lang::Tsx => tree_sitter_typescript::LANGUAGE_TSX.into(),
            Lang::Go => tree_sitter_go::LANGUAGE.into(),
        }
    }

    fn is_routine(self, kind: &str) -> bool {
        match self {
            Lang::Rust => matches!(kind, "function_item" | "closure_expression"),
            Lang::Python => matches!(kind, "function_definition" | "lambda"),
            Lang::JavaScript | Lang::TypeScript | Lang::Tsx => matches!(
                kind,
                "function_declaration"
                    | "generator_function_declaration"
                    | "function_expression"
                    | "function"
                    | "generator_function"
                    | "arrow_function"
                    | "method_definition"
            ),
            Lang::Go => matches!(
                kind,
                "function_declaration" | "method_declaration" | "func_literal"
            ),
        }
    }

    /// How many branch points `node` itself adds.
    fn branches(self, node: Node, src: &[u8]) -> u64 {
        let kind = node.kind();
        let logical = |n: Node| {
            n.child_by_field_name("operator")
                .and_then(|o| o.utf8_text(src).ok())
                .is_some_and(|o| matches!(o, "&&" | "||" | "??" | "and" | "or"))
        };
        let hit = match self {
            Lang::Rust => match kind {
                "if_expression" | "while_expression" | "for_expression" | "loop_expression" => true,
                // Each arm past the first is a path of its own.
                "match_arm" => node.prev_named_sibling().is_some(),
                "binary_expression" => logical(node),
                _ => false,
            },
            Lang::Python => match kind {
                "if_statement"
                | "elif_clause"
                | "for_statement"
                | "while_statement"
                | "except_clause"
                | "conditional_expression"
                | "if_clause"
                | "for_in_clause" => true,
                "case_clause" => node.prev_named_sibling().is_some(),
                "boolean_operator" => true,
                _ => false,
            },
            Lang::JavaScript | Lang::TypeScript | Lang::Tsx => match kind {
                "if_statement" | "for_statement" | "for_in_statement" | "while_statement"
                | "do_statement" | "catch_clause" | "ternary_expression" => true,
                "switch_case" => true,
                "binary_expression" => logical(node),
                _ => false,
            },
            Lang::Go => match kind {
                "if_statement" | "for_statement" => true,
                "expression_case" | "type_case" | "communication_case" => true,
                "binary_expression" => logical(node),
                _ => false,
            },
        };
        u64::from(hit)
    }
}

/// One routine's measures.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Routine {
    /// Its name, qualified by the routines it is nested in (`outer.<closure>`).
    pub name: String,
    /// 1-based first line.
    pub line: u64,
    pub lines: u64,
    pub complexity: u64,
}

/// Every routine of `src`, in source order; `Err` when the grammar cannot be loaded
/// or the file does not parse at all (a file with syntax errors is still measured:
/// tree-sitter recovers, and a gate must not be escaped by a stray brace).
pub fn measure(lang: Lang, src: &[u8]) -> Result<Vec<Routine>, String> {
    let mut parser = Parser::new();
    parser
        .set_language(&lang.language())
        .map_err(|e| format!("the {lang:?} grammar: {e}"))?;
    let tree = parser
        .parse(src, None)
        .ok_or_else(|| "the parser gave up".to_string())?;
    let mut out: Vec<Routine> = Vec::new();
    // Iterative walk: (node, index of the routine it belongs to, name path).
    let mut stack: Vec<(Node, Option<usize>)> = vec![(tree.root_node(), None)];
    let mut names: Vec<Option<String>> = Vec::new();
    while let Some((node, owner)) = stack.pop() {
        let mut owner = owner;
        if node.is_named() && lang.is_routine(node.kind()) {
            let own = name_of(lang, node, src);
            let name = match owner.and_then(|i| names.get(i).cloned().flatten()) {
                Some(parent) => format!("{parent}.{own}"),
                None => own,
            };
            let (start, end) = (node.start_position().row, node.end_position().row);
            out.push(Routine {
                name: name.clone(),
                line: start as u64 + 1,
                lines: (end - start) as u64 + 1,
                complexity: 1,
            });
            names.push(Some(name));
            owner = Some(out.len() - 1);
        } else if let Some(i) = owner {
            out[i].complexity += lang.branches(node, src);
        }
        let mut cursor = node.walk();
        let children: Vec<Node> = node.children(&mut cursor).collect();
        for c in children.into_iter().rev() {
            stack.push((c, owner));
        }
    }
    out.sort_by_key(|r| r.line);
    Ok(out)
}

fn name_of(lang: Lang, node: Node, src: &[u8]) -> String {
    let text = |n: Node| n.utf8_text(src).unwrap_or("?").to_string();
    if let Some(n) = node.child_by_field_name("name") {
        return text(n);
    }
    // An anonymous function takes the name it is bound to (`const f = () => …`).
    if let Some(p) = node.parent() {
        let bound = match lang {
            Lang::JavaScript | Lang::TypeScript | Lang::Tsx => match p.kind() {
                "variable_declarator" => p.child_by_field_name("name"),
                "pair" => p.child_by_field_name("key"),
                "assignment_expression" => p.child_by_field_name("left"),
                _ => None,
            },
            Lang::Rust => match p.kind() {
                "let_declaration" => p.child_by_field_name("pattern"),
                _ => None,
            },
            Lang::Python => match p.kind() {
                "assignment" => p.child_by_field_name("left"),
                _ => None,
            },
            Lang::Go => None,
        };
        if let Some(b) = bound {
            return text(b);
        }
    }
    format!("<anonymous:{}>", node.start_position().row + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn by_name(lang: Lang, src: &str) -> Vec<(String, u64, u64)> {
        measure(lang, src.as_bytes())
            .unwrap()
            .into_iter()
            .map(|r| (r.name, r.lines, r.complexity))
            .collect()
    }

    #[test]
    fn rust_routines_and_their_branches() {
        let src = r#"
fn plain() {}

impl Thing {
    fn decide(&self, x: i32) -> i32 {
        if x > 0 && self.ok() {
            for i in 0..x {
                while i > 3 {}
            }
        }
        match x {
            1 => 1,
            2 => 2,
            _ => 3,
        }
    }
}

fn outer() {
    let f = |a: i32| if a > 1 { 1 } else { 2 };
    if true {}
}
"#;
        let r = by_name(Lang::Rust, src);
        assert_eq!(
            r,
            [
                ("plain".into(), 1, 1),
                // if, &&, for, while, two arms past the first.
                ("decide".into(), 12, 7),
                ("outer".into(), 4, 2),
                ("outer.f".into(), 1, 2),
            ]
        );
    }

    #[test]
    fn python_routines() {
        let src = "def f(a, b):\n    if a and b:\n        return 1\n    elif a:\n        return 2\n    for x in b:\n        try:\n            pass\n        except ValueError:\n            pass\n    return [y for y in b if y]\n\nclass C:\n    def m(self):\n        return 1 if self else 2\n";
        let r = by_name(Lang::Python, src);
        // if, and, elif, for, except, the comprehension's for and if.
        assert_eq!(r[0], ("f".into(), 11, 8));
        assert_eq!(r[1], ("m".into(), 2, 2));
    }

    #[test]
    fn javascript_and_typescript_routines() {
        let js = "function a(x) {\n  if (x || y) { return 1; }\n  switch (x) { case 1: break; case 2: break; default: break; }\n  return x ? 1 : 2;\n}\nconst b = (z) => z ?? 0;\nclass K { m() { while (true) {} } }\n";
        let r = by_name(Lang::JavaScript, js);
        // if, ||, two switch cases (default is not a branch of its own), ternary.
        assert_eq!(r[0], ("a".into(), 5, 6));
        assert_eq!(r[1], ("b".into(), 1, 2));
        assert_eq!(r[2], ("m".into(), 1, 2));
        let ts = "function t(x: number): number {\n  for (const i of [1]) { if (i) {} }\n  try { f(); } catch (e) {}\n  return x;\n}\n";
        assert_eq!(by_name(Lang::TypeScript, ts)[0], ("t".into(), 5, 4));
        let tsx = "const C = (p: {a: boolean}) => p.a ? <b/> : <i/>;\n";
        assert_eq!(by_name(Lang::Tsx, tsx)[0], ("C".into(), 1, 2));
    }

    #[test]
    fn go_routines() {
        let src = "package m\n\nfunc F(x int) int {\n\tif x > 0 && x < 9 {\n\t\treturn 1\n\t}\n\tswitch x {\n\tcase 1:\n\tcase 2:\n\tdefault:\n\t}\n\tfor {}\n}\n\nfunc (s *S) M() { g := func() { if true {} }; g() }\n";
        let r = by_name(Lang::Go, src);
        // if, &&, two cases (default is not a branch of its own), for.
        assert_eq!(r[0], ("F".into(), 11, 6));
        assert_eq!(r[1], ("M".into(), 1, 1));
        assert_eq!(r[2].2, 2);
    }

    #[test]
    fn languages_by_extension() {
        assert_eq!(Lang::of("src/a.rs"), Some(Lang::Rust));
        assert_eq!(Lang::of("a.tsx"), Some(Lang::Tsx));
        assert_eq!(Lang::of("Makefile"), None);
        assert_eq!(Lang::of("a.md"), None);
    }

    #[test]
    fn broken_code_is_still_measured() {
        let r = by_name(Lang::Rust, "fn a() { if x { \n}\nfn b() {}\n");
        assert!(!r.is_empty());
    }
}
