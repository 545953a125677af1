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
mod exports;
mod handle;
mod queue;
mod set;
pub mod v0_1_0;
pub mod v0_2_0;
pub mod v0_3_0;
pub mod v0_4_0;
pub mod v0_5_0;
pub mod v0_6_0;
pub mod v0_7_0;
pub mod v0_8_0;
pub mod v0_9_0;

pub use cache::CompileCache;
pub use handle::{Call, Capabilities, ProviderHandle, Version};
pub use set::{digest, ProviderSet};
// Their paths before the provider trait had its own file.
pub use crate::agents::provider::{CallError, CallErrorKind, Provider, Reply};

use crate::agents::model;
use std::future::IntoFuture;

impl Provider for ProviderHandle {
    fn dialog_hooker(&self) -> bool {
        ProviderHandle::dialog_hooker(self)
    }
    fn parse_transcript(&self, chunk: Vec<u8>) -> Reply<model::ParseOutput> {
        ProviderHandle::parse_transcript(self, chunk).into_future()
    }
    fn map_dialog(&self, call: model::ToolUse) -> Reply<Option<model::Dialog>> {
        ProviderHandle::map_dialog(self, call).into_future()
    }
    fn pending_dialog(&self, spool: Vec<u8>, open_calls: Vec<model::ToolUse>) -> Reply<Option<model::Dialog>> {
        ProviderHandle::pending_dialog(self, spool, open_calls).into_future()
    }
    fn blocked_state(&self, marker: Vec<u8>) -> Reply<model::Blocked> {
        ProviderHandle::blocked_state(self, marker).into_future()
    }
    fn session_info(&self, payload: Vec<u8>) -> Reply<model::SessionFacts> {
        ProviderHandle::session_info(self, payload).into_future()
    }
    fn screen_reader(&self) -> bool {
        ProviderHandle::screen_reader(self)
    }
    fn launch(&self, req: model::LaunchRequest) -> Reply<model::LaunchSpec> {
        ProviderHandle::launch(self, req).into_future()
    }
    fn abilities(&self) -> model::Abilities {
        self.capabilities().abilities
    }
    fn continue_session(
        &self,
        req: model::LaunchRequest,
        how: model::Continuation,
        earlier: model::EarlierRun,
    ) -> Reply<model::LaunchSpec> {
        ProviderHandle::continue_session(self, req, how, earlier).into_future()
    }
    fn usage_limit(&self, msg: model::Message) -> Reply<Option<model::UsageLimit>> {
        ProviderHandle::usage_limit(self, msg).into_future()
    }
    fn reads_usage(&self) -> bool {
        self.capabilities().reads_usage()
    }
    fn read_usage(&self, chunk: Vec<u8>) -> Reply<model::UsageReport> {
        ProviderHandle::read_usage(self, chunk).into_future()
    }
    fn sandbox_needs(&self, env: Vec<(String, String)>) -> Reply<crate::sandbox::Needs> {
        ProviderHandle::sandbox_needs(self, env).into_future()
    }
    fn prompt_facts(&self, dialog: model::Dialog) -> Reply<Option<model::PromptFacts>> {
        ProviderHandle::prompt_facts(self, dialog).into_future()
    }
    fn login_hints(&self, env: Vec<(String, String)>) -> Reply<Option<model::LoginHints>> {
        ProviderHandle::login_hints(self, env).into_future()
    }
    fn hook_wiring(&self) -> Reply<Vec<model::HookBinding>> {
        ProviderHandle::hook_wiring(self).into_future()
    }
    fn hook_settings(&self, run_id: String, hooks: Vec<model::HookCommand>) -> Reply<Option<String>> {
        ProviderHandle::hook_settings(self, run_id, hooks).into_future()
    }
    fn plan_answer(&self, dialog: model::Dialog, answers: Vec<model::Answer>) -> Reply<model::AnswerPlan> {
        ProviderHandle::plan_answer(self, dialog, answers).into_future()
    }
    fn is_drawn(&self, dialog: model::Dialog, pane: String) -> Reply<bool> {
        ProviderHandle::is_drawn(self, dialog, pane).into_future()
    }
    fn read_screen(&self, pane: String) -> Reply<Option<model::Dialog>> {
        ProviderHandle::read_screen(self, pane).into_future()
    }
    fn info(&self) -> Reply<model::ProviderInfo> {
        ProviderHandle::info(self).into_future()
    }
    fn self_test_samples(&self) -> Reply<model::Samples> {
        ProviderHandle::self_test_samples(self).into_future()
    }
    fn acp_launch(&self) -> Reply<model::AcpLaunch> {
        ProviderHandle::acp_launch(self).into_future()
    }
}

