//! Answer plans: the keystrokes that answer a live Claude Code prompt
//! (docs/providers/claude-code/compat.md §7). Every recipe here was played into the real
//! 2.1.198 TUI, 250 ms apart, and produced the answer it claims.
//!
//! The host waits until [`crate::screen::is_drawn`] says the prompt is on screen (at
//! most [`DRAWN_WITHIN_MS`]; a plan prompt also unchanged for [`PLAN_SETTLE_MS`]), then
//! plays the steps with [`PAUSE_MS`] after each (back-to-back keys raced the committing
//! Enter ahead of the navigation).
//!
//! ## One question, single-select (N options)
//!
//! Rows: the N options, a synthesized "Type something." row (free text, lab's
//! "Other"), a rule, then a synthesized "Chat about this" row. The cursor starts on
//! the first option.
//!
//! - `{"option": i}` → `Down × (N + 1)`, `Up × (N − 1 + 2)`, `Down × i`, `Enter`.
//! - `{"other": text}` → `Down × (N + 1)`, `Up × (N − 1 + 2)`, `Down × N`, literal
//!   `text`, `Enter`.
//!
//! `Up` does not clamp at the top on 2.1.198 — it wraps around the N + 1 rows (the
//! options and "Type something.") — while `Down` clamps on "Chat about this". So the recipe first
//! goes down onto "Chat about this" from any row, then climbs N + 1 rows to option 1:
//! right wherever the operator left the cursor.
//!
//! ## One question, multi-select (N options)
//!
//! Rows: "[ ] label" × N, "[ ] Type something" (row N), "Submit" (row N + 1), a rule,
//! "Chat about this". `Enter` toggles the row under the cursor; typing on the "Type
//! something" row ticks it; `Enter` on "Submit" opens a review screen ("Submit answers"
//! / "Cancel") with the cursor on "Submit answers".
//!
//! - `{"options": [i, j, …]}` (any order, no repeats; `{"option": i}` = one pick) →
//!   `Up × (N + 1)`, then for each pick in ascending order `Down × (pick − cursor)`,
//!   `Enter`; then `Down` to row N + 1 ("Submit"), `Enter`, `Enter` (review screen).
//! - `{"other": text}` → `Up × (N + 1)`, `Down × N`, literal `text`, `Down`, `Enter`,
//!   `Enter`.
//!
//! ## Several questions (tabs "☐ Database ☐ Features … ✔ Submit")
//!
//! Each tab opens with the cursor on its first option; answering a tab moves to the
//! next; after the last, a review screen ("Review your answers … 1. Submit answers
//! 2. Cancel") with the cursor on "Submit answers". Per question, in order:
//!
//! - single-select `{"option": i}` → `Down × i`, `Enter`; `{"other": text}` →
//!   `Down × N`, literal `text`, `Enter`. The first question, if single-select, is
//!   preceded by the `Down × (N + 1)`, `Up × (N + 1)` climb (the operator may have
//!   moved the cursor before lab answers).
//! - multi-select `{"options": picks}` → for each pick ascending `Down × (pick −
//!   cursor)`, `Enter`; then `Down` to row N + 1 ("Next", or "Submit" on the last tab),
//!   `Enter`; `{"other": text}` → `Down × N`, literal `text`, `Down`, `Enter`.
//!
//! then `Enter` on the review screen.
//!
//! ## Plan (ExitPlanMode)
//!
//! Both plan menus wrap both ways, so arrows cannot find a row from an unknown
//! cursor; digits can: a digit picks that row at once, wherever the cursor is — except
//! in the plan-file prompt's text row (row 3), where digits are typed as text.
//!
//! "Exit plan mode? … 1. Yes 2. No" (no plan file):
//!
//! - `{"option": i}` → the digit `i + 1`.
//! - `{"feedback": [1, text]}` → `2`, literal `text`, `Enter`: the plan is rejected and
//!   the TUI waits at its prompt ("What should Claude do instead?"), where the text is
//!   typed as the operator's next message.
//!
//! "Ready to code? … 1. Yes, and use auto mode 2. Yes, manually approve edits 3. Tell
//! Claude what to change" (a plan file):
//!
//! - `{"option": 0}` / `{"option": 1}` → `1` / `2` (approved; auto mode / default mode);
//! - `{"option": 2}` → `3`, `Enter` (rejected, no text: Claude stops and waits);
//! - `{"feedback": [2, text]}` → `3` (into the text row), literal `text`, `Enter`:
//!   rejected with the text in the tool_result; the turn goes on.
//!
//! ## Permission ("Do you want to proceed? 1. Yes 2. Yes, and … 3. No")
//!
//! - `{"option": i}` for a Yes row → the digit `i + 1` (wherever the cursor is;
//!   verified for Bash, Write, Edit and WebFetch, also with the cursor moved).
//! - `{"option": last}` (No) → `Escape`; `{"feedback": [last, text]}` → `Escape`,
//!   literal `text`, `Enter`: the call is rejected ("Interrupted · What should Claude do
//!   instead?") and the text is the operator's next message. Escape is the No row on
//!   every release seen (WebFetch's row says so: "No, and tell Claude what to do
//!   differently (esc)"), while the No row's *number* is not: 2.1.332 adds "3. Yes, and
//!   switch to auto mode" before "4. No", where lab's old digit 3 approved the call.
//!   Verified live on 2.1.198 and 2.1.332. [`crate::screen::is_drawn`] holds the keys
//!   back unless rows 1… are lab's Yes rows at their numbers and the last row is a No.
//!   (Bash, Edit and Write also offer "Tab to amend" on the No row — `Down × 2`, `Tab`,
//!   text, `Enter` puts the text into the tool_result and the turn goes on; verified
//!   live, but it needs the cursor on option 1 and, from another row, would amend a
//!   *Yes* — so lab does not use it.)
//!
//! ## Generic (the workspace-trust screen: "1. Yes, I trust this folder 2. No, exit")
//!
//! - `{"option": i}` → the digit `i + 1`.
//!
//! ## Refused
//!
//! With a message the host shows: a dialog that is not answerable, a number of answers
//! other than one per question (one for other kinds), an option index out of range,
//! several options for a single-select question, no or repeated options for a
//! multi-select question, feedback for an option that takes none, an empty or
//! multi-line free text (a newline would commit it half-typed).

