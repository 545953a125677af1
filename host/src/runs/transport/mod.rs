//! Where a run lives and how lab speaks to it: tmux on this machine ([`tmux`]), tmux on
//! another machine through its runner ([`remote`]), or an ACP agent over JSON-RPC
//! ([`acp`]; the agent here, or on another machine with its stdio relayed by the
//! runner there).
//!
//! Each is a [`Transport`] in its own file, owning its own state; [`Runs::transport`] is
//! the one place that asks which one a run uses, so the rest of `runs` never branches on
//! where a run lives (wezterm's `Domain`: the mux never asks "is this remote?"). What a
//! transport does not do differently keeps the trait's default body: keys typed into
//! the run's terminal, read back from its screen and transcript.

pub(crate) mod acp;
mod pick;
pub(crate) mod remote;
pub(crate) mod tmux;

use crate::agents::model::Answer;
use crate::machines::terminal::Terminal;
use crate::runs::api::{AnswerProgress, CreateRun, RunBody, RunError};
use crate::runs::continuation::Continuing;
use crate::runs::launch::workspace::Workspace;
use crate::runs::live::tailer::Tail;
use crate::runs::providers::Pinned;
use crate::runs::registry::RunRecord;
use crate::runs::{Core, Run, Runs};
use crate::store::paths::RunId;
use futures_util::future::BoxFuture;
use std::path::Path;
use std::sync::Arc;

/// The ways lab reaches a run, one [`Transport`] each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::runs) enum Way {
    /// In lab's tmux here.
    Here,
    /// In tmux on another machine, through its runner.
    Remote,
    /// An ACP agent over JSON-RPC: lab's child here, or its runner's on its host.
    Acp,
}

/// How a recorded run is reached. An ACP run (here or on a host: lab speaks to its
/// agent from here either way) is known by what lab set, never by what an agent said:
/// as transcript exactly its own journal in `acp_dir` (a transcript an agent named
/// elsewhere under `acp_dir` does not make a run ACP; a run on a host has its mirror
/// under `remote/`).
pub(in crate::runs) fn way_of(rec: &RunRecord, acp_dir: &Path) -> Way {
    if rec.transcript_path.as_deref().is_some_and(|t| acp::is_journal_of(Path::new(t), acp_dir, &rec.id)) {
        Way::Acp
    } else if rec.host.is_some() {
        Way::Remote
    } else {
        Way::Here
    }
}

