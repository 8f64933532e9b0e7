use super::*;

fn ev(line: u64, subagent: Option<&str>, kind: EventKind) -> Event {
    Event {
        line,
        timestamp: None,
        subagent: subagent.map(str::to_string),
        kind,
    }
}

fn call(id: &str, command: &str) -> EventKind {
    EventKind::ToolCall {
        id: id.into(),
        name: "Bash".into(),
        command: Some(command.into()),
        cwd: None,
        input: String::new(),
    }
}

fn result(id: &str, failed: bool, output: &str) -> EventKind {
    EventKind::ToolResult {
        id: id.into(),
        exit_code: Some(i32::from(failed)),
        failed,
        output: output.into(),
    }
}

fn text(t: &str) -> EventKind {
    EventKind::AssistantText {
        text: t.into(),
        message_id: None,
    }
}

fn change(path: &str, change: ChangeKind) -> EventKind {
    EventKind::FileChange {
        path: path.into(),
        change,
        call_id: None,
    }
}

fn main_events(kinds: Vec<EventKind>) -> Vec<Event> {
    kinds
        .into_iter()
        .enumerate()
        .map(|(i, k)| ev(i as u64 + 1, None, k))
        .collect()
}

fn unfinished(kinds: Vec<EventKind>) -> Option<u64> {
    brief("t", &main_events(kinds), 0)
        .unfinished_call
        .map(|u| u.line)
}

/// Regression (issue #14): a call that never got a result was reported as where the
/// session stopped although later turns completed after it.
#[test]
fn a_call_is_unfinished_only_if_the_session_did_not_go_on_after_it() {
    // Nothing after the call: that is where it stopped.
    assert_eq!(unfinished(vec![text("go"), call("a", "sleep 9")]), Some(2));
    // The model spoke again after other input came back: a later step.
    let later_step = vec![
        call("a", "sleep 9"),
        call("b", "ls"),
        result("b", false, "x"),
        text("done"),
    ];
    assert_eq!(unfinished(later_step), None);
    for after in [
        EventKind::TurnEnd,
        EventKind::UserPrompt {
            text: "next".into(),
        },
        EventKind::Compaction {
            trigger: None,
            pre_tokens: None,
        },
    ] {
        assert_eq!(unfinished(vec![call("a", "sleep 9"), after]), None);
    }
    // Parallel calls of one step: the one without a result is still open, whichever
    // came last.
    let parallel = vec![
        call("a", "sleep 9"),
        call("b", "ls"),
        result("b", false, "x"),
    ];
    assert_eq!(unfinished(parallel), Some(1));
    // A reply in the same step as the call (text before the call's result) is not a
    // new step.
    assert_eq!(
        unfinished(vec![call("a", "sleep 9"), text("waiting")]),
        Some(1)
    );
    // A subagent's work after the call is the call's own (a Task still running).
    let mut events = main_events(vec![call("task", "x")]);
    events.push(ev(2, Some("sub"), text("working")));
    events.push(ev(3, Some("sub"), EventKind::TurnEnd));
    assert_eq!(
        brief("t", &events, 0).unfinished_call.map(|u| u.line),
        Some(1)
    );
}

/// Regression (issue #14): "Files changed" repeated a file once per edit.
#[test]
fn files_changed_lists_each_file_once_with_its_number_of_changes() {
    let b = brief(
        "t",
        &main_events(vec![
            change("a.rs", ChangeKind::Add),
            change("b.rs", ChangeKind::Update),
            change("a.rs", ChangeKind::Update),
            change("b.rs", ChangeKind::Update),
            change("a.rs", ChangeKind::Update),
            change("c.rs", ChangeKind::Update),
            change("c.rs", ChangeKind::Delete),
        ]),
        0,
    );
    let files: Vec<(&str, &ChangeKind, usize, u64, u64)> = b
        .files_changed
        .iter()
        .map(|f| (f.path.as_str(), &f.change, f.changes, f.line, f.last_line))
        .collect();
    assert_eq!(
        files,
        [
            ("a.rs", &ChangeKind::Add, 3, 1, 5),
            ("b.rs", &ChangeKind::Update, 2, 2, 4),
            ("c.rs", &ChangeKind::Delete, 2, 6, 7),
        ]
    );
    let md = markdown(&b);
    assert!(md.contains("## Files changed (3)"), "{md}");
    assert_eq!(md.matches("`a.rs`").count(), 1, "{md}");
    assert!(md.contains("- `a.rs` added (3 changes)\n"), "{md}");
    assert!(md.contains("- `c.rs` deleted (2 changes)\n"), "{md}");
}

