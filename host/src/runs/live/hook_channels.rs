//! The hook channels' readers: the spool (the prompt waiting for an answer), the
//! blocked marker and the session info, each a [`HookFile`] with what it last said.
//! The provider reads the bytes; what follows from them is the view's
//! ([`crate::runs::live::view`]). Owned by the run's [`crate::runs::live::tailer::Tail`], one of each.

use crate::agents::components::Provider;
use crate::agents::model::{Dialog, ToolUse};
use crate::runs::live::hook_file::{HookFile, Look};
use crate::runs::live::spool;
use crate::runs::live::view::{MarkerFact, SpoolFact};
use crate::store::paths::RunId;
use std::collections::HashSet;
use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;

/// What every reader of a run's channels needs: which run (for the log), its provider
/// (None: not loaded, nothing is read), and what the provider said of itself.
pub struct Source {
    pub run: RunId,
    pub provider: Option<Arc<dyn Provider>>,
    /// The provider reads prompts from hooks (the spool and marker are followed).
    pub hooker: bool,
    /// The deep link a dialog without one gets (the run's terminal page).
    pub fallback_deep_link: Option<String>,
    /// Where the agent runs: where its plan files are read, where a transcript it
    /// names is read here ([`Whereabouts`]; this machine, no plan roots, until set).
    pub place: Arc<dyn Whereabouts>,
    /// Where what the transcript says goes besides the chat: usage, the search index
    /// (None: nowhere, as in tests).
    pub books: Option<Arc<crate::runs::books::Books>>,
}

/// Where a run's agent runs, as its tail sees it: the seam between following a run and
/// reaching where it lives. Every tail has one — [`ThisMachine`], or what its transport
/// gives it (`transport::remote`: the run's machine, through its runner) — so the tail
/// never asks which.
pub trait Whereabouts: Send + Sync {
    /// The text of plan file `file` a dialog names, read where the agent runs (from
    /// inside its home or workdir there), or why not.
    fn read_plan<'a>(&'a self, file: &'a str) -> Pin<Box<dyn Future<Output = Result<String, String>> + Send + 'a>>;
    /// Where a transcript the agent names (`named`, a path where it runs) is read here,
    /// and that path when it is not this machine's (kept in the run's record, and
    /// followed there).
    fn transcript(&self, named: PathBuf) -> (PathBuf, Option<String>);
}

/// A run whose agent runs on this machine: its plan files are read from inside the
/// agent's home and workdir ([`spool::plan_roots`]), a transcript it names where it is.
pub struct ThisMachine {
    pub plan_roots: Vec<PathBuf>,
}

impl Whereabouts for ThisMachine {
    fn read_plan<'a>(&'a self, file: &'a str) -> Pin<Box<dyn Future<Output = Result<String, String>> + Send + 'a>> {
        Box::pin(std::future::ready(spool::read_plan_file(file, &self.plan_roots)))
    }

    fn transcript(&self, named: PathBuf) -> (PathBuf, Option<String>) {
        (named, None)
    }
}

/// Give a plan dialog that names its plan file the file's text, read where the agent
/// runs. Failing that, the dialog stays as it is (the card shows no plan text), and the
/// log says why.
async fn fill_plan(d: &mut Dialog, src: &Source) {
    let Some(file) = spool::plan_file_wanted(d) else { return };
    match src.place.read_plan(&file).await {
        Ok(text) => spool::set_plan(d, text),
        Err(why) => tracing::warn!(run = %src.run, %why, "showing the plan without its text"),
    }
}

/// The spool: the prompt the agent's hook says is waiting.
pub struct SpoolChannel {
    pub(in crate::runs) file: HookFile,
    /// What the spool says now (None: no spool, or not read yet).
    pub fact: Option<SpoolFact>,
    /// How many tool calls the transcript had given when the spool was last parsed.
    calls_seen: usize,
    /// The prompts whose spool a clear hook (or lab's GC) removed, or a new prompt
    /// replaced.
    pub cleared: HashSet<String>,
}

impl SpoolChannel {
    pub fn new(file: HookFile) -> SpoolChannel {
        SpoolChannel { file, fact: None, calls_seen: 0, cleared: HashSet::new() }
    }

