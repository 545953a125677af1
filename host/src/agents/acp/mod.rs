//! ACP agents: the Agent Client Protocol as a second transport beside tmux. An agent
//! named in lab.toml (`[agents.<name>] acp = ["cmd", "args"…]`) or declared by an ACP
//! provider component (WIT 0.3.0; which is which: [`agents`]) runs as lab's child over
//! stdio, or on another machine with its stdio relayed ([`process`]), in a session
//! ([`session`], on [`rpc`]); what it says goes into the run's journal
//! ([`journal`]), which the tailer reads like any transcript; a request that waits for
//! the operator (a permission, a form) is the run's spool, mapped by [`dialog`]; its
//! file requests are confined to the workdir ([`fs`]); the terminals it asks
//! for are windows of the run's tmux session ([`terminal`]); what it says of its usage
//! is read from the protocol ([`usage`]). The run model, the API, the
//! answer guard and the UI are the same as for tmux runs.

pub mod agents;
pub mod dialog;
pub mod fs;
pub mod journal;
pub mod process;
pub mod recorder;
pub mod rpc;
pub mod session;
pub mod terminal;
pub mod usage;

pub use agents::AcpAgent;
pub use session::{AnswerError, Open, Session, Setup, StartError};
