//! One provider = one store, driven by one dedicated thread. Callers send jobs over a
//! channel and await the answer; the thread applies the call deadline and memory cap
//! and rebuilds the store after any failed call.

use super::bindings::{base, dialog_hooker};
use super::{convert, ComponentHost, StoreState};
use lab_provider_sdk as sdk;
use std::sync::{mpsc, Arc, Mutex};
use tokio::sync::oneshot;
use wasmtime::component::InstancePre;
use wasmtime::{Store, Trap};

/// Why a call into a component failed. The host keeps serving either way.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallError {
    pub provider: String,
    pub function: &'static str,
    pub kind: CallErrorKind,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallErrorKind {
    /// The call ran past its deadline and was interrupted.
    Timeout { millis: u128 },
    /// The component tried to grow its memory past the cap.
    OutOfMemory { cap_mib: usize },
    /// The component trapped (panic, unreachable, …).
    Trap(String),
    /// The component does not export the interface the function belongs to.
    Unsupported,
    /// The component could not be (re)instantiated, or its thread is gone.
    Unavailable(String),
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let who = format!("provider `{}`: `{}`", self.provider, self.function);
        match &self.kind {
            CallErrorKind::Timeout { millis } => write!(f, "{who} ran past its {millis} ms deadline and was stopped"),
            CallErrorKind::OutOfMemory { cap_mib } => {
                write!(f, "{who} hit the {cap_mib} MiB memory cap and was stopped")
            }
            CallErrorKind::Trap(msg) => write!(f, "{who} trapped: {msg}"),
            CallErrorKind::Unsupported => write!(f, "{who} is not exported by this component"),
            CallErrorKind::Unavailable(msg) => write!(f, "{who} is unavailable: {msg}"),
        }
    }
}

impl std::error::Error for CallError {}

type Job = Box<dyn FnOnce(&mut Worker) + Send>;

/// A cheap, cloneable handle to a loaded provider.
#[derive(Clone)]
pub struct ProviderHandle {
    tx: mpsc::Sender<Job>,
    name: Arc<Mutex<String>>,
    dialog_hooker: bool,
}

struct Live {
    store: Store<StoreState>,
    base: base::Guest,
    hooker: Option<dialog_hooker::Guest>,
}

struct Worker {
    host: ComponentHost,
    name: Arc<Mutex<String>>,
    pre: InstancePre<StoreState>,
    base_idx: base::GuestIndices,
    hooker_idx: Option<dialog_hooker::GuestIndices>,
    live: Option<Live>,
}

impl Worker {
    fn instantiate(&self) -> Result<Live, String> {
        let limits = self.host.limits();
        let mut store = Store::new(self.host.engine(), StoreState::new(limits.memory_bytes));
        store.limiter(|s| &mut s.limiter);
        store.set_epoch_deadline(deadline_ticks(limits.call_deadline));
        store.epoch_deadline_trap();
        let instance = self.pre.instantiate(&mut store).map_err(|e| super::wasm_err(e).to_string())?;
        let base = self.base_idx.load(&mut store, &instance).map_err(|e| super::wasm_err(e).to_string())?;
        let hooker = match &self.hooker_idx {
            Some(idx) => Some(idx.load(&mut store, &instance).map_err(|e| super::wasm_err(e).to_string())?),
            None => None,
        };
        Ok(Live { store, base, hooker })
    }

    fn call<R>(
        &mut self,
        function: &'static str,
        f: impl FnOnce(&mut Store<StoreState>, &base::Guest, Option<&dialog_hooker::Guest>) -> Option<wasmtime::Result<R>>,
    ) -> Result<R, CallError> {
        let err =
            |name: &Arc<Mutex<String>>, kind| CallError { provider: name.lock().unwrap().clone(), function, kind };
        if self.live.is_none() {
            match self.instantiate() {
                Ok(live) => self.live = Some(live),
                Err(e) => return Err(err(&self.name, CallErrorKind::Unavailable(e))),
            }
        }
        let limits = self.host.limits();
        let live = self.live.as_mut().expect("instantiated above");
        live.store.data_mut().limiter.hit = false;
        live.store.set_epoch_deadline(deadline_ticks(limits.call_deadline));
        let outcome = f(&mut live.store, &live.base, live.hooker.as_ref());
        match outcome {
            None => Err(err(&self.name, CallErrorKind::Unsupported)),
            Some(Ok(r)) => Ok(r),
            Some(Err(e)) => {
                let oom = live.store.data().limiter.hit;
                // A failed call may leave the instance unusable: start fresh next time.
                self.live = None;
                let kind = if e.downcast_ref::<Trap>() == Some(&Trap::Interrupt) {
                    CallErrorKind::Timeout { millis: limits.call_deadline.as_millis() }
                } else if oom {
                    CallErrorKind::OutOfMemory { cap_mib: limits.memory_bytes >> 20 }
                } else {
                    CallErrorKind::Trap(e.chain().map(|c| c.to_string()).collect::<Vec<_>>().join(": "))
                };
                let error = err(&self.name, kind);
                tracing::warn!(%error, "component call failed; its store will be rebuilt");
                Err(error)
            }
        }
    }
}