use lab_provider_sdk::{Answer, AnswerPlan, Dialog, DialogBody, KeyOp, PermissionBody, PlanBody, Question};

use crate::dialog_mapper::is_plan_file_prompt;

/// Pause after each key (ms).
pub const PAUSE_MS: u32 = 250;

/// How long the host waits for the prompt to be drawn before the first key (ms).
pub const DRAWN_WITHIN_MS: u32 = 5000;

/// How long a plan prompt must be drawn and unchanged before the first key (ms).
/// 2.1.332 draws its plan picker before it takes keys: a key sent 8 ms after the picker
/// first showed was lost, one sent 0.3 s after landed (notes on 2.1.332, §3); 2.1.198
/// needed none. Half a second leaves a margin for a loaded machine.
pub const PLAN_SETTLE_MS: u32 = 500;

/// Whether a multi-select question is answerable (live-verified on 2.1.198; a switch
/// to turn it off if a release breaks it).
pub const MULTI_SELECT_ANSWERABLE: bool = true;

/// Synthesized rows below the last option in a single-select picker: "Type something."
/// and "Chat about this" (the climb is `Up × (N − 1 + TRAILING_SYNTH_ROWS)`).
pub const TRAILING_SYNTH_ROWS: usize = 2;

/// Whether lab can answer a question list with keystrokes: every question has at least
/// one option (and, for multi-select, only if [`MULTI_SELECT_ANSWERABLE`]).
pub fn supports(questions: &[Question]) -> bool {
    !questions.is_empty()
        && questions.iter().all(|q| !q.options.is_empty() && (!q.multi_select || MULTI_SELECT_ANSWERABLE))
}

