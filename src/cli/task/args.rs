//! The argument types the task commands share: the value parsers clap calls (a
//! priority, a date, a duration, a status, each or `none` where it can be cleared),
//! who acts on a claimed task ([`HolderArgs`]) and what a new claim records
//! ([`LeaseArgs`]). A value clap refuses is refused before any store is opened.

use crate::clock::Micros;
use crate::store::{ClaimRequest, Holder};
use crate::task::{Priority, Status};
use crate::when;
use clap::Args;
use std::time::Duration;

/// `H`, `M`, `L` or `none`: clap cannot hold an `Option<Option<_>>` as a value.
#[derive(Debug, Clone, Copy)]
pub struct Prio(pub(super) Option<Priority>);
/// A date or `none`.
#[derive(Debug, Clone, Copy)]
pub struct MaybeDate(pub(super) Option<Micros>);

pub(super) fn priority(s: &str) -> std::result::Result<Prio, String> {
    Priority::parse(s).map(Prio)
}
pub(super) fn date(s: &str) -> std::result::Result<Micros, String> {
    when::parse_date(s)
}
pub(super) fn optional_date(s: &str) -> std::result::Result<MaybeDate, String> {
    if s == "none" {
        Ok(MaybeDate(None))
    } else {
        when::parse_date(s).map(|d| MaybeDate(Some(d)))
    }
}
pub(crate) fn duration(s: &str) -> std::result::Result<Duration, String> {
    when::parse_duration(s)
}
pub(super) fn status(s: &str) -> std::result::Result<Status, String> {
    Status::parse(s)
}

/// Who acts on a claimed task: its holder, optionally pinned to one holding (fence).
#[derive(Debug, Args)]
pub struct HolderArgs {
    /// The claim's holder; needed when the task is claimed.
    #[arg(long)]
    claimant: Option<String>,
    /// Refuse unless the claim still carries this fence.
    #[arg(long, requires = "claimant")]
    fence: Option<i64>,
}

impl HolderArgs {
    pub(super) fn holder(&self) -> Option<Holder> {
        self.claimant.as_ref().map(|c| Holder {
            claimant: c.clone(),
            fence: self.fence,
        })
    }
}

/// What a new claim records: its holder, worktree, lane and lease.
#[derive(Debug, Args)]
pub struct LeaseArgs {
    /// Who holds the claim.
    #[arg(long, default_value = crate::store::OPERATOR)]
    claimant: String,
    /// The worktree the claim records (where the work happens).
    #[arg(long)]
    worktree: Option<String>,
    /// The lane the claim records.
    #[arg(long)]
    lane: Option<String>,
    /// Lease length (default 30m).
    #[arg(long, value_parser = duration)]
    lease: Option<Duration>,
}

impl LeaseArgs {
    pub(super) fn request(&self) -> ClaimRequest {
        ClaimRequest {
            claimant: self.claimant.clone(),
            lane: self.lane.clone(),
            worktree: self.worktree.clone(),
            lease: self.lease.unwrap_or(crate::store::DEFAULT_LEASE),
        }
    }
}
