//! The agent's side of its supervisor's desk (`fleet::desk` answers): how a lane's
//! agent reaches the store without the store's files or credentials. The supervisor
//! hands the desk's socket to its agents in [`VAR`]; their `spice exec`, `spice hook`,
//! `spice inbox`, the pre-commit gate's record and `spice task phase --done` ask
//! there, and the desk answers for the caller's own lane, session and claim only.
//!
//! Protocol: one connection per request, one JSON line each way. A request is a
//! [`Request`] (`{"op":…}`); the answer is `{"ok":…}` or `{"error":msg,"code":n,
//! "findings":[lines]}`. [`Request::Watch`] is the exception: the desk keeps the
//! connection and writes a byte when it starts watching and after each change of the
//! store, until the caller hangs up.
//!
//! Invariant: nothing here decides whom an answer is for. The request carries no
//! lane, session or worktree: the desk learns the caller from the kernel.

use crate::clock::Micros;
use crate::error::{Error, Result};
use crate::store::{Item, Target};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The environment variable naming the desk to an agent.
pub const VAR: &str = "SPICE_DESK";

/// The desk's socket in a state directory.
pub fn socket(state_dir: &Path) -> PathBuf {
    state_dir.join("desk.sock")
}

/// What an agent may ask its supervisor.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
pub enum Request {
    /// Complete the seat's task's current phase (merge, step, release).
    PhaseDone {
        task: String,
        #[serde(default)]
        json: bool,
    },
    /// The items addressed to the seat (its session, lane and worktree): pending
    /// ones, or `all` of them; with the store's clock and each closed item's answer.
    Inbox {
        #[serde(default)]
        all: bool,
    },
    /// Record that these of the seat's items were shown to the agent.
    Shown { keys: Vec<String> },
    /// Record a gate's run in the seat's task's ledger.
    GateRun { detail: Value },
    /// Judge the commit the seat's agent is about to make (its worktree's index) and
    /// keep what the gate remembers of it (`gate::agent`): the pre-commit hook of a
    /// lane's agent, which may not write the gate's files itself.
    PreCommit {
        /// The index the hook was given (`GIT_INDEX_FILE`), if any: used only when
        /// it is a file of the worktree's own git directory.
        #[serde(default)]
        index: Option<String>,
    },
    /// Keep the connection, and write a byte per change of the store.
    Watch,
}

/// What [`Request::Inbox`] answers.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Inbox {
    pub items: Vec<Item>,
    /// The store's clock when the items were read.
    pub now: Micros,
    /// The answer recorded for each closed item, by key (as `spice inbox --json`
    /// shows it).
    #[serde(default)]
    pub replies: std::collections::BTreeMap<String, Value>,
}

/// What [`Request::PhaseDone`] answers: the lines to print.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Printed {
    pub out: Vec<String>,
    pub err: Vec<String>,
}

/// What [`Request::PreCommit`] answers: whether the commit may go on, and the
/// report to print when it may not.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Judged {
    pub clean: bool,
    /// The findings and what could not run, as `spice gate check` prints them.
    pub text: String,
    pub problems: usize,
}

/// The desk at a path, asked one request per connection.
#[derive(Debug, Clone)]
pub struct Desk {
    path: PathBuf,
}

/// How long a phase's completion may wait for its answer: the merge runs the gate and
/// the repository's hooks, each bounded by its own timeout; this bounds only a desk
/// that stopped answering.
const PHASE_WITHIN: Duration = Duration::from_secs(30 * 60);

/// How long any other request may wait: a hung supervisor must never hold up the
/// agent's commands (`spice exec` then warns and runs the command without steering).
const ANSWER_WITHIN: Duration = Duration::from_secs(5);

impl Request {
    /// How long the desk may take to answer this request.
    pub fn answer_within(&self) -> Duration {
        match self {
            // Both run the repository's checks, each bounded by its own timeout.
            Request::PhaseDone { .. } | Request::PreCommit { .. } => PHASE_WITHIN,
            _ => ANSWER_WITHIN,
        }
    }
}

impl Desk {
    pub fn new(path: impl Into<PathBuf>) -> Desk {
        Desk { path: path.into() }
    }

    /// The desk named by the environment's [`VAR`] value, if set and not empty.
    pub fn from_var(value: Option<std::ffi::OsString>) -> Option<Desk> {
        value.filter(|v| !v.is_empty()).map(Desk::new)
    }