/// The plan that answers `dialog` with `answers`.
pub fn plan_answer(dialog: &Dialog, answers: &[Answer]) -> Result<AnswerPlan, String> {
    if !dialog.answerable {
        return Err(format!("this {} prompt is not answerable from lab; answer it in Claude Code", dialog.tool_name));
    }
    let steps = match &dialog.body {
        DialogBody::Question(qs) => question_keys(qs, answers)?,
        DialogBody::Plan(p) => plan_keys(p, one(answers)?)?,
        DialogBody::Permission(p) => permission_keys(p, one(answers)?)?,
        // 2.1.332's trust list (drawn only with the cursor on "No, exit", its first row;
        // Down wraps): Yes is Down, Enter; No is Enter.
        DialogBody::Generic(g) if crate::screen::is_trust_list(dialog) => match one(answers)? {
            Answer::Option(0) => vec![KeyOp::key("Down"), KeyOp::key("Enter")],
            Answer::Option(1) => vec![KeyOp::key("Enter")],
            Answer::Option(i) => return Err(out_of_range(*i, g.options.len())),
            _ => return Err("this prompt takes one option".into()),
        },
        DialogBody::Generic(g) => match one(answers)? {
            Answer::Option(i) => digit(*i, g.options.len())?,
            _ => return Err("this prompt takes one option".into()),
        },
    };
    let plan = AnswerPlan::keys(steps, PAUSE_MS, DRAWN_WITHIN_MS);
    Ok(match &dialog.body {
        DialogBody::Plan(_) => plan.settled(PLAN_SETTLE_MS),
        _ => plan,
    })
}

fn one(answers: &[Answer]) -> Result<&Answer, String> {
    match answers {
        [a] => Ok(a),
        _ => Err(format!("expected exactly 1 answer, got {}", answers.len())),
    }
}

/// The digit key that picks option `index` (0-based) of a menu with `n` options.
fn digit(index: u32, n: usize) -> Result<Vec<KeyOp>, String> {
    let i = index as usize;
    if i >= n {
        return Err(out_of_range(index, n));
    }
    if i >= 9 {
        return Err(format!("option {index} has no digit key"));
    }
    Ok(vec![KeyOp::key(&(i + 1).to_string())])
}

fn out_of_range(index: u32, n: usize) -> String {
    format!("option {index} is out of range: the prompt has {n} options (0 to {})", n.saturating_sub(1))
}

fn plan_keys(p: &PlanBody, a: &Answer) -> Result<Vec<KeyOp>, String> {
    match a {
        // The plan-file prompt's text row: the digit only focuses it.
        Answer::Option(i) if is_plan_file_prompt(p) && p.feedback_option == Some(*i) => {
            let mut ops = digit(*i, p.options.len())?;
            ops.push(KeyOp::key("Enter"));
            Ok(ops)
        }
        Answer::Option(i) => digit(*i, p.options.len()),
        Answer::Feedback((i, text)) if p.feedback_option == Some(*i) => feedback_keys(*i, p.options.len(), text),
        Answer::Feedback((i, _)) => Err(format!("option {i} of the plan prompt takes no feedback")),
        _ => Err("a plan takes one option (or feedback for the option that takes it)".into()),
    }
}

/// The row that takes text (by its digit), the text, Enter.
fn feedback_keys(i: u32, n: usize, text: &str) -> Result<Vec<KeyOp>, String> {
    check_free_text(text)?;
    let mut ops = digit(i, n)?;
    ops.extend([KeyOp::Literal(text.to_string()), KeyOp::key("Enter")]);
    Ok(ops)
}

fn permission_keys(p: &PermissionBody, a: &Answer) -> Result<Vec<KeyOp>, String> {
    let n = p.options.len();
    let is_no = |i: u32| i as usize + 1 == n;
    match a {
        // The No row is left with Escape: its number changes between releases (2.1.332
        // adds a row before it), Escape does not, and Escape never approves anything.
        Answer::Option(i) if is_no(*i) => Ok(vec![KeyOp::key("Escape")]),
        Answer::Option(i) => digit(*i, n),
        Answer::Feedback((i, text)) if p.feedback_option == Some(*i) && is_no(*i) => {
            check_free_text(text)?;
            Ok(vec![KeyOp::key("Escape"), KeyOp::Literal(text.to_string()), KeyOp::key("Enter")])
        }
        Answer::Feedback((i, text)) if p.feedback_option == Some(*i) => feedback_keys(*i, n, text),
        Answer::Feedback((i, _)) => Err(format!("option {i} of this permission prompt takes no feedback")),
        _ => Err("a permission prompt takes one option (or feedback for the option that takes it)".into()),
    }
}

