//! Layering, read from the sources: the store sits at the bottom and imports only
//! itself and the few modules beneath it (which import only each other), and the
//! console (`src/web`) never imports the CLI. Every `crate::NAME` path outside test
//! code counts, in `use` items and inline alike, braces (`crate::{a, b::c}`) included.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The bottom layer: the store and what it may stand on.
const BOTTOM: &[&str] = &["store", "clock", "error", "task", "stamp", "when"];

/// A source file's paths under `src/` (a directory's files recursively, or one file).
fn sources(rel: &str) -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src").join(rel);
    let mut out = Vec::new();
    let mut stack = vec![root.clone()];
    if root.is_file() {
        return vec![root];
    }
    let rs = root.with_extension("rs");
    if rs.is_file() {
        out.push(rs);
    }
    while let Some(dir) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// The code of a file without comments and without `#[cfg(test)]` items (a test may
/// reach above its layer; the layer may not).
fn code(text: &str) -> String {
    let mut out = String::new();
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        let t = line.trim_start();
        if t.starts_with("//") {
            continue;
        }
        if t.starts_with("#[cfg(test)]") {
            // Skip the item it guards: one line ending in `;`, or a braced block.
            let mut depth = 0i32;
            let mut opened = false;
            for l in lines.by_ref() {
                let l = l.split("//").next().unwrap_or("");
                depth += l.matches('{').count() as i32 - l.matches('}').count() as i32;
                opened |= l.contains('{');
                if (opened && depth <= 0) || (!opened && l.trim_end().ends_with(';')) {
                    break;
                }
            }
            continue;
        }
        out.push_str(line.split("//").next().unwrap_or(""));
        out.push('\n');
    }
    out
}

/// The top-level module names a piece of code reaches through `crate::`.
fn crate_roots(code: &str) -> BTreeSet<String> {
    let mut roots = BTreeSet::new();
    let mut rest = code;
    while let Some(at) = rest.find("crate::") {
        let after = &rest[at + "crate::".len()..];
        if let Some(group) = after.strip_prefix('{') {
            // `crate::{a::b, c, d::{e, f}}`: the names at the group's top level.
            let mut depth = 0;
            let mut name = String::new();
            let mut take = true;
            for ch in group.chars() {
                match ch {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        if !name.is_empty() {
                            roots.insert(std::mem::take(&mut name));
                        }
                        take = true;
                        continue;
                    }
                    _ => {}
                }
                if depth == 0 && take {
                    if ch.is_alphanumeric() || ch == '_' {
                        name.push(ch);
                    } else if !name.is_empty() {
                        roots.insert(std::mem::take(&mut name));
                        take = false;
                    }
                }
            }
            if !name.is_empty() {
                roots.insert(name);
            }
        } else {
            let name: String = after
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() {
                roots.insert(name);
            }
        }
        rest = after;
    }
    roots
}

/// Every (file, module) where a file under `dir` reaches a module `allowed` refuses.
fn violations(dir: &str, allowed: impl Fn(&str) -> bool) -> Vec<String> {
    let files = sources(dir);
    assert!(!files.is_empty(), "no sources under src/{dir}");
    let mut bad = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        for root in crate_roots(&code(&text)) {
            if !allowed(&root) {
                bad.push(format!("{} imports crate::{root}", f.display()));
            }
        }
    }
    bad
}

#[test]
fn the_reader_sees_every_shape_of_path() {
    let src = "use crate::alloc::Filter;\nuse crate::{cli::render, when};\n\
               fn f() { crate::fleet::x(); }\n// crate::gate in a comment\n\
               #[cfg(test)]\nmod tests {\n    use crate::usage;\n    fn g() {}\n}\n\
               #[cfg(test)]\nuse crate::web;\nuse crate::{\n    steer::grammar::{A, B},\n    task,\n};\n";
    let got: Vec<String> = crate_roots(&code(src)).into_iter().collect();
    assert_eq!(got, ["alloc", "cli", "fleet", "steer", "task", "when"]);
}

#[test]
fn the_store_and_what_it_stands_on_import_nothing_above() {
    let mut bad = Vec::new();
    for dir in BOTTOM {
        bad.extend(violations(dir, |root| BOTTOM.contains(&root)));
    }
    assert!(
        bad.is_empty(),
        "lower layer imports an upper one:\n{}",
        bad.join("\n")
    );
}

#[test]
fn the_console_never_imports_the_cli() {
    let bad = violations("web", |root| root != "cli");
    assert!(
        bad.is_empty(),
        "the console imports the CLI:\n{}",
        bad.join("\n")
    );
}

/// The top-level modules under `src/` (a file `NAME.rs` or a directory `NAME/`),
/// without the crate root and the binary.
fn top_level_modules() -> Vec<String> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut mods = BTreeSet::new();
    for e in std::fs::read_dir(&src).unwrap().flatten() {
        let p = e.path();
        let name = p.file_stem().unwrap().to_string_lossy().into_owned();
        if p.is_dir()
            || (p.extension().is_some_and(|x| x == "rs") && name != "lib" && name != "main")
        {
            mods.insert(name);
        }
    }
    mods.into_iter().collect()
}

/// Each cycle of imports between top-level modules, as the path that closes it.
fn cycles(graph: &std::collections::BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    // A depth-first walk; a back edge to a module on the current path is a cycle.
    fn walk(
        at: &str,
        graph: &std::collections::BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
        found: &mut Vec<Vec<String>>,
    ) {
        path.push(at.to_string());
        for next in graph.get(at).into_iter().flatten() {
            if let Some(i) = path.iter().position(|m| m == next) {
                let mut cycle = path[i..].to_vec();
                cycle.push(next.clone());
                found.push(cycle);
            } else if !done.contains(next) {
                walk(next, graph, path, done, found);
            }
        }
        path.pop();
        done.insert(at.to_string());
    }
    let mut found = Vec::new();
    let mut done = BTreeSet::new();
    for m in graph.keys() {
        if !done.contains(m) {
            walk(m, graph, &mut Vec::new(), &mut done, &mut found);
        }
    }
    found
}

#[test]
fn the_cycle_finder_finds_a_cycle_and_only_cycles() {
    let graph = |edges: &[(&str, &str)]| {
        let mut g = std::collections::BTreeMap::<String, BTreeSet<String>>::new();
        for (a, b) in edges {
            g.entry(a.to_string()).or_default().insert(b.to_string());
            g.entry(b.to_string()).or_default();
        }
        g
    };
    assert!(cycles(&graph(&[("a", "b"), ("b", "c"), ("a", "c")])).is_empty());
    assert_eq!(
        cycles(&graph(&[("a", "b"), ("b", "c"), ("c", "a")])),
        vec![vec!["a", "b", "c", "a"]]
    );
}

/// No two top-level modules import each other, directly or through others: the
/// layers can be read bottom up.
#[test]
fn no_import_cycle_between_top_level_modules() {
    let mods = top_level_modules();
    let mut graph = std::collections::BTreeMap::<String, BTreeSet<String>>::new();
    for m in &mods {
        let mut to = BTreeSet::new();
        for f in sources(m) {
            let text = std::fs::read_to_string(&f).unwrap();
            for root in crate_roots(&code(&text)) {
                if root != *m && mods.contains(&root) {
                    to.insert(root);
                }
            }
        }
        graph.insert(m.clone(), to);
    }
    let found = cycles(&graph);
    assert!(
        found.is_empty(),
        "import cycles between top-level modules:\n{}",
        found
            .iter()
            .map(|c| c.join(" → "))
            .collect::<Vec<_>>()
            .join("\n")
    );
}
