//! Other machines (ADR 0003, issues 34 and 55): each has a runner lab serve speaks the
//! runner protocol with ([`protocol`]), over one of two links — the runner dials `lab
//! serve` and keeps one authenticated WebSocket open ([`link`]), or lab serve reaches
//! the machine over OpenSSH and speaks to the runner's daemon through `lab runner proxy`
//! on the ssh session's stdio ([`over_ssh`], frames as [`lines`]). lab serve knows
//! which hosts there are ([`credentials`], `lab hosts add|list|remove`, lab.toml
//! `[hosts.NAME]`) and which are connected ([`link::Hosts`], `GET /hosts`), whichever
//! the link; a host's terminal is reached through its runner ([`terminal`]), its live
//! pane views too ([`panes`]).

pub mod credentials;
pub mod lines;
pub mod link;
pub mod over_ssh;
pub mod panes;
pub mod protocol;
pub mod terminal;

pub use credentials::HostCredentials;
pub use link::{Challenge, HostBody, HostEvent, Hosts, RunnerFacts};
pub use terminal::RemoteTerminal;
