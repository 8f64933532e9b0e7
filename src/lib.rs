//! spice: a fleet supervisor for coding agents.
//!
//! This crate is the library behind the `spice` binary. The module map follows the
//! design (`DESIGN.md` §5); `ARCHITECTURE.md` in the repository is the current truth.
//!
//! | module | owns |
//! | --- | --- |
//! | [`stamp`] | base52 moment stamps, the ids of tasks and items |
//! | [`clock`] | time as a seam, so leases can be tested without waiting |
//! | [`when`] | parsing dates and durations as people and Taskwarrior write them |
//! | [`task`] | the task model, and Taskwarrior import/export |
//! | [`store`] | the authority (SQLite, or PostgreSQL shared by hosts): tasks, deps, flows, claims, ledger |
//! | [`alloc`] | the allocator: inherited priority, downstream release, tie-breaks |
//! | [`git`] | worktrees and the three git boundaries: the only module that moves git |
//! | [`phase_done`] | completing a phase: the holder's proof, the merge into base, the store's record |
//! | [`gate`] | measurable rules before commits and merges: caps that flex and latch, checks, hooks |
//! | [`stage`] | the repository's own commands: the one runner (timeouts, process groups, output) |
//! | [`conscience`] | maxims watching the agents' prose, bounded judges, reminders as steering |
//! | [`bed`] | test beds: seeding worktrees from warm templates, real disk usage |
//! | [`sandbox`] | confinement for what lanes launch: Landlock probed and entered |
//! | [`usage`] | `spice usage`: tokens per session, lane, task, phase or day; money from a price table |
//! | [`web`] | the operator's console (`spice serve`): routes, guards, live streams, the page |
//! | [`cli`] | argument parsing and output; the only layer that reads env, cwd or TTY |
//!
//! Invariants the whole crate keeps: the store is the only authority for tasks and
//! claims (nothing caches a second copy); every write is one `BEGIN IMMEDIATE`
//! transaction; a write on a claimed task comes from its holder; nothing in the
//! library reads the environment or the system clock directly.

pub mod agent;
pub mod alloc;
pub mod archive;
pub mod bed;
pub mod cli;
pub mod clock;
pub mod config;
pub mod conscience;
pub mod demo;
pub mod error;
pub mod fleet;
pub mod gate;
pub mod git;
pub mod json;
pub mod phase_done;
pub mod sandbox;
pub mod sanitize;
pub mod stage;
pub mod stamp;
pub mod steer;
pub mod store;
pub mod task;
pub mod transcript;
pub mod usage;
pub mod web;
pub mod when;

pub use error::{Error, Result};
