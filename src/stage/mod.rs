//! The repository's own commands at the fleet's boundaries, and the runner every
//! repository-owned command goes through ([`run`]).

pub mod run;
