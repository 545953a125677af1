//! `claude-code`: lab's provider for Anthropic's Claude Code CLI.
//!
//! Everything lab knows about Claude Code lives in this crate; the host never sees a
//! tool name like `AskUserQuestion`. It exports the `screen-provider` world of
//! `lab:provider@0.5.0`: the base interface, live dialog capture through Claude Code's
//! hooks with keystroke answers, the workspace-trust screen read off the pane, and
//! each response's token usage.
//!
//! | module | what | docs/providers/claude-code/compat.md |
//! |---|---|---|
//! | [`launch`] | argv (`--session-id`, `--settings`, `--permission-mode`, prompt last) and transcript path | — |
//! | [`transcript`] | session JSONL → messages, turn signals, diagnostics | §5 |
//! | [`dialog_mapper`] | the one mapper: AskUserQuestion / ExitPlanMode tool calls → question / plan dialogs | §5, §9 |
//! | [`permission`] | PermissionRequest payload → permission dialog | §7d, §9b |
//! | [`hook_settings`] | the hook bindings and the per-run `--settings` document | §9 |
//! | [`spool`] | spool → pending dialog; Notification marker → blocked state; session info | §9 |
//! | [`keystrokes`] | answer plans for the live prompts | §7 |
//! | [`screen`] | is-drawn signals; the workspace-trust screen | §7e, §10 |
//! | [`usage`] | each response's tokens (once per `message.id`), the context in use, API errors | — |
//!
//! Decisions the observed behaviour left open (docs/providers/claude-code/compat.md):
//!
//! - **Permission mode**: `--permission-mode` is passed only when the run asks for one;
//!   otherwise Claude Code's own settings decide, as for a hand-started `claude` (on
//!   2.1.332 that is `auto`: Claude Code decides the prompts itself). The UI starts on
//!   the first of [`PERMISSION_MODES`], `default`, and sends the mode it shows.
//! - **Meta lines**: user lines Claude Code writes for itself (`isMeta`, compaction
//!   summaries, local-command and bash-mode wrappers) and sub-agent (`isSidechain`) lines
//!   are skipped silently; see [`transcript`].
//! - **Answers** are played only where the recipe was driven live on 2.1.198 (see
//!   [`keystrokes`]); anything else is shown with `answerable: false`.

/// The SDK trait this provider implements (re-exported for native users such as
/// lab's component benchmark).
pub use lab_provider_sdk::Provider;
use lab_provider_sdk::{
    Abilities, Answer, AnswerPlan, Blocked, Continuation, Dialog, DialogHooker, EarlierRun, HookBinding, HookCommand,
    LaunchRequest, LaunchSpec, ParseOutput, ProviderInfo, Samples, ScreenReader, SessionFacts, ToolUse,
};

pub mod dialog_mapper;
pub mod hook_settings;
pub mod keystrokes;
pub mod launch;
pub mod limit;
pub mod permission;
pub mod sandbox;
pub mod screen;
pub mod spool;
pub mod transcript;
pub mod usage;

/// Claude Code's permission modes (`claude --permission-mode`, 2.1.198); the first is
/// the UI's default.
pub const PERMISSION_MODES: &[&str] = &["default", "auto", "plan", "acceptEdits", "bypassPermissions", "dontAsk"];

/// The Claude Code provider.
pub struct ClaudeCode;

impl Provider for ClaudeCode {
    fn info() -> ProviderInfo {
        ProviderInfo {
            name: "claude-code".into(),
            display_name: "Claude Code".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            description: "Claude Code (Anthropic's coding agent CLI), with live question, plan and permission prompts"
                .into(),
            default_program: "claude".into(),
            permission_modes: PERMISSION_MODES.iter().map(|m| m.to_string()).collect(),
        }
    }

    fn launch(req: LaunchRequest) -> Result<LaunchSpec, String> {
        launch::launch(req)
    }

    fn parse_transcript(chunk: &[u8]) -> ParseOutput {
        transcript::parse_transcript(chunk)
    }

    fn map_dialog(call: ToolUse) -> Option<Dialog> {
        dialog_mapper::map_dialog(call)
    }

    fn self_test_samples() -> Samples {
        samples()
    }

    fn abilities() -> Abilities {
        Abilities { resume: true, fork: true }
    }

    fn continue_session(req: LaunchRequest, how: Continuation, earlier: EarlierRun) -> Result<LaunchSpec, String> {
        launch::continue_session(req, how, earlier)
    }

