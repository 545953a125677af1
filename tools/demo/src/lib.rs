//! `lab-demo` (what `scripts/serve --demo` runs): lab serving the real Claude Code, with
//! the agent talking to the Messages API stand-in (`messages-standin`, its built-in demo
//! conversation) on 127.0.0.1 — no account, no API key, nothing leaves the machine.
//!
//! The decisions live here as pure functions; `main.rs` does the I/O:
//!
//! * [`Layout`]: the demo's state, outside the repo — `lab/` (lab's home: registry,
//!   lab.toml, tmux socket), `agent-home/` (the agent's isolated `HOME`), `workdir/`
//!   (where demo runs work; pre-trusted);
//! * [`claude_config`]: the agent's `~/.claude.json` — onboarding done, a theme, the
//!   dummy key approved, the demo workdir trusted — merged into what is already there;
//! * [`lab_toml`]: `[providers.claude-code]` with the program and the agent's
//!   environment, every address in it loopback;
//! * [`serve_env`]: `lab serve`'s own environment — an allowlist, so nothing from the
//!   operator's shell (`ANTHROPIC_*`, proxies, cloud-provider switches) can point the
//!   agent anywhere else.

use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The dummy API key the agent is given; the stand-in accepts anything.
pub const DEMO_KEY: &str = "sk-ant-demo-0000000000-local-standin-not-a-real-key";

/// How long Claude Code waits before answering a question by itself (its 60 s
/// "auto-continue"): a day, so the newcomer has time to read the card.
pub const AFK_TIMEOUT_MS: &str = "86400000";

/// Variables `lab serve` (and so the agent) keeps from the environment it was started in.
pub const KEPT_VARS: &[&str] =
    &["PATH", "USER", "LOGNAME", "SHELL", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR", "TERM", "LAB_LOG"];

/// The demo's folders under its state directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout {
    pub root: PathBuf,
    /// lab's home (`lab serve --home`).
    pub lab_home: PathBuf,
    /// The agent's `HOME`.
    pub agent_home: PathBuf,
    /// Where demo runs are started.
    pub workdir: PathBuf,
}

impl Layout {
    pub fn new(root: impl Into<PathBuf>) -> Layout {
        let root = root.into();
        Layout { lab_home: root.join("lab"), agent_home: root.join("agent-home"), workdir: root.join("workdir"), root }
    }

    /// `$XDG_STATE_HOME/lab-demo`, else `$HOME/.local/state/lab-demo` (relative or empty
    /// values are ignored, as the XDG spec says).
    pub fn default_root(xdg_state_home: Option<&str>, home: Option<&str>) -> Option<PathBuf> {
        let abs = |v: Option<&str>| v.filter(|v| v.starts_with('/')).map(PathBuf::from);
        abs(xdg_state_home).or_else(|| abs(home).map(|h| h.join(".local/state"))).map(|d| d.join("lab-demo"))
    }

    pub fn claude_json(&self) -> PathBuf {
        self.agent_home.join(".claude.json")
    }
}

/// Where lab keeps what the demo writes or ends, as `lab paths --home <lab home> --json`
/// says (the demo never re-derives lab's layout).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LabPaths {
    /// `lab.toml`.
    pub config: PathBuf,
    /// The tmux socket lab serves its runs on.
    pub tmux_socket: PathBuf,
}

impl LabPaths {
    /// Parse `lab paths --json`'s output.
    pub fn parse(json: &str) -> Result<LabPaths, String> {
        let v: serde_json::Value =
            serde_json::from_str(json.trim()).map_err(|e| format!("`lab paths --json` printed no JSON object: {e}"))?;
        let path = |name: &str| {
            v.get(name)
                .and_then(serde_json::Value::as_str)
                .filter(|p| p.starts_with('/'))
                .map(PathBuf::from)
                .ok_or_else(|| format!("`lab paths --json` gave no absolute `{name}`: {v}"))
        };
        Ok(LabPaths { config: path("config")?, tmux_socket: path("tmux_socket")? })
    }
}

