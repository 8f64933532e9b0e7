//! The documents are maps of the code, so they are checked against it: `README.md`,
//! `ARCHITECTURE.md`, `CHANGELOG.md`, `benches/RESULTS.md` and every `docs/**/*.md`.
//! Each failure names `file:line`. Fenced code blocks are examples and are not read;
//! everything else is, code spans included.
//!
//! The rules:
//!
//! 1. **Links.** The target of a relative Markdown link, inline (`[text](target)`,
//!    images too) or a reference definition (`[name]: target`), must exist, relative to
//!    the document's directory, once its `#anchor` and `?query` are dropped. Links to
//!    `http:`, `https:` and `mailto:`, and bare `#anchor` links, are not checked.
//! 2. **Rust paths.** A code span whose whole text is a path of identifiers joined by
//!    `::` (`^[a-z_][a-z0-9_]*(::[A-Za-z_][A-Za-z0-9_]*)+$`, a trailing `()` allowed)
//!    and whose first segment is a top-level module (`src/SEG.rs` or `src/SEG/`) names
//!    a place in the sources; so does any span starting `spice::`, whatever follows.
//!    The longest prefix of segments that are modules must map to `src/a/b.rs` or
//!    `src/a/b/mod.rs`; each segment after it must be declared (`fn`, `struct`,
//!    `enum`, `trait`, `const`, `type`, `mod`, `static` or `union` followed by the
//!    name) in that module's file or in a `.rs` file directly inside its directory
//!    (`src/a/b/`). So `store::claims::renew` reads "`fn renew` in
//!    `src/store/claims.rs`": a method counts, since the map says where code lives,
//!    not what is public. Spans starting with another crate (`std::`, `serde_json::`)
//!    are not checked.
//! 3. **Repository paths.** A code span that is a plain relative path under `src/`,
//!    `tests/`, `benches/`, `examples/`, `fuzz/`, `docs/` or `.ci/` (letters, digits,
//!    `_ . / -` only) must exist. `PATH.rs::NAME` names a test or a module in it: `fn
//!    NAME` or `mod NAME` must be declared in `PATH.rs` or in a `.rs` file under the
//!    directory `PATH/`.
//! 4. **Size and history.** `ARCHITECTURE.md` is at most 15,000 bytes and `README.md`
//!    at most 12,000; neither says "session " followed by a digit (history belongs in
//!    `CHANGELOG.md`, figures in `benches/RESULTS.md`).

use std::path::{Path, PathBuf};

const ARCHITECTURE_MAX: usize = 15_000;
const README_MAX: usize = 12_000;
/// The directories a code span may name as a repository path (rule 3).
const PATH_ROOTS: &[&str] = &[
    "src/",
    "tests/",
    "benches/",
    "examples/",
    "fuzz/",
    "docs/",
    ".ci/",
];
/// The words that declare an item (rule 2).
const DECLARES: &[&str] = &[
    "fn", "struct", "enum", "trait", "const", "type", "mod", "static", "union",
];

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The documents checked, relative to the repository's root.
fn documents(root: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = ["README.md", "ARCHITECTURE.md", "CHANGELOG.md"]
        .iter()
        .map(PathBuf::from)
        .collect();
    out.push(PathBuf::from("benches/RESULTS.md"));
    let mut stack = vec![root.join("docs")];
    let mut found = Vec::new();
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "md") {
                found.push(p.strip_prefix(root).unwrap().to_path_buf());
            }
        }
    }
    found.sort();
    out.extend(found);
    out
}

/// A piece of a document: its text and the line it starts on (1-based).
#[derive(Debug, Clone, PartialEq)]
struct Piece {
    line: usize,
    text: String,
}

/// The document with fenced code blocks blanked (their lines kept, empty), so line
/// numbers still count from the file's top.
fn without_fences(doc: &str) -> String {
    let mut out = String::with_capacity(doc.len());
    let mut fence: Option<(char, usize)> = None;
    for line in doc.split_inclusive('\n') {
        let t = line.trim_start();
        let mark = t.chars().next().filter(|c| *c == '`' || *c == '~');
        let run = mark.map_or(0, |m| t.chars().take_while(|c| *c == m).count());
        match (fence, mark) {
            (None, Some(m)) if run >= 3 => {
                fence = Some((m, run));
                out.push_str(if line.ends_with('\n') { "\n" } else { "" });
            }
            (Some((f, n)), Some(m)) if m == f && run >= n && t[run..].trim().is_empty() => {
                fence = None;
                out.push_str(if line.ends_with('\n') { "\n" } else { "" });
            }
            (Some(_), _) => out.push_str(if line.ends_with('\n') { "\n" } else { "" }),
            (None, _) => out.push_str(line),
        }
    }
    out
}