    fn usage_limit(msg: &lab_provider_sdk::Message) -> Option<lab_provider_sdk::UsageLimit> {
        limit::usage_limit(msg)
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
}

impl DialogHooker for ClaudeCode {
    fn hook_wiring() -> Vec<HookBinding> {
        hook_settings::hook_wiring()
    }

    fn hook_settings(run_id: &str, hooks: &[HookCommand]) -> Result<Option<String>, String> {
        hook_settings::hook_settings(run_id, hooks)
    }

    fn pending_dialog(spool: &[u8], open_calls: &[ToolUse]) -> Result<Option<Dialog>, String> {
        spool::pending_dialog(spool, open_calls)
    }

    fn blocked_state(marker: &[u8]) -> Result<Blocked, String> {
        spool::blocked_state(marker)
    }

    fn session_info(payload: &[u8]) -> Result<SessionFacts, String> {
        spool::session_info(payload)
    }

    fn plan_answer(dialog: Dialog, answers: Vec<Answer>) -> Result<AnswerPlan, String> {
        keystrokes::plan_answer(&dialog, &answers)
    }

    fn is_drawn(dialog: &Dialog, pane: &str) -> bool {
        screen::is_drawn(dialog, pane)
    }

    fn prompt_facts(dialog: &Dialog) -> Option<lab_provider_sdk::PromptFacts> {
        permission::prompt_facts(dialog)
    }
}

impl ScreenReader for ClaudeCode {
    fn read_screen(pane: &str) -> Option<Dialog> {
        screen::read_screen(pane)
    }
}

/// Lines of real 2.1.198 transcripts (one per message kind the parser yields) and one
/// call of each dialog shape.
fn samples() -> Samples {
    let line = |s: &str| s.to_string();
    let ask = |questions: &str| {
        transcript::tool_use(
            "toolu_01SampleAsk",
            dialog_mapper::ASK_USER_QUESTION,
            format!(r#"{{"questions":{questions}}}"#),
        )
    };
    Samples {
        transcript_lines: vec![
            line(
                r#"{"type":"user","message":{"role":"user","content":"Please pick a database for me."},"uuid":"u1","timestamp":"2026-11-30T09:00:00.000Z","sessionId":"3f2b8c1a-5d4e-4f60-9a7b-1c2d3e4f5a6b"}"#,
            ),
            line(
                r#"{"type":"assistant","message":{"role":"assistant","content":[{"type":"thinking","thinking":"I should ask first.","signature":"s"}],"stop_reason":null},"timestamp":"2026-11-30T09:00:01.000Z","sessionId":"3f2b8c1a-5d4e-4f60-9a7b-1c2d3e4f5a6b"}"#,
            ),
            line(
                r#"{"type":"assistant","message":{"role":"assistant","content":[{"type":"text","text":"I need to ask you something."}],"stop_reason":null},"timestamp":"2026-11-30T09:00:01.100Z","sessionId":"3f2b8c1a-5d4e-4f60-9a7b-1c2d3e4f5a6b"}"#,
            ),
            line(
                r#"{"type":"assistant","message":{"role":"assistant","content":[{"type":"tool_use","id":"toolu_01SampleBash","name":"Bash","input":{"command":"ls","description":"List files"}}],"stop_reason":"tool_use"},"timestamp":"2026-11-30T09:00:02.000Z","sessionId":"3f2b8c1a-5d4e-4f60-9a7b-1c2d3e4f5a6b"}"#,
            ),
            line(
                r#"{"type":"user","message":{"role":"user","content":[{"tool_use_id":"toolu_01SampleBash","type":"tool_result","content":"README.md","is_error":false}]},"timestamp":"2026-11-30T09:00:03.000Z","sessionId":"3f2b8c1a-5d4e-4f60-9a7b-1c2d3e4f5a6b"}"#,
            ),
            line(
                r#"{"type":"user","message":{"role":"user","content":[{"type":"text","text":"see"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBOR"}}]},"timestamp":"2026-11-30T09:00:04.000Z","sessionId":"3f2b8c1a-5d4e-4f60-9a7b-1c2d3e4f5a6b"}"#,
            ),
            line(
                r#"{"type":"system","subtype":"informational","content":"Conversation compacted","timestamp":"2026-11-30T09:00:05.000Z","sessionId":"3f2b8c1a-5d4e-4f60-9a7b-1c2d3e4f5a6b"}"#,
            ),
        ],
        dialog_calls: vec![
            ask(
                r#"[{"question":"Which database should we use?","header":"Database","multiSelect":false,"options":[{"label":"Postgres","description":"Relational, robust"},{"label":"SQLite","description":"Embedded, simple"}]}]"#,
            ),
            ask(
                r#"[{"question":"Which features do you want?","header":"Features","multiSelect":true,"options":[{"label":"Auth","description":"Login and sessions"},{"label":"Search","description":"Full-text search"},{"label":"Export","description":"CSV export"}]}]"#,
            ),
            // As 2.1.198 gives it when the model wrote a plan file (the usual case).
            transcript::tool_use(
                "toolu_01SamplePlan",
                dialog_mapper::EXIT_PLAN_MODE,
                r##"{"plan":"# Plan\n\n1. Add a `hello` function.\n2. Write a test for it.\n","planFilePath":"/home/op/.claude/plans/plan-a-hello-function.md"}"##,
            ),
        ],
    }
}

// The component's exports (the macro emits them only when building for wasm32, so the
// logic above is tested natively).
lab_provider_sdk::export_screen_provider!(ClaudeCode);

#[cfg(test)]
mod tests {
    use super::*;
    use lab_provider_sdk::{Content, KeyOp};

    #[test]
    fn info_names_the_provider() {
        let i = ClaudeCode::info();
        assert_eq!(i.name, "claude-code");
        assert_eq!(i.display_name, "Claude Code");
        assert_eq!(i.version, env!("CARGO_PKG_VERSION"));
        assert_eq!(i.default_program, "claude");
        assert_eq!(i.permission_modes[0], "default", "the UI's default: no --permission-mode");
        assert!(i.permission_modes.iter().any(|m| m == "plan"));
    }

    /// The whole live path through the traits: spool → dialog → drawn → plan.
    #[test]
    fn spool_to_keystrokes_end_to_end() {
        let d = ClaudeCode::pending_dialog(include_bytes!("../testdata/spool-ask-user-question.json"), &[])
            .unwrap()
            .unwrap();
        let plan = ClaudeCode::plan_answer(d.clone(), vec![Answer::Option(1)]).unwrap();
        assert_eq!((plan.pause_ms, plan.drawn_within_ms), (250, 5000));
        let names: Vec<_> = plan
            .steps
            .iter()
            .map(|k| match k {
                KeyOp::Key(k) => k.as_str(),
                KeyOp::Literal(t) => t.as_str(),
            })
            .collect();
        assert_eq!(names, ["Down", "Down", "Down", "Down", "Up", "Up", "Up", "Up", "Down", "Enter"]);
        let plan = ClaudeCode::plan_answer(d, vec![Answer::Other("CockroachDB".into())]).unwrap();
        assert_eq!(plan.steps[plan.steps.len() - 2], KeyOp::Literal("CockroachDB".into()));
    }

    /// What `lab providers check` does with the samples: every line parses into at least
    /// one message without a diagnostic; every call maps to an answerable dialog.
    #[test]
    fn self_test_samples_pass_the_self_test() {
        let s = ClaudeCode::self_test_samples();
        let mut kinds = Vec::new();
        for l in &s.transcript_lines {
            let out = ClaudeCode::parse_transcript(format!("{l}\n").as_bytes());
            assert!(out.diagnostics.is_empty(), "{l}: {:?}", out.diagnostics);
            assert!(!out.messages.is_empty(), "{l}");
            kinds.extend(out.messages.iter().map(|m| m.kind().to_string()));
        }
        for k in ["text", "thinking", "tool_use", "tool_result", "image"] {
            assert!(kinds.iter().any(|x| x == k), "no sample yields {k}: {kinds:?}");
        }
        let shapes: Vec<_> = s
            .dialog_calls
            .iter()
            .map(|c| {
                let d = ClaudeCode::map_dialog(c.clone()).expect("maps to a dialog");
                assert!(d.answerable);
                (d.kind(), d.questions().first().map(|q| q.multi_select))
            })
            .collect();
        assert_eq!(shapes, [("question", Some(false)), ("question", Some(true)), ("plan", None)]);
        // The parsed tool_use is the same shape the mapper takes.
        let out = ClaudeCode::parse_transcript(format!("{}\n", s.transcript_lines[3]).as_bytes());
        assert!(matches!(&out.messages[0].content, Content::ToolUse(u) if u.name == "Bash"));
    }
}
