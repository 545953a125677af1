//! What Codex needs inside a sandbox: its home (`$CODEX_HOME`, else `~/.codex/`: config,
//! sessions, rollouts, rules) writable; its model API reachable: the host of
//! `$OPENAI_BASE_URL` if set, else OpenAI's API and ChatGPT's (a ChatGPT login). A model
//! provider named only in `config.toml` is the operator's to add (lab.toml `[sandbox]
//! allow`, or on the run).

use lab_provider_sdk::SandboxNeeds;

/// Where Codex goes when nothing else is said.
pub const DEFAULT_APIS: &[&str] = &["api.openai.com:443", "chatgpt.com:443"];

pub fn needs(env: &[(String, String)]) -> SandboxNeeds {
    let var = |name: &str| env.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str()).filter(|v| !v.is_empty());
    let home = var("CODEX_HOME").map_or("~/.codex/".to_string(), |d| format!("{}/", d.trim_end_matches('/')));
    let hosts = match var("OPENAI_BASE_URL").and_then(SandboxNeeds::host_of_url) {
        Some(h) => vec![h],
        None => DEFAULT_APIS.iter().map(|h| h.to_string()).collect(),
    };
    SandboxNeeds { writable: vec![home], readable: vec![], hosts }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn its_home_and_its_model_api() {
        let n = needs(&[]);
        assert_eq!(n.writable, ["~/.codex/"]);
        assert_eq!(n.hosts, DEFAULT_APIS);
        let env = [
            ("CODEX_HOME".to_string(), "/w/codex".to_string()),
            ("OPENAI_BASE_URL".into(), "http://127.0.0.1:9/v1".into()),
        ];
        let n = needs(&env);
        assert_eq!(n.writable, ["/w/codex/"]);
        assert_eq!(n.hosts, ["127.0.0.1:9"]);
    }
}
