//! Runs in lab's tmux on this machine: the agent in its own session, looked at and typed
//! into through the terminal seam, closed by ending its session.

use crate::machines::terminal::Terminal;
use crate::machines::tmux::Tmux;
use std::sync::Arc;

/// What lab holds of the runs in its tmux here, and only the transports touch: lab's
/// tmux server and the same sessions as the terminal seam.
pub(in crate::runs) struct TmuxRuns {
    /// lab's tmux server: where runs' sessions are started, listed and ended.
    pub(in crate::runs) tmux: Tmux,
    /// The same sessions as the terminal seam: everything that looks at a run's
    /// screen or types into it goes through this.
    pub(in crate::runs) terminal: Arc<dyn Terminal>,
}

impl TmuxRuns {
    pub(in crate::runs) fn new(tmux: Tmux) -> TmuxRuns {
        TmuxRuns { terminal: Arc::new(tmux.clone()), tmux }
    }
}
