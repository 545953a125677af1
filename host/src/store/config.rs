//! `<home>/lab.toml`:
//!
//! ```toml
//! [providers.my-agent]
//! program = "/opt/claude/bin/claude"   # else looked up on PATH
//! env = { ANTHROPIC_BASE_URL = "http://127.0.0.1:9999" }
//! pass_env = ["MODEL_API_KEY", "AWS_*"] # optional: of lab serve's own environment only
//!                                       #   these and the basics (PATH, HOME, locale,
//!                                       #   proxies…); without it, all of it
//!
//! [serve]                               # added to lab serve's flags of the same names
//! allowed_hosts = ["lab.example.com"]   # --allowed-host
//! allowed_origins = ["https://lab.example.com"]  # --allowed-origin
//! require_token = false                 # --no-token: no token on loopback (on by default;
//!                                       #   always on off loopback)
//!
//! [notify]                              # a webhook for operators away from the browser
//! url = "https://ntfy.sh/my-topic"      # http or https; JSON POST per notification
//! headers = { Authorization = "Bearer …" }   # optional, never logged
//! events = ["question", "needs_input"]  # optional (this is the default); also "idle", "ended"
//! base_url = "https://lab.example.com"  # optional: the links' base (default: where lab serves)
//!
//! [runs]
//! worktree = true                       # a run in a git repository gets its own worktree
//!                                       #   and branch lab/<run-id> (default: true)
//! worktree_dir = "/srv/lab-worktrees"   # where they go (absolute; default <home>/worktrees)
//! host_grace_secs = 60                  # runs on a host whose runner went away end after
//!                                       #   this long without it (default 60)
//! host_transcript_max_mb = 1024         # the mirror of a host run's transcript stops
//!                                       #   growing past this (default 1024)
//! host_transcript_min_free_mb = 512     # ... or when lab's disk has less free (default 512)
//!
//! [sandbox]                             # a run's jail (a run's own "sandbox" wins)
//! default = "bwrap"                     # none (default), bwrap or podman
//! allow = ["registry.npmjs.org:443"]    # every jailed run may reach these (host:port,
//!                                       #   *.domain:port), besides its model API
//! image = "localhost/agent:1"           # podman's image
//!
//! [agents.gemini]                       # an ACP agent: provider `gemini`, no rebuild
//! acp = ["gemini", "--experimental-acp"] # its command (looked up on PATH) and arguments
//! env = { GEMINI_API_KEY = "…" }        # optional, as for providers (pass_env too)
//! display_name = "Gemini CLI"           # optional: what the UI calls it
//! start_timeout_secs = 60               # optional: initialize + session/new (default 60)
//! permission_modes = ["default", "plan"] # optional: the session modes offered (else the
//!                                       #   ones the agent reported in its newest session)
//! ```
//!
//! `[notify]` is checked by [`crate::notify::Settings::new`] when `lab serve` starts.

use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    #[serde(default)]
    pub providers: BTreeMap<String, ProviderConfig>,
    #[serde(default)]
    pub serve: ServeConfig,
    #[serde(default)]
    pub notify: Option<NotifyConfig>,
    #[serde(default)]
    pub runs: RunsConfig,
    #[serde(default)]
    pub agents: BTreeMap<String, AgentConfig>,
    #[serde(default)]
    pub hosts: BTreeMap<String, HostConfig>,
    /// `[prices."<model>"]`: what a model's tokens cost, over lab's own price table.
    #[serde(default)]
    pub prices: BTreeMap<String, Price>,
    #[serde(default)]
    pub search: SearchConfig,
    #[serde(default)]
    pub sandbox: SandboxConfig,
    /// `[[rules]]`: answer rules shared by whoever edits lab.toml, read-only from the
    /// API (their fields are checked by the rules module when lab serve starts).
    #[serde(default)]
    pub rules: Vec<toml::Value>,
}

