//! One provider = one store, driven by one dedicated thread. Callers queue jobs and
//! await the answer; the thread applies the call deadline and memory cap and rebuilds
//! the store after any failed call. Two lanes ([`Lane`]): what an operator or a hook is
//! waiting on right now (an answer's plan, a spooled prompt) goes ahead of the bulk
//! (transcripts, screens), so an answer never waits behind other runs' reading.
//!
//! Every function goes through one generic call ([`Worker::call`]) with one error type
//! ([`CallError`]); a component's own error value (`result<_, string>`) is
//! [`CallErrorKind::Refused`]. The per-version dispatch is in the typed methods of
//! [`ProviderHandle`], each a `match` over the component's WIT version that converts
//! through that version's module ([`super::v0_1_0`], [`super::v0_2_0`]; 0.3.0's types
//! are 0.2.0's, so [`per_version!`] gives both versions one body).

pub use super::exports::{Capabilities, Version};
pub(super) use super::exports::{Guests, Indices};
pub use super::queue::Lane;
use super::queue::{Queue, Stopped};
use super::v0_3_0 as v3;
use super::{
    v0_1_0 as v1, v0_2_0 as v2, v0_4_0 as v4, v0_5_0 as v5, v0_6_0 as v6, v0_7_0 as v7, v0_8_0 as v8, v0_9_0 as v9,
    ComponentHost, StoreState,
};
use crate::agents::model as m;
use crate::agents::provider::{CallError, CallErrorKind};
use std::future::{Future, IntoFuture};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use tokio::sync::oneshot;
use wasmtime::component::InstancePre;
use wasmtime::{Store, Trap};

/// One body for the 0.2.0, 0.3.0 and 0.4.0 exports (their types are the same Rust types),
/// the 0.1.0 arm given apart; an ACP provider has none of these functions.
macro_rules! per_version {
    ($g:expr, $v1:pat => $e1:expr, { $($field:ident),* } => $e:expr) => {
        match $g {
            $v1 => $e1,
            Guests::V2 { $($field,)* .. } => $e,
            Guests::V3 { $($field,)* .. } => $e,
            Guests::V4 { $($field,)* .. } => $e,
            Guests::V5 { $($field,)* .. } => $e,
            Guests::V6 { $($field,)* .. } => $e,
            Guests::V7 { $($field,)* .. } => $e,
            Guests::V8 { $($field,)* .. } => $e,
            Guests::V9 { $($field,)* .. } => $e,
            Guests::Acp { .. }
            | Guests::Acp4 { .. }
            | Guests::Acp5 { .. }
            | Guests::Acp6 { .. }
            | Guests::Acp7 { .. }
            | Guests::Acp8 { .. }
            | Guests::Acp9 { .. } => None,
        }
    };
}

type Job = Box<dyn FnOnce(&mut Worker) + Send>;

/// The sending side, shared by every clone of a handle: when the last clone goes, the
/// queue closes and the thread ends.
struct Sender(Arc<Queue<Job>>);

impl Drop for Sender {
    fn drop(&mut self) {
        self.0.close();
    }
}

/// A cheap, cloneable handle to a loaded provider.
#[derive(Clone)]
pub struct ProviderHandle {
    tx: Arc<Sender>,
    name: Arc<Mutex<String>>,
    caps: Capabilities,
}

struct Live {
    store: Store<StoreState>,
    guests: Guests,
}

struct Worker {
    host: ComponentHost,
    name: Arc<Mutex<String>>,
    pre: InstancePre<StoreState>,
    indices: Indices,
    live: Option<Live>,
}

fn wasm_string(e: wasmtime::Error) -> String {
    super::wasm_err(e).to_string()
}

