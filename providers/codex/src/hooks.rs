//! lab's hooks as data, and what their payloads say (docs/providers/codex/compat.md,
//! "Hooks"; payloads captured from 0.169.0 in testdata/hook-*.json).
//!
//! | event | channel |
//! |---|---|
//! | SessionStart | session-info (`transcript_path`, `session_id`) |
//! | PermissionRequest | dialog-spool |
//! | PostToolUse | dialog-clear `["/turn_id", "/tool_name", "/tool_input/command"]` |
//!
//! - SessionStart fires once, at the first turn (not at launch); the rollout does not
//!   exist before, so the transcript is found from it.
//! - PermissionRequest fires while the approval prompt is open, before it is answered:
//!   `tool_name: "Bash"`, `tool_input: {command, description}` (`description` = the
//!   model's justification, shown as "Reason:"), `turn_id` — and **no `tool_use_id`**.
//! - PostToolUse fires after an approved command ran, with `tool_input: {command}` only
//!   (no `description`), the same `turn_id` and `tool_name`, and `tool_use_id`. Hence
//!   the clear compares `/tool_input/command`, not `/tool_input`. After Esc it does
//!   not fire: that prompt ends when its call's `function_call_output` ("aborted by
//!   user") reaches the rollout (`dialog.call_id`).
//! - Codex 0.169.0 has no "waiting for the operator" notification hook (no
//!   Notification event), so there is no blocked-marker binding.
//! - `hook_settings` is none: the commands go on the command line ([`crate::launch`]).

use lab_provider_sdk::json::{object, str_at};
use lab_provider_sdk::{
    Blocked, Channel, Dialog, DialogBody, DialogOption, HookBinding, PermissionBody, SessionFacts, ToolUse,
};
use serde_json::Value;

/// The event whose payload is spooled.
pub const PERMISSION_REQUEST: &str = "PermissionRequest";

/// The pointers a PostToolUse payload must share with the spooled PermissionRequest.
pub const CLEAR_POINTERS: [&str; 3] = ["/turn_id", "/tool_name", "/tool_input/command"];

pub fn hook_wiring() -> Vec<HookBinding> {
    vec![
        HookBinding::new("SessionStart", None, Channel::SessionInfo),
        HookBinding::new(PERMISSION_REQUEST, None, Channel::DialogSpool),
        HookBinding::new(
            "PostToolUse",
            None,
            Channel::DialogClear(CLEAR_POINTERS.iter().map(|p| p.to_string()).collect()),
        ),
    ]
}

pub fn session_info(payload: &[u8]) -> Result<SessionFacts, String> {
    let v = object(payload)?;
    let s = |k: &str| str_at(&v, k).filter(|s| !s.is_empty()).map(str::to_string);
    let transcript_path = s("transcript_path");
    if let Some(p) = &transcript_path {
        if !p.starts_with('/') {
            return Err(format!("transcript_path `{p}` is not absolute"));
        }
    }
    Ok(SessionFacts { transcript_path, session_id: s("session_id") })
}

pub fn blocked_state(_marker: &[u8]) -> Result<Blocked, String> {
    Err("codex has no blocked marker: lab binds no hook to it".into())
}

/// The PermissionRequest payload → a permission dialog with codex's three options.
pub fn pending_dialog(spool: &[u8], open_calls: &[ToolUse]) -> Result<Option<Dialog>, String> {
    let v = object(spool)?;
    if str_at(&v, "hook_event_name").is_some_and(|e| e != PERMISSION_REQUEST) {
        return Ok(None);
    }
    let tool = str_at(&v, "tool_name").filter(|s| !s.is_empty()).ok_or("permission request: missing `tool_name`")?;
    let input = v.get("tool_input").filter(|i| i.is_object()).ok_or("permission request: missing `tool_input`")?;
    let command = str_at(input, "command").unwrap_or("");
    let reason = str_at(input, "description").filter(|s| !s.trim().is_empty()).map(str::to_string);
    let summary = if command.is_empty() { input.to_string() } else { command.to_string() };
    let turn = str_at(&v, "turn_id").unwrap_or("");
    let id = format!("perm-{:016x}", fnv1a(&format!("{turn}\0{tool}\0{summary}\0{}", reason.as_deref().unwrap_or(""))));
    let body = PermissionBody {
        tool: tool.to_string(),
        summary: summary.clone(),
        reason,
        options: options(&summary),
        feedback_option: Some(crate::answer::NO_OPTION),
    };
    let mut d = Dialog::new(id, tool, DialogBody::Permission(body));
    d.call_id = (!command.is_empty()).then(|| matching_call(command, open_calls)).flatten();
    // Only a shell command's prompt was driven live (compat.md, "Approval prompt").
    d.answerable = tool == "Bash" && !command.is_empty();
    Ok(Some(d))
}

