//! Permission prompts: a `PermissionRequest` hook payload → a permission dialog
//! (docs/providers/claude-code/compat.md §9b, §7d).
//!
//! The payload (2.1.198): `{"session_id", "transcript_path", "cwd", "prompt_id",
//! "permission_mode", "effort", "hook_event_name": "PermissionRequest", "tool_name",
//! "tool_input": {…}, "permission_suggestions": [...]}` — **no `tool_use_id`**. It
//! fires ~50–100 ms after the call's PreToolUse, as the prompt is drawn.
//!
//! - `id`: `perm-` + a stable hash (FNV-1a 64) of the tool name and the tool input in
//!   canonical JSON (keys sorted), so the same prompt always gets the same id (the host
//!   makes it unique per spool write).
//! - `call_id`: the newest of the transcript's open calls with the same tool name and
//!   an equal input (compared as parsed JSON), else `None`.
//! - `summary`: Bash → the command (its description is the `reason`);
//!   Edit / MultiEdit → the file and `+A −R lines`; Write → the file and `+N lines`;
//!   NotebookEdit → the notebook; WebFetch → the URL; anything else → the input as
//!   compact JSON (cut to [`SUMMARY_MAX_CHARS`]).
//! - `options`: the prompt's own rows as 2.1.198 draws them (observed live):
//!
//!   | tool | rows |
//!   |---|---|
//!   | Bash | `Yes` · second row from the suggestions · `No` |
//!   | Edit, Write, MultiEdit, NotebookEdit | `Yes` · `Yes, allow all edits during this session (shift+tab)` · `No` |
//!   | WebFetch | `Yes` · `Yes, and don't ask again for <domain>` · `No, and tell Claude what to do differently (esc)` |
//!
//!   The second row of a Bash prompt follows the first `permission_suggestions` entry:
//!   `addDirectories` `["/tmp/w"]` → `Yes, and always allow access to /tmp/w from this
//!   project` (2.1.332's wording; 2.1.198 draws the folder's name, `w/`); `addRules` `[{toolName: Bash, ruleContent: "make build *"}]` → `Yes,
//!   and don’t ask again for: make build *` (Claude Code's curly apostrophe). With no
//!   suggestion the row is left out (not observed). Other tools get the same
//!   derivation, unverified.
//! - `feedback_option`: the `No` row where the prompt says "Tab to amend" (Bash, Edit,
//!   Write, MultiEdit, NotebookEdit), WebFetch's "No, and tell Claude…" row; none for
//!   other tools.
//! - `answerable`: for the tools whose prompt was driven live (Bash, Edit, Write,
//!   WebFetch); other tools' prompts are shown but answered in Claude Code.

use lab_provider_sdk::{Dialog, DialogBody, DialogOption, PermissionBody, ToolUse};
use serde_json::Value;

use crate::dialog_mapper;

/// Longest summary for a tool lab does not know (characters).
pub const SUMMARY_MAX_CHARS: usize = 300;

/// Tools whose permission prompts were answered live on 2.1.198.
const VERIFIED: &[&str] = &["Bash", "Edit", "Write", "WebFetch"];

/// Tools whose prompt is the file-edit prompt.
const EDIT_TOOLS: &[&str] = &["Edit", "Write", "MultiEdit", "NotebookEdit"];

