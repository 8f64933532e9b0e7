//! Snapshots of the text users read, compared with insta: the help of every command and
//! subcommand, `task list`, `inbox`, `fleet status`, and the one-line errors bad input
//! gets. A change to any of them fails here with a diff; accept it on purpose with
//! `cargo insta review` (or `INSTA_UPDATE=always`). Under `CI` nothing is written.
//!
//! What varies from run to run is replaced before comparing, keeping columns where they
//! were: task ids and steering keys (their shortest unique prefixes too) by `<task 1>`,
//! `<key 1>` …, ages by `<age>`, and the temporary directory by `[tmp]`.

use crate::common::{git, TestEnv};

/// Replaces each whole-word `from` in `text` by `to`, keeping what follows in place: in a
/// left-aligned column the token and the spaces after it keep their width, in a
/// right-aligned one (`right`) the spaces before it and the token do.
fn replace_word(text: &str, from: &str, to: &str, right: bool) -> String {
    let word = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(from) {
        let end = at + from.len();
        let before_ok = !rest[..at].chars().next_back().is_some_and(word);
        let after_ok = !rest[end..].chars().next().is_some_and(word);
        if !(before_ok && after_ok) {
            out.push_str(&rest[..end]);
            rest = &rest[end..];
            continue;
        }
        if right {
            let head = rest[..at].trim_end_matches(' ');
            let spaces = at - head.len();
            out.push_str(head);
            if spaces > 0 {
                let pad = (spaces + from.len()).saturating_sub(to.len()).max(1);
                out.push_str(&" ".repeat(pad));
            }
            out.push_str(to);
            rest = &rest[end..];
        } else {
            out.push_str(&rest[..at]);
            let tail = rest[end..].trim_start_matches(' ');
            let spaces = rest.len() - end - tail.len();
            out.push_str(to);
            if spaces > 0 {
                let pad = (spaces + from.len()).saturating_sub(to.len()).max(1);
                out.push_str(&" ".repeat(pad));
            }
            rest = tail;
        }
    }
    out.push_str(rest);
    out
}

/// `text` with every id of `ids`, whole or by a prefix of four characters or more, shown
/// as `<{label} N>` (N counting from 1 in the order given).
fn redact_ids(text: &str, label: &str, ids: &[String]) -> String {
    let mut out = text.to_string();
    for (n, id) in ids.iter().enumerate() {
        let to = format!("<{label} {}>", n + 1);
        for len in (4..=id.len()).rev() {
            out = replace_word(&out, &id[..len], &to, false);
        }
    }
    out
}

/// `text` with ages such as `11ms`, `5s` or `3h` (right-aligned) shown as `<age>`.
fn redact_ages(text: &str) -> String {
    let mut out = text.to_string();
    let ages: Vec<String> = text
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| {
            let digits = w.trim_end_matches(|c: char| c.is_ascii_alphabetic());
            !digits.is_empty()
                && digits.chars().all(|c| c.is_ascii_digit())
                && ["ms", "s", "m", "h", "d"].contains(&&w[digits.len()..])
        })
        .map(str::to_string)
        .collect();
    for age in ages {
        out = replace_word(&out, &age, "<age>", true);
    }
    out
}

fn redact_tmp(env: &TestEnv, text: &str) -> String {
    text.replace(&env.dir.path().display().to_string(), "[tmp]")
}