fn question_keys(questions: &[Question], answers: &[Answer]) -> Result<Vec<KeyOp>, String> {
    if !supports(questions) {
        return Err(match questions {
            [q] if q.options.is_empty() => "this question has no options to choose from".into(),
            _ => "this question dialog is not answerable from lab; answer it in Claude Code".into(),
        });
    }
    if answers.len() != questions.len() {
        return Err(format!("expected exactly {} answer(s), one per question, got {}", questions.len(), answers.len()));
    }
    if let [q] = questions {
        return single_question_keys(q, &answers[0]);
    }
    let mut ops = Vec::new();
    for (k, (q, a)) in questions.iter().zip(answers).enumerate() {
        let n = q.options.len();
        let at = |e: String| format!("question {} ({:?}): {e}", k + 1, q.header);
        if q.multi_select {
            match a {
                Answer::Other(text) => {
                    check_free_text(text).map_err(at)?;
                    ops.extend(keys("Down", n));
                    ops.push(KeyOp::Literal(text.clone()));
                    ops.extend(keys("Down", 1));
                    ops.push(KeyOp::key("Enter"));
                }
                Answer::Option(i) => ops.extend(toggles(n, &[*i]).map_err(at)?),
                Answer::Options(picks) => ops.extend(toggles(n, picks).map_err(at)?),
                Answer::Feedback(_) => return Err(at("a question takes options or free text".into())),
            }
        } else {
            if k == 0 {
                ops.extend(clamp_to_bottom(n).chain(normalise(n)));
            }
            match a {
                Answer::Option(i) => {
                    if *i as usize >= n {
                        return Err(at(out_of_range(*i, n)));
                    }
                    ops.extend(keys("Down", *i as usize));
                    ops.push(KeyOp::key("Enter"));
                }
                Answer::Other(text) => {
                    check_free_text(text).map_err(at)?;
                    ops.extend(keys("Down", n));
                    ops.extend([KeyOp::Literal(text.clone()), KeyOp::key("Enter")]);
                }
                Answer::Options(_) => {
                    return Err(at("this question takes a single option (`option`), not several (`options`)".into()))
                }
                Answer::Feedback(_) => return Err(at("a question takes options or free text".into())),
            }
        }
    }
    ops.push(KeyOp::key("Enter")); // review screen: "Submit answers"
    Ok(ops)
}

fn single_question_keys(q: &Question, a: &Answer) -> Result<Vec<KeyOp>, String> {
    let n = q.options.len();
    if q.multi_select {
        let picks = match a {
            Answer::Options(v) => v.clone(),
            Answer::Option(i) => vec![*i],
            Answer::Other(text) => return multi_select_other_keys(n, text),
            Answer::Feedback(_) => return Err("a question takes options or free text".into()),
        };
        multi_select_keys(n, &picks)
    } else {
        match a {
            Answer::Option(i) => single_select_keys(n, *i),
            Answer::Other(text) => other_keys(n, text),
            Answer::Options(_) => Err("this question takes a single option (`option`), not several (`options`)".into()),
            Answer::Feedback(_) => Err("a question takes options or free text".into()),
        }
    }
}

/// In a tab of a multi-select question (cursor on option 1): toggle `picks`, then
/// `Enter` on row N + 1 ("Next" / "Submit").
fn toggles(n: usize, picks: &[u32]) -> Result<Vec<KeyOp>, String> {
    let sorted = check_picks(n, picks)?;
    let mut ops = Vec::new();
    let mut cursor = 0;
    for i in sorted {
        ops.extend(keys("Down", i - cursor));
        ops.push(KeyOp::key("Enter"));
        cursor = i;
    }
    ops.extend(keys("Down", n + 1 - cursor));
    ops.push(KeyOp::key("Enter"));
    Ok(ops)
}

