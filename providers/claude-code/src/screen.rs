//! Reading the pane (docs/providers/claude-code/compat.md §7e, §10): whether a dialog is
//! drawn and ready for keys, and the prompts no hook announces.
//!
//! Pane text is compared with **all whitespace removed** on both sides, so a line the
//! TUI wrapped at the pane's width (or indented differently) still matches. Captures:
//! `testdata/live-0.2.0/panes/`.
//!
//! ## Drawn signals (2.1.198)
//!
//! | dialog | on screen |
//! |---|---|
//! | question | the first question's text, its first option's label, and the picker footer `Enter to select` |
//! | plan | `Exit plan mode?` and `1. Yes`; with a plan file `Would you like to proceed?` and `2. Yes, manually approve edits`, the cursor not in the text row (`❯ 3.`: digits would be typed there) |
//! | permission | `Do you want` (Bash: `…to proceed?`, Write: `…to create <file>?`, Edit: `…to make this edit to <file>?`, WebFetch: `…to allow Claude to fetch this content?`), `1. Yes`, and the call: the command's start, the file's name or the URL |
//! | generic (trust) | `Yes, I trust this folder` and `Enter to confirm` |
//!
//! ## The workspace-trust screen
//!
//! Claude Code shows it before anything else — before any hook runs — in a folder its
//! config has not marked trusted (`projects.<dir>.hasTrustDialogAccepted`):
//!
//! ```text
//!  Accessing workspace:
//!
//!  /work/lab-live/runs/trust/work
//!
//!  Quick safety check: Is this a project you created or one you trust? (…)
//!
//!  Claude Code'll be able to read, edit, and execute files here.
//!
//!  Security guide
//!
//!  ❯ 1. Yes, I trust this folder
//!    2. No, exit
//!
//!  Enter to confirm · Esc to cancel
//! ```
//!
//! [`read_screen`] turns it into a generic dialog answered with the digit keys (`1`
//! trusted the folder and the run went on with its prompt; `2` made Claude Code exit).

use lab_provider_sdk::{Dialog, DialogBody, DialogOption, GenericBody};

/// The tool name of the workspace-trust dialog (no tool: the screen's name).
pub const TRUST_SCREEN: &str = "workspace-trust";

const TRUST_YES: &str = "Yes, I trust this folder";
const TRUST_NO: &str = "No, exit";
const TRUST_HEAD: &str = "Accessing workspace:";
const TRUST_FOOTER: &str = "Enter to confirm";
/// The id prefix of the trust screen as 2.1.332 draws it: "No, exit" first and
/// selected, then "Yes, I trust this folder", no numbers (digits do nothing; Down and
/// Up wrap between the two rows).
pub const TRUST_LIST_ID: &str = "trust-list-";

/// Whether a trust dialog was read from 2.1.332's unnumbered list (see [`TRUST_LIST_ID`]).
pub fn is_trust_list(dialog: &Dialog) -> bool {
    dialog.tool_name == TRUST_SCREEN && dialog.id.starts_with(TRUST_LIST_ID)
}

/// Characters of a summary or question matched at most (a long one may be cut or
/// wrapped oddly on screen; its start is enough to tell prompts apart).
const NEEDLE_CHARS: usize = 40;

fn squash(s: &str) -> String {
    s.chars().filter(|c| !c.is_whitespace()).collect()
}

/// Whether the squashed pane contains the start of `needle` (squashed).
fn shows(pane: &str, needle: &str) -> bool {
    let n: String = squash(needle).chars().take(NEEDLE_CHARS).collect();
    pane.contains(&n)
}

/// The part of the pane below the last full rule (`────…`): where Claude Code draws a
/// permission or plan prompt, without the history above it (which still shows earlier
/// calls). The whole pane if there is no rule.
fn below_last_rule(pane: &str) -> &str {
    let mut start = 0;
    let mut offset = 0;
    for line in pane.split_inclusive('\n') {
        offset += line.len();
        let t = line.trim();
        if t.chars().count() >= 10 && t.chars().all(|c| c == '─') {
            start = offset;
        }
    }
    &pane[start..]
}

