//! lab's home on disk: where each file is ([`paths`]), lab.toml ([`config`]), how a
//! file is written and read when the agent's side may have touched it ([`fsutil`]),
//! and who could have written a path lab trusts ([`ownership`]). It depends on nothing
//! of lab's above it.

pub mod config;
pub mod fsutil;
pub mod ownership;
pub mod paths;
