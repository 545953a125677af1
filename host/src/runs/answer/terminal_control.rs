//! Who has a run's terminal: "Take control" makes the live terminal interactive for one
//! device until it lets go or another device takes over. While a device holds it, lab
//! types nothing into the run itself: the composer is locked (`terminal_controlled`)
//! and an answer to a card is refused with the same reason, so an operator's keys and
//! lab's never interleave. The holder is kept in the run's published view (one owner:
//! [`crate::runs::Run`]'s view), so every page sees it at once.

use crate::runs::answer::input::ComposerLock;
use crate::runs::{AnswerState, RunError};
use crate::runs::{Core, Read, Run};
use serde::Serialize;
use std::sync::Arc;

/// The device that has a run's terminal, and since when.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Holder {
    pub device_id: String,
    pub device_name: String,
    pub since: String,
}

/// The lock the composer and the answers meet while `h` has the terminal.
pub fn lock(h: &Holder) -> ComposerLock {
    ComposerLock::new(
        "terminal_controlled",
        format!(
            "{} has taken control of the terminal (since {}): lab types nothing into the run until it is released",
            if h.device_name.is_empty() { &h.device_id } else { &h.device_name },
            h.since
        ),
    )
}

impl Core {
    /// Whether `run` has a terminal to watch and take (not an ACP run).
    pub fn has_terminal(&self, run: &Run) -> bool {
        run.transport().has_screen()
    }

    /// Give `who` the run's terminal (taking it from another device if one has it).
    /// Refused for a run without a screen, an ended one, one whose host is away, and
    /// while lab is typing into it (an answer or a message: its keys go first).
    pub async fn take_terminal(&self, run: &Arc<Run>, who: Holder) -> Result<Option<Holder>, RunError> {
        if !run.transport().has_screen() {
            return Err(RunError::NotSupported(
                "this run has no terminal to take (its agent speaks a protocol)".into(),
            ));
        }
        run.transport().reachable(&run.record())?;
        let snap = run.snapshot();
        if snap.derived.state == crate::runs::live::view::RunState::Ended {
            return Err(RunError::RunEnded);
        }
        if snap.answer.as_ref().is_some_and(|a| matches!(a.state, AnswerState::Waiting | AnswerState::Playing)) {
            return Err(crate::runs::answer::input::answer_pending_lock().into());
        }
        // lab's own typing holds the run's keys: not while it types.
        let _keys = run.keys.clone().try_lock_owned().map_err(|_| {
            RunError::from(ComposerLock::new(
                "lab_typing",
                "lab is typing into the agent right now (an answer or a message): take control once it is done",
            ))
        })?;
        Ok(run.set_holder(Some(who)))
    }
}

impl Core {
    /// `device_id` lets go of the run's terminal: `true` if it had it (another
    /// device's hold is not this one's to end: `false`).
    pub async fn release_terminal(&self, run: &Arc<Run>, device_id: &str) -> bool {
        if run.snapshot().keyboard.as_ref().is_none_or(|h| h.device_id != device_id) {
            return false;
        }
        run.set_holder(None);
        // The composer's own lock again, from the run's facts.
        run.update(&self.registry, Read::AsIs, async |_| ()).await;
        true
    }
}

impl Run {
    /// Set who has the terminal (the composer lock follows); the one before.
    fn set_holder(&self, holder: Option<Holder>) -> Option<Holder> {
        let mut before = None;
        self.view.send_if_modified(|cur| {
            before = cur.keyboard.take();
            if let Some(h) = &holder {
                cur.composer_lock = Some(lock(h));
            }
            cur.keyboard = holder;
            true
        });
        before
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lock_names_the_device_and_when() {
        let h =
            Holder { device_id: "d1".into(), device_name: "Phone".into(), since: "2026-12-05T10:00:00.000Z".into() };
        let l = lock(&h);
        assert_eq!(l.code, "terminal_controlled");
        assert!(l.message.starts_with("Phone has taken control of the terminal (since 2026-12-05T10:00:00.000Z)"));
        let nameless = Holder { device_name: String::new(), ..h };
        assert!(lock(&nameless).message.starts_with("d1 has"));
    }
}
