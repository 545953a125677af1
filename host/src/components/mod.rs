//! The provider plugin loader: one wasmtime engine, an on-disk compile cache, a
//! sandboxed store per provider driven by one dedicated thread, and capability
//! detection when a component is loaded.
//!
//! Sandbox: WASI with no preopened directories, no environment, no arguments, no
//! network, stdin closed and stdout/stderr discarded. Every call has a deadline
//! (epoch interruption) and every store a memory cap; a call that breaks either fails
//! with a [`CallError`] and the store is rebuilt from the pre-instantiated component,
//! so the provider stays usable and the host keeps serving.

mod cache;
mod handle;
pub mod v0_1_0;
pub mod v0_2_0;

pub use cache::CompileCache;
pub use handle::{Call, CallError, CallErrorKind, Capabilities, ProviderHandle, Version};

use anyhow::{anyhow, Context as _, Result};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use wasmtime::component::{Component, InstancePre, Linker, ResourceTable};
use wasmtime::{Config, Engine};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

/// The WIT package versions this lab loads, newest first.
pub const WIT_PACKAGES: &[&str] = &[v0_2_0::PACKAGE, v0_1_0::PACKAGE];

/// The components built with this `lab` and embedded in its binary.
pub const BUNDLED: &[(&str, &[u8])] = &[("claude-code", include_bytes!(env!("LAB_COMPONENT_CLAUDE_CODE")))];

/// Paths of components built with the project that are not bundled (tests use them).
pub mod fixtures {
    /// Transcript-only provider (base world only).
    pub const PLAINLOG: &str = env!("LAB_COMPONENT_PLAINLOG");
    /// Misbehaves on request: loops, allocates without bound, panics.
    pub const UNRULY: &str = env!("LAB_COMPONENT_UNRULY");
    /// The claude-code provider (also bundled).
    pub const CLAUDE_CODE: &str = env!("LAB_COMPONENT_CLAUDE_CODE");
    /// claude-code as built against WIT 0.1.0 (checked in: host/tests/fixtures/wit-0.1.0).
    pub const CLAUDE_CODE_V0_1_0: &str =
        concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/wit-0.1.0/lab_provider_claude_code.wasm");
    /// plainlog as built against WIT 0.1.0.
    pub const PLAINLOG_V0_1_0: &str =
        concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/wit-0.1.0/lab_provider_plainlog.wasm");
}

/// Resource limits for every provider store.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Wall-clock budget of one call into a component.
    pub call_deadline: Duration,
    /// Largest linear memory a component may grow to.
    pub memory_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { call_deadline: Duration::from_secs(2), memory_bytes: 128 << 20 }
    }
}

/// A wasmtime error as one readable line (its cause chain joined).
pub(crate) fn wasm_err(e: wasmtime::Error) -> anyhow::Error {
    anyhow!(e.chain().map(|c| c.to_string()).collect::<Vec<_>>().join(": "))
}

/// How often the engine's epoch ticks; deadlines are whole ticks.
const EPOCH_TICK: Duration = Duration::from_millis(10);

/// Store data: the (empty) WASI context and the memory limiter.
pub(crate) struct StoreState {
    wasi: WasiCtx,
    table: ResourceTable,
    limiter: MemoryLimiter,
}

impl WasiView for StoreState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView { ctx: &mut self.wasi, table: &mut self.table }
    }
}

impl StoreState {
    fn new(memory_bytes: usize) -> Self {
        // Nothing inherited: no env, args, preopens, stdio or network.
        let wasi = WasiCtx::builder().allow_tcp(false).allow_udp(false).allow_ip_name_lookup(false).build();
        StoreState { wasi, table: ResourceTable::new(), limiter: MemoryLimiter { cap: memory_bytes, hit: false } }
    }
}

/// Refuses memory growth past the cap with an error (which traps the call), and
/// remembers that it did so the call's error can say why.
pub(crate) struct MemoryLimiter {
    cap: usize,
    hit: bool,
}

impl wasmtime::ResourceLimiter for MemoryLimiter {
    fn memory_growing(&mut self, _current: usize, desired: usize, _maximum: Option<usize>) -> wasmtime::Result<bool> {
        if desired > self.cap {
            self.hit = true;
            wasmtime::bail!("memory cap of {} MiB reached (asked for {} MiB)", self.cap >> 20, desired >> 20);
        }
        Ok(true)
    }

