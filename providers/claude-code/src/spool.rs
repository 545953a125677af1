//! Reading what lab's hooks spooled (docs/compat.md §9).
//!
//! - The dialog spool is the PreToolUse payload verbatim:
//!   `{"session_id", "transcript_path", "cwd", "prompt_id", "permission_mode", "effort",
//!   "hook_event_name": "PreToolUse", "tool_name", "tool_input": {…}, "tool_use_id"}`.
//!   Used: `tool_use_id` (the answer-guard token), `tool_name` and `tool_input`, handed
//!   to the one dialog mapper. `hook_event_name`, if present, must be `PreToolUse`.
//! - The blocked marker is the Notification payload verbatim:
//!   `{"session_id", "transcript_path", "cwd", "prompt_id",
//!   "hook_event_name": "Notification", "message", "notification_type"}`.
//!   Used: `notification_type` and `message`. Either may be missing (older Claude Code
//!   sent no `notification_type`; it is then reported as `"unknown"`), not both.

use lab_provider_sdk::{json, Blocked, Pending, ToolCall};
use serde_json::Value;

use crate::dialog_mapper::map_dialog;

/// Parse the dialog spool.
pub fn pending_dialog(spool: &[u8]) -> Result<Pending, String> {
    let v = json::object(spool).map_err(|e| format!("dialog spool: {e}"))?;
    check_event(&v, "PreToolUse", "dialog spool")?;
    let tool_use_id = json::require_str(&v, "tool_use_id").map_err(|e| format!("dialog spool: {e}"))?;
    if tool_use_id.is_empty() {
        return Err("dialog spool: `tool_use_id` is empty".into());
    }
    let tool_name = json::require_str(&v, "tool_name").map_err(|e| format!("dialog spool: {e}"))?;
    let tool_input = match v.get("tool_input") {
        Some(input) if !input.is_null() => input,
        _ => return Err("dialog spool: missing field `tool_input`".into()),
    };
    let dialog = map_dialog(ToolCall {
        id: tool_use_id.to_string(),
        name: tool_name.to_string(),
        input: tool_input.to_string(),
    });
    Ok(Pending { tool_use_id: tool_use_id.to_string(), dialog })
}

/// Parse the blocked marker.
pub fn blocked_state(marker: &[u8]) -> Result<Blocked, String> {
    let v = json::object(marker).map_err(|e| format!("blocked marker: {e}"))?;
    check_event(&v, "Notification", "blocked marker")?;
    let notification_type = optional_str(&v, "notification_type")?;
    let message = optional_str(&v, "message")?;
    if notification_type.is_none() && message.is_none() {
        return Err("blocked marker: neither `notification_type` nor `message` is present".into());
    }
    Ok(Blocked {
        notification_type: notification_type.unwrap_or("unknown").to_string(),
        message: message.unwrap_or_default().to_string(),
    })
}

fn check_event(v: &Value, want: &str, what: &str) -> Result<(), String> {
    match v.get("hook_event_name") {
        None | Some(Value::Null) => Ok(()),
        Some(Value::String(s)) if s == want => Ok(()),
        Some(other) => Err(format!("{what}: `hook_event_name` is {other}, expected \"{want}\"")),
    }
}