/// The agent's `~/.claude.json`: `existing` (what Claude Code wrote last time, if it is a
/// JSON object) with onboarding marked done, a theme if none, `key` approved and
/// `workdir` trusted — so no start-up dialog eats the keys lab plays.
pub fn claude_config(existing: Option<Value>, key: &str, workdir: &Path) -> Value {
    let mut c = existing.filter(Value::is_object).unwrap_or_else(|| json!({}));
    c["hasCompletedOnboarding"] = json!(true);
    if !c["theme"].is_string() {
        c["theme"] = json!("dark");
    }
    // Claude Code remembers an approved key by its last 20 characters.
    let suffix = &key[key.len().saturating_sub(20)..];
    if !c["customApiKeyResponses"].is_object() {
        c["customApiKeyResponses"] = json!({});
    }
    let responses = &mut c["customApiKeyResponses"];
    let mut approved: Vec<Value> = responses["approved"].as_array().cloned().unwrap_or_default();
    if !approved.iter().any(|a| a == suffix) {
        approved.push(json!(suffix));
    }
    responses["approved"] = json!(approved);
    if let Some(rejected) = responses["rejected"].as_array() {
        let kept: Vec<Value> = rejected.iter().filter(|r| *r != suffix).cloned().collect();
        responses["rejected"] = json!(kept);
    } else {
        responses["rejected"] = json!([]);
    }
    if !c["projects"].is_object() {
        c["projects"] = json!({});
    }
    let project = &mut c["projects"][workdir.to_string_lossy().as_ref()];
    if !project.is_object() {
        *project = json!({});
    }
    project["hasTrustDialogAccepted"] = json!(true);
    c
}

