//! `codex`: lab's provider for OpenAI's Codex CLI (pinned 0.169.0).
//!
//! Everything lab knows about Codex lives in this crate. It exports the
//! `screen-provider` world of `lab:provider@0.5.0`: the base interface, live capture of
//! the command-approval prompt through Codex's hooks with keystroke answers, the
//! folder-trust screen read off the pane, and each response's token usage.
//!
//! | module | what | docs/providers/codex/compat.md |
//! |---|---|---|
//! | [`launch`] | argv (`--no-daemon`, `-c hooks.<Event>`, their `hooks.state` trust, mode flags, prompt last) | Launch, Hooks |
//! | [`rollout`] | rollout JSONL → messages, turn signals, session id, diagnostics | Rollout |
//! | [`hooks`] | the hook bindings; SessionStart → session facts; PermissionRequest → permission dialog | Hooks |
//! | [`answer`] | keys for the approval prompt (`y` / `p` / Esc, No + feedback, after a 0.5 s settle) and the trust screen; is-drawn | Approval prompt |
//! | [`screen`] | the folder-trust and hooks-review screens → generic dialogs | Trust screen |
//! | [`usage`] | `token_usage_record`s → each response's tokens; `token_count` → context and account windows; API errors | Rollout |
//!
//! Decisions (docs/providers/codex/compat.md, "What the provider relies on"):
//!
//! - **Hook trust**: lab's own hooks only, for the run only: their `trusted_hash`
//!   records go on the command line next to them ([`launch::trust_override`]); nothing
//!   is written to the user's `CODEX_HOME`. Any other untrusted hook (a repository's,
//!   the user's unreviewed ones) keeps codex's "Hooks need review" screen. Not
//!   `--dangerously-bypass-hook-trust`, which runs them all unasked.
//! - **Screens**: codex asks whether to trust a git repository its config does not
//!   list, and whether to trust hooks it has not seen reviewed; both are generic
//!   dialogs ([`screen`]).
//! - **Permission modes**: [`PERMISSION_MODES`], mapped to `-s`/`-a` flags in
//!   [`launch`]; `default` passes none (the user's config decides).
//! - **Dialog mapper**: codex's approvals are not tool calls in the rollout (there is
//!   no record of a pending approval), so `map_dialog` maps nothing.

pub use lab_provider_sdk::Provider;
use lab_provider_sdk::{
    Answer, AnswerPlan, Blocked, Dialog, DialogHooker, HookBinding, HookCommand, LaunchRequest, LaunchSpec,
    ParseOutput, ProviderInfo, Samples, ScreenReader, SessionFacts, ToolUse,
};

pub mod answer;
pub mod hooks;
pub mod launch;
pub mod rollout;
pub mod sandbox;
pub mod screen;
pub mod usage;

/// The values `permission_mode` accepts; the first is the UI's default (no flags).
pub const PERMISSION_MODES: &[&str] = &["default", "read-only", "workspace-write", "never", "danger-full-access"];

/// The Codex CLI provider.
pub struct Codex;

impl Provider for Codex {
    fn info() -> ProviderInfo {
        ProviderInfo {
            name: "codex".into(),
            display_name: "Codex CLI".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            description: "OpenAI's Codex CLI, with live command-approval prompts".into(),
            default_program: "codex".into(),
            permission_modes: PERMISSION_MODES.iter().map(|m| m.to_string()).collect(),
        }
    }

    fn launch(req: LaunchRequest) -> Result<LaunchSpec, String> {
        launch::launch(req)
    }

    fn parse_transcript(chunk: &[u8]) -> ParseOutput {
        rollout::parse_transcript(chunk)
    }

    fn map_dialog(_call: ToolUse) -> Option<Dialog> {
        None
    }

    fn read_usage(chunk: &[u8]) -> lab_provider_sdk::UsageReport {
        usage::read_usage(chunk)
    }

    fn sandbox_needs(env: &[(String, String)]) -> lab_provider_sdk::SandboxNeeds {
        sandbox::needs(env)
    }

    fn login_hints(env: &[(String, String)]) -> Option<lab_provider_sdk::LoginHints> {
        Some(sandbox::login(env))
    }

    fn abilities() -> lab_provider_sdk::Abilities {
        lab_provider_sdk::Abilities { resume: true, fork: true }
    }

    fn continue_session(
        req: LaunchRequest,
        how: lab_provider_sdk::Continuation,
        earlier: lab_provider_sdk::EarlierRun,
    ) -> Result<LaunchSpec, String> {
        launch::continue_session(req, how, earlier)
    }

    fn self_test_samples() -> Samples {
        samples()
    }
}

impl DialogHooker for Codex {
    fn hook_wiring() -> Vec<HookBinding> {
        hooks::hook_wiring()
    }

    fn hook_settings(_run_id: &str, _hooks: &[HookCommand]) -> Result<Option<String>, String> {
        Ok(None)
    }

    fn pending_dialog(spool: &[u8], open_calls: &[ToolUse]) -> Result<Option<Dialog>, String> {
        hooks::pending_dialog(spool, open_calls)
    }

    fn blocked_state(marker: &[u8]) -> Result<Blocked, String> {
        hooks::blocked_state(marker)
    }

    fn session_info(payload: &[u8]) -> Result<SessionFacts, String> {
        hooks::session_info(payload)
    }

