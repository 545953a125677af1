//! lab: runs coding agents in tmux or over ACP, shows every run as a live chat, and
//! lets the operator answer the agent's dialogs. See README.md and docs/.
//!
//! The map: one row per top-level module, layer by layer from the commands down to the
//! helpers. A module imports only from the layers below its own:
//!
//! ```text
//! cli → edge, runner → notify, rules → runs → machines → agents, worktree → sandbox → store → util
//! ```
//!
//! `tests/structure.rs` holds this: every module has its row here and its layer there,
//! and no import points up a layer or makes a cycle between files.
//!
//! | module | what it owns |
//! |---|---|
//! | [`cli`] | the `lab` command line: one dispatcher for every subcommand; `lab serve` wires the rest; `lab providers check`, `lab new-provider`, `lab pair`, `lab push-key`, `lab audit`, `lab doctor`, `lab service`, `lab completions`, `lab man` |
//! | [`edge`] | the network edge: the HTTP API and web UI behind the Host/Origin guard, the token, device sessions, pairing a phone, the audit log of every operator action |
//! | [`runner`] | `lab runner`: lab on another machine, the other end of its link — dialling `lab serve`, or a daemon lab serve reaches over ssh (`lab runner proxy`); answers played next to the agent; ACP agents started there, their stdio carried over the link |
//! | [`notify`] | telling an operator who is not looking: the `[notify]` webhook and Web Push (`push/`) |
//! | [`rules`] | answer rules: what the operator allowed or refused once, applied by lab to every run's new prompts through the guarded answer path, before the notifications |
//! | [`runs`] | runs: the set of runs on its core of services (registry, providers, news, books), a transport per place and protocol, and rooms for what happens to one run — its live state, answers, launch, continuation |
//! | [`machines`] | where an agent runs and its terminal is reached: tmux here, other machines' runners (`hosts`), linked over OpenSSH (`ssh`, `hosts::over_ssh`) or dialling back |
//! | [`agents`] | what lab knows of agents without naming one: the provider component loader, the model, ACP, `lab hook`, `lab agent-exec` |
//! | [`worktree`] | a git worktree per run, its diff, review and merge |
//! | [`sandbox`] | a run's jail (bubblewrap, podman) and its egress: the allowlist, the proxy outside the jail and the bridge inside, the ledger of what was reached and refused |
//! | [`store`] | lab's home on disk: where each file is, lab.toml, safe file reads and writes, ownership checks |
//! | [`util`] | what every layer may use and that uses nothing of lab's: the time as lab writes it, text checks, secrets, POSIX shell quoting, memory given back |

pub mod agents;
pub mod cli;
pub mod edge;
pub mod machines;
pub mod notify;
pub mod rules;
pub mod runner;
pub mod runs;
pub mod sandbox;
pub mod store;
pub mod util;
pub mod worktree;
