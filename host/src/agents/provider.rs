//! What lab asks of a provider, apart from how it is loaded: the [`Provider`] trait,
//! every call that launch, answer and the tailer make, and the
//! one error a call ends in ([`CallError`]). In `lab serve` a provider is a wasm
//! component ([`crate::agents::components::ProviderHandle`], on its own thread); tests
//! drive the same calls with a fake, so the rules around them are tested without wasm.

use crate::agents::model;
use std::future::Future;
use std::pin::Pin;

/// A provider's answer on its way.
pub type Reply<T> = Pin<Box<dyn Future<Output = Result<T, CallError>> + Send>>;

/// A provider, as the host sees it. Each call's meaning is the WIT interface's
/// (`wit/`); the host's own types ([`model`]) are the same whatever the version.
pub trait Provider: Send + Sync {
    /// Whether it captures prompts live (the spool is authoritative).
    fn dialog_hooker(&self) -> bool;
    fn parse_transcript(&self, chunk: Vec<u8>) -> Reply<model::ParseOutput>;
    fn map_dialog(&self, call: model::ToolUse) -> Reply<Option<model::Dialog>>;
    fn pending_dialog(&self, spool: Vec<u8>, open_calls: Vec<model::ToolUse>) -> Reply<Option<model::Dialog>>;
    fn blocked_state(&self, marker: Vec<u8>) -> Reply<model::Blocked>;
    fn session_info(&self, payload: Vec<u8>) -> Reply<model::SessionFacts>;

    /// Whether it reads prompts off the agent's screen (`screen-reader`).
    fn screen_reader(&self) -> bool {
        false
    }
    /// How to start its agent for a run.
    fn launch(&self, _req: model::LaunchRequest) -> Reply<model::LaunchSpec> {
        unsupported("launch")
    }
    /// Which of lab's hook commands its agent runs, and when.
    fn hook_wiring(&self) -> Reply<Vec<model::HookBinding>> {
        unsupported("hook-wiring")
    }
    /// The agent's settings file that wires those hooks for one run.
    fn hook_settings(&self, _run_id: String, _hooks: Vec<model::HookCommand>) -> Reply<Option<String>> {
        unsupported("hook-settings")
    }
    /// The keys that answer `dialog` with `answers`.
    fn plan_answer(&self, _dialog: model::Dialog, _answers: Vec<model::Answer>) -> Reply<model::AnswerPlan> {
        unsupported("plan-answer")
    }
    /// Whether `pane` shows `dialog`, drawn and still.
    fn is_drawn(&self, _dialog: model::Dialog, _pane: String) -> Reply<bool> {
        unsupported("is-drawn")
    }
    /// The prompt `pane` shows, if any.
    fn read_screen(&self, _pane: String) -> Reply<Option<model::Dialog>> {
        unsupported("read-screen")
    }

    /// Who the provider is (asked once when loaded; again by `lab providers check`).
    fn info(&self) -> Reply<model::ProviderInfo> {
        unsupported("info")
    }
    /// Transcript lines and dialog calls of its own agent, for `lab providers check`.
    fn self_test_samples(&self) -> Reply<model::Samples> {
        unsupported("self-test-samples")
    }
    /// An ACP provider: how to start the agent it declares.
    fn acp_launch(&self) -> Reply<model::AcpLaunch> {
        unsupported("launch")
    }
    /// What its agent can do with an earlier conversation (none, for a component
    /// built against a WIT before 0.4.0).
    fn abilities(&self) -> model::Abilities {
        model::Abilities::default()
    }
    /// The launch that continues an earlier conversation (WIT 0.4.0 `sessions`).
    fn continue_session(
        &self,
        _req: model::LaunchRequest,
        _how: model::Continuation,
        _earlier: model::EarlierRun,
    ) -> Reply<model::LaunchSpec> {
        unsupported("continue-session")
    }
    /// Whether a transcript message says the agent stopped at a usage limit.
    fn usage_limit(&self, _msg: model::Message) -> Reply<Option<model::UsageLimit>> {
        unsupported("usage-limit")
    }
    /// Whether it reads usage from its transcript (WIT 0.5.0 `usage`).
    fn reads_usage(&self) -> bool {
        false
    }
    /// What a transcript chunk says about usage (the bytes `parse_transcript` got).
    fn read_usage(&self, _chunk: Vec<u8>) -> Reply<model::UsageReport> {
        unsupported("read-usage")
    }
    /// What answer rules need of `dialog` (WIT 0.8.0 `answer-rules`); unsupported for
    /// a component built before, whose prompts rules then never answer.
    fn prompt_facts(&self, _dialog: model::Dialog) -> Reply<Option<model::PromptFacts>> {
        unsupported("prompt-facts")
    }
    /// Where its agent keeps a login (WIT 0.9.0 `setup`), given the environment it
    /// starts with; unsupported for a component built before (`lab doctor` then cannot
    /// tell whether the agent is logged in).
    fn login_hints(&self, _env: Vec<(String, String)>) -> Reply<Option<model::LoginHints>> {
        unsupported("login")
    }
    /// What its agent needs inside a sandbox (WIT 0.6.0 `sandbox`), given the
    /// environment it starts with; unsupported for a component built before.
    fn sandbox_needs(&self, _env: Vec<(String, String)>) -> Reply<crate::sandbox::Needs> {
        unsupported("sandbox-needs")
    }
}

