//! Change notification on PostgreSQL: `LISTEN spice_changes`, which the schema's
//! triggers notify on every committed change to steering items, claims or the
//! generation ([`super::schema::CHANGES`]; a wait on the generation blocks here too).
//!
//! The change token is this connection's count of notifications received since it
//! first asked: it moves only after a writer committed (PostgreSQL delivers a
//! notification at its transaction's commit, never before), so a caller that reads the
//! token, then the state, then waits for the token to move, cannot miss a change made
//! after its read. The first ask issues `LISTEN`; a connection that never asks pays
//! nothing. Waiting blocks on the connection's socket (`timeout_iter`), never polls.

use super::schema::CHANGES;
use super::{PgContext, PgStore};
use crate::error::{Error, Result};
use postgres::fallible_iterator::FallibleIterator;
use std::time::{Duration, Instant};

impl PgStore {
    /// Starts listening once; notifications before this are not counted.
    fn listen(&mut self) -> Result<()> {
        if !self.listening {
            self.client
                .batch_execute(&format!("LISTEN {CHANGES}"))
                .ctx("to listen for changes", &self.at)?;
            self.listening = true;
        }
        Ok(())
    }

    /// Counts what the connection has received, without waiting.
    fn drain(&mut self) -> Result<()> {
        let mut notes = self.client.notifications();
        let mut it = notes.iter();
        while it
            .next()
            .ctx("to read change notifications", &self.at)?
            .is_some()
        {
            self.changes += 1;
        }
        Ok(())
    }

    /// The change token now (listening from the first call on).
    pub(super) fn change_token(&mut self) -> Result<i64> {
        self.listen()?;
        self.drain()?;
        Ok(self.changes)
    }

    /// Blocks until the token differs from `seen` or `timeout` passes; the token then.
    pub(super) fn wait_change(&mut self, seen: i64, timeout: Duration) -> Result<i64> {
        let now = self.change_token()?;
        if now != seen {
            return Ok(now);
        }
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(self.changes);
            }
            let got = self
                .client
                .notifications()
                .timeout_iter(left)
                .next()
                .ctx("to wait for a change", &self.at)?;
            if got.is_some() {
                self.changes += 1;
                self.drain()?;
                return Ok(self.changes);
            }
            // `None` is the deadline, or the server gone: say which.
            if self.client.is_closed() {
                return Err(Error::Other(format!(
                    "failed to wait for a change on {}: the connection was closed",
                    self.at
                )));
            }
        }
    }
}
