//! The one dialog mapper: a Claude Code tool call → a lab [`Dialog`].
//!
//! Used for every source of a pending question or plan — a `tool_use` block in the
//! transcript and the PreToolUse hook spool — so they always agree. The dialog's `id`
//! and `call_id` are both the tool_use id.
//!
//! - `AskUserQuestion` with input
//!   `{"questions": [{"question", "header", "options": [{"label", "description"}], "multiSelect"}]}`
//!   → a question dialog. It is answerable (see [`crate::keystrokes`]) when every
//!   question has at least one option. `header`, `description` and `multiSelect` may be
//!   missing (→ `""`, `""`, `false`); `question`, `options` and each option's `label`
//!   are required.
//! - `ExitPlanMode` → a plan dialog with the options 2.1.198 draws
//!   (docs/providers/claude-code/compat.md §7c). Two prompts:
//!   - a plan file was written (Claude Code puts `plan` — the file's text — and
//!     `planFilePath` into the input): "Ready to code? … Would you like to proceed?",
//!     rows `Yes, and use auto mode`, `Yes, manually approve edits`, `Tell Claude what
//!     to change`; row 3 is a text field (the feedback option);
//!   - no plan file (`plan` only from the model, no `planFilePath`): "Exit plan
//!     mode?", rows `Yes`, `No`; "No" takes feedback (lab types it as the operator's
//!     next message, which is what the TUI asks for after a rejected plan).
//!
//!   An input object without `plan` still maps to a plan dialog (with no plan text).
//! - Any other tool → `None`. Input that is not JSON, or has the wrong shape for a
//!   dialog tool → `None` (never a panic).
//!
//! `deep_link` is always `None`: there is no link that opens a local session's dialog.

use lab_provider_sdk::{Dialog, DialogBody, DialogOption, PlanBody, Question, ToolUse};
use serde_json::Value;

use crate::keystrokes;

pub const ASK_USER_QUESTION: &str = "AskUserQuestion";
pub const EXIT_PLAN_MODE: &str = "ExitPlanMode";

/// The label of the text row of the plan-file prompt (drawn as its placeholder).
pub const PLAN_FEEDBACK_ROW: &str = "Tell Claude what to change";

/// The options of the ExitPlanMode prompt as 2.1.198 draws them, and the one that
/// takes feedback: the plan-file prompt when `plan_file` (see the module docs).
pub fn plan_options(plan_file: bool) -> (Vec<DialogOption>, Option<u32>) {
    if plan_file {
        return (
            vec![
                DialogOption::new(
                    "Yes, and use auto mode",
                    "Approve; Claude Code goes on in auto mode (where auto mode is unavailable this row reads \"Yes, auto-accept edits\")",
                ),
                DialogOption::new("Yes, manually approve edits", "Approve; every edit still asks"),
                DialogOption::new(PLAN_FEEDBACK_ROW, "No, keep planning: your text goes back to Claude"),
            ],
            Some(2),
        );
    }
    (
        vec![
            DialogOption::new("Yes", "Approve the plan and leave plan mode"),
            DialogOption::new("No", "Keep planning; with feedback, lab sends it as your next message"),
        ],
        Some(1),
    )
}

/// Whether a plan dialog is the plan-file prompt (its rows 1–2 are picked with digits,
/// its row 3 is a text field in which digits are text).
pub fn is_plan_file_prompt(p: &PlanBody) -> bool {
    p.feedback_option.and_then(|i| p.options.get(i as usize)).is_some_and(|o| o.label == PLAN_FEEDBACK_ROW)
}

/// Map a tool call to the dialog it opens, if it is one.
pub fn map_dialog(call: ToolUse) -> Option<Dialog> {
    let body = dialog_body(&call.name, &call.input_json)?;
    let answerable = match &body {
        DialogBody::Question(qs) => keystrokes::supports(qs),
        _ => true,
    };
    Some(Dialog { call_id: Some(call.id.clone()), answerable, ..Dialog::new(call.id, call.name, body) })
}

/// The body of the dialog a dialog tool's input shows, or `None`.
pub fn dialog_body(name: &str, input_json: &str) -> Option<DialogBody> {
    match name {
        ASK_USER_QUESTION => {
            let input: Value = serde_json::from_str(input_json).ok()?;
            Some(DialogBody::Question(questions(&input)?))
        }
        EXIT_PLAN_MODE => {
            let input: Value = serde_json::from_str(input_json).ok()?;
            let obj = input.as_object()?;
            let plan = match obj.get("plan") {
                None | Some(Value::Null) => None,
                Some(Value::String(s)) => Some(s.clone()),
                Some(_) => return None,
            };
            let file = obj.get("planFilePath").and_then(Value::as_str).filter(|f| !f.is_empty());
            let (options, feedback_option) = plan_options(file.is_some());
            // A release whose payload names the plan file without the text (2.1.332): the
            // host reads the file (WIT plan-body.plan-file).
            let plan_file = file.filter(|_| plan.is_none()).map(str::to_string);
            Some(DialogBody::Plan(PlanBody { plan, options, feedback_option, plan_file }))
        }
        _ => None,
    }
}

