//! lab's provider for Google's Gemini CLI (`@google/gemini-cli`, seen at 0.61.0): an
//! ACP provider. Gemini CLI speaks the Agent Client Protocol itself (`gemini --acp`), and
//! there it is richer than in a terminal: every tool call it would ask about comes as a
//! `session/request_permission` with its own options (allow once, allow for the
//! session, reject), its text and tool calls as session updates, and it declares
//! `loadSession`, so a stopped run or a restart of lab picks the session up again.
//! What was seen when it was driven here is in docs/gemini-cli-observed.md.
//!
//! Usage: Gemini CLI reports a turn's tokens only in its prompt response's `_meta`
//! (`quota.model_usage`, per model; each model response's `promptTokenCount` and
//! `candidatesTokenCount` added up); [`GeminiCli::turn_usage`] reads them. A response
//! whose model the router did not name again is counted under the router's alias
//! (`auto`): it is put on the turn's one named model when there is one
//! (docs/providers/gemini-cli/observed-0.61.0.md).
//!
//! Authentication is Gemini CLI's own: with `GEMINI_API_KEY` in its environment (lab.toml
//! `[providers.gemini-cli] env` or `pass_env`) it needs no login and no settings file;
//! `GOOGLE_GEMINI_BASE_URL` points it at another address of the Gemini API.

use lab_provider_sdk::{AcpAgent, AcpLaunch, ModelTokens, ProviderInfo};
use serde_json::Value;

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

    /// A Google sign-in leaves `~/.gemini/oauth_creds.json`; an API key (Gemini API,
    /// or Vertex AI's) or a service account's credentials are variables.
    fn login_hints(env: &[(String, String)]) -> Option<lab_provider_sdk::LoginHints> {
        let _ = env;
        Some(lab_provider_sdk::LoginHints {
            env: ["GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_APPLICATION_CREDENTIALS"].map(String::from).to_vec(),
            files: vec!["~/.gemini/oauth_creds.json".into()],
            how: "run `gemini` once and sign in, or set GEMINI_API_KEY (lab.toml [providers.gemini-cli] env)".into(),
        })
    }

    fn turn_usage(response: &str) -> Vec<ModelTokens> {
        let Ok(v) = serde_json::from_str::<Value>(response) else { return Vec::new() };
        let Some(models) = v.pointer("/_meta/quota/model_usage").and_then(Value::as_array) else { return Vec::new() };
        let mut out: Vec<ModelTokens> = models
            .iter()
            .filter_map(|m| {
                let model = m.get("model")?.as_str()?.trim();
                let n = |k: &str| m.pointer(&format!("/token_count/{k}")).and_then(Value::as_u64).unwrap_or(0);
                // `promptTokenCount` holds the cached part too: Gemini CLI does not say it apart.
                let t = ModelTokens {
                    model: model.to_string(),
                    input: n("input_tokens"),
                    output: n("output_tokens"),
                    ..Default::default()
                };
                (!model.is_empty() && t.input + t.output > 0).then_some(t)
            })
            .collect();
        let named: Vec<String> = out.iter().filter(|t| !is_router(&t.model)).map(|t| t.model.clone()).collect();
        if let [one] = named.as_slice() {
            let (routed, mut rest): (Vec<ModelTokens>, Vec<ModelTokens>) =
                out.into_iter().partition(|t| is_router(&t.model));
            for r in routed {
                let t = rest.iter_mut().find(|t| &t.model == one).expect("the named model is in the list");
                t.input += r.input;
                t.output += r.output;
            }
            out = rest;
        }
        out
    }
}

/// The router's alias Gemini CLI counts a response under when no model was named for it.
fn is_router(model: &str) -> bool {
    model == "auto" || model.starts_with("auto-")
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

    #[test]
    fn a_turn_s_tokens_come_from_its_meta_each_response_once() {
        // As Gemini CLI 0.61.0 answered a turn of two responses of 10 in, 5 out each
        // (the tool call, the reply after it): the second under the router's alias.
        let r = r#"{"stopReason":"end_turn","_meta":{"quota":{"token_count":{"input_tokens":20,"output_tokens":10},
            "model_usage":[{"model":"gemini-3.8-flash","token_count":{"input_tokens":10,"output_tokens":5}},
                           {"model":"auto","token_count":{"input_tokens":10,"output_tokens":5}}]}}}"#;
        let t = GeminiCli::turn_usage(r);
        assert_eq!(t.len(), 1, "{t:?}");
        assert_eq!((t[0].model.as_str(), t[0].input, t[0].output), ("gemini-3.8-flash", 20, 10), "the turn's total");
        // Two named models: each its own; the alias alone stays as it is.
        let two = r#"{"_meta":{"quota":{"model_usage":[{"model":"a","token_count":{"input_tokens":1,"output_tokens":1}},
            {"model":"b","token_count":{"input_tokens":2,"output_tokens":2}},{"model":"auto","token_count":{"input_tokens":4,"output_tokens":4}}]}}}"#;
        let models: Vec<(String, u64)> = GeminiCli::turn_usage(two).into_iter().map(|t| (t.model, t.input)).collect();
        assert_eq!(models, [("a".to_string(), 1), ("b".to_string(), 2), ("auto".to_string(), 4)]);
        for nothing in ["", "{}", "not json", r#"{"_meta":{"quota":{"model_usage":[{"model":"x"}]}}}"#] {
            assert!(GeminiCli::turn_usage(nothing).is_empty(), "{nothing}");
        }
    }
}