fn line_at(text: &str, offset: usize) -> usize {
    text[..offset].bytes().filter(|b| *b == b'\n').count() + 1
}

/// Where the paragraph holding `from` ends: the next blank line, or the text's end.
fn paragraph_end(text: &str, from: usize) -> usize {
    let mut at = from;
    for line in text[from..].split_inclusive('\n') {
        if at > from && line.trim().is_empty() {
            return at;
        }
        at += line.len();
    }
    text.len()
}

/// The code spans of `text` (fences already blanked), and the text with each span's
/// contents replaced by spaces (newlines kept), for the link scan.
fn code_spans(text: &str) -> (Vec<Piece>, String) {
    let bytes = text.as_bytes();
    let mut spans = Vec::new();
    let mut prose = bytes.to_vec();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] != b'`' {
            i += 1;
            continue;
        }
        let run = bytes[i..].iter().take_while(|b| **b == b'`').count();
        let start = i + run;
        let end = paragraph_end(text, start);
        let mut j = start;
        let mut close = None;
        while j < end {
            if bytes[j] == b'`' {
                let r = bytes[j..end].iter().take_while(|b| **b == b'`').count();
                if r == run {
                    close = Some(j);
                    break;
                }
                j += r;
            } else {
                j += 1;
            }
        }
        let Some(c) = close else {
            i = start;
            continue;
        };
        let inner = text[start..c].replace('\n', " ");
        let inner = match inner.strip_prefix(' ').and_then(|s| s.strip_suffix(' ')) {
            Some(s) if !s.trim().is_empty() => s.to_string(),
            _ => inner,
        };
        spans.push(Piece {
            line: line_at(text, start),
            text: inner,
        });
        for b in &mut prose[start..c] {
            if *b != b'\n' {
                *b = b' ';
            }
        }
        i = c + run;
    }
    (spans, String::from_utf8_lossy(&prose).into_owned())
}

/// The relative link targets of `prose` (code spans blanked), with their lines.
fn link_targets(prose: &str) -> Vec<Piece> {
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(k) = prose[from..].find("](") {
        let start = from + k + 2;
        let Some(len) = prose[start..].find(')') else {
            break;
        };
        let raw = prose[start..start + len].trim();
        let raw = raw.split_whitespace().next().unwrap_or("");
        let raw = raw.trim_start_matches('<').trim_end_matches('>');
        out.push(Piece {
            line: line_at(prose, start),
            text: raw.to_string(),
        });
        from = start + len;
    }
    for (n, line) in prose.lines().enumerate() {
        let t = line.trim_start();
        if let Some(rest) = t.strip_prefix('[') {
            if let Some(k) = rest.find("]:") {
                if !rest[..k].is_empty() && !rest[..k].contains(']') {
                    if let Some(target) = rest[k + 2..].split_whitespace().next() {
                        out.push(Piece {
                            line: n + 1,
                            text: target.trim_start_matches('<').trim_end_matches('>').into(),
                        });
                    }
                }
            }
        }
    }
    out.retain(|p| {
        let t = p.text.to_ascii_lowercase();
        !(t.is_empty()
            || t.starts_with('#')
            || t.starts_with("http:")
            || t.starts_with("https:")
            || t.starts_with("mailto:"))
    });
    out
}

/// A link target without its anchor and query.
fn link_file(target: &str) -> &str {
    let end = target.find(['#', '?']).unwrap_or(target.len());
    &target[..end]
}

fn is_ident(s: &str, first_lower: bool) -> bool {
    let mut chars = s.chars();
    let Some(c) = chars.next() else {
        return false;
    };
    let first_ok = if first_lower {
        c.is_ascii_lowercase() || c == '_'
    } else {
        c.is_ascii_alphabetic() || c == '_'
    };
    let rest_ok = |c: char| {
        if first_lower {
            c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'
        } else {
            c.is_ascii_alphanumeric() || c == '_'
        }
    };
    first_ok && chars.all(rest_ok)
}