/// A call's answer waited for on this thread, for callers outside any async runtime
/// (`lab providers check`, loading a component).
pub trait Blocking<T> {
    fn blocking(self) -> Result<T, CallError>;
}

impl<T> Blocking<T> for Reply<T> {
    fn blocking(mut self) -> Result<T, CallError> {
        use std::task::{Context, Poll, Wake};
        struct Unpark(std::thread::Thread);
        impl Wake for Unpark {
            fn wake(self: std::sync::Arc<Self>) {
                self.0.unpark();
            }
        }
        let waker = std::sync::Arc::new(Unpark(std::thread::current())).into();
        let mut cx = Context::from_waker(&waker);
        loop {
            match self.as_mut().poll(&mut cx) {
                Poll::Ready(r) => return r,
                Poll::Pending => std::thread::park(),
            }
        }
    }
}

/// The answer of a call a provider does not make (a tailer-only fake, an older WIT).
fn unsupported<T: Send + 'static>(function: &'static str) -> Reply<T> {
    Box::pin(std::future::ready(Err(CallError { provider: String::new(), function, kind: CallErrorKind::Unsupported })))
}

/// Why a call into a component failed. The host keeps serving either way.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallError {
    pub provider: String,
    pub function: &'static str,
    pub kind: CallErrorKind,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallErrorKind {
    /// The component answered with its own error (a `result` error value): a message
    /// meant for the operator.
    Refused(String),
    /// The call ran past its deadline and was interrupted.
    Timeout { millis: u128 },
    /// The component tried to grow its memory past the cap.
    OutOfMemory { cap_mib: usize },
    /// The component trapped (panic, unreachable, …).
    Trap(String),
    /// The component does not export the interface the function belongs to (or its
    /// WIT version has no such function).
    Unsupported,
    /// The component could not be (re)instantiated, or its thread is gone.
    Unavailable(String),
}

impl CallError {
    /// The provider's own message, if it refused.
    pub fn refusal(&self) -> Option<&str> {
        match &self.kind {
            CallErrorKind::Refused(msg) => Some(msg),
            _ => None,
        }
    }
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let who = format!("provider `{}`: `{}`", self.provider, self.function);
        match &self.kind {
            CallErrorKind::Refused(msg) => write!(f, "{msg}"),
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A provider that only follows transcripts (as the tailer's fakes do).
    struct Reader;
    impl Provider for Reader {
        fn dialog_hooker(&self) -> bool {
            false
        }
        fn parse_transcript(&self, _: Vec<u8>) -> Reply<model::ParseOutput> {
            unsupported("parse-transcript")
        }
        fn map_dialog(&self, _: model::ToolUse) -> Reply<Option<model::Dialog>> {
            Box::pin(std::future::ready(Ok(None)))
        }
        fn pending_dialog(&self, _: Vec<u8>, _: Vec<model::ToolUse>) -> Reply<Option<model::Dialog>> {
            Box::pin(std::future::ready(Ok(None)))
        }
        fn blocked_state(&self, _: Vec<u8>) -> Reply<model::Blocked> {
            unsupported("blocked-state")
        }
        fn session_info(&self, _: Vec<u8>) -> Reply<model::SessionFacts> {
            unsupported("session-info")
        }
    }

    /// A call the provider does not make is an `Unsupported` error naming the function,
    /// as a component of an older WIT answers: never a panic, never a made-up answer.
    #[tokio::test]
    async fn a_call_a_provider_does_not_make_is_unsupported() {
        let p: &dyn Provider = &Reader;
        let e = p.read_screen("pane".into()).await.unwrap_err();
        assert_eq!((e.function, &e.kind), ("read-screen", &CallErrorKind::Unsupported));
        assert!(p.hook_wiring().await.is_err());
        assert!(!p.screen_reader());
        assert_eq!(p.self_test_samples().blocking().unwrap_err().function, "self-test-samples");
    }

    /// A reply that is not ready at once is waited for on the calling thread.
    #[test]
    fn a_reply_is_waited_for_without_a_runtime() {
        let (tx, rx) = tokio::sync::oneshot::channel::<u32>();
        let reply: Reply<u32> = Box::pin(async move { Ok(rx.await.unwrap()) });
        let sender = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(20));
            tx.send(7).unwrap();
        });
        assert_eq!(reply.blocking(), Ok(7));
        sender.join().unwrap();
    }
}
