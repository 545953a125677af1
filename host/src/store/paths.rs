//! lab's home directory layout, and run-id validation (ids are checked before they
//! touch any path).
//!
//! ```text
//! <home>/lab.toml            configuration (optional)
//! <home>/registry.redb       the run registry
//! <home>/providers/*.wasm    extra provider components
//! <home>/cache/components/   compiled-component cache
//! <home>/runtime/            0700: per-run settings files, spools, markers (0600)
//! <home>/tmux.sock           the tmux server socket runs live on
//! <home>/logs/               lab serve's log
//! ```
//!
//! Whatever the umask, lab keeps its home, `logs/`, `cache/` (and `cache/components/`)
//! and `runtime/` at 0700 and its own files in them at 0600 ([`Home::prepare`] fixes
//! existing ones when `lab serve` starts). Operator files (`lab.toml`, `providers/`)
//! are left as the operator made them.

use crate::store::fsutil;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How old a temp file of a still-active run must be before start-up removes it (a
/// younger one may belong to a hook that is writing right now).
pub const TEMP_FILE_GRACE: Duration = Duration::from_secs(60);

/// The home directory: `--home`, else `$LAB_HOME`, else `$XDG_STATE_HOME/lab`, else
/// `~/.local/state/lab`.
pub fn resolve_home(flag: Option<PathBuf>) -> anyhow::Result<PathBuf> {
    let env = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty()).map(PathBuf::from);
    let home = flag
        .or_else(|| env("LAB_HOME"))
        .or_else(|| env("XDG_STATE_HOME").map(|x| x.join("lab")))
        .or_else(|| env("HOME").map(|h| h.join(".local/state/lab")))
        .ok_or_else(|| anyhow::anyhow!("cannot find a home for lab: pass --home or set LAB_HOME"))?;
    Ok(if home.is_absolute() { home } else { std::env::current_dir()?.join(home) })
}

/// A validated run id: 1–64 chars of `[a-z0-9-]`, not starting with `-`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(transparent)]
pub struct RunId(String);

impl RunId {
    pub fn parse(s: &str) -> Option<RunId> {
        let ok = !s.is_empty()
            && s.len() <= 64
            && !s.starts_with('-')
            && s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
        ok.then(|| RunId(s.to_string()))
    }

