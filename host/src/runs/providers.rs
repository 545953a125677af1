//! The providers runs use, kept current while lab serves. `<home>/providers/` is looked
//! at every [`LOOK_EVERY`]; a change that has held still for one look (a file being
//! copied in is not read half-written) reloads the set ([`ProviderSet::reload`]: an
//! unchanged build is kept, a refused file keeps the build before it in service) and
//! swaps it in whole. A new run takes the provider of the moment and keeps that build
//! (its [`Pinned`]) until it ends, whatever is swapped in meanwhile. What changed is
//! logged; a removed provider's name is kept, so a run asked of it is refused with why.

use crate::agents::components::{ComponentFacts, ComponentHost, ProviderSet};
use crate::agents::provider::Provider;
use crate::runs::Core;
use crate::store::config::{find_program, Config};
use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

/// How often the providers folder is looked at.
pub const LOOK_EVERY: Duration = Duration::from_millis(400);

/// Which build of a provider: what `GET /providers` and a run's body say.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Build {
    /// The provider's own version (`provider-info.version`).
    pub version: String,
    /// Where it was loaded from: `bundled:<name>` or the file's path.
    pub source: String,
    /// Its bytes' SHA-256, 16 hex digits (two builds may say one version).
    pub digest: String,
}

impl Build {
    pub fn of(facts: &ComponentFacts) -> Build {
        Build { version: facts.info.version.clone(), source: facts.source.to_string(), digest: facts.digest.clone() }
    }
}

/// A provider as a run holds it: the build it started with.
#[derive(Clone)]
pub struct Pinned {
    pub facts: ComponentFacts,
    pub provider: Arc<dyn Provider>,
}

/// A provider whose file went, while lab served.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Removed {
    pub build: Build,
    pub at: String,
}

/// The providers: the set serving now, swapped whole on a change; the names removed.
pub struct Providers {
    /// What loads components (none: the providers are [`Providers::fixed`]).
    host: Option<ComponentHost>,
    dir: PathBuf,
    set: RwLock<Arc<ProviderSet>>,
    /// Providers given in code ([`Providers::fixed`]).
    fixed: Vec<Pinned>,
    removed: Mutex<BTreeMap<String, Removed>>,
    /// The agents' own versions, asked in the background.
    pub versions: Arc<super::launch::agent_version::VersionCache>,
}

impl Providers {
    /// Load the bundled providers and the folder's (blocks: it compiles).
    pub fn load(host: ComponentHost, dir: PathBuf) -> Providers {
        let set = ProviderSet::load_all(&host, &dir);
        Providers {
            host: Some(host),
            dir,
            set: RwLock::new(Arc::new(set)),
            fixed: Vec::new(),
            removed: Mutex::default(),
            versions: Arc::default(),
        }
    }

    /// Providers given in code, none loaded and the folder not read (tests: a fake
    /// provider, no wasm).
    pub fn fixed(pins: Vec<Pinned>) -> Providers {
        Providers {
            host: None,
            dir: PathBuf::new(),
            set: RwLock::new(Arc::new(ProviderSet::empty())),
            fixed: pins,
            removed: Mutex::default(),
            versions: Arc::default(),
        }
    }

    /// The set serving now.
    pub fn now(&self) -> Arc<ProviderSet> {
        self.set.read().unwrap().clone()
    }

    /// The tmux provider `name` as a new run takes it, or why there is none.
    pub fn pin(&self, name: &str) -> Result<Pinned, String> {
        if let Some((facts, handle)) = self.now().get(name) {
            return Ok(Pinned { facts: facts.clone(), provider: Arc::new(handle.clone()) });
        }
        if let Some(p) = self.fixed.iter().find(|p| p.facts.info.name == name) {
            return Ok(p.clone());
        }
        match self.removed.lock().unwrap().get(name) {
            Some(r) => Err(format!(
                "provider `{name}` was removed (its file {} went at {}): runs already live go on, new ones cannot start",
                r.build.source, r.at
            )),
            None => Err(format!("unknown provider `{name}`")),
        }
    }

    /// The providers removed while lab served (not served again since).
    pub fn removed(&self) -> BTreeMap<String, Removed> {
        self.removed.lock().unwrap().clone()
    }

    /// Reload the folder and swap the set in (blocks: it compiles what changed).
    /// Returns the set now serving.
    pub fn reload(&self) -> Arc<ProviderSet> {
        let before = self.now();
        let Some(host) = &self.host else { return before };
        let next = Arc::new(before.reload(host, &self.dir));
        let changes = changes(&before, &next);
        {
            let mut removed = self.removed.lock().unwrap();
            for c in &changes {
                match c {
                    Change::Serves { name, build } => {
                        removed.remove(name);
                        tracing::info!(provider = %name, version = %build.version, build = %build.digest, source = %build.source, "provider now serves new runs");
                    }
                    Change::Removed { name, build } => {
                        tracing::warn!(provider = %name, version = %build.version, source = %build.source, "provider removed: new runs of it are refused, live ones go on");
                        removed.insert(
                            name.clone(),
                            Removed { build: build.clone(), at: crate::util::time::now_rfc3339() },
                        );
                    }
                }
            }
        }
        *self.set.write().unwrap() = next.clone();
        next
    }
}

/// What a reload changed for new runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// `name` is served by `build` now (new, or another build than before).
    Serves { name: String, build: Build },
    /// `name` is served no more.
    Removed { name: String, build: Build },
}

