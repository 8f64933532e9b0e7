//! A store on one backend through the library's [`Authority`], for the store's
//! contract tests: SQLite on a manual clock, or a PostgreSQL database of the test's
//! own (the server's clock). `both!(body)` makes the two tests; the PostgreSQL one
//! is ignored unless asked for ([`pg::Database::new`]).

use super::pg;
use spice::clock::{Clock, ManualClock, Micros, SystemClock};
use spice::store::{Authority, Location};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub const T0: Micros = 1_790_000_000_000_000;
pub const HOUR: Duration = Duration::from_secs(3600);

/// A store on one backend: SQLite on a manual clock, or a PostgreSQL database.
pub struct Fleet {
    pub dir: tempfile::TempDir,
    pub db: Option<pg::Database>,
    pub clock: ManualClock,
}

pub fn sqlite() -> Fleet {
    Fleet {
        dir: tempfile::tempdir().unwrap(),
        db: None,
        clock: ManualClock::new(T0),
    }
}

pub fn postgres(test: &str) -> Option<Fleet> {
    Some(Fleet {
        dir: tempfile::tempdir().unwrap(),
        db: Some(pg::Database::new(test)?),
        clock: ManualClock::new(T0),
    })
}

impl Fleet {
    /// A new connection to the store.
    pub fn authority(&self) -> Box<dyn Authority> {
        match &self.db {
            Some(db) => {
                spice::store::connect(&Location::Postgres(db.url.clone()), Arc::new(SystemClock))
            }
            None => spice::store::connect(
                &Location::Sqlite(self.dir.path().join("spice.db")),
                Arc::new(self.clock.clone()),
            ),
        }
        .unwrap()
    }

    pub fn is_pg(&self) -> bool {
        self.db.is_some()
    }

    /// Lets the authority's clock pass `until`: the manual clock is set there; the
    /// server's is waited for.
    pub fn pass(&self, a: &mut dyn Authority, until: Micros) {
        if self.is_pg() {
            let deadline = Instant::now() + Duration::from_secs(30);
            while a.now().unwrap() <= until {
                assert!(Instant::now() < deadline, "the server's clock stands still");
                std::thread::sleep(Duration::from_millis(20));
            }
        } else if self.clock.now() <= until {
            self.clock.set(until + 1);
        }
    }

    /// Moves the manual clock a little (the server's moves by itself).
    pub fn tick(&self) {
        self.clock.advance(Duration::from_millis(100));
    }

    /// Raw SQL, for writes the interface has no verb for.
    pub fn sql(&self, sql: &str) {
        match &self.db {
            Some(db) => db.client().batch_execute(sql).unwrap(),
            None => rusqlite::Connection::open(self.dir.path().join("spice.db"))
                .unwrap()
                .execute_batch(sql)
                .unwrap(),
        }
    }
}

/// `$body` as two tests: `sqlite` and `postgres` (the latter ignored unless asked).
#[allow(unused_macros)]
macro_rules! both {
    ($body:ident) => {
        mod $body {
            #[test]
            fn sqlite() {
                super::$body(&$crate::common::clocked::sqlite());
            }
            #[test]
            #[ignore = "needs PostgreSQL (SPICE_TEST_POSTGRES)"]
            fn postgres() {
                if let Some(f) = $crate::common::clocked::postgres(stringify!($body)) {
                    super::$body(&f);
                }
            }
        }
    };
}
#[allow(unused_imports)]
pub(crate) use both;