/// The segments of a span that rule 2 checks, and whether it was written `spice::…`
/// (checked whatever its first segment); `None` for any other span.
fn rust_path(span: &str) -> Option<(Vec<&str>, bool)> {
    let span = span.strip_suffix("()").unwrap_or(span);
    let (rest, prefixed) = match span.strip_prefix("spice::") {
        Some(rest) => (rest, true),
        None => (span, false),
    };
    let segs: Vec<&str> = rest.split("::").collect();
    if !prefixed && segs.len() < 2 {
        return None;
    }
    if !is_ident(segs[0], true) || !segs[1..].iter().all(|s| is_ident(s, false)) {
        return None;
    }
    Some((segs, prefixed))
}

/// Whether `text` declares `name` with one of [`DECLARES`].
fn declares(text: &str, name: &str) -> bool {
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    DECLARES.iter().any(|kw| {
        let needle = format!("{kw} {name}");
        text.match_indices(&needle).any(|(at, _)| {
            let before = text[..at].chars().next_back();
            let after = text[at + needle.len()..].chars().next();
            !before.is_some_and(|c| ident(c) || c == '!')
                && !after.is_some_and(|c| ident(c) || c == '!')
        })
    })
}

/// The `.rs` files of `dir`, recursively or only its own.
fn rust_files(dir: &Path, recursive: bool) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                if recursive {
                    stack.push(p);
                }
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

fn any_declares(files: &[PathBuf], name: &str) -> bool {
    files.iter().any(|f| {
        std::fs::read_to_string(f)
            .map(|t| declares(&t, name))
            .unwrap_or(false)
    })
}

/// Rule 2 for the segments of one span, against the sources under `src`: `Ok(false)`
/// when the span is not a path into them, `Ok(true)` when it resolves, else why not.
fn resolve(src: &Path, segs: &[&str], prefixed: bool) -> Result<bool, String> {
    let mut dir = src.to_path_buf();
    let mut file: Option<PathBuf> = None;
    let mut taken = 0;
    for seg in segs {
        let flat = dir.join(format!("{seg}.rs"));
        let nested = dir.join(seg).join("mod.rs");
        let here = if flat.is_file() {
            flat
        } else if nested.is_file() {
            nested
        } else {
            break;
        };
        file = Some(here);
        dir = dir.join(seg);
        taken += 1;
    }
    let Some(file) = file else {
        return if prefixed {
            Err(format!("no module src/{0}.rs or src/{0}/mod.rs", segs[0]))
        } else {
            Ok(false)
        };
    };
    let mut files = vec![file.clone()];
    if dir.is_dir() {
        files.extend(rust_files(&dir, false).into_iter().filter(|f| *f != file));
    }
    for item in &segs[taken..] {
        if !any_declares(&files, item) {
            let module = segs[..taken].join("::");
            return Err(format!(
                "`{item}` is not declared in module {module} ({})",
                file.strip_prefix(src.parent().unwrap_or(src))
                    .unwrap_or(&file)
                    .display()
            ));
        }
    }
    Ok(true)
}

/// Rule 3 for one span, under the repository's `root`: `Ok(false)` when the span is not
/// a repository path, `Ok(true)` when it resolves, else why not.
fn repository_path(root: &Path, span: &str) -> Result<bool, String> {
    if !PATH_ROOTS.iter().any(|r| span.starts_with(r)) {
        return Ok(false);
    }
    let (path, item) = match span.split_once("::") {
        Some((p, i)) => (p, Some(i)),
        None => (span, None),
    };
    let plain = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '/' | '-');
    if !path.chars().all(plain) || item.is_some_and(|i| !is_ident(i, false)) {
        return Ok(false);
    }
    let full = root.join(path);
    if !full.exists() {
        return Err(format!("{path} does not exist"));
    }
    let Some(item) = item else {
        return Ok(true);
    };
    let Some(stem) = path.strip_suffix(".rs") else {
        return Err(format!(
            "{span}: only a .rs file holds a named test or module"
        ));
    };
    let mut files = vec![full];
    files.extend(rust_files(&root.join(stem), true));
    let found = files.iter().any(|f| {
        std::fs::read_to_string(f)
            .map(|t| {
                let ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
                ["fn", "mod"].iter().any(|kw| {
                    let needle = format!("{kw} {item}");
                    t.match_indices(&needle).any(|(at, _)| {
                        !t[..at].chars().next_back().is_some_and(ident)
                            && !t[at + needle.len()..].chars().next().is_some_and(ident)
                    })
                })
            })
            .unwrap_or(false)
    });
    if found {
        Ok(true)
    } else {
        Err(format!("no fn or mod `{item}` in {path} or under {stem}/"))
    }
}

