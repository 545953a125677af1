//! lab's hooks as data (docs/providers/claude-code/compat.md §9): the bindings, and the
//! per-run `--settings` document that places the host-built commands.
//!
//! | event | matcher | channel |
//! |---|---|---|
//! | PreToolUse | `AskUserQuestion\|ExitPlanMode` | dialog-spool |
//! | PermissionRequest | `^(?!(AskUserQuestion\|ExitPlanMode)$).*` | dialog-spool |
//! | PostToolUse | `AskUserQuestion\|ExitPlanMode` | dialog-clear `["/tool_use_id"]` |
//! | PostToolUse | `^(?!(AskUserQuestion\|ExitPlanMode)$).*` | dialog-clear `["/tool_name", "/tool_input"]` |
//! | Notification | — | blocked-marker |
//!
//! Observed on 2.1.198 (testdata/live-0.2.0):
//!
//! - A call that needs approval fires PreToolUse, then PermissionRequest ~50–100 ms
//!   later as the prompt is drawn, then Notification `permission_prompt` ~6 s later.
//!   PermissionRequest also fires for AskUserQuestion and ExitPlanMode (right after
//!   their PreToolUse) — its spool would replace the richer PreToolUse one — so its
//!   matcher excludes them. Claude Code treats a matcher that is not a plain
//!   `Name|Name` list as a JavaScript regex; with the negative lookahead above,
//!   PermissionRequest fired for Bash, Write, Edit and WebFetch and not for
//!   AskUserQuestion or ExitPlanMode (verified live).
//! - PostToolUse fires when an approved call finishes; its `tool_input` equals the
//!   PermissionRequest's (Bash, Write: byte for byte), so `["/tool_name",
//!   "/tool_input"]` clears exactly that prompt's spool. A *rejected* call (No, Esc)
//!   fires no PostToolUse: that spool is over when the call's tool_result appears in
//!   the transcript (`dialog.call_id`).
//! - Every hook is observe-only: lab's commands exit 0 with no output, which never
//!   blocks or answers anything. `timeout` (seconds) bounds a hook that hangs.
//!   `--settings` merges hooks additively with the user's and the repository's.

use lab_provider_sdk::{Channel, HookBinding, HookCommand};
use serde_json::{json, Map, Value};

/// The tools whose calls are interactive dialogs (an exact-name alternation).
pub const DIALOG_MATCHER: &str = "AskUserQuestion|ExitPlanMode";

/// Every tool but the dialog tools (a regex: Claude Code compiles a matcher that is not
/// a plain name list with `new RegExp`).
pub const NOT_DIALOG_MATCHER: &str = "^(?!(AskUserQuestion|ExitPlanMode)$).*";

/// Seconds Claude Code waits for one of lab's hook commands.
pub const HOOK_TIMEOUT_SECS: u64 = 10;

/// The bindings, in the order above.
pub fn hook_wiring() -> Vec<HookBinding> {
    vec![
        HookBinding::new("PreToolUse", Some(DIALOG_MATCHER), Channel::DialogSpool),
        HookBinding::new("PermissionRequest", Some(NOT_DIALOG_MATCHER), Channel::DialogSpool),
        HookBinding::new("PostToolUse", Some(DIALOG_MATCHER), Channel::DialogClear(vec!["/tool_use_id".into()])),
        HookBinding::new(
            "PostToolUse",
            Some(NOT_DIALOG_MATCHER),
            Channel::DialogClear(vec!["/tool_name".into(), "/tool_input".into()]),
        ),
        HookBinding::new("Notification", None, Channel::BlockedMarker),
    ]
}

/// The renderer every run is pinned to: settings key `tui`, `"default"` = the classic
/// main-screen renderer lab's screen reading and key recipes were measured on. 2.1.332
/// starts a fresh install (`firstStartVersion` in `.claude.json`, fewer than three
/// fullscreen upsells seen) in the alt-screen `"fullscreen"` renderer unless `tui` says
/// otherwise, and its upsell trial may write `tui: "fullscreen"` into the user's
/// settings; `--settings` outranks both (verified: tmux `#{alternate_on}` 1 without the
/// pin, 0 with it). Only `CLAUDE_CODE_NO_FLICKER=1` in the agent's environment (the
/// operator's explicit choice) still wins. 2.1.198 knows the key too.
pub const CLASSIC_RENDERER: (&str, &str) = ("tui", "default");