    fn connect(&self) -> Result<UnixStream> {
        UnixStream::connect(&self.path).map_err(|e| {
            Error::Other(format!(
                "the supervisor's desk at {} does not answer ({e}); is the fleet still up?",
                self.path.display()
            ))
        })
    }

    /// Sends `req` and returns the desk's `ok` value, or its refusal as the error it
    /// was (an input error, a conflict, a gate's findings, an exit code).
    pub fn ask(&self, req: &Request) -> Result<Value> {
        let mut conn = self.connect()?;
        let _ = conn.set_read_timeout(Some(req.answer_within()));
        let _ = conn.set_write_timeout(Some(ANSWER_WITHIN));
        let line = serde_json::to_string(req).map_err(|e| Error::Other(e.to_string()))?;
        writeln!(conn, "{line}").map_err(|source| Error::Io {
            context: "failed to ask the supervisor's desk".into(),
            source,
        })?;
        let mut answer = String::new();
        BufReader::new(conn)
            .read_line(&mut answer)
            .map_err(|source| Error::Io {
                context: "failed to read the supervisor's desk's answer".into(),
                source,
            })?;
        let v: Value = serde_json::from_str(&answer).map_err(|e| {
            Error::Other(format!(
                "the supervisor's desk answered something unreadable: {e}"
            ))
        })?;
        if let Some(e) = v["error"].as_str() {
            return Err(refusal(e, &v));
        }
        Ok(v["ok"].clone())
    }

    /// [`Request::PhaseDone`]: the lines to print on stdout and stderr.
    pub fn phase_done(&self, task: &str, json: bool) -> Result<Printed> {
        let v = self.ask(&Request::PhaseDone {
            task: task.into(),
            json,
        })?;
        decode(v)
    }

    /// [`Request::Inbox`].
    pub fn inbox(&self, all: bool) -> Result<Inbox> {
        decode(self.ask(&Request::Inbox { all })?)
    }

    /// [`Request::Shown`].
    pub fn shown(&self, keys: &[String]) -> Result<()> {
        self.ask(&Request::Shown {
            keys: keys.to_vec(),
        })
        .map(drop)
    }

    /// [`Request::GateRun`].
    pub fn gate_run(&self, detail: Value) -> Result<()> {
        self.ask(&Request::GateRun { detail }).map(drop)
    }

    /// [`Request::PreCommit`].
    pub fn pre_commit(&self, index: Option<String>) -> Result<Judged> {
        decode(self.ask(&Request::PreCommit { index })?)
    }

    /// [`Request::Watch`]: the connection the desk writes a byte to per change
    /// (nonblocking; end of stream when the desk is gone).
    pub fn watch(&self) -> Result<UnixStream> {
        let mut conn = self.connect()?;
        let line =
            serde_json::to_string(&Request::Watch).map_err(|e| Error::Other(e.to_string()))?;
        writeln!(conn, "{line}").map_err(|source| Error::Io {
            context: "failed to ask the supervisor's desk to watch".into(),
            source,
        })?;
        conn.set_nonblocking(true).map_err(|source| Error::Io {
            context: "failed to set up the desk's watch".into(),
            source,
        })?;
        Ok(conn)
    }
}

fn decode<T: for<'de> Deserialize<'de>>(v: Value) -> Result<T> {
    serde_json::from_value(v).map_err(|e| {
        Error::Other(format!(
            "the supervisor's desk answered something unreadable: {e}"
        ))
    })
}