    /// A fresh random id.
    pub fn generate() -> RunId {
        let u = uuid::Uuid::new_v4().simple().to_string();
        RunId(format!("r-{}", &u[..12]))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for RunId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

#[derive(Debug, Clone)]
pub struct Home {
    pub root: PathBuf,
}

impl Home {
    pub fn new(root: PathBuf) -> Self {
        Home { root }
    }
    pub fn config_file(&self) -> PathBuf {
        self.root.join("lab.toml")
    }
    pub fn registry(&self) -> PathBuf {
        self.root.join("registry.redb")
    }
    pub fn providers_dir(&self) -> PathBuf {
        self.root.join("providers")
    }
    pub fn component_cache(&self) -> PathBuf {
        self.root.join("cache/components")
    }
    pub fn runtime_dir(&self) -> PathBuf {
        self.root.join("runtime")
    }
    pub fn logs_dir(&self) -> PathBuf {
        self.root.join("logs")
    }
    pub fn log_file(&self) -> PathBuf {
        self.logs_dir().join("lab.log")
    }
    /// The directories lab keeps private (0700), parents first.
    pub fn private_dirs(&self) -> [PathBuf; 5] {
        [self.root.clone(), self.logs_dir(), self.root.join("cache"), self.component_cache(), self.runtime_dir()]
    }

    /// Create lab's private directories (0700) and fix the modes of existing ones and
    /// of lab's own files in the home (the registry, the log, the token: 0600). Compile-cache
    /// entries are not fixed here: one that was ever writable by others is not
    /// trusted, it is recompiled (see the component cache).
    ///
    /// First, nobody else may be able to plant files in it ([`crate::store::ownership`]): the
    /// way to the home, the home, lab's directories and files in it, `lab.toml`. A
    /// violation is an error naming the path and what is wrong, and lab does not start.
    pub fn prepare(&self) -> anyhow::Result<()> {
        use crate::store::fsutil::Kind;
        use crate::store::ownership;
        use anyhow::Context as _;
        ownership::check_home(&self.root).map_err(anyhow::Error::msg)?;
        for dir in &self.private_dirs()[1..] {
            ownership::check_own(dir, Kind::Dir).map_err(anyhow::Error::msg)?;
        }
        for dir in self.private_dirs() {
            fsutil::private_dir(&dir).with_context(|| format!("making {} private (0700)", dir.display()))?;
        }
        for file in [self.registry(), self.log_file(), self.token_file(), self.devices_file()] {
            ownership::check_own(&file, Kind::File).map_err(anyhow::Error::msg)?;
            fsutil::set_mode(&file, 0o600).with_context(|| format!("making {} private (0600)", file.display()))?;
        }
        ownership::check_operator(&self.config_file(), Kind::File).map_err(anyhow::Error::msg)?;
        Ok(())
    }
    pub fn tmux_socket(&self) -> PathBuf {
        self.root.join("tmux.sock")
    }
    /// Where runs' worktrees go unless lab.toml says otherwise.
    pub fn worktrees_dir(&self) -> PathBuf {
        self.root.join("worktrees")
    }
    /// ACP runs' journals (their chats) and their agents' stderr logs.
    pub fn acp_dir(&self) -> PathBuf {
        self.root.join("acp")
    }
    /// Web Push: the VAPID key and the subscriptions.
    pub fn push_dir(&self) -> PathBuf {
        self.root.join("push")
    }
    /// lab's VAPID key pair (mode 0600): `push/vapid.key`.
    pub fn vapid_key_file(&self) -> PathBuf {
        self.push_dir().join("vapid.key")
    }
    /// The browsers subscribed to Web Push: `push/subscriptions.json`.
    pub fn push_subscriptions_file(&self) -> PathBuf {
        self.push_dir().join("subscriptions.json")
    }
    /// Where a run on another machine has its transcript mirrored here:
    /// `remote/<run>.jsonl`.
    pub fn mirror_file(&self, run: &RunId) -> PathBuf {
        self.root.join("remote").join(format!("{run}.jsonl"))
    }
    /// Each run's usage log: `usage/<run>.jsonl` (0700 folder, 0600 files).
    pub fn usage_dir(&self) -> PathBuf {
        self.root.join("usage")
    }
    /// The search index over every run's messages: `search.db` (0600).
    pub fn search_index(&self) -> PathBuf {
        self.root.join("search.db")
    }
    /// The audit log of operator actions: `audit.jsonl` (0600), rotated into
    /// `audit.jsonl.1` … by size.
    pub fn audit_file(&self) -> PathBuf {
        self.root.join("audit.jsonl")
    }
    /// The operator's answer rules: `rules.toml` (0600).
    pub fn rules_file(&self) -> PathBuf {
        self.root.join("rules.toml")
    }
    /// The refusals of callers without a credential ([`crate::edge::audit`]).
    pub fn anonymous_audit_file(&self) -> PathBuf {
        self.root.join("audit.anonymous.jsonl")
    }
    /// The logged-in devices (browsers, paired phones).
    pub fn devices_file(&self) -> PathBuf {
        self.root.join("devices.json")
    }
    /// The hosts whose runners lab accepts (`lab hosts add`): names and credential hashes.
    pub fn hosts_file(&self) -> PathBuf {
        self.root.join("hosts.json")
    }
    /// The ssh master's socket for host `name` (in the private runtime folder).
    /// The runner daemon's socket (`lab runner daemon`, on a machine lab reaches over
    /// ssh): in the 0700 runtime folder.
    pub fn runner_socket(&self) -> PathBuf {
        self.runtime_dir().join("runner.sock")
    }
    /// The runner daemon's log.
    pub fn runner_log(&self) -> PathBuf {
        self.logs_dir().join("runner.log")
    }
    pub fn ssh_control(&self, name: &str) -> PathBuf {
        self.runtime_dir().join(format!("ssh-{name}.sock"))
    }
    /// The access token: `token` (mode 0600).
    pub fn token_file(&self) -> PathBuf {
        self.root.join("token")
    }
    /// The running `lab serve`'s control socket: how the CLI reaches it (`lab pair`,
    /// `lab push-key --rotate`) without trusting whatever holds a TCP port.
    pub fn control_socket(&self) -> PathBuf {
        self.root.join("serve.sock")
    }
    /// Where a running `lab serve` says it listens (for `lab pair`): `serve.json`.
    pub fn serve_file(&self) -> PathBuf {
        self.root.join("serve.json")
    }
    /// What `lab paths` prints: each place lab keeps state, by name.
    pub fn layout(&self) -> Vec<(&'static str, PathBuf)> {
        vec![
            ("home", self.root.clone()),
            ("config", self.config_file()),
            ("token", self.token_file()),
            ("registry", self.registry()),
            ("runtime", self.runtime_dir()),
            ("providers", self.providers_dir()),
            ("log", self.log_file()),
            ("tmux_socket", self.tmux_socket()),
            ("worktrees", self.worktrees_dir()),
            ("push", self.push_dir()),
            ("acp", self.acp_dir()),
            ("usage", self.usage_dir()),
            ("search", self.search_index()),
            ("devices", self.devices_file()),
            ("hosts", self.hosts_file()),
            ("serve", self.serve_file()),
            ("control_socket", self.control_socket()),
        ]
    }
    /// A run's files in runtime/: in its jail directory `runtime/<id>.box/` if it has
    /// one (a sandboxed run's: the only directory of lab's its jail sees), else flat.
    pub fn run_files(&self, id: &RunId) -> RunFiles {
        let jail = self.jail_dir(id);
        match std::fs::symlink_metadata(&jail) {
            Ok(m) if m.is_dir() => RunFiles::jailed(&jail, id),
            _ => RunFiles::new(&self.runtime_dir(), id),
        }
    }
    /// A sandboxed run's own directory in runtime/: its hook files, the egress proxy's
    /// socket.
    pub fn jail_dir(&self, id: &RunId) -> PathBuf {
        self.runtime_dir().join(format!("{id}.box"))
    }
    /// A sandboxed run's egress files, kept after it ends: `egress/<run>.allow.json`
    /// (its allowlist, written by lab serve) and `egress/<run>.ledger.json` (what it
    /// reached and was refused, written by its proxy). Outside its jail.
    pub fn egress_files(&self, id: &RunId) -> (PathBuf, PathBuf) {
        let dir = self.egress_dir();
        (dir.join(format!("{id}.allow.json")), dir.join(format!("{id}.ledger.json")))
    }
    /// A sandboxed run's own home (its agent's HOME, its state: kept after it ends,
    /// so a resume finds its conversation).
    pub fn agent_home(&self, id: &RunId) -> PathBuf {
        self.root.join("homes").join(id.as_str())
    }
    /// Where the sandboxed runs' egress files are (0700).
    pub fn egress_dir(&self) -> PathBuf {
        self.root.join("egress")
    }
}

/// The per-run files under `runtime/`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunFiles {
    pub settings: PathBuf,
    /// The agent's argv, workdir and environment, handed to `lab agent-exec` (deleted
    /// by it at start).
    pub launch: PathBuf,
    pub spool: PathBuf,
    pub marker: PathBuf,
    /// What the agent's session-info hook said (transcript path, session id).
    pub session: PathBuf,
    /// Why `lab agent-exec` could not start the agent, or how the jailed agent ended
    /// (written by it, read when the run's session is gone: [`LAUNCH_FAILED_CAP`]).
    pub failed: PathBuf,
    /// The run's jail directory these are in (a sandboxed run's), removed with them.
    pub jail: Option<PathBuf>,
}

impl RunFiles {
    pub fn new(runtime: &Path, id: &RunId) -> Self {
        RunFiles {
            settings: runtime.join(format!("{id}.settings.json")),
            launch: runtime.join(format!("{id}.launch.json")),
            spool: runtime.join(format!("{id}.spool.json")),
            marker: runtime.join(format!("{id}.marker.json")),
            session: runtime.join(format!("{id}.session.json")),
            failed: runtime.join(format!("{id}.failed.txt")),
            jail: None,
        }
    }

