//! The providers lab serves: the bundled components plus `<home>/providers/*.wasm`, and
//! how that set changes when the folder does ([`ProviderSet::reload`]).
//!
//! - A file whose bytes are unchanged keeps the instance it was loaded as (nothing is
//!   compiled or started again); a new or changed file is loaded.
//! - A file that cannot be used (unreadable, writable by others, not a component lab
//!   loads, a bad name or ACP declaration) is refused with its reason; the build it
//!   would have replaced stays in service.
//! - A removed file is gone; a bundled provider it replaced serves again.
//! - A file whose provider name is a bundled one's replaces it; of two files with one
//!   name, the one already serving (else the first by path) wins, the other is refused.
//!
//! The decisions are [`merge`]'s, a pure function of the previous set, what the scan
//! found and a loader, so they are tested without wasm.

use super::{acp_declaration, ComponentFacts, ComponentHost, LoadFailure, ProviderHandle, Source, BUNDLED};
use crate::agents::model;
use sha2::{Digest as _, Sha256};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// A component's bytes' SHA-256 as 16 hex digits ([`ComponentFacts::digest`]).
pub fn digest(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().take(8).map(|b| format!("{b:02x}")).collect()
}

/// What a loaded component serves as.
#[derive(Clone)]
pub(crate) enum Served<H> {
    /// A provider whose runs live in a terminal: kept loaded, its handle.
    Tmux(H),
    /// An ACP provider: its declaration, and its handle for what it reads of its agent's
    /// own words (WIT 0.7.0 `turn-usage`).
    Acp(model::AcpLaunch, H),
}

/// One component file as scanned: its bytes, or why they cannot be used.
pub(crate) struct Scanned {
    pub path: PathBuf,
    pub bytes: Result<Vec<u8>, String>,
}

type Entry<H> = (ComponentFacts, Served<H>);

/// All providers lab serves now, and the files it refused.
pub struct ProviderSet {
    /// Tmux providers, kept loaded.
    pub loaded: Vec<(ComponentFacts, ProviderHandle)>,
    /// ACP providers (WIT 0.3.0 `acp-agent`): who each is and how to start its agent.
    pub acp: Vec<(ComponentFacts, model::AcpLaunch)>,
    /// Their handles, by provider name.
    acp_handles: BTreeMap<String, ProviderHandle>,
    /// The components refused, each with its reason.
    pub failed: Vec<LoadFailure>,
    /// The bundled providers as loaded (serving or replaced by a file: one replaced
    /// serves again when its file goes), and those that failed to load.
    bundled: Vec<Entry<ProviderHandle>>,
    bundled_failed: Vec<LoadFailure>,
}

impl ProviderSet {
    /// No provider at all.
    pub fn empty() -> ProviderSet {
        ProviderSet {
            loaded: Vec::new(),
            acp: Vec::new(),
            acp_handles: BTreeMap::new(),
            failed: Vec::new(),
            bundled: Vec::new(),
            bundled_failed: Vec::new(),
        }
    }

    /// The bundled providers only (what a runner has: it is lab serve's own build).
    pub fn bundled(host: &ComponentHost) -> ProviderSet {
        let mut set = ProviderSet::empty();
        for (name, bytes) in BUNDLED {
            match load(host, Source::Bundled(name), bytes) {
                Ok((facts, Served::Tmux(h))) => set.loaded.push((facts, h)),
                Ok((facts, Served::Acp(l, h))) => {
                    set.acp_handles.insert(facts.info.name.clone(), h);
                    set.acp.push((facts, l));
                }
                Err(error) => set.failed.push(LoadFailure { source: Source::Bundled(name), error }),
            }
        }
        set
    }

    /// The bundled providers and every file in `providers_dir`, loaded.
    pub fn load_all(host: &ComponentHost, providers_dir: &Path) -> ProviderSet {
        let mut bundled = Vec::new();
        let mut bundled_failed = Vec::new();
        for (name, bytes) in BUNDLED {
            match load(host, Source::Bundled(name), bytes) {
                Ok(e) => bundled.push(e),
                Err(error) => bundled_failed.push(LoadFailure { source: Source::Bundled(name), error }),
            }
        }
        let empty = ProviderSet { bundled, bundled_failed, ..ProviderSet::empty() };
        empty.reload(host, providers_dir)
    }

