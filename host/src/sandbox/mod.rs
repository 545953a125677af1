//! Sandboxes: a run's agent in a jail of its own, reaching the network only through an
//! egress proxy that lets through its allowlist and nothing else.
//!
//! - [`Kind`]: what a run asks for (`none`, `bwrap`, `podman`).
//! - [`Plan`]: what its jail gets (decided by `lab serve` with the provider's
//!   [`Needs`], carried in the launch file to `lab agent-exec`).
//! - [`Jail`]: where the jail is made — one file per kind ([`bwrap`], [`podman`]); the
//!   rest of lab never asks which.
//! - [`egress`]: the allowlist, the ledger of what was reached and refused, the proxy
//!   (outside the jail) and the bridge to it (inside, the jail's only way out).
//! - [`supervise`]: `lab agent-exec`'s side: the proxy up, the jail started, its exit
//!   passed on.

pub mod bounds;
pub mod bwrap;
pub mod egress;
pub mod git;
pub mod podman;
pub mod supervise;

pub use git::Bind;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// The sandbox a run asks for.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// The agent runs with its operator's account, as before sandboxes.
    #[default]
    None,
    /// bubblewrap: the workdir and the agent's own state writable, the system read-only,
    /// every home hidden, its own network namespace.
    Bwrap,
    /// A podman container of an image the operator names, the same mounts and network.
    Podman,
}

impl Kind {
    pub const ALL: [Kind; 3] = [Kind::None, Kind::Bwrap, Kind::Podman];

    pub fn as_str(self) -> &'static str {
        match self {
            Kind::None => "none",
            Kind::Bwrap => "bwrap",
            Kind::Podman => "podman",
        }
    }

    pub fn parse(s: &str) -> Result<Kind, String> {
        Kind::ALL
            .into_iter()
            .find(|k| k.as_str() == s)
            .ok_or_else(|| format!("unknown sandbox {s:?} (one of: none, bwrap, podman)"))
    }

    /// The program that makes this kind of jail (none for `none`).
    pub fn program(self) -> Option<&'static str> {
        match self {
            Kind::None => None,
            Kind::Bwrap => Some("bwrap"),
            Kind::Podman => Some("podman"),
        }
    }

    pub fn is_none(&self) -> bool {
        *self == Kind::None
    }
}

/// What a provider says its agent needs inside a sandbox (WIT `sandbox.needs`), with
/// `~/` standing for the agent's HOME.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Needs {
    /// Paths it writes (its own state): bound read-write. One ending in `/` is a
    /// directory, made if missing.
    pub writable: Vec<String>,
    /// Paths it reads besides the system's.
    pub readable: Vec<String>,
    /// Destinations (`host:port`) it must reach (its model API).
    pub hosts: Vec<String>,
}

/// The files through which the proxy and `lab serve` talk: the socket the jail's bridge
/// reaches, the allowlist lab writes, the ledger the proxy writes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EgressFiles {
    /// The proxy's Unix socket: inside the run's hook directory, the one directory of
    /// lab's the jail sees.
    pub socket: String,
    /// `{"allow": ["host:port", …]}`, written by lab serve, read by the proxy on each
    /// connection it is asked for (outside the jail: the agent cannot change it).
    pub allow: String,
    /// What was reached and refused ([`egress::Ledger`]), written by the proxy (outside
    /// the jail too).
    pub ledger: String,
}