/// The dialog a PermissionRequest payload shows. `v` is the payload (an object).
pub fn permission_dialog(v: &Value, open_calls: &[ToolUse]) -> Result<Dialog, String> {
    let tool = v.get("tool_name").and_then(Value::as_str).filter(|s| !s.is_empty());
    let tool = tool.ok_or("permission request: missing string field `tool_name`")?;
    let input = match v.get("tool_input") {
        Some(input) if !input.is_null() => input,
        _ => return Err("permission request: missing field `tool_input`".into()),
    };
    let id = format!("perm-{:016x}", fnv1a(&format!("{tool}\0{}", canonical(input))));
    let call_id = matching_call(tool, input, open_calls);

    // AskUserQuestion / ExitPlanMode: lab's wiring keeps their PermissionRequest out of
    // the spool (the matcher); if one comes anyway it is the same prompt as the
    // PreToolUse one, so it maps to the same dialog.
    if let Some(body) = dialog_mapper::dialog_body(tool, &input.to_string()) {
        let mut d = dialog_mapper::map_dialog(crate::transcript::tool_use(
            call_id.clone().unwrap_or_else(|| id.clone()),
            tool,
            input.to_string(),
        ))
        .unwrap_or_else(|| Dialog::new(id.clone(), tool, body));
        d.call_id = call_id;
        return Ok(d);
    }

    let suggestions = v.get("permission_suggestions").and_then(Value::as_array).map(Vec::as_slice).unwrap_or(&[]);
    let (options, feedback_option) = options(tool, input, suggestions);
    let body = PermissionBody {
        tool: tool.to_string(),
        summary: summary(tool, input),
        reason: (tool == "Bash")
            .then(|| input.get("description").and_then(Value::as_str).filter(|d| !d.trim().is_empty()))
            .flatten()
            .map(str::to_string),
        options,
        feedback_option,
    };
    Ok(Dialog { call_id, answerable: VERIFIED.contains(&tool), ..Dialog::new(id, tool, DialogBody::Permission(body)) })
}

/// The newest open call with this name and an equal input.
fn matching_call(tool: &str, input: &Value, open_calls: &[ToolUse]) -> Option<String> {
    open_calls
        .iter()
        .rev()
        .find(|c| c.name == tool && serde_json::from_str::<Value>(&c.input_json).is_ok_and(|i| &i == input))
        .map(|c| c.id.clone())
}

/// What the call would do, for a human.
pub fn summary(tool: &str, input: &Value) -> String {
    let s = |k: &str| input.get(k).and_then(Value::as_str).filter(|s| !s.is_empty());
    match tool {
        "Bash" => {
            if let Some(cmd) = s("command") {
                return cmd.to_string();
            }
        }
        "Edit" => {
            if let Some(path) = s("file_path") {
                let (added, removed) = (lines(s("new_string")), lines(s("old_string")));
                return format!("{path} (+{added} −{removed} lines)");
            }
        }
        "MultiEdit" => {
            if let (Some(path), Some(edits)) = (s("file_path"), input.get("edits").and_then(Value::as_array)) {
                let count = |k: &str| edits.iter().map(|e| lines(e.get(k).and_then(Value::as_str))).sum::<usize>();
                return format!("{path} (+{} −{} lines)", count("new_string"), count("old_string"));
            }
        }
        "Write" => {
            if let Some(path) = s("file_path") {
                return format!("{path} (+{} lines)", lines(s("content")));
            }
        }
        "NotebookEdit" => {
            if let Some(path) = s("notebook_path") {
                return path.to_string();
            }
        }
        "WebFetch" => {
            if let Some(url) = s("url") {
                return url.to_string();
            }
        }
        _ => {}
    }
    let json = input.to_string();
    if json.chars().count() > SUMMARY_MAX_CHARS {
        let cut: String = json.chars().take(SUMMARY_MAX_CHARS).collect();
        format!("{cut}…")
    } else {
        json
    }
}

/// What answer rules need of a permission dialog this module drew: the exact subject
/// (the command; the file's path, its `(+A −R lines)` taken off; the URL), `Yes` as the
/// option that allows this one call, the `No` row as the one that refuses it. Other
/// tools' prompts (their summary is cut JSON) have no subject; other dialogs: none.
pub fn prompt_facts(d: &Dialog) -> Option<lab_provider_sdk::PromptFacts> {
    let DialogBody::Permission(p) = &d.body else { return None };
    let position = |f: &dyn Fn(&str) -> bool| p.options.iter().position(|o| f(&o.label)).map(|i| i as u32);
    let subject = match p.tool.as_str() {
        "Bash" | "WebFetch" | "NotebookEdit" => Some(p.summary.clone()),
        t if EDIT_TOOLS.contains(&t) => edited_path(&p.summary),
        _ => None,
    };
    Some(lab_provider_sdk::PromptFacts {
        subject: subject.filter(|s| !s.is_empty()),
        allow_once: position(&|l| l == "Yes"),
        refuse: p.feedback_option.or_else(|| position(&|l| l == "No" || l.starts_with("No,"))),
    })
}

