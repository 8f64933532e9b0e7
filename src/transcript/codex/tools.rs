//! Tool calls and their results: shell commands (every exit-code style), unified-exec
//! sessions, `apply_patch` file changes, commits and spawned agents.
//!
//! Invariants, per call id:
//! - At most one `ToolResult`. The first *final* word wins: `exec_command_end` (or
//!   0.17x `item_completed/CommandExecution`) when it precedes the output, otherwise
//!   the `function_call_output`; whichever comes second is dropped.
//! - An `exec_command` whose output says `Process running with session ID N` is not
//!   answered yet: its output is held (at most [`EXCERPT`] bytes) until the process
//!   ends, told by `exec_command_end` or by a `write_stdin` output for session N saying
//!   `Process exited with code C`. That `write_stdin` call gets its own result too,
//!   carrying the same exit code. A process still running when the file ends leaves its
//!   call unanswered, which is what it is.
//! - At most one set of `FileChange`s: from the parsed patch (paths as the agent wrote
//!   them) once `patch_apply_end` or the call's result says it succeeded; from
//!   `patch_apply_end.changes` (absolute paths) only when the patch text is unreadable.

use super::lenient;
use super::patch::{self, Change};
use super::record::{Body, Out, Rec};
use super::shell::{self, Style};
use super::Sink;
use crate::transcript::event::{commit_from, excerpt, ChangeKind, EventKind, EXCERPT};
use serde_json::Value;
use std::collections::HashMap;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// `shell`, `shell_command`, `local_shell_call`: JSON-metadata outputs, where plain
    /// text means the call failed before running.
    Shell,
    /// Unified exec `exec_command`: header outputs, possibly still running.
    Exec,
    /// Unified exec `write_stdin` to a running session.
    WriteStdin,
    /// `apply_patch` as its own tool.
    Patch,
    SpawnAgent,
    Other,
}

#[derive(Debug)]
struct Call {
    kind: Kind,
    /// Kept only when it may run `git commit`: nothing else needs it after the call.
    commit_command: Option<String>,
    patch: Vec<Change>,
    /// `write_stdin`: the unified-exec session it talks to.
    session: Option<String>,
    description: Option<String>,
    answered: bool,
    changes_done: bool,
}

impl Call {
    fn new(kind: Kind) -> Self {
        Call {
            kind,
            commit_command: None,
            patch: Vec::new(),
            session: None,
            description: None,
            answered: false,
            changes_done: false,
        }
    }
}

/// An `exec_command` whose process still runs.
#[derive(Debug)]
struct Running {
    call_id: String,
    output: String,
    commit_lines: String,
}

/// A call as it is announced.
struct Start<'a> {
    id: &'a str,
    name: String,
    command: Option<String>,
    cwd: Option<String>,
    input: &'a str,
}

#[derive(Debug, Default)]
pub(super) struct Tools {
    calls: HashMap<String, Call>,
    /// Unified-exec session id → the call that started it.
    running: HashMap<String, Running>,
}