    /// A sandboxed run's files, in its jail directory `dir`.
    pub fn jailed(dir: &Path, id: &RunId) -> Self {
        RunFiles { jail: Some(dir.to_path_buf()), ..RunFiles::new(dir, id) }
    }

    /// Remove the run's files (and its jail directory, with the proxy's socket).
    pub fn remove(&self) -> std::io::Result<()> {
        for f in self.all() {
            fsutil::remove_if_exists(f)?;
        }
        match &self.jail {
            Some(d) => match std::fs::remove_dir_all(d) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
                _ => Ok(()),
            },
            None => Ok(()),
        }
    }

    /// The run id a runtime file belongs to: files are `<id>.<kind>.json`, their
    /// in-flight temp files `.<id>.<kind>.json.tmp.…`.
    pub fn owner(file_name: &str) -> Option<&str> {
        file_name.trim_start_matches('.').split('.').next().filter(|s| !s.is_empty())
    }

    pub fn all(&self) -> [&Path; 6] {
        [&self.settings, &self.launch, &self.spool, &self.marker, &self.session, &self.failed]
    }

    /// The `failed` file beside a launch file (`<id>.launch.json` → `<id>.failed.txt`),
    /// None for a path that is not a launch file's.
    pub fn failed_beside(launch: &Path) -> Option<PathBuf> {
        let name = launch.file_name()?.to_str()?;
        let id = name.strip_suffix(".launch.json").filter(|id| RunId::parse(id).is_some())?;
        Some(launch.with_file_name(format!("{id}.failed.txt")))
    }
}

/// The most of a run's `failed` file that is read (it is shown as why the run ended).
pub const LAUNCH_FAILED_CAP: usize = 2048;

