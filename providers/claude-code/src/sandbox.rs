//! What Claude Code needs inside a sandbox: its config directory (`$CLAUDE_CONFIG_DIR`,
//! else `~/.claude/`: settings, sessions, transcripts, plans) and its global state file
//! (`~/.claude.json`: onboarding, trusted folders, approved keys; inside the config
//! directory when `CLAUDE_CONFIG_DIR` is set) writable — in a sandboxed run's own home,
//! the state file seeded from the operator's; its login (`~/.claude/.credentials.json`)
//! read; its model API reachable: the host of `$ANTHROPIC_BASE_URL`, else
//! `api.anthropic.com:443`.

use lab_provider_sdk::SandboxNeeds;

/// Where the Messages API is when nothing else is said.
pub const DEFAULT_API: &str = "api.anthropic.com:443";

pub fn needs(env: &[(String, String)]) -> SandboxNeeds {
    let var = |name: &str| env.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str()).filter(|v| !v.is_empty());
    let (writable, readable) = match var("CLAUDE_CONFIG_DIR") {
        Some(dir) => (vec![format!("{}/", dir.trim_end_matches('/'))], vec![]),
        None => (
            vec!["~/.claude/".to_string(), "~/.claude.json".to_string()],
            vec!["~/.claude/.credentials.json".to_string()],
        ),
    };
    let api = var("ANTHROPIC_BASE_URL").and_then(SandboxNeeds::host_of_url).unwrap_or_else(|| DEFAULT_API.into());
    SandboxNeeds { writable, readable, hosts: vec![api] }
}

/// Where Claude Code keeps a login: an API key or token in its environment, or the
/// credentials `/login` leaves in its config directory (on Linux; macOS keeps them in
/// the Keychain, which lab cannot see).
pub fn login(env: &[(String, String)]) -> lab_provider_sdk::LoginHints {
    let var = |name: &str| env.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str()).filter(|v| !v.is_empty());
    let file = match var("CLAUDE_CONFIG_DIR") {
        Some(dir) => format!("{}/.credentials.json", dir.trim_end_matches('/')),
        None => "~/.claude/.credentials.json".to_string(),
    };
    lab_provider_sdk::LoginHints {
        env: ["ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN"].map(String::from).to_vec(),
        files: vec![file],
        how: "run `claude` once and log in (/login), or set ANTHROPIC_API_KEY (lab.toml [providers.claude-code] env)"
            .into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_login_is_a_key_or_the_credentials_file_of_its_config_dir() {
        let h = login(&[]);
        assert!(h.env.contains(&"ANTHROPIC_API_KEY".to_string()));
        assert_eq!(h.files, ["~/.claude/.credentials.json"]);
        let moved = login(&[("CLAUDE_CONFIG_DIR".into(), "/srv/claude/".into())]);
        assert_eq!(moved.files, ["/srv/claude/.credentials.json"]);
    }

    fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn its_state_and_its_model_api() {
        let n = needs(&env(&[]));
        assert_eq!(n.writable, ["~/.claude/", "~/.claude.json"]);
        assert_eq!(n.readable, ["~/.claude/.credentials.json"]);
        assert_eq!(n.hosts, [DEFAULT_API]);
        let n = needs(&env(&[("CLAUDE_CONFIG_DIR", "/srv/claude/"), ("ANTHROPIC_BASE_URL", "http://127.0.0.1:4001")]));
        assert_eq!(n.writable, ["/srv/claude/"]);
        assert_eq!(n.hosts, ["127.0.0.1:4001"]);
        assert_eq!(needs(&env(&[("ANTHROPIC_BASE_URL", "")])).hosts, [DEFAULT_API]);
    }
}