/// The environment the agent gets on top of `lab serve`'s: everything that could reach
/// the network points at the stand-in on loopback or is switched off.
pub fn agent_env(standin_url: &str, agent_home: &Path) -> BTreeMap<String, String> {
    [
        ("ANTHROPIC_BASE_URL", standin_url.to_string()),
        ("ANTHROPIC_API_KEY", DEMO_KEY.to_string()),
        ("DISABLE_TELEMETRY", "1".into()),
        ("DISABLE_ERROR_REPORTING", "1".into()),
        ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1".into()),
        ("DISABLE_AUTOUPDATER", "1".into()),
        ("CLAUDE_AFK_TIMEOUT_MS", AFK_TIMEOUT_MS.into()),
        ("HOME", agent_home.to_string_lossy().into_owned()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

/// `<lab home>/lab.toml` for the demo.
pub fn lab_toml(claude: &Path, env: &BTreeMap<String, String>) -> String {
    let mut provider = toml::Table::new();
    provider.insert("program".into(), toml::Value::String(claude.to_string_lossy().into_owned()));
    let env: toml::Table = env.iter().map(|(k, v)| (k.clone(), toml::Value::String(v.clone()))).collect();
    provider.insert("env".into(), toml::Value::Table(env));
    let mut providers = toml::Table::new();
    providers.insert("claude-code".into(), toml::Value::Table(provider));
    let mut top = toml::Table::new();
    top.insert("providers".into(), toml::Value::Table(providers));
    format!(
        "# Written by lab-demo (scripts/serve --demo) on every start: the agent talks to the\n\
         # scripted stand-in on 127.0.0.1 only.\n{}",
        toml::to_string(&top).expect("a TOML table serialises")
    )
}

/// `lab serve`'s environment: the [`KEPT_VARS`] of `inherited`, `HOME` set to the agent's
/// home, and a UTF-8 `LANG` when none is set (the agent's TUI draws box characters).
pub fn serve_env(inherited: impl IntoIterator<Item = (String, String)>, agent_home: &Path) -> BTreeMap<String, String> {
    let mut env: BTreeMap<String, String> =
        inherited.into_iter().filter(|(k, _)| KEPT_VARS.contains(&k.as_str())).collect();
    env.insert("HOME".into(), agent_home.to_string_lossy().into_owned());
    env.entry("LANG".into()).or_insert_with(|| "C.UTF-8".into());
    env
}

/// Whether `url` is `http://` to a loopback address (127.0.0.0/8, `[::1]`, `localhost`).
pub fn is_loopback_url(url: &str) -> bool {
    let Some(rest) = url.strip_prefix("http://") else { return false };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let host = match authority.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or(""),
        None => authority.rsplit_once(':').map_or(authority, |(h, _)| h),
    };
    host == "localhost" || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// What `lab-demo` was asked to do.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Args {
    pub state_dir: Option<PathBuf>,
    pub lab: Option<PathBuf>,
    pub claude: Option<PathBuf>,
    /// Passed on to `lab serve` (e.g. `--addr 127.0.0.1:8080`).
    pub serve_args: Vec<String>,
}

pub const USAGE: &str =
    "usage: lab-demo [--state-dir DIR] [--lab PATH] [--claude PATH] [lab serve options, e.g. --addr 127.0.0.1:7777]";

impl Args {
    pub fn parse(args: impl IntoIterator<Item = String>) -> Result<Args, String> {
        let mut out = Args::default();
        let mut it = args.into_iter();
        while let Some(a) = it.next() {
            let (name, inline) = match a.split_once('=') {
                Some((n, v)) if n.starts_with("--") => (n.to_string(), Some(v.to_string())),
                _ => (a.clone(), None),
            };
            let slot = match name.as_str() {
                "--state-dir" => &mut out.state_dir,
                "--lab" => &mut out.lab,
                "--claude" => &mut out.claude,
                "--home" | "--demo" | "--demo-workdir" => {
                    return Err(format!("{name} is set by lab-demo (the demo keeps its state in --state-dir)"))
                }
                _ => {
                    out.serve_args.push(a);
                    continue;
                }
            };
            let value = inline.or_else(|| it.next()).filter(|v| !v.is_empty());
            *slot = Some(PathBuf::from(value.ok_or_else(|| format!("{name} needs a value"))?));
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_layout_lives_under_the_xdg_state_home() {
        assert_eq!(Layout::default_root(Some("/s"), Some("/h")), Some(PathBuf::from("/s/lab-demo")));
        assert_eq!(Layout::default_root(Some("rel"), Some("/h")), Some(PathBuf::from("/h/.local/state/lab-demo")));
        assert_eq!(Layout::default_root(None, None), None);
        let l = Layout::new("/d");
        assert_eq!(l.lab_home, PathBuf::from("/d/lab"));
        assert_eq!(l.claude_json(), PathBuf::from("/d/agent-home/.claude.json"));
        assert_eq!(l.workdir, PathBuf::from("/d/workdir"));
    }

    #[test]
    fn lab_s_paths_are_read_from_what_lab_paths_prints() {
        let p = LabPaths::parse(
            "{\"home\":\"/d/lab\",\"config\":\"/d/lab/lab.toml\",\"tmux_socket\":\"/d/lab/tmux.sock\"}\n",
        )
        .unwrap();
        assert_eq!(p, LabPaths { config: "/d/lab/lab.toml".into(), tmux_socket: "/d/lab/tmux.sock".into() });
        assert!(LabPaths::parse("home /d/lab").unwrap_err().contains("no JSON object"));
        assert!(LabPaths::parse("{\"config\":\"/x\"}").unwrap_err().contains("no absolute `tmux_socket`"));
        assert!(LabPaths::parse("{\"config\":\"rel\",\"tmux_socket\":\"/s\"}").unwrap_err().contains("`config`"));
    }

    #[test]
    fn claude_config_is_seeded_and_merged() {
        let wd = Path::new("/d/workdir");
        let c = claude_config(None, DEMO_KEY, wd);
        assert_eq!(c["hasCompletedOnboarding"], true);
        assert_eq!(c["theme"], "dark");
        assert_eq!(c["customApiKeyResponses"]["approved"], json!([&DEMO_KEY[DEMO_KEY.len() - 20..]]));
        assert_eq!(c["customApiKeyResponses"]["rejected"], json!([]));
        assert_eq!(c["projects"]["/d/workdir"]["hasTrustDialogAccepted"], true);

        // What Claude Code wrote is kept; the key is approved once; a rejection is undone.
        let suffix = &DEMO_KEY[DEMO_KEY.len() - 20..];
        let existing = json!({
            "numStartups": 3, "theme": "light", "hasCompletedOnboarding": false,
            "customApiKeyResponses": {"approved": ["other", suffix], "rejected": [suffix]},
            "projects": {"/d/workdir": {"allowedTools": ["Bash"], "hasTrustDialogAccepted": false}, "/x": {}},
        });
        let c = claude_config(Some(existing), DEMO_KEY, wd);
        assert_eq!(c["numStartups"], 3);
        assert_eq!(c["theme"], "light");
        assert_eq!(c["hasCompletedOnboarding"], true);
        assert_eq!(c["customApiKeyResponses"]["approved"], json!(["other", suffix]));
        assert_eq!(c["customApiKeyResponses"]["rejected"], json!([]));
        assert_eq!(c["projects"]["/d/workdir"], json!({"allowedTools": ["Bash"], "hasTrustDialogAccepted": true}));
        assert_eq!(c["projects"]["/x"], json!({}));
        // Junk is replaced.
        assert_eq!(claude_config(Some(json!([1])), DEMO_KEY, wd)["hasCompletedOnboarding"], true);
        let junk = json!({"customApiKeyResponses": 7, "projects": "x"});
        assert_eq!(claude_config(Some(junk), DEMO_KEY, wd)["projects"]["/d/workdir"]["hasTrustDialogAccepted"], true);
    }

    #[test]
    fn lab_toml_points_the_agent_at_loopback_only() {
        let env = agent_env("http://127.0.0.1:4321", Path::new("/d/agent-home"));
        let text = lab_toml(Path::new("/opt/claude \"x\"/claude"), &env);
        let parsed: toml::Table = toml::from_str(&text).unwrap();
        let p = &parsed["providers"]["claude-code"];
        assert_eq!(p["program"].as_str(), Some("/opt/claude \"x\"/claude"));
        let env = p["env"].as_table().unwrap();
        assert_eq!(env["ANTHROPIC_BASE_URL"].as_str(), Some("http://127.0.0.1:4321"));
        assert!(env["ANTHROPIC_API_KEY"].as_str().unwrap().starts_with("sk-ant-demo-"));
        for k in ["DISABLE_TELEMETRY", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "DISABLE_AUTOUPDATER"] {
            assert_eq!(env[k].as_str(), Some("1"), "{k}");
        }
        assert_eq!(env["HOME"].as_str(), Some("/d/agent-home"));
        // Every value that looks like an address is a loopback one.
        for (k, v) in env {
            let v = v.as_str().unwrap();
            if v.contains("://") {
                assert!(is_loopback_url(v), "{k}={v}");
            }
        }
    }

    #[test]
    fn serve_env_keeps_only_the_allowlist() {
        let inherited = [
            ("PATH", "/usr/bin"),
            ("HOME", "/root"),
            ("ANTHROPIC_BASE_URL", "https://api.example.com"),
            ("ANTHROPIC_AUTH_TOKEN", "t"),
            ("CLAUDE_CODE_USE_BEDROCK", "1"),
            ("HTTPS_PROXY", "http://proxy.example.com:3128"),
            ("http_proxy", "http://proxy.example.com:3128"),
            ("TMUX", "/tmp/tmux-0/default,1,0"),
            ("LAB_LOG", "debug"),
        ]
        .map(|(k, v)| (k.to_string(), v.to_string()));
        let env = serve_env(inherited, Path::new("/d/agent-home"));
        let keys: Vec<&str> = env.keys().map(String::as_str).collect();
        assert_eq!(keys, ["HOME", "LAB_LOG", "LANG", "PATH"]);
        assert_eq!(env["HOME"], "/d/agent-home");
        assert_eq!(env["LANG"], "C.UTF-8");
        let env = serve_env([("LANG".to_string(), "de_DE.UTF-8".to_string())], Path::new("/a"));
        assert_eq!(env["LANG"], "de_DE.UTF-8");
    }

    #[test]
    fn loopback_urls() {
        for u in ["http://127.0.0.1:1", "http://127.8.0.1/x", "http://[::1]:80/", "http://localhost:3"] {
            assert!(is_loopback_url(u), "{u}");
        }
        for u in ["https://127.0.0.1", "http://10.0.0.1:1", "http://api.anthropic.com", "http://127.0.0.1.evil.com", ""]
        {
            assert!(!is_loopback_url(u), "{u}");
        }
    }

    #[test]
    fn args_pass_lab_serve_options_through() {
        let a = |v: &[&str]| Args::parse(v.iter().map(|s| s.to_string()));
        let got = a(&["--claude", "/c", "--addr", "127.0.0.1:9", "--state-dir=/s", "--lab", "/l"]).unwrap();
        assert_eq!(got.claude, Some(PathBuf::from("/c")));
        assert_eq!(got.lab, Some(PathBuf::from("/l")));
        assert_eq!(got.state_dir, Some(PathBuf::from("/s")));
        assert_eq!(got.serve_args, ["--addr", "127.0.0.1:9"]);
        assert!(a(&["--home", "/x"]).unwrap_err().contains("--home is set by lab-demo"));
        assert!(a(&["--claude"]).unwrap_err().contains("needs a value"));
        assert!(a(&["--claude="]).unwrap_err().contains("needs a value"));
    }
}