/// `[sandbox]`: what a new run is jailed in, and what every jailed run may reach
/// (checked when lab serve starts: [`crate::sandbox`] knows the kinds and entries).
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SandboxConfig {
    /// `none`, `bwrap` or `podman` (None: `none`).
    pub default: Option<String>,
    /// Destinations (`host:port`, `*.domain:port`) on every jailed run's allowlist,
    /// besides what its provider says its agent needs.
    #[serde(default)]
    pub allow: Vec<String>,
    /// The image a `podman` sandbox runs.
    pub image: Option<String>,
    /// Let a sandboxed run have a workdir too broad to jail (`/`, `/home`, a home
    /// folder, a folder holding one): refused unless this is true. lab's own files
    /// there are masked either way.
    #[serde(default)]
    pub allow_broad_workdir: bool,
}

/// `[search]`: the index over every run's messages.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SearchConfig {
    /// Its size bound on disk, in MiB: past it the oldest messages are dropped.
    #[serde(default = "default_search_max_mb")]
    pub max_mb: u64,
}

impl Default for SearchConfig {
    fn default() -> SearchConfig {
        SearchConfig { max_mb: default_search_max_mb() }
    }
}

fn default_search_max_mb() -> u64 {
    2048
}

/// `[prices."<model>"]`: US dollars per million tokens.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Price {
    pub input: f64,
    pub output: f64,
    pub cache_read: f64,
    pub cache_write: f64,
}

/// `[hosts.<name>]`: a machine lab reaches over ssh (as `lab hosts add NAME --ssh`
/// records one); checked when lab serve starts.
#[derive(Debug, Default, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostConfig {
    /// `[user@]host`, or an alias of the operator's ssh config.
    pub ssh: String,
    pub port: Option<u16>,
    pub identity: Option<PathBuf>,
    pub known_hosts: Option<PathBuf>,
    /// Where lab's builds go there (absolute, or `~/…`).
    pub lab: Option<String>,
}

/// `[agents.<name>]`: an agent lab speaks the Agent Client Protocol with (see
/// [`crate::agents::acp`]).
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentConfig {
    /// The command and its arguments; the command is looked up on PATH unless a path.
    pub acp: Vec<String>,
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    #[serde(default)]
    pub pass_env: Option<Vec<String>>,
    pub display_name: Option<String>,
    pub start_timeout_secs: Option<u64>,
    /// The session modes `permission_mode` takes (`session/set_mode`), the UI's default
    /// first. Absent: the ones the agent offered in its newest session.
    pub permission_modes: Option<Vec<String>>,
}

impl AgentConfig {
    /// The same environment rules as a provider's.
    pub fn as_provider(&self) -> ProviderConfig {
        ProviderConfig { program: None, env: self.env.clone(), pass_env: self.pass_env.clone() }
    }

    pub fn start_timeout(&self) -> std::time::Duration {
        std::time::Duration::from_secs(self.start_timeout_secs.unwrap_or(60).clamp(1, 3600))
    }
}

/// Is `entry` a valid `pass_env` entry: a variable name, or a prefix of one then `*`?
pub fn valid_pass_env(entry: &str) -> bool {
    let name = entry.strip_suffix('*').unwrap_or(entry);
    (!name.is_empty() || entry == "*") && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// Whether `name` may name an agent (as a provider name: `a-z0-9-_`, 1–64, a letter first).
pub fn valid_agent_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
}

/// `[runs]`: what a new run gets by default.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunsConfig {
    /// A worktree for a run whose workdir is in a git repository (None: yes).
    pub worktree: Option<bool>,
    /// Where worktrees go (None: `<home>/worktrees`).
    pub worktree_dir: Option<PathBuf>,
    /// How long the runs of a host whose runner went away wait for it before they end
    /// (None: 60 s).
    pub host_grace_secs: Option<u64>,
    /// The cap on the mirror of a host run's transcript, in MiB (None: 1024).
    pub host_transcript_max_mb: Option<u64>,
    /// The free space lab keeps on its disk while mirroring, in MiB (None: 512).
    pub host_transcript_min_free_mb: Option<u64>,
    /// New runs go on by themselves once a usage limit their agent hit resets (None:
    /// no; a run's own `resume_after_limit` says otherwise).
    pub resume_after_limit: Option<bool>,
    /// The message they go on with (None: [`DEFAULT_LIMIT_PROMPT`]).
    pub resume_after_limit_prompt: Option<String>,
}

