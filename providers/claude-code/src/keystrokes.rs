//! Keystroke recipes that answer a live AskUserQuestion picker (docs/compat.md §7).
//!
//! Keys are tmux key names; the host plays the ops in order with its fixed pause
//! between them (250 ms — back-to-back keys raced the committing Enter ahead of the
//! navigation), so pacing is not this module's concern.
//!
//! ## Single-select (one question, N options)
//!
//! Rows: the N options, a synthesized "Type something." row (free text, lab's
//! "Other"), a rule, then a synthesized "Chat about this" row. The cursor starts on
//! the first option.
//!
//! - `{"option": i}` → `Down × (N + 1)`, `Up × (N − 1 + 2)`, `Down × i`, `Enter`.
//! - `{"other": text}` → `Down × (N + 1)`, `Up × (N − 1 + 2)`, `Down × N`, literal
//!   `text`, `Enter`.
//!
//! The pinned recipe (ADR "live dialog capture", compat §7) is "normalise to the top,
//! then `Down × i`, `Enter`", with the climb `Up × (N − 1 + 2)` on the premise that
//! the picker clamps at the top. Observed live on 2.1.198: `Up` does *not* clamp — it
//! wraps around the N + 1 rows "options + Type something." — while `Down` clamps on
//! "Chat about this". The climb alone is a full cycle: right from the opening position
//! (option 1), wrong by exactly the operator's offset if they moved the cursor in the
//! TUI first. So the climb is preceded by `Down × (N + 1)`, which lands on "Chat about
//! this" from any row; from there the pinned climb reaches option 1. The whole recipe
//! was verified live from a moved cursor (and the end-to-end suite does it every run).
//!
//! ## Multi-select (one question, `multiSelect: true`, N options)
//!
//! Rows (observed on 2.1.198): "[ ] label" × N, "[ ] Type something" (row N),
//! "Submit" (row N + 1), a rule, "Chat about this". `Enter` toggles the row under the
//! cursor and leaves the cursor there; typing on the "Type something" row ticks it;
//! `Enter` on "Submit" opens a review screen ("Submit answers" / "Cancel") with the
//! cursor on "Submit answers". `Up` wraps around options + "Type something" like the
//! single-select picker, so the same `Up × (N + 1)` prefix is used.
//!
//! - `{"options": [i, j, …]}` (any order, no repeats; `{"option": i}` = one pick) →
//!   `Up × (N + 1)`, then for each pick in ascending order `Down × (pick − cursor)`,
//!   `Enter`; then `Down` to row N + 1 ("Submit"), `Enter`, `Enter` (review screen).
//! - `{"other": text}` → `Up × (N + 1)`, `Down × N`, literal `text`, `Down`, `Enter`,
//!   `Enter`.
//!
//! Every multi-select recipe in the tests below was played against the real picker and
//! produced the expected PostToolUse `answers`.
//!
//! ## Refused
//!
//! With a message the host shows: a dialog that is not an answerable question, a number
//! of answers other than one per question, an option index out of range, several
//! options for a single-select question, no or repeated options for a multi-select
//! question, an empty or multi-line free text (a newline would commit it half-typed).

use lab_provider_sdk::{Answer, Dialog, DialogKind, KeyOp, Question};

/// Whether a single multi-select question is answerable with [`multi_select_keys`] /
/// [`multi_select_other_keys`] (live-verified on 2.1.198; a switch to turn it off).
pub const MULTI_SELECT_ANSWERABLE: bool = true;

/// Synthesized rows below the last option in a single-select picker: "Type something."
/// and "Chat about this" (the pinned climb is `Up × (N − 1 + TRAILING_SYNTH_ROWS)`).
pub const TRAILING_SYNTH_ROWS: usize = 2;

/// Whether lab can answer a question list with keystrokes: exactly one question with at
/// least one option (and, for multi-select, only if [`MULTI_SELECT_ANSWERABLE`]).
pub fn supports(questions: &[Question]) -> bool {
    match questions {
        [q] => !q.options.is_empty() && (!q.multi_select || MULTI_SELECT_ANSWERABLE),
        _ => false,
    }
}

