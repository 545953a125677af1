//! Where a run's agent runs and how lab reaches its terminal: this machine's tmux, or
//! another machine's `lab runner` (`crate::runner`) over its link.
//!
//! - [`terminal`]: the seam. Look at a run's pane and type into it, wherever it is.
//! - [`tmux`]: tmux driven through its command line on lab's own server socket.
//! - [`hosts`]: the other machines lab serve knows (their credentials, links and
//!   terminals; the wire keeps the word "host": `lab hosts …`, `GET /hosts`).
//! - [`ssh`]: reaching a machine with the system OpenSSH client (one master per
//!   machine, every call bounded, host keys checked strictly).

pub mod hosts;
pub mod ssh;
pub mod terminal;
pub mod tmux;
