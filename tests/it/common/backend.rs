//! One test body run against both backends: SQLite (the embedded default) and
//! PostgreSQL (`[store] url` in the state directory's `config.toml`, on a database of
//! the test's own). `both!(body)` makes the two tests; the PostgreSQL one is ignored
//! unless asked for, and is skipped (said on stderr) only outside CI where no server
//! can be had ([`pg::Database::new`]).

use super::{pg, TestEnv};
use spice::clock::SystemClock;
use spice::store::{Authority, Location};
use std::sync::Arc;

/// A hermetic environment and, for PostgreSQL, its database (dropped after the test).
pub struct Fleet {
    pub env: TestEnv,
    pub db: Option<pg::Database>,
}

pub fn sqlite() -> Fleet {
    let env = TestEnv::new();
    std::fs::create_dir_all(&env.home).unwrap();
    Fleet { env, db: None }
}

pub fn postgres(test: &str) -> Option<Fleet> {
    let db = pg::Database::new(test)?;
    Some(Fleet {
        env: db.host(),
        db: Some(db),
    })
}

impl Fleet {
    pub fn location(&self) -> Location {
        match &self.db {
            Some(db) => Location::Postgres(db.url.clone()),
            None => Location::Sqlite(self.env.db()),
        }
    }

    /// The store as the library sees it, on this fleet's backend.
    pub fn authority(&self) -> Box<dyn Authority> {
        spice::store::connect(&self.location(), Arc::new(SystemClock)).unwrap()
    }

    /// Makes every write of a row of `table` fail (`on`), or no longer.
    pub fn break_writes(&self, table: &str, on: bool) {
        match (&self.db, on) {
            (None, true) => self.env.sql_write(&format!(
                "CREATE TRIGGER broken BEFORE INSERT ON {table}
                 BEGIN SELECT RAISE(ABORT, 'injected failure'); END;"
            )),
            (None, false) => self.env.sql_write("DROP TRIGGER broken"),
            (Some(db), true) => db
                .client()
                .batch_execute(&format!(
                    "CREATE FUNCTION broken() RETURNS trigger LANGUAGE plpgsql
                       AS $$ BEGIN RAISE EXCEPTION 'injected failure'; END $$;
                     CREATE TRIGGER broken BEFORE INSERT OR UPDATE ON {table}
                       FOR EACH ROW EXECUTE FUNCTION broken();"
                ))
                .unwrap(),
            (Some(db), false) => db
                .client()
                .batch_execute(&format!(
                    "DROP TRIGGER broken ON {table}; DROP FUNCTION broken();"
                ))
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
                super::$body(&$crate::common::backend::sqlite());
            }
            #[test]
            #[ignore = "needs PostgreSQL (SPICE_TEST_POSTGRES)"]
            fn postgres() {
                if let Some(f) = $crate::common::backend::postgres(stringify!($body)) {
                    super::$body(&f);
                }
            }
        }
    };
}
#[allow(unused_imports)]
pub(crate) use both;