impl Worker {
    fn instantiate(&self) -> Result<Live, String> {
        let limits = self.host.limits();
        let _ticking = self.host.running();
        let mut store = Store::new(self.host.engine(), StoreState::new(limits.memory_bytes));
        store.limiter(|s| &mut s.limiter);
        store.set_epoch_deadline(deadline_ticks(limits.call_deadline));
        store.epoch_deadline_trap();
        let instance = self.pre.instantiate(&mut store).map_err(wasm_string)?;
        let guests = match &self.indices {
            Indices::V1 { base, hooker } => Guests::V1 {
                base: base.load(&mut store, &instance).map_err(wasm_string)?,
                hooker: hooker.as_ref().map(|i| i.load(&mut store, &instance)).transpose().map_err(wasm_string)?,
            },
            Indices::V2 { base, hooker, screen } => Guests::V2 {
                base: base.load(&mut store, &instance).map_err(wasm_string)?,
                hooker: hooker.as_ref().map(|i| i.load(&mut store, &instance)).transpose().map_err(wasm_string)?,
                screen: screen.as_ref().map(|i| i.load(&mut store, &instance)).transpose().map_err(wasm_string)?,
            },
            Indices::V3 { base, hooker, screen } => Guests::V3 {
                base: base.load(&mut store, &instance).map_err(wasm_string)?,
                hooker: hooker.as_ref().map(|i| i.load(&mut store, &instance)).transpose().map_err(wasm_string)?,
                screen: screen.as_ref().map(|i| i.load(&mut store, &instance)).transpose().map_err(wasm_string)?,
            },
            Indices::V4 { base, hooker, screen, sessions } => Guests::V4 {
                base: base.load(&mut store, &instance).map_err(wasm_string)?,
                hooker: hooker.as_ref().map(|i| i.load(&mut store, &instance)).transpose().map_err(wasm_string)?,
                screen: screen.as_ref().map(|i| i.load(&mut store, &instance)).transpose().map_err(wasm_string)?,
                sessions: sessions.load(&mut store, &instance).map_err(wasm_string)?,
            },
            Indices::Acp { agent } => Guests::Acp { agent: agent.load(&mut store, &instance).map_err(wasm_string)? },
            Indices::Acp4 { agent } => Guests::Acp4 { agent: agent.load(&mut store, &instance).map_err(wasm_string)? },
            Indices::V5 { base, hooker, screen, sessions, usage } => Guests::V5 {
                base: base.load(&mut store, &instance).map_err(wasm_string)?,
                hooker: hooker.as_ref().map(|i| i.load(&mut store, &instance)).transpose().map_err(wasm_string)?,
                screen: screen.as_ref().map(|i| i.load(&mut store, &instance)).transpose().map_err(wasm_string)?,
                sessions: sessions.load(&mut store, &instance).map_err(wasm_string)?,
                usage: usage.load(&mut store, &instance).map_err(wasm_string)?,
            },
            Indices::Acp5 { agent } => Guests::Acp5 { agent: agent.load(&mut store, &instance).map_err(wasm_string)? },
            Indices::V6 { base, hooker, screen, sessions, usage, sandbox } => Guests::V6 {
                base: base.load(&mut store, &instance).map_err(wasm_string)?,
                hooker: hooker.as_ref().map(|i| i.load(&mut store, &instance)).transpose().map_err(wasm_string)?,
                screen: screen.as_ref().map(|i| i.load(&mut store, &instance)).transpose().map_err(wasm_string)?,
                sessions: sessions.load(&mut store, &instance).map_err(wasm_string)?,
                usage: usage.load(&mut store, &instance).map_err(wasm_string)?,
                sandbox: sandbox.load(&mut store, &instance).map_err(wasm_string)?,
            },
            Indices::Acp6 { agent } => Guests::Acp6 { agent: agent.load(&mut store, &instance).map_err(wasm_string)? },
            Indices::V7 { base, hooker, screen, sessions, usage, sandbox } => Guests::V7 {
                base: base.load(&mut store, &instance).map_err(wasm_string)?,
                hooker: hooker.as_ref().map(|i| i.load(&mut store, &instance)).transpose().map_err(wasm_string)?,
                screen: screen.as_ref().map(|i| i.load(&mut store, &instance)).transpose().map_err(wasm_string)?,
                sessions: sessions.load(&mut store, &instance).map_err(wasm_string)?,
                usage: usage.load(&mut store, &instance).map_err(wasm_string)?,
                sandbox: sandbox.load(&mut store, &instance).map_err(wasm_string)?,
            },
            Indices::Acp7 { agent } => Guests::Acp7 { agent: agent.load(&mut store, &instance).map_err(wasm_string)? },
            Indices::V8 { base, hooker, screen, sessions, usage, sandbox, rules } => Guests::V8 {
                base: base.load(&mut store, &instance).map_err(wasm_string)?,
                hooker: hooker.as_ref().map(|i| i.load(&mut store, &instance)).transpose().map_err(wasm_string)?,
                screen: screen.as_ref().map(|i| i.load(&mut store, &instance)).transpose().map_err(wasm_string)?,
                sessions: sessions.load(&mut store, &instance).map_err(wasm_string)?,
                usage: usage.load(&mut store, &instance).map_err(wasm_string)?,
                sandbox: sandbox.load(&mut store, &instance).map_err(wasm_string)?,
                rules: rules.as_ref().map(|i| i.load(&mut store, &instance)).transpose().map_err(wasm_string)?,
            },
            Indices::Acp8 { agent } => Guests::Acp8 { agent: agent.load(&mut store, &instance).map_err(wasm_string)? },
            Indices::V9 { base, hooker, screen, sessions, usage, sandbox, rules, setup } => Guests::V9 {
                base: base.load(&mut store, &instance).map_err(wasm_string)?,
                hooker: hooker.as_ref().map(|i| i.load(&mut store, &instance)).transpose().map_err(wasm_string)?,
                screen: screen.as_ref().map(|i| i.load(&mut store, &instance)).transpose().map_err(wasm_string)?,
                sessions: sessions.load(&mut store, &instance).map_err(wasm_string)?,
                usage: usage.load(&mut store, &instance).map_err(wasm_string)?,
                sandbox: sandbox.load(&mut store, &instance).map_err(wasm_string)?,
                rules: rules.as_ref().map(|i| i.load(&mut store, &instance)).transpose().map_err(wasm_string)?,
                setup: setup.as_ref().map(|i| i.load(&mut store, &instance)).transpose().map_err(wasm_string)?,
            },
            Indices::Acp9 { agent, setup } => Guests::Acp9 {
                agent: agent.load(&mut store, &instance).map_err(wasm_string)?,
                setup: setup.as_ref().map(|i| i.load(&mut store, &instance)).transpose().map_err(wasm_string)?,
            },
        };
        Ok(Live { store, guests })
    }