impl Tools {
    /// A `function_call` (arguments are a JSON string, or anything when redacted).
    pub fn function_call(&mut self, sink: &mut Sink, p: &Rec, default_cwd: Option<&str>) {
        let id = call_id(p, sink);
        let raw = p.arguments.0.as_deref().unwrap_or("");
        let args = if raw.trim_start().starts_with('{') {
            serde_json::from_str::<Value>(raw).ok()
        } else {
            None
        };
        let arg = |k: &str| args.as_ref().and_then(|a| a.get(k));
        let name = qualified_name(p);
        let mut command = None;
        let kind = match name.as_str() {
            "shell" | "container.exec" | "shell_command" | "local_shell" => {
                match arg("command") {
                    Some(Value::String(s)) => command = Some(s.clone()),
                    c => command = shell::strings(c).map(|argv| shell::command_line(&argv)),
                }
                Kind::Shell
            }
            "exec_command" => {
                command = arg("cmd").and_then(Value::as_str).map(str::to_string);
                Kind::Exec
            }
            "write_stdin" => Kind::WriteStdin,
            "apply_patch" => Kind::Patch,
            "spawn_agent" => Kind::SpawnAgent,
            _ => Kind::Other,
        };
        let mut call = Call::new(kind);
        let script_patch = || {
            command
                .as_deref()
                .and_then(patch::from_script)
                .map(patch::parse)
        };
        match kind {
            Kind::Shell => {
                let argv = shell::strings(arg("command"));
                let from_argv = argv.as_deref().and_then(patch::from_argv).map(patch::parse);
                call.patch = from_argv.or_else(script_patch).unwrap_or_default();
            }
            Kind::Exec => call.patch = script_patch().unwrap_or_default(),
            Kind::WriteStdin => call.session = arg("session_id").and_then(lenient::key),
            Kind::Patch => {
                call.patch = patch::parse(arg("input").and_then(Value::as_str).unwrap_or(raw))
            }
            Kind::SpawnAgent => {
                call.description = ["description", "task", "message", "prompt"]
                    .iter()
                    .find_map(|k| arg(k).and_then(Value::as_str))
                    .map(|d| excerpt(d, EXCERPT));
            }
            Kind::Other => {}
        }
        let workdir = arg("workdir").and_then(Value::as_str);
        let cwd = command
            .as_ref()
            .and(workdir.or(default_cwd))
            .map(str::to_string);
        self.start(
            sink,
            Start {
                id: &id,
                name,
                command,
                cwd,
                input: raw,
            },
            call,
        );
    }

    /// A `custom_tool_call` (freeform input; `apply_patch` since 0.10x).
    pub fn custom_call(&mut self, sink: &mut Sink, p: &Rec) {
        let id = call_id(p, sink);
        let input = p.input.get().unwrap_or("");
        let name = qualified_name(p);
        let mut call = Call::new(Kind::Other);
        if name == "apply_patch" {
            call.kind = Kind::Patch;
            call.patch = patch::parse(input);
        }
        self.start(
            sink,
            Start {
                id: &id,
                name,
                command: None,
                cwd: None,
                input,
            },
            call,
        );
    }

    /// A `local_shell_call` (older API shape: argv in `action.command`).
    pub fn local_shell(&mut self, sink: &mut Sink, p: &Rec, default_cwd: Option<&str>) {
        let Some(id) = p.call_id.get().or(p.id.get()) else {
            return;
        };
        let action = p.action.as_deref();
        let argv = shell::strings(action.and_then(|a| a.get("command"))).unwrap_or_default();
        let command = (!argv.is_empty()).then(|| shell::command_line(&argv));
        let workdir = action
            .and_then(|a| a.get("working_directory"))
            .and_then(Value::as_str);
        let cwd = workdir.or(default_cwd).map(str::to_string);
        let mut call = Call::new(Kind::Shell);
        let from_argv = patch::from_argv(&argv);
        let text = from_argv.or_else(|| command.as_deref().and_then(patch::from_script));
        call.patch = text.map(patch::parse).unwrap_or_default();
        let input = action.map(Value::to_string).unwrap_or_default();
        let name = "local_shell".to_string();
        self.start(
            sink,
            Start {
                id,
                name,
                command,
                cwd,
                input: &input,
            },
            call,
        );
    }

    /// A `web_search_call`: done when recorded, so its call and result come together.
    pub fn web_search(&mut self, sink: &mut Sink, p: &Rec) {
        let id =
            p.id.get()
                .map_or_else(|| format!("web_search@{}", sink.line), str::to_string);
        let action = p.action.as_deref();
        let query = action
            .and_then(|a| a.get("query"))
            .and_then(Value::as_str)
            .unwrap_or("");
        let name = "web_search".to_string();
        let start = Start {
            id: &id,
            name,
            command: None,
            cwd: None,
            input: query,
        };
        self.start(sink, start, Call::new(Kind::Other));
        let failed = p.status.is("failed");
        self.finish(sink, &id, None, failed, &Body::default());
    }

    fn start(&mut self, sink: &mut Sink, s: Start, mut call: Call) {
        if let Some(c) = s.command.as_deref().filter(|c| c.contains("commit")) {
            call.commit_command = Some(c.to_string());
        }
        self.calls.insert(s.id.to_string(), call);
        sink.push(EventKind::ToolCall {
            id: s.id.to_string(),
            name: s.name,
            command: s.command,
            cwd: s.cwd,
            input: excerpt(s.input, EXCERPT),
        });
    }

