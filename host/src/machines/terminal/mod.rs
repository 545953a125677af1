//! The terminal seam: what the host needs of the terminal a run's agent is in — look
//! at its screen, type into it, know whether it is still there, and tell an operator
//! how to attach — and no more. [`crate::machines::tmux::Tmux`] is the local implementation;
//! [`memory::MemoryTerminal`] is one in memory, for tests of what is typed when. A
//! runner on another host, or an agent reached over a protocol, is another
//! implementation: a new file, not a cut through the host.
//!
//! Calls block (a local terminal is a process to run): async callers use
//! `spawn_blocking`.

pub mod memory;

/// A terminal operation that failed: which one, and what the terminal said.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{action}: {message}")]
pub struct TerminalError {
    pub action: String,
    pub message: String,
}

/// A terminal whose sessions lab starts and ends itself, all in one place (lab's tmux
/// server here; one in memory for tests): what launching a run, ending it and learning
/// that its session went need beyond [`Terminal`].
pub trait Sessions: Terminal {
    /// Start `argv` in a new session `target` (nothing secret or large in `argv`).
    fn start(&self, target: &str, argv: &[String]) -> Result<(), TerminalError>;
    /// The names of every session there now, in one look.
    fn names(&self) -> Result<std::collections::BTreeSet<String>, TerminalError>;
    /// End session `target`, if it is still there.
    fn end(&self, target: &str) -> Result<(), TerminalError>;
    /// Where the sessions are, as a record keeps it (tmux: its socket).
    fn place(&self) -> String;
    /// Get ready to tell lab when a session ends (tmux: its hook on a server that
    /// outlived the last `lab serve`).
    fn set_up(&self) -> Result<(), TerminalError> {
        Ok(())
    }
    /// lab stops: let go of what it holds with no session left (tmux: an empty server).
    fn shut_down(&self) {}
}

/// An answer to play where the agent runs, its drawn check there too
/// ([`Terminal::answer_there`]): the provider build the run pinned (its digest), the
/// prompt, the plan, and how long the prompt may take to be drawn and still there.
#[derive(Debug, Clone)]
pub struct There {
    pub build: String,
    pub dialog: crate::agents::model::Dialog,
    pub plan: crate::agents::model::AnswerPlan,
    pub look: std::time::Duration,
}

/// What a live view of a pane hears ([`Terminal::watch`]), in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PaneEvent {
    /// The pane's size now (first, and after each resize).
    Size { cols: u16, rows: u16 },
    /// Bytes to draw: first the screen as it is, then what the program writes.
    Output(Vec<u8>),
    /// The view ended (the session went, the link went): why.
    Ended(String),
}

/// A live view of a pane ([`Terminal::watch`]): what goes up to it. Dropping it ends
/// the view.
pub trait PaneWatch: Send {
    /// Type these bytes into the pane as they are (a terminal's own key encoding).
    fn keys(&mut self, bytes: &[u8]) -> Result<(), TerminalError>;
    /// Make the pane `cols` × `rows`.
    fn resize(&mut self, cols: u16, rows: u16) -> Result<(), TerminalError>;
}

/// The terminal sessions runs live in, each named by lab (`target`).
pub trait Terminal: Send + Sync + 'static {
    /// The visible text of `target`'s screen.
    fn capture(&self, target: &str) -> Result<String, TerminalError>;
    /// Press one named key ("Up", "Enter", "C-c", …).
    fn key(&self, target: &str, key: &str) -> Result<(), TerminalError>;
    /// Type a short text literally (never read as key names).
    fn literal(&self, target: &str, text: &str) -> Result<(), TerminalError>;
    /// Paste a text of any size as one bracketed paste (through `buffer`, a name the
    /// terminal may use to hold it on the way).
    fn paste(&self, target: &str, buffer: &str, text: &str) -> Result<(), TerminalError>;
    /// Whether `target`'s session still exists.
    fn alive(&self, target: &str) -> bool;
    /// The command an operator runs to attach to `target` (argv).
    fn attach_command(&self, target: &str) -> Vec<String>;

    /// A live view of `target`'s pane: [`PaneEvent`]s go to `events` until the watch is
    /// dropped (or nobody listens), without polling the whole pane. The default: this
    /// terminal has none.
    fn watch(
        &self,
        _target: &str,
        _events: tokio::sync::mpsc::Sender<PaneEvent>,
    ) -> Result<Box<dyn PaneWatch>, TerminalError> {
        Err(TerminalError { action: "watch".into(), message: "this terminal has no live view".into() })
    }

    /// Play an answer onto its prompt where the agent runs, the check that the prompt is
    /// drawn and still done there too, in one trip. `Ok(Some(pane))`: typed, onto
    /// `pane`; `Ok(None)`: nothing typed (this terminal does not do it, it lacks the
    /// build, or the prompt was not drawn and still within `there.look`): the caller
    /// plays the answer itself. The default is `Ok(None)`: a terminal here is one call
    /// away already.
    fn answer_there(&self, _target: &str, _there: &There) -> Result<Option<String>, TerminalError> {
        Ok(None)
    }

    /// Type `steps` into `target` with `pause` after each but the last; `sent` hears
    /// how many have gone. Stops at the first that fails. A terminal far away plays
    /// them where it is, in one go (so the pauses are kept there, not stretched or
    /// bunched by the network); this default is one call per step.
    fn play(
        &self,
        target: &str,
        steps: &[crate::agents::model::KeyOp],
        pause: std::time::Duration,
        sent: &mut dyn FnMut(usize),
    ) -> Result<(), TerminalError> {
        for (i, op) in steps.iter().enumerate() {
            match op {
                crate::agents::model::KeyOp::Key(k) => self.key(target, k)?,
                crate::agents::model::KeyOp::Literal(t) => self.literal(target, t)?,
            }
            sent(i + 1);
            if i + 1 < steps.len() {
                std::thread::sleep(pause);
            }
        }
        Ok(())
    }
}