    /// The one call: `f` gets the store and the exports and returns `None` when the
    /// component cannot do it, else the call's outcome (an `Err(String)` inside is the
    /// component's own refusal).
    fn call<R>(
        &mut self,
        function: &'static str,
        f: impl FnOnce(&mut Store<StoreState>, &Guests) -> Option<wasmtime::Result<Result<R, String>>>,
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
        let _ticking = self.host.running();
        let live = self.live.as_mut().expect("instantiated above");
        live.store.data_mut().limiter.hit = false;
        live.store.set_epoch_deadline(deadline_ticks(limits.call_deadline));
        match f(&mut live.store, &live.guests) {
            None => Err(err(&self.name, CallErrorKind::Unsupported)),
            Some(Ok(Ok(r))) => Ok(r),
            Some(Ok(Err(msg))) => Err(err(&self.name, CallErrorKind::Refused(msg))),
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

/// A call on its way: `.await` it, or [`Call::blocking`] from a thread that is not the
/// async runtime's.
pub struct Call<R> {
    rx: oneshot::Receiver<Result<R, CallError>>,
    provider: String,
    function: &'static str,
}

impl<R> Call<R> {
    fn gone(provider: String, function: &'static str) -> CallError {
        CallError { provider, function, kind: CallErrorKind::Unavailable("its thread has stopped".into()) }
    }

    /// Wait for the result on this thread.
    pub fn blocking(self) -> Result<R, CallError> {
        let (provider, function) = (self.provider, self.function);
        self.rx.blocking_recv().unwrap_or_else(|_| Err(Self::gone(provider, function)))
    }
}

impl<R: Send + 'static> IntoFuture for Call<R> {
    type Output = Result<R, CallError>;
    type IntoFuture = Pin<Box<dyn Future<Output = Self::Output> + Send>>;

    fn into_future(self) -> Self::IntoFuture {
        Box::pin(async move {
            let (provider, function) = (self.provider, self.function);
            self.rx.await.unwrap_or_else(|_| Err(Self::gone(provider, function)))
        })
    }
}

/// Wrap an infallible result.
fn ok<R>(r: wasmtime::Result<R>) -> Option<wasmtime::Result<Result<R, String>>> {
    Some(r.map(Ok))
}

/// Wrap a `result<_, string>` result.
fn res<R>(r: wasmtime::Result<Result<R, String>>) -> Option<wasmtime::Result<Result<R, String>>> {
    Some(r)
}

impl ProviderHandle {
    pub(super) fn spawn(
        host: ComponentHost,
        label: String,
        pre: InstancePre<StoreState>,
        indices: Indices,
    ) -> anyhow::Result<Self> {
        let queue = Arc::new(Queue::<Job>::new());
        let rx = queue.clone();
        let name = Arc::new(Mutex::new(label.clone()));
        let caps = indices.capabilities();
        let mut worker = Worker { host, name: name.clone(), pre, indices, live: None };
        // Instantiate once up front, so a component that cannot start fails to load.
        worker.live = Some(worker.instantiate().map_err(|e| anyhow::anyhow!("instantiating the component: {e}"))?);
        std::thread::Builder::new().name(format!("provider:{label}")).spawn(move || {
            let _stopped = Stopped(rx.clone());
            while let Some(job) = rx.pop() {
                job(&mut worker);
            }
        })?;
        Ok(ProviderHandle { tx: Arc::new(Sender(queue)), name, caps })
    }

    pub(super) fn set_name(&self, name: &str) {
        *self.name.lock().unwrap() = name.to_string();
    }

    pub fn name(&self) -> String {
        self.name.lock().unwrap().clone()
    }

    pub fn capabilities(&self) -> Capabilities {
        self.caps
    }

    /// Whether the component exports the dialog-hooker interface.
    pub fn dialog_hooker(&self) -> bool {
        self.caps.dialog_hooker
    }

    /// Whether the component can read prompts off the screen (and answer them).
    pub fn screen_reader(&self) -> bool {
        self.caps.screen_reader
    }

    /// Run `f` on the provider's thread, in the bulk lane: the generic call every
    /// method below uses.
    fn call<R: Send + 'static>(
        &self,
        function: &'static str,
        f: impl FnOnce(&mut Store<StoreState>, &Guests) -> Option<wasmtime::Result<Result<R, String>>> + Send + 'static,
    ) -> Call<R> {
        self.call_in(Lane::Bulk, function, f)
    }

    /// [`ProviderHandle::call`] in `lane`.
    fn call_in<R: Send + 'static>(
        &self,
        lane: Lane,
        function: &'static str,
        f: impl FnOnce(&mut Store<StoreState>, &Guests) -> Option<wasmtime::Result<Result<R, String>>> + Send + 'static,
    ) -> Call<R> {
        let (tx, rx) = oneshot::channel();
        let job: Job = Box::new(move |w: &mut Worker| {
            let _ = tx.send(w.call(function, f));
        });
        // A thread that has stopped drops the job and its sender: the caller sees
        // Unavailable.
        self.tx.0.push(lane, job);
        Call { rx, provider: self.name(), function }
    }