    /// A `function_call_output` or `custom_tool_call_output`.
    pub fn output(&mut self, sink: &mut Sink, p: &Rec) {
        let Some(id) = p.call_id.get() else { return };
        let default = Out::default();
        let out = p.output.as_deref().unwrap_or(&default);
        let (kind, session) = match self.calls.get(id) {
            Some(c) if c.answered => return,
            Some(c) => (c.kind, c.session.clone()),
            None => (Kind::Other, None),
        };
        if let (Kind::Exec, Some(sid)) = (kind, &out.running) {
            let mut r = Running {
                call_id: id.to_string(),
                output: String::new(),
                commit_lines: String::new(),
            };
            r.append(&out.body);
            self.running.insert(sid.clone(), r);
            return;
        }
        let (exit, failed) = verdict(kind, out);
        self.finish(sink, id, exit, failed, &out.body);
        if kind == Kind::SpawnAgent && !failed {
            self.link_agent(sink, id, &out.body.excerpt);
        }
        let Some(sid) = session.filter(|_| kind == Kind::WriteStdin) else {
            return;
        };
        if let Some(r) = self.running.get_mut(&sid) {
            r.append(&out.body);
        }
        if let Some(code) = out.exit {
            if let Some(r) = self.running.remove(&sid) {
                let body = Body {
                    excerpt: excerpt(&r.output, EXCERPT),
                    commit_lines: r.commit_lines,
                };
                self.finish(sink, &r.call_id, Some(code), code != 0, &body);
            }
        }
    }

    /// `event_msg/exec_command_end` (0.125) or `item_completed/CommandExecution` (0.17x):
    /// the authoritative exit code of a command, when it comes before the output.
    pub fn exec_end(&mut self, sink: &mut Sink, id: &str, p: &Rec) {
        if self.calls.get(id).is_some_and(|c| c.answered) {
            return;
        }
        if let Some(pid) = &p.process_id.0 {
            self.running.remove(pid);
        }
        self.running.retain(|_, r| r.call_id != id);
        if !self.calls.contains_key(id) {
            // A command the harness ran itself (a user `!cmd`): show it as a call too.
            let argv = shell::strings(p.command.as_deref()).unwrap_or_default();
            let command = shell::command_line(&argv);
            let cwd = p
                .cwd
                .get()
                .map(|c| c.strip_prefix("file://").unwrap_or(c).to_string());
            let name = "exec_command".to_string();
            let start = Start {
                id,
                name,
                command: Some(command.clone()),
                cwd,
                input: &command,
            };
            self.start(sink, start, Call::new(Kind::Exec));
        }
        let exit = p.exit_code.0;
        let status = p.status.get().unwrap_or("");
        let failed =
            exit.is_some_and(|c| c != 0) || matches!(status, "failed" | "declined" | "rejected");
        let default = Body::default();
        let body = [&p.aggregated_output, &p.formatted_output, &p.stdout]
            .into_iter()
            .filter_map(|b| b.as_deref())
            .find(|b| !b.excerpt.is_empty())
            .unwrap_or(&default);
        self.finish(sink, id, exit, failed, body);
    }

    /// `event_msg/patch_apply_end` (0.125): whether the patch of `call_id` applied.
    pub fn patch_end(&mut self, sink: &mut Sink, p: &Rec) {
        let Some(id) = p.call_id.get() else { return };
        let call = self
            .calls
            .entry(id.to_string())
            .or_insert_with(|| Call::new(Kind::Patch));
        if call.changes_done {
            return;
        }
        call.changes_done = true;
        if p.success.0 != Some(true) {
            return;
        }
        let mut changes = std::mem::take(&mut call.patch);
        if changes.is_empty() {
            changes = applied_changes(p.changes.as_deref());
        }
        for c in changes {
            let call_id = Some(id.to_string());
            sink.push(EventKind::FileChange {
                path: c.path,
                change: c.kind,
                call_id,
            });
        }
    }

