//! Property tests of the grammar: it never panics, what it reports is well formed, and a
//! key that appears only on a shown line (fence, quote, indent, grep) or in a mention is
//! never reported, while every issued directive around such lines still is.

use proptest::prelude::*;

use super::invariants::check_invariants;
use super::*;
use crate::stamp;

/// Pieces that reach every rule far more often than uniform random text does.
const ATOMS: &[&str] = &[
    "ACK",
    "NACK",
    "Ack",
    " ",
    " ",
    "  ",
    "    ",
    "\t",
    "\n",
    "\n",
    "\r\n",
    ":",
    ",",
    ".",
    ";",
    "-",
    "—",
    "–",
    "*",
    "**",
    "_",
    "__",
    "`",
    "```",
    "~~~",
    ">",
    "#",
    "## ",
    "- ",
    "1. ",
    "- [x] ",
    "\"",
    "'",
    "“",
    "”",
    "‘",
    "’",
    "dMbnngX3j",
    "dMbnpQ7kz",
    "-2",
    "-0",
    "and",
    "inbox",
    "key",
    "not",
    "would",
    "e.g.",
    "example",
    "Done.",
    "src/a.rs:3:",
    "é",
    "\u{0}",
    "x",
];

fn markdownish() -> impl Strategy<Value = String> {
    prop::collection::vec(prop::sample::select(ATOMS), 0..120).prop_map(|v| v.concat())
}

/// A directive as an agent might shape it, for key `k`; `bare` leaves out the shapes
/// that open with a clause of their own ("Done. ACK k", "…, so ACK k") or run across a
/// line break, which a mention cannot wrap.
fn shaped(k: String, bare: bool) -> impl Strategy<Value = String> {
    let mut shapes = vec![
        "ACK {k}: done",
        "NACK {k}: no, generated",
        "- **ACK {k}:** kept",
        "1. ACK `{k}` — fine",
        "## NACK {k}",
        "- [x] ACK inbox item {k}: ok",
        "ACK {k}",
        "Done. ACK {k}: fixed",
        "Fixed it, so ACK ({k}): kept",
        "It did not fail again, so ACK {k}: kept the v2 client",
        "All green, ACK\n{k}: split",
        "**NACK**\n[{k}] — generated",
    ];
    if bare {
        shapes.truncate(shapes.len() - 5);
    }
    prop::sample::select(shapes).prop_map(move |s| s.replace("{k}", &k))
}

fn directive(k: String) -> impl Strategy<Value = String> {
    shaped(k, false)
}

/// A line that shows or mentions the directive for key `k` without issuing it.
fn suppressed(k: String) -> impl Strategy<Value = String> {
    let shown = prop::sample::select(vec![
        "    {d}",
        "\t{d}",
        "  \t{d}",
        "> {d}",
        "   >{d}",
        "- > {d}",
        "src/lib.rs:42: {d}",
        "src/a-b.rs-7-{d}",
        "For example: {d}",
    ]);
    let mentioned = prop::sample::select(vec![
        "`{d}`",
        "\"{d}\"",
        "“{d}”",
        "I refuse to {d}",
        "Instead of {d}",
        "He mentioned {d}",
        "You could write {d}",
        "e.g. {d}",
        "Reply with: {d}",
    ]);
    prop_oneof![
        (shaped(k.clone(), false), shown).prop_map(|(d, w)| w.replace("{d}", &d)),
        (shaped(k, true), mentioned).prop_map(|(d, w)| w.replace("{d}", &d)),
    ]
}

/// A fenced block holding directives for `keys`, closed by a valid closer.
fn fenced(keys: Vec<String>) -> impl Strategy<Value = String> {
    let n = keys.len();
    (
        prop::sample::select(vec!['`', '~']),
        3usize..6,
        0usize..3,
        0usize..4,
        prop::collection::vec(any::<prop::sample::Index>(), n),
        any::<bool>(),
    )
        .prop_map(move |(ch, len, extra, closer_indent, shapes, unclosed)| {
            let other = if ch == '`' { '~' } else { '`' };
            let mut out = format!("{}info\n", ch.to_string().repeat(len));
            for (key, shape) in keys.iter().zip(shapes) {
                let lines = [
                    format!("ACK {key}: in code"),
                    format!("{}\nNACK {key}", ch.to_string().repeat(len - 1)),
                    format!("{}\n- **ACK {key}:** x", other.to_string().repeat(len + 1)),
                    format!("{} ACK {key}", ch.to_string().repeat(len)),
                    format!("    {}\nACK {key}", ch.to_string().repeat(len)),
                ];
                out.push_str(&lines[shape.index(lines.len())]);
                out.push('\n');
            }
            if !unclosed {
                out.push_str(&" ".repeat(closer_indent));
                out.push_str(&ch.to_string().repeat(len + extra));
            }
            out
        })
}