fn optional_str<'a>(v: &'a Value, field: &str) -> Result<Option<&'a str>, String> {
    match v.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(format!("blocked marker: `{field}` is not a string")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lab_provider_sdk::DialogKind;

    #[test]
    fn single_question_spool_is_an_answerable_dialog() {
        let p = pending_dialog(include_bytes!("../testdata/spool-ask-user-question.json")).unwrap();
        assert_eq!(p.tool_use_id, "toolu_01HXk9Qm3RZpT7vJc2WbN4aE");
        let d = p.dialog.unwrap();
        assert_eq!(d.tool_id, "toolu_01HXk9Qm3RZpT7vJc2WbN4aE");
        assert_eq!(d.tool_name, "AskUserQuestion");
        assert_eq!(d.kind, DialogKind::Question);
        assert!(d.answerable);
        assert_eq!(d.questions[0].header, "Database");
        assert_eq!(d.questions[0].options.len(), 3);
        assert_eq!(d.questions[0].options[2].label, "MongoDB");
    }

    #[test]
    fn two_question_spool_is_shown_not_answerable() {
        let p = pending_dialog(include_bytes!("../testdata/spool-ask-two-questions.json")).unwrap();
        assert_eq!(p.tool_use_id, "toolu_01Qv7LmZ8sK2pW4nYc6TbR1d");
        let d = p.dialog.unwrap();
        assert!(!d.answerable);
        assert_eq!(d.questions.len(), 2);
    }

    #[test]
    fn plan_spool_carries_the_plan() {
        let p = pending_dialog(include_bytes!("../testdata/spool-exit-plan-mode.json")).unwrap();
        assert_eq!(p.tool_use_id, "toolu_01Pn5GhT2kX9wQ3rV8mJc6Ls");
        let d = p.dialog.unwrap();
        assert_eq!(d.kind, DialogKind::Plan);
        assert!(d.plan.unwrap().starts_with("# Add order history\n\n1. Add an `orders` table"));
    }

    #[test]
    fn non_dialog_or_odd_input_keeps_the_token_without_a_dialog() {
        let p = pending_dialog(br#"{"hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":"ls"},"tool_use_id":"toolu_9"}"#)
            .unwrap();
        assert_eq!(p.tool_use_id, "toolu_9");
        assert!(p.dialog.is_none());
        let p =
            pending_dialog(br#"{"tool_name":"AskUserQuestion","tool_input":{"questions":7},"tool_use_id":"toolu_8"}"#)
                .unwrap();
        assert!(p.dialog.is_none());
    }

    #[test]
    fn bad_spools_are_errors() {
        for (bytes, needle) in [
            (&b""[..], "not JSON"),
            (b"\xff\xfe", "not JSON"),
            (b"[1,2]", "not a JSON object"),
            (br#"{"tool_name":"AskUserQuestion","tool_input":{}}"#, "tool_use_id"),
            (br#"{"tool_use_id":"","tool_name":"AskUserQuestion","tool_input":{}}"#, "empty"),
            (br#"{"tool_use_id":"t","tool_input":{}}"#, "tool_name"),
            (br#"{"tool_use_id":"t","tool_name":"AskUserQuestion"}"#, "tool_input"),
            (br#"{"tool_use_id":7,"tool_name":"AskUserQuestion","tool_input":{}}"#, "tool_use_id"),
            (
                br#"{"hook_event_name":"PostToolUse","tool_use_id":"t","tool_name":"AskUserQuestion","tool_input":{}}"#,
                "PreToolUse",
            ),
        ] {
            let err = pending_dialog(bytes).unwrap_err();
            assert!(err.starts_with("dialog spool: ") && err.contains(needle), "{err}");
        }
    }

    #[test]
    fn markers_from_notification_payloads() {
        let b = blocked_state(include_bytes!("../testdata/marker-permission-prompt.json")).unwrap();
        assert_eq!(b.notification_type, "permission_prompt");
        assert_eq!(b.message, "Claude needs your permission");
        let b = blocked_state(include_bytes!("../testdata/marker-idle-prompt.json")).unwrap();
        assert_eq!(b.notification_type, "idle_prompt");
        assert_eq!(b.message, "Claude is waiting for your input");
        let b = blocked_state(
            br#"{"hook_event_name":"Notification","message":"Claude needs your permission to use Bash"}"#,
        )
        .unwrap();
        assert_eq!(b.notification_type, "unknown");
    }

    /// Hook payloads captured from the real `claude` binary (`testdata/real/*/hooks.jsonl`,
    /// lines `{"received_ms", "hook", "payload"}`), if any: every PreToolUse payload
    /// is a pending dialog, every Notification payload a blocked state.
    #[test]
    fn real_hook_payloads_parse() {
        for f in crate::transcript::tests::real_files("hooks") {
            let text = std::fs::read_to_string(&f).unwrap();
            for line in text.lines().filter(|l| !l.trim().is_empty()) {
                let v: Value = serde_json::from_str(line).unwrap();
                let payload = match &v["payload"] {
                    Value::String(s) => s.clone().into_bytes(),
                    other => other.to_string().into_bytes(),
                };
                let at = format!("{}: {}", f.display(), v["hook"]);
                match v["hook"].as_str() {
                    Some("PreToolUse") => {
                        let p = pending_dialog(&payload).expect(&at);
                        let d = p.dialog.expect(&at);
                        assert_eq!(d.tool_id, p.tool_use_id, "{at}");
                        assert_eq!(d.answerable, d.questions.len() == 1, "{at}");
                    }
                    Some("Notification") => {
                        let b = blocked_state(&payload).expect(&at);
                        assert!(!b.notification_type.is_empty() && !b.message.is_empty(), "{at}");
                    }
                    _ => {}
                }
            }
        }
    }

    /// For every captured scenario where keys were played into an answerable picker
    /// (`testdata/real/*/keys.jsonl`), our recipe for the answer Claude Code recorded
    /// (PostToolUse `tool_input.answers`) is exactly the captured keys, give or take the
    /// single-select recipe's leading `Down × (N + 1)` clamp and the `Up × (N + 1)`
    /// climb (a full turn of the wrapping picker), which the captures (played from the
    /// opening position) did not all include; see docs/compat.md §7.
    #[test]
    fn real_keystrokes_match_the_recipes() {
        use crate::keystrokes;
        use lab_provider_sdk::KeyOp;
        let files = crate::transcript::tests::real_files("keys");
        let mut checked = Vec::new();
        for keys_file in &files {
            let dir = keys_file.parent().unwrap();
            let hooks = std::fs::read_to_string(dir.join("hooks.jsonl")).unwrap();
            let hook = |name: &str| {
                hooks
                    .lines()
                    .map(|l| serde_json::from_str::<Value>(l).unwrap())
                    .find(|v| v["hook"] == name)
                    .map(|v| v["payload"].clone())
            };
            let (Some(pre), Some(post)) = (hook("PreToolUse"), hook("PostToolUse")) else {
                continue;
            };
            let Some(dialog) = pending_dialog(pre.to_string().as_bytes()).unwrap().dialog else {
                continue;
            };
            if !dialog.answerable {
                continue;
            }
            let q = &dialog.questions[0];
            let Some(recorded) = post["tool_input"]["answers"][&q.question].as_str() else {
                continue;
            };
            let index = |label: &str| q.options.iter().position(|o| o.label == label).map(|i| i as u32);
            let recipe = if q.multi_select {
                match recorded.split(", ").map(index).collect::<Option<Vec<_>>>() {
                    Some(picks) => keystrokes::multi_select_keys(q.options.len(), &picks),
                    None => keystrokes::multi_select_other_keys(q.options.len(), recorded),
                }
            } else {
                match index(recorded) {
                    Some(i) => keystrokes::single_select_keys(q.options.len(), i),
                    None => keystrokes::other_keys(q.options.len(), recorded),
                }
            }
            .unwrap();
            let played: Vec<KeyOp> = std::fs::read_to_string(keys_file)
                .unwrap()
                .lines()
                .map(|l| {
                    let k = serde_json::from_str::<Value>(l).unwrap()["key"].as_str().unwrap().to_string();
                    match k.strip_prefix("lit:") {
                        Some(text) => KeyOp::Literal(text.to_string()),
                        None => KeyOp::Key(k),
                    }
                })
                .collect();
            let climb = q.options.len() + 1;
            let clamp = if q.multi_select { 0 } else { q.options.len() + 1 };
            let without_clamp = &recipe[clamp..];
            let without_climb = &recipe[clamp + climb..];
            assert!(
                played == recipe || played == without_clamp || played == without_climb,
                "{}: recorded {recorded:?}\n played {played:?}\n recipe {recipe:?}",
                dir.display()
            );
            checked.push(dir.file_name().unwrap().to_string_lossy().to_string());
        }
        assert!(files.is_empty() || !checked.is_empty(), "no captured answer was checked");
        eprintln!("recipes match the captured keys of: {checked:?}");
    }

    #[test]
    fn bad_markers_are_errors() {
        for (bytes, needle) in [
            (&b"nope"[..], "not JSON"),
            (b"\"text\"", "not a JSON object"),
            (br#"{"session_id":"s"}"#, "neither"),
            (br#"{"message":3}"#, "message"),
            (br#"{"hook_event_name":"Stop","message":"m"}"#, "Notification"),
        ] {
            let err = blocked_state(bytes).unwrap_err();
            assert!(err.starts_with("blocked marker: ") && err.contains(needle), "{err}");
        }
    }
}