/// The commands `spice <path…> --help` lists, from its `Commands:` section.
fn subcommands(help: &str) -> Vec<String> {
    help.lines()
        .skip_while(|l| *l != "Commands:")
        .skip(1)
        .take_while(|l| !l.is_empty())
        .filter(|l| l.starts_with("  ") && !l.starts_with("   "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .map(str::to_string)
        .collect()
}

/// Regression guard for the help every command prints: one snapshot a top-level
/// command, holding its help and each of its subcommands'.
#[test]
fn the_help_of_every_command() {
    let env = TestEnv::new();
    let help = |path: &[&str]| {
        let mut args = path.to_vec();
        args.push("--help");
        redact_tmp(&env, env.run(&args).ok())
    };
    let top = help(&[]);
    insta::assert_snapshot!("help", top);
    let commands = subcommands(&top);
    assert!(
        commands.len() > 15,
        "too few commands in --help: {commands:?}"
    );
    for command in &commands {
        let own = help(&[command]);
        let mut doc = format!("$ spice {command} --help\n{own}");
        for sub in subcommands(&own) {
            doc.push_str(&format!(
                "\n$ spice {command} {sub} --help\n{}",
                help(&[command, &sub])
            ));
        }
        insta::assert_snapshot!(format!("help_{command}"), doc);
    }
}

fn lanes_env() -> TestEnv {
    TestEnv::with_lanes(&[
        ("a", "profile = \"demo\"\n"),
        ("b", "profile = \"demo\"\nsandbox = \"off\"\n"),
    ])
}

#[test]
fn task_list_shows_handles_priorities_phases_and_titles() {
    let env = lanes_env();
    let parser = env.add(&["write the parser"]);
    let bug = env.add(&["fix the crash on empty input", "--priority", "L"]);
    let release = env.add(&["cut the release", "--priority", "H", "--depends", &parser]);
    env.run(&["task", "claim", &bug]).ok();
    let ids = [parser, bug, release];
    let list = redact_ids(env.run(&["task", "list"]).ok(), "task", &ids);
    insta::assert_snapshot!("task_list", list);
    let empty = TestEnv::new();
    insta::assert_snapshot!("task_list_empty", empty.run(&["task", "list"]).ok());
}

#[test]
fn inbox_lists_items_with_their_state_target_and_text() {
    let env = lanes_env();
    let first = env
        .run(&["steer", "lane:a", "use the new parser"])
        .ok()
        .trim()
        .to_string();
    let second = env
        .run(&["steer", "lane:b", "stop touching the docs"])
        .ok()
        .trim()
        .to_string();
    let keys = [first, second];
    let show = |args: &[&str]| redact_ages(&redact_ids(env.run(args).ok(), "key", &keys));
    insta::assert_snapshot!("inbox", show(&["inbox"]));
    insta::assert_snapshot!("inbox_empty", TestEnv::new().run(&["inbox"]).ok());
}

/// Both lanes unconfined: what "confined" reads depends on the kernel's Landlock
/// (`trust_boundary::fleet_status_says_what_confinement_each_lane_has` covers it).
#[test]
fn fleet_status_before_any_supervisor() {
    let env = TestEnv::with_lanes(&[
        ("a", "profile = \"demo\"\nsandbox = \"off\"\n"),
        ("review", "profile = \"demo\"\nsandbox = \"off\"\n"),
    ]);
    insta::assert_snapshot!(
        "fleet_status_never_run",
        redact_tmp(&env, env.run(&["fleet", "status"]).ok())
    );
    let bare = TestEnv::new();
    insta::assert_snapshot!(
        "fleet_status_no_lanes",
        redact_tmp(&bare, bare.run(&["fleet", "status"]).ok())
    );
}

/// Bad input of every kind gets one line naming what was wrong, and exit 2.
#[test]
fn one_line_errors_for_bad_input() {
    let env = lanes_env();
    std::fs::write(
        env.repo.join("lanes/c.toml"),
        "profile = \"demo\"\nmodel = 3\n",
    )
    .unwrap();
    git(&env.repo, &["add", "lanes"]);
    git(&env.repo, &["commit", "-q", "-m", "a bad lane"]);
    let cases: &[&[&str]] = &[
        &["bogus"],
        &["task", "add"],
        &["task", "add", "x", "--priority", "Q"],
        &["task", "add", "x", "--depends", "nope"],
        &["task", "show", "zzz"],
        &["task", "list", "--bogus"],
        &["steer", "lane:nope", "hi"],
        &["serve", "--bind", "127.0.0.1:99999"],
        &["fleet", "check"],
    ];
    let mut doc = String::new();
    for args in cases {
        let run = env.run(args);
        assert!(run.code != 0, "spice {args:?} succeeded");
        assert_eq!(
            run.stderr.trim_end().lines().count(),
            1,
            "spice {args:?}: {}",
            run.stderr
        );
        doc.push_str(&format!(
            "$ spice {}\nexit {}\n{}",
            args.join(" "),
            run.code,
            redact_tmp(&env, &run.stderr)
        ));
    }
    insta::assert_snapshot!("errors", doc);
}

#[test]
fn replace_word_keeps_columns_whichever_way_they_align() {
    let left = "HANDLE  PRI\nabcdef  H\nab      L\n";
    assert_eq!(
        replace_word(left, "abcdef", "<t>", false),
        "HANDLE  PRI\n<t>     H\nab      L\n"
    );
    assert_eq!(
        replace_word("unknown task 'abcdef'", "abcdef", "<t>", false),
        "unknown task '<t>'"
    );
    let right = "  AGE SHOWN\n 11ms     0\n  5ms     0\n";
    assert_eq!(
        redact_ages(right),
        "  AGE SHOWN\n <age>     0\n <age>     0\n"
    );
    assert_eq!(
        replace_word("abcdefg abcdef", "abcdef", "<t>", false),
        "abcdefg <t>"
    );
}