/// The keystrokes that answer `dialog` with `answers` (one per question, in order).
pub fn answer_keys(dialog: &Dialog, answers: &[Answer]) -> Result<Vec<KeyOp>, String> {
    if dialog.kind != DialogKind::Question {
        return Err(format!(
            "{} dialogs are answered in Claude Code's own interface, not with keystrokes",
            dialog.tool_name
        ));
    }
    if !dialog.answerable || !supports(&dialog.questions) {
        return Err(match dialog.questions.as_slice() {
            [q] if q.multi_select => "this multi-select question is not answerable from lab; answer it in Claude Code".into(),
            [q] if q.options.is_empty() => "this question has no options to choose from".into(),
            qs => format!(
                "this dialog is not answerable from lab ({} questions; only a single question is); answer it in Claude Code",
                qs.len()
            ),
        });
    }
    if answers.len() != dialog.questions.len() {
        return Err(format!(
            "expected exactly {} answer(s), one per question, got {}",
            dialog.questions.len(),
            answers.len()
        ));
    }
    let (q, a) = (&dialog.questions[0], &answers[0]);
    if q.multi_select {
        let picks = match a {
            Answer::Options(v) => v.clone(),
            Answer::Option(i) => vec![*i],
            Answer::Other(text) => return multi_select_other_keys(q.options.len(), text),
        };
        multi_select_keys(q.options.len(), &picks)
    } else {
        match a {
            Answer::Option(i) => single_select_keys(q.options.len(), *i),
            Answer::Other(text) => other_keys(q.options.len(), text),
            Answer::Options(_) => Err("this question takes a single option (`option`), not several (`options`)".into()),
        }
    }
}

fn keys(name: &str, n: usize) -> impl Iterator<Item = KeyOp> + '_ {
    std::iter::repeat_with(move || KeyOp::key(name)).take(n)
}

/// The pinned leading climb, `Up × (n − 1 + 2)`, for a picker with `n` options. On
/// 2.1.198 this is one full turn of the wrapping options + "Type something" cycle, so
/// it leaves a cursor on option 1 there (see the module docs).
fn normalise(n: usize) -> impl Iterator<Item = KeyOp> {
    keys("Up", n.saturating_sub(1) + TRAILING_SYNTH_ROWS)
}

/// `Down × (n + 1)`: from any row of a single-select picker onto "Chat about this",
/// where `Down` clamps; the pinned climb then reaches option 1 wherever the cursor was.
fn clamp_to_bottom(n: usize) -> impl Iterator<Item = KeyOp> {
    keys("Down", n + 1)
}

/// Select option `index` (0-based) of a single-select picker with `n` options.
pub fn single_select_keys(n: usize, index: u32) -> Result<Vec<KeyOp>, String> {
    let i = index as usize;
    if i >= n {
        return Err(format!(
            "option {index} is out of range: the question has {n} options (0 to {})",
            n.saturating_sub(1)
        ));
    }
    Ok(clamp_to_bottom(n).chain(normalise(n)).chain(keys("Down", i)).chain([KeyOp::key("Enter")]).collect())
}

/// Type `text` into the "Type something." row of a single-select picker with `n` options.
pub fn other_keys(n: usize, text: &str) -> Result<Vec<KeyOp>, String> {
    check_free_text(text)?;
    Ok(clamp_to_bottom(n)
        .chain(normalise(n))
        .chain(keys("Down", n))
        .chain([KeyOp::Literal(text.to_string()), KeyOp::key("Enter")])
        .collect())
}

fn check_free_text(text: &str) -> Result<(), String> {
    if text.trim().is_empty() {
        return Err("the free-text answer is empty".into());
    }
    if text.chars().any(char::is_control) {
        return Err(
            "the free-text answer must be one line without control characters (a newline would submit it half-typed)"
                .into(),
        );
    }
    Ok(())
}

/// Toggle the options `picks` (0-based, any order, no repeats) of a multi-select picker
/// with `n` options, then submit and confirm the review screen.
///
/// Rows: options `0..n`, "[ ] Type something" at `n`, "Submit" at `n + 1`.
pub fn multi_select_keys(n: usize, picks: &[u32]) -> Result<Vec<KeyOp>, String> {
    if picks.is_empty() {
        return Err("choose at least one option".into());
    }
    let mut sorted: Vec<usize> = picks.iter().map(|&p| p as usize).collect();
    sorted.sort_unstable();
    if let Some(w) = sorted.windows(2).find(|w| w[0] == w[1]) {
        return Err(format!("option {} is listed more than once", w[0]));
    }
    if let Some(&last) = sorted.last() {
        if last >= n {
            return Err(format!(
                "option {last} is out of range: the question has {n} options (0 to {})",
                n.saturating_sub(1)
            ));
        }
    }
    let submit_row = n + 1;
    let mut ops: Vec<KeyOp> = normalise(n).collect();
    let mut cursor = 0;
    for i in sorted {
        ops.extend(keys("Down", i - cursor));
        ops.push(KeyOp::key("Enter"));
        cursor = i;
    }
    ops.extend(keys("Down", submit_row - cursor));
    ops.push(KeyOp::key("Enter")); // Submit
    ops.push(KeyOp::key("Enter")); // review screen: "Submit answers"
    Ok(ops)
}