    /// The set after `providers_dir` changed (the rules are the module's). Components
    /// another user could have written or replaced are never loaded: with the folder
    /// itself unsafe, nothing new is, and what serves goes on serving.
    pub fn reload(&self, host: &ComponentHost, providers_dir: &Path) -> ProviderSet {
        let prev = self.entries();
        let (entries, mut failed) =
            match crate::store::ownership::check_operator(providers_dir, crate::store::fsutil::Kind::Dir) {
                Ok(()) => merge(&prev, &self.bundled, scan(providers_dir), |source, bytes| load(host, source, bytes)),
                Err(error) => {
                    let mut kept = self.bundled.clone();
                    for entry in prev.iter().filter(|(f, _)| matches!(f.source, Source::File(_))).cloned() {
                        match kept.iter().position(|(f, _)| f.info.name == entry.0.info.name) {
                            Some(i) => kept[i] = entry,
                            None => kept.push(entry),
                        }
                    }
                    (kept, vec![LoadFailure { source: Source::File(providers_dir.to_path_buf()), error }])
                }
            };
        for (f, _) in
            entries.iter().filter(|(f, _)| !prev.iter().any(|(p, _)| p.source == f.source && p.digest == f.digest))
        {
            if let (Source::File(path), true) =
                (&f.source, self.bundled.iter().any(|(b, _)| b.info.name == f.info.name))
            {
                tracing::info!(provider = %f.info.name, file = %path.display(), "component replaces the bundled provider");
            }
        }
        failed.splice(0..0, self.bundled_failed.iter().cloned());
        for f in &failed {
            tracing::warn!(component = %f.source, error = %f.error, "refused a provider component");
        }
        let mut loaded = Vec::new();
        let mut acp = Vec::new();
        let mut acp_handles = BTreeMap::new();
        for (facts, served) in entries {
            match served {
                Served::Tmux(h) => loaded.push((facts, h)),
                Served::Acp(l, h) => {
                    acp_handles.insert(facts.info.name.clone(), h);
                    acp.push((facts, l));
                }
            }
        }
        let (bundled, bundled_failed) = (self.bundled.clone(), self.bundled_failed.clone());
        ProviderSet { loaded, acp, acp_handles, failed, bundled, bundled_failed }
    }

    fn entries(&self) -> Vec<Entry<ProviderHandle>> {
        let tmux = self.loaded.iter().map(|(f, h)| (f.clone(), Served::Tmux(h.clone())));
        let acp = self.acp.iter().filter_map(|(f, l)| {
            let h = self.acp_handles.get(&f.info.name)?.clone();
            Some((f.clone(), Served::Acp(l.clone(), h)))
        });
        tmux.chain(acp).collect()
    }

    /// A loaded tmux provider.
    pub fn get(&self, name: &str) -> Option<&(ComponentFacts, ProviderHandle)> {
        self.loaded.iter().find(|(f, _)| f.info.name == name)
    }

    /// An ACP provider's declaration.
    pub fn get_acp(&self, name: &str) -> Option<&(ComponentFacts, model::AcpLaunch)> {
        self.acp.iter().find(|(f, _)| f.info.name == name)
    }

    /// An ACP provider's handle (to ask what its agent's own words say of a turn).
    pub fn acp_handle(&self, name: &str) -> Option<&ProviderHandle> {
        self.acp_handles.get(name)
    }

    /// Every provider's facts, tmux and ACP.
    pub fn facts(&self) -> impl Iterator<Item = &ComponentFacts> {
        self.loaded.iter().map(|(f, _)| f).chain(self.acp.iter().map(|(f, _)| f))
    }
}

/// Load one component as what it serves as (an ACP provider's declaration checked).
fn load(host: &ComponentHost, source: Source, bytes: &[u8]) -> Result<Entry<ProviderHandle>, String> {
    let (facts, handle) = host.load(source, bytes).map_err(|e| format!("{e:#}"))?;
    if facts.capabilities.acp {
        let launch = acp_declaration(&facts, &handle)?;
        return Ok((facts, Served::Acp(launch, handle)));
    }
    sandbox_needs_bounded(&handle)?;
    Ok((facts, Served::Tmux(handle)))
}

/// A provider asking its sandbox for more than lab gives (its state beyond a hidden
/// folder of the home, another tool's keys, a path outside the workdir's kind, a
/// wildcard above a registrable domain: [`crate::sandbox::bounds::check_needs`]) is
/// refused at load, asked with no environment (its defaults); what it asks with a run's
/// environment is checked again at that run's launch. A component built before WIT
/// 0.6.0 asks nothing.
fn sandbox_needs_bounded(handle: &ProviderHandle) -> Result<(), String> {
    match handle.sandbox_needs(vec![]).blocking() {
        Ok(needs) => crate::sandbox::bounds::check_needs(&needs)
            .map_err(|e| format!("it asks its sandbox for more than lab gives a provider: {e}")),
        Err(e) if e.kind == crate::agents::provider::CallErrorKind::Unsupported => Ok(()),
        Err(e) => Err(format!("it could not say what its agent needs in a sandbox: {e}")),
    }
}