fn deadline_ticks(d: std::time::Duration) -> u64 {
    (d.as_millis() / super::EPOCH_TICK.as_millis()).max(1) as u64 + 1
}

impl ProviderHandle {
    pub(super) fn spawn(
        host: ComponentHost,
        label: String,
        pre: InstancePre<StoreState>,
        base_idx: base::GuestIndices,
        hooker_idx: Option<dialog_hooker::GuestIndices>,
    ) -> anyhow::Result<Self> {
        let (tx, rx) = mpsc::channel::<Job>();
        let name = Arc::new(Mutex::new(label.clone()));
        let dialog_hooker = hooker_idx.is_some();
        let mut worker = Worker { host, name: name.clone(), pre, base_idx, hooker_idx, live: None };
        // Instantiate once up front, so a component that cannot start fails to load.
        worker.live = Some(worker.instantiate().map_err(|e| anyhow::anyhow!("instantiating the component: {e}"))?);
        std::thread::Builder::new().name(format!("provider:{label}")).spawn(move || {
            while let Ok(job) = rx.recv() {
                job(&mut worker);
            }
        })?;
        Ok(ProviderHandle { tx, name, dialog_hooker })
    }

    pub(super) fn set_name(&self, name: &str) {
        *self.name.lock().unwrap() = name.to_string();
    }

    pub fn name(&self) -> String {
        self.name.lock().unwrap().clone()
    }

    /// Whether the component exports the dialog-hooker interface.
    pub fn dialog_hooker(&self) -> bool {
        self.dialog_hooker
    }

