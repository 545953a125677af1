//! Screen reading: prompts an agent shows before or outside any hook (a trust screen
//! on a folder it has not seen, a review screen) would otherwise leave a run silent for
//! ever. While a run has nothing else to show — it is starting, or blocked with no
//! dialog, or a prompt read earlier is still up — the tailer looks at its pane once a
//! second; once the pane has been still for [`QUIET`], the provider's `screen-reader`
//! (if it exports one) may recognise a prompt there, answerable like a spooled one. A
//! run that shows something nobody recognises for [`UNRECOGNISED_AFTER`] before its
//! first transcript line gets a generic card with the pane's text, never silence.
//! The decisions are pure; the tailer does the looking.

use crate::agents::model::{Dialog, DialogBody};
use crate::runs::live::view::{Derived, DialogSource, RunState};
use std::time::{Duration, Instant};

/// How often the pane is looked at while [`should_look`] says so.
pub const POLL: Duration = Duration::from_secs(1);
/// How long the pane must be unchanged before it is read.
pub const QUIET: Duration = Duration::from_millis(1000);
/// How long a starting run may show an unrecognised, still screen before the generic
/// card appears.
pub const UNRECOGNISED_AFTER: Duration = Duration::from_secs(10);
/// Lines of the pane the generic card shows (its bottom).
pub const CARD_LINES: usize = 40;

/// Whether the pane is worth a look now.
pub fn should_look(d: &Derived, spooled: bool, prompt_pending: bool) -> bool {
    if spooled || prompt_pending {
        return false;
    }
    match d.state {
        RunState::Starting => true,
        RunState::NeedsInput => d.pending_dialog.is_none(),
        RunState::Question => d.pending_dialog.as_ref().is_some_and(|p| p.source == DialogSource::Screen),
        RunState::Working | RunState::Idle | RunState::Ended => false,
    }
}

/// The pane's text over time: how long it has been unchanged.
#[derive(Debug, Clone, Default)]
pub struct PaneWatch {
    last: Option<(String, Instant)>,
}

impl PaneWatch {
    /// Take in one capture; how long the pane has shown exactly this.
    pub fn observe(&mut self, pane: &str, now: Instant) -> Duration {
        match &self.last {
            Some((text, since)) if text == pane => now.saturating_duration_since(*since),
            _ => {
                self.last = Some((pane.to_string(), now));
                Duration::ZERO
            }
        }
    }

    pub fn reset(&mut self) {
        self.last = None;
    }
}

/// What the screen shows, decided from one look: the provider's reading (`read`, None
/// when it has no screen reader or saw nothing), whether the run has shown a transcript
/// message yet (`before_first_line`: not whether its state is `starting` — the card
/// itself makes the state `question`, and must not take itself away), and how long
/// things have been still.
pub fn decide(
    read: Option<Dialog>,
    before_first_line: bool,
    pane: &str,
    quiet_for: Duration,
    running_for: Duration,
) -> Option<Dialog> {
    if let Some(d) = read {
        return Some(d);
    }
    let text = pane_tail(pane);
    if before_first_line && quiet_for >= QUIET && running_for >= UNRECOGNISED_AFTER && !text.is_empty() {
        return Some(unrecognised(&text));
    }
    None
}

/// The bottom [`CARD_LINES`] non-trailing-blank lines of the pane.
fn pane_tail(pane: &str) -> String {
    let lines: Vec<&str> = pane.lines().map(str::trim_end).collect();
    let end = lines.iter().rposition(|l| !l.is_empty()).map_or(0, |i| i + 1);
    let start = end.saturating_sub(CARD_LINES);
    lines[start..end].join("\n").trim_start_matches('\n').to_string()
}

/// The generic card for a screen nobody recognises: not answerable (the operator
/// answers in the terminal), identified by its text so it stays one card while shown.
fn unrecognised(text: &str) -> Dialog {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    text.hash(&mut h);
    Dialog {
        id: format!("screen-{:016x}", h.finish()),
        call_id: None,
        tool_name: "screen".into(),
        body: DialogBody::Generic {
            title: "The agent shows something lab cannot read".into(),
            text: text.to_string(),
            options: Vec::new(),
        },
        answerable: false,
        deep_link: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runs::live::view::PendingDialog;

    fn derived(state: RunState, pending: Option<DialogSource>) -> Derived {
        Derived {
            state,
            pending_dialog: pending.map(|source| PendingDialog { dialog: unrecognised("x"), source }),
            blocked: None,
            spool_is_stale: false,
            turn_idle: false,
        }
    }

    #[test]
    fn looks_only_while_the_run_has_nothing_else_to_show() {
        assert!(should_look(&derived(RunState::Starting, None), false, false));
        assert!(!should_look(&derived(RunState::Starting, None), true, false), "a spool is up");
        assert!(!should_look(&derived(RunState::Starting, None), false, true), "lab is typing the prompt");
        assert!(should_look(&derived(RunState::NeedsInput, None), false, false));
        assert!(should_look(&derived(RunState::Question, Some(DialogSource::Screen)), false, false));
        assert!(!should_look(&derived(RunState::Question, Some(DialogSource::Spool)), false, false));
        for s in [RunState::Working, RunState::Idle, RunState::Ended] {
            assert!(!should_look(&derived(s, None), false, false), "{s:?}");
        }
    }

    #[test]
    fn the_pane_watch_measures_stillness() {
        let t0 = Instant::now();
        let mut w = PaneWatch::default();
        assert_eq!(w.observe("a", t0), Duration::ZERO);
        assert_eq!(w.observe("a", t0 + Duration::from_secs(2)), Duration::from_secs(2));
        assert_eq!(w.observe("b", t0 + Duration::from_secs(3)), Duration::ZERO);
        assert_eq!(w.observe("b", t0 + Duration::from_secs(4)), Duration::from_secs(1));
    }

    #[test]
    fn an_unrecognised_still_screen_becomes_a_generic_card_after_a_while() {
        let pane = "\n  Something odd?\n  1. Maybe\n\n\n";
        let q = QUIET;
        let long = UNRECOGNISED_AFTER;
        assert!(decide(None, true, pane, q, long - Duration::from_secs(1)).is_none(), "too soon");
        assert!(decide(None, true, pane, Duration::ZERO, long).is_none(), "still moving");
        assert!(decide(None, true, "   \n\n", q, long).is_none(), "blank");
        assert!(decide(None, false, pane, q, long).is_none(), "only before the first line");
        let d = decide(None, true, pane, q, long).unwrap();
        assert!(!d.answerable);
        assert_eq!(d.kind(), "generic");
        assert!(matches!(&d.body, DialogBody::Generic { text, .. } if text == "  Something odd?\n  1. Maybe"));
        // Shown, the card makes the run's state `question`; the next look keeps it (no
        // flicker): the run is still before its first line.
        assert_eq!(d.id, decide(None, true, pane, q + POLL, long + POLL).unwrap().id, "one card while shown");
        // The provider's reading wins at once.
        let mut mine = unrecognised("y");
        mine.id = "trust".into();
        assert_eq!(decide(Some(mine), true, pane, Duration::ZERO, Duration::ZERO).unwrap().id, "trust");
    }
}
