//! Steering: durable items an operator addresses to a lane, worktree or session, the
//! ACK/NACK grammar that retires them from the agent's own prose, and the `spice exec`
//! wrapper that shows them on the stderr of the agent's commands.

pub mod anchor;
pub mod desk;
pub mod exec;
pub mod grammar;
pub mod hook;
pub mod wake;