    /// Read the spool if it changed, or again if its prompt lacked its call or plan and
    /// the transcript has given new calls since (`calls_total`; `open` lists the open
    /// ones, oldest first, for the provider to find the prompt's call among).
    pub async fn refresh(&mut self, src: &Source, calls_total: usize, open: impl FnOnce() -> Vec<ToolUse>) {
        // A prompt whose transcript call was not known yet, or a plan that came without
        // its text, is parsed again once new calls arrive (the provider may find its
        // call, or the plan in it, among them).
        let incomplete = |d: &Dialog| d.call_id.is_none() || spool::lacks_plan_text(d);
        let recheck = self.fact.as_ref().is_some_and(|s| s.dialog.as_ref().is_some_and(incomplete))
            && calls_total > self.calls_seen;
        let look = self.file.look(&src.run, recheck);
        if look == Look::Same {
            return;
        }
        let previous = self.fact.take();
        let Look::Written { bytes, written, mtime_ns } = look else {
            if let Some(d) = previous.and_then(|p| p.dialog) {
                // Gone: a clear hook (or lab's GC) removed it.
                self.cleared.extend(spool::ids(&d));
            }
            return;
        };
        let Some(provider) = &src.provider else { return };
        self.calls_seen = calls_total;
        let mut open = open();
        open.drain(..open.len().saturating_sub(16));
        match provider.pending_dialog(bytes, open).await {
            Ok(mut dialog) => {
                if let Some(d) = dialog.as_mut() {
                    fill_plan(d, src).await;
                }
                let dialog = dialog.map(|d| spool::identify(d, mtime_ns));
                let before = previous.and_then(|p| p.dialog);
                if let Some(prev) = before.filter(|p| dialog.as_ref().is_none_or(|d| d.id != p.id)) {
                    self.cleared.extend(spool::ids(&prev));
                }
                self.fact = Some(SpoolFact { dialog, written });
            }
            Err(e) if e.refusal().is_some() => {
                tracing::warn!(run = %src.run, error = %e, "ignoring a malformed spool")
            }
            Err(e) => tracing::warn!(run = %src.run, error = %e, "could not read the spool"),
        }
    }

    /// Delete a spool whose prompt is over (the backstop GC): only the version judged,
    /// as a new prompt's spool may have replaced it.
    pub fn remove_stale(&mut self, run: &RunId) {
        if self.file.remove_if_unchanged(run) {
            if let Some(d) = self.fact.take().and_then(|s| s.dialog) {
                tracing::info!(run = %run, dialog = %d.id, "removed a spool whose prompt is over");
            }
        }
    }
}

/// The blocked marker: the agent's hook says it waits on the operator.
pub struct MarkerChannel {
    pub(in crate::runs) file: HookFile,
    pub fact: Option<MarkerFact>,
}

impl MarkerChannel {
    pub fn new(file: HookFile) -> MarkerChannel {
        MarkerChannel { file, fact: None }
    }

    pub async fn refresh(&mut self, src: &Source) {
        let look = self.file.look(&src.run, false);
        if look == Look::Same {
            return;
        }
        self.fact = None;
        let Look::Written { bytes, written, .. } = look else { return };
        let Some(provider) = &src.provider else { return };
        match provider.blocked_state(bytes).await {
            Ok(blocked) => self.fact = Some(MarkerFact { blocked, written }),
            Err(e) if e.refusal().is_some() => {
                tracing::warn!(run = %src.run, error = %e, "ignoring a malformed blocked marker")
            }
            Err(e) => tracing::warn!(run = %src.run, error = %e, "could not read the blocked marker"),
        }
    }
}

/// The session info: what the agent's hook says of its session (its id, and the
/// transcript's path when it is not known at spawn).
pub struct SessionChannel {
    pub(in crate::runs) file: HookFile,
    /// The transcript is to be named here: the channel is followed until it is.
    pub awaiting: bool,
    /// On another host: the transcript path it named there, and whether the host's
    /// runner is yet to be told to follow it.
    pub named_there: Option<String>,
    pub news_there: bool,
}

/// What a new version of the session info said.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct SessionNews {
    pub session_id: Option<String>,
    /// An absolute transcript path (a relative one is refused, in the log).
    pub transcript: Option<PathBuf>,
}

impl SessionChannel {
    pub fn new(file: HookFile) -> SessionChannel {
        SessionChannel { file, awaiting: false, named_there: None, news_there: false }
    }

    /// Read a new version, if any; a transcript named stops the waiting.
    pub async fn refresh(&mut self, src: &Source) -> SessionNews {
        let Look::Written { bytes, .. } = self.file.look(&src.run, false) else { return SessionNews::default() };
        let Some(provider) = &src.provider else { return SessionNews::default() };
        match provider.session_info(bytes).await {
            Ok(facts) => {
                let transcript = match facts.transcript_path.map(PathBuf::from) {
                    Some(p) if p.is_absolute() => {
                        tracing::info!(run = %src.run, transcript = %p.display(), "the agent named its transcript");
                        self.awaiting = false;
                        Some(p)
                    }
                    Some(p) => {
                        tracing::warn!(run = %src.run, path = %p.display(), "ignoring a relative transcript path");
                        None
                    }
                    None => None,
                };
                SessionNews { session_id: facts.session_id, transcript }
            }
            Err(e) => {
                tracing::warn!(run = %src.run, error = %e, "could not read the session info");
                SessionNews::default()
            }
        }
    }
}
