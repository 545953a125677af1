//! Other machines (ADR 0003, issue 34): a `lab runner` on each dials `lab serve` and
//! keeps one authenticated WebSocket open ([`protocol`]). lab serve knows which hosts
//! may connect ([`credentials`], `lab hosts add|list|remove`) and which are connected
//! ([`link`], `GET /hosts`); a host's terminal is reached through its runner
//! ([`terminal`]).

pub mod credentials;
pub mod lines;
pub mod link;
pub mod over_ssh;
pub mod protocol;
pub mod terminal;

pub use credentials::HostCredentials;
pub use link::{Challenge, HostBody, HostEvent, Hosts, RunnerFacts};
pub use terminal::RemoteTerminal;