    fn submit<R: Send + 'static>(
        &self,
        function: &'static str,
        f: impl FnOnce(&mut Store<StoreState>, &base::Guest, Option<&dialog_hooker::Guest>) -> Option<wasmtime::Result<R>>
            + Send
            + 'static,
    ) -> oneshot::Receiver<Result<R, CallError>> {
        let (tx, rx) = oneshot::channel();
        let job: Job = Box::new(move |w: &mut Worker| {
            let _ = tx.send(w.call(function, f));
        });
        if self.tx.send(job).is_err() {
            // The receiver is dropped with the job; the caller sees Unavailable below.
        }
        rx
    }

    async fn wait<R>(
        &self,
        function: &'static str,
        rx: oneshot::Receiver<Result<R, CallError>>,
    ) -> Result<R, CallError> {
        rx.await.unwrap_or_else(|_| Err(self.gone(function)))
    }

    fn wait_blocking<R>(
        &self,
        function: &'static str,
        rx: oneshot::Receiver<Result<R, CallError>>,
    ) -> Result<R, CallError> {
        rx.blocking_recv().unwrap_or_else(|_| Err(self.gone(function)))
    }

    fn gone(&self, function: &'static str) -> CallError {
        CallError { provider: self.name(), function, kind: CallErrorKind::Unavailable("its thread has stopped".into()) }
    }

    fn info_rx(&self) -> oneshot::Receiver<Result<sdk::ProviderInfo, CallError>> {
        self.submit("info", |s, b, _| Some(b.call_info(s).map(convert::info)))
    }

    pub async fn info(&self) -> Result<sdk::ProviderInfo, CallError> {
        self.wait("info", self.info_rx()).await
    }

    pub fn info_blocking(&self) -> Result<sdk::ProviderInfo, CallError> {
        self.wait_blocking("info", self.info_rx())
    }

    pub async fn launch(&self, req: sdk::LaunchRequest) -> Result<Result<sdk::LaunchSpec, String>, CallError> {
        let req = convert::launch_request(req);
        let rx =
            self.submit("launch", move |s, b, _| Some(b.call_launch(s, &req).map(|r| r.map(convert::launch_spec))));
        self.wait("launch", rx).await
    }

    fn parse_rx(&self, chunk: Vec<u8>) -> oneshot::Receiver<Result<sdk::ParseOutput, CallError>> {
        self.submit("parse-transcript", move |s, b, _| {
            Some(b.call_parse_transcript(s, &chunk).map(convert::parse_output))
        })
    }

    pub async fn parse_transcript(&self, chunk: Vec<u8>) -> Result<sdk::ParseOutput, CallError> {
        self.wait("parse-transcript", self.parse_rx(chunk)).await
    }

    pub fn parse_transcript_blocking(&self, chunk: Vec<u8>) -> Result<sdk::ParseOutput, CallError> {
        self.wait_blocking("parse-transcript", self.parse_rx(chunk))
    }

    fn map_rx(&self, call: sdk::ToolCall) -> oneshot::Receiver<Result<Option<sdk::Dialog>, CallError>> {
        let call = convert::tool_call(call);
        self.submit("map-dialog", move |s, b, _| Some(b.call_map_dialog(s, &call).map(|d| d.map(convert::dialog_in))))
    }

    pub async fn map_dialog(&self, call: sdk::ToolCall) -> Result<Option<sdk::Dialog>, CallError> {
        self.wait("map-dialog", self.map_rx(call)).await
    }

    pub fn map_dialog_blocking(&self, call: sdk::ToolCall) -> Result<Option<sdk::Dialog>, CallError> {
        self.wait_blocking("map-dialog", self.map_rx(call))
    }

    fn hook_settings_rx(&self, ctx: sdk::HookContext) -> oneshot::Receiver<Result<Result<String, String>, CallError>> {
        let ctx = convert::hook_context(ctx);
        self.submit("hook-settings", move |s, _, h| h.map(|h| h.call_hook_settings(s, &ctx)))
    }

    pub async fn hook_settings(&self, ctx: sdk::HookContext) -> Result<Result<String, String>, CallError> {
        self.wait("hook-settings", self.hook_settings_rx(ctx)).await
    }

    pub fn hook_settings_blocking(&self, ctx: sdk::HookContext) -> Result<Result<String, String>, CallError> {
        self.wait_blocking("hook-settings", self.hook_settings_rx(ctx))
    }

    pub async fn pending_dialog(&self, spool: Vec<u8>) -> Result<Result<sdk::Pending, String>, CallError> {
        let rx = self.submit("pending-dialog", move |s, _, h| {
            h.map(|h| h.call_pending_dialog(s, &spool).map(|r| r.map(convert::pending)))
        });
        self.wait("pending-dialog", rx).await
    }

    pub async fn blocked_state(&self, marker: Vec<u8>) -> Result<Result<sdk::Blocked, String>, CallError> {
        let rx = self.submit("blocked-state", move |s, _, h| {
            h.map(|h| h.call_blocked_state(s, &marker).map(|r| r.map(convert::blocked)))
        });
        self.wait("blocked-state", rx).await
    }

    fn answer_rx(
        &self,
        dialog: sdk::Dialog,
        answers: Vec<sdk::Answer>,
    ) -> oneshot::Receiver<Result<Result<Vec<sdk::KeyOp>, String>, CallError>> {
        let dialog = convert::dialog_out(dialog);
        let answers: Vec<_> = answers.into_iter().map(convert::answer).collect();
        self.submit("answer-keys", move |s, _, h| {
            h.map(|h| {
                h.call_answer_keys(s, &dialog, &answers)
                    .map(|r| r.map(|ops| ops.into_iter().map(convert::key_op).collect()))
            })
        })
    }

    pub async fn answer_keys(
        &self,
        dialog: sdk::Dialog,
        answers: Vec<sdk::Answer>,
    ) -> Result<Result<Vec<sdk::KeyOp>, String>, CallError> {
        self.wait("answer-keys", self.answer_rx(dialog, answers)).await
    }

    pub fn answer_keys_blocking(
        &self,
        dialog: sdk::Dialog,
        answers: Vec<sdk::Answer>,
    ) -> Result<Result<Vec<sdk::KeyOp>, String>, CallError> {
        self.wait_blocking("answer-keys", self.answer_rx(dialog, answers))
    }
}