    pub fn info(&self) -> Call<m::ProviderInfo> {
        self.call("info", |s, g| match g {
            Guests::V1 { base, .. } => ok(base.call_info(s).map(v1::info)),
            Guests::V2 { base, .. } => ok(base.call_info(s).map(v2::info)),
            Guests::V3 { base, .. } => ok(base.call_info(s).map(v2::info)),
            Guests::V4 { base, .. } => ok(base.call_info(s).map(v2::info)),
            Guests::Acp { agent } => ok(agent.call_info(s).map(v2::info)),
            Guests::Acp4 { agent } => ok(agent.call_info(s).map(v2::info)),
            Guests::V5 { base, .. } => ok(base.call_info(s).map(v2::info)),
            Guests::Acp5 { agent } => ok(agent.call_info(s).map(v2::info)),
            Guests::V6 { base, .. } => ok(base.call_info(s).map(v2::info)),
            Guests::Acp6 { agent } => ok(agent.call_info(s).map(v2::info)),
            Guests::V7 { base, .. } => ok(base.call_info(s).map(v2::info)),
            Guests::Acp7 { agent } => ok(agent.call_info(s).map(v2::info)),
            Guests::V8 { base, .. } => ok(base.call_info(s).map(v2::info)),
            Guests::V9 { base, .. } => ok(base.call_info(s).map(v2::info)),
            Guests::Acp8 { agent } => ok(agent.call_info(s).map(v2::info)),
            Guests::Acp9 { agent, .. } => ok(agent.call_info(s).map(v2::info)),
        })
    }

