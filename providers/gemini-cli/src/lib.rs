//! lab's provider for Google's Gemini CLI (`@google/gemini-cli`, seen at 0.61.0): an
//! ACP provider. Gemini CLI speaks the Agent Client Protocol itself (`gemini --acp`), and
//! there it is richer than in a terminal: every tool call it would ask about comes as a
//! `session/request_permission` with its own options (allow once, allow for the
//! session, reject), its text and tool calls as session updates, and it declares
//! `loadSession`, so a stopped run or a restart of lab picks the session up again.
//! What was seen when it was driven here is in docs/gemini-cli-observed.md.
//!
//! Authentication is Gemini CLI's own: with `GEMINI_API_KEY` in its environment (lab.toml
//! `[providers.gemini-cli] env` or `pass_env`) it needs no login and no settings file;
//! `GOOGLE_GEMINI_BASE_URL` points it at another address of the Gemini API.

use lab_provider_sdk::{AcpAgent, AcpLaunch, ProviderInfo};

pub struct GeminiCli;

/// Gemini CLI's approval modes, as its ACP sessions offer them: `default` asks before
/// every tool that changes something, `autoEdit` lets edits go, `yolo` lets everything
/// go, `plan` only reads.
pub const MODES: [&str; 4] = ["default", "autoEdit", "yolo", "plan"];

impl AcpAgent for GeminiCli {
    fn info() -> ProviderInfo {
        ProviderInfo {
            name: "gemini-cli".into(),
            display_name: "Gemini CLI".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            description:
                "Google's Gemini CLI over the Agent Client Protocol: its permission prompts answered from lab, \
                          its sessions loaded again on resume"
                    .into(),
            default_program: "gemini".into(),
            permission_modes: MODES.iter().map(|m| m.to_string()).collect(),
        }
    }

    fn launch() -> AcpLaunch {
        AcpLaunch {
            args: vec!["--acp".into()],
            // Gemini CLI starts a second node process with a larger heap unless told
            // not to: one process is the one lab started, stops and accounts for.
            env: vec![("GEMINI_CLI_NO_RELAUNCH".into(), "true".into())],
            // A cold start (node loading the bundle, the session's context gathered)
            // was seen to take 3–6 s here; a loaded machine needs more.
            start_timeout_secs: 120,
        }
    }
}

lab_provider_sdk::export_acp_agent!(GeminiCli);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn declares_gemini_in_acp_mode_with_its_approval_modes() {
        let i = GeminiCli::info();
        assert_eq!((i.name.as_str(), i.default_program.as_str()), ("gemini-cli", "gemini"));
        assert_eq!(i.permission_modes[0], "default", "the UI's default asks before acting");
        let l = GeminiCli::launch();
        assert_eq!(l.args, ["--acp"]);
        assert!(l.env.iter().any(|(k, v)| k == "GEMINI_CLI_NO_RELAUNCH" && v == "true"));
    }
}
