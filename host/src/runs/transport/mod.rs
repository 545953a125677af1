//! Where a run lives and how lab speaks to it: tmux on this machine ([`tmux`]), tmux on another
//! machine through its runner ([`remote`]), or an ACP agent over JSON-RPC ([`acp`]).

pub(crate) mod acp;
pub(crate) mod remote;
pub(crate) mod tmux;