    /// How to start the ACP agent an ACP provider declares.
    pub fn acp_launch(&self) -> Call<m::AcpLaunch> {
        self.call("launch", |s, g| match g {
            Guests::Acp { agent } => ok(agent.call_launch(s).map(v3::acp_launch)),
            Guests::Acp4 { agent } => ok(agent.call_launch(s).map(v4::acp_launch)),
            Guests::Acp5 { agent } => ok(agent.call_launch(s).map(v5::acp_launch)),
            Guests::Acp6 { agent } => ok(agent.call_launch(s).map(v6::acp_launch)),
            Guests::Acp7 { agent } => ok(agent.call_launch(s).map(v7::acp_launch)),
            Guests::Acp8 { agent } => ok(agent.call_launch(s).map(v8::acp_launch)),
            Guests::Acp9 { agent, .. } => ok(agent.call_launch(s).map(v9::acp_launch)),
            _ => None,
        })
    }

    /// What a turn used, from an ACP agent's `session/prompt` response (0.7.0
    /// `acp-agent.turn-usage`): tokens by model.
    pub fn turn_usage(&self, response: String) -> Call<Vec<(String, m::Tokens)>> {
        self.call("turn-usage", move |s, g| match g {
            Guests::Acp7 { agent } => ok(agent.call_turn_usage(s, &response).map(v7::turn_usage)),
            Guests::Acp8 { agent } => ok(agent.call_turn_usage(s, &response).map(v8::turn_usage)),
            Guests::Acp9 { agent, .. } => ok(agent.call_turn_usage(s, &response).map(v9::turn_usage)),
            _ => None,
        })
    }

    pub fn launch(&self, req: m::LaunchRequest) -> Call<m::LaunchSpec> {
        self.call("launch", move |s, g| {
            per_version!(g,
                Guests::V1 { base, .. } => res(base.call_launch(s, &v1::launch_request(req)).map(|r| r.map(v1::launch_spec))),
                { base } => res(base.call_launch(s, &v2::launch_request(req)).map(|r| r.map(v2::launch_spec))))
        })
    }

    pub fn parse_transcript(&self, chunk: Vec<u8>) -> Call<m::ParseOutput> {
        self.call("parse-transcript", move |s, g| {
            per_version!(g,
                Guests::V1 { base, .. } => ok(base.call_parse_transcript(s, &chunk).map(v1::parse_output)),
                { base } => ok(base.call_parse_transcript(s, &chunk).map(v2::parse_output)))
        })
    }

    pub fn map_dialog(&self, call: m::ToolUse) -> Call<Option<m::Dialog>> {
        self.call("map-dialog", move |s, g| {
            per_version!(g,
                Guests::V1 { base, .. } => ok(base.call_map_dialog(s, &v1::tool_call(call)).map(|d| d.map(v1::dialog_in))),
                { base } => ok(base.call_map_dialog(s, &v2::tool_use_out(&call)).map(|d| d.map(v2::dialog_in))))
        })
    }

