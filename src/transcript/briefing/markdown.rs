//! The briefing as Markdown to paste into an agent: one line per command, file and
//! commit, subagent work marked with the subagent's description (or label), a failed
//! command's error quoted under it.

use super::Briefing;
use crate::steer::grammar::Polarity;
use crate::transcript::event::{excerpt, Agent, ChangeKind};
use std::fmt::Write;

pub fn markdown(b: &Briefing) -> String {
    let mut s = String::new();
    let agent = b.agent.map_or("unknown agent", Agent::product);
    let _ = writeln!(
        s,
        "# Briefing: {agent} session {}",
        b.session_id.as_deref().unwrap_or("?")
    );
    let _ = writeln!(s);
    let _ = writeln!(s, "- transcript: `{}`", b.path);
    for (k, v) in [
        ("cwd", &b.cwd),
        ("model", &b.model),
        ("version", &b.version),
        ("branch", &b.git_branch),
    ] {
        if let Some(v) = v {
            let _ = writeln!(s, "- {k}: `{v}`");
        }
    }
    let t = &b.tokens;
    if t.total() > 0 {
        let _ = writeln!(
            s,
            "- tokens: {} (input {}, output {}, cache read {}, cache write {})",
            t.total(),
            t.input,
            t.output,
            t.cache_read,
            t.cache_creation
        );
    }
    let _ = writeln!(s, "\n## What it was asked\n");
    if b.prompts.is_empty() {
        let _ = writeln!(s, "(no prompt recorded)");
    }
    for p in &b.prompts {
        let _ = writeln!(s, "- {}", one_line(p, 300));
    }
    commands(&mut s, b);
    files(&mut s, b);
    if !b.commits.is_empty() {
        let _ = writeln!(s, "\n## Commits\n");
        for c in &b.commits {
            let by = by_subagent(b, c.subagent.as_deref());
            let _ = writeln!(
                s,
                "- {} {}{}",
                c.sha.as_deref().unwrap_or("(sha not shown)"),
                c.message.as_deref().unwrap_or(""),
                by.map(|by| format!(" ({by})")).unwrap_or_default()
            );
        }
    }
    gate(&mut s, b);
    if !b.compactions.is_empty() {
        let _ = writeln!(s, "\n## Compactions\n");
        for c in &b.compactions {
            let _ = writeln!(
                s,
                "- line {} ({}{})",
                c.line,
                c.trigger.as_deref().unwrap_or("compaction"),
                c.pre_tokens
                    .map(|t| format!(", {t} tokens before"))
                    .unwrap_or_default()
            );
        }
    }
    if !b.subagents.is_empty() {
        let _ = writeln!(s, "\n## Subagents\n");
        for a in &b.subagents {
            let _ = writeln!(
                s,
                "- {} {}",
                a.agent_id,
                a.description.as_deref().unwrap_or("")
            );
        }
    }
    if !b.acks.is_empty() {
        let _ = writeln!(s, "\n## Steering answered\n");
        for a in &b.acks {
            let pol = if a.polarity == Polarity::Ack {
                "ACK"
            } else {
                "NACK"
            };
            let _ = writeln!(
                s,
                "- {pol} {} (line {}): {}",
                a.key,
                a.line,
                one_line(a.body.as_deref().unwrap_or(""), 200)
            );
        }
    }
    let _ = writeln!(s, "\n## Where it stopped\n");
    if let Some(u) = &b.unfinished_call {
        let _ = writeln!(
            s,
            "- an unfinished `{}` call at line {}{}",
            u.name,
            u.line,
            u.command
                .as_deref()
                .map(|c| format!(": `{}`", one_line(c, 200)))
                .unwrap_or_default()
        );
    }
    match &b.last_assistant_text {
        Some(t) => {
            let _ = writeln!(s, "- last reply:\n\n{}", quote(t, 1500, ""));
        }
        None => {
            let _ = writeln!(s, "- no assistant reply recorded");
        }
    }
    s
}

