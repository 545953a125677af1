//! `claude-code`: lab's provider for Anthropic's Claude Code CLI.
//!
//! Everything lab knows about Claude Code lives in this crate; the host never sees a
//! tool name like `AskUserQuestion`. It exports the `hooker-provider` world: the base
//! interface plus live dialog capture through Claude Code's hooks and keystroke answers.
//!
//! | module | what | docs/compat.md |
//! |---|---|---|
//! | [`launch`] | argv (`--session-id`, `--settings`, `--permission-mode`, prompt last) and transcript path | — |
//! | [`transcript`] | session JSONL → messages, turn signals, diagnostics | §5 |
//! | [`dialog_mapper`] | the one mapper: AskUserQuestion / ExitPlanMode tool calls → dialogs | §5, §9 |
//! | [`hook_settings`] | the per-run `--settings` hooks document | §9 |
//! | [`spool`] | PreToolUse spool → pending dialog; Notification marker → blocked state | §9 |
//! | [`keystrokes`] | answer recipes for the live picker | §7 |
//!
//! Decisions the observed behaviour left open (docs/compat.md):
//!
//! - **Permission mode**: `--permission-mode` is passed only when the run asks for one;
//!   otherwise Claude Code's own settings decide, as for a hand-started `claude`.
//! - **Meta lines**: user lines Claude Code writes for itself (`isMeta`, compaction
//!   summaries, local-command and bash-mode wrappers) and sub-agent (`isSidechain`) lines
//!   are skipped silently; see [`transcript`].
//! - **Multi-select**: a single multi-select question is answerable. The notes'
//!   recipe was corrected by driving the real 2.1.198 picker (its `Up` wraps instead of
//!   clamping) and every sequence in the tests was played live; see [`keystrokes`].
//!   [`keystrokes::MULTI_SELECT_ANSWERABLE`] switches it off if a release breaks it.
//! - **Free text** ("Other") climbs to the top first like option answers (harmless, the
//!   picker clamps) and must be one non-blank line.

use lab_provider_sdk::{
    Answer, Blocked, Dialog, DialogHooker, HookContext, KeyOp, LaunchRequest, LaunchSpec, ParseOutput, Pending,
    Provider, ProviderInfo, ToolCall,
};

pub mod dialog_mapper;
pub mod hook_settings;
pub mod keystrokes;
pub mod launch;
pub mod spool;
pub mod transcript;

/// The Claude Code provider.
pub struct ClaudeCode;

impl Provider for ClaudeCode {
    fn info() -> ProviderInfo {
        ProviderInfo {
            name: "claude-code".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            description: "Claude Code (Anthropic's coding agent CLI), with live AskUserQuestion / ExitPlanMode capture"
                .into(),
            default_program: "claude".into(),
        }
    }

    fn launch(req: LaunchRequest) -> Result<LaunchSpec, String> {
        launch::launch(req)
    }

    fn parse_transcript(chunk: &[u8]) -> ParseOutput {
        transcript::parse_transcript(chunk)
    }

    fn map_dialog(call: ToolCall) -> Option<Dialog> {
        dialog_mapper::map_dialog(call)
    }
}

impl DialogHooker for ClaudeCode {
    fn hook_settings(ctx: HookContext) -> Result<String, String> {
        hook_settings::hook_settings(&ctx)
    }

    fn pending_dialog(spool: &[u8]) -> Result<Pending, String> {
        spool::pending_dialog(spool)
    }

    fn blocked_state(marker: &[u8]) -> Result<Blocked, String> {
        spool::blocked_state(marker)
    }

    fn answer_keys(dialog: Dialog, answers: Vec<Answer>) -> Result<Vec<KeyOp>, String> {
        keystrokes::answer_keys(&dialog, &answers)
    }
}

// The component's exports (the macro emits them only when building for wasm32, so the
// logic above is tested natively).
lab_provider_sdk::export_dialog_provider!(ClaudeCode);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn info_names_the_provider() {
        let i = ClaudeCode::info();
        assert_eq!(i.name, "claude-code");
        assert_eq!(i.version, env!("CARGO_PKG_VERSION"));
        assert_eq!(i.default_program, "claude");
    }

    /// The whole live path through the trait: spool → dialog → keys.
    #[test]
    fn spool_to_keystrokes_end_to_end() {
        let p = ClaudeCode::pending_dialog(include_bytes!("../testdata/spool-ask-user-question.json")).unwrap();
        let d = p.dialog.unwrap();
        let keys = ClaudeCode::answer_keys(d.clone(), vec![Answer::Option(1)]).unwrap();
        let names: Vec<_> = keys
            .iter()
            .map(|k| match k {
                KeyOp::Key(k) => k.as_str(),
                KeyOp::Literal(t) => t.as_str(),
            })
            .collect();
        assert_eq!(names, ["Down", "Down", "Down", "Down", "Up", "Up", "Up", "Up", "Down", "Enter"]);
        let keys = ClaudeCode::answer_keys(d, vec![Answer::Other("CockroachDB".into())]).unwrap();
        assert_eq!(keys[keys.len() - 2], KeyOp::Literal("CockroachDB".into()));
    }
}
