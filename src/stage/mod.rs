//! The repository's own commands at the fleet's boundaries, and the runner every
//! repository-owned command goes through ([`run`]): `[hooks]` in `spice.toml`
//! ([`config`]) and running them at each stage ([`hooks`]).

pub mod config;
pub mod ending;
pub mod hooks;
pub mod run;