/// What serves differently in `next` than in `before`.
pub fn changes(before: &ProviderSet, next: &ProviderSet) -> Vec<Change> {
    let builds = |s: &ProviderSet| -> BTreeMap<String, Build> {
        s.facts().map(|f| (f.info.name.clone(), Build::of(f))).collect()
    };
    let (old, new) = (builds(before), builds(next));
    let mut out = Vec::new();
    for (name, build) in &new {
        if old.get(name) != Some(build) {
            out.push(Change::Serves { name: name.clone(), build: build.clone() });
        }
    }
    for (name, build) in old {
        if !new.contains_key(&name) {
            out.push(Change::Removed { name, build });
        }
    }
    out
}

/// One look at the folder: each entry's name with its size, times and inode, and the
/// folder's own (its mode and owner decide what may be loaded). Equal looks: nothing
/// to reload.
pub fn look(dir: &Path) -> Vec<(String, [i64; 8])> {
    let stamp = |m: &std::fs::Metadata| {
        let (mode, uid) = (i64::from(m.mode()), i64::from(m.uid()));
        [m.len() as i64, m.mtime(), m.mtime_nsec(), m.ctime(), m.ctime_nsec(), m.ino() as i64, mode, uid]
    };
    let mut out: Vec<(String, [i64; 8])> = match std::fs::read_dir(dir) {
        Ok(rd) => rd
            .filter_map(|e| e.ok())
            .filter_map(|e| {
                Some((e.file_name().to_string_lossy().into_owned(), stamp(&std::fs::metadata(e.path()).ok()?)))
            })
            .collect(),
        Err(_) => Vec::new(),
    };
    out.sort();
    if let Ok(m) = std::fs::metadata(dir) {
        out.push((".".into(), stamp(&m)));
    }
    out
}

/// Whether to reload, look by look: a look unlike the one last loaded, seen twice in a
/// row (a change still under way waits for the next look).
#[derive(Debug, Default)]
pub struct Watch<L> {
    loaded: L,
    last: Option<L>,
}

impl<L: PartialEq + Clone> Watch<L> {
    /// A watch of a folder loaded as `loaded` looked.
    pub fn new(loaded: L) -> Watch<L> {
        Watch { loaded, last: None }
    }

    /// This look: whether the folder is to be loaded again now.
    pub fn seen(&mut self, look: L) -> bool {
        if look == self.loaded {
            self.last = None;
            return false;
        }
        if self.last.as_ref() == Some(&look) {
            self.loaded = look;
            self.last = None;
            return true;
        }
        self.last = Some(look);
        false
    }
}

impl Core {
    /// The providers serving new runs now.
    pub fn providers(&self) -> Arc<ProviderSet> {
        self.providers.now()
    }

    /// The providers removed while lab served, by name.
    pub fn removed_providers(&self) -> BTreeMap<String, Removed> {
        self.providers.removed()
    }

    /// The version of the agent program a run of `provider` would start (lab.toml's
    /// `program`, else `default_program` on PATH), if it said one (`--version`, asked in
    /// the background: `None` until it answered).
    pub fn agent_version(&self, provider: &str, default_program: &str) -> Option<String> {
        let pconf = self.config.provider(provider);
        let wanted = pconf.program.clone().unwrap_or_else(|| PathBuf::from(default_program));
        let path = pconf.env.get("PATH").map(std::ffi::OsString::from).or_else(|| std::env::var_os("PATH"));
        let program = find_program(&wanted, path.as_deref())?;
        self.providers.versions.lookup(&program, path)
    }
}

/// The ACP agents lab can run with `set` ([`crate::agents::acp::agents::resolve`]),
/// what is left unused warned of.
pub(super) fn acp_agents(config: &Config, set: &ProviderSet) -> BTreeMap<String, crate::agents::acp::AcpAgent> {
    let tmux_providers: Vec<&str> = set.loaded.iter().map(|(f, _)| f.info.name.as_str()).collect();
    let (agents, unused) = crate::agents::acp::agents::resolve(config, &tmux_providers, &set.acp);
    for line in unused {
        tracing::warn!("{line}");
    }
    for (name, a) in &agents {
        tracing::info!(provider = %name, from = %a.origin(name), "ACP agent");
    }
    agents
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_change_is_loaded_once_it_held_still_for_one_look() {
        let mut w = Watch::new(1);
        assert!(!w.seen(1), "nothing changed");
        assert!(!w.seen(2), "a change, maybe under way");
        assert!(!w.seen(3), "still changing");
        assert!(w.seen(3), "held still: load");
        assert!(!w.seen(3), "loaded");
        // A change undone before it held still is nothing to load.
        assert!(!w.seen(4));
        assert!(!w.seen(3));
        assert!(!w.seen(3));
    }

    #[test]
    fn a_look_sees_a_file_rewritten_in_place_and_a_mode_changed() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("a.wasm");
        std::fs::write(&f, b"one").unwrap();
        // Written an hour ago (two writes within one clock tick have one time).
        let hour_ago = std::time::SystemTime::now() - Duration::from_secs(3600);
        std::fs::File::options().write(true).open(&f).unwrap().set_modified(hour_ago).unwrap();
        let one = look(dir.path());
        assert_eq!(one, look(dir.path()));
        std::fs::write(&f, b"two").unwrap();
        let two = look(dir.path());
        assert_ne!(one, two, "same size, new bytes");
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o666)).unwrap();
        assert_ne!(two, look(dir.path()), "a mode change");
        let three = look(dir.path());
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
        assert_ne!(three, look(dir.path()), "the folder's mode");
        assert!(look(&dir.path().join("none")).is_empty());
    }
}