    fn table_growing(&mut self, _current: usize, desired: usize, _maximum: Option<usize>) -> wasmtime::Result<bool> {
        Ok(desired <= 1 << 20)
    }
}

/// The shared engine, linker and compile cache.
#[derive(Clone)]
pub struct ComponentHost {
    inner: Arc<HostInner>,
}

struct HostInner {
    engine: Engine,
    linker: Linker<StoreState>,
    cache: Option<CompileCache>,
    limits: Limits,
    ticker_stop: Arc<AtomicBool>,
}

impl Drop for HostInner {
    fn drop(&mut self) {
        self.ticker_stop.store(true, Ordering::Relaxed);
    }
}

/// Where a component came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    Bundled(&'static str),
    File(PathBuf),
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Source::Bundled(name) => write!(f, "bundled:{name}"),
            Source::File(p) => write!(f, "{}", p.display()),
        }
    }
}

/// What loading a component found out about it.
#[derive(Debug, Clone)]
pub struct ComponentFacts {
    pub source: Source,
    pub info: crate::model::ProviderInfo,
    /// The WIT version and the optional interfaces it exports.
    pub capabilities: Capabilities,
    pub dialog_hooker: bool,
    /// WIT packages (with versions) the component's exports come from.
    pub wit_packages: Vec<String>,
    /// Whether the compiled code came from the on-disk cache.
    pub from_cache: bool,
}

/// A component that failed to load, with the reason.
#[derive(Debug, Clone)]
pub struct LoadFailure {
    pub source: Source,
    pub error: String,
}

impl ComponentHost {
    /// One engine for all providers. `cache_dir`: where compiled code is kept (None:
    /// compile every time).
    pub fn new(cache_dir: Option<PathBuf>, limits: Limits) -> Result<Self> {
        let mut config = Config::new();
        config.wasm_component_model(true).epoch_interruption(true);
        let engine = Engine::new(&config).map_err(wasm_err).context("creating the wasm engine")?;
        let mut linker = Linker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_sync(&mut linker).map_err(wasm_err).context("linking WASI")?;
        let cache = cache_dir.map(|dir| CompileCache::new(dir, &engine));

        let ticker_stop = Arc::new(AtomicBool::new(false));
        let weak = engine.weak();
        let stop = ticker_stop.clone();
        std::thread::Builder::new()
            .name("wasm-epoch".into())
            .spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    std::thread::sleep(EPOCH_TICK);
                    match weak.upgrade() {
                        Some(engine) => engine.increment_epoch(),
                        None => break,
                    }
                }
            })
            .context("starting the epoch ticker")?;
        Ok(ComponentHost { inner: Arc::new(HostInner { engine, linker, cache, limits, ticker_stop }) })
    }

    pub fn engine(&self) -> &Engine {
        &self.inner.engine
    }

    pub fn limits(&self) -> Limits {
        self.inner.limits
    }

    /// Compile (or fetch from the cache) a component's bytes.
    pub fn compile(&self, bytes: &[u8]) -> Result<(Component, bool)> {
        if let Some(cache) = &self.inner.cache {
            return cache.get_or_compile(&self.inner.engine, bytes);
        }
        let c = Component::new(&self.inner.engine, bytes).map_err(wasm_err)?;
        Ok((c, false))
    }

    /// Load one component: compile, link, detect capabilities, start its thread and
    /// ask for its info.
    pub fn load(&self, source: Source, bytes: &[u8]) -> Result<(ComponentFacts, ProviderHandle)> {
        let (component, from_cache) = self.compile(bytes).context("not a loadable WebAssembly component")?;
        let wit_packages = exported_packages(&self.inner.engine, &component);
        let Some(version) = WIT_PACKAGES.iter().find(|p| wit_packages.iter().any(|w| w == *p)) else {
            let found =
                if wit_packages.is_empty() { "no lab:provider interface".to_string() } else { wit_packages.join(", ") };
            anyhow::bail!(
                "the component does not export a lab:provider base interface this lab loads (found: {found}); \
                 this lab loads {}",
                WIT_PACKAGES.join(", ")
            );
        };
        let pre: InstancePre<StoreState> = self
            .inner
            .linker
            .instantiate_pre(&component)
            .map_err(wasm_err)
            .context("the component imports something lab does not provide (only WASI 0.2 is linked)")?;
        let base_missing = || format!("the component does not export {version}/base as this lab expects");
        // Capability detection: try the generated export indices of each interface.
        let indices = if *version == v0_2_0::PACKAGE {
            handle::Indices::V2 {
                base: v0_2_0::base::GuestIndices::new(&pre).map_err(wasm_err).with_context(base_missing)?,
                hooker: v0_2_0::dialog_hooker::GuestIndices::new(&pre).ok(),
                screen: v0_2_0::screen_reader::GuestIndices::new(&pre).ok(),
            }
        } else {
            handle::Indices::V1 {
                base: v0_1_0::base::GuestIndices::new(&pre).map_err(wasm_err).with_context(base_missing)?,
                hooker: v0_1_0::dialog_hooker::GuestIndices::new(&pre).ok(),
            }
        };
        let capabilities = indices.capabilities();
        let dialog_hooker = capabilities.dialog_hooker;
        let label = source.to_string();
        let handle = ProviderHandle::spawn(self.clone(), label, pre, indices)?;
        let info = handle.info().blocking().map_err(|e| anyhow!("{e}"))?;
        if info.name.is_empty() || !info.name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_') {
            anyhow::bail!("the provider's name {:?} is not a valid name ([A-Za-z0-9_-]+)", info.name);
        }
        handle.set_name(&info.name);
        Ok((ComponentFacts { source, info, capabilities, dialog_hooker, wit_packages, from_cache }, handle))
    }

    /// Load a component file.
    pub fn load_file(&self, path: &Path) -> Result<(ComponentFacts, ProviderHandle)> {
        let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
        self.load(Source::File(path.to_path_buf()), &bytes)
    }
}