    pub fn self_test_samples(&self) -> Call<m::Samples> {
        self.call("self-test-samples", |s, g| {
            per_version!(g, Guests::V1 { .. } => None, { base } => ok(base.call_self_test_samples(s).map(v2::samples)))
        })
    }

    pub fn hook_wiring(&self) -> Call<Vec<m::HookBinding>> {
        self.call("hook-wiring", |s, g| {
            per_version!(g,
                Guests::V1 { hooker, .. } => hooker.as_ref().map(|_| Ok(Ok(v1::hook_wiring()))),
                { hooker } => hooker
                    .as_ref()
                    .and_then(|h| ok(h.call_hook_wiring(s).map(|v| v.into_iter().map(v2::binding_in).collect()))))
        })
    }

    pub fn hook_settings(&self, run_id: String, hooks: Vec<m::HookCommand>) -> Call<Option<String>> {
        self.call("hook-settings", move |s, g| {
            per_version!(g,
                Guests::V1 { hooker, .. } => hooker.as_ref().and_then(|h| match v1::hook_context(&run_id, &hooks) {
                    Ok(ctx) => res(h.call_hook_settings(s, &ctx).map(|r| r.map(Some))),
                    Err(e) => Some(Ok(Err(e))),
                }),
                { hooker } => hooker.as_ref().and_then(|h| res(h.call_hook_settings(s, &run_id, &v2::hook_commands(&hooks)))))
        })
    }

    pub fn pending_dialog(&self, spool: Vec<u8>, open_calls: Vec<m::ToolUse>) -> Call<Option<m::Dialog>> {
        self.call_in(Lane::Prompt, "pending-dialog", move |s, g| {
            per_version!(g,
            Guests::V1 { hooker, .. } => {
                hooker.as_ref().and_then(|h| res(h.call_pending_dialog(s, &spool).map(|r| r.map(v1::pending))))
            },
            { hooker } => hooker.as_ref().and_then(|h| {
                let calls: Vec<_> = open_calls.iter().map(v2::tool_use_out).collect();
                res(h.call_pending_dialog(s, &spool, &calls).map(|r| r.map(|d| d.map(v2::dialog_in))))
            }))
        })
    }

    pub fn blocked_state(&self, marker: Vec<u8>) -> Call<m::Blocked> {
        self.call("blocked-state", move |s, g| {
            per_version!(g,
                Guests::V1 { hooker, .. } => {
                    hooker.as_ref().and_then(|h| res(h.call_blocked_state(s, &marker).map(|r| r.map(v1::blocked))))
                },
                { hooker } => hooker.as_ref().and_then(|h| res(h.call_blocked_state(s, &marker).map(|r| r.map(v2::blocked)))))
        })
    }

    pub fn session_info(&self, payload: Vec<u8>) -> Call<m::SessionFacts> {
        self.call("session-info", move |s, g| {
            per_version!(g,
                Guests::V1 { .. } => None,
                { hooker } => hooker
                    .as_ref()
                    .and_then(|h| res(h.call_session_info(s, &payload).map(|r| r.map(v2::session_facts)))))
        })
    }

    pub fn plan_answer(&self, dialog: m::Dialog, answers: Vec<m::Answer>) -> Call<m::AnswerPlan> {
        self.call_in(Lane::Prompt, "plan-answer", move |s, g| {
            per_version!(g,
            Guests::V1 { hooker, .. } => hooker.as_ref().and_then(|h| {
                let Some(d) = v1::dialog_out(&dialog) else {
                    return Some(Ok(Err(format!("a {} dialog cannot be answered by this provider", dialog.kind()))));
                };
                let Some(answers) = answers.iter().map(v1::answer).collect::<Option<Vec<_>>>() else {
                    return Some(Ok(Err("this provider takes no feedback answers".into())));
                };
                res(h.call_answer_keys(s, &d, &answers).map(|r| r.map(v1::answer_plan)))
            }),
            { hooker } => hooker.as_ref().and_then(|h| {
                let answers: Vec<_> = answers.iter().map(v2::answer).collect();
                res(h.call_plan_answer(s, &v2::dialog_out(&dialog), &answers).map(|r| r.map(v2::answer_plan)))
            }))
        })
    }