    /// Emits the call's one result, then what its success implies (file changes, a commit).
    fn finish(&mut self, sink: &mut Sink, id: &str, exit: Option<i32>, failed: bool, body: &Body) {
        let output = body.excerpt.clone();
        let applied = !failed && (exit == Some(0) || output.trim_start().starts_with("Success."));
        sink.push(EventKind::ToolResult {
            id: id.to_string(),
            exit_code: exit,
            failed,
            output,
        });
        let Some(call) = self.calls.get_mut(id) else {
            return;
        };
        call.answered = true;
        if !call.changes_done && !call.patch.is_empty() && applied {
            call.changes_done = true;
            for c in std::mem::take(&mut call.patch) {
                let call_id = Some(id.to_string());
                sink.push(EventKind::FileChange {
                    path: c.path,
                    change: c.kind,
                    call_id,
                });
            }
        }
        if let Some(cmd) = call.commit_command.take() {
            if let Some((sha, message)) = commit_from(&cmd, &body.commit_lines, failed) {
                sink.push(EventKind::Commit {
                    sha,
                    message,
                    call_id: Some(id.to_string()),
                });
            }
        }
    }

    /// `spawn_agent` is answered with `{"agent_id": …}`.
    fn link_agent(&mut self, sink: &mut Sink, id: &str, body: &str) {
        let Ok(v) = serde_json::from_str::<Value>(body) else {
            return;
        };
        let Some(agent_id) = v.get("agent_id").and_then(Value::as_str) else {
            return;
        };
        let description = self.calls.get_mut(id).and_then(|c| c.description.take());
        let call_id = Some(id.to_string());
        sink.push(EventKind::SubagentLink {
            agent_id: agent_id.to_string(),
            description,
            call_id,
        });
    }
}

impl Running {
    /// Adds a chunk, keeping one byte past [`EXCERPT`] so the final excerpt marks the cut.
    fn append(&mut self, body: &Body) {
        let more = &body.excerpt;
        let mut end = more
            .len()
            .min((EXCERPT + 1).saturating_sub(self.output.len()));
        while !more.is_char_boundary(end) {
            end -= 1;
        }
        self.output.push_str(&more[..end]);
        if self.commit_lines.len() < 1024 {
            self.commit_lines.push_str(&body.commit_lines);
        }
    }
}

/// The exit code and failure a result reports, by the tool that produced it. Plain
/// text without an exit code is read by tool; its start is all that is needed.
fn verdict(kind: Kind, out: &Out) -> (Option<i32>, bool) {
    if let Some(code) = out.exit {
        return (Some(code), code != 0);
    }
    let text = &out.body.excerpt;
    match (out.style, kind) {
        (Style::Plain, Kind::Shell) => (shell::sandbox_exit(text), true),
        (Style::Plain, Kind::Patch) => (None, !text.trim_start().starts_with("Success.")),
        (Style::Plain, _) => (None, shell::reads_as_failure(text)),
        (Style::Json | Style::Header, _) => (None, false),
    }
}

/// The call's id; a call written without one (by other tools) is named by its line.
fn call_id(p: &Rec, sink: &Sink) -> String {
    p.call_id
        .get()
        .map_or_else(|| format!("line-{}", sink.line), str::to_string)
}

/// MCP tools carry their server in `namespace` (0.128: `mcp__node_repl__` + `js`).
fn qualified_name(p: &Rec) -> String {
    let name = p.name.get().unwrap_or("");
    match p.namespace.non_empty() {
        Some(ns) if ns.ends_with("__") => format!("{ns}{name}"),
        Some(ns) => format!("{ns}__{name}"),
        None => name.to_string(),
    }
}

fn applied_changes(changes: Option<&Value>) -> Vec<Change> {
    let Some(Value::Object(m)) = changes else {
        return Vec::new();
    };
    m.iter()
        .filter_map(|(path, c)| {
            let kind = match c.get("type").and_then(Value::as_str)? {
                "add" => ChangeKind::Add,
                "delete" => ChangeKind::Delete,
                _ => match c.get("move_path").and_then(Value::as_str) {
                    Some(to) => ChangeKind::Move { to: to.to_string() },
                    None => ChangeKind::Update,
                },
            };
            Some(Change {
                path: path.clone(),
                kind,
            })
        })
        .collect()
}