/// Whether `pane` shows `dialog` ready for keys.
pub fn is_drawn(dialog: &Dialog, pane: &str) -> bool {
    let p = match &dialog.body {
        DialogBody::Permission(_) | DialogBody::Plan(_) => squash(below_last_rule(pane)),
        _ => squash(pane),
    };
    match &dialog.body {
        DialogBody::Question(qs) => {
            let Some(q) = qs.first() else { return false };
            shows(&p, "Enter to select")
                && shows(&p, &q.question)
                && q.options.first().is_none_or(|o| shows(&p, &o.label))
        }
        DialogBody::Plan(plan) if crate::dialog_mapper::is_plan_file_prompt(plan) => {
            shows(&p, "Would you like to proceed?")
                && plan.options.get(1).is_some_and(|o| shows(&p, &format!("2. {}", o.label)))
                && !p.contains("❯3.")
        }
        DialogBody::Plan(_) => shows(&p, "Exit plan mode?") && shows(&p, "1. Yes"),
        DialogBody::Permission(perm) => {
            shows(&p, "Do you want")
                && shows(&p, "1. Yes")
                && call_shown(&p, &perm.tool, &perm.summary)
                && rows_as_numbered(&p, &perm.options)
        }
        // 2.1.332's list: drawn for keys only with the cursor where it opens, on "No,
        // exit" (the recipe counts from there; Down and Up wrap).
        DialogBody::Generic(_) if is_trust_list(dialog) => {
            shows(&p, &format!("❯ {TRUST_NO}")) && shows(&p, TRUST_YES) && shows(&p, TRUST_FOOTER)
        }
        DialogBody::Generic(g) => {
            dialog.tool_name == TRUST_SCREEN
                && g.options.first().is_some_and(|o| shows(&p, &o.label))
                && shows(&p, TRUST_FOOTER)
        }
    }
}

/// Words of a row's label compared with the screen: enough to tell "Yes, and always
/// allow…" from "Yes, and switch to auto mode…", few enough that the part a release
/// words differently (2.1.198 draws a folder as `work/`, 2.1.332 as its full path) is
/// left out.
const ROW_WORDS: usize = 3;

/// Whether the squashed pane numbers the prompt's rows as the answer plan needs them:
/// every row before lab's last ("Yes", "Yes, and always allow…", "Yes, allow all
/// edits…") at its own number (row `i + 1` starts with the first [`ROW_WORDS`] words of
/// option `i`: those rows are picked by digit), and lab's last row — "No", answered
/// with Escape, whatever its number — the last numbered row on screen. Rows the agent
/// adds between them are not offered (2.1.332's "3. Yes, and switch to auto mode"
/// before "4. No"). A prompt numbered any other way is not answered from lab at all
/// (nothing is typed): a digit must never land on a row lab did not mean.
fn rows_as_numbered(p: &str, options: &[lab_provider_sdk::DialogOption]) -> bool {
    let Some((last, picked)) = options.split_last() else { return false };
    let stem = |label: &str| label.split_whitespace().take(ROW_WORDS).collect::<Vec<_>>().join(" ");
    let row_shown = |n: usize, words: &str| shows(p, &format!("{n}. {words}"));
    if !picked.iter().enumerate().all(|(i, o)| row_shown(i + 1, &stem(&o.label))) {
        return false;
    }
    // The last numbered row: the first n past lab's picked rows with no row after it.
    let numbered = |n: usize| ["Yes", "No"].iter().any(|w| row_shown(n, w));
    let Some(end) = (picked.len() + 1..=9).find(|&n| numbered(n) && !numbered(n + 1)) else { return false };
    last.label.starts_with("No") && row_shown(end, &stem(&last.label))
}

/// Whether the squashed pane shows the call a permission dialog is about.
fn call_shown(p: &str, tool: &str, summary: &str) -> bool {
    let first = summary.lines().next().unwrap_or_default();
    match tool {
        "Bash" | "WebFetch" => shows(p, first),
        "Edit" | "Write" | "MultiEdit" | "NotebookEdit" => {
            let path = first.split(" (+").next().unwrap_or(first);
            shows(p, path.rsplit('/').next().unwrap_or(path))
        }
        // The prompt shows the input in the tool's own way; the question is enough.
        _ => true,
    }
}