/// `<path> (+A −R lines)` or `<path> (+N lines)` → the path.
fn edited_path(summary: &str) -> Option<String> {
    let (path, counts) = summary.rsplit_once(" (+")?;
    let counts = counts.strip_suffix(" lines)")?;
    let digits = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_digit());
    let ok = match counts.split_once(" \u{2212}") {
        Some((a, r)) => digits(a) && digits(r),
        None => digits(counts),
    };
    (ok && path.starts_with('/')).then(|| path.to_string())
}

fn lines(s: Option<&str>) -> usize {
    s.map_or(0, |s| s.lines().count())
}

/// The prompt's rows and the one that takes feedback.
fn options(tool: &str, input: &Value, suggestions: &[Value]) -> (Vec<DialogOption>, Option<u32>) {
    let yes = DialogOption::new("Yes", "Allow this call");
    if EDIT_TOOLS.contains(&tool) {
        let all = DialogOption::new(
            "Yes, allow all edits during this session (shift+tab)",
            "Allow this call and switch the session to acceptEdits",
        );
        return (vec![yes, all, no()], Some(2));
    }
    if tool == "WebFetch" {
        let domain = domain_rule(suggestions).or_else(|| host(input)).unwrap_or_default();
        return (
            vec![
                yes,
                DialogOption::new(format!("Yes, and don't ask again for {domain}"), "Allow fetches from this domain"),
                DialogOption::new(
                    "No, and tell Claude what to do differently (esc)",
                    "Reject; with feedback, lab sends it as your next message",
                ),
            ],
            Some(2),
        );
    }
    let mut rows = vec![yes];
    if let Some(second) = suggestions.first().and_then(second_row) {
        rows.push(second);
    }
    rows.push(no());
    let feedback = (tool == "Bash").then(|| rows.len() as u32 - 1);
    (rows, feedback)
}

fn no() -> DialogOption {
    DialogOption::new("No", "Reject this call; with feedback, Claude gets the text and carries on")
}

/// The second row a suggestion draws.
fn second_row(s: &Value) -> Option<DialogOption> {
    match s.get("type").and_then(Value::as_str)? {
        "addDirectories" => {
            let dirs: Vec<String> =
                s.get("directories")?.as_array()?.iter().filter_map(Value::as_str).map(str::to_string).collect();
            (!dirs.is_empty()).then(|| {
                DialogOption::new(
                    format!("Yes, and always allow access to {} from this project", dirs.join(", ")),
                    "Allow this call and access to that folder",
                )
            })
        }
        "addRules" => {
            let rules: Vec<&str> = s
                .get("rules")?
                .as_array()?
                .iter()
                .filter_map(|r| r.get("ruleContent").and_then(Value::as_str))
                .collect();
            (!rules.is_empty()).then(|| {
                DialogOption::new(
                    format!("Yes, and don\u{2019}t ask again for: {}", rules.join(", ")),
                    "Allow this call and add an allow rule",
                )
            })
        }
        "setMode" if s.get("mode").and_then(Value::as_str) == Some("acceptEdits") => Some(DialogOption::new(
            "Yes, allow all edits during this session (shift+tab)",
            "Allow this call and switch the session to acceptEdits",
        )),
        _ => None,
    }
}

/// `domain:<d>` from an addRules suggestion.
fn domain_rule(suggestions: &[Value]) -> Option<String> {
    suggestions
        .iter()
        .filter_map(|s| s.get("rules")?.as_array())
        .flatten()
        .find_map(|r| r.get("ruleContent").and_then(Value::as_str)?.strip_prefix("domain:").map(str::to_string))
}

fn host(input: &Value) -> Option<String> {
    let url = input.get("url")?.as_str()?;
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let authority = rest.split(['/', '?', '#']).next()?;
    let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    Some(host.rsplit_once(':').filter(|(_, p)| p.bytes().all(|b| b.is_ascii_digit())).map_or(host, |(h, _)| h).into())
}

