//! Answers played next to the agent: lab serve sends the prompt, the provider's plan and
//! the provider build the run pinned
//! ([`Op::Answer`](crate::machines::hosts::protocol::Op::Answer)); the runner plays it
//! with lab's one answer player ([`type_onto_drawn`]), asking that same build whether
//! the prompt is drawn (a runner is lab serve's own build, so it bundles the same
//! providers, by digest), and types the keys at once — click →
//! first key costs one trip instead of three. A build this runner lacks (a provider
//! dropped in at lab serve), the providers not loaded yet, or a prompt not drawn and
//! still within the short look, is said ([`Answered::No`]); lab serve then plays the
//! answer itself, as before. The keys only ever land on a prompt the provider saw drawn.

use crate::agents::components::{ComponentHost, Limits, ProviderSet};
use crate::agents::model::{AnswerPlan, Dialog};
use crate::machines::hosts::protocol::{Answered, Reply, Step};
use crate::machines::terminal::Terminal;
use crate::machines::tmux::Tmux;
use crate::runs::answer::playback::{type_onto_drawn, Typed};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

/// This runner's providers: its own build's bundled ones, loaded once.
struct Builds {
    _host: ComponentHost,
    set: ProviderSet,
}

static BUILDS: OnceLock<Option<Builds>> = OnceLock::new();

/// Load the bundled providers (blocking; once per process): called when a link is
/// welcomed, so the first answer finds them ready.
pub fn preload(home: &crate::store::paths::Home) {
    BUILDS.get_or_init(|| match ComponentHost::new(Some(home.component_cache()), Limits::default()) {
        Ok(host) => {
            let set = ProviderSet::bundled(&host);
            tracing::info!(builds = set.loaded.len(), "providers ready for answers played here");
            Some(Builds { _host: host, set })
        }
        Err(e) => {
            tracing::warn!(error = %e, "no providers here: answers are played from lab serve");
            None
        }
    });
}

/// One answer ([`Op::Answer`](crate::machines::hosts::protocol::Op::Answer), checked).
#[allow(clippy::too_many_arguments)]
pub async fn answer(
    tmux: Tmux,
    target: String,
    build: String,
    dialog: Dialog,
    steps: Vec<Step>,
    pause: Duration,
    settle: Duration,
    look: Duration,
) -> Reply {
    let no = |why: &str| Reply::Text {
        text: crate::machines::hosts::protocol::encode(&Answered::No { why: why.to_string() }),
    };
    let Some(Some(builds)) = BUILDS.get() else { return no("the providers are not loaded here yet") };
    let Some((_, provider)) = builds.set.loaded.iter().find(|(f, _)| f.digest == build) else {
        return no("this runner does not have that provider build");
    };
    let provider = provider.clone();
    // A provider that fails to tell is taken as "not drawn": fail closed.
    let drawn = |pane: String| {
        let (provider, dialog) = (provider.clone(), dialog.clone());
        async move { provider.is_drawn(dialog, pane).await.unwrap_or(false) }
    };
    let term: Arc<dyn Terminal> = Arc::new(tmux);
    let plan = AnswerPlan { drawn_within: look, settle, pause, steps: steps.into_iter().map(Into::into).collect() };
    // lab serve asked the guard just before the trip: the prompt is the run's.
    let live = || std::future::ready(Ok::<bool, std::convert::Infallible>(true));
    let Ok(typed) = type_onto_drawn(&term, &target, &plan, &drawn, &live, |_| {}).await;
    match typed {
        Typed::Onto(pane) => {
            tracing::info!("an answer played here, its prompt seen drawn here");
            Reply::Text { text: crate::machines::hosts::protocol::encode(&Answered::Yes { pane }) }
        }
        Typed::NotOnScreen | Typed::NoLongerLive => no("the prompt was not drawn and still within the look"),
        Typed::Failed(e) => Reply::Error { message: e.to_string() },
    }
}
