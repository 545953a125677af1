//! Keystrokes: the rules of a provider's [`AnswerPlan`]. The plan says everything
//! agent-specific (the keys, the pause after each, how long the prompt may take to be
//! drawn); this module checks it and decides when it may be played and whether it
//! took. It is pure: [`crate::runs::answer::playback`] types it. Waiting for the prompt to be
//! drawn is [`DrawnWait`], a pure decision fed one pane check at a time.

use crate::agents::model::{AnswerPlan, KeyOp};
use crate::runs::live::screen::PaneWatch;
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

/// How long after an answer's last key the prompt has to go away (from the screen, or
/// as the agent's side reports it) before the answer counts as lost.
pub const GONE_WITHIN: Duration = Duration::from_secs(3);
/// How often a lost answer (the prompt still there, unchanged) is played again.
pub const MAX_REPLAYS: u32 = 1;

/// What one look at the pane decides before the first key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BeforeKeys {
    /// Look again in a moment.
    Wait,
    /// The prompt is drawn and has held still for the plan's settle time: play.
    Play,
    /// The budget is spent and the prompt was never drawn and still: type nothing.
    NotOnScreen,
}

/// Waiting for a prompt to be drawn before the first key: keys are played only onto a
/// prompt the provider's `is-drawn` sees, and only once the pane has shown it unchanged
/// for the plan's `settle` (an agent may draw its prompt before it takes keys). The
/// budget is counted from the answer (`drawn_within` + `settle`), never from the
/// prompt's age: an old prompt gets the same look as a new one, and one that is not on
/// screen is never typed into.
#[derive(Debug, Clone)]
pub struct DrawnWait {
    deadline: Instant,
    settle: Duration,
    /// How long the pane has shown the prompt, drawn, exactly as now.
    steady: PaneWatch,
}

impl DrawnWait {
    pub fn new(now: Instant, drawn_within: Duration, settle: Duration) -> Self {
        DrawnWait { deadline: now + drawn_within + settle, settle, steady: PaneWatch::default() }
    }

    /// Take in one look: whether the provider says the prompt is drawn on `pane`.
    pub fn look(&mut self, now: Instant, drawn: bool, pane: &str) -> BeforeKeys {
        if drawn {
            if self.steady.observe(pane, now) >= self.settle {
                return BeforeKeys::Play;
            }
        } else {
            self.steady.reset();
        }
        if now >= self.deadline {
            BeforeKeys::NotOnScreen
        } else {
            BeforeKeys::Wait
        }
    }
}

/// What one look after the last key decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AfterKeys {
    Wait,
    /// The prompt went away: the answer took.
    Gone,
    /// The prompt is still there [`GONE_WITHIN`] after the keys. `unchanged`: the pane
    /// is exactly as before the first key, so no key took (playing again is safe);
    /// otherwise some did, and nothing more is typed.
    Lost {
        unchanged: bool,
    },
}

/// Checking that an answer's keys took: the prompt must go away (the provider's
/// `is-drawn` no longer sees it, or the agent's side ended it) within [`GONE_WITHIN`].
#[derive(Debug, Clone)]
pub struct GoneCheck {
    deadline: Instant,
    before: String,
    changed: bool,
}

impl GoneCheck {
    /// `before`: the pane as the last look before the first key saw it.
    pub fn new(now: Instant, before: &str) -> Self {
        GoneCheck { deadline: now + GONE_WITHIN, before: before.to_string(), changed: false }
    }

    /// Take in one look: whether the prompt is still the run's live one (the answer
    /// guard on a fresh read), whether it is drawn, and the pane.
    pub fn look(&mut self, now: Instant, live: bool, drawn: bool, pane: &str) -> AfterKeys {
        if !live || !drawn {
            return AfterKeys::Gone;
        }
        self.changed |= pane != self.before;
        if now >= self.deadline {
            AfterKeys::Lost { unchanged: !self.changed }
        } else {
            AfterKeys::Wait
        }
    }
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
    fn keys_are_played_only_onto_a_prompt_drawn_and_still_within_the_budget() {
        let ms = Duration::from_millis;
        let t0 = Instant::now();
        // No settle: the first look that sees it drawn plays.
        let mut w = DrawnWait::new(t0, ms(1500), Duration::ZERO);
        assert_eq!(w.look(t0, false, "loading"), BeforeKeys::Wait);
        assert_eq!(w.look(t0 + ms(100), true, "prompt"), BeforeKeys::Play);
        // Never drawn: refused at the deadline, however old the prompt (the budget is
        // the answer's), never played.
        let mut w = DrawnWait::new(t0, ms(1500), Duration::ZERO);
        assert_eq!(w.look(t0 + ms(1499), false, "elsewhere"), BeforeKeys::Wait);
        assert_eq!(w.look(t0 + ms(1500), false, "elsewhere"), BeforeKeys::NotOnScreen);
        let mut w = DrawnWait::new(t0, Duration::ZERO, Duration::ZERO);
        assert_eq!(w.look(t0, false, ""), BeforeKeys::NotOnScreen);
        // A settle time: drawn and unchanged that long; a change (or not drawn) restarts it.
        let mut w = DrawnWait::new(t0, ms(1000), ms(300));
        assert_eq!(w.look(t0, true, "picker"), BeforeKeys::Wait);
        assert_eq!(w.look(t0 + ms(200), true, "picker, redrawn"), BeforeKeys::Wait);
        assert_eq!(w.look(t0 + ms(450), true, "picker, redrawn"), BeforeKeys::Wait);
        assert_eq!(w.look(t0 + ms(500), false, "gone"), BeforeKeys::Wait);
        assert_eq!(w.look(t0 + ms(600), true, "picker"), BeforeKeys::Wait);
        assert_eq!(w.look(t0 + ms(900), true, "picker"), BeforeKeys::Play);
        // One that never holds still is not played either.
        let mut w = DrawnWait::new(t0, ms(1000), ms(300));
        for i in 0..13u64 {
            assert_eq!(w.look(t0 + ms(i * 100), true, &format!("spinner {i}")), BeforeKeys::Wait);
        }
        assert_eq!(w.look(t0 + ms(1300), true, "spinner 13"), BeforeKeys::NotOnScreen);
    }

    #[test]
    fn an_answer_counts_only_once_its_prompt_went_away() {
        let ms = Duration::from_millis;
        let t0 = Instant::now();
        let mut c = GoneCheck::new(t0, "picker");
        assert_eq!(c.look(t0 + ms(50), true, true, "picker"), AfterKeys::Wait);
        assert_eq!(c.look(t0 + ms(100), true, false, "reply"), AfterKeys::Gone, "off the screen");
        let mut c = GoneCheck::new(t0, "picker");
        assert_eq!(c.look(t0 + ms(100), false, true, "picker"), AfterKeys::Gone, "ended by the agent's side");
        // Still there, unchanged: no key took.
        let mut c = GoneCheck::new(t0, "picker");
        assert_eq!(c.look(t0 + ms(100), true, true, "picker"), AfterKeys::Wait);
        assert_eq!(c.look(t0 + GONE_WITHIN, true, true, "picker"), AfterKeys::Lost { unchanged: true });
        // Still there but changed on the way: some key took.
        let mut c = GoneCheck::new(t0, "picker");
        assert_eq!(c.look(t0 + ms(100), true, true, "picker, cursor on 2"), AfterKeys::Wait);
        assert_eq!(c.look(t0 + GONE_WITHIN, true, true, "picker"), AfterKeys::Lost { unchanged: false });
    }
}