    /// Whether `pane` shows `dialog` ready for keys. 0.1.0 components cannot tell: for
    /// them the host looks for the dialog's own words on the pane
    /// ([`m::Dialog::words_shown_in`]), so keys still go only onto a prompt on screen.
    pub fn is_drawn(&self, dialog: m::Dialog, pane: String) -> Call<bool> {
        self.call("is-drawn", move |s, g| {
            per_version!(g,
                Guests::V1 { hooker, .. } => hooker.as_ref().map(|_| Ok(Ok(dialog.words_shown_in(&pane)))),
                { hooker } => hooker.as_ref().and_then(|h| ok(h.call_is_drawn(s, &v2::dialog_out(&dialog), &pane))))
        })
    }

    /// What the agent can do with an earlier conversation (0.4.0 `sessions`), asked
    /// once when the component is loaded and kept in its [`Capabilities`].
    pub(super) fn ask_abilities(&mut self) -> Result<(), CallError> {
        if !matches!(
            self.caps.version,
            Version::V0_4_0 | Version::V0_5_0 | Version::V0_6_0 | Version::V0_7_0 | Version::V0_8_0 | Version::V0_9_0
        ) || self.caps.acp
        {
            return Ok(());
        }
        let call = self.call("abilities", |s, g| match g {
            Guests::V4 { sessions, .. } => ok(sessions.call_abilities(s).map(v4::abilities)),
            Guests::V5 { sessions, .. } => ok(sessions.call_abilities(s).map(v5::abilities)),
            Guests::V6 { sessions, .. } => ok(sessions.call_abilities(s).map(v6::abilities)),
            Guests::V7 { sessions, .. } => ok(sessions.call_abilities(s).map(v7::abilities)),
            Guests::V8 { sessions, .. } => ok(sessions.call_abilities(s).map(v8::abilities)),
            Guests::V9 { sessions, .. } => ok(sessions.call_abilities(s).map(v9::abilities)),
            _ => None,
        });
        self.caps.abilities = call.blocking()?;
        Ok(())
    }

    pub fn continue_session(
        &self,
        req: m::LaunchRequest,
        how: m::Continuation,
        earlier: m::EarlierRun,
    ) -> Call<m::LaunchSpec> {
        self.call("continue-session", move |s, g| match g {
            Guests::V4 { sessions, .. } => res(sessions
                .call_continue_session(s, &v2::launch_request(req), v4::continuation(how), &v4::earlier_run(earlier))
                .map(|r| r.map(v2::launch_spec))),
            Guests::V5 { sessions, .. } => res(sessions
                .call_continue_session(s, &v2::launch_request(req), v5::continuation(how), &v5::earlier_run(earlier))
                .map(|r| r.map(v2::launch_spec))),
            Guests::V6 { sessions, .. } => res(sessions
                .call_continue_session(s, &v2::launch_request(req), v6::continuation(how), &v6::earlier_run(earlier))
                .map(|r| r.map(v2::launch_spec))),
            Guests::V7 { sessions, .. } => res(sessions
                .call_continue_session(s, &v2::launch_request(req), v7::continuation(how), &v7::earlier_run(earlier))
                .map(|r| r.map(v2::launch_spec))),
            Guests::V8 { sessions, .. } => res(sessions
                .call_continue_session(s, &v2::launch_request(req), v8::continuation(how), &v8::earlier_run(earlier))
                .map(|r| r.map(v2::launch_spec))),
            Guests::V9 { sessions, .. } => res(sessions
                .call_continue_session(s, &v2::launch_request(req), v9::continuation(how), &v9::earlier_run(earlier))
                .map(|r| r.map(v2::launch_spec))),
            _ => None,
        })
    }

