//! Playback: what lab types into a run's terminal, through the [`Terminal`] seam — a
//! provider's answer plan with its pauses, an operator's message as one paste and
//! Enter, and the wait until an agent is ready for its first prompt. What to type and
//! when it may be typed are decided elsewhere ([`super::keystrokes`] checks plans and
//! decides the drawn wait, [`super::input`] the paste's timing); this module types.
//! Every function blocks: async callers use `spawn_blocking`.

use super::input;
use crate::model::{AnswerPlan, KeyOp};
use crate::terminal::{Terminal, TerminalError};

/// Play the plan's steps into `target`, with its pause after each op but the last;
/// `sent` hears how many ops have gone so far. Stops at the first op that fails.
pub fn play(
    term: &dyn Terminal,
    target: &str,
    plan: &AnswerPlan,
    mut sent: impl FnMut(usize),
) -> Result<(), TerminalError> {
    for (i, op) in plan.steps.iter().enumerate() {
        match op {
            KeyOp::Key(k) => term.key(target, k)?,
            KeyOp::Literal(t) => term.literal(target, t)?,
        }
        sent(i + 1);
        if i + 1 < plan.steps.len() {
            std::thread::sleep(plan.pause);
        }
    }
    Ok(())
}

/// Paste `text` into the terminal as one bracketed paste, then press Enter once the
/// agent has taken it in ([`input::enter_delay`]).
pub fn type_text(term: &dyn Terminal, target: &str, buffer: &str, text: &str) -> Result<(), TerminalError> {
    term.paste(target, buffer, text)?;
    std::thread::sleep(input::enter_delay(text.len(), input::PASTE_SETTLE));
    term.key(target, "Enter")
}

/// Wait until the agent in `target` is ready to be typed into ([`input::Readiness`]),
/// at most [`input::Readiness::TIMEOUT`]. False if its session is gone.
pub fn wait_until_ready(term: &dyn Terminal, target: &str) -> bool {
    let start = std::time::Instant::now();
    let mut readiness = input::Readiness::default();
    loop {
        if !term.alive(target) {
            return false;
        }
        let screen = term.capture(target).unwrap_or_default();
        if readiness.observe(&screen, std::time::Instant::now()) {
            return true;
        }
        if start.elapsed() >= input::Readiness::TIMEOUT {
            tracing::warn!(target, "the agent's pane never went quiet; typing the first prompt anyway");
            return true;
        }
        std::thread::sleep(input::Readiness::POLL);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::terminal::memory::{Input, MemoryTerminal};
    use std::time::{Duration, Instant};

    fn plan(steps: Vec<KeyOp>, pause: Duration) -> AnswerPlan {
        AnswerPlan { drawn_within: Duration::from_secs(1), settle: Duration::ZERO, pause, steps }
    }

    /// Each op goes as the plan says, with the plan's pause between two ops and none
    /// after the last; the progress counts every op sent.
    #[test]
    fn a_plan_is_played_op_by_op_with_its_pause_between_and_none_after() {
        let t = MemoryTerminal::new();
        t.draw("r", "? Pick one");
        let pause = Duration::from_millis(40);
        let p = plan(vec![KeyOp::Key("Down".into()), KeyOp::Literal("yes;".into()), KeyOp::Key("Enter".into())], pause);
        let mut progress = Vec::new();
        let start = Instant::now();
        play(&t, "r", &p, |n| progress.push(n)).unwrap();
        let took = start.elapsed();
        assert_eq!(progress, [1, 2, 3]);
        let typed = t.typed("r");
        let inputs: Vec<&Input> = typed.iter().map(|(_, i)| i).collect();
        assert_eq!(inputs, [&Input::Key("Down".into()), &Input::Literal("yes;".into()), &Input::Key("Enter".into())]);
        for w in typed.windows(2) {
            assert!(w[1].0 - w[0].0 >= pause, "the pause between two ops: {:?}", w[1].0 - w[0].0);
        }
        assert!(took >= pause * 2 && took < pause * 3, "two pauses, none after the last op: {took:?}");
    }

    /// A terminal that fails stops the plan there: the ops after it are not typed, and
    /// the progress says how many went.
    #[test]
    fn a_failing_terminal_stops_the_plan_at_the_op_that_failed() {
        let t = MemoryTerminal::new();
        t.draw("r", "? Pick one");
        let p = plan(vec![KeyOp::Key("Down".into()), KeyOp::Key("Enter".into())], Duration::from_millis(10));
        let mut sent = 0;
        // The agent's session ends right after the first key.
        let e = play(&t, "r", &p, |n| {
            sent = n;
            t.close("r");
        })
        .unwrap_err();
        assert_eq!(sent, 1);
        assert_eq!(e.action, "type");
        assert!(e.message.contains("no session"), "{e}");
    }

    /// A message is one paste and then Enter, after the paste had time to land.
    #[test]
    fn a_message_is_one_paste_then_enter() {
        let t = MemoryTerminal::new();
        t.draw("r", "> ");
        let text = "line one\nline two";
        type_text(&t, "r", "lab-r", text).unwrap();
        let typed = t.typed("r");
        assert_eq!(typed.len(), 2);
        assert_eq!(typed[0].1, Input::Paste(text.into()));
        assert_eq!(typed[1].1, Input::Key("Enter".into()));
        assert!(typed[1].0 - typed[0].0 >= input::enter_delay(text.len(), input::PASTE_SETTLE));
        assert!(type_text(&t, "gone", "lab-x", "hi").is_err(), "no session: an error, nothing typed");
    }

    /// The first prompt waits for a still screen, and not at all for a session gone.
    #[test]
    fn the_first_prompt_waits_for_a_still_screen_and_not_for_a_gone_session() {
        let t = MemoryTerminal::new();
        assert!(!wait_until_ready(&t, "r"), "no session");
        t.draw("r", "Welcome\n> ");
        let start = Instant::now();
        assert!(wait_until_ready(&t, "r"));
        assert!(start.elapsed() < input::Readiness::TIMEOUT, "a still screen is ready before the timeout");
    }
}