use anyhow::{anyhow, Context as _, Result};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;
use wasmtime::component::{Component, InstancePre, Linker, ResourceTable};
use wasmtime::{Config, Engine};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

/// The WIT package versions this lab loads, newest first.
pub const WIT_PACKAGES: &[&str] = &[
    v0_9_0::PACKAGE,
    v0_8_0::PACKAGE,
    v0_7_0::PACKAGE,
    v0_6_0::PACKAGE,
    v0_5_0::PACKAGE,
    v0_4_0::PACKAGE,
    v0_3_0::PACKAGE,
    v0_2_0::PACKAGE,
    v0_1_0::PACKAGE,
];

// `BUNDLED` (the components embedded in the binary) and `fixtures` (paths of every
// component the build made, and of older builds kept for the compatibility tests):
// generated by build.rs from its component list.
include!(concat!(env!("OUT_DIR"), "/components.rs"));

/// Resource limits for every provider store.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Wall-clock budget of one call into a component.
    pub call_deadline: Duration,
    /// Most linear memory one component instance (its store: every core module and
    /// memory in it) may hold.
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

/// How often the engine's epoch ticks while a component runs; deadlines are whole
/// ticks.
const EPOCH_TICK: Duration = Duration::from_millis(10);

/// The epoch's ticker: a thread that advances the engine's epoch every [`EPOCH_TICK`]
/// while some component code runs (a call, an instantiation), and sleeps otherwise,
/// so an idle lab does not wake a hundred times a second for nothing. A deadline is
/// counted in ticks from the call's start, and ticks only pass while calls run: a call
/// still meets its deadline after the wall time it names.
struct Ticker {
    state: Mutex<TickerState>,
    wake: Condvar,
    /// Ticks so far.
    ticks: std::sync::atomic::AtomicU64,
}

#[derive(Default)]
struct TickerState {
    /// Component code running now.
    running: usize,
    stop: bool,
    /// The thread waits for code to run (set and cleared under the lock it releases
    /// only while waiting).
    parked: bool,
}

impl Ticker {
    fn start(engine: &Engine) -> Result<Arc<Ticker>> {
        let ticker = Arc::new(Ticker {
            state: Mutex::new(TickerState::default()),
            wake: Condvar::new(),
            ticks: Default::default(),
        });
        let weak = engine.weak();
        let me = ticker.clone();
        std::thread::Builder::new()
            .name("wasm-epoch".into())
            .spawn(move || loop {
                {
                    let mut state = me.state.lock().unwrap();
                    state.parked = true;
                    state = me.wake.wait_while(state, |s| s.running == 0 && !s.stop).unwrap();
                    state.parked = false;
                    if state.stop {
                        break;
                    }
                }
                std::thread::sleep(EPOCH_TICK);
                match weak.upgrade() {
                    Some(engine) => {
                        engine.increment_epoch();
                        me.ticks.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    }
                    None => break,
                }
            })
            .context("starting the epoch ticker")?;
        Ok(ticker)
    }

    fn stop(&self) {
        self.state.lock().unwrap().stop = true;
        self.wake.notify_all();
    }
}

/// Component code is running while this lives ([`ComponentHost::running`]).
pub(crate) struct Running(Arc<Ticker>);

impl Drop for Running {
    fn drop(&mut self) {
        self.0.state.lock().unwrap().running -= 1;
    }
}

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
        StoreState { wasi, table: ResourceTable::new(), limiter: MemoryLimiter::new(memory_bytes) }
    }
}