    fn plan_answer(dialog: Dialog, answers: Vec<Answer>) -> Result<AnswerPlan, String> {
        answer::plan_answer(&dialog, &answers)
    }

    fn is_drawn(dialog: &Dialog, pane: &str) -> bool {
        answer::is_drawn(dialog, pane)
    }

    fn prompt_facts(dialog: &Dialog) -> Option<lab_provider_sdk::PromptFacts> {
        hooks::prompt_facts(dialog)
    }
}

/// Rollout lines as 0.169.0 writes them (trimmed of metadata), one per message kind;
/// no dialog calls (`map_dialog` maps none).
fn samples() -> Samples {
    let lines = [
        r#"{"timestamp":"2026-11-30T10:41:33.798Z","ordinal":7,"type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"please TOUCHME (e2e)"}],"internal_chat_message_metadata_passthrough":{"content_item_kinds":["user.text"]}}}"#,
        r#"{"timestamp":"2026-11-30T10:41:33.800Z","type":"response_item","payload":{"type":"reasoning","summary":[{"type":"summary_text","text":"I should create the file."}],"encrypted_content":null}}"#,
        r#"{"timestamp":"2026-11-30T10:41:33.868Z","ordinal":9,"type":"response_item","payload":{"type":"function_call","status":"completed","id":"fc_1","name":"exec_command","arguments":"{\"cmd\": \"touch approved.txt\", \"sandbox_permissions\": \"require_escalated\", \"justification\": \"Stand-in wants to create approved.txt\"}","call_id":"call_1"}}"#,
        r#"{"timestamp":"2026-11-30T10:41:33.999Z","ordinal":12,"type":"response_item","payload":{"type":"function_call_output","call_id":"call_1","output":"Chunk ID: 91371f\nWall time: 0.0000 seconds\nProcess exited with code 0\nOriginal token count: 0\nOutput:\n"}}"#,
        r#"{"timestamp":"2026-11-30T10:41:34.296Z","ordinal":15,"type":"response_item","payload":{"type":"message","status":"completed","id":"msg_3","role":"assistant","content":[{"type":"output_text","text":"Tool finished.","annotations":[]}]}}"#,
        r#"{"timestamp":"2026-11-30T10:41:35.000Z","type":"event_msg","payload":{"type":"turn_aborted","reason":"interrupted"}}"#,
    ];
    Samples { transcript_lines: lines.iter().map(|l| l.to_string()).collect(), dialog_calls: Vec::new() }
}

impl ScreenReader for Codex {
    fn read_screen(pane: &str) -> Option<Dialog> {
        screen::read_screen(pane)
    }
}

// The component's exports (emitted only when building for wasm32).
lab_provider_sdk::export_screen_provider!(Codex);

#[cfg(test)]
mod tests {
    use super::*;
    use lab_provider_sdk::{Content, KeyOp};

    #[test]
    fn info_names_the_provider() {
        let i = Codex::info();
        assert_eq!(
            (i.name.as_str(), i.display_name.as_str(), i.default_program.as_str()),
            ("codex", "Codex CLI", "codex")
        );
        assert_eq!(i.permission_modes[0], "default");
        assert_eq!(Codex::hook_settings("r", &[]), Ok(None));
    }

    #[test]
    fn self_test_samples_pass_the_self_test() {
        let s = Codex::self_test_samples();
        let mut kinds = Vec::new();
        for l in &s.transcript_lines {
            let out = Codex::parse_transcript(format!("{l}\n").as_bytes());
            assert!(out.diagnostics.is_empty(), "{l}: {:?}", out.diagnostics);
            assert!(!out.messages.is_empty(), "{l}");
            kinds.extend(out.messages.iter().map(|m| m.kind().to_string()));
        }
        for k in ["text", "thinking", "tool_use", "tool_result", "interrupted"] {
            assert!(kinds.iter().any(|x| x == k), "no sample yields {k}: {kinds:?}");
        }
        assert!(s.dialog_calls.is_empty());
        let out = Codex::parse_transcript(format!("{}\n", s.transcript_lines[2]).as_bytes());
        let Content::ToolUse(u) = &out.messages[0].content else { panic!() };
        assert_eq!(Codex::map_dialog(u.clone()), None);
    }

    /// The live path through the traits: spool (+ the rollout's open call) → dialog →
    /// drawn → keys.
    #[test]
    fn spool_to_keystrokes() {
        let out = Codex::parse_transcript(include_bytes!("../testdata/rollout_during_approval.jsonl"));
        let open: Vec<ToolUse> = out
            .messages
            .into_iter()
            .filter_map(|m| if let Content::ToolUse(u) = m.content { Some(u) } else { None })
            .collect();
        let d =
            Codex::pending_dialog(include_bytes!("../testdata/hook-permission-request.json"), &open).unwrap().unwrap();
        assert_eq!(d.call_id.as_deref(), Some("call_1"));
        assert!(Codex::is_drawn(&d, include_str!("../testdata/pane_approval.txt")));
        let plan = Codex::plan_answer(d, vec![Answer::Option(2)]).unwrap();
        assert_eq!(plan.steps, [KeyOp::key("Escape")]);
        assert_eq!(plan.settle_ms, 500);
    }
}