/// What a run that hit a usage limit is told when it goes on by itself.
pub const DEFAULT_LIMIT_PROMPT: &str = "The usage limit has reset. Please continue where you left off.";

/// `[notify]`: the webhook, as written (see [`crate::notify`]).
#[derive(Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NotifyConfig {
    pub url: String,
    /// Extra request headers (credentials, ntfy's `Priority`/`Tags`…): their values are
    /// never logged or shown.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    pub events: Option<Vec<String>>,
    pub base_url: Option<String>,
}

/// Without the headers' values (credentials) — and without the URL's path and query,
/// which may be a secret too (an ntfy topic is its own password).
impl std::fmt::Debug for NotifyConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NotifyConfig")
            .field("url", &"…")
            .field("headers", &self.headers.keys().collect::<Vec<_>>())
            .field("events", &self.events)
            .field("base_url", &self.base_url)
            .finish()
    }
}

/// `[serve]`: who may reach `lab serve` besides loopback pages.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServeConfig {
    #[serde(default)]
    pub allowed_hosts: Vec<String>,
    #[serde(default)]
    pub allowed_origins: Vec<String>,
    /// `None`: the default (the token is required). `Some(false)`: not on loopback.
    #[serde(default)]
    pub require_token: Option<bool>,
}

#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProviderConfig {
    pub program: Option<PathBuf>,
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// `None`: the agent gets all of lab serve's own environment. Else only the basics
    /// and these (names, or prefixes ending in `*`): see [`crate::runs::launch::agent_env`].
    #[serde(default)]
    pub pass_env: Option<Vec<String>>,
}

impl Config {
    /// Read the config; a missing file is the empty config, a malformed one an error.
    pub fn load(path: &Path) -> anyhow::Result<Config> {
        match std::fs::read_to_string(path) {
            Ok(text) => {
                let c: Config = toml::from_str(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
                for (name, p) in &c.providers {
                    if let Some(bad) = p.pass_env.iter().flatten().find(|e| !valid_pass_env(e)) {
                        anyhow::bail!(
                            "{}: [providers.{name}] pass_env entry {bad:?} is not a variable name or a prefix ending in `*`",
                            path.display()
                        );
                    }
                }
                for (name, a) in &c.agents {
                    if !valid_agent_name(name) {
                        anyhow::bail!(
                            "{}: [agents.{name}]: an agent's name is 1-64 of a-z, 0-9, - and _, starting with a letter",
                            path.display()
                        );
                    }
                    if a.acp.first().is_none_or(|c| c.is_empty()) {
                        anyhow::bail!(
                            "{}: [agents.{name}] acp must name a command: acp = [\"cmd\", \"arg\"…]",
                            path.display()
                        );
                    }
                    if let Some(bad) = a.pass_env.iter().flatten().find(|e| !valid_pass_env(e)) {
                        anyhow::bail!(
                            "{}: [agents.{name}] pass_env entry {bad:?} is not a variable name or a prefix ending in `*`",
                            path.display()
                        );
                    }
                }
                if let Some(d) = &c.runs.worktree_dir {
                    if !d.is_absolute() {
                        anyhow::bail!("{}: [runs] worktree_dir {:?} is not an absolute path", path.display(), d);
                    }
                }
                Ok(c)
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Config::default()),
            Err(e) => Err(anyhow::anyhow!("{}: {e}", path.display())),
        }
    }

    pub fn provider(&self, name: &str) -> ProviderConfig {
        self.providers.get(name).cloned().unwrap_or_default()
    }
}

/// Find `program` on `PATH` (or accept it if it is already a path).
pub fn find_program(program: &Path, path_var: Option<&std::ffi::OsStr>) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let executable =
        |p: &Path| p.is_file() && p.metadata().map(|m| m.permissions().mode() & 0o111 != 0).unwrap_or(false);
    if program.components().count() > 1 || program.is_absolute() {
        return executable(program).then(|| program.to_path_buf());
    }
    std::env::split_paths(path_var?).map(|d| d.join(program)).find(|p| executable(p))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_provider_tables_and_rejects_typos() {
        let c: Config = toml::from_str("[providers.my-agent]\nprogram = \"/x/agent\"\nenv = { A = \"1\" }\n").unwrap();
        let p = c.provider("my-agent");
        assert_eq!(p.program.unwrap(), PathBuf::from("/x/agent"));
        assert_eq!(p.env["A"], "1");
        assert!(c.provider("other").program.is_none());
        assert!(toml::from_str::<Config>("[providers.x]\nprogramm = 1\n").is_err());
    }

