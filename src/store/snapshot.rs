//! One consistent read of everything the allocator looks at.

use super::claims::Claim;
use super::tasks::{list_tasks, ListFilter};
use super::Store;
use crate::clock::Micros;
use crate::error::Result;
use crate::task::Status;

/// Open tasks and all claims, read in one transaction, with the time of the read.
pub struct Snapshot {
    pub tasks: Vec<crate::task::Task>,
    pub claims: Vec<Claim>,
    pub now: Micros,
}

impl Store {
    pub fn snapshot(&mut self) -> Result<Snapshot> {
        self.read("reading the task graph", |tx, now| {
            let filter = ListFilter {
                statuses: vec![Status::Pending, Status::Waiting],
                ..ListFilter::default()
            };
            let tasks = list_tasks(tx, &filter)?;
            let claims = super::claims::all_claims(tx)?;
            Ok(Snapshot { tasks, claims, now })
        })
    }
}