/// The prompt the pane shows that no hook announced, if any: the workspace-trust
/// screen.
pub fn read_screen(pane: &str) -> Option<Dialog> {
    let lines: Vec<&str> = pane.lines().map(str::trim_end).collect();
    let head = lines.iter().position(|l| l.trim() == TRUST_HEAD)?;
    // The options: "1. Yes…" then "2. No…" (2.1.198), or "No, exit" then "Yes, I
    // trust this folder" with no numbers (2.1.332).
    let row = |l: &str| l.trim().trim_start_matches('❯').trim().to_string();
    let numbered = lines.iter().skip(head).position(|l| l.contains(&format!("1. {TRUST_YES}"))).map(|i| i + head);
    let (first, list) = match numbered {
        Some(yes) if lines.get(yes + 1).is_some_and(|l| l.contains(&format!("2. {TRUST_NO}"))) => (yes, false),
        Some(_) => return None,
        None => {
            let no = lines.iter().skip(head).position(|l| row(l) == TRUST_NO)? + head;
            if lines.get(no + 1).is_none_or(|l| row(l) != TRUST_YES) {
                return None;
            }
            (no, true)
        }
    };
    let end = lines.iter().skip(first).position(|l| l.trim_start().starts_with(TRUST_FOOTER)).map(|i| i + first)?;
    let folder = lines[head + 1..first].iter().map(|l| l.trim()).find(|l| l.starts_with('/')).unwrap_or_default();
    // The screen's text from the heading to the footer, without the frame's indent
    // and with runs of blank lines collapsed.
    let mut text = String::new();
    let mut blank = false;
    for l in &lines[head..=end] {
        let l = l.trim();
        let l = l.strip_prefix('❯').map_or(l, str::trim_start);
        if l.is_empty() {
            blank = !text.is_empty();
            continue;
        }
        if blank {
            text.push('\n');
            blank = false;
        }
        text.push_str(l);
        text.push('\n');
    }
    let body = GenericBody {
        title: if folder.is_empty() { "Trust this folder?".into() } else { format!("Trust {folder}?") },
        text: text.trim_end().to_string(),
        options: vec![
            DialogOption::new(TRUST_YES, "Let Claude Code read, edit and run files here; the run goes on"),
            DialogOption::new(TRUST_NO, "Claude Code exits and the run ends"),
        ],
    };
    let id = format!(
        "{}{:016x}",
        if list { TRUST_LIST_ID } else { "trust-" },
        folder.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| { (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3) })
    );
    Some(Dialog::new(id, TRUST_SCREEN, DialogBody::Generic(body)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{dialog_mapper, spool};
    use serde_json::Value;

    fn pane(name: &str) -> String {
        let path = format!("{}/testdata/live-0.2.0/panes/{name}.txt", env!("CARGO_MANIFEST_DIR"));
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
    }

    /// The dialog lab's spool gives for the first `hook` payload of `tool` in a live run.
    fn spooled(run: &str, hook: &str, tool: &str) -> Dialog {
        spooled_as(run, hook, tool, 0)
    }

    /// … for the `nth` such payload.
    fn spooled_as(run: &str, hook: &str, tool: &str, nth: usize) -> Dialog {
        let path = format!("{}/testdata/live-0.2.0/{run}/hooks.jsonl", env!("CARGO_MANIFEST_DIR"));
        let v = std::fs::read_to_string(&path)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .filter(|v| v["hook"] == hook && v["payload"]["tool_name"] == tool)
            .nth(nth)
            .unwrap();
        spool::pending_dialog(v["payload"].to_string().as_bytes(), &[]).unwrap().unwrap()
    }

    #[test]
    fn questions_are_drawn_when_their_picker_is() {
        let d = spooled("ask3", "PreToolUse", "AskUserQuestion");
        assert!(is_drawn(&d, &pane("ask3-q1")));
        assert!(is_drawn(&d, &pane("ask3-q1-typed")), "typing in the Other row keeps the picker");
        assert!(!is_drawn(&d, &pane("ask3-q2")), "the second tab is not the opening position");
        assert!(!is_drawn(&d, &pane("ask3-review")));
        assert!(!is_drawn(&d, &pane("ask3-after")), "answered: the question is in the history, the picker gone");
        assert!(!is_drawn(&d, &pane("perm-bash-1")));
        let d = spooled("ask3b", "PreToolUse", "AskUserQuestion");
        assert!(is_drawn(&d, &pane("ask3b-q1")));
        assert!(!is_drawn(&d, &pane("ask3b-review")));
    }

    #[test]
    fn a_question_wrapped_at_a_narrow_width_still_matches() {
        let d = spooled("ask3", "PreToolUse", "AskUserQuestion");
        let narrow = pane("ask3-q1").replace("Which database should", "Which database\n   should");
        assert!(is_drawn(&d, &narrow));
    }

    #[test]
    fn plans_are_drawn_when_the_exit_prompt_is() {
        let d = spooled("plan", "PreToolUse", "ExitPlanMode");
        assert!(is_drawn(&d, &pane("plan-1")));
        assert!(is_drawn(&d, &pane("plan-no-tab")), "the cursor on No: still the prompt");
        assert!(is_drawn(&d, &pane("plan-2-before")));
        assert!(!is_drawn(&d, &pane("plan-after-no")));
        assert!(!is_drawn(&d, &pane("match-after-plan1")));
        assert!(!is_drawn(&d, &pane("perm-bash-1")));
    }

    #[test]
    fn plan_file_prompts_are_drawn_unless_the_cursor_is_in_the_text_row() {
        let d = spooled("richA", "PreToolUse", "ExitPlanMode");
        assert!(crate::dialog_mapper::is_plan_file_prompt(match &d.body {
            DialogBody::Plan(p) => p,
            _ => panic!(),
        }));
        assert!(is_drawn(&d, &pane("richA-before")));
        assert!(is_drawn(&d, &pane("plan-rich-1")));
        assert!(!is_drawn(&d, &pane("richplan1-after")), "cursor in the text row");
        assert!(!is_drawn(&d, &pane("plan-rich-typed")), "text typed in the text row");
        assert!(!is_drawn(&d, &pane("richA-after")));
        assert!(!is_drawn(&d, &pane("plan-1")), "the no-plan-file prompt is another one");
        let simple = spooled("plan", "PreToolUse", "ExitPlanMode");
        assert!(!is_drawn(&simple, &pane("plan-rich-1")));
    }

    #[test]
    fn permissions_are_drawn_when_their_own_prompt_is() {
        let one = spooled("bash", "PermissionRequest", "Bash");
        assert!(is_drawn(&one, &pane("perm-bash-1")));
        assert!(!is_drawn(&one, &pane("perm-bash-2")), "the next call's prompt is not this one");
        assert!(!is_drawn(&one, &pane("perm-bash-after-no")));
        assert!(!is_drawn(&one, &pane("ask3-q1")));
        let make = spooled("bash2", "PermissionRequest", "Bash");
        assert!(is_drawn(&make, &pane("perm-bash-make")));
        let write = spooled("perm2", "PermissionRequest", "Write");
        assert!(is_drawn(&write, &pane("perm-write")));
        assert!(!is_drawn(&write, &pane("perm-bash-b")));
        let edit = spooled("perm2", "PermissionRequest", "Edit");
        assert!(is_drawn(&edit, &pane("perm-edit")));
        let fetch = spooled("perm2", "PermissionRequest", "WebFetch");
        assert!(is_drawn(&fetch, &pane("perm-webfetch")));
        assert!(!is_drawn(&fetch, &pane("perm-webfetch-after3")));
        assert!(!is_drawn(&fetch, &pane("perm-edit")));
        // The final run (the exact hook document): two Bash prompts one after the other.
        let two = spooled_as("final", "PermissionRequest:dialog-spool", "Bash", 1);
        assert!(is_drawn(&two, &pane("final-bash-two")));
        assert!(!is_drawn(&two, &pane("final-bash-one")));
        assert!(!is_drawn(&two, &pane("final-end")));
        let ask = spooled_as("final", "PreToolUse:dialog-spool", "AskUserQuestion", 0);
        assert!(is_drawn(&ask, &pane("final-ask")));
        assert!(!is_drawn(&ask, &pane("final-bash-one")));
    }

    /// 2.1.332 (panes captured from the real binary): "No, exit" first and selected, no
    /// numbers. Read as the same two options; drawn only with the cursor on "No, exit";
    /// Yes is Down, Enter (verified live: the folder was trusted and the run went on).
    #[test]
    fn the_2_1_332_trust_list_is_read_drawn_and_answered() {
        let d = read_screen(&pane("trust-2.1.332-open")).expect("the 2.1.332 trust screen is recognised");
        assert!(d.id.starts_with(TRUST_LIST_ID) && is_trust_list(&d) && d.answerable, "{d:?}");
        let DialogBody::Generic(g) = &d.body else { panic!("{d:?}") };
        assert_eq!(g.title, "Trust /tmp/lab-trust332/work?");
        assert!(g.text.contains("No, exit\nYes, I trust this folder\n\nEnter to confirm"), "{}", g.text);
        let labels: Vec<_> = g.options.iter().map(|o| o.label.as_str()).collect();
        assert_eq!(labels, ["Yes, I trust this folder", "No, exit"]);
        assert!(is_drawn(&d, &pane("trust-2.1.332-open")));
        assert!(!is_drawn(&d, &pane("trust-2.1.332-on-yes")), "the cursor moved: the recipe would be wrong");
        assert!(!is_drawn(&d, &pane("trust-2.1.332-after")));
        assert_eq!(read_screen(&pane("trust-2.1.332-on-yes")).unwrap().id, d.id, "one dialog while shown");
        assert!(read_screen(&pane("trust-2.1.332-after")).is_none());
        let keys = |i| crate::keystrokes::plan_answer(&d, &[lab_provider_sdk::Answer::Option(i)]).map(|p| p.steps);
        assert_eq!(keys(0).unwrap(), [lab_provider_sdk::KeyOp::key("Down"), lab_provider_sdk::KeyOp::key("Enter")]);
        assert_eq!(keys(1).unwrap(), [lab_provider_sdk::KeyOp::key("Enter")]);
        assert!(keys(2).is_err());
        // The 2.1.198 screen is still the numbered one.
        assert!(!is_trust_list(&read_screen(&pane("trust-screen")).unwrap()));
    }

    /// 2.1.332 when the model writes its plan into the plan file it is told of and then
    /// calls ExitPlanMode with no input (`testdata/real-2.1.332/exit-plan-mode-plan-file`,
    /// the real binary): the hook payload carries the file's text and path as on
    /// 2.1.198, so the card has the plan and the plan-file prompt's rows; the prompt is
    /// drawn on the captured screen; lab's keys for "Yes, manually approve edits" are the
    /// ones played there (after which Claude Code left plan mode for "default").
    #[test]
    fn a_2_1_332_plan_written_to_its_file_is_shown_with_its_text_and_answered() {
        let dir = format!("{}/testdata/real-2.1.332/exit-plan-mode-plan-file", env!("CARGO_MANIFEST_DIR"));
        let read = |f: &str| std::fs::read_to_string(format!("{dir}/{f}")).unwrap();
        let hooks: Vec<Value> = read("hooks.jsonl").lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        let pre = hooks.iter().find(|v| v["hook"] == "PreToolUse").unwrap();
        let d = spool::pending_dialog(pre["payload"].to_string().as_bytes(), &[]).unwrap().unwrap();
        let DialogBody::Plan(p) = &d.body else { panic!("{d:?}") };
        assert_eq!(p.plan.as_deref(), Some("# Plan\n\n1. Add a `hello` function.\n2. Write a test for it.\n"));
        assert!(dialog_mapper::is_plan_file_prompt(p), "{p:?}");
        assert_eq!(p.plan_file, None, "the text came with the payload");
        assert!(is_drawn(&d, &read("screen-while-pending.txt")));
        let played: Vec<String> = read("keys.jsonl")
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap()["key"].as_str().unwrap().to_string())
            .collect();
        let plan = crate::keystrokes::plan_answer(&d, &[lab_provider_sdk::Answer::Option(1)]).unwrap();
        assert_eq!(plan.steps, played.iter().map(|k| lab_provider_sdk::KeyOp::key(k)).collect::<Vec<_>>());
        let stop = hooks.iter().find(|v| v["hook"] == "Stop").unwrap();
        assert_eq!(stop["payload"]["permission_mode"], "default");
    }

    /// 2.1.332's trust screen for a folder whose own `.claude/settings.json` pre-approves
    /// tools, adds directories and declares hooks (pane captured from the real binary):
    /// the warnings are between the text and the list. The card carries them, so the
    /// operator reads what trusting turns on; drawn and answered as the plain list.
    #[test]
    fn a_2_1_332_trust_screen_with_the_folder_s_own_settings_carries_their_warnings() {
        let pane = pane("trust-2.1.332-warnings");
        let d = read_screen(&pane).expect("the trust screen with warnings is recognised");
        assert!(is_trust_list(&d) && d.answerable, "{d:?}");
        let DialogBody::Generic(g) = &d.body else { panic!("{d:?}") };
        assert_eq!(g.title, "Trust /tmp/lab-capture/probe-trust-warn/work?", "the folder, not the added /tmp");
        for warning in [
            "⚠ This folder pre-approves 2 tool permissions in .claude/settings.json:\nBash(ls:*) and Bash(make test:*)",
            "⚠ This folder adds 1 directory to the workspace in .claude/settings.json:\n/tmp\n",
            "These will apply without asking. Only proceed if you trust this configuration.",
            "⚠ This folder configures hooks that can run commands without asking, declared in .claude/settings.json",
            "Trusting this folder loads .claude/settings.json (runs commands).",
        ] {
            assert!(g.text.contains(warning), "{warning:?} in {}", g.text);
        }
        assert!(is_drawn(&d, &pane));
        let keys = crate::keystrokes::plan_answer(&d, &[lab_provider_sdk::Answer::Option(0)]).unwrap().steps;
        assert_eq!(keys, [lab_provider_sdk::KeyOp::key("Down"), lab_provider_sdk::KeyOp::key("Enter")]);
    }

    /// 2.1.332 adds "3. Yes, and switch to auto mode" before "4. No" (pane captured from
    /// the real binary through lab's e2e). lab's rows keep their meaning there: Yes and
    /// Yes-always by digit at rows 1 and 2, No by Escape (its number moved from 3 to 4;
    /// the digit 3 would have approved the call). A prompt whose rows lab would pick
    /// wrongly is never drawn, so nothing is typed.
    #[test]
    fn a_permission_prompt_is_drawn_only_where_lab_s_rows_mean_what_they_say() {
        use lab_provider_sdk::{Answer, KeyOp};
        let payload = serde_json::json!({
            "hook_event_name": "PermissionRequest", "tool_name": "Bash",
            "tool_input": {"command": "touch e2e-refused-marker && echo touched", "description": "Create a marker file"},
            "permission_suggestions": [
                {"type": "addDirectories", "directories": ["/tmp/lab-tRBJc8o/w"], "destination": "session"},
                {"type": "setMode", "mode": "acceptEdits", "destination": "session"}
            ]
        });
        let d = crate::permission::permission_dialog(&payload, &[]).unwrap();
        let DialogBody::Permission(p) = &d.body else { panic!("{d:?}") };
        let labels: Vec<_> = p.options.iter().map(|o| o.label.as_str()).collect();
        assert_eq!(labels, ["Yes", "Yes, and always allow access to /tmp/lab-tRBJc8o/w from this project", "No"]);
        let keys = |a: Answer| crate::keystrokes::plan_answer(&d, &[a]).unwrap().steps;
        assert_eq!(keys(Answer::Option(0)), [KeyOp::key("1")]);
        assert_eq!(keys(Answer::Option(1)), [KeyOp::key("2")]);
        assert_eq!(keys(Answer::Option(2)), [KeyOp::key("Escape")], "No is never a digit");
        assert_eq!(
            keys(Answer::Feedback((2, "use mkdir".into()))),
            [KeyOp::key("Escape"), KeyOp::Literal("use mkdir".into()), KeyOp::key("Enter")]
        );

        let pane332 = pane("perm-bash-2.1.332");
        assert!(is_drawn(&d, &pane332), "2.1.332: rows 1 and 2 are lab's, No is the last row");
        // The same prompt as 2.1.198 numbers it (the folder as its name) is drawn too.
        let pane198 = pane332
            .replace("   3. Yes, and switch to auto mode · auto mode handles these prompts for you\n", "")
            .replace("4. No", "3. No")
            .replace("/tmp/lab-tRBJc8o/w from", "w/ from");
        assert!(is_drawn(&d, &pane198));
        // A release that put the new row second would make digit 2 switch modes: not drawn.
        let swapped = pane332
            .replace("2. Yes, and always allow access", "2. Yes, and switch to auto mode")
            .replace("3. Yes, and switch to auto mode", "3. Yes, and always allow access");
        assert!(!is_drawn(&d, &swapped));
        // No last row that is a No (a Yes after it, or none at all): not drawn.
        assert!(!is_drawn(&d, &pane332.replace("4. No", "4. No\n   5. Yes, and more")));
        assert!(!is_drawn(&d, &pane332.replace("4. No", "4. Nope").replace("4. Nope", "")));
        assert!(!is_drawn(&d, &pane332.replace("1. Yes\n", "1. Allow\n")));
    }

    #[test]
    fn the_trust_screen_is_read_and_drawn() {
        let d = read_screen(&pane("trust-screen")).unwrap();
        assert_eq!(d.tool_name, TRUST_SCREEN);
        assert!(d.answerable);
        assert_eq!(d.call_id, None);
        assert!(d.id.starts_with("trust-"));
        let DialogBody::Generic(g) = &d.body else { panic!("{d:?}") };
        assert_eq!(g.title, "Trust /work/lab-live/runs/trust/work?");
        assert!(
            g.text.starts_with("Accessing workspace:\n\n/work/lab-live/runs/trust/work\n\nQuick safety check:"),
            "{}",
            g.text
        );
        assert!(
            g.text.contains("1. Yes, I trust this folder\n2. No, exit\n\nEnter to confirm · Esc to cancel"),
            "{}",
            g.text
        );
        let labels: Vec<_> = g.options.iter().map(|o| o.label.as_str()).collect();
        assert_eq!(labels, ["Yes, I trust this folder", "No, exit"]);
        assert!(is_drawn(&d, &pane("trust-screen")));
        assert!(!is_drawn(&d, &pane("trust-after-1")));
        assert_eq!(read_screen(&pane("trust-screen")).unwrap().id, d.id, "stable for one screen");
        let keys = crate::keystrokes::plan_answer(&d, &[lab_provider_sdk::Answer::Option(0)]).unwrap();
        assert_eq!(keys.steps, [lab_provider_sdk::KeyOp::key("1")]);
    }

    #[test]
    fn read_screen_ignores_everything_else() {
        for name in ["trust-after-1", "ask3-q1", "perm-bash-1", "plan-1", "perm-write", "ask3-review"] {
            assert!(read_screen(&pane(name)).is_none(), "{name}");
        }
        assert!(read_screen("").is_none());
        // Half a trust screen (no options yet) is not a dialog.
        let half: String = pane("trust-screen").lines().take(8).collect::<Vec<_>>().join("\n");
        assert!(read_screen(&half).is_none());
    }

    #[test]
    fn dialogs_from_the_transcript_use_the_same_signals() {
        let d = dialog_mapper::map_dialog(crate::transcript::tool_use(
            "toolu_0106XkUp1a41TMbmMMZEgx6z",
            "ExitPlanMode",
            r##"{"plan":"# Plan"}"##,
        ))
        .unwrap();
        assert!(is_drawn(&d, &pane("plan-1")));
    }

    #[test]
    fn only_the_prompt_below_the_last_rule_counts_for_permissions() {
        assert_eq!(below_last_rule("a\n──────────\nb\n──────────\nc\n"), "c\n");
        assert_eq!(below_last_rule("no rule"), "no rule");
    }
}