/// What a run's jail gets: everything `lab agent-exec` needs to make it, decided by lab
/// serve (so a remote runner's agent-exec makes the same jail there).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Plan {
    pub kind: Kind,
    /// The jail's program, as found on PATH by lab serve (bwrap, podman).
    pub program: String,
    /// The agent's HOME: the run's own (`<lab home>/homes/<run>`), an empty tmpfs in
    /// the jail but for the agent's state bound into it.
    pub home: String,
    /// Homes hidden besides `/home`, `/root` and the agent's: the operator's, where
    /// it is elsewhere.
    #[serde(default)]
    pub hidden: Vec<String>,
    /// Folders made (0700) where the jail is made, before it: the run's home and the
    /// agent's state folders in it.
    #[serde(default)]
    pub made: Vec<String>,
    /// Files of the agent's state copied from the operator's home into the run's where
    /// the jail is made, once (a copy there is kept: the run's own from then on).
    #[serde(default)]
    pub seeds: Vec<Seed>,
    /// Bound read-write at the same path: the workdir, its repository's git directory,
    /// the agent's state, the run's hook directory. Missing ones are left out.
    pub writable: Vec<String>,
    /// Bound read-only at the same path: the agent's program, lab's own.
    pub readable: Vec<String>,
    /// lab's own binary (it bridges to the proxy inside the jail).
    pub lab_exe: String,
    /// lab's own paths that lie inside a bound one (its home, its worktrees folder):
    /// an empty tmpfs over each, and what of them is the run's own (its jail
    /// directory, its worktree) bound again inside it.
    #[serde(default)]
    pub masked: Vec<String>,
    /// Paths bound from elsewhere (`from` on the machine at `at` in the jail): a
    /// sandboxed worktree's git ([`crate::worktree::jailed`]).
    #[serde(default)]
    pub binds: Vec<Bind>,
    /// A worktree run's git, made ready where the jail is made before it starts and
    /// brought back when it ends.
    #[serde(default)]
    pub git: Option<git::JailedGit>,
    pub egress: EgressFiles,
    /// podman only: the image the agent runs in.
    #[serde(default)]
    pub image: Option<String>,
}

/// A file copied into a run's home before its jail starts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Seed {
    pub from: String,
    pub to: String,
}

/// The largest file seeded into a run's home.
pub const SEED_MAX: u64 = 16 * 1024 * 1024;

