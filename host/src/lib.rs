//! lab: runs coding agents in tmux, shows every run as a live chat, and lets the
//! operator answer the agent's dialogs. See README.md and docs/.
//!
//! Module map (named after the seed ADR's nouns):
//! - [`components`]: the provider plugin loader (wasmtime, sandbox, capability detection)
//! - [`hook`]: `lab hook …`, the command the agent's hooks execute
//! - [`runs`]: launch, [`runs::tailer`], [`runs::view`] (state derivation),
//!   [`runs::answer_guard`], [`runs::keystrokes`], [`runs::hook_settings`], registry
//! - [`tmux`], [`http`] (API + embedded web UI, behind [`http::guard`] and [`http::auth`])
//! - [`token`]: the access token, session cookies and login codes
//! - [`notify`]: the `[notify]` webhook (run state transitions → JSON POSTs)
//! - [`worktree`]: a git worktree per run, its diff and its merge
//! - [`fsutil`], [`paths`], [`config`]: home layout, run ids, lab.toml

pub mod acp;
pub mod agent_exec;
pub mod check;
pub mod cli;
pub mod components;
pub mod config;
pub mod devices;
pub mod fsutil;
pub mod hook;
pub mod hosts;
pub mod http;
pub mod model;
pub mod notify;
pub mod ownership;
pub mod pairing;
pub mod paths;
pub mod push;
pub mod runner;
pub mod runs;
pub mod scaffold;
pub mod shell;
pub mod terminal;
pub mod tmux;
pub mod token;
pub mod worktree;