fn commands(s: &mut String, b: &Briefing) {
    let failed = b.commands.iter().filter(|c| c.failed).count();
    let by_subagents = b.commands.iter().filter(|c| c.subagent.is_some()).count();
    let subagent_part = if by_subagents > 0 {
        format!("; {by_subagents} by subagents")
    } else {
        String::new()
    };
    let _ = writeln!(
        s,
        "\n## Commands ({}, {failed} failed{subagent_part})\n",
        b.commands.len(),
    );
    for c in &b.commands {
        let status = match (c.finished, c.exit_code, c.failed) {
            (false, ..) => "no result".to_string(),
            (_, Some(code), true) => format!("FAILED, exit {code}"),
            (_, None, true) => "FAILED".to_string(),
            (_, Some(code), false) => format!("exit {code}"),
            (_, None, false) => "ok".to_string(),
        };
        let by = by_subagent(b, c.subagent.as_deref())
            .map(|by| format!(", {by}"))
            .unwrap_or_default();
        let _ = writeln!(
            s,
            "- `{}` ({status}, line {}{by})",
            one_line(&c.command, 200),
            c.line
        );
        if let Some(error) = &c.error {
            let _ = writeln!(s, "{}", quote(error, 600, "  "));
        }
    }
}

fn files(s: &mut String, b: &Briefing) {
    if b.files_changed.is_empty() {
        return;
    }
    let _ = writeln!(s, "\n## Files changed ({})\n", b.files_changed.len());
    for f in &b.files_changed {
        let kind = match &f.change {
            ChangeKind::Add => "added".to_string(),
            ChangeKind::Update => "updated".to_string(),
            ChangeKind::Delete => "deleted".to_string(),
            ChangeKind::Move { to } => format!("moved to `{to}`"),
        };
        let count = match f.changes {
            1 => "1 change".to_string(),
            n => format!("{n} changes"),
        };
        let by = match (f.by_subagents, f.subagents.as_slice()) {
            (0, _) => String::new(),
            (n, [one]) => {
                let who = by_subagent(b, Some(one)).unwrap_or_default();
                if n == f.changes {
                    format!(", {who}")
                } else {
                    format!(", {n} {who}")
                }
            }
            (n, many) => format!(", {n} by {} subagents", many.len()),
        };
        let _ = writeln!(s, "- `{}` {kind} ({count}{by})", f.path);
    }
}

/// "by subagent <description>" for work a subagent did, `None` for the main chain's.
fn by_subagent(b: &Briefing, label: Option<&str>) -> Option<String> {
    let label = label?;
    let name = b
        .subagent_description(label)
        .map(|d| one_line(d, 80))
        .unwrap_or_else(|| label.to_string());
    Some(format!("by subagent {name}"))
}

fn one_line(s: &str, max: usize) -> String {
    let flat = s.split_whitespace().collect::<Vec<_>>().join(" ");
    excerpt(&flat, max)
}

fn quote(s: &str, max: usize, indent: &str) -> String {
    excerpt(s, max)
        .lines()
        .map(|l| format!("{indent}> {l}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Commits the gate refused and ways round it: a successor must know both.
fn gate(s: &mut String, b: &Briefing) {
    if b.gate_refusals.is_empty() && b.gate_bypasses.is_empty() {
        return;
    }
    let _ = writeln!(s, "\n## Gate\n");
    for r in &b.gate_refusals {
        let by = by_subagent(b, r.subagent.as_deref());
        let _ = writeln!(
            s,
            "- line {}: commit refused by the gate: `{}`{}",
            r.line,
            one_line(&r.command, 200),
            by.map(|by| format!(" ({by})")).unwrap_or_default()
        );
        for f in &r.findings {
            let _ = writeln!(s, "  > {}", one_line(f, 300));
        }
    }
    for p in &b.gate_bypasses {
        let by = by_subagent(b, p.subagent.as_deref());
        let _ = writeln!(
            s,
            "- line {}: **BYPASS**: went round the gate's hooks with {}: `{}`{}",
            p.line,
            p.how,
            one_line(&p.command, 200),
            by.map(|by| format!(" ({by})")).unwrap_or_default()
        );
    }
}
