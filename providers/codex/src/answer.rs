//! Answering the approval prompt with keys (docs/providers/codex/compat.md, "Approval
//! prompt"), and knowing when it is drawn.
//!
//! | option | key | verified |
//! |---|---|---|
//! | 0 "Yes, proceed (y)" | `y` | e2e (lab and the stand-in's own) |
//! | 1 "Yes, and don't ask again … (p)" | `p` | study notes §4 (a rule is saved) |
//! | 2 "No, and tell Codex … (esc)" | `Escape` | e2e |
//!
//! "No" opens no text field in 0.169.0 (row 3 with Enter does what Esc does): the
//! command is canceled and the turn interrupted, and the composer is free again. What to
//! do instead is then the next message, so "No" with feedback is played as `Escape`,
//! the text typed literally, `Enter`, [`FEEDBACK_PAUSE_MS`] apart (a prompt typed and
//! submitted at once can lose its Enter; verified by hand and by tests/e2e_codex.rs).
//!
//! The folder-trust screen ([`crate::screen`]): `Enter` trusts, `Escape` goes back.
//! "Hooks need review": `1` (review), `2` `Enter` (trust all: `2` alone only moves
//! the cursor), `3` (go on without them).
//!
//! Timing: a key sent the moment the prompt is drawn can be dropped (~1 in 10 under
//! load); 0.5 s after it is drawn none was lost, so the plan asks the host to settle
//! [`SETTLE_MS`] after `is_drawn`, and waits up to [`DRAWN_WITHIN_MS`] for it.

use lab_provider_sdk::{Answer, AnswerPlan, Dialog, DialogBody, KeyOp};

pub const DRAWN_WITHIN_MS: u32 = 5000;
pub const SETTLE_MS: u32 = 500;
/// Between Esc, the typed feedback and its Enter.
pub const FEEDBACK_PAUSE_MS: u32 = 500;

/// The prompt's heading and its last row, as 0.169.0 draws them.
pub const PROMPT_HEADING: &str = "Would you like to run the following command?";
pub const PROMPT_FOOTER: &str = "Press enter to confirm or esc to cancel";

/// The approval prompt's row that takes feedback ("No, and tell Codex …").
pub const NO_OPTION: u32 = 2;

const KEYS: [&str; 3] = ["y", "p", "Escape"];
const TRUST_KEYS: [&str; 2] = ["Enter", "Escape"];
const HOOKS_KEYS: [&[&str]; 3] = [&["1"], &["2", "Enter"], &["3"]];

pub fn plan_answer(dialog: &Dialog, answers: &[Answer]) -> Result<AnswerPlan, String> {
    if !dialog.answerable {
        return Err("this prompt is answered in codex itself".into());
    }
    let [answer] = answers else {
        return Err(format!("one answer expected, got {}", answers.len()));
    };
    let keys: Vec<&[&str]> = match &dialog.body {
        DialogBody::Permission(_) => KEYS.iter().map(std::slice::from_ref).collect(),
        DialogBody::Generic(_) if dialog.tool_name == crate::screen::TRUST_SCREEN => {
            TRUST_KEYS.iter().map(std::slice::from_ref).collect()
        }
        DialogBody::Generic(_) if dialog.tool_name == crate::screen::HOOKS_SCREEN => HOOKS_KEYS.to_vec(),
        _ => return Err(format!("codex has no {} prompt lab can answer", dialog.kind())),
    };
    let n = dialog.options().len().min(keys.len());
    let in_range = |i: u32| {
        if (i as usize) < n {
            Ok(i as usize)
        } else {
            Err(format!("option {i} is out of range (the prompt has {n})"))
        }
    };
    let plan = match answer {
        Answer::Option(i) => {
            let steps: Vec<KeyOp> = keys[in_range(*i)?].iter().map(|k| KeyOp::key(k)).collect();
            let pause = if steps.len() > 1 { FEEDBACK_PAUSE_MS } else { 0 };
            AnswerPlan::keys(steps, pause, DRAWN_WITHIN_MS)
        }
        Answer::Feedback((i, text)) if matches!(dialog.body, DialogBody::Permission(_)) => {
            if *i != NO_OPTION {
                return Err(format!("only option {NO_OPTION} (No) takes text"));
            }
            in_range(*i)?;
            check_text(text)?;
            AnswerPlan::keys(
                vec![KeyOp::key("Escape"), KeyOp::Literal(text.clone()), KeyOp::key("Enter")],
                FEEDBACK_PAUSE_MS,
                DRAWN_WITHIN_MS,
            )
        }
        _ => return Err("answer with one of the prompt's options".into()),
    };
    Ok(plan.settled(SETTLE_MS))
}

