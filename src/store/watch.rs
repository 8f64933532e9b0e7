//! Noticing that the database changed, for readers that show it live (`spice serve`,
//! the lane events of `fleet up`), and reading what was appended since a cursor.
//!
//! SQLite's `PRAGMA data_version` changes whenever another connection (in this process
//! or another) commits; it never changes for this connection's own commits. A watcher
//! therefore keeps a store of its own that writes nothing, and compares the value.
//! The ledger and the acknowledgment records are append-only with increasing `seq`,
//! so "everything after seq N" is a cursor that never skips or repeats a row.

use super::{AckRecord, Store};
use crate::error::{Result, SqlContext};
use rusqlite::params;

impl Store {
    /// A value that differs from the previous call's when another connection committed
    /// in between. Costs no I/O beyond the shared-memory read of the WAL index.
    pub fn data_version(&self) -> Result<i64> {
        // Cached: the supervisor asks on every lane tick.
        self.conn
            .prepare_cached("PRAGMA data_version")
            .and_then(|mut st| st.query_row([], |r| r.get(0)))
            .ctx(|| "failed to read the data version".into())
    }

    /// The newest ledger entry's `seq` (0 for an empty ledger): a cursor from which
    /// [`Store::ledger_since`] yields only what happens next.
    pub fn ledger_head(&mut self) -> Result<i64> {
        self.read("reading the ledger", |tx, _| {
            Ok(tx.query_row("SELECT coalesce(max(seq), 0) FROM ledger", [], |r| r.get(0))?)
        })
    }

    /// The newest acknowledgment record's `seq` (0 when there is none).
    pub fn acks_head(&mut self) -> Result<i64> {
        self.read("reading acknowledgments", |tx, _| {
            Ok(tx.query_row("SELECT coalesce(max(seq), 0) FROM acks", [], |r| r.get(0))?)
        })
    }

    /// Acknowledgment records after `seq`, oldest first (at most `limit`), each with
    /// its own `seq`.
    pub fn acks_since(&mut self, seq: i64, limit: usize) -> Result<Vec<(i64, AckRecord)>> {
        self.read("reading acknowledgments", |tx, _| {
            let mut stmt = tx.prepare_cached(
                "SELECT seq, key, polarity, body, source, line, at, effect FROM acks
                 WHERE seq > ?1 ORDER BY seq LIMIT ?2",
            )?;
            let rows = stmt.query_map(params![seq, limit as i64], |r| {
                Ok((
                    r.get(0)?,
                    AckRecord {
                        key: r.get(1)?,
                        polarity: r.get(2)?,
                        body: r.get(3)?,
                        source: r.get(4)?,
                        line: r.get(5)?,
                        at: r.get(6)?,
                        effect: r.get(7)?,
                    },
                ))
            })?;
            Ok(rows.collect::<std::result::Result<Vec<_>, _>>()?)
        })
    }
}

#[cfg(test)]
mod tests {
    use crate::clock::ManualClock;
    use crate::store::{Store, Target, TargetKind, DEFAULT_TTL};
    use std::sync::Arc;

    #[test]
    fn another_connection_commit_changes_the_version() {
        let dir = tempfile::tempdir().unwrap();
        let watcher = Store::open_dir(dir.path(), Arc::new(ManualClock::new(1_000))).unwrap();
        let mut writer = Store::open_dir(dir.path(), Arc::new(ManualClock::new(1_000))).unwrap();
        let before = watcher.data_version().unwrap();
        assert_eq!(watcher.data_version().unwrap(), before);
        let lane = Target {
            kind: TargetKind::Lane,
            name: "a".into(),
        };
        writer.steer(&lane, "hello", DEFAULT_TTL).unwrap();
        assert_ne!(watcher.data_version().unwrap(), before);
    }
}
