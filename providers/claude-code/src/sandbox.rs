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

#[cfg(test)]
mod tests {
    use super::*;

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