fn check_picks(n: usize, picks: &[u32]) -> Result<Vec<usize>, String> {
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
            return Err(out_of_range(last as u32, n));
        }
    }
    Ok(sorted)
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
    let sorted = check_picks(n, picks)?;
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
        Dialog { answerable, ..Dialog::new("toolu_1", "AskUserQuestion", DialogBody::Question(questions)) }
    }

    fn answer_keys(d: &Dialog, answers: &[Answer]) -> Result<Vec<KeyOp>, String> {
        plan_answer(d, answers).map(|p| {
            assert_eq!((p.pause_ms, p.drawn_within_ms), (PAUSE_MS, DRAWN_WITHIN_MS));
            p.steps
        })
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
        let mut flagged_off = dialog(vec![question(2, false)]);
        flagged_off.answerable = false;
        assert!(answer_keys(&flagged_off, &[Answer::Option(0)]).unwrap_err().contains("not answerable"));

        let empty = dialog(vec![question(0, false)]);
        assert!(!empty.answerable);
        let mut forced = empty.clone();
        forced.answerable = true; // the host must not be able to talk us into it
        assert!(answer_keys(&forced, &[Answer::Option(0)]).unwrap_err().contains("no options"));
        let mut forced = dialog(vec![question(2, false), question(0, false)]);
        forced.answerable = true;
        assert!(answer_keys(&forced, &[Answer::Option(0), Answer::Option(0)]).is_err());
    }

    /// The several-question recipe, as played live into the 2.1.198 tabbed picker
    /// (testdata/live-0.2.0/ask3 and ask3b; the comment is the PostToolUse `answers`).
    #[test]
    fn several_questions_recipes_verified_live() {
        let q = |n: usize, multi: bool| question(n, multi);
        // ask3: {"Database": "MariaDB please", "Features": "Auth, Export", "Framework": "Actix"}
        let d = dialog(vec![q(2, false), q(3, true), q(2, false)]);
        assert!(d.answerable);
        let got =
            answer_keys(&d, &[Answer::Other("MariaDB please".into()), Answer::Options(vec![2, 0]), Answer::Option(1)])
                .unwrap();
        // Played from the opening position (without the leading climb): Down Down
        // 'MariaDB please' Enter | Enter Down Down Enter Down Down Enter | Down Enter | Enter.
        assert_eq!(
            show(&got),
            "Down Down Down Up Up Up Down Down 'MariaDB please' Enter Enter Down Down Enter Down Down Enter Down Enter Enter"
        );
        // ask3b, the cursor moved to option 2 first: {"Database": "Postgres",
        // "Extras": "Benchmarks", "Features": "Search"} (the last tab's row N + 1 is "Submit").
        let d = dialog(vec![q(2, false), q(2, true), q(3, true)]);
        let got = answer_keys(&d, &[Answer::Option(0), Answer::Other("Benchmarks".into()), Answer::Options(vec![1])])
            .unwrap();
        assert_eq!(
            show(&got),
            "Down Down Down Up Up Up Enter Down Down 'Benchmarks' Down Enter Down Enter Down Down Down Enter Enter"
        );
    }

    #[test]
    fn several_questions_refusals_name_the_question() {
        let d = dialog(vec![question(2, false), question(3, true)]);
        let err = answer_keys(&d, &[Answer::Option(0)]).unwrap_err();
        assert!(err.contains("exactly 2"), "{err}");
        let err = answer_keys(&d, &[Answer::Option(5), Answer::Option(0)]).unwrap_err();
        assert!(err.starts_with("question 1") && err.contains("out of range"), "{err}");
        let err = answer_keys(&d, &[Answer::Option(0), Answer::Options(vec![])]).unwrap_err();
        assert!(err.starts_with("question 2") && err.contains("at least one"), "{err}");
        let err = answer_keys(&d, &[Answer::Options(vec![0]), Answer::Option(0)]).unwrap_err();
        assert!(err.contains("single option"), "{err}");
        let err = answer_keys(&d, &[Answer::Option(0), Answer::Other("a\nb".into())]).unwrap_err();
        assert!(err.contains("one line"), "{err}");
        let err = answer_keys(&d, &[Answer::Feedback((0, "x".into())), Answer::Option(0)]).unwrap_err();
        assert!(err.contains("options or free text"), "{err}");
    }

    fn plan_dialog() -> Dialog {
        crate::dialog_mapper::map_dialog(crate::transcript::tool_use("toolu_p", "ExitPlanMode", r##"{"plan":"# P"}"##))
            .unwrap()
    }

    /// testdata/live-0.2.0/match (`1` approved with the cursor moved to "No") and
    /// planfb (`2`, the text, `Enter`: rejected, the text became the next prompt).
    #[test]
    fn plan_recipes_verified_live() {
        let d = plan_dialog();
        assert_eq!(show(&answer_keys(&d, &[Answer::Option(0)]).unwrap()), "1");
        assert_eq!(show(&answer_keys(&d, &[Answer::Option(1)]).unwrap()), "2");
        assert_eq!(
            show(&answer_keys(&d, &[Answer::Feedback((1, "add a test first".into()))]).unwrap()),
            "2 'add a test first' Enter"
        );
        assert!(answer_keys(&d, &[Answer::Option(2)]).unwrap_err().contains("out of range"));
        assert!(answer_keys(&d, &[Answer::Feedback((0, "x".into()))]).unwrap_err().contains("no feedback"));
        assert!(answer_keys(&d, &[Answer::Feedback((1, " ".into()))]).unwrap_err().contains("empty"));
        assert!(answer_keys(&d, &[]).unwrap_err().contains("exactly 1"));
        assert!(answer_keys(&d, &[Answer::Options(vec![0])]).is_err());
    }

    /// 2.1.332 drops a key sent the moment its plan picker shows: a plan prompt must be
    /// drawn and still for PLAN_SETTLE_MS first; every other prompt is answered at once.
    #[test]
    fn a_plan_prompt_settles_before_its_first_key_and_no_other_does() {
        let p = plan_answer(&plan_dialog(), &[Answer::Option(0)]).unwrap();
        assert_eq!(p.settle_ms, PLAN_SETTLE_MS);
        const { assert!(PLAN_SETTLE_MS >= 300, "0.3 s after the picker showed is the earliest a key landed") };
        let q = dialog(vec![question(3, false)]);
        assert_eq!(plan_answer(&q, &[Answer::Option(1)]).unwrap().settle_ms, 0);
    }

    /// The plan-file prompt: richA (cursor moved to row 2, then `1`: approved, auto
    /// mode), richB (`2`: approved, default mode), richC (`3 Enter`: rejected),
    /// richplan (`3`, text, `Enter`: rejected with the text in the tool_result).
    #[test]
    fn plan_file_prompt_recipes_verified_live() {
        let d = crate::dialog_mapper::map_dialog(crate::transcript::tool_use(
            "toolu_p",
            "ExitPlanMode",
            r##"{"plan":"# P","planFilePath":"/h/.claude/plans/p.md"}"##,
        ))
        .unwrap();
        assert_eq!(show(&answer_keys(&d, &[Answer::Option(0)]).unwrap()), "1");
        assert_eq!(show(&answer_keys(&d, &[Answer::Option(1)]).unwrap()), "2");
        assert_eq!(show(&answer_keys(&d, &[Answer::Option(2)]).unwrap()), "3 Enter");
        assert_eq!(
            show(&answer_keys(&d, &[Answer::Feedback((2, "add a test first".into()))]).unwrap()),
            "3 'add a test first' Enter"
        );
        assert!(answer_keys(&d, &[Answer::Feedback((1, "x".into()))]).unwrap_err().contains("no feedback"));
        assert!(answer_keys(&d, &[Answer::Option(3)]).unwrap_err().contains("out of range"));
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
