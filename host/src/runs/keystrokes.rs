//! Keystrokes: playing a provider's [`AnswerPlan`] into the agent's pane. The plan says
//! everything agent-specific (the keys, the pause after each, how long the prompt may
//! take to be drawn); this module checks it and plays it. Waiting for the prompt to be
//! drawn is [`DrawnWait`], a pure decision fed one pane check at a time.

use crate::model::{AnswerPlan, KeyOp};
use crate::tmux::{Tmux, TmuxError};
use std::time::{Duration, Instant};

/// Longest pause between two ops a plan may ask for.
pub const MAX_PAUSE: Duration = Duration::from_secs(2);
/// Longest a plan may wait for its prompt to be drawn.
pub const MAX_DRAWN_WITHIN: Duration = Duration::from_secs(15);
/// Most ops in one plan.
pub const MAX_STEPS: usize = 512;
/// How often the pane is looked at while waiting for the prompt to be drawn.
pub const DRAWN_POLL: Duration = Duration::from_millis(50);

/// How an op is reported back in `{"keys": [...]}`: key names as they are, typed
/// text as `text:<the text>`.
pub fn describe(op: &KeyOp) -> String {
    match op {
        KeyOp::Key(k) => k.clone(),
        KeyOp::Literal(t) => format!("text:{t}"),
    }
}

/// Refuse a plan that is not plain tmux key names, or asks for more than the limits,
/// before anything is played.
pub fn validate(plan: &AnswerPlan) -> Result<(), String> {
    if plan.steps.is_empty() {
        return Err("the provider returned no keys to play".into());
    }
    if plan.steps.len() > MAX_STEPS {
        return Err(format!("the provider's plan has {} keys; at most {MAX_STEPS} are played", plan.steps.len()));
    }
    if plan.pause > MAX_PAUSE || plan.settle > MAX_PAUSE || plan.drawn_within > MAX_DRAWN_WITHIN {
        return Err(format!(
            "the provider's plan waits too long ({:?} between keys, {:?} once drawn, {:?} for the prompt; at most {:?}, {:?} and {:?})",
            plan.pause, plan.settle, plan.drawn_within, MAX_PAUSE, MAX_PAUSE, MAX_DRAWN_WITHIN
        ));
    }
    for op in &plan.steps {
        match op {
            KeyOp::Key(k) => {
                let ok = !k.is_empty() && k.len() <= 16 && k.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-');
                if !ok {
                    return Err(format!("the provider asked for an invalid key name {k:?}"));
                }
            }
            KeyOp::Literal(t) => {
                if t.chars().any(char::is_control) {
                    return Err("the provider asked to type a control character".into());
                }
            }
        }
    }
    Ok(())
}

/// Waiting for a prompt to be drawn before the first key: done when the provider's
/// check says so, or once the deadline (`drawn_within` after the prompt was captured)
/// has passed — then the keys are played anyway.
#[derive(Debug, Clone, Copy)]
pub struct DrawnWait {
    deadline: Instant,
}

impl DrawnWait {
    /// `captured`: how long ago the prompt was captured (the spool's age).
    pub fn new(now: Instant, captured: Duration, drawn_within: Duration) -> Self {
        DrawnWait { deadline: now + drawn_within.saturating_sub(captured) }
    }

    /// Whether to stop waiting, given one check of the pane.
    pub fn done(&self, now: Instant, drawn: bool) -> bool {
        drawn || now >= self.deadline
    }

    /// Whether the deadline has passed already (no check needed).
    pub fn expired(&self, now: Instant) -> bool {
        now >= self.deadline
    }
}

/// Play the plan's steps into `target`, with its pause after each op but the last
/// (blocking).
pub fn play(tmux: &Tmux, target: &str, plan: &AnswerPlan, mut sent: impl FnMut(usize)) -> Result<(), TmuxError> {
    for (i, op) in plan.steps.iter().enumerate() {
        match op {
            KeyOp::Key(k) => tmux.send_key(target, k)?,
            KeyOp::Literal(t) => tmux.send_literal(target, t)?,
        }
        sent(i + 1);
        if i + 1 < plan.steps.len() {
            std::thread::sleep(plan.pause);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(steps: Vec<KeyOp>) -> AnswerPlan {
        AnswerPlan {
            drawn_within: Duration::from_secs(1),
            settle: Duration::ZERO,
            pause: Duration::from_millis(250),
            steps,
        }
    }

    #[test]
    fn describes_and_validates() {
        let ops = vec![KeyOp::Key("Up".into()), KeyOp::Key("Enter".into()), KeyOp::Literal("C-c ;".into())];
        assert_eq!(ops.iter().map(describe).collect::<Vec<_>>(), vec!["Up", "Enter", "text:C-c ;"]);
        assert!(validate(&plan(ops)).is_ok());
        assert!(validate(&plan(vec![])).is_err());
        assert!(validate(&plan(vec![KeyOp::Key("Up; kill-server".into())])).is_err());
        assert!(validate(&plan(vec![KeyOp::Key("".into())])).is_err());
        assert!(validate(&plan(vec![KeyOp::Literal("a\u{1b}[A".into())])).is_err());
        let mut slow = plan(vec![KeyOp::Key("y".into())]);
        slow.pause = Duration::from_secs(3);
        assert!(validate(&slow).is_err());
        slow.pause = Duration::ZERO;
        slow.settle = Duration::from_secs(3);
        assert!(validate(&slow).is_err());
        slow.settle = Duration::ZERO;
        slow.drawn_within = Duration::from_secs(60);
        assert!(validate(&slow).is_err());
        assert!(validate(&plan(vec![KeyOp::Key("Down".into()); MAX_STEPS + 1])).is_err());
    }

    #[test]
    fn the_drawn_wait_ends_on_the_signal_or_the_deadline_counted_from_capture() {
        let t0 = Instant::now();
        let w = DrawnWait::new(t0, Duration::ZERO, Duration::from_millis(1500));
        assert!(!w.done(t0, false));
        assert!(w.done(t0, true), "drawn: play at once");
        assert!(!w.done(t0 + Duration::from_millis(1499), false));
        assert!(w.done(t0 + Duration::from_millis(1500), false), "not drawn in time: play anyway");
        // A prompt captured 1 s ago has 0.5 s left; one older than the budget none.
        let w = DrawnWait::new(t0, Duration::from_secs(1), Duration::from_millis(1500));
        assert!(!w.expired(t0 + Duration::from_millis(499)));
        assert!(w.expired(t0 + Duration::from_millis(500)));
        assert!(DrawnWait::new(t0, Duration::from_secs(9), Duration::from_millis(1500)).expired(t0));
        assert!(DrawnWait::new(t0, Duration::ZERO, Duration::ZERO).expired(t0));
    }
}