/// What answer rules need of a permission dialog [`pending_dialog`] drew: the command
/// (when the prompt is for one: a summary that is the tool input's JSON has no
/// subject), `Yes, proceed` as the option that runs it this once, the `No` row (the
/// feedback option) as the one that refuses it. Other dialogs: none.
pub fn prompt_facts(d: &Dialog) -> Option<lab_provider_sdk::PromptFacts> {
    let DialogBody::Permission(p) = &d.body else { return None };
    let command = d.answerable && !p.summary.is_empty();
    Some(lab_provider_sdk::PromptFacts {
        subject: command.then(|| p.summary.clone()),
        allow_once: p.options.iter().position(|o| o.label.starts_with("Yes, proceed")).map(|i| i as u32),
        refuse: p.feedback_option,
    })
}

/// The prompt's rows, as 0.169.0 draws them for a command. The second row names the
/// prefix codex would remember: for a simple command (even with arguments, quotes or a
/// `>` redirect) the whole command, for a pipeline only its first part (observed by
/// hand). lab names the prefix only for a command without `|`, `&`, `;` or a line
/// break, where it was seen to be the whole command; otherwise the row says "…".
pub fn options(command: &str) -> Vec<DialogOption> {
    let simple = !command.contains(['|', '&', ';', '\n']);
    let second = if simple {
        format!("Yes, and don't ask again for commands that start with `{command}` (p)")
    } else {
        "Yes, and don't ask again for commands that start with … (p)".to_string()
    };
    vec![
        DialogOption::new("Yes, proceed (y)", "Run the command this time"),
        DialogOption::new(second, "Run it and save a prefix rule in $CODEX_HOME/rules"),
        DialogOption::new(
            "No, and tell Codex what to do differently (esc)",
            "Cancel: the command does not run and the turn is interrupted; with feedback, lab sends it as your next message",
        ),
    ]
}

/// The newest open `exec_command` call whose `cmd` is the prompt's command.
fn matching_call(command: &str, open_calls: &[ToolUse]) -> Option<String> {
    open_calls
        .iter()
        .rev()
        .find(|c| {
            c.name == "exec_command"
                && serde_json::from_str::<Value>(&c.input_json)
                    .is_ok_and(|a| a.get("cmd").and_then(Value::as_str) == Some(command))
        })
        .map(|c| c.id.clone())
}