/// Distinct keys: even numbers are issued, odd ones only ever shown or mentioned.
fn keys(parity: u64, n: usize) -> impl Strategy<Value = Vec<String>> {
    prop::collection::hash_set(0u64..1 << 40, n).prop_map(move |set| {
        set.into_iter()
            .map(|v| stamp::encode(v * 2 + parity))
            .collect()
    })
}

#[derive(Debug, Clone)]
enum Block {
    Issued,
    Suppressed,
    Fence,
    Prose,
}

const PROSE: &[&str] = &[
    "I split the tests into shards and reran them.",
    "",
    "The build passes now; see the log below.",
    "- a list item about the allocator",
    "## Summary",
    "Back to the task: acknowledged the review.",
    "It did not fail again, so the ACK grammar was left alone.",
    "Waiting on the ACK, then an ACK.",
];

fn document() -> impl Strategy<Value = (String, Vec<String>)> {
    let block = prop_oneof![
        Just(Block::Issued),
        Just(Block::Suppressed),
        Just(Block::Fence),
        Just(Block::Prose),
    ];
    (
        prop::collection::vec(block, 1..12),
        keys(0, 12),
        keys(1, 12),
    )
        .prop_flat_map(|(blocks, issued, shown)| {
            let mut parts: Vec<BoxedStrategy<(String, Option<String>)>> = Vec::new();
            // Only a fence that ends the document may be left open.
            let open_ok = blocks.len() - 1;
            for (i, block) in blocks.iter().enumerate() {
                let (a, s) = (issued[i].clone(), shown[i].clone());
                parts.push(match block {
                    Block::Issued => directive(a.clone())
                        .prop_map(move |d| (d, Some(a.clone())))
                        .boxed(),
                    Block::Suppressed => suppressed(s).prop_map(|d| (d, None)).boxed(),
                    Block::Fence => {
                        let inner = vec![s, shown[(i + 6) % 12].clone()];
                        let fence = fenced(inner);
                        if i == open_ok {
                            fence.prop_map(|d| (d, None)).boxed()
                        } else {
                            fence
                                .prop_filter_map("closed", |d| {
                                    let last = d.lines().last().unwrap_or("");
                                    let closed = !last.trim().is_empty()
                                        && last.trim().chars().all(|c| c == '`' || c == '~');
                                    closed.then_some((d, None))
                                })
                                .boxed()
                        }
                    }
                    Block::Prose => prop::sample::select(PROSE)
                        .prop_map(|p| (p.to_string(), None))
                        .boxed(),
                });
            }
            parts.prop_map(|parts| {
                let text: Vec<String> = parts.iter().map(|(t, _)| t.clone()).collect();
                let keys = parts.into_iter().filter_map(|(_, k)| k).collect();
                (text.join("\n"), keys)
            })
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn arbitrary_strings_keep_invariants(text in any::<String>()) {
        check_invariants(&text);
    }

    #[test]
    fn markdownish_text_keeps_invariants(text in markdownish()) {
        check_invariants(&text);
    }

    #[test]
    fn shown_keys_never_reported_issued_keys_always((text, issued) in document()) {
        check_invariants(&text);
        let reported: Vec<String> = parse(&text).into_iter().flat_map(|d| d.keys).collect();
        prop_assert_eq!(reported, issued, "{}", text);
    }

    #[test]
    fn four_column_indent_silences_everything(text in markdownish()) {
        let indented: String = text.lines().map(|l| format!("    {l}\n")).collect();
        prop_assert!(parse(&indented).is_empty());
    }

    #[test]
    fn quoting_silences_everything(text in markdownish()) {
        let quoted: String = text.lines().map(|l| format!("> {l}\n")).collect();
        prop_assert!(parse(&quoted).is_empty());
    }

    #[test]
    fn fencing_silences_everything(text in markdownish()) {
        let longest = text.split(|c| c != '~').map(str::len).max().unwrap_or(0);
        let fence = "~".repeat(longest.max(2) + 1);
        let fenced = format!("{fence}\n{text}\n{fence}");
        prop_assert!(parse(&fenced).is_empty());
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(16))]

    #[test]
    fn huge_lines_keep_invariants(unit in markdownish(), n in 1usize..20_000) {
        let line = unit.replace(['\n', '\r'], " ").repeat(n.min(200_000 / unit.len().max(1)));
        check_invariants(&line);
    }
}