/// JSON text with object keys sorted (so equal inputs hash equally whatever the order).
pub fn canonical(v: &Value) -> String {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            let parts: Vec<String> =
                keys.iter().map(|k| format!("{}:{}", Value::String((*k).clone()), canonical(&m[k.as_str()]))).collect();
            format!("{{{}}}", parts.join(","))
        }
        Value::Array(a) => format!("[{}]", a.iter().map(canonical).collect::<Vec<_>>().join(",")),
        other => other.to_string(),
    }
}

/// FNV-1a, 64 bit.
fn fnv1a(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn live(run: &str, tool: &str) -> Value {
        let path = format!("{}/testdata/live-0.2.0/{run}/hooks.jsonl", env!("CARGO_MANIFEST_DIR"));
        std::fs::read_to_string(&path)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .find(|v| v["hook"] == "PermissionRequest" && v["payload"]["tool_name"] == tool)
            .unwrap_or_else(|| panic!("{path}: no PermissionRequest for {tool}"))["payload"]
            .clone()
    }

    fn perm(d: &Dialog) -> &PermissionBody {
        match &d.body {
            DialogBody::Permission(p) => p,
            other => panic!("{other:?}"),
        }
    }

    fn labels(d: &Dialog) -> Vec<&str> {
        d.options().iter().map(|o| o.label.as_str()).collect()
    }

    #[test]
    fn bash_prompt_as_drawn() {
        let d = permission_dialog(&live("bash", "Bash"), &[]).unwrap();
        assert_eq!(d.tool_name, "Bash");
        assert!(d.answerable);
        assert!(d.id.starts_with("perm-") && d.id.len() == 21, "{}", d.id);
        assert_eq!(d.call_id, None);
        let p = perm(&d);
        assert_eq!(p.tool, "Bash");
        assert_eq!(p.summary, "touch one.txt && echo one");
        assert_eq!(p.reason.as_deref(), Some("Create file one"));
        assert_eq!(
            labels(&d),
            ["Yes", "Yes, and always allow access to /work/lab-live/runs/bash/work from this project", "No"]
        );
        assert_eq!(p.feedback_option, Some(2));
        // addRules and a directory outside the project (bash2).
        let d = permission_dialog(&live("bash2", "Bash"), &[]).unwrap();
        assert_eq!(labels(&d), ["Yes", "Yes, and don\u{2019}t ask again for: make build *", "No"]);
        let mut tmp = live("bash2", "Bash");
        tmp["permission_suggestions"] =
            json!([{"type":"addDirectories","directories":["/tmp"],"destination":"session"}]);
        assert_eq!(
            labels(&permission_dialog(&tmp, &[]).unwrap())[1],
            "Yes, and always allow access to /tmp from this project"
        );
    }

    #[test]
    fn answer_rules_get_the_exact_subject_and_the_once_options() {
        let facts = |d: &Dialog| prompt_facts(d).unwrap();
        let bash = facts(&permission_dialog(&live("bash", "Bash"), &[]).unwrap());
        assert_eq!(bash.subject.as_deref(), Some("touch one.txt && echo one"));
        assert_eq!((bash.allow_once, bash.refuse), (Some(0), Some(2)), "Yes; No (never the always row)");
        let write = facts(&permission_dialog(&live("perm2", "Write"), &[]).unwrap());
        assert_eq!(write.subject.as_deref(), Some("/work/lab-live/runs/perm2/work/hello.txt"));
        assert_eq!((write.allow_once, write.refuse), (Some(0), Some(2)));
        let edit = facts(&permission_dialog(&live("perm2", "Edit"), &[]).unwrap());
        assert_eq!(edit.subject.as_deref(), Some("/work/lab-live/runs/perm2/work/hello.txt"));
        let fetch = facts(&permission_dialog(&live("perm2", "WebFetch"), &[]).unwrap());
        assert_eq!(fetch.subject.as_deref(), Some("http://127.0.0.1:9/doc"));
        let other = json!({"tool_name": "mcp__db__query", "tool_input": {"sql": "select 1"}});
        let other = facts(&permission_dialog(&other, &[]).unwrap());
        assert_eq!((other.subject, other.allow_once, other.refuse), (None, Some(0), Some(1)));
        assert_eq!(edited_path("relative (+1 lines)"), None);
        assert_eq!(edited_path("/a (+x lines)"), None);
        assert_eq!(edited_path("/a (+1 \u{2212}2 lines)").as_deref(), Some("/a"));
    }

    #[test]
    fn edit_write_and_webfetch_prompts_as_drawn() {
        let d = permission_dialog(&live("perm2", "Write"), &[]).unwrap();
        assert_eq!(perm(&d).summary, "/work/lab-live/runs/perm2/work/hello.txt (+3 lines)");
        assert_eq!(labels(&d), ["Yes", "Yes, allow all edits during this session (shift+tab)", "No"]);
        assert_eq!(perm(&d).feedback_option, Some(2));
        let d = permission_dialog(&live("perm2", "Edit"), &[]).unwrap();
        assert_eq!(perm(&d).summary, "/work/lab-live/runs/perm2/work/hello.txt (+2 −1 lines)");
        assert!(d.answerable);
        let d = permission_dialog(&live("perm2", "WebFetch"), &[]).unwrap();
        assert_eq!(perm(&d).summary, "http://127.0.0.1:9/doc");
        assert_eq!(
            labels(&d),
            ["Yes", "Yes, and don't ask again for 127.0.0.1", "No, and tell Claude what to do differently (esc)"]
        );
        assert_eq!(perm(&d).feedback_option, Some(2));
    }

    #[test]
    fn unknown_tools_are_shown_not_answered() {
        let v =
            json!({"hook_event_name":"PermissionRequest","tool_name":"mcp__db__query","tool_input":{"sql":"select 1"}});
        let d = permission_dialog(&v, &[]).unwrap();
        assert!(!d.answerable);
        assert_eq!(perm(&d).summary, r#"{"sql":"select 1"}"#);
        assert_eq!(labels(&d), ["Yes", "No"]);
        assert_eq!(perm(&d).feedback_option, None);
        let long = json!({"tool_name":"X","tool_input":{"a":"y".repeat(500)}});
        assert_eq!(perm(&permission_dialog(&long, &[]).unwrap()).summary.chars().count(), SUMMARY_MAX_CHARS + 1);
        let multi = json!({"tool_name":"MultiEdit","tool_input":{"file_path":"/a","edits":[
            {"old_string":"a\nb","new_string":"c"},{"old_string":"d","new_string":"e\nf\ng"}]}});
        assert_eq!(perm(&permission_dialog(&multi, &[]).unwrap()).summary, "/a (+4 −3 lines)");
    }

    #[test]
    fn id_is_stable_and_call_id_is_the_newest_equal_open_call() {
        let v = live("bash", "Bash");
        let a = permission_dialog(&v, &[]).unwrap();
        let mut reordered = v.clone();
        reordered["tool_input"] = json!({"description":"Create file one","command":"touch one.txt && echo one"});
        reordered["prompt_id"] = json!("another");
        assert_eq!(permission_dialog(&reordered, &[]).unwrap().id, a.id);
        let mut other = v.clone();
        other["tool_input"]["command"] = json!("touch two.txt");
        assert_ne!(permission_dialog(&other, &[]).unwrap().id, a.id);

        let call = |id: &str, name: &str, input: &str| crate::transcript::tool_use(id, name, input);
        let open = [
            call("toolu_old", "Bash", r#"{"command":"touch one.txt && echo one","description":"Create file one"}"#),
            call("toolu_read", "Read", r#"{"file_path":"/x"}"#),
            call("toolu_new", "Bash", r#"{"description":"Create file one","command":"touch one.txt && echo one"}"#),
            call("toolu_diff", "Bash", r#"{"command":"ls"}"#),
            call("toolu_bad", "Bash", "not json"),
        ];
        let d = permission_dialog(&v, &open).unwrap();
        assert_eq!(d.call_id.as_deref(), Some("toolu_new"));
        assert_eq!(d.id, a.id, "the id does not depend on the open calls");
        assert_eq!(permission_dialog(&v, &open[1..2]).unwrap().call_id, None);
    }

    #[test]
    fn a_permission_request_for_a_dialog_tool_is_that_dialog() {
        let v = live("ask3", "AskUserQuestion");
        let d = permission_dialog(&v, &[]).unwrap();
        assert_eq!(d.kind(), "question");
        assert_eq!(d.questions().len(), 3);
        assert!(d.id.starts_with("perm-"));
        assert_eq!(d.call_id, None);
        let open = [crate::transcript::tool_use(
            "toolu_01fnIpa1YmJZK1CTDlTnstz0",
            "AskUserQuestion",
            v["tool_input"].to_string(),
        )];
        let d = permission_dialog(&v, &open).unwrap();
        assert_eq!((d.id.as_str(), d.call_id.as_deref()), (open[0].id.as_str(), Some(open[0].id.as_str())));
        let d = permission_dialog(&live("plan", "ExitPlanMode"), &[]).unwrap();
        assert_eq!(d.kind(), "plan");
    }

    /// testdata/live-0.2.0/final, played with the exact hook document of
    /// [`crate::hook_settings`]: each PermissionRequest finds its call among the
    /// transcript's calls, and the approved call's PostToolUse carries the same
    /// `/tool_name` and `/tool_input` as its PermissionRequest (the clear pointers).
    #[test]
    fn live_permission_requests_find_their_calls_and_clear_by_input() {
        let dir = format!("{}/testdata/live-0.2.0/final", env!("CARGO_MANIFEST_DIR"));
        let out = crate::transcript::parse_transcript(&std::fs::read(format!("{dir}/transcript.jsonl")).unwrap());
        assert!(out.diagnostics.is_empty(), "{:?}", out.diagnostics);
        let calls: Vec<ToolUse> = out
            .messages
            .iter()
            .filter_map(|m| match &m.content {
                lab_provider_sdk::Content::ToolUse(u) => Some(u.clone()),
                _ => None,
            })
            .collect();
        let hooks: Vec<Value> = std::fs::read_to_string(format!("{dir}/hooks.jsonl"))
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let requests: Vec<&Value> =
            hooks.iter().filter(|h| h["hook"] == "PermissionRequest:dialog-spool").map(|h| &h["payload"]).collect();
        let ids: Vec<Option<String>> = requests.iter().map(|r| permission_dialog(r, &calls).unwrap().call_id).collect();
        assert_eq!(
            ids,
            [Some("toolu_01sFVzU5PNmc0g0Co1rsnXKD".to_string()), Some("toolu_01ZyFJk1u1NJvAJ1dPlfOwMH".to_string())]
        );
        let post = hooks.iter().find(|h| h["hook"] == "PostToolUse:clear-input").unwrap();
        for pointer in ["/tool_name", "/tool_input"] {
            assert_eq!(post["payload"].pointer(pointer), requests[1].pointer(pointer), "{pointer}");
            assert_ne!(post["payload"].pointer("/tool_input"), requests[0].pointer("/tool_input"));
        }
        assert!(!hooks
            .iter()
            .any(|h| h["hook"] == "PermissionRequest:dialog-spool" && h["payload"]["tool_name"] == "AskUserQuestion"));
    }

    #[test]
    fn bad_payloads_are_errors() {
        assert!(permission_dialog(&json!({"tool_input":{}}), &[]).unwrap_err().contains("tool_name"));
        assert!(permission_dialog(&json!({"tool_name":"Bash"}), &[]).unwrap_err().contains("tool_input"));
    }

    #[test]
    fn canonical_sorts_keys_deeply() {
        assert_eq!(canonical(&json!({"b":[{"y":1,"x":2}],"a":"\""})), r#"{"a":"\"","b":[{"x":2,"y":1}]}"#);
    }
}
