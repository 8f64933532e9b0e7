//! The loop of a running session: observe → [`Session::step`] → perform, once a
//! tick, until the machine says the session is over.
//!
//! The loop owns no state and makes no decision: it asks the machine which
//! [`Sense`]s are worth reading now, has the world ([`SessionIo`]) read each into an
//! [`Event`], steps the machine with it at the clock's monotonic time, and has each
//! [`Action`] carried out, feeding back what carrying it out learnt (a refused
//! renewal says who holds the claim). The real world is `running::Running` (the
//! agent under its PTY, its transcript, the store); the tests below drive whole
//! sessions through a scripted world on a [`ManualClock`](crate::clock::ManualClock),
//! so the timeouts of minutes run in microseconds.
//!
//! Invariants:
//! - The senses are read in [`Sense::ALL`]'s order, each after the events of the
//!   ones before it were stepped, so what the machine wants reflects this tick's
//!   news (a turn that just ended is looked at for its budget at once).
//! - The session ends exactly when an [`Action::Stop`] or [`Action::Over`] has been
//!   carried out; the lane's row is published once a tick otherwise.

use super::machine::{Action, End, Event, Sense, Session};
use crate::clock::Clock;
use crate::error::Result;
use std::collections::VecDeque;

/// The world a session's loop reads and acts on.
pub(super) trait SessionIo {
    /// Reads what `sense` covers: `None` when there is nothing to say (nothing new, or
    /// the store out of reach: asked again next tick).
    fn observe(&mut self, sense: Sense) -> Result<Option<Event>>;
    /// Carries out `action`; what doing so learnt comes back as events.
    fn perform(&mut self, action: Action) -> Result<Vec<Event>>;
    /// Writes what the lane reports (the machine's shown state and note).
    fn publish(&mut self, machine: &Session) -> Result<()>;
    /// Waits for the next tick.
    fn pause(&mut self);
}

/// Runs the session `machine` describes against `io` until it is over.
pub(super) fn drive(
    io: &mut dyn SessionIo,
    machine: &mut Session,
    clock: &dyn Clock,
) -> Result<End> {
    loop {
        for sense in Sense::ALL {
            if !machine.wants(sense, clock.monotonic()) {
                continue;
            }
            let Some(seen) = io.observe(sense)? else {
                continue;
            };
            let mut events = VecDeque::from([seen]);
            while let Some(event) = events.pop_front() {
                for action in machine.step(event, clock.monotonic()) {
                    let end = match &action {
                        Action::Stop(end) | Action::Over(end) => Some(end.clone()),
                        _ => None,
                    };
                    events.extend(io.perform(action)?);
                    if let Some(end) = end {
                        return Ok(end);
                    }
                }
            }
        }
        io.publish(machine)?;
        io.pause();
    }
}

#[cfg(test)]
mod tests;
