//! The store's own vocabulary for what its callers hand it: which tasks a claimer
//! takes ([`Filter`]), what an agent's prose answered ([`Directive`], [`Polarity`],
//! [`Problem`]) and how far a transcript was read ([`Checkpoint`]).
//!
//! They are defined here, at the bottom, so the store (and any backend of it) imports
//! nothing above itself; the allocator, the ACK grammar and the transcript follower
//! re-export them as their own. Plain data: no parsing, no I/O.

use crate::task::Task;
use serde::{Deserialize, Serialize};

/// Restricts which tasks are candidates (the graph measures still see every task).
#[derive(Debug, Clone, Default)]
pub struct Filter {
    pub projects: Vec<String>,
    pub phases: Vec<String>,
}

impl Filter {
    /// True if `t` is a candidate.
    pub fn admits(&self, t: &Task) -> bool {
        self.admits_cell(t.project.as_deref(), &t.phase)
    }

    /// True if a task in this (project, phase) cell is a candidate.
    pub fn admits_cell(&self, project: Option<&str>, phase: &str) -> bool {
        (self.projects.is_empty() || project.is_some_and(|p| self.projects.iter().any(|x| x == p)))
            && (self.phases.is_empty() || self.phases.iter().any(|x| x == phase))
    }
}

/// Whether a directive acknowledges an item or refuses it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Polarity {
    Ack,
    Nack,
}

/// What is wrong with a directive that is shaped like one but cannot act.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Problem {
    /// `ACK:` with no key: the agent answered, but nothing says which item.
    Keyless,
}

/// One directive issued by the text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Directive {
    pub polarity: Polarity,
    /// The keys, in order, deduplicated; empty exactly when `problem` is `Keyless`.
    pub keys: Vec<String>,
    /// 1-based line of the directive's header.
    pub line: usize,
    /// The prose after the key list up to the next directive, trimmed of whitespace and
    /// of dangling emphasis markers; `Some("")` when the agent wrote none (for a NACK
    /// the caller treats that as a problem). `None` for a keyless directive.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub problem: Option<Problem>,
}

/// Where a follower is in a file.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Checkpoint {
    pub offset: u64,
    /// Lines fully consumed so far (the next line is `line + 1`).
    pub line: u64,
    /// XXH3-64 of the bytes `[0, offset)`.
    pub hash: u64,
}

impl Checkpoint {
    /// The start of a file.
    pub fn start() -> Checkpoint {
        Checkpoint {
            offset: 0,
            line: 0,
            hash: prefix_hash(b""),
        }
    }
}

/// The checkpoint hash of a whole prefix: XXH3-64, stable across builds and
/// platforms (unlike std's hasher), and fast enough to stream over every byte read.
pub fn prefix_hash(bytes: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64(bytes)
}