/// Holds a store (one component instance with every core module and memory in it) to
/// its memory cap: the sum of all its linear memories, not each one, and a bounded
/// number of instances, memories and tables. Growth past the cap is an error (which
/// traps the call), remembered so the call's error can say why.
pub(crate) struct MemoryLimiter {
    cap: usize,
    hit: bool,
    /// Bytes of linear memory the store holds (every memory's size, summed).
    used: usize,
    /// The last growth allowed, taken back if the engine then failed to grow.
    pending: usize,
    /// Table elements the store holds (all tables).
    table_elements: usize,
}

/// Table elements one store may hold, all tables together.
pub(crate) const TABLE_ELEMENTS_CAP: usize = 1 << 20;
/// Core instances, linear memories and tables one store may create (a wit-bindgen
/// component has a handful of each).
pub(crate) const INSTANCES_CAP: usize = 100;
pub(crate) const MEMORIES_CAP: usize = 16;
pub(crate) const TABLES_CAP: usize = 100;

impl MemoryLimiter {
    pub(crate) fn new(cap: usize) -> Self {
        MemoryLimiter { cap, hit: false, used: 0, pending: 0, table_elements: 0 }
    }
}

impl wasmtime::ResourceLimiter for MemoryLimiter {
    fn memory_growing(&mut self, current: usize, desired: usize, _maximum: Option<usize>) -> wasmtime::Result<bool> {
        let grow = desired.saturating_sub(current);
        let total = self.used.saturating_add(grow);
        if total > self.cap {
            self.hit = true;
            wasmtime::bail!(
                "memory cap of {} MiB reached (the component's memories would hold {} MiB)",
                self.cap >> 20,
                total >> 20
            );
        }
        self.used = total;
        self.pending = grow;
        Ok(true)
    }

    fn memory_grow_failed(&mut self, _error: wasmtime::Error) -> wasmtime::Result<()> {
        self.used -= std::mem::take(&mut self.pending);
        Ok(())
    }

    fn table_growing(&mut self, current: usize, desired: usize, _maximum: Option<usize>) -> wasmtime::Result<bool> {
        let total = self.table_elements.saturating_add(desired.saturating_sub(current));
        if total > TABLE_ELEMENTS_CAP {
            return Ok(false);
        }
        self.table_elements = total;
        Ok(true)
    }

    fn instances(&self) -> usize {
        INSTANCES_CAP
    }

    fn tables(&self) -> usize {
        TABLES_CAP
    }

    fn memories(&self) -> usize {
        MEMORIES_CAP
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
    ticker: Arc<Ticker>,
}

impl Drop for HostInner {
    fn drop(&mut self) {
        self.ticker.stop();
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
    pub info: crate::agents::model::ProviderInfo,
    /// The WIT version and the optional interfaces it exports.
    pub capabilities: Capabilities,
    pub dialog_hooker: bool,
    /// WIT packages (with versions) the component's exports come from.
    pub wit_packages: Vec<String>,
    /// Whether the compiled code came from the on-disk cache.
    pub from_cache: bool,
    /// The component's bytes' SHA-256, as 16 hex digits: which build it is (two builds
    /// may say the same version).
    pub digest: String,
    /// The kinds of prompt its agent blocks on that lab shows and answers (`permission`,
    /// `question`, `plan`, …), sorted: for an ACP provider the protocol's two
    /// (`session/request_permission`, an elicitation); for a tmux one what its own
    /// self-test samples map to, asked once at load, and `permission` for a dialog
    /// hooker (its hooks catch the tool calls the agent asks about).
    pub prompt_kinds: Vec<String>,
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

        let ticker = Ticker::start(&engine)?;
        Ok(ComponentHost { inner: Arc::new(HostInner { engine, linker, cache, limits, ticker }) })
    }

    pub fn engine(&self) -> &Engine {
        &self.inner.engine
    }