/// FNV-1a, 64 bits: a stable id from the prompt's content.
fn fnv1a(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rollout;

    const PERM: &[u8] = include_bytes!("../testdata/hook-permission-request.json");
    const POST: &[u8] = include_bytes!("../testdata/hook-post-tool-use.json");

    fn open_calls() -> Vec<ToolUse> {
        let out = rollout::parse_transcript(include_bytes!("../testdata/rollout_during_approval.jsonl"));
        out.messages
            .into_iter()
            .filter_map(|m| match m.content {
                lab_provider_sdk::Content::ToolUse(u) => Some(u),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn captured_permission_request_is_a_permission_dialog_tied_to_the_call() {
        let d = pending_dialog(PERM, &open_calls()).unwrap().unwrap();
        assert_eq!(d.tool_name, "Bash");
        assert_eq!(d.call_id.as_deref(), Some("call_1"));
        assert!(d.answerable);
        let DialogBody::Permission(p) = &d.body else { panic!("{d:?}") };
        assert_eq!(p.tool, "Bash");
        assert_eq!(p.summary, "touch approved.txt");
        assert_eq!(p.reason.as_deref(), Some("Stand-in wants to create approved.txt"));
        assert_eq!(p.feedback_option, Some(2), "No, then the next message");
        let facts = prompt_facts(&d).unwrap();
        assert_eq!(facts.subject.as_deref(), Some("touch approved.txt"));
        assert_eq!((facts.allow_once, facts.refuse), (Some(0), Some(2)), "never the prefix rule row");
        let labels: Vec<&str> = p.options.iter().map(|o| o.label.as_str()).collect();
        // Word for word as the captured pane draws them.
        let pane = include_str!("../testdata/pane_approval.txt");
        for l in &labels {
            assert!(pane.contains(l), "{l:?} is not on the captured prompt");
        }
        assert_eq!(labels.len(), 3);
        // Stable id; no call without open calls.
        let again = pending_dialog(PERM, &[]).unwrap().unwrap();
        assert_eq!((again.id.as_str(), again.call_id.as_deref()), (d.id.as_str(), None));
        assert!(d.id.starts_with("perm-"));
    }

    /// As 0.169.0 drew the second row for these commands (by hand, via the stand-in).
    #[test]
    fn the_second_row_names_the_prefix_only_where_it_is_the_whole_command() {
        let second = |c: &str| options(c)[1].label.clone();
        assert_eq!(
            second("git status --short"),
            "Yes, and don't ask again for commands that start with `git status --short` (p)"
        );
        assert_eq!(
            second("python3 -c 'print(1)' > out.txt"),
            "Yes, and don't ask again for commands that start with `python3 -c 'print(1)' > out.txt` (p)"
        );
        // Drawn as "… start with `echo hello world` (p)": lab does not guess the prefix.
        assert_eq!(second("echo hello world | wc -c"), "Yes, and don't ask again for commands that start with … (p)");
        assert!(second("a && b").contains('…'));
    }

    #[test]
    fn the_clear_pointers_match_the_captured_post_tool_use() {
        let (perm, post) = (object(PERM).unwrap(), object(POST).unwrap());
        for p in CLEAR_POINTERS {
            assert!(perm.pointer(p).is_some(), "{p}");
            assert_eq!(perm.pointer(p), post.pointer(p), "{p}");
        }
        assert_ne!(perm.pointer("/tool_input"), post.pointer("/tool_input"), "hence not /tool_input whole");
        let wiring = hook_wiring();
        assert!(matches!(&wiring[2].channel, Channel::DialogClear(p) if p.len() == 3));
        assert!(!wiring.iter().any(|b| b.channel == Channel::BlockedMarker));
    }

    #[test]
    fn other_payloads_and_bad_ones() {
        assert_eq!(pending_dialog(POST, &[]).unwrap(), None, "not a permission request");
        assert!(pending_dialog(b"{", &[]).is_err());
        assert!(pending_dialog(br#"{"hook_event_name":"PermissionRequest","tool_input":{}}"#, &[]).is_err());
        let d = pending_dialog(br#"{"tool_name":"apply_patch","tool_input":{"patch":"x"}}"#, &[]).unwrap().unwrap();
        assert!(!d.answerable, "not driven live");
        assert!(blocked_state(b"{}").is_err());
    }

    #[test]
    fn captured_session_start_names_the_rollout() {
        let f = session_info(include_bytes!("../testdata/hook-session-start.json")).unwrap();
        assert_eq!(f.session_id.as_deref(), Some("01a22d1a-638c-76b1-a780-207ceab8be21"));
        assert_eq!(
            f.transcript_path.as_deref(),
            Some(
                "/tmp/cx/ch/sessions/2026/11/30/rollout-2026-11-30T15-37-13-01a22d1a-638c-76b1-a780-207ceab8be21.jsonl"
            )
        );
        // The rollout it names starts with that session.
        let out = rollout::parse_transcript(include_bytes!("../testdata/rollout_denied_then_message.jsonl"));
        assert_eq!(out.session_id, f.session_id);
        assert!(session_info(br#"{"transcript_path":"rel/r.jsonl"}"#).unwrap_err().contains("not absolute"));
        assert!(session_info(b"[]").is_err());
    }

    /// The second capture (a denied command) ties to its own call too.
    #[test]
    fn captured_denied_request_matches_its_call() {
        let out = rollout::parse_transcript(include_bytes!("../testdata/rollout_denied_then_message.jsonl"));
        let calls: Vec<ToolUse> = out
            .messages
            .into_iter()
            .filter_map(|m| if let lab_provider_sdk::Content::ToolUse(u) = m.content { Some(u) } else { None })
            .collect();
        let d =
            pending_dialog(include_bytes!("../testdata/hook-permission-request-denied.json"), &calls).unwrap().unwrap();
        assert_eq!(d.call_id.as_deref(), Some("call_3"));
        let other = pending_dialog(PERM, &calls).unwrap().unwrap();
        assert_eq!(other.call_id, None, "another command: no call");
        assert_ne!(other.id, d.id);
    }
}
