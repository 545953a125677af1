//! host/tests/security: lab's HTTP surface tried as an attacker would (real `lab serve`,
//! real tmux, fake-claude), one module per area of docs/security.md.

#[path = "../common/mod.rs"]
mod common;

mod agent_side;
mod audit;
mod credentials;
mod http;
mod input;
mod state;
mod terminal;
