//! lab's provider for OpenCode (`opencode-ai`, seen at 1.18.33): an ACP provider.
//! OpenCode serves the Agent Client Protocol itself (`opencode acp`): its tool calls as
//! session updates, a `session/request_permission` with its own options (allow once,
//! always allow, reject) before a tool its permissions say to ask about, the usage of
//! each turn in the standard `usage` of its prompt response, and `loadSession` (a run
//! stopped, or lab restarted, picks the session up again). What was seen when it was
//! driven here is in docs/opencode-observed.md.
//!
//! The model and its provider are OpenCode's own configuration (its `opencode.json`,
//! or `OPENCODE_CONFIG_CONTENT` in lab.toml's `[providers.opencode] env`).

use lab_provider_sdk::{AcpAgent, AcpLaunch, ProviderInfo};

pub struct OpenCode;

/// What OpenCode asks the operator about when it runs under lab: a shell command, an
/// edit, a fetch from the web. OpenCode's own default lets them all go without asking;
/// an operator steering from lab expects to be asked. Merged over OpenCode's own
/// permission settings; lab.toml's `[providers.opencode] env` sets it otherwise
/// (`OPENCODE_PERMISSION = "{}"`: the user's configuration alone).
pub const ASK: &str = r#"{"bash":"ask","edit":"ask","webfetch":"ask"}"#;

impl AcpAgent for OpenCode {
    fn info() -> ProviderInfo {
        ProviderInfo {
            name: "opencode".into(),
            display_name: "OpenCode".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            description: "OpenCode over the Agent Client Protocol: shell commands, edits and fetches asked about \
                          from lab, usage per turn, sessions loaded again on resume"
                .into(),
            default_program: "opencode".into(),
            // OpenCode offers no ACP session modes (its build/plan is a config option).
            permission_modes: Vec::new(),
        }
    }

    fn launch() -> AcpLaunch {
        AcpLaunch {
            args: vec!["acp".into()],
            env: vec![
                ("OPENCODE_PERMISSION".into(), ASK.into()),
                // A run's agent does not replace its own program while lab drives it.
                ("OPENCODE_DISABLE_AUTOUPDATE".into(), "true".into()),
            ],
            start_timeout_secs: 120,
        }
    }

    /// `opencode auth login` keeps its logins in `auth.json` under its data folder
    /// (`$XDG_DATA_HOME/opencode/`, else `~/.local/share/opencode/`); a model
    /// provider's API key in the environment does as well.
    fn login_hints(env: &[(String, String)]) -> Option<lab_provider_sdk::LoginHints> {
        let data = env.iter().find(|(k, v)| k == "XDG_DATA_HOME" && v.starts_with('/')).map(|(_, v)| v.as_str());
        let file = match data {
            Some(d) => format!("{}/opencode/auth.json", d.trim_end_matches('/')),
            None => "~/.local/share/opencode/auth.json".into(),
        };
        Some(lab_provider_sdk::LoginHints {
            env: ["ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY", "OPENROUTER_API_KEY", "GROQ_API_KEY"]
                .map(String::from)
                .to_vec(),
            files: vec![file],
            how: "run `opencode auth login`, or set a model provider's API key (lab.toml [providers.opencode] env)"
                .into(),
        })
    }
}

lab_provider_sdk::export_acp_agent!(OpenCode);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn declares_opencode_acp_asking_before_commands_edits_and_fetches() {
        let i = OpenCode::info();
        assert_eq!((i.name.as_str(), i.default_program.as_str()), ("opencode", "opencode"));
        let l = OpenCode::launch();
        assert_eq!(l.args, ["acp"]);
        let ask = &l.env.iter().find(|(k, _)| k == "OPENCODE_PERMISSION").unwrap().1;
        for tool in ["\"bash\":\"ask\"", "\"edit\":\"ask\"", "\"webfetch\":\"ask\""] {
            assert!(ask.contains(tool), "{ask}");
        }
    }
}