/// How a requested run is launched: as the ACP agent its provider names (`acp_agent`;
/// here or on its host), on the host it names, else in lab's tmux here.
pub(in crate::runs) fn way_for(req: &CreateRun, acp_agent: bool) -> Way {
    if acp_agent {
        Way::Acp
    } else if req.host.is_some() {
        Way::Remote
    } else {
        Way::Here
    }
}

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
    fn terminal(&self, rec: &RunRecord) -> Arc<dyn Terminal>;

    /// Whether the run has a screen an operator can watch and take (a terminal program).
    fn has_screen(&self) -> bool {
        true
    }

    /// Whether a run launched this way can have a `kind` sandbox (`lab agent-exec`
    /// starts its agent, and the jail's program is there): else why not.
    fn can_jail(&self, kind: crate::sandbox::Kind) -> Result<(), RunError> {
        Err(RunError::BadRequest(format!("`{}` sandbox: a run of this kind cannot have one", kind.as_str())))
    }

    /// Put a sandboxed run's allowlist where its egress proxy reads it (here: lab
    /// serve's own file, written already).
    fn put_allowlist<'a>(
        &'a self,
        _core: &'a Core,
        _rec: &'a RunRecord,
        _list: &'a crate::sandbox::egress::Allowlist,
    ) -> BoxFuture<'a, Result<(), RunError>> {
        Box::pin(async { Ok(()) })
    }

    /// `Err` when nothing can be typed to the run now (its machine is not connected).
    fn reachable(&self, _rec: &RunRecord) -> Result<(), RunError> {
        Ok(())
    }

    /// `POST /runs/{id}/messages`, the text checked: pasted into the run's terminal.
    fn send_message<'a>(
        &'a self,
        core: &'a Arc<Core>,
        run: &'a Arc<Run>,
        text: String,
    ) -> BoxFuture<'a, Result<(), RunError>> {
        Box::pin(core.type_message(run, text))
    }

    /// `POST /runs/{id}/dialog/answer`, the answers checked: the provider's plan typed
    /// into the run's terminal, paced.
    fn answer<'a>(
        &'a self,
        core: &'a Arc<Core>,
        run: &'a Arc<Run>,
        tool_id: &'a str,
        answers: Vec<Answer>,
    ) -> BoxFuture<'a, Result<AnswerProgress, RunError>> {
        Box::pin(core.type_answer(run, tool_id, answers))
    }

    /// What answer rules need of the run's prompt `dialog`: its provider's word
    /// (`None`: it does not say, and no rule answers it).
    fn prompt_facts<'a>(
        &'a self,
        run: &'a Arc<Run>,
        dialog: &'a crate::agents::model::Dialog,
    ) -> BoxFuture<'a, Option<crate::agents::model::PromptFacts>> {
        Box::pin(async move {
            let provider = run.provider.as_ref()?.provider.clone();
            provider.prompt_facts(dialog.clone()).await.ok().flatten()
        })
    }

    /// Close where the run's agent lives (its tmux session), if it is still there.
    fn close<'a>(&'a self, core: &'a Core, rec: &'a RunRecord) -> BoxFuture<'a, Result<(), RunError>>;

    /// `POST /runs/{id}/stop`: closed, then ended, taking its turn with the run's keys.
    fn stop<'a>(&'a self, core: &'a Arc<Core>, run: &'a Arc<Run>) -> BoxFuture<'a, Result<(), RunError>> {
        Box::pin(close_and_end(self, core, run))
    }

    /// An active run found in the registry when `lab serve` starts: pick it up.
    fn resume(&self, runs: &Arc<Runs>, run: Arc<Run>) -> Resume;

    /// `POST /runs/{id}/resume`: start the ended run's agent again where it ran,
    /// continuing its conversation (`rec` learns what the launch says). Returns a first
    /// prompt too long for the command line, to type once the agent is ready.
    fn relaunch<'a>(
        &'a self,
        _runs: &'a Arc<Runs>,
        _rec: &'a mut RunRecord,
        _continuing: &'a Continuing,
    ) -> BoxFuture<'a, Result<Option<String>, RunError>> {
        Box::pin(async { Err(RunError::NotSupported("this kind of run cannot be resumed".into())) })
    }

    /// A resumed run is followed again ([`Transport::relaunch`]): what more it needs
    /// than its tailer (its host's runner following it there).
    fn resumed<'a>(&'a self, _runs: &'a Arc<Runs>, _run: &'a Arc<Run>) -> BoxFuture<'a, ()> {
        Box::pin(async {})
    }

    /// What `rec`'s run can be continued with: its provider's abilities as the build
    /// serving now says (a resume or fork launches with it); None: not loaded.
    fn abilities(&self, core: &Core, rec: &RunRecord) -> Option<crate::agents::model::Abilities> {
        Some(core.providers.pin(&rec.provider).ok()?.provider.abilities())
    }

    /// How the run's chat is read: its provider (and the tail over its transcript).
    fn reader(&self, core: &Core, rec: &RunRecord, pinned: Option<Pinned>) -> (Option<Pinned>, Tail) {
        core.provider_reader(rec, pinned)
    }

    /// Where the plan files the run's dialogs name are read: here, under its agent's
    /// directories.
    fn plan_files(&self, core: &Core, rec: &RunRecord, tail: &mut Tail) {
        core.plan_files_here(rec, tail)
    }

    /// Whether the run's session is in lab's tmux here, where the liveness loop looks
    /// for it (elsewhere, its machine's runner reports its end).
    fn session_here(&self) -> bool {
        true
    }

    /// Where the run's git work is done: this machine's worktrees.
    fn workspace(&self, core: &Core, _rec: &RunRecord) -> Workspace {
        core.workspace_here()
    }

    /// Whether this transport still holds something live for run `id` (an agent
    /// process, a session) that keeps the run from resting.
    fn holds_live(&self, _id: &RunId) -> bool {
        false
    }

    /// The run's agent named a transcript where it runs, not here (its record keeps the
    /// path now): have it followed there.
    fn transcript_elsewhere<'a>(&'a self, _runs: &'a Arc<Runs>, _run: &'a Arc<Run>) -> BoxFuture<'a, ()> {
        Box::pin(async {})
    }

    /// Run `id` has ended: let go of what is still held for it.
    fn ended(&self, _id: &RunId) {}
}