/// What start-up does with a file in `runtime/`: it is garbage when no active run owns
/// it, or when it is a temp file (of a hook killed mid-write) older than
/// [`TEMP_FILE_GRACE`].
pub fn runtime_file_is_garbage(file_name: &str, owner_active: bool, age: Duration) -> bool {
    !owner_active || (fsutil::is_temp_name(file_name) && age >= TEMP_FILE_GRACE)
}

/// Whether `file_name` in `runtime/` is a temp file of run `id` (`.<id>.<kind>.json.tmp.…`).
pub fn is_temp_of(file_name: &str, id: &RunId) -> bool {
    fsutil::is_temp_name(file_name) && RunFiles::owner(file_name) == Some(id.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_ids_are_validated() {
        for good in ["r-0a1b2c3d4e5f", "abc", "a-1"] {
            assert!(RunId::parse(good).is_some(), "{good}");
        }
        for bad in ["", "../etc", "a/b", "A", "-x", "a b", "a.b", &"x".repeat(65), "r%2e%2e"] {
            assert!(RunId::parse(bad).is_none(), "{bad}");
        }
        assert!(RunId::parse(RunId::generate().as_str()).is_some());
    }

    #[test]
    fn the_layout_lab_paths_prints_is_the_one_lab_uses() {
        let h = Home::new(PathBuf::from("/h"));
        let l: std::collections::HashMap<_, _> = h.layout().into_iter().collect();
        assert_eq!(l.len(), h.layout().len(), "one path a name");
        assert_eq!(l["config"], h.config_file());
        assert_eq!(l["tmux_socket"], h.tmux_socket());
        assert_eq!(l["runtime"], h.runtime_dir());
        assert_eq!(l["token"], h.token_file());
        assert!(l.values().all(|p| p.starts_with("/h")));
    }

    #[test]
    fn the_failed_file_sits_beside_a_launch_file_only() {
        let at = |p: &str| RunFiles::failed_beside(Path::new(p));
        assert_eq!(at("/h/runtime/r-1.launch.json"), Some(PathBuf::from("/h/runtime/r-1.failed.txt")));
        assert_eq!(at("/h/runtime/r-1.box/r-1.launch.json"), Some(PathBuf::from("/h/runtime/r-1.box/r-1.failed.txt")));
        for not in ["/h/runtime/r-1.spool.json", "/h/runtime/R-1.launch.json", "/h/runtime/.launch.json", "/"] {
            assert_eq!(at(not), None, "{not}");
        }
        let files = RunFiles::new(Path::new("/h/runtime"), &RunId::parse("r-1").unwrap());
        assert!(files.all().contains(&Path::new("/h/runtime/r-1.failed.txt")), "removed with the rest");
    }

    #[test]
    fn runtime_files_name_their_run() {
        assert_eq!(RunFiles::owner("r-1.spool.json"), Some("r-1"));
        assert_eq!(RunFiles::owner(".r-1.spool.json.tmp.42.7"), Some("r-1"));
        assert_eq!(RunFiles::owner("..."), None);
    }

    #[test]
    fn runtime_garbage_is_what_no_active_run_owns_and_old_temp_files() {
        let (fresh, old) = (Duration::from_secs(5), TEMP_FILE_GRACE);
        let temp = ".r-1.spool.json.tmp.42.7";
        assert!(runtime_file_is_garbage("r-1.spool.json", false, fresh));
        assert!(runtime_file_is_garbage(temp, false, fresh));
        assert!(!runtime_file_is_garbage("r-1.spool.json", true, Duration::from_secs(3600)));
        assert!(!runtime_file_is_garbage(temp, true, fresh));
        assert!(runtime_file_is_garbage(temp, true, old));

        let id = RunId::parse("r-1").unwrap();
        assert!(is_temp_of(temp, &id));
        assert!(!is_temp_of(".r-12.spool.json.tmp.42.7", &id));
        assert!(!is_temp_of("r-1.spool.json", &id));
    }

    #[test]
    fn prepare_makes_the_home_private_whatever_existed() {
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir().unwrap();
        let home = Home::new(d.path().join("h"));
        std::fs::create_dir_all(home.logs_dir()).unwrap();
        std::fs::set_permissions(&home.root, std::fs::Permissions::from_mode(0o775)).unwrap();
        std::fs::write(home.log_file(), b"old\n").unwrap();
        std::fs::set_permissions(home.log_file(), std::fs::Permissions::from_mode(0o644)).unwrap();
        home.prepare().unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o7777;
        for dir in home.private_dirs() {
            assert_eq!(mode(&dir), 0o700, "{}", dir.display());
        }
        assert_eq!(mode(&home.log_file()), 0o600);
        assert!(!home.registry().exists(), "prepare creates no registry");
    }
}