    #[test]
    fn parses_the_serve_table_and_rejects_typos() {
        let c: Config = toml::from_str(
            "[serve]\nallowed_hosts = [\"lab.example\"]\nallowed_origins = [\"https://lab.example\"]\nrequire_token = true\n",
        )
        .unwrap();
        assert_eq!(c.serve.allowed_hosts, ["lab.example"]);
        assert_eq!(c.serve.allowed_origins, ["https://lab.example"]);
        assert_eq!(c.serve.require_token, Some(true));
        let empty: Config = toml::from_str("").unwrap();
        assert!(empty.serve.require_token.is_none() && empty.serve.allowed_hosts.is_empty());
        assert!(toml::from_str::<Config>("[serve]\nallowed_host = [\"x\"]\n").is_err());
    }

    #[test]
    fn parses_the_notify_table_and_hides_its_secrets() {
        let c: Config = toml::from_str(
            "[notify]\nurl = \"https://ntfy.example/secret-topic\"\nheaders = { Authorization = \"Bearer s3cret\" }\n\
             events = [\"ended\"]\nbase_url = \"https://lab.example\"\n",
        )
        .unwrap();
        let n = c.notify.unwrap();
        assert_eq!(n.url, "https://ntfy.example/secret-topic");
        assert_eq!(n.headers["Authorization"], "Bearer s3cret");
        assert_eq!(n.events.as_deref(), Some(&["ended".to_string()][..]));
        assert_eq!(n.base_url.as_deref(), Some("https://lab.example"));
        let shown = format!("{n:?}");
        assert!(!shown.contains("s3cret") && !shown.contains("secret-topic"), "{shown}");
        assert!(shown.contains("Authorization"), "{shown}");
        assert!(toml::from_str::<Config>("").unwrap().notify.is_none());
        assert!(toml::from_str::<Config>("[notify]\nurl = \"http://x\"\nevent = [\"ended\"]\n").is_err());
        assert!(toml::from_str::<Config>("[notify]\nheaders = {}\n").is_err(), "url is required");
    }

    #[test]
    fn parses_acp_agents_and_checks_them() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("lab.toml");
        let load = |text: &str| {
            std::fs::write(&p, text).unwrap();
            Config::load(&p)
        };
        let c = load("[agents.gem]\nacp = [\"gem-agent\", \"--acp\"]\nenv = { K = \"v\" }\ndisplay_name = \"Gem\"\n")
            .unwrap();
        let a = &c.agents["gem"];
        assert_eq!(a.acp, ["gem-agent", "--acp"]);
        assert_eq!((a.display_name.as_deref(), a.as_provider().env["K"].as_str()), (Some("Gem"), "v"));
        assert_eq!(a.start_timeout(), std::time::Duration::from_secs(60));
        assert!(load("[agents.gem]\nacp = []\n").unwrap_err().to_string().contains("must name a command"));
        assert!(load("[agents.Gem]\nacp = [\"x\"]\n").unwrap_err().to_string().contains("name"));
        assert!(load("[agents.gem]\nacp = [\"x\"]\ncmd = 1\n").is_err());
    }

    #[test]
    fn finds_programs_on_path() {
        let sh = find_program(Path::new("sh"), Some(std::ffi::OsStr::new("/nonexistent:/bin:/usr/bin"))).unwrap();
        assert!(sh.ends_with("sh"));
        assert!(find_program(Path::new("no-such-program-xyz"), Some(std::ffi::OsStr::new("/bin"))).is_none());
    }
}