    pub fn usage_limit(&self, msg: m::Message) -> Call<Option<m::UsageLimit>> {
        self.call("usage-limit", move |s, g| match g {
            Guests::V4 { sessions, .. } => {
                ok(sessions.call_usage_limit(s, &v4::message_out(&msg)).map(|l| l.map(v4::usage_limit)))
            }
            Guests::V5 { sessions, .. } => {
                ok(sessions.call_usage_limit(s, &v4::message_out(&msg)).map(|l| l.map(v5::usage_limit)))
            }
            Guests::V6 { sessions, .. } => {
                ok(sessions.call_usage_limit(s, &v4::message_out(&msg)).map(|l| l.map(v6::usage_limit)))
            }
            Guests::V7 { sessions, .. } => {
                ok(sessions.call_usage_limit(s, &v4::message_out(&msg)).map(|l| l.map(v7::usage_limit)))
            }
            Guests::V8 { sessions, .. } => {
                ok(sessions.call_usage_limit(s, &v4::message_out(&msg)).map(|l| l.map(v8::usage_limit)))
            }
            Guests::V9 { sessions, .. } => {
                ok(sessions.call_usage_limit(s, &v4::message_out(&msg)).map(|l| l.map(v9::usage_limit)))
            }
            _ => None,
        })
    }

    /// What a transcript chunk says about usage (0.5.0 `usage`).
    pub fn read_usage(&self, chunk: Vec<u8>) -> Call<m::UsageReport> {
        self.call("read-usage", move |s, g| match g {
            Guests::V5 { usage, .. } => ok(usage.call_read_usage(s, &chunk).map(v5::usage_report)),
            Guests::V6 { usage, .. } => ok(usage.call_read_usage(s, &chunk).map(v6::usage_report)),
            Guests::V7 { usage, .. } => ok(usage.call_read_usage(s, &chunk).map(v7::usage_report)),
            Guests::V8 { usage, .. } => ok(usage.call_read_usage(s, &chunk).map(v8::usage_report)),
            Guests::V9 { usage, .. } => ok(usage.call_read_usage(s, &chunk).map(v9::usage_report)),
            _ => None,
        })
    }

    /// What the agent needs inside a sandbox (0.6.0 `sandbox`).
    pub fn sandbox_needs(&self, env: Vec<(String, String)>) -> Call<crate::sandbox::Needs> {
        self.call("sandbox-needs", move |s, g| match g {
            Guests::V6 { sandbox, .. } => ok(sandbox.call_needs(s, &env).map(v6::needs)),
            Guests::V7 { sandbox, .. } => ok(sandbox.call_needs(s, &env).map(v7::needs)),
            Guests::V8 { sandbox, .. } => ok(sandbox.call_needs(s, &env).map(v8::needs)),
            Guests::V9 { sandbox, .. } => ok(sandbox.call_needs(s, &env).map(v9::needs)),
            _ => None,
        })
    }

    /// What answer rules need of a prompt (0.8.0 `answer-rules.facts`).
    pub fn prompt_facts(&self, dialog: m::Dialog) -> Call<Option<m::PromptFacts>> {
        self.call("prompt-facts", move |s, g| match g {
            Guests::V8 { rules: Some(r), .. } => {
                ok(r.call_facts(s, &v2::dialog_out(&dialog)).map(|f| f.map(v8::prompt_facts)))
            }
            Guests::V9 { rules: Some(r), .. } => {
                ok(r.call_facts(s, &v2::dialog_out(&dialog)).map(|f| f.map(v9::prompt_facts)))
            }
            _ => None,
        })
    }

    /// Where the agent keeps a login (0.9.0 `setup.login`).
    pub fn login_hints(&self, env: Vec<(String, String)>) -> Call<Option<m::LoginHints>> {
        self.call("login", move |s, g| match g {
            Guests::V9 { setup: Some(x), .. } | Guests::Acp9 { setup: Some(x), .. } => {
                ok(x.call_login(s, &env).map(|h| h.map(v9::login_hints)))
            }
            _ => None,
        })
    }

    pub fn read_screen(&self, pane: String) -> Call<Option<m::Dialog>> {
        self.call("read-screen", move |s, g| {
            per_version!(g,
                Guests::V1 { .. } => None,
                { screen } => screen.as_ref().and_then(|r| ok(r.call_read_screen(s, &pane).map(|d| d.map(v2::dialog_in)))))
        })
    }
}
