use super::*;

fn lines(chunks: &[&str]) -> (Vec<String>, String) {
    let mut l = Lines::new();
    let mut out = Vec::new();
    for c in chunks {
        l.push(c, |s| out.push(s));
    }
    let pending = l.pending().to_string();
    (out, pending)
}

#[test]
fn lines_are_rebuilt_from_the_byte_stream() {
    let (out, pending) = lines(&["hello \x1b[1mworld\x1b[0m\r\n", "second", " line\r\nthird"]);
    assert_eq!(out, ["hello world", "second line"]);
    assert_eq!(pending, "third");
    // A progress bar's redraws end as its last state; an erase cuts the line.
    let (out, _) = lines(&["50%\r100%\r\n", "abcdef\r\x1b[Kxy\n", "abc\x08\x08Z\n"]);
    assert_eq!(out, ["100%", "xy", "aZc"]);
    // An escape sequence split across two chunks is carried; OSC titles vanish.
    let (out, _) = lines(&["a\x1b[3", "1mb\x1b]0;title\x07c\x1b]8;;u\x1b\\d\n"]);
    assert_eq!(out, ["abcd"]);
    // Cursor moves to a column or forward write spaces; a row move ends the line.
    let (out, pending) = lines(&["a\x1b[3Cb\x1b[10Gc\x1b[2;1Hnext"]);
    assert_eq!(out, ["a   b    c"]);
    assert_eq!(pending, "next");
}

#[test]
fn a_long_line_is_one_line_and_a_huge_one_comes_in_pieces() {
    let long = "x".repeat(300);
    let (out, _) = lines(&[&long[..100], &long[100..], "\r\n"]);
    assert_eq!(out, [long]);
    let huge = "y".repeat(MAX_LINE + 10);
    let (out, pending) = lines(&[&huge]);
    assert_eq!(out.len(), 1);
    assert!(out[0].len() >= MAX_LINE);
    assert_eq!(pending.len(), huge.len() - out[0].len());
}

fn cast(events: &[&str]) -> Vec<Event> {
    let mut d = TerminalDecoder::new();
    let mut out = Vec::new();
    d.feed(
        br#"{"version": 2, "width": 120, "height": 40}"#,
        1,
        &mut out,
    );
    for (i, e) in events.iter().enumerate() {
        let line = serde_json::json!([0.5, "o", e]).to_string();
        d.feed(line.as_bytes(), i as u64 + 2, &mut out);
    }
    out
}

fn kinds(events: &[Event]) -> Vec<String> {
    events
        .iter()
        .map(|e| match &e.kind {
            EventKind::SessionMeta(m) => format!("meta {:?}", m.agent),
            EventKind::AssistantText { text, .. } => format!("said {text}"),
            EventKind::UserPrompt { text } => format!("typed {text}"),
            EventKind::TurnEnd => "turn end".into(),
            other => format!("{other:?}"),
        })
        .collect()
}

#[test]
fn the_agents_prose_is_its_text_and_a_prompt_ends_its_turn() {
    let events = cast(&[
        "Running the tests.\r\n$ cargo test\r\n",
        "ok\r\nACK bcdfghjkl: ran them\r\n",
        "Which file next? ",
        "src/a.rs\r\n",
        "Editing src/a.rs\r\n",
    ]);
    assert_eq!(
        kinds(&events),
        [
            "meta Some(Terminal)",
            "said Running the tests.\n$ cargo test",
            "said ok\nACK bcdfghjkl: ran them",
            "said Which file next?",
            "turn end",
            "typed src/a.rs",
            "said Editing src/a.rs",
        ]
    );
    assert_eq!(events[2].line, 3, "the line of the recording it came from");
    let directives = crate::steer::grammar::parse(match &events[2].kind {
        EventKind::AssistantText { text, .. } => text,
        _ => unreachable!(),
    });
    assert_eq!(directives[0].keys, ["bcdfghjkl"]);
}

/// Spice's own readout, typed into the agent and echoed back (with the paste
/// markers a cooked terminal shows), is never the agent's text.
#[test]
fn the_steering_frame_echoed_back_is_not_the_agents_text() {
    let frame = "\n┌── spice: 1 steering item for you ──\n│ [bcdfghjkl] from the operator, 2s ago, shown 0 time(s) before\n│   Reply ACK bcdfghjkl: done\n│ Answer each in your next reply, on its own line: ACK <key>: <what you did>\n└──\n";
    let echoed = format!("^[[200~{}^[[201~\r\n", frame.trim().replace('\n', "\r\n"));
    let events = cast(&[&echoed, "> "]);
    assert_eq!(
        kinds(&events),
        ["meta Some(Terminal)", "said >", "turn end"],
        "{events:?}"
    );
}

#[test]
fn what_is_not_a_prompt() {
    assert!(is_prompt("> "));
    assert!(is_prompt("Proceed? [y/N] "));
    assert!(is_prompt("user@host:~$ "));
    assert!(!is_prompt("Compiling spice"));
    assert!(!is_prompt("done.  "));
    assert!(!is_prompt(""));
    // Output that stops mid-line without a prompt's ending ends no turn.
    let events = cast(&["Downloading 40%"]);
    assert_eq!(kinds(&events), ["meta Some(Terminal)"]);
}

#[test]
fn malformed_lines_are_counted_and_other_codes_skipped() {
    let mut d = TerminalDecoder::new();
    let mut out = Vec::new();
    d.feed(b"[1.0, \"r\", \"80x24\"]", 2, &mut out);
    d.feed(b"[1.0, \"i\", \"typed\\r\"]", 3, &mut out);
    d.feed(b"not json", 4, &mut out);
    assert!(out.is_empty());
    assert_eq!(d.malformed(), 1);
}

/// Regression (review of #42): a character right after ESC or a character-set
/// designator panicked the reader (a slice starting inside the character), and a
/// cursor move's count was taken as given (an overflow, or gigabytes of spaces).
#[test]
fn hostile_output_neither_panics_nor_grows_the_line() {
    let (out, _) = lines(&["a\x1bé\n", "b\x1b(é\n", "c\x1b", "éd\n"]);
    assert_eq!(out, ["aé", "bé", "céd"]);
    let (_, pending) = lines(&["x\x1b[18446744073709551615Cy"]);
    assert!(pending.len() <= MAX_EDIT + 2, "{}", pending.len());
    let (_, pending) = lines(&["x\x1b[99999999999Gy\x1b[99999999D"]);
    assert!(pending.len() <= MAX_EDIT + 2, "{}", pending.len());
    // Writing over a long line hands it on first instead of copying it per write.
    let long = "z".repeat(MAX_EDIT + 10);
    let (out, pending) = lines(&[&long, "\rab"]);
    assert_eq!((out.len(), pending.as_str()), (1, "ab"));
}

/// Regression (review of #42): prose that paused on what read as a prompt and went on
/// with an ACK had the ACK taken for typed input, and the item stayed pending.
#[test]
fn an_ack_after_a_pause_that_read_as_a_prompt_is_the_agents() {
    let events = cast(&["Summary:", " ACK bcdfghjkl: fixed\r\n"]);
    let said: Vec<String> = kinds(&events)
        .into_iter()
        .filter(|k| k.starts_with("said"))
        .collect();
    assert_eq!(
        said,
        ["said Summary:", "said Summary: ACK bcdfghjkl: fixed"]
    );
    assert!(!kinds(&events).iter().any(|k| k.starts_with("typed")));
}
