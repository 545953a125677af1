//! Reading what lab's hooks spooled (docs/providers/claude-code/compat.md §9).
//!
//! - The dialog spool is a hook payload verbatim, from one of two events:
//!   - PreToolUse (matcher `AskUserQuestion|ExitPlanMode`):
//!     `{"session_id", "transcript_path", "cwd", "prompt_id", "permission_mode",
//!     "effort", "hook_event_name": "PreToolUse", "tool_name", "tool_input": {…},
//!     "tool_use_id"}` → the question or plan dialog of the one dialog mapper (id =
//!     call id = `tool_use_id`); another tool → no dialog.
//!   - PermissionRequest (no `tool_use_id`) → a permission dialog, see
//!     [`crate::permission`].
//!
//!   A payload without `hook_event_name` is told apart by its `tool_use_id`.
//! - The blocked marker is the Notification payload verbatim:
//!   `{"session_id", "transcript_path", "cwd", "prompt_id",
//!   "hook_event_name": "Notification", "message", "notification_type"}`.
//!   Used: `notification_type` (→ `kind`) and `message`. Either may be missing (older
//!   Claude Code sent no `notification_type`; it is then `"unknown"`), not both.
//! - A session-info payload (SessionStart-style): `transcript_path`, `session_id`.
//!   Claude Code's transcript is known at spawn, so lab does not wire it, but a payload
//!   of any of its hooks carries both fields and parses.

use lab_provider_sdk::{json, Blocked, Dialog, SessionFacts, ToolUse};
use serde_json::Value;

use crate::dialog_mapper::map_dialog;
use crate::permission::permission_dialog;

/// Parse the dialog spool.
pub fn pending_dialog(spool: &[u8], open_calls: &[ToolUse]) -> Result<Option<Dialog>, String> {
    let v = json::object(spool).map_err(|e| format!("dialog spool: {e}"))?;
    let event = match v.get("hook_event_name") {
        None | Some(Value::Null) if v.get("tool_use_id").is_some() => "PreToolUse",
        None | Some(Value::Null) => "PermissionRequest",
        Some(Value::String(s)) => s.as_str(),
        Some(other) => return Err(format!("dialog spool: `hook_event_name` is {other}, not a string")),
    };
    match event {
        "PreToolUse" => pre_tool_use(&v, open_calls),
        "PermissionRequest" => permission_dialog(&v, open_calls).map(Some).map_err(|e| format!("dialog spool: {e}")),
        other => Err(format!(
            "dialog spool: `hook_event_name` is \"{other}\", expected \"PreToolUse\" or \"PermissionRequest\""
        )),
    }
}

fn pre_tool_use(v: &Value, open_calls: &[ToolUse]) -> Result<Option<Dialog>, String> {
    let tool_use_id = json::require_str(v, "tool_use_id").map_err(|e| format!("dialog spool: {e}"))?;
    if tool_use_id.is_empty() {
        return Err("dialog spool: `tool_use_id` is empty".into());
    }
    let tool_name = json::require_str(v, "tool_name").map_err(|e| format!("dialog spool: {e}"))?;
    let tool_input = match v.get("tool_input") {
        Some(input) if !input.is_null() => input,
        _ => return Err("dialog spool: missing field `tool_input`".into()),
    };
    // 2.1.332 hands ExitPlanMode's hook an empty input (no plan, no plan file): the
    // model's own input is the transcript's call of the same id, when it is there.
    let empty = tool_input.as_object().is_some_and(|o| o.is_empty());
    let input_json = match open_calls.iter().find(|c| c.id == tool_use_id && c.name == tool_name) {
        Some(call) if empty => call.input_json.clone(),
        _ => tool_input.to_string(),
    };
    Ok(map_dialog(crate::transcript::tool_use(tool_use_id, tool_name, input_json)))
}

/// Parse the blocked marker.
pub fn blocked_state(marker: &[u8]) -> Result<Blocked, String> {
    let v = json::object(marker).map_err(|e| format!("blocked marker: {e}"))?;
    check_event(&v, "Notification", "blocked marker")?;
    let notification_type = optional_str(&v, "notification_type", "blocked marker")?;
    let message = optional_str(&v, "message", "blocked marker")?;
    if notification_type.is_none() && message.is_none() {
        return Err("blocked marker: neither `notification_type` nor `message` is present".into());
    }
    Ok(Blocked {
        kind: notification_type.unwrap_or("unknown").to_string(),
        message: message.unwrap_or_default().to_string(),
    })
}

