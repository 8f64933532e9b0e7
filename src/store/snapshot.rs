//! One consistent read of everything the allocator looks at.

use super::claims::Claim;
use super::tasks::{list_tasks, ListFilter};
use super::Store;
use crate::clock::Micros;
use crate::error::Result;
use crate::task::Status;
use rusqlite::Transaction;

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
                statuses: OPEN.to_vec(),
                ..ListFilter::default()
            };
            read(tx, now, list_tasks(tx, &filter)?)
        })
    }
}

/// The statuses of a snapshot's tasks.
pub(super) const OPEN: [Status; 2] = [Status::Pending, Status::Waiting];

fn read(tx: &Transaction<'_>, now: Micros, tasks: Vec<crate::task::Task>) -> Result<Snapshot> {
    let claims = super::claims::all_claims(tx)?;
    Ok(Snapshot { tasks, claims, now })
}

#[cfg(test)]
mod tests {
    use crate::clock::ManualClock;
    use crate::store::Store;
    use crate::task::{NewTask, Priority, Status};
    use std::sync::Arc;

    /// The ranking read has every field ranking reads, and none of the text.
    #[test]
    fn the_ranking_snapshot_is_the_snapshot_without_its_text() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Store::open_dir(
            dir.path(),
            Arc::new(ManualClock::new(1_790_000_000_000_000)),
        )
        .unwrap();
        let a = s
            .add_task(
                NewTask {
                    title: "a".into(),
                    body: "a long body".into(),
                    project: Some("p".into()),
                    priority: Some(Priority::H),
                    tags: vec!["next".into()],
                    ..Default::default()
                },
                &[],
            )
            .unwrap();
        s.add_task(
            NewTask {
                title: "b".into(),
                ..Default::default()
            },
            std::slice::from_ref(&a.id),
        )
        .unwrap();
        // Waiting and pending tasks interleave by id; a finished one is left out.
        for (title, status) in [
            ("c", Status::Waiting),
            ("d", Status::Pending),
            ("e", Status::Completed),
        ] {
            s.add_task(
                NewTask {
                    title: title.into(),
                    status: Some(status),
                    ..Default::default()
                },
                &[],
            )
            .unwrap();
        }
        let full = s.snapshot().unwrap();
        let (_, lean) = s.ranking_graph().unwrap();
        assert_eq!(full.tasks.len(), 4);
        assert_eq!(lean.len(), 4);
        for (f, l) in full.tasks.iter().zip(&lean) {
            assert!(l.title.is_empty() && l.body.is_empty() && l.uuid.is_empty());
            assert!(!f.title.is_empty() && !f.uuid.is_empty());
            let mut f = f.clone();
            (f.title, f.body, f.uuid, f.end, f.modified) = Default::default();
            assert_eq!(&f, l);
        }
    }
}
