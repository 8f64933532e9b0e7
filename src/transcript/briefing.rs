//! A session briefing: what a session was asked, what it did and where it stopped,
//! computed from its events alone, for an agent (or operator) taking over.

use super::event::{Agent, ChangeKind, Event, EventKind, SessionMeta};
use crate::steer::grammar::{self, Polarity};
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};

#[derive(Debug, Clone, Serialize)]
pub struct Command {
    pub command: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    pub exit_code: Option<i32>,
    pub failed: bool,
    /// False while no result was seen (the call may still run, or the session stopped).
    pub finished: bool,
    pub line: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct FileChanged {
    pub path: String,
    pub change: ChangeKind,
    pub line: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct CommitMade {
    pub sha: Option<String>,
    pub message: Option<String>,
    pub line: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct CompactionAt {
    pub line: u64,
    pub trigger: Option<String>,
    pub pre_tokens: Option<u64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Subagent {
    pub agent_id: String,
    pub description: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct AckFound {
    pub key: String,
    pub polarity: Polarity,
    pub line: u64,
    pub body: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct UnfinishedCall {
    pub name: String,
    pub command: Option<String>,
    pub line: u64,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct Tokens {
    pub input: u64,
    pub output: u64,
    pub cache_read: u64,
    pub cache_creation: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct Briefing {
    pub path: String,
    pub agent: Option<Agent>,
    pub session_id: Option<String>,
    pub cwd: Option<String>,
    pub model: Option<String>,
    pub version: Option<String>,
    pub git_branch: Option<String>,
    pub prompts: Vec<String>,
    pub commands: Vec<Command>,
    pub files_changed: Vec<FileChanged>,
    pub commits: Vec<CommitMade>,
    pub compactions: Vec<CompactionAt>,
    pub subagents: Vec<Subagent>,
    pub acks: Vec<AckFound>,
    pub last_assistant_text: Option<String>,
    pub unfinished_call: Option<UnfinishedCall>,
    pub tokens: Tokens,
    pub malformed_lines: u64,
}

/// Builds the briefing of the main conversation in `events` (subagent events count
/// toward nothing but the subagent list).
pub fn brief(path: &str, events: &[Event], malformed: u64) -> Briefing {
    let mut meta = SessionMeta::default();
    let mut b = Briefing {
        path: path.to_string(),
        agent: None,
        session_id: None,
        cwd: None,
        model: None,
        version: None,
        git_branch: None,
        prompts: vec![],
        commands: vec![],
        files_changed: vec![],
        commits: vec![],
        compactions: vec![],
        subagents: vec![],
        acks: vec![],
        last_assistant_text: None,
        unfinished_call: None,
        tokens: Tokens::default(),
        malformed_lines: malformed,
    };
    let mut by_call: HashMap<String, usize> = HashMap::new();
    let mut calls: Vec<(String, String, Option<String>, u64)> = Vec::new();
    let mut answered: std::collections::HashSet<String> = Default::default();
    let mut usage: BTreeMap<String, Tokens> = BTreeMap::new();
    let mut cumulative: Option<Tokens> = None;
    for e in events {
        if let EventKind::SubagentLink {
            agent_id,
            description,
            ..
        } = &e.kind
        {
            if !b.subagents.iter().any(|s| &s.agent_id == agent_id) {
                b.subagents.push(Subagent {
                    agent_id: agent_id.clone(),
                    description: description.clone(),
                });
            }
            continue;
        }
        if e.subagent.is_some() {
            continue;
        }
        match &e.kind {
            EventKind::SessionMeta(m) => merge(&mut meta, m),
            EventKind::UserPrompt { text } => b.prompts.push(text.clone()),
            EventKind::AssistantText { text, .. } => {
                b.last_assistant_text = Some(text.clone());
                for d in grammar::parse(text) {
                    for key in d.keys {
                        b.acks.push(AckFound {
                            key,
                            polarity: d.polarity,
                            line: e.line,
                            body: d.body.clone(),
                        });
                    }
                }
            }
            EventKind::ToolCall {
                id,
                name,
                command,
                cwd,
                ..
            } => {
                calls.push((id.clone(), name.clone(), command.clone(), e.line));
                if let Some(c) = command {
                    by_call.insert(id.clone(), b.commands.len());
                    b.commands.push(Command {
                        command: c.clone(),
                        cwd: cwd.clone(),
                        exit_code: None,
                        failed: false,
                        finished: false,
                        line: e.line,
                    });
                }
            }
            EventKind::ToolResult {
                id,
                exit_code,
                failed,
                ..
            } => {
                answered.insert(id.clone());
                if let Some(&i) = by_call.get(id) {
                    let c = &mut b.commands[i];
                    c.exit_code = exit_code.or(c.exit_code);
                    c.failed |= *failed;
                    c.finished = true;
                }
            }
            EventKind::FileChange { path, change, .. } => b.files_changed.push(FileChanged {
                path: path.clone(),
                change: change.clone(),
                line: e.line,
            }),
            EventKind::Commit { sha, message, .. } => b.commits.push(CommitMade {
                sha: sha.clone(),
                message: message.clone(),
                line: e.line,
            }),
            EventKind::Compaction {
                trigger,
                pre_tokens,
            } => b.compactions.push(CompactionAt {
                line: e.line,
                trigger: trigger.clone(),
                pre_tokens: *pre_tokens,
            }),
            EventKind::TokenUsage {
                message_id,
                input_tokens,
                output_tokens,
                cache_read_tokens,
                cache_creation_tokens,
                cumulative: is_total,
            } => {
                let t = Tokens {
                    input: *input_tokens,
                    output: *output_tokens,
                    cache_read: *cache_read_tokens,
                    cache_creation: *cache_creation_tokens,
                };
                if *is_total {
                    cumulative = Some(t);
                } else {
                    // The last line of a message carries its final figures.
                    usage.insert(
                        message_id
                            .clone()
                            .unwrap_or_else(|| format!("line{}", e.line)),
                        t,
                    );
                }
            }
            _ => {}
        }
    }
    b.tokens = cumulative.unwrap_or_else(|| {
        usage.values().fold(Tokens::default(), |a, t| Tokens {
            input: a.input + t.input,
            output: a.output + t.output,
            cache_read: a.cache_read + t.cache_read,
            cache_creation: a.cache_creation + t.cache_creation,
        })
    });
    // Only the last call can be the one the session stopped in.
    b.unfinished_call =
        calls
            .last()
            .filter(|(id, ..)| !answered.contains(id))
            .map(|(_, name, command, line)| UnfinishedCall {
                name: name.clone(),
                command: command.clone(),
                line: *line,
            });
    b.agent = meta.agent;
    b.session_id = meta.session_id;
    b.cwd = meta.cwd;
    b.model = meta.model;
    b.version = meta.version;
    b.git_branch = meta.git_branch;
    b
}

fn merge(into: &mut SessionMeta, m: &SessionMeta) {
    macro_rules! take {
        ($f:ident) => {
            if m.$f.is_some() {
                into.$f = m.$f.clone();
            }
        };
    }
    take!(session_id);
    take!(agent);
    take!(version);
    take!(cwd);
    take!(model);
    take!(git_branch);
}

/// The briefing as Markdown to paste into an agent.
pub fn markdown(b: &Briefing) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let agent = match b.agent {
        Some(Agent::Claude) => "Claude Code",
        Some(Agent::Codex) => "Codex",
        None => "unknown agent",
    };
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
    let _ = writeln!(s, "\n## What it was asked\n");
    if b.prompts.is_empty() {
        let _ = writeln!(s, "(no prompt recorded)");
    }
    for p in &b.prompts {
        let _ = writeln!(s, "- {}", one_line(p, 300));
    }
    let _ = writeln!(
        s,
        "\n## Commands ({}, {} failed)\n",
        b.commands.len(),
        b.commands.iter().filter(|c| c.failed).count()
    );
    for c in &b.commands {
        let status = match (c.finished, c.exit_code, c.failed) {
            (false, ..) => "no result".to_string(),
            (_, Some(code), true) => format!("FAILED, exit {code}"),
            (_, None, true) => "FAILED".to_string(),
            (_, Some(code), false) => format!("exit {code}"),
            (_, None, false) => "ok".to_string(),
        };
        let _ = writeln!(
            s,
            "- `{}` ({status}, line {})",
            one_line(&c.command, 200),
            c.line
        );
    }
    if !b.files_changed.is_empty() {
        let _ = writeln!(s, "\n## Files changed\n");
        for f in &b.files_changed {
            let kind = match &f.change {
                ChangeKind::Add => "added".to_string(),
                ChangeKind::Update => "updated".to_string(),
                ChangeKind::Delete => "deleted".to_string(),
                ChangeKind::Move { to } => format!("moved to `{to}`"),
            };
            let _ = writeln!(s, "- `{}` {kind}", f.path);
        }
    }
    if !b.commits.is_empty() {
        let _ = writeln!(s, "\n## Commits\n");
        for c in &b.commits {
            let _ = writeln!(
                s,
                "- {} {}",
                c.sha.as_deref().unwrap_or("(sha not shown)"),
                c.message.as_deref().unwrap_or("")
            );
        }
    }
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
            let _ = writeln!(s, "- last reply:\n\n{}", quote(t, 1500));
        }
        None => {
            let _ = writeln!(s, "- no assistant reply recorded");
        }
    }
    s
}

fn one_line(s: &str, max: usize) -> String {
    let flat = s.split_whitespace().collect::<Vec<_>>().join(" ");
    super::event::excerpt(&flat, max)
}

fn quote(s: &str, max: usize) -> String {
    super::event::excerpt(s, max)
        .lines()
        .map(|l| format!("> {l}"))
        .collect::<Vec<_>>()
        .join("\n")
}