/// The error a desk's refusal stands for, by its exit code.
fn refusal(msg: &str, v: &Value) -> Error {
    let findings: Vec<String> = v["findings"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|l| l.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default();
    if !findings.is_empty() {
        return Error::Refused(msg.to_string(), findings);
    }
    match v["code"].as_i64().unwrap_or(1) as i32 {
        2 => Error::Input(msg.to_string()),
        3 => Error::Conflict(msg.to_string()),
        code => Error::Exit(code, msg.to_string()),
    }
}

/// The answer line for an error (what [`Desk::ask`] reads back as that error).
pub fn failure(e: &Error) -> Value {
    let findings = match e {
        Error::Refused(_, f) => f.clone(),
        _ => Vec::new(),
    };
    serde_json::json!({ "error": e.to_string(), "code": e.exit_code(), "findings": findings })
}

/// The agent's answer to an item, as `spice inbox --json` and the console show it: the
/// ACK or NACK that retired it, else the last record for its key (an answer after it
/// expired); `null` while the item is pending or when no answer was recorded.
pub fn reply(store: &mut dyn crate::store::Authority, item: &Item) -> Result<Value> {
    if item.state == crate::store::ItemState::Pending {
        return Ok(Value::Null);
    }
    let acks = store.acks_for(&item.key)?;
    let answer = acks
        .iter()
        .rev()
        .find(|a| a.effect == "acked" || a.effect == "refused")
        .or(acks.last());
    Ok(answer.map_or(Value::Null, |a| {
        serde_json::json!({
            "polarity": a.polarity, "body": a.body, "source": a.source,
            "line": a.line, "at": crate::when::rfc3339(a.at),
        })
    }))
}

/// Where an agent's steering comes from: the store itself, or the supervisor's desk.
/// `spice exec` and the agent hooks read and record through this seam alone.
pub trait Steering {
    /// The pending items for `targets` and the store's clock. The desk answers for
    /// its caller's seat and ignores `targets`.
    fn due(&mut self, targets: &[Target]) -> Result<(Vec<Item>, Micros)>;
    /// Records that these items were shown.
    fn mark_shown(&mut self, keys: &[String]) -> Result<()>;
}

impl Steering for Box<dyn crate::store::Authority> {
    fn due(&mut self, targets: &[Target]) -> Result<(Vec<Item>, Micros)> {
        let items = self.inbox(targets, false)?;
        Ok((items, self.now()?))
    }
    fn mark_shown(&mut self, keys: &[String]) -> Result<()> {
        crate::store::Authority::mark_shown(self.as_mut(), keys)
    }
}

impl Steering for Desk {
    fn due(&mut self, _targets: &[Target]) -> Result<(Vec<Item>, Micros)> {
        let inbox = self.inbox(false)?;
        Ok((inbox.items, inbox.now))
    }
    fn mark_shown(&mut self, keys: &[String]) -> Result<()> {
        if keys.is_empty() {
            return Ok(());
        }
        self.shown(keys)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_read_back_as_written_and_unknown_fields_are_refused() {
        for req in [
            Request::PhaseDone {
                task: "t".into(),
                json: true,
            },
            Request::Inbox { all: false },
            Request::Shown {
                keys: vec!["k".into()],
            },
            Request::GateRun {
                detail: serde_json::json!({"hook": "pre-commit"}),
            },
            Request::Watch,
        ] {
            let line = serde_json::to_string(&req).unwrap();
            assert_eq!(serde_json::from_str::<Request>(&line).unwrap(), req);
        }
        // The form a previous agent's spice sent reads the same.
        let old: Request = serde_json::from_str(r#"{"op":"phase_done","task":"t"}"#).unwrap();
        assert_eq!(
            old,
            Request::PhaseDone {
                task: "t".into(),
                json: false
            }
        );
        // A caller cannot name whom it answers for.
        assert!(serde_json::from_str::<Request>(r#"{"op":"inbox","lane":"b"}"#).is_err());
        assert!(serde_json::from_str::<Request>(r#"{"op":"drop_tables"}"#).is_err());
    }

    #[test]
    fn a_desk_that_stopped_answering_holds_a_command_up_for_seconds_only() {
        // A listener nobody accepts from: connect succeeds (the backlog), no answer.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("desk.sock");
        let _listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
        let started = std::time::Instant::now();
        let e = Desk::new(&path).inbox(false).unwrap_err();
        assert!(e.to_string().contains("desk"), "{e}");
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "{:?}",
            started.elapsed()
        );
        assert!(
            Request::PhaseDone {
                task: "t".into(),
                json: false
            }
            .answer_within()
                > ANSWER_WITHIN
        );
    }

    #[test]
    fn a_refusal_reads_back_as_the_error_it_was() {
        for e in [
            Error::Input("bad".into()),
            Error::Conflict("lost".into()),
            Error::Refused("gate".into(), vec!["a.rs: too long".into()]),
        ] {
            let v = failure(&e);
            let back = refusal(v["error"].as_str().unwrap(), &v);
            assert_eq!(back.exit_code(), e.exit_code());
            assert_eq!(back.to_string(), e.to_string());
        }
    }
}