/// The questions of an AskUserQuestion input, or `None` if the shape is wrong.
fn questions(input: &Value) -> Option<Vec<Question>> {
    let list = input.get("questions")?.as_array()?;
    if list.is_empty() {
        return None;
    }
    list.iter().map(question).collect()
}

fn question(q: &Value) -> Option<Question> {
    let q = q.as_object()?;
    let options = q
        .get("options")?
        .as_array()?
        .iter()
        .map(|o| {
            let o = o.as_object()?;
            Some(DialogOption {
                label: o.get("label")?.as_str()?.to_string(),
                description: opt_str(o.get("description"))?,
            })
        })
        .collect::<Option<Vec<_>>>()?;
    let multi_select = match q.get("multiSelect") {
        None | Some(Value::Null) => false,
        Some(v) => v.as_bool()?,
    };
    Some(Question {
        header: opt_str(q.get("header"))?,
        question: q.get("question")?.as_str()?.to_string(),
        multi_select,
        options,
    })
}

/// An optional string field: missing or null → `""`, a string → itself, else `None`.
fn opt_str(v: Option<&Value>) -> Option<String> {
    match v {
        None | Some(Value::Null) => Some(String::new()),
        Some(Value::String(s)) => Some(s.clone()),
        Some(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(name: &str, input: &str) -> ToolUse {
        crate::transcript::tool_use("toolu_01ABC", name, input)
    }

    const ONE: &str = r#"{"questions":[{"question":"Which database should we use?","header":"Database",
        "options":[{"label":"PostgreSQL","description":"Relational, strong consistency"},
                   {"label":"SQLite","description":"Embedded, zero setup"},
                   {"label":"MongoDB","description":"Document store"}],"multiSelect":false}]}"#;

    #[test]
    fn one_question_is_answerable_with_labels_and_descriptions() {
        let d = map_dialog(call("AskUserQuestion", ONE)).unwrap();
        assert_eq!(d.id, "toolu_01ABC");
        assert_eq!(d.call_id.as_deref(), Some("toolu_01ABC"));
        assert_eq!(d.tool_name, "AskUserQuestion");
        assert_eq!(d.kind(), "question");
        assert!(d.answerable);
        assert_eq!(d.deep_link, None);
        assert_eq!(d.questions().len(), 1);
        let q = &d.questions()[0];
        assert_eq!(q.header, "Database");
        assert_eq!(q.question, "Which database should we use?");
        assert!(!q.multi_select);
        let labels: Vec<_> = q.options.iter().map(|o| o.label.as_str()).collect();
        assert_eq!(labels, ["PostgreSQL", "SQLite", "MongoDB"]);
        assert_eq!(q.options[1].description, "Embedded, zero setup");
    }

    #[test]
    fn two_questions_are_shown_and_answerable() {
        let input = r#"{"questions":[
            {"question":"Which database?","header":"Database","options":[{"label":"PostgreSQL","description":"a"},{"label":"SQLite","description":"b"}],"multiSelect":false},
            {"question":"Which framework?","header":"Framework","options":[{"label":"Axum","description":"c"},{"label":"Actix","description":"d"}],"multiSelect":false}]}"#;
        let d = map_dialog(call("AskUserQuestion", input)).unwrap();
        assert!(d.answerable);
        assert_eq!(d.questions().len(), 2);
        assert_eq!(d.questions()[1].header, "Framework");
        assert_eq!(d.questions()[1].options[0].label, "Axum");
        assert_eq!(d.questions()[1].options[1].description, "d");
    }

    #[test]
    fn multi_select_single_question_is_shown_and_answerable_per_recipe() {
        let input = r#"{"questions":[{"question":"Which features?","header":"Features",
            "options":[{"label":"Auth","description":"x"},{"label":"Billing","description":"y"}],"multiSelect":true}]}"#;
        let d = map_dialog(call("AskUserQuestion", input)).unwrap();
        assert!(d.questions()[0].multi_select);
        assert_eq!(d.answerable, keystrokes::MULTI_SELECT_ANSWERABLE);
    }

    #[test]
    fn optional_fields_default() {
        let d = map_dialog(call(
            "AskUserQuestion",
            r#"{"questions":[{"question":"Q?","options":[{"label":"A"},{"label":"B"}]}]}"#,
        ))
        .unwrap();
        assert!(d.answerable);
        assert_eq!(d.questions()[0].header, "");
        assert_eq!(d.questions()[0].options[0].description, "");
        assert!(!d.questions()[0].multi_select);
    }

    #[test]
    fn no_options_is_shown_but_not_answerable() {
        let d = map_dialog(call("AskUserQuestion", r#"{"questions":[{"question":"Q?","options":[]}]}"#)).unwrap();
        assert!(!d.answerable);
    }

    #[test]
    fn exit_plan_mode_carries_the_plan() {
        let d = map_dialog(call("ExitPlanMode", r##"{"plan":"# Plan\n\n1. Add the table\n2. Migrate"}"##)).unwrap();
        assert_eq!(d.kind(), "plan");
        assert!(d.answerable);
        assert_eq!((d.id.as_str(), d.call_id.as_deref()), ("toolu_01ABC", Some("toolu_01ABC")));
        let DialogBody::Plan(p) = &d.body else { panic!("{d:?}") };
        assert_eq!(p.plan.as_deref(), Some("# Plan\n\n1. Add the table\n2. Migrate"));
        let labels: Vec<_> = p.options.iter().map(|o| o.label.as_str()).collect();
        assert_eq!(labels, ["Yes", "No"]);
        assert_eq!(p.feedback_option, Some(1));
        assert_eq!(d.deep_link, None);
        let d = map_dialog(call("ExitPlanMode", "{}")).unwrap();
        let DialogBody::Plan(p) = &d.body else { panic!("{d:?}") };
        assert_eq!(p.plan, None);
        assert!(!is_plan_file_prompt(p));
    }

    /// The input 2.1.198 gives hooks and the transcript when a plan file was written
    /// (testdata/live-0.2.0/richplan).
    #[test]
    fn exit_plan_mode_with_a_plan_file_has_the_plan_file_prompt() {
        let input =
            r##"{"plan":"# Hello plan\n\n1. Add a `hello` function.\n","planFilePath":"/h/.claude/plans/p.md"}"##;
        let d = map_dialog(call("ExitPlanMode", input)).unwrap();
        let DialogBody::Plan(p) = &d.body else { panic!("{d:?}") };
        assert!(is_plan_file_prompt(p));
        assert_eq!(p.plan.as_deref(), Some("# Hello plan\n\n1. Add a `hello` function.\n"));
        let labels: Vec<_> = p.options.iter().map(|o| o.label.as_str()).collect();
        assert_eq!(labels, ["Yes, and use auto mode", "Yes, manually approve edits", "Tell Claude what to change"]);
        assert_eq!(p.feedback_option, Some(2));
        assert_eq!(p.plan_file, None, "the text came with the payload");
    }

    /// 2.1.332: the payload names the plan file but carries no text; the host reads it.
    #[test]
    fn exit_plan_mode_without_the_text_names_the_plan_file() {
        let d = map_dialog(call("ExitPlanMode", r#"{"planFilePath":"/h/.claude/plans/p.md"}"#)).unwrap();
        let DialogBody::Plan(p) = &d.body else { panic!("{d:?}") };
        assert_eq!((p.plan.as_deref(), p.plan_file.as_deref()), (None, Some("/h/.claude/plans/p.md")));
        assert!(is_plan_file_prompt(p));
    }

    #[test]
    fn unknown_tools_are_not_dialogs() {
        assert!(map_dialog(call("Bash", r#"{"command":"ls"}"#)).is_none());
        assert!(map_dialog(call("askuserquestion", ONE)).is_none());
        assert!(map_dialog(call("", "")).is_none());
    }

    #[test]
    fn malformed_input_is_none() {
        for bad in [
            "",
            "not json",
            "[]",
            "null",
            r#"{"questions":"nope"}"#,
            r#"{"questions":[]}"#,
            r#"{"questions":[42]}"#,
            r#"{"questions":[{"header":"no question","options":[]}]}"#,
            r#"{"questions":[{"question":"Q?"}]}"#,
            r#"{"questions":[{"question":"Q?","options":[{"description":"no label"}]}]}"#,
            r#"{"questions":[{"question":"Q?","options":[{"label":7}]}]}"#,
            r#"{"questions":[{"question":"Q?","options":[{"label":"A"}],"multiSelect":"yes"}]}"#,
            r#"{"questions":[{"question":"Q?","header":3,"options":[{"label":"A"}]}]}"#,
        ] {
            assert!(map_dialog(call("AskUserQuestion", bad)).is_none(), "{bad}");
        }
        for bad in ["", "[1]", "\"plan\"", r#"{"plan":42}"#] {
            assert!(map_dialog(call("ExitPlanMode", bad)).is_none(), "{bad}");
        }
    }
}
