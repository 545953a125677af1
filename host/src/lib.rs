//! lab: runs coding agents in tmux or over ACP, shows every run as a live chat, and
//! lets the operator answer the agent's dialogs. See README.md and docs/.
//!
//! The map: one row per top-level module, grouped by layer (commands at the top, the
//! home on disk at the bottom; `tests/structure.rs` checks every module has its row).
//!
//! | module | what it owns |
//! |---|---|
//! | [`cli`] | the `lab` command line: one dispatcher for every subcommand, `lab providers check`, `lab new-provider`, `lab pair`; `lab serve` wires the rest |
//! | [`edge`] | the network edge: the HTTP API and web UI behind the Host/Origin guard, the token, device sessions, pairing a phone |
//! | [`notify`] | telling an operator who is not looking: the `[notify]` webhook and Web Push (`push/`) |
//! | [`runs`] | runs: launch, the registry, each run's live state and view, answers, liveness |
//! | [`worktree`] | a git worktree per run, its diff, review and merge |
//! | [`agents`] | what providers say and how lab speaks to an agent: the component loader, the model, ACP, `lab hook`, `lab agent-exec` |
//! | [`runner`] | `lab runner`: lab on another machine dialling `lab serve`, the other end of a machine's link |
//! | [`machines`] | where an agent runs and its terminal is reached: tmux here, other machines' runners (hosts) |
//! | [`store`] | lab's home on disk: where each file is, lab.toml, safe file reads and writes, ownership checks |
//! | [`util`] | what every layer may use and that uses nothing of lab's: the time as lab writes it, text checks, secrets, POSIX shell quoting |

pub mod agents;
pub mod cli;
pub mod edge;
pub mod machines;
pub mod notify;
pub mod runner;
pub mod runs;
pub mod store;
pub mod util;
pub mod worktree;

// Their paths before the home on disk had its folder (`lab::paths::Home` and the like).
pub use store::{config, fsutil, ownership, paths};