/// Regression (issue #14): a session whose work ran in inline sidechains briefed as
/// `Commands (0, 0 failed)`.
#[test]
fn subagent_work_counts_and_is_marked() {
    let sub = Some("root-uuid");
    let events = vec![
        ev(1, None, EventKind::UserPrompt { text: "do".into() }),
        ev(
            2,
            None,
            EventKind::ToolCall {
                id: "t1".into(),
                name: "Task".into(),
                command: None,
                cwd: None,
                input: String::new(),
            },
        ),
        ev(3, sub, call("s1", "npm install")),
        ev(4, sub, result("s1", false, "added 3 packages")),
        ev(5, sub, call("s2", "npm test")),
        ev(6, sub, result("s2", true, "Error: 1 test failed")),
        ev(7, sub, change("src/app.ts", ChangeKind::Add)),
        ev(8, sub, change("src/app.ts", ChangeKind::Update)),
        ev(9, None, change("src/app.ts", ChangeKind::Update)),
        ev(10, sub, text("ACK abc: from the subagent")),
        ev(
            11,
            None,
            EventKind::SubagentLink {
                agent_id: "root-uuid".into(),
                description: Some("Set up the app".into()),
                call_id: Some("t1".into()),
            },
        ),
        ev(12, None, text("all done")),
    ];
    let b = brief("t", &events, 0);
    let cmds: Vec<(&str, Option<&str>, bool)> = b
        .commands
        .iter()
        .map(|c| (c.command.as_str(), c.subagent.as_deref(), c.failed))
        .collect();
    assert_eq!(
        cmds,
        [("npm install", sub, false), ("npm test", sub, true),]
    );
    let f = &b.files_changed[0];
    assert_eq!((f.changes, f.by_subagents), (3, 2));
    assert_eq!(f.subagents, ["root-uuid"]);
    // Only the main conversation's replies are the session's.
    assert!(b.acks.is_empty());
    assert_eq!(b.last_assistant_text.as_deref(), Some("all done"));
    let md = markdown(&b);
    assert!(
        md.contains("## Commands (2, 1 failed; 2 by subagents)"),
        "{md}"
    );
    assert!(
        md.contains("- `npm install` (exit 0, line 3, by subagent Set up the app)"),
        "{md}"
    );
    assert!(
        md.contains("- `src/app.ts` added (3 changes, 2 by subagent Set up the app)"),
        "{md}"
    );
}

/// Regression (issue #14): a failed command showed no reason.
#[test]
fn a_failed_command_keeps_the_first_meaningful_lines_of_its_error() {
    let b = brief(
        "t",
        &main_events(vec![
            call("a", "git commit -m x"),
            result(
                "a",
                true,
                "\nOn branch main\nnothing to commit, working tree clean\n",
            ),
            call("b", "ls"),
            result("b", false, "error.log"),
        ]),
        0,
    );
    assert_eq!(
        b.commands[0].error.as_deref(),
        Some("On branch main\nnothing to commit, working tree clean")
    );
    assert_eq!(b.commands[1].error, None, "a success has no error");
    let md = markdown(&b);
    assert!(
        md.contains(
            "- `git commit -m x` (FAILED, exit 1, line 1)\n  > On branch main\n  > nothing to commit, working tree clean\n"
        ),
        "{md}"
    );
    let json = serde_json::to_value(&b).unwrap();
    assert_eq!(
        json["commands"][0]["error"],
        "On branch main\nnothing to commit, working tree clean"
    );
}

/// The gate as a session met it: a refused commit with its findings, a commit past
/// the hooks, and an edit of the rules, each flagged once.
#[test]
fn the_gate_refusals_and_bypasses_of_a_session() {
    let refused = "src/a.rs:1: file.lines: 40 lines, past the flex ceiling 15 (base 10): split it to 10 or less\n\
                   spice gate: commit refused (1 finding(s)); fix them and commit again\n";
    let b = brief(
        "t",
        &main_events(vec![
            call("c1", "git commit -m 'big'"),
            result("c1", true, refused),
            change("/repo/spice.toml", ChangeKind::Update),
            change("/repo/spice.toml", ChangeKind::Update),
            call("c2", "git commit --no-verify -m 'big'"),
            result("c2", false, ""),
        ]),
        0,
    );
    assert_eq!(b.gate_refusals.len(), 1);
    assert_eq!(b.gate_refusals[0].line, 2);
    assert!(b.gate_refusals[0].findings[0].starts_with("src/a.rs:1: file.lines: 40 lines"));
    let how: Vec<&str> = b.gate_bypasses.iter().map(|p| p.how.as_str()).collect();
    assert_eq!(
        how,
        [
            "an edit of spice.toml (the gate's rules)",
            "`git commit --no-verify`"
        ]
    );
    let md = markdown(&b);
    assert!(md.contains("## Gate"), "{md}");
    assert!(
        md.contains("**BYPASS**: went round the gate's hooks with an edit of spice.toml"),
        "{md}"
    );
}