/// The `.wasm` files in `dir`, sorted, each read if it is the operator's own, checked
/// as it is read ([`crate::store::ownership::read_operator`]); none if the folder
/// cannot be read.
fn scan(dir: &Path) -> Vec<Scanned> {
    let mut files: Vec<PathBuf> = match std::fs::read_dir(dir) {
        Ok(rd) => rd
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "wasm") && p.is_file())
            .collect(),
        Err(_) => Vec::new(),
    };
    files.sort();
    files
        .into_iter()
        .map(|path| {
            let bytes = crate::store::ownership::read_operator(&path);
            Scanned { path, bytes }
        })
        .collect()
}

/// The next set: the bundled providers, then each file scanned (those already serving
/// first), by the module's rules. `load` loads a new or changed file.
pub(crate) fn merge<H: Clone>(
    prev: &[Entry<H>],
    bundled: &[Entry<H>],
    mut files: Vec<Scanned>,
    mut load: impl FnMut(Source, &[u8]) -> Result<Entry<H>, String>,
) -> (Vec<Entry<H>>, Vec<LoadFailure>) {
    let was = |path: &Path| prev.iter().find(|(f, _)| f.source == Source::File(path.to_path_buf()));
    let mut out: Vec<Entry<H>> = bundled.to_vec();
    let mut failed = Vec::new();
    files.sort_by(|a, b| (was(&a.path).is_none(), &a.path).cmp(&(was(&b.path).is_none(), &b.path)));
    for file in files {
        let before = was(&file.path);
        let loaded = file.bytes.and_then(|bytes| match before {
            Some(b) if b.0.digest == digest(&bytes) => Ok(b.clone()),
            _ => load(Source::File(file.path.clone()), &bytes),
        });
        let entry = match (loaded, before) {
            (Ok(e), _) => e,
            (Err(error), before) => {
                let kept = before.map(|(f, _)| {
                    format!(
                        "; `{}` {} (build {}) from this file stays in service",
                        f.info.name, f.info.version, f.digest
                    )
                });
                let error = format!("{error}{}", kept.unwrap_or_default());
                failed.push(LoadFailure { source: Source::File(file.path.clone()), error });
                match before {
                    Some(b) => b.clone(),
                    None => continue,
                }
            }
        };
        match out.iter().position(|(f, _)| f.info.name == entry.0.info.name) {
            None => out.push(entry),
            Some(i) if matches!(out[i].0.source, Source::Bundled(_)) => out[i] = entry,
            Some(i) => failed.push(LoadFailure {
                source: entry.0.source.clone(),
                error: format!("a provider named `{}` is already loaded from {}", entry.0.info.name, out[i].0.source),
            }),
        }
    }
    (out, failed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agents::components::{Capabilities, Version};

    /// A component in these tests: its bytes are `name:version`.
    fn facts(source: Source, bytes: &[u8]) -> ComponentFacts {
        let text = String::from_utf8_lossy(bytes).into_owned();
        let (name, version) = text.split_once(':').unwrap();
        ComponentFacts {
            source,
            info: model::ProviderInfo {
                name: name.into(),
                display_name: String::new(),
                version: version.into(),
                description: String::new(),
                default_program: name.into(),
                permission_modes: Vec::new(),
            },
            capabilities: Capabilities {
                version: Version::V0_3_0,
                dialog_hooker: true,
                screen_reader: false,
                acp: false,
                abilities: Default::default(),
            },
            dialog_hooker: true,
            wit_packages: Vec::new(),
            from_cache: false,
            digest: digest(bytes),
            prompt_kinds: Vec::new(),
        }
    }

    /// A loader that counts its loads; bytes starting with `!` are not a component.
    /// The handle is the load's number, so a kept instance is told from a new one.
    fn loader(count: &mut u32) -> impl FnMut(Source, &[u8]) -> Result<Entry<u32>, String> + '_ {
        move |source, bytes| {
            if bytes.starts_with(b"!") {
                return Err("not a loadable WebAssembly component".into());
            }
            *count += 1;
            Ok((facts(source, bytes), Served::Tmux(*count)))
        }
    }

    fn file(path: &str, bytes: &str) -> Scanned {
        Scanned { path: path.into(), bytes: Ok(bytes.as_bytes().to_vec()) }
    }

    fn serving(entries: &[Entry<u32>]) -> Vec<(String, String, String, u32)> {
        entries
            .iter()
            .map(|(f, s)| {
                let h = match s {
                    Served::Tmux(h) => *h,
                    Served::Acp(_, h) => *h,
                };
                (f.info.name.clone(), f.info.version.clone(), f.source.to_string(), h)
            })
            .collect()
    }

    fn row(name: &str, version: &str, source: &str, handle: u32) -> (String, String, String, u32) {
        (name.into(), version.into(), source.into(), handle)
    }

    #[test]
    fn a_folder_s_changes_load_keep_refuse_and_remove_as_the_rules_say() {
        let bundled = vec![(facts(Source::Bundled("cc"), b"cc:1"), Served::Tmux(100))];
        let mut n = 0;
        // First scan: a new provider, and a file that replaces the bundled one.
        let (one, failed) =
            merge(&[], &bundled, vec![file("/p/a.wasm", "a:1"), file("/p/cc.wasm", "cc:2")], loader(&mut n));
        assert!(failed.is_empty());
        assert_eq!(serving(&one), [row("cc", "2", "/p/cc.wasm", 2), row("a", "1", "/p/a.wasm", 1)]);

        // Unchanged bytes keep their instance; a changed file is loaded again.
        let (two, failed) =
            merge(&one, &bundled, vec![file("/p/a.wasm", "a:2"), file("/p/cc.wasm", "cc:2")], loader(&mut n));
        assert!(failed.is_empty());
        assert_eq!(serving(&two), [row("cc", "2", "/p/cc.wasm", 2), row("a", "2", "/p/a.wasm", 3)]);

        // A corrupt build is refused, with its reason and what stays in service.
        let (three, failed) =
            merge(&two, &bundled, vec![file("/p/a.wasm", "!junk"), file("/p/cc.wasm", "cc:2")], loader(&mut n));
        assert_eq!(serving(&three), serving(&two));
        assert_eq!(failed.len(), 1);
        assert_eq!(failed[0].source, Source::File("/p/a.wasm".into()));
        assert!(
            failed[0].error.starts_with("not a loadable WebAssembly component; `a` 2 (build "),
            "{}",
            failed[0].error
        );
        assert!(failed[0].error.ends_with(") from this file stays in service"), "{}", failed[0].error);

        // An unsafe file likewise; a new broken file has nothing to keep.
        let unsafe_file = Scanned { path: "/p/a.wasm".into(), bytes: Err("/p/a.wasm: writable by others".into()) };
        let (four, failed) = merge(
            &three,
            &bundled,
            vec![unsafe_file, file("/p/cc.wasm", "cc:2"), file("/p/b.wasm", "!junk")],
            loader(&mut n),
        );
        assert_eq!(serving(&four), serving(&two));
        let why: Vec<_> = failed.iter().map(|f| (f.source.to_string(), f.error.clone())).collect();
        assert!(why[0].0 == "/p/a.wasm" && why[0].1.starts_with("/p/a.wasm: writable by others; `a` 2"), "{why:?}");
        assert_eq!(why[1], ("/p/b.wasm".into(), "not a loadable WebAssembly component".into()));
        assert_eq!(n, 3, "nothing unchanged was loaded again");

        // Removed files are gone; the bundled provider one replaced serves again.
        let (five, failed) = merge(&four, &bundled, Vec::new(), loader(&mut n));
        assert!(failed.is_empty());
        assert_eq!(serving(&five), [row("cc", "1", "bundled:cc", 100)]);
    }

    #[test]
    fn of_two_files_with_one_name_the_one_serving_wins() {
        let mut n = 0;
        let (one, _) = merge(&[], &[], vec![file("/p/z.wasm", "x:1")], loader(&mut n));
        // A newcomer that sorts first does not push out the one serving.
        let (two, failed) = merge(&one, &[], vec![file("/p/a.wasm", "x:2"), file("/p/z.wasm", "x:1")], loader(&mut n));
        assert_eq!(serving(&two), [row("x", "1", "/p/z.wasm", 1)]);
        assert_eq!(failed.len(), 1);
        assert_eq!(failed[0].error, "a provider named `x` is already loaded from /p/z.wasm");
        // With none serving, the first by path wins.
        let (three, failed) = merge(&[], &[], vec![file("/p/b.wasm", "y:2"), file("/p/a.wasm", "y:1")], loader(&mut n));
        assert_eq!(serving(&three), [row("y", "1", "/p/a.wasm", 3)]);
        assert_eq!(failed[0].source, Source::File("/p/b.wasm".into()));
    }
}