/// Parse a session-info payload.
pub fn session_info(payload: &[u8]) -> Result<SessionFacts, String> {
    let v = json::object(payload).map_err(|e| format!("session info: {e}"))?;
    let transcript_path = optional_str(&v, "transcript_path", "session info")?.filter(|s| !s.is_empty());
    let session_id = optional_str(&v, "session_id", "session info")?.filter(|s| !s.is_empty());
    if let Some(p) = transcript_path {
        if !p.starts_with('/') {
            return Err(format!("session info: `transcript_path` {p:?} is not an absolute path"));
        }
    }
    if transcript_path.is_none() && session_id.is_none() {
        return Err("session info: neither `transcript_path` nor `session_id` is present".into());
    }
    Ok(SessionFacts {
        transcript_path: transcript_path.map(str::to_string),
        session_id: session_id.map(str::to_string),
    })
}

fn check_event(v: &Value, want: &str, what: &str) -> Result<(), String> {
    match v.get("hook_event_name") {
        None | Some(Value::Null) => Ok(()),
        Some(Value::String(s)) if s == want => Ok(()),
        Some(other) => Err(format!("{what}: `hook_event_name` is {other}, expected \"{want}\"")),
    }
}

fn optional_str<'a>(v: &'a Value, field: &str, what: &str) -> Result<Option<&'a str>, String> {
    match v.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(format!("{what}: `{field}` is not a string")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn single_question_spool_is_an_answerable_dialog() {
        let d = pending_dialog(include_bytes!("../testdata/spool-ask-user-question.json"), &[]).unwrap().unwrap();
        assert_eq!(d.id, "toolu_01HXk9Qm3RZpT7vJc2WbN4aE");
        assert_eq!(d.call_id.as_deref(), Some("toolu_01HXk9Qm3RZpT7vJc2WbN4aE"));
        assert_eq!(d.tool_name, "AskUserQuestion");
        assert_eq!(d.kind(), "question");
        assert!(d.answerable);
        assert_eq!(d.questions()[0].header, "Database");
        assert_eq!(d.questions()[0].options.len(), 3);
        assert_eq!(d.questions()[0].options[2].label, "MongoDB");
    }

    #[test]
    fn two_question_spool_is_answerable() {
        let d = pending_dialog(include_bytes!("../testdata/spool-ask-two-questions.json"), &[]).unwrap().unwrap();
        assert_eq!(d.id, "toolu_01Qv7LmZ8sK2pW4nYc6TbR1d");
        assert!(d.answerable);
        assert_eq!(d.questions().len(), 2);
    }

    #[test]
    fn plan_spool_carries_the_plan() {
        let d = pending_dialog(include_bytes!("../testdata/spool-exit-plan-mode.json"), &[]).unwrap().unwrap();
        assert_eq!(d.id, "toolu_01Pn5GhT2kX9wQ3rV8mJc6Ls");
        let lab_provider_sdk::DialogBody::Plan(p) = d.body else { panic!() };
        assert!(p.plan.unwrap().starts_with("# Add order history\n\n1. Add an `orders` table"));
    }

    /// 2.1.332: ExitPlanMode's hook input is `{}` (notes on 2.1.332, §1); the plan text
    /// comes from the transcript's call of the same id once it is there.
    #[test]
    fn an_empty_2_1_332_plan_payload_takes_the_plan_from_the_transcript_s_call() {
        let spool = include_bytes!("../testdata/spool-exit-plan-mode-2.1.332.json");
        let plan_of = |d: Dialog| match d.body {
            lab_provider_sdk::DialogBody::Plan(p) => p.plan,
            other => panic!("{other:?}"),
        };
        let alone = pending_dialog(spool, &[]).unwrap().unwrap();
        assert_eq!((alone.id.as_str(), alone.call_id.as_deref()), ("toolu_plan_0001", Some("toolu_plan_0001")));
        assert_eq!(plan_of(alone), None, "nothing to show yet");
        let call = crate::transcript::tool_use("toolu_plan_0001", "ExitPlanMode", r##"{"plan":"# Plan\n1. go"}"##);
        let other = crate::transcript::tool_use("toolu_other", "ExitPlanMode", r##"{"plan":"# Not this one"}"##);
        let d = pending_dialog(spool, &[other.clone(), call]).unwrap().unwrap();
        assert_eq!(d.id, "toolu_plan_0001", "the same token once the call is found");
        assert_eq!(plan_of(d).as_deref(), Some("# Plan\n1. go"));
        assert_eq!(
            plan_of(pending_dialog(spool, &[other]).unwrap().unwrap()),
            None,
            "another call's plan is never taken"
        );
    }

    #[test]
    fn non_dialog_or_odd_input_is_no_dialog() {
        let p = pending_dialog(
            br#"{"hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":"ls"},"tool_use_id":"toolu_9"}"#,
            &[],
        )
        .unwrap();
        assert!(p.is_none());
        let p = pending_dialog(
            br#"{"tool_name":"AskUserQuestion","tool_input":{"questions":7},"tool_use_id":"toolu_8"}"#,
            &[],
        )
        .unwrap();
        assert!(p.is_none());
    }

    #[test]
    fn bad_spools_are_errors() {
        for (bytes, needle) in [
            (&b""[..], "not JSON"),
            (b"\xff\xfe", "not JSON"),
            (b"[1,2]", "not a JSON object"),
            (br#"{"tool_use_id":"","tool_name":"AskUserQuestion","tool_input":{}}"#, "empty"),
            (br#"{"tool_use_id":"t","tool_input":{}}"#, "tool_name"),
            (br#"{"hook_event_name":7}"#, "not a string"),
            (br#"{"tool_use_id":"t","tool_name":"AskUserQuestion"}"#, "tool_input"),
            (br#"{"tool_use_id":7,"tool_name":"AskUserQuestion","tool_input":{}}"#, "tool_use_id"),
            (
                br#"{"hook_event_name":"PostToolUse","tool_use_id":"t","tool_name":"AskUserQuestion","tool_input":{}}"#,
                "PreToolUse",
            ),
            (br#"{"hook_event_name":"PermissionRequest","tool_input":{}}"#, "tool_name"),
            (br#"{"tool_name":"Bash"}"#, "tool_input"),
        ] {
            let err = pending_dialog(bytes, &[]).unwrap_err();
            assert!(err.starts_with("dialog spool: ") && err.contains(needle), "{err}");
        }
    }

    #[test]
    fn markers_from_notification_payloads() {
        let b = blocked_state(include_bytes!("../testdata/marker-permission-prompt.json")).unwrap();
        assert_eq!(b.kind, "permission_prompt");
        assert_eq!(b.message, "Claude needs your permission");
        let b = blocked_state(include_bytes!("../testdata/marker-idle-prompt.json")).unwrap();
        assert_eq!(b.kind, "idle_prompt");
        assert_eq!(b.message, "Claude is waiting for your input");
        let b = blocked_state(
            br#"{"hook_event_name":"Notification","message":"Claude needs your permission to use Bash"}"#,
        )
        .unwrap();
        assert_eq!(b.kind, "unknown");
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
                        let d = pending_dialog(&payload, &[]).expect(&at).expect(&at);
                        assert_eq!(Some(&d.id), d.call_id.as_ref(), "{at}");
                        assert_eq!(d.id, v["payload"]["tool_use_id"].as_str().unwrap(), "{at}");
                        assert!(d.answerable, "{at}");
                    }
                    Some("Notification") => {
                        let b = blocked_state(&payload).expect(&at);
                        assert!(!b.kind.is_empty() && !b.message.is_empty(), "{at}");
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
    /// opening position) did not all include; see docs/providers/claude-code/compat.md §7.
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
            let Some(dialog) = pending_dialog(pre.to_string().as_bytes(), &[]).unwrap() else {
                continue;
            };
            if !dialog.answerable || dialog.questions().len() != 1 {
                continue;
            }
            let q = &dialog.questions()[0];
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
    fn permission_request_spools_are_permission_dialogs() {
        let payload = br#"{"hook_event_name":"PermissionRequest","tool_name":"Bash","tool_input":{"command":"ls -la","description":"List"},"permission_suggestions":[]}"#;
        let open = [crate::transcript::tool_use("toolu_7", "Bash", r#"{"description":"List","command":"ls -la"}"#)];
        let d = pending_dialog(payload, &open).unwrap().unwrap();
        assert_eq!(d.kind(), "permission");
        assert_eq!(d.call_id.as_deref(), Some("toolu_7"));
        assert!(d.id.starts_with("perm-"));
        // Without `hook_event_name` and without `tool_use_id`: a permission request too.
        let bare = br#"{"tool_name":"Bash","tool_input":{"command":"ls -la","description":"List"}}"#;
        assert_eq!(pending_dialog(bare, &[]).unwrap().unwrap().id, d.id);
    }

    #[test]
    fn session_info_from_a_hook_payload() {
        let f = session_info(br#"{"session_id":"s-1","transcript_path":"/h/.claude/projects/-w/s-1.jsonl","cwd":"/w","hook_event_name":"SessionStart","source":"startup"}"#).unwrap();
        assert_eq!(f.session_id.as_deref(), Some("s-1"));
        assert_eq!(f.transcript_path.as_deref(), Some("/h/.claude/projects/-w/s-1.jsonl"));
        let f = session_info(br#"{"session_id":"s-2"}"#).unwrap();
        assert_eq!((f.session_id.as_deref(), f.transcript_path), (Some("s-2"), None));
        assert!(session_info(b"{}").unwrap_err().contains("neither"));
        assert!(session_info(br#"{"transcript_path":"rel.jsonl"}"#).unwrap_err().contains("absolute"));
        assert!(session_info(br#"{"session_id":5}"#).unwrap_err().contains("not a string"));
        assert!(session_info(b"nope").unwrap_err().starts_with("session info: "));
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