/// Where the jail is made, before it: the run's home and its state folders made, the
/// seeds copied. A path of the run's home is the agent's from its last run, so
/// hostile: every one must be in the home once symlinks are resolved (a link planted
/// there to the operator's files is refused, never followed), and a seed is copied
/// only where nothing is yet.
pub fn make_state(plan: &Plan) -> Result<(), String> {
    let home = Path::new(&plan.home);
    for d in &plan.made {
        std::fs::create_dir_all(d).map_err(|e| format!("making {d}: {e}"))?;
    }
    if !plan.made.is_empty() {
        crate::store::fsutil::set_mode(home, 0o700).map_err(|e| format!("making {} private: {e}", home.display()))?;
    }
    let real_home = std::fs::canonicalize(home).map_err(|e| format!("{}: {e}", home.display()))?;
    let inside = |p: &Path| -> Result<(), String> {
        match std::fs::canonicalize(p) {
            Ok(r) if r.starts_with(&real_home) => Ok(()),
            Ok(r) => Err(format!("{} leads out of the run's home (to {}): refused", p.display(), r.display())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(format!("{}: {e}", p.display())),
        }
    };
    for d in &plan.made {
        inside(Path::new(d))?;
    }
    for s in &plan.seeds {
        let to = Path::new(&s.to);
        if let Some(parent) = to.parent() {
            std::fs::create_dir_all(parent).map_err(|e| format!("making {}: {e}", parent.display()))?;
            inside(parent)?;
        }
        if std::fs::symlink_metadata(to).is_ok() {
            continue;
        }
        match std::fs::metadata(&s.from) {
            Ok(m) if m.is_file() && m.len() <= SEED_MAX => {
                std::fs::copy(&s.from, to).map_err(|e| format!("copying {} into the run's home: {e}", s.from))?;
                crate::store::fsutil::set_mode(to, 0o600).map_err(|e| format!("{}: {e}", to.display()))?;
            }
            _ => {}
        }
    }
    for w in plan.writable.iter().map(Path::new).filter(|w| w.starts_with(home)) {
        if std::fs::symlink_metadata(w).is_ok_and(|m| m.file_type().is_symlink()) {
            return Err(format!("{} is a link in the run's home: refused", w.display()));
        }
        inside(w)?;
    }
    Ok(())
}

/// The port the bridge listens on inside the jail (its own network namespace: nothing
/// else of the machine's is there).
pub const BRIDGE_PORT: u16 = 43128;

/// The proxy variables the agent gets inside a jail (both spellings: curl reads only
/// the lower-case `http_proxy`); `NO_PROXY` goes, so loopback goes through it too.
pub fn proxy_env() -> Vec<(String, String)> {
    let url = format!("http://127.0.0.1:{BRIDGE_PORT}");
    ["HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY", "all_proxy"]
        .into_iter()
        .map(|k| (k.to_string(), url.clone()))
        .collect()
}

/// Variables a jailed agent never gets: they would send it around the proxy.
pub const NOT_IN_JAIL: &[&str] = &["NO_PROXY", "no_proxy"];

/// Where a jail is made: one implementation per [`Kind`]. It turns the agent's argv
/// (already wrapped by the bridge) into the argv that starts it jailed; `env` names the
/// variables the jail's program is started with (what the agent gets).
pub trait Jail {
    fn argv(&self, plan: &Plan, workdir: &str, inner: &[String], env: &[String]) -> Result<Vec<String>, String>;
}

/// The jail of `kind` (none for `none`).
pub fn jail(kind: Kind) -> Option<Box<dyn Jail>> {
    match kind {
        Kind::None => None,
        Kind::Bwrap => Some(Box::new(bwrap::Bwrap::of_this_system())),
        Kind::Podman => Some(Box::new(podman::Podman)),
    }
}

/// Where a run's jail is made: lab's home there (its runtime and egress folders), lab's
/// binary there, the jail's program found there, the agent program's folder; `local`:
/// this machine (what is missing can be made).
pub struct JailSite {
    pub home: crate::store::paths::Home,
    pub lab_exe: String,
    pub jail_program: std::path::PathBuf,
    pub program_dir: Option<std::path::PathBuf>,
    /// HOME when the agent's environment names none.
    pub fallback_home: Option<String>,
    pub local: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_parse_and_print() {
        for k in Kind::ALL {
            assert_eq!(Kind::parse(k.as_str()), Ok(k));
            assert_eq!(serde_json::to_value(k).unwrap(), k.as_str());
        }
        assert!(Kind::parse("docker").unwrap_err().contains("one of: none, bwrap, podman"));
        assert_eq!(Kind::None.program(), None);
        assert_eq!(Kind::Bwrap.program(), Some("bwrap"));
    }

    #[test]
    fn a_run_s_home_is_made_and_seeded_once_and_a_planted_link_is_refused() {
        let d = tempfile::tempdir().unwrap();
        let (op, home) = (d.path().join("op"), d.path().join("homes/r-1"));
        std::fs::create_dir_all(&op).unwrap();
        std::fs::write(op.join(".agent.json"), "operator's").unwrap();
        let s = |p: &Path| p.to_string_lossy().into_owned();
        let mut plan = bwrap::tests::plan();
        plan.home = s(&home);
        plan.made = vec![s(&home), s(&home.join(".agent"))];
        plan.seeds = vec![Seed { from: s(&op.join(".agent.json")), to: s(&home.join(".agent.json")) }];
        plan.writable = vec![s(&home.join(".agent")), s(&home.join(".agent.json"))];
        make_state(&plan).unwrap();
        assert_eq!(std::fs::read_to_string(home.join(".agent.json")).unwrap(), "operator's");
        assert!(home.join(".agent").is_dir());
        // The run's copy is kept: never seeded over.
        std::fs::write(home.join(".agent.json"), "the run's").unwrap();
        make_state(&plan).unwrap();
        assert_eq!(std::fs::read_to_string(home.join(".agent.json")).unwrap(), "the run's");
        // A link the agent left in its home, to the operator's files: refused.
        std::fs::remove_file(home.join(".agent.json")).unwrap();
        std::os::unix::fs::symlink(op.join(".agent.json"), home.join(".agent.json")).unwrap();
        assert!(make_state(&plan).unwrap_err().contains("is a link"));
        std::fs::remove_file(home.join(".agent.json")).unwrap();
        std::fs::remove_dir(home.join(".agent")).unwrap();
        std::os::unix::fs::symlink(&op, home.join(".agent")).unwrap();
        assert!(make_state(&plan).unwrap_err().contains("leads out of the run's home"));
    }

    #[test]
    fn the_jailed_agent_reaches_only_the_bridge() {
        let env = proxy_env();
        assert!(env.iter().any(|(k, v)| k == "http_proxy" && v == "http://127.0.0.1:43128"));
        assert!(env.iter().any(|(k, _)| k == "HTTPS_PROXY"));
    }
}
