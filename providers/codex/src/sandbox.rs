//! What Codex needs inside a sandbox: its home (`$CODEX_HOME`, else `~/.codex/`: config,
//! sessions, rollouts, rules) writable — in a sandboxed run's own home, its
//! `config.toml` seeded from the operator's; its login (`auth.json`) read; its model API reachable: the host of
//! `$OPENAI_BASE_URL` if set, else OpenAI's API and ChatGPT's (a ChatGPT login). A model
//! provider named only in `config.toml` is the operator's to add (lab.toml `[sandbox]
//! allow`, or on the run).

use lab_provider_sdk::SandboxNeeds;

/// Where Codex goes when nothing else is said.
pub const DEFAULT_APIS: &[&str] = &["api.openai.com:443", "chatgpt.com:443"];

pub fn needs(env: &[(String, String)]) -> SandboxNeeds {
    let var = |name: &str| env.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str()).filter(|v| !v.is_empty());
    let (writable, readable) = match var("CODEX_HOME") {
        Some(d) => (vec![format!("{}/", d.trim_end_matches('/'))], vec![]),
        None => {
            (vec!["~/.codex/".to_string(), "~/.codex/config.toml".to_string()], vec!["~/.codex/auth.json".to_string()])
        }
    };
    let hosts = match var("OPENAI_BASE_URL").and_then(SandboxNeeds::host_of_url) {
        Some(h) => vec![h],
        None => DEFAULT_APIS.iter().map(|h| h.to_string()).collect(),
    };
    SandboxNeeds { writable, readable, hosts }
}

/// Where Codex keeps a login: `auth.json` in its home (what `codex login` writes, a
/// ChatGPT login or an API key), or an API key in its environment.
pub fn login(env: &[(String, String)]) -> lab_provider_sdk::LoginHints {
    let var = |name: &str| env.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str()).filter(|v| !v.is_empty());
    let file = match var("CODEX_HOME") {
        Some(d) => format!("{}/auth.json", d.trim_end_matches('/')),
        None => "~/.codex/auth.json".to_string(),
    };
    lab_provider_sdk::LoginHints {
        env: ["OPENAI_API_KEY", "CODEX_API_KEY"].map(String::from).to_vec(),
        files: vec![file],
        how: "run `codex login`, or set OPENAI_API_KEY (lab.toml [providers.codex] env)".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_login_is_auth_json_in_its_home_or_a_key() {
        assert_eq!(login(&[]).files, ["~/.codex/auth.json"]);
        assert_eq!(login(&[("CODEX_HOME".into(), "/w/codex".into())]).files, ["/w/codex/auth.json"]);
        assert!(login(&[]).env.contains(&"OPENAI_API_KEY".to_string()));
    }

    #[test]
    fn its_home_and_its_model_api() {
        let n = needs(&[]);
        assert_eq!(n.writable, ["~/.codex/", "~/.codex/config.toml"]);
        assert_eq!(n.readable, ["~/.codex/auth.json"]);
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
