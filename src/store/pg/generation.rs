//! The generation of the graph and its claims on PostgreSQL (the SQLite store's
//! contract: [`crate::store::generation`]): the sum of `spice_generation`'s stripes,
//! moved by the schema's triggers on the same writes as SQLite's, each of which but a
//! claim taken also notifies `spice_changes` ([`super::schema`]: a notifying commit
//! waits for every other one's WAL flush).
//!
//! Waiting blocks on `LISTEN` ([`super::notify`]): a generation moved by a writer on
//! any host wakes the waiter at its commit. The waiter listens before it first reads
//! the generation, so a commit between the read and the wait is not missed. Other
//! notifications on the channel (steering, renewals never) cost one read of the sum,
//! and the sum is read again every [`QUIET`] without one (a claim taken).
//! `until` is judged by the server's clock (`spice_now()`), like every lease; no wait
//! on the socket lasts longer than [`LOOK_EVERY`], so `give_up` is asked that often.

use super::tasks::server_now;
use super::{PgContext, PgStore};
use crate::clock::Micros;
use crate::error::Result;
use crate::store::generation::LOOK_EVERY;
use crate::store::{Generation, Waited};
use std::time::Duration;

const SUM: &str = "SELECT sum(value)::bigint FROM spice_generation";

/// How long a wait goes without reading the generation when nothing was notified: a
/// claim taken moves it without a notification.
const QUIET: Duration = Duration::from_secs(1);

pub(super) fn generation(s: &mut PgStore) -> Result<Generation> {
    let PgStore {
        client,
        at,
        prepared,
        ..
    } = s;
    let at = at.as_str();
    let st = prepared.get(client, SUM, at)?;
    let v: i64 = client
        .query_one(&st, &[])
        .ctx("to read the store's generation", at)?
        .get(0);
    Ok(Generation::from_number(v))
}

/// The earliest wait date ahead of the server's clock among open tasks.
pub(super) fn next_awakening(s: &mut PgStore) -> Result<Option<Micros>> {
    Ok(s.client
        .query_opt(
            "SELECT wait FROM tasks WHERE wait > spice_now() AND status IN ('pending', 'waiting')
             ORDER BY wait LIMIT 1",
            &[],
        )
        .ctx("to read the next wait date", &s.at)?
        .map(|r| r.get(0)))
}

pub(super) fn wait_for_change(
    s: &mut PgStore,
    seen: Generation,
    until: Option<Micros>,
    give_up: &dyn Fn() -> bool,
) -> Result<Waited> {
    let mut token = s.change_token()?;
    loop {
        let now = generation(s)?;
        if now != seen {
            return Ok(Waited::Changed(now));
        }
        let read = std::time::Instant::now();
        loop {
            if read.elapsed() >= QUIET {
                break;
            }
            let mut step = LOOK_EVERY;
            if let Some(u) = until {
                let clock = server_now(&mut s.client, &s.at)?;
                if clock >= u {
                    return Ok(Waited::Due);
                }
                step = step.min(Duration::from_micros((u - clock) as u64));
            }
            if give_up() {
                return Ok(Waited::GaveUp);
            }
            let t = s.wait_change(token, step)?;
            if t != token {
                token = t;
                break;
            }
        }
    }
}
