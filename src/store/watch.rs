//! Noticing that the database changed, for readers that show it live (`spice serve`).
//!
//! SQLite's `PRAGMA data_version` changes whenever another connection (in this process
//! or another) commits; it never changes for this connection's own commits. A watcher
//! therefore keeps a store of its own that writes nothing, and compares the value.

use super::Store;
use crate::error::{Result, SqlContext};

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