fn check_text(text: &str) -> Result<(), String> {
    if text.trim().is_empty() {
        return Err("the feedback is empty".into());
    }
    if text.chars().any(char::is_control) {
        return Err(
            "the feedback must be one line without control characters (a newline would send it half-typed)".into()
        );
    }
    Ok(())
}

/// The prompt is on the pane: the approval prompt for this command, or the trust screen.
pub fn is_drawn(dialog: &Dialog, pane: &str) -> bool {
    match &dialog.body {
        DialogBody::Permission(p) => {
            let first_line = p.summary.lines().next().unwrap_or("");
            // A long command wraps: look for its start only.
            let start: String = first_line.chars().take(40).collect();
            pane.contains(PROMPT_HEADING) && pane.contains(PROMPT_FOOTER) && pane.contains(&format!("$ {start}"))
        }
        DialogBody::Generic(_) if dialog.tool_name == crate::screen::TRUST_SCREEN => crate::screen::trust_drawn(pane),
        DialogBody::Generic(_) if dialog.tool_name == crate::screen::HOOKS_SCREEN => {
            crate::screen::hooks_review_drawn(pane)
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{hooks, screen};

    fn dialog() -> Dialog {
        hooks::pending_dialog(include_bytes!("../testdata/hook-permission-request.json"), &[]).unwrap().unwrap()
    }

    fn names(plan: &AnswerPlan) -> Vec<&str> {
        plan.steps
            .iter()
            .map(|k| match k {
                KeyOp::Key(k) => k.as_str(),
                KeyOp::Literal(t) => t.as_str(),
            })
            .collect()
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
        assert!(plan_answer(&d, &[Answer::Other("x".into())]).is_err());
        assert!(plan_answer(&d, &[]).is_err());
        let mut u = d.clone();
        u.answerable = false;
        assert!(plan_answer(&u, &[Answer::Option(0)]).is_err());
    }

    #[test]
    fn no_with_feedback_is_esc_then_the_next_message() {
        let d = dialog();
        let plan = plan_answer(&d, &[Answer::Feedback((2, "use mkdir instead".into()))]).unwrap();
        assert_eq!(names(&plan), ["Escape", "use mkdir instead", "Enter"]);
        assert_eq!(plan.steps[1], KeyOp::Literal("use mkdir instead".into()), "typed, not a key name");
        assert_eq!((plan.pause_ms, plan.settle_ms), (500, 500));
        assert!(plan_answer(&d, &[Answer::Feedback((0, "x".into()))]).is_err());
        assert!(plan_answer(&d, &[Answer::Feedback((2, " ".into()))]).is_err());
        assert!(plan_answer(&d, &[Answer::Feedback((2, "a\nb".into()))]).is_err());
    }

    #[test]
    fn the_trust_screen_is_enter_or_escape() {
        let d = screen::read_screen(include_str!("../testdata/pane_trust_folder.txt")).unwrap();
        assert_eq!(names(&plan_answer(&d, &[Answer::Option(0)]).unwrap()), ["Enter"]);
        assert_eq!(names(&plan_answer(&d, &[Answer::Option(1)]).unwrap()), ["Escape"]);
        assert!(plan_answer(&d, &[Answer::Option(2)]).is_err());
        assert!(plan_answer(&d, &[Answer::Feedback((1, "x".into()))]).is_err());
        assert!(is_drawn(&d, include_str!("../testdata/pane_trust_folder.txt")));
        assert!(!is_drawn(&d, include_str!("../testdata/pane_after.txt")));
    }

    #[test]
    fn hooks_review_is_1_2_enter_or_3() {
        let pane = include_str!("../testdata/pane_hooks_review.txt");
        let d = screen::read_screen(pane).unwrap();
        assert_eq!(names(&plan_answer(&d, &[Answer::Option(0)]).unwrap()), ["1"]);
        let trust = plan_answer(&d, &[Answer::Option(1)]).unwrap();
        assert_eq!(names(&trust), ["2", "Enter"]);
        assert_eq!((trust.pause_ms, trust.settle_ms), (500, 500));
        assert_eq!(names(&plan_answer(&d, &[Answer::Option(2)]).unwrap()), ["3"]);
        assert!(plan_answer(&d, &[Answer::Option(3)]).is_err());
        assert!(plan_answer(&d, &[Answer::Feedback((2, "x".into()))]).is_err());
        assert!(is_drawn(&d, pane));
        assert!(!is_drawn(&d, include_str!("../testdata/pane_trust_folder.txt")));
        assert!(!is_drawn(&d, include_str!("../testdata/pane_after.txt")));
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