    /// Say that component code runs (a call, an instantiation) until the guard is
    /// dropped: the epoch ticks meanwhile, so the call's deadline can pass.
    pub(crate) fn running(&self) -> Running {
        let ticker = &self.inner.ticker;
        ticker.state.lock().unwrap().running += 1;
        ticker.wake.notify_all();
        Running(ticker.clone())
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
                "the component does not export a lab:provider interface (base or acp-agent) this lab loads (found: {found}); \
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
        let indices = if *version == v0_9_0::PACKAGE {
            let setup = v0_9_0::setup::GuestIndices::new(&pre).ok();
            match v0_9_0::acp_agent::GuestIndices::new(&pre) {
                Ok(agent) => handle::Indices::Acp9 { agent, setup },
                Err(_) => handle::Indices::V9 {
                    base: v0_9_0::base::GuestIndices::new(&pre).map_err(wasm_err).with_context(|| {
                        format!(
                            "the component exports neither {version}/base nor {version}/acp-agent as this lab expects"
                        )
                    })?,
                    hooker: v0_9_0::dialog_hooker::GuestIndices::new(&pre).ok(),
                    screen: v0_9_0::screen_reader::GuestIndices::new(&pre).ok(),
                    sessions: v0_9_0::sessions::GuestIndices::new(&pre).map_err(wasm_err).with_context(|| {
                        format!("the component does not export {version}/sessions as this lab expects")
                    })?,
                    usage: v0_9_0::usage::GuestIndices::new(&pre).map_err(wasm_err).with_context(|| {
                        format!("the component does not export {version}/usage as this lab expects")
                    })?,
                    sandbox: v0_9_0::sandbox::GuestIndices::new(&pre).map_err(wasm_err).with_context(|| {
                        format!("the component does not export {version}/sandbox as this lab expects")
                    })?,
                    rules: v0_9_0::answer_rules::GuestIndices::new(&pre).ok(),
                    setup,
                },
            }
        } else if *version == v0_8_0::PACKAGE {
            match v0_8_0::acp_agent::GuestIndices::new(&pre) {
                Ok(agent) => handle::Indices::Acp8 { agent },
                Err(_) => handle::Indices::V8 {
                    base: v0_8_0::base::GuestIndices::new(&pre).map_err(wasm_err).with_context(|| {
                        format!(
                            "the component exports neither {version}/base nor {version}/acp-agent as this lab expects"
                        )
                    })?,
                    hooker: v0_8_0::dialog_hooker::GuestIndices::new(&pre).ok(),
                    screen: v0_8_0::screen_reader::GuestIndices::new(&pre).ok(),
                    sessions: v0_8_0::sessions::GuestIndices::new(&pre).map_err(wasm_err).with_context(|| {
                        format!("the component does not export {version}/sessions as this lab expects")
                    })?,
                    usage: v0_8_0::usage::GuestIndices::new(&pre).map_err(wasm_err).with_context(|| {
                        format!("the component does not export {version}/usage as this lab expects")
                    })?,
                    sandbox: v0_8_0::sandbox::GuestIndices::new(&pre).map_err(wasm_err).with_context(|| {
                        format!("the component does not export {version}/sandbox as this lab expects")
                    })?,
                    rules: v0_8_0::answer_rules::GuestIndices::new(&pre).ok(),
                },
            }
        } else if *version == v0_7_0::PACKAGE {
            match v0_7_0::acp_agent::GuestIndices::new(&pre) {
                Ok(agent) => handle::Indices::Acp7 { agent },
                Err(_) => handle::Indices::V7 {
                    base: v0_7_0::base::GuestIndices::new(&pre).map_err(wasm_err).with_context(|| {
                        format!(
                            "the component exports neither {version}/base nor {version}/acp-agent as this lab expects"
                        )
                    })?,
                    hooker: v0_7_0::dialog_hooker::GuestIndices::new(&pre).ok(),
                    screen: v0_7_0::screen_reader::GuestIndices::new(&pre).ok(),
                    sessions: v0_7_0::sessions::GuestIndices::new(&pre).map_err(wasm_err).with_context(|| {
                        format!("the component does not export {version}/sessions as this lab expects")
                    })?,
                    usage: v0_7_0::usage::GuestIndices::new(&pre).map_err(wasm_err).with_context(|| {
                        format!("the component does not export {version}/usage as this lab expects")
                    })?,
                    sandbox: v0_7_0::sandbox::GuestIndices::new(&pre).map_err(wasm_err).with_context(|| {
                        format!("the component does not export {version}/sandbox as this lab expects")
                    })?,
                },
            }
        } else if *version == v0_6_0::PACKAGE {
            match v0_6_0::acp_agent::GuestIndices::new(&pre) {
                Ok(agent) => handle::Indices::Acp6 { agent },
                Err(_) => handle::Indices::V6 {
                    base: v0_6_0::base::GuestIndices::new(&pre).map_err(wasm_err).with_context(|| {
                        format!(
                            "the component exports neither {version}/base nor {version}/acp-agent as this lab expects"
                        )
                    })?,
                    hooker: v0_6_0::dialog_hooker::GuestIndices::new(&pre).ok(),
                    screen: v0_6_0::screen_reader::GuestIndices::new(&pre).ok(),
                    sessions: v0_6_0::sessions::GuestIndices::new(&pre).map_err(wasm_err).with_context(|| {
                        format!("the component does not export {version}/sessions as this lab expects")
                    })?,
                    usage: v0_6_0::usage::GuestIndices::new(&pre).map_err(wasm_err).with_context(|| {
                        format!("the component does not export {version}/usage as this lab expects")
                    })?,
                    sandbox: v0_6_0::sandbox::GuestIndices::new(&pre).map_err(wasm_err).with_context(|| {
                        format!("the component does not export {version}/sandbox as this lab expects")
                    })?,
                },
            }
        } else if *version == v0_5_0::PACKAGE {
            match v0_5_0::acp_agent::GuestIndices::new(&pre) {
                Ok(agent) => handle::Indices::Acp5 { agent },
                Err(_) => handle::Indices::V5 {
                    base: v0_5_0::base::GuestIndices::new(&pre).map_err(wasm_err).with_context(|| {
                        format!(
                            "the component exports neither {version}/base nor {version}/acp-agent as this lab expects"
                        )
                    })?,
                    hooker: v0_5_0::dialog_hooker::GuestIndices::new(&pre).ok(),
                    screen: v0_5_0::screen_reader::GuestIndices::new(&pre).ok(),
                    sessions: v0_5_0::sessions::GuestIndices::new(&pre).map_err(wasm_err).with_context(|| {
                        format!("the component does not export {version}/sessions as this lab expects")
                    })?,
                    usage: v0_5_0::usage::GuestIndices::new(&pre).map_err(wasm_err).with_context(|| {
                        format!("the component does not export {version}/usage as this lab expects")
                    })?,
                },
            }
        } else if *version == v0_4_0::PACKAGE {
            match v0_4_0::acp_agent::GuestIndices::new(&pre) {
                Ok(agent) => handle::Indices::Acp4 { agent },
                Err(_) => handle::Indices::V4 {
                    base: v0_4_0::base::GuestIndices::new(&pre).map_err(wasm_err).with_context(|| {
                        format!(
                            "the component exports neither {version}/base nor {version}/acp-agent as this lab expects"
                        )
                    })?,
                    hooker: v0_4_0::dialog_hooker::GuestIndices::new(&pre).ok(),
                    screen: v0_4_0::screen_reader::GuestIndices::new(&pre).ok(),
                    sessions: v0_4_0::sessions::GuestIndices::new(&pre).map_err(wasm_err).with_context(|| {
                        format!("the component does not export {version}/sessions as this lab expects")
                    })?,
                },
            }
        } else if *version == v0_3_0::PACKAGE {
            match v0_3_0::acp_agent::GuestIndices::new(&pre) {
                Ok(agent) => handle::Indices::Acp { agent },
                Err(_) => handle::Indices::V3 {
                    base: v0_3_0::base::GuestIndices::new(&pre).map_err(wasm_err).with_context(|| {
                        format!(
                            "the component exports neither {version}/base nor {version}/acp-agent as this lab expects"
                        )
                    })?,
                    hooker: v0_3_0::dialog_hooker::GuestIndices::new(&pre).ok(),
                    screen: v0_3_0::screen_reader::GuestIndices::new(&pre).ok(),
                },
            }
        } else if *version == v0_2_0::PACKAGE {
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
        let label = source.to_string();
        let mut handle = ProviderHandle::spawn(self.clone(), label, pre, indices)?;
        handle.ask_abilities().map_err(|e| anyhow!("{e}"))?;
        let capabilities = handle.capabilities();
        let dialog_hooker = capabilities.dialog_hooker;
        let info = handle.info().blocking().map_err(|e| anyhow!("{e}"))?;
        if info.name.is_empty() || !info.name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_') {
            anyhow::bail!("the provider's name {:?} is not a valid name ([A-Za-z0-9_-]+)", info.name);
        }
        handle.set_name(&info.name);
        let digest = digest(bytes);
        let prompt_kinds = prompt_kinds(&handle, &capabilities);
        Ok((
            ComponentFacts {
                source,
                info,
                capabilities,
                dialog_hooker,
                wit_packages,
                from_cache,
                digest,
                prompt_kinds,
            },
            handle,
        ))
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

/// What an ACP provider declares, checked ([`check_acp_launch`]).
pub fn acp_declaration(facts: &ComponentFacts, provider: &dyn Provider) -> Result<model::AcpLaunch, String> {
    use crate::agents::provider::Blocking as _;
    let launch = provider.acp_launch().blocking().map_err(|e| e.to_string())?;
    check_acp_launch(&facts.info, launch)
}

/// An ACP declaration lab can start: a command, environment names an environment can
/// hold, no NUL bytes.
pub fn check_acp_launch(info: &model::ProviderInfo, launch: model::AcpLaunch) -> Result<model::AcpLaunch, String> {
    if info.default_program.trim().is_empty() || info.default_program.contains('\0') {
        return Err("the ACP provider declares no usable command (provider-info.default-program)".into());
    }
    if let Some((k, _)) = launch.env.iter().find(|(k, v)| k.is_empty() || k.contains(['=', '\0']) || v.contains('\0')) {
        return Err(format!("the ACP provider declares an environment variable lab cannot set: {k:?}"));
    }
    if let Some(a) = launch.args.iter().find(|a| a.contains('\0')) {
        return Err(format!("the ACP provider declares an argument with a NUL byte: {a:?}"));
    }
    Ok(launch)
}

/// The prompt kinds a provider's agent blocks on (see [`ComponentFacts::prompt_kinds`]).
/// A sample the component cannot map is skipped; a component without samples has none.
fn prompt_kinds(handle: &ProviderHandle, caps: &Capabilities) -> Vec<String> {
    if caps.acp {
        return vec!["permission".into(), "question".into()];
    }
    let calls = handle.self_test_samples().blocking().map(|s| s.dialog_calls).unwrap_or_default();
    let mut kinds: Vec<String> = calls
        .into_iter()
        .filter_map(|call| handle.map_dialog(call).blocking().ok().flatten())
        .map(|d| d.kind().to_string())
        .collect();
    if caps.dialog_hooker {
        kinds.push("permission".into());
    }
    kinds.sort();
    kinds.dedup();
    kinds
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The epoch ticks while component code runs, and not at all while none does.
    #[test]
    fn the_epoch_ticks_only_while_component_code_runs() {
        let host = ComponentHost::new(None, Limits::default()).unwrap();
        let ticks = || host.inner.ticker.ticks.load(std::sync::atomic::Ordering::Relaxed);
        let running = host.running();
        let t = std::time::Instant::now();
        while ticks() < 2 {
            assert!(t.elapsed() < Duration::from_secs(10), "no tick while code runs");
            std::thread::sleep(EPOCH_TICK);
        }
        drop(running);
        // The tick under way when the guard went may still land: wait until the thread
        // waits for code to run.
        let t = std::time::Instant::now();
        while !host.inner.ticker.state.lock().unwrap().parked {
            assert!(t.elapsed() < Duration::from_secs(10), "the ticker goes on with nothing running");
            std::thread::sleep(EPOCH_TICK);
        }
        let idle = ticks();
        std::thread::sleep(EPOCH_TICK * 10);
        assert_eq!(ticks(), idle, "ticks while nothing runs");
    }

    /// A core module with two linear memories (0 pages each) and `a`/`b`:
    /// `(func (param i32) (result i32) (memory.grow $a|$b (local.get 0)))`.
    const TWO_MEMORIES: &[u8] = &[
        0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00, // magic, version
        0x01, 0x06, 0x01, 0x60, 0x01, 0x7f, 0x01, 0x7f, // type: (i32) -> i32
        0x03, 0x03, 0x02, 0x00, 0x00, // two functions of type 0
        0x05, 0x05, 0x02, 0x00, 0x00, 0x00, 0x00, // two memories, min 0, no max
        0x07, 0x09, 0x02, 0x01, b'a', 0x00, 0x00, 0x01, b'b', 0x00, 0x01, // exports a, b
        0x0a, 0x0f, 0x02, // code: two bodies
        0x06, 0x00, 0x20, 0x00, 0x40, 0x00, 0x0b, // local.get 0, memory.grow 0
        0x06, 0x00, 0x20, 0x00, 0x40, 0x01, 0x0b, // local.get 0, memory.grow 1
    ];
    const PAGE: i32 = 64 << 10;

    /// The cap holds for the store, all its memories together: two memories of 3 MiB
    /// each under a 5 MiB cap cannot both grow (each alone is under the cap).
    #[test]
    fn the_memory_cap_is_per_store_not_per_memory() {
        let engine = Engine::default();
        let module = wasmtime::Module::new(&engine, TWO_MEMORIES).unwrap();
        let mut store = wasmtime::Store::new(&engine, MemoryLimiter::new(5 << 20));
        store.limiter(|l| l);
        let instance = wasmtime::Instance::new(&mut store, &module, &[]).unwrap();
        let a = instance.get_typed_func::<i32, i32>(&mut store, "a").unwrap();
        let b = instance.get_typed_func::<i32, i32>(&mut store, "b").unwrap();
        let three_mib = (3 << 20) / PAGE;
        assert_eq!(a.call(&mut store, three_mib).unwrap(), 0, "the first memory grows");
        let err = b.call(&mut store, three_mib).unwrap_err();
        assert!(format!("{err:?}").contains("memory cap of 5 MiB reached"), "{err:?}");
        assert!(store.data().hit);
        assert_eq!(store.data().used, 3 << 20);
        assert_eq!(b.call(&mut store, (1 << 20) / PAGE).unwrap(), 0, "what is left of the cap can still be used");
        assert_eq!(store.data().used, 4 << 20);
    }

    #[test]
    fn an_acp_declaration_lab_cannot_start_is_refused() {
        let info = |program: &str| model::ProviderInfo {
            name: "a".into(),
            display_name: String::new(),
            version: String::new(),
            description: String::new(),
            default_program: program.into(),
            permission_modes: Vec::new(),
        };
        let launch = |args: &[&str], env: &[(&str, &str)]| model::AcpLaunch {
            args: args.iter().map(|a| a.to_string()).collect(),
            env: env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            start_timeout_secs: None,
        };
        assert!(check_acp_launch(&info("gem"), launch(&["--acp"], &[("K", "v=1")])).is_ok());
        for (program, args, env, why) in [
            (" ", &[][..], &[][..], "no usable command"),
            ("gem", &[][..], &[("A=B", "v")][..], "environment variable lab cannot set: \"A=B\""),
            ("gem", &[][..], &[("", "v")][..], "cannot set: \"\""),
            ("gem", &[][..], &[("K", "a\0b")][..], "cannot set: \"K\""),
            ("gem", &["a\0"][..], &[][..], "argument with a NUL byte"),
        ] {
            let e = check_acp_launch(&info(program), launch(args, env)).unwrap_err();
            assert!(e.contains(why), "{e}");
        }
    }

    #[test]
    fn table_elements_and_counts_are_capped_per_store() {
        use wasmtime::ResourceLimiter as _;
        let mut l = MemoryLimiter::new(1 << 20);
        assert!(l.table_growing(0, TABLE_ELEMENTS_CAP / 2, None).unwrap());
        assert!(!l.table_growing(0, TABLE_ELEMENTS_CAP / 2 + 1, None).unwrap(), "a second table past the total");
        assert_eq!((l.instances(), l.memories(), l.tables()), (INSTANCES_CAP, MEMORIES_CAP, TABLES_CAP));
    }
}
