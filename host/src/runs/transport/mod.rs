//! Where a run lives and how lab speaks to it: tmux on this machine ([`tmux`]), tmux on
//! another machine through its runner ([`remote`]), or an ACP agent over JSON-RPC
//! ([`acp`]).
//!
//! Each is a [`Transport`] in its own file, owning its own state; [`Runs::transport`] is
//! the one place that asks which one a run uses, so the rest of `runs` never branches on
//! where a run lives (wezterm's `Domain`: the mux never asks "is this remote?"). What a
//! transport does not do differently keeps the trait's default body: keys typed into
//! the run's terminal, read back from its screen and transcript.

pub(crate) mod acp;
pub(crate) mod remote;
pub(crate) mod tmux;

use crate::agents::components::ProviderHandle;
use crate::agents::model::Answer;
use crate::machines::terminal::Terminal;
use crate::runs::api::{AnswerProgress, CreateRun, RunBody, RunError};
use crate::runs::registry::RunRecord;
use crate::runs::tailer::Tail;
use crate::runs::workspace::Workspace;
use crate::runs::{Run, Runs};
use crate::store::paths::RunId;
use futures_util::future::BoxFuture;
use std::sync::Arc;

/// What an active run found in the registry at start needs before it is followed.
pub(in crate::runs) enum Resume {
    /// Followed now (its tailer is running).
    Followed,
    /// Its session is looked for first, with every other run in lab's tmux here (one
    /// `list-sessions` for all); a run whose session is gone ends unread.
    AfterLiveness(Arc<Run>),
}

/// How lab reaches a run: every operation whose way differs with where the run lives
/// or how lab speaks to it.
pub(in crate::runs) trait Transport: Send + Sync {
    /// `POST /runs`: launch the run the request asks for, record it and follow it.
    fn launch<'a>(&'a self, runs: &'a Arc<Runs>, req: CreateRun) -> BoxFuture<'a, Result<RunBody, RunError>>;

    /// The terminal the run's agent lives in: looked at, typed into, attached to.
    fn terminal(&self, runs: &Runs, _rec: &RunRecord) -> Arc<dyn Terminal> {
        runs.here.terminal.clone()
    }

    /// `Err` when nothing can be typed to the run now (its machine is not connected).
    fn reachable(&self, _rec: &RunRecord) -> Result<(), RunError> {
        Ok(())
    }

    /// `POST /runs/{id}/messages`, the text checked: pasted into the run's terminal.
    fn send_message<'a>(
        &'a self,
        runs: &'a Runs,
        run: &'a Arc<Run>,
        text: String,
    ) -> BoxFuture<'a, Result<(), RunError>> {
        Box::pin(runs.type_message(run, text))
    }

    /// `POST /runs/{id}/dialog/answer`, the answers checked: the provider's plan typed
    /// into the run's terminal, paced.
    fn answer<'a>(
        &'a self,
        runs: &'a Arc<Runs>,
        run: &'a Arc<Run>,
        tool_id: &'a str,
        answers: Vec<Answer>,
    ) -> BoxFuture<'a, Result<AnswerProgress, RunError>> {
        Box::pin(runs.type_answer(run, tool_id, answers))
    }

    /// Close where the run's agent lives (its tmux session), if it is still there.
    fn close<'a>(&'a self, runs: &'a Runs, rec: &'a RunRecord) -> BoxFuture<'a, Result<(), RunError>>;

    /// `POST /runs/{id}/stop`: closed, then ended, taking its turn with the run's keys.
    fn stop<'a>(&'a self, runs: &'a Runs, run: &'a Arc<Run>) -> BoxFuture<'a, Result<(), RunError>> {
        Box::pin(close_and_end(self, runs, run))
    }

    /// An active run found in the registry when `lab serve` starts: pick it up.
    fn resume(&self, runs: &Arc<Runs>, run: Arc<Run>) -> Resume;

    /// How the run's chat is read: its provider (and the tail over its transcript).
    fn reader(&self, runs: &Runs, rec: &RunRecord) -> (Option<ProviderHandle>, Tail) {
        runs.provider_reader(rec)
    }

    /// Where the plan files the run's dialogs name are read: here, under its agent's
    /// directories.
    fn plan_files(&self, runs: &Runs, rec: &RunRecord, tail: &mut Tail) {
        runs.plan_files_here(rec, tail)
    }

    /// Whether the run's session is in lab's tmux here, where the liveness loop looks
    /// for it (elsewhere, its machine's runner reports its end).
    fn session_here(&self) -> bool {
        true
    }

    /// Where the run's git work is done: this machine's worktrees.
    fn workspace(&self, runs: &Runs, _rec: &RunRecord) -> Workspace {
        runs.workspace_here()
    }

    /// Whether this transport still holds something live for run `id` (an agent
    /// process, a session) that keeps the run from resting.
    fn holds_live(&self, _id: &RunId) -> bool {
        false
    }

    /// Run `id` has ended: let go of what is still held for it.
    fn ended(&self, _id: &RunId) {}
}

impl Runs {
    /// How the run `req` asks for is launched: on its `host`, as the ACP agent it
    /// names, or in lab's tmux here. With [`Runs::transport`], the only places that ask.
    pub(in crate::runs) fn transport_for(&self, req: &CreateRun) -> &dyn Transport {
        if req.host.is_some() {
            &self.remote
        } else if self.acp_agent(&req.provider).is_some() {
            &self.acp
        } else {
            &self.here
        }
    }

    /// How `rec`'s run is reached: with [`Runs::transport_for`], the only places that ask.
    pub(in crate::runs) fn transport(&self, rec: &RunRecord) -> &dyn Transport {
        if self.is_acp_record(rec) {
            &self.acp
        } else if rec.host.is_some() {
            &self.remote
        } else {
            &self.here
        }
    }

    /// The terminal `rec`'s run lives in: this machine's tmux, or its host's.
    pub fn terminal_for(&self, rec: &RunRecord) -> Arc<dyn Terminal> {
        self.transport(rec).terminal(self, rec)
    }

    /// Where `rec`'s run does its git work (worktrees, diffs, merges).
    pub(in crate::runs) fn workspace_of(&self, rec: &RunRecord) -> Workspace {
        self.transport(rec).workspace(self, rec)
    }

    /// `Err` when nothing can be typed to the run now (its host is not connected).
    pub(in crate::runs) fn reachable(&self, run: &Run) -> Result<(), RunError> {
        let rec = run.record();
        self.transport(&rec).reachable(&rec)
    }
}

/// [`Transport::stop`]'s way for a run whose agent lives in a tmux session: closed, then
/// ended, taking its turn with the run's keys.
pub(in crate::runs) async fn close_and_end<T: Transport + ?Sized>(
    t: &T,
    runs: &Runs,
    run: &Arc<Run>,
) -> Result<(), RunError> {
    let _keys = run.keys.lock().await;
    t.close(runs, &run.record()).await?;
    runs.end(run, "stopped by the operator").await;
    Ok(())
}
