//! Answering the approval prompt with keys (docs/providers/codex/compat.md, "Approval
//! prompt"), and knowing when it is drawn.
//!
//! | option | key | verified |
//! |---|---|---|
//! | 0 "Yes, proceed (y)" | `y` | e2e (lab and the stand-in's own) |
//! | 1 "Yes, and don't ask again … (p)" | `p` | study notes §4 (a rule is saved) |
//! | 2 "No, and tell Codex … (esc)" | `Escape` | e2e |
//!
//! "No" takes no text in 0.169.0: Esc cancels the command and interrupts the turn; what
//! to do instead is the operator's next message, so the dialog has no feedback option.
//!
//! Timing: a key sent the moment the prompt is drawn can be dropped (~1 in 10 under
//! load); 0.5 s after it is drawn none was lost, so the plan asks the host to settle
//! [`SETTLE_MS`] after `is_drawn`, and waits up to [`DRAWN_WITHIN_MS`] for it.

use lab_provider_sdk::{Answer, AnswerPlan, Dialog, DialogBody, KeyOp};

pub const DRAWN_WITHIN_MS: u32 = 5000;
pub const SETTLE_MS: u32 = 500;

/// The prompt's heading and its last row, as 0.169.0 draws them.
pub const PROMPT_HEADING: &str = "Would you like to run the following command?";
pub const PROMPT_FOOTER: &str = "Press enter to confirm or esc to cancel";

const KEYS: [&str; 3] = ["y", "p", "Escape"];

pub fn plan_answer(dialog: &Dialog, answers: &[Answer]) -> Result<AnswerPlan, String> {
    if !dialog.answerable {
        return Err("this prompt is answered in codex itself".into());
    }
    let DialogBody::Permission(p) = &dialog.body else {
        return Err(format!("codex has no {} prompt lab can answer", dialog.kind()));
    };
    let [answer] = answers else {
        return Err(format!("one answer expected, got {}", answers.len()));
    };
    let index = match answer {
        Answer::Option(i) => *i,
        Answer::Feedback(_) => return Err("codex's \"No\" takes no text: answer No, then send a message".into()),
        _ => return Err("answer with one of the prompt's options".into()),
    };
    let key = KEYS
        .get(index as usize)
        .filter(|_| (index as usize) < p.options.len())
        .ok_or(format!("option {index} is out of range (the prompt has {})", p.options.len()))?;
    Ok(AnswerPlan::keys(vec![KeyOp::key(key)], 0, DRAWN_WITHIN_MS).settled(SETTLE_MS))
}

/// The approval prompt is on the pane, with its options, for this command.
pub fn is_drawn(dialog: &Dialog, pane: &str) -> bool {
    let DialogBody::Permission(p) = &dialog.body else { return false };
    let first_line = p.summary.lines().next().unwrap_or("");
    // A long command wraps: look for its start only.
    let start: String = first_line.chars().take(40).collect();
    pane.contains(PROMPT_HEADING) && pane.contains(PROMPT_FOOTER) && pane.contains(&format!("$ {start}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hooks;

    fn dialog() -> Dialog {
        hooks::pending_dialog(include_bytes!("../testdata/hook-permission-request.json"), &[]).unwrap().unwrap()
    }

    #[test]
    fn each_option_is_one_key_after_the_settle() {
        let d = dialog();
        for (i, k) in ["y", "p", "Escape"].iter().enumerate() {
            let plan = plan_answer(&d, &[Answer::Option(i as u32)]).unwrap();
            assert_eq!(plan.steps, [KeyOp::key(k)]);
            assert_eq!((plan.drawn_within_ms, plan.settle_ms, plan.pause_ms), (5000, 500, 0));
        }
        assert!(plan_answer(&d, &[Answer::Option(3)]).is_err());
        assert!(plan_answer(&d, &[Answer::Feedback((2, "x".into()))]).is_err());
        assert!(plan_answer(&d, &[]).is_err());
        let mut u = d.clone();
        u.answerable = false;
        assert!(plan_answer(&u, &[Answer::Option(0)]).is_err());
    }

    #[test]
    fn drawn_on_the_captured_prompt_only() {
        let d = dialog();
        assert!(is_drawn(&d, include_str!("../testdata/pane_approval.txt")));
        assert!(!is_drawn(&d, include_str!("../testdata/pane_after.txt")));
        let other = include_str!("../testdata/pane_approval.txt").replace("$ touch approved.txt", "$ rm -rf x");
        assert!(!is_drawn(&d, &other), "another command's prompt");
    }
}