/// [`Transport::stop`]'s way for a run whose agent lives in a tmux session: closed, then
/// ended, taking its turn with the run's keys.
pub(in crate::runs) async fn close_and_end<T: Transport + ?Sized>(
    t: &T,
    core: &Arc<Core>,
    run: &Arc<Run>,
) -> Result<(), RunError> {
    let _keys = run.keys.lock().await;
    t.close(core, &run.record()).await?;
    core.end(run, "stopped by the operator").await;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::paths::RunId;

    pub(super) fn record(id: &str, host: Option<&str>, transcript: Option<&str>) -> RunRecord {
        RunRecord {
            host: host.map(String::from),
            transcript_path: transcript.map(String::from),
            tmux_socket: "/s".into(),
            dialog_hooker: true,
            ..RunRecord::new(RunId::parse(id).unwrap(), "p", "/w", "hi", "t0")
        }
    }

    fn request(host: Option<&str>) -> CreateRun {
        serde_json::from_value(serde_json::json!({ "provider": "p", "workdir": "/w", "prompt": "hi", "host": host }))
            .unwrap()
    }

    #[test]
    fn a_recorded_run_is_reached_the_way_lab_set_never_the_way_an_agent_named() {
        let acp = Path::new("/home/op/.lab/acp");
        let own = acp::journal_of(acp, &RunId::parse("r-1").unwrap());
        assert_eq!(way_of(&record("r-1", None, Some(own.to_str().unwrap())), acp), Way::Acp);
        assert_eq!(way_of(&record("r-1", None, Some("/home/op/.agent/t.jsonl")), acp), Way::Here);
        assert_eq!(way_of(&record("r-1", None, None), acp), Way::Here);
        assert_eq!(way_of(&record("r-1", Some("m1"), Some("/home/op/.lab/remote/r-1.jsonl")), acp), Way::Remote);
        // An ACP agent on a host: its journal is here, lab speaks to it from here.
        assert_eq!(way_of(&record("r-1", Some("m1"), Some(own.to_str().unwrap())), acp), Way::Acp);
        // A transcript an agent named under acp/ (another run's journal, or a path that
        // climbs out) does not make a run ACP.
        for named in ["/home/op/.lab/acp/r-2.jsonl", "/home/op/.lab/acp/../acp/r-1.jsonl", "/home/op/.lab/acp/x"] {
            assert_eq!(way_of(&record("r-1", None, Some(named)), acp), Way::Here, "{named}");
        }
    }

    #[test]
    fn a_requested_run_is_launched_as_an_acp_agent_then_on_its_host_then_here() {
        assert_eq!(way_for(&request(Some("m1")), false), Way::Remote);
        assert_eq!(way_for(&request(Some("m1")), true), Way::Acp, "an ACP agent on a host");
        assert_eq!(way_for(&request(None), true), Way::Acp);
        assert_eq!(way_for(&request(None), false), Way::Here);
    }
}
