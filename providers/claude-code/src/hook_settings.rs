//! The per-run `--settings` document that installs lab's hooks (docs/compat.md §9).
//!
//! ```json
//! {"hooks": {
//!   "PreToolUse":  [{"matcher": "AskUserQuestion|ExitPlanMode",
//!                    "hooks": [{"type": "command", "command": "<spool-write>", "timeout": 10}]}],
//!   "PostToolUse": [{"matcher": "AskUserQuestion|ExitPlanMode",
//!                    "hooks": [{"type": "command", "command": "<spool-clear> --id-field tool_use_id", "timeout": 10}]}],
//!   "Notification": [{"hooks": [{"type": "command", "command": "<marker-write>", "timeout": 10}]}]
//! }}
//! ```
//!
//! - PreToolUse fires before the picker is drawn; its stdin (the payload) is spooled
//!   verbatim and read back by [`crate::spool::pending_dialog`].
//! - PostToolUse fires when the dialog resolves (answered in the picker, from lab, or by
//!   auto-continue — not on Esc); it deletes the spool if the spooled `tool_use_id` is
//!   the one that resolved.
//! - Notification (every type) writes the blocked marker read by
//!   [`crate::spool::blocked_state`].
//!
//! All three are observe-only: lab's hook commands exit 0 with no output, which never
//! blocks a tool (only a PreToolUse exit code 2 would). `timeout` (seconds) bounds a
//! hook that hangs, so a wedged spool write can never hold up the agent for long
//! (Claude Code's own default is 60 s). `--settings` merges hooks additively with the
//! user's and the repository's settings.

use lab_provider_sdk::HookContext;
use serde_json::{json, Value};

/// The tools whose calls are interactive dialogs (Claude Code matcher syntax: an
/// exact-name alternation).
pub const DIALOG_MATCHER: &str = "AskUserQuestion|ExitPlanMode";

/// Seconds Claude Code waits for one of lab's hook commands.
pub const HOOK_TIMEOUT_SECS: u64 = 10;

/// The top-level field of the PreToolUse / PostToolUse payloads that identifies the call.
pub const ID_FIELD: &str = "tool_use_id";

/// The settings document (compact JSON text).
pub fn hook_settings(ctx: &HookContext) -> Result<String, String> {
    for (name, cmd) in
        [("spool-write", &ctx.spool_write), ("spool-clear", &ctx.spool_clear), ("marker-write", &ctx.marker_write)]
    {
        if cmd.trim().is_empty() {
            return Err(format!("the {name} hook command is empty"));
        }
    }
    let doc = json!({
        "hooks": {
            "PreToolUse": [{ "matcher": DIALOG_MATCHER, "hooks": [command(&ctx.spool_write)] }],
            "PostToolUse": [{
                "matcher": DIALOG_MATCHER,
                "hooks": [command(&format!("{} --id-field {ID_FIELD}", ctx.spool_clear))],
            }],
            "Notification": [{ "hooks": [command(&ctx.marker_write)] }],
        }
    });
    Ok(doc.to_string())
}

fn command(cmd: &str) -> Value {
    json!({ "type": "command", "command": cmd, "timeout": HOOK_TIMEOUT_SECS })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx() -> HookContext {
        HookContext {
            run_id: "r-7".into(),
            // What lab hands over: `lab hook <action> <file>` (host/src/hook.rs), quoted.
            spool_write: "/usr/local/bin/lab hook spool-write '/state/my lab/runtime/r-7.spool.json'".into(),
            spool_clear: "/usr/local/bin/lab hook spool-clear '/state/my lab/runtime/r-7.spool.json'".into(),
            marker_write: "/usr/local/bin/lab hook marker-write /state/lab/runtime/r-7.marker.json".into(),
        }
    }

    #[test]
    fn settings_parse_and_carry_matchers_and_commands() {
        let text = hook_settings(&ctx()).unwrap();
        let v: Value = serde_json::from_str(&text).unwrap();
        let hooks = v["hooks"].as_object().unwrap();
        assert_eq!(hooks.len(), 3);

        let pre = &v["hooks"]["PreToolUse"];
        assert_eq!(pre.as_array().unwrap().len(), 1);
        assert_eq!(pre[0]["matcher"], "AskUserQuestion|ExitPlanMode");
        assert_eq!(pre[0]["hooks"][0]["type"], "command");
        assert_eq!(pre[0]["hooks"][0]["command"], ctx().spool_write.as_str());
        assert_eq!(pre[0]["hooks"][0]["timeout"], 10);

        let post = &v["hooks"]["PostToolUse"];
        assert_eq!(post[0]["matcher"], "AskUserQuestion|ExitPlanMode");
        assert_eq!(post[0]["hooks"][0]["type"], "command");
        assert_eq!(
            post[0]["hooks"][0]["command"],
            "/usr/local/bin/lab hook spool-clear '/state/my lab/runtime/r-7.spool.json' --id-field tool_use_id"
        );

        let note = &v["hooks"]["Notification"];
        assert!(note[0].get("matcher").is_none(), "Notification hooks fire for every type");
        assert_eq!(note[0]["hooks"][0]["type"], "command");
        assert_eq!(note[0]["hooks"][0]["command"], ctx().marker_write.as_str());
    }

    #[test]
    fn quotes_in_commands_survive_json() {
        let mut c = ctx();
        c.spool_write = r#"lab hook spool-write '/tmp/we"ird\path.spool.json'"#.into();
        let v: Value = serde_json::from_str(&hook_settings(&c).unwrap()).unwrap();
        assert_eq!(v["hooks"]["PreToolUse"][0]["hooks"][0]["command"], c.spool_write.as_str());
    }

    #[test]
    fn empty_commands_are_refused() {
        let mut c = ctx();
        c.marker_write = " ".into();
        assert!(hook_settings(&c).unwrap_err().contains("marker-write"));
    }
}