/// The `namespace:package@version` of every interface the component exports.
pub fn exported_packages(engine: &Engine, component: &Component) -> Vec<String> {
    let ty = component.component_type();
    let mut out: Vec<String> = Vec::new();
    for (name, _) in ty.exports(engine) {
        // "lab:provider/base@0.1.0" → "lab:provider@0.1.0"
        let pkg = match (name.split_once('/'), name.rsplit_once('@')) {
            (Some((pkg, _)), Some((_, ver))) => format!("{pkg}@{ver}"),
            (Some((pkg, _)), None) => pkg.to_string(),
            _ => continue,
        };
        if !out.contains(&pkg) {
            out.push(pkg);
        }
    }
    out
}

/// All providers lab knows: the bundled ones plus `<home>/providers/*.wasm`. A file
/// whose provider name equals a bundled one replaces it.
pub struct ProviderSet {
    pub loaded: Vec<(ComponentFacts, ProviderHandle)>,
    pub failed: Vec<LoadFailure>,
}

impl ProviderSet {
    pub fn load_all(host: &ComponentHost, providers_dir: &Path) -> ProviderSet {
        let mut loaded: Vec<(ComponentFacts, ProviderHandle)> = Vec::new();
        let mut failed = Vec::new();
        for (name, bytes) in BUNDLED {
            match host.load(Source::Bundled(name), bytes) {
                Ok(p) => loaded.push(p),
                Err(e) => failed.push(LoadFailure { source: Source::Bundled(name), error: format!("{e:#}") }),
            }
        }
        let mut files: Vec<PathBuf> = match std::fs::read_dir(providers_dir) {
            Ok(rd) => rd
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "wasm") && p.is_file())
                .collect(),
            Err(_) => Vec::new(),
        };
        files.sort();
        for path in files {
            match host.load_file(&path) {
                Ok((facts, handle)) => {
                    if let Some(i) = loaded.iter().position(|(f, _)| f.info.name == facts.info.name) {
                        if matches!(loaded[i].0.source, Source::Bundled(_)) {
                            tracing::info!(provider = %facts.info.name, file = %path.display(), "component replaces the bundled provider");
                            loaded[i] = (facts, handle);
                        } else {
                            failed.push(LoadFailure {
                                source: Source::File(path.clone()),
                                error: format!(
                                    "a provider named `{}` is already loaded from {}",
                                    facts.info.name, loaded[i].0.source
                                ),
                            });
                        }
                    } else {
                        loaded.push((facts, handle));
                    }
                }
                Err(e) => failed.push(LoadFailure { source: Source::File(path.clone()), error: format!("{e:#}") }),
            }
        }
        for f in &failed {
            tracing::warn!(component = %f.source, error = %f.error, "skipped a provider component");
        }
        ProviderSet { loaded, failed }
    }

    pub fn get(&self, name: &str) -> Option<&(ComponentFacts, ProviderHandle)> {
        self.loaded.iter().find(|(f, _)| f.info.name == name)
    }
}