/// The settings document (compact JSON text): each command under its binding's event
/// and matcher, in the order given, and the classic renderer ([`CLASSIC_RENDERER`]).
pub fn hook_settings(_run_id: &str, hooks: &[HookCommand]) -> Result<Option<String>, String> {
    let mut events: Map<String, Value> = Map::new();
    for h in hooks {
        if h.command.trim().is_empty() {
            return Err(format!("the hook command for {} is empty", h.binding.event));
        }
        if h.binding.event.trim().is_empty() {
            return Err("a hook binding has no event".into());
        }
        let mut group = Map::new();
        if let Some(m) = &h.binding.matcher {
            group.insert("matcher".into(), Value::String(m.clone()));
        }
        group
            .insert("hooks".into(), json!([{ "type": "command", "command": h.command, "timeout": HOOK_TIMEOUT_SECS }]));
        match events.entry(h.binding.event.clone()).or_insert_with(|| Value::Array(Vec::new())) {
            Value::Array(groups) => groups.push(Value::Object(group)),
            _ => unreachable!("events only hold arrays"),
        }
    }
    let (key, renderer) = CLASSIC_RENDERER;
    Ok(Some(json!({ key: renderer, "hooks": events }).to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the host hands over: one command per binding, quoted.
    fn commands() -> Vec<HookCommand> {
        hook_wiring()
            .into_iter()
            .enumerate()
            .map(|(i, binding)| HookCommand {
                command: format!("/usr/local/bin/lab hook {i} '/state/my lab/runtime/r-7.json'"),
                binding,
            })
            .collect()
    }

    #[test]
    fn wiring_is_the_documented_table() {
        let w = hook_wiring();
        let rows: Vec<(&str, Option<&str>, &Channel)> =
            w.iter().map(|b| (b.event.as_str(), b.matcher.as_deref(), &b.channel)).collect();
        assert_eq!(
            rows,
            vec![
                ("PreToolUse", Some("AskUserQuestion|ExitPlanMode"), &Channel::DialogSpool),
                ("PermissionRequest", Some("^(?!(AskUserQuestion|ExitPlanMode)$).*"), &Channel::DialogSpool),
                (
                    "PostToolUse",
                    Some("AskUserQuestion|ExitPlanMode"),
                    &Channel::DialogClear(vec!["/tool_use_id".into()])
                ),
                (
                    "PostToolUse",
                    Some("^(?!(AskUserQuestion|ExitPlanMode)$).*"),
                    &Channel::DialogClear(vec!["/tool_name".into(), "/tool_input".into()])
                ),
                ("Notification", None, &Channel::BlockedMarker),
            ]
        );
    }

    #[test]
    fn settings_place_each_command_under_its_event_and_matcher() {
        let cmds = commands();
        let text = hook_settings("r-7", &cmds).unwrap().unwrap();
        let v: Value = serde_json::from_str(&text).unwrap();
        let hooks = v["hooks"].as_object().unwrap();
        assert_eq!(hooks.len(), 4);
        assert_eq!(v["tui"], "default", "the classic renderer: {v}");
        assert_eq!(v.as_object().unwrap().len(), 2, "nothing else is set: {v}");
        let group = |ev: &str, i: usize| &v["hooks"][ev][i];
        assert_eq!(group("PreToolUse", 0)["matcher"], DIALOG_MATCHER);
        assert_eq!(group("PreToolUse", 0)["hooks"][0]["command"], cmds[0].command.as_str());
        assert_eq!(group("PreToolUse", 0)["hooks"][0]["type"], "command");
        assert_eq!(group("PreToolUse", 0)["hooks"][0]["timeout"], 10);
        assert_eq!(group("PermissionRequest", 0)["matcher"], NOT_DIALOG_MATCHER);
        assert_eq!(group("PermissionRequest", 0)["hooks"][0]["command"], cmds[1].command.as_str());
        assert_eq!(v["hooks"]["PostToolUse"].as_array().unwrap().len(), 2);
        assert_eq!(group("PostToolUse", 0)["matcher"], DIALOG_MATCHER);
        assert_eq!(group("PostToolUse", 0)["hooks"][0]["command"], cmds[2].command.as_str());
        assert_eq!(group("PostToolUse", 1)["matcher"], NOT_DIALOG_MATCHER);
        assert_eq!(group("PostToolUse", 1)["hooks"][0]["command"], cmds[3].command.as_str());
        assert!(group("Notification", 0).get("matcher").is_none(), "Notification hooks fire for every type");
        assert_eq!(group("Notification", 0)["hooks"][0]["command"], cmds[4].command.as_str());
    }

    /// The matcher regex behaves as Claude Code's JavaScript `RegExp` did live: it is
    /// kept in the JSON unescaped-equal (no backslashes to lose).
    #[test]
    fn the_regex_matcher_survives_json() {
        let text = hook_settings("r", &commands()).unwrap().unwrap();
        assert!(text.contains(r#""matcher":"^(?!(AskUserQuestion|ExitPlanMode)$).*""#), "{text}");
    }

    #[test]
    fn quotes_in_commands_survive_json() {
        let mut c = commands();
        c[0].command = r#"lab hook spool-write '/tmp/we"ird\path.spool.json'"#.into();
        let v: Value = serde_json::from_str(&hook_settings("r", &c).unwrap().unwrap()).unwrap();
        assert_eq!(v["hooks"]["PreToolUse"][0]["hooks"][0]["command"], c[0].command.as_str());
    }

    #[test]
    fn empty_commands_are_refused() {
        let mut c = commands();
        c[4].command = " ".into();
        assert!(hook_settings("r", &c).unwrap_err().contains("Notification"));
        assert_eq!(hook_settings("r", &[]).unwrap().as_deref(), Some(r#"{"hooks":{},"tui":"default"}"#));
    }
}