/// Type `text` into the "[ ] Type something" row of a multi-select picker with `n`
/// options (typing ticks the row), then submit and confirm the review screen.
pub fn multi_select_other_keys(n: usize, text: &str) -> Result<Vec<KeyOp>, String> {
    check_free_text(text)?;
    Ok(normalise(n)
        .chain(keys("Down", n))
        .chain([KeyOp::Literal(text.to_string())])
        .chain(keys("Down", 1)) // "Submit"
        .chain([KeyOp::key("Enter"), KeyOp::key("Enter")])
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use lab_provider_sdk::DialogOption;

    fn question(n: usize, multi: bool) -> Question {
        Question {
            header: "Pick".into(),
            question: "Which one?".into(),
            multi_select: multi,
            options: (0..n).map(|i| DialogOption { label: format!("opt{i}"), description: String::new() }).collect(),
        }
    }

    fn dialog(questions: Vec<Question>) -> Dialog {
        let answerable = supports(&questions);
        Dialog {
            tool_id: "toolu_1".into(),
            tool_name: "AskUserQuestion".into(),
            kind: DialogKind::Question,
            answerable,
            questions,
            plan: None,
            deep_link: None,
        }
    }

    /// Render ops compactly: "Up Up Down Enter" / literal as `'text'`.
    fn show(ops: &[KeyOp]) -> String {
        ops.iter()
            .map(|op| match op {
                KeyOp::Key(k) => k.clone(),
                KeyOp::Literal(t) => format!("'{t}'"),
            })
            .collect::<Vec<_>>()
            .join(" ")
    }

    fn rep(k: &str, n: usize) -> Vec<&str> {
        vec![k; n]
    }

    #[test]
    fn option_recipe_for_every_index_with_two_three_four_options() {
        for n in [2usize, 3, 4] {
            let d = dialog(vec![question(n, false)]);
            for i in 0..n {
                let got = answer_keys(&d, &[Answer::Option(i as u32)]).unwrap();
                let mut want = rep("Down", n + 1);
                want.extend(rep("Up", n - 1 + 2));
                want.extend(rep("Down", i));
                want.push("Enter");
                assert_eq!(show(&got), want.join(" "), "n={n} i={i}");
            }
            let err = answer_keys(&d, &[Answer::Option(n as u32)]).unwrap_err();
            assert!(err.contains("out of range"), "{err}");
        }
        // Spelled out once, so the shape is obvious.
        let d = dialog(vec![question(3, false)]);
        assert_eq!(
            show(&answer_keys(&d, &[Answer::Option(2)]).unwrap()),
            "Down Down Down Down Up Up Up Up Down Down Enter"
        );
        assert_eq!(show(&answer_keys(&d, &[Answer::Option(0)]).unwrap()), "Down Down Down Down Up Up Up Up Enter");
    }

    #[test]
    fn other_recipe_climbs_then_lands_on_type_something() {
        for n in [2usize, 3, 4] {
            let d = dialog(vec![question(n, false)]);
            let got = answer_keys(&d, &[Answer::Other("use Redis, it's 'fine'".into())]).unwrap();
            let mut want = rep("Down", n + 1);
            want.extend(rep("Up", n + 1));
            want.extend(rep("Down", n));
            let want = format!("{} 'use Redis, it's 'fine'' Enter", want.join(" "));
            assert_eq!(show(&got), want, "n={n}");
            assert_eq!(got[got.len() - 2], KeyOp::Literal("use Redis, it's 'fine'".into()));
        }
    }

    #[test]
    fn free_text_is_checked() {
        let d = dialog(vec![question(2, false)]);
        assert!(answer_keys(&d, &[Answer::Other("".into())]).unwrap_err().contains("empty"));
        assert!(answer_keys(&d, &[Answer::Other("  ".into())]).unwrap_err().contains("empty"));
        assert!(answer_keys(&d, &[Answer::Other("a\nb".into())]).unwrap_err().contains("one line"));
        assert!(answer_keys(&d, &[Answer::Other("a\u{1b}[A".into())]).unwrap_err().contains("control"));
    }

    #[test]
    fn wrong_answer_counts_and_shapes_are_refused() {
        let d = dialog(vec![question(3, false)]);
        assert!(answer_keys(&d, &[]).unwrap_err().contains("exactly 1"));
        assert!(answer_keys(&d, &[Answer::Option(0), Answer::Option(1)]).unwrap_err().contains("exactly 1"));
        assert!(answer_keys(&d, &[Answer::Options(vec![0, 1])]).unwrap_err().contains("single option"));
    }

    #[test]
    fn unanswerable_dialogs_are_refused() {
        let two = dialog(vec![question(2, false), question(2, false)]);
        assert!(!two.answerable);
        let err = answer_keys(&two, &[Answer::Option(0), Answer::Option(0)]).unwrap_err();
        assert!(err.contains("not answerable"), "{err}");

        let mut forced = dialog(vec![question(2, false), question(2, false)]);
        forced.answerable = true; // the host must not be able to talk us into it
        assert!(answer_keys(&forced, &[Answer::Option(0), Answer::Option(0)]).is_err());

        let mut flagged_off = dialog(vec![question(2, false)]);
        flagged_off.answerable = false;
        assert!(answer_keys(&flagged_off, &[Answer::Option(0)]).is_err());

        let empty = dialog(vec![question(0, false)]);
        assert!(answer_keys(&empty, &[Answer::Option(0)]).unwrap_err().contains("no options"));

        let plan = Dialog {
            tool_id: "toolu_2".into(),
            tool_name: "ExitPlanMode".into(),
            kind: DialogKind::Plan,
            answerable: false,
            questions: vec![],
            plan: Some("# Plan".into()),
            deep_link: None,
        };
        assert!(answer_keys(&plan, &[]).unwrap_err().contains("ExitPlanMode"));
    }

    #[test]
    fn multi_select_answerability_follows_the_switch() {
        let d = dialog(vec![question(3, true)]);
        assert_eq!(d.answerable, MULTI_SELECT_ANSWERABLE);
        let res = answer_keys(&d, &[Answer::Options(vec![0, 2])]);
        assert_eq!(res.is_ok(), MULTI_SELECT_ANSWERABLE);
        if !MULTI_SELECT_ANSWERABLE {
            assert!(res.unwrap_err().contains("multi-select"));
        }
    }

    /// Each of these sequences was played (250 ms apart) into the real 2.1.198
    /// multi-select picker; the comment is the `answers` its PostToolUse reported.
    #[test]
    fn multi_select_recipes_verified_live() {
        let ms = |n: usize, picks: &[u32]| show(&multi_select_keys(n, picks).unwrap());
        // "Search"
        assert_eq!(ms(3, &[1]), "Up Up Up Up Down Enter Down Down Down Enter Enter");
        // "Auth, Export"
        assert_eq!(ms(3, &[2, 0]), "Up Up Up Up Enter Down Down Enter Down Down Enter Enter");
        // "Auth, Search, Export"
        assert_eq!(ms(3, &[0, 1, 2]), "Up Up Up Up Enter Down Enter Down Enter Down Down Enter Enter");
        // "Search" (2 options)
        assert_eq!(ms(2, &[1]), "Up Up Up Down Enter Down Down Enter Enter");
        // "Search, Billing" (4 options)
        assert_eq!(ms(4, &[1, 3]), "Up Up Up Up Up Down Enter Down Down Enter Down Down Enter Enter");
        // "Webhooks" (free text)
        assert_eq!(
            show(&multi_select_other_keys(3, "Webhooks").unwrap()),
            "Up Up Up Up Down Down Down 'Webhooks' Down Enter Enter"
        );
    }

    #[test]
    fn multi_select_through_answer_keys() {
        let d = dialog(vec![question(3, true)]);
        assert!(d.answerable);
        let via = |a: Answer| show(&answer_keys(&d, &[a]).unwrap());
        assert_eq!(via(Answer::Options(vec![1])), via(Answer::Option(1)));
        assert_eq!(via(Answer::Other("Webhooks".into())), "Up Up Up Up Down Down Down 'Webhooks' Down Enter Enter");
        let err = |a: Answer| answer_keys(&d, &[a]).unwrap_err();
        assert!(err(Answer::Options(vec![])).contains("at least one"));
        assert!(err(Answer::Options(vec![1, 1])).contains("more than once"));
        assert!(err(Answer::Options(vec![0, 3])).contains("out of range"));
        assert!(err(Answer::Option(7)).contains("out of range"));
        assert!(err(Answer::Other(" ".into())).contains("empty"));
        assert!(err(Answer::Other("a\nb".into())).contains("one line"));
    }
}