/// Every problem of one document (rules 1 to 3), as `file:line: what`.
fn check_document(root: &Path, rel: &Path, text: &str) -> Vec<String> {
    let mut problems = Vec::new();
    let shown = rel.display();
    let body = without_fences(text);
    let (spans, prose) = code_spans(&body);
    let dir = root.join(rel).parent().unwrap().to_path_buf();
    for link in link_targets(&prose) {
        let file = link_file(&link.text);
        if !file.is_empty() && !dir.join(file).exists() {
            problems.push(format!(
                "{shown}:{}: link target {} does not exist",
                link.line, link.text
            ));
        }
    }
    let src = root.join("src");
    for span in &spans {
        let t = span.text.trim();
        if let Some((segs, prefixed)) = rust_path(t) {
            if let Err(why) = resolve(&src, &segs, prefixed) {
                problems.push(format!("{shown}:{}: `{t}`: {why}", span.line));
            }
        }
        if let Err(why) = repository_path(root, t) {
            problems.push(format!("{shown}:{}: `{t}`: {why}", span.line));
        }
    }
    problems
}

/// Where `text` says "session " followed by a digit, as 1-based line numbers.
fn session_numbers(text: &str) -> Vec<usize> {
    let lower = text.to_ascii_lowercase();
    lower
        .match_indices("session ")
        .filter(|(at, m)| {
            lower[at + m.len()..]
                .chars()
                .next()
                .is_some_and(|c| c.is_ascii_digit())
        })
        .map(|(at, _)| line_at(&lower, at))
        .collect()
}

#[test]
fn the_documents_links_and_named_code_resolve() {
    let root = repo_root();
    let mut problems = Vec::new();
    for rel in documents(&root) {
        match std::fs::read_to_string(root.join(&rel)) {
            Ok(text) => problems.extend(check_document(&root, &rel, &text)),
            Err(e) => problems.push(format!("{}: cannot be read: {e}", rel.display())),
        }
    }
    assert!(
        problems.is_empty(),
        "{} problem(s):\n{}",
        problems.len(),
        problems.join("\n")
    );
}

#[test]
fn the_map_and_the_readme_stay_short_and_hold_no_history() {
    let root = repo_root();
    let mut problems = Vec::new();
    for (name, max) in [
        ("ARCHITECTURE.md", ARCHITECTURE_MAX),
        ("README.md", README_MAX),
    ] {
        let text = std::fs::read_to_string(root.join(name)).unwrap();
        if text.len() > max {
            problems.push(format!(
                "{name}:1: {} bytes, more than {max}: move detail to docs/, figures to \
                 benches/RESULTS.md, history to CHANGELOG.md",
                text.len()
            ));
        }
        for line in session_numbers(&text) {
            problems.push(format!(
                "{name}:{line}: \"session N\" is history: it belongs in CHANGELOG.md"
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn fences_are_skipped_and_spans_found_across_a_line_break() {
    let doc = "a `x::y`\n```sh\n`not::this` [l](nope.md)\n```\nb `two\nlines` c\n\n`lone\n\nz\n";
    let body = without_fences(doc);
    assert_eq!(body.lines().count(), doc.lines().count());
    let (spans, prose) = code_spans(&body);
    let texts: Vec<(usize, &str)> = spans.iter().map(|s| (s.line, s.text.as_str())).collect();
    assert_eq!(texts, [(1, "x::y"), (5, "two lines")]);
    assert!(link_targets(&prose).is_empty());
    let (spans, _) = code_spans("``a ` b`` and ` c `");
    let texts: Vec<&str> = spans.iter().map(|s| s.text.as_str()).collect();
    assert_eq!(texts, ["a ` b", "c"]);
}

#[test]
fn links_keep_their_line_and_lose_anchors_web_and_spans() {
    let prose = "see [a](docs/a.md#part) and [w](https://x.org)\n`[c](in/span.md)`\n\
                 ![img](pic.png \"title\") [top](#top)\n[ref]: other.md\n";
    let (_, prose) = code_spans(prose);
    let links = link_targets(&prose);
    let got: Vec<(usize, &str)> = links.iter().map(|p| (p.line, link_file(&p.text))).collect();
    assert_eq!(got, [(1, "docs/a.md"), (3, "pic.png"), (4, "other.md")]);
}

#[test]
fn rust_paths_resolve_to_modules_and_declared_items() {
    let t = tempfile::tempdir().unwrap();
    let src = t.path().join("src");
    std::fs::create_dir_all(src.join("store/pg")).unwrap();
    std::fs::write(
        src.join("store/mod.rs"),
        "mod claims;\npub use claims::Claim;\n",
    )
    .unwrap();
    std::fs::write(
        src.join("store/claims.rs"),
        "pub struct Claim;\nimpl Claim {\n    pub(crate) fn renew(&self) {}\n}\nconst LEASE: u8 = 1;\n",
    )
    .unwrap();
    std::fs::write(src.join("store/pg/mod.rs"), "").unwrap();
    std::fs::write(src.join("when.rs"), "pub fn parse_duration() {}\n").unwrap();
    let check = |span: &str| -> Result<bool, String> {
        match rust_path(span) {
            Some((segs, prefixed)) => resolve(&src, &segs, prefixed),
            None => Ok(false),
        }
    };
    assert_eq!(check("store::claims::renew"), Ok(true));
    assert_eq!(check("store::claims::Claim::renew()"), Ok(true));
    assert_eq!(
        check("store::Claim"),
        Ok(true),
        "found in a file of the directory"
    );
    assert_eq!(check("store::pg"), Ok(true));
    assert_eq!(check("store::claims::LEASE"), Ok(true));
    assert_eq!(check("when::parse_duration"), Ok(true));
    assert_eq!(check("spice::store"), Ok(true));
    assert!(check("store::claims::release").is_err());
    assert!(
        check("store::claims::ren").is_err(),
        "a prefix is not a name"
    );
    assert!(check("spice::nowhere").is_err());
    assert_eq!(check("std::fs::read"), Ok(false), "another crate");
    assert_eq!(check("store"), Ok(false), "one word is not a path");
    assert_eq!(check("store::claims::renew --now"), Ok(false));
    assert_eq!(
        check("Store::renew"),
        Ok(false),
        "a type first is not a module path"
    );
}

#[test]
fn repository_paths_and_named_tests_must_exist() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path();
    std::fs::create_dir_all(root.join("tests/agents_e2e")).unwrap();
    std::fs::write(
        root.join("tests/leases.rs"),
        "#[test]\nfn renewal_extends() {}\n",
    )
    .unwrap();
    std::fs::write(root.join("tests/agents_e2e.rs"), "mod restarts;\n").unwrap();
    std::fs::write(
        root.join("tests/agents_e2e/restarts.rs"),
        "fn refusal() {}\n",
    )
    .unwrap();
    assert_eq!(repository_path(root, "tests/leases.rs"), Ok(true));
    assert_eq!(
        repository_path(root, "tests/leases.rs::renewal_extends"),
        Ok(true)
    );
    assert_eq!(
        repository_path(root, "tests/agents_e2e.rs::restarts"),
        Ok(true)
    );
    assert_eq!(
        repository_path(root, "tests/agents_e2e.rs::refusal"),
        Ok(true)
    );
    assert!(repository_path(root, "tests/leases.rs::renewal").is_err());
    assert!(repository_path(root, "tests/gone.rs").is_err());
    assert_eq!(repository_path(root, "lanes/NAME.toml"), Ok(false));
    assert_eq!(repository_path(root, "src/x.rs:40-52"), Ok(false));
    assert_eq!(repository_path(root, "tests/*.rs"), Ok(false));
}

#[test]
fn session_numbers_are_found_in_any_case() {
    assert_eq!(session_numbers("a\nin Session 18 we\nsession list\n"), [2]);
    assert!(session_numbers("the session 's id; sessions 2").is_empty());
}
