//! A new run joins the set: `POST /runs` launched by the transport its request asks
//! for, its worktree made first; once launched, recorded and followed; a launch that
//! failed, recorded as failed with why (its worktree removed).

use crate::runs::api::{CreateRun, RunBody, RunError};
use crate::runs::live::tailer::Tail;
use crate::runs::registry::{RunRecord, Status};
use crate::runs::{now_rfc3339, Read, Run, Runs};
use std::sync::Arc;

impl Runs {
    /// `POST /runs`: launch a run, the way its request asks for ([`Runs::transport_for`]).
    pub async fn create(self: &Arc<Self>, req: CreateRun) -> Result<RunBody, RunError> {
        self.transport_for(&req).launch(self, req).await
    }

    /// A run just launched and recorded, followed from now on: in memory on the build
    /// it was launched with, its first prompt typed once the agent is ready (one too
    /// long for the command line), its worktree's diff counted, its tailer started.
    pub(in crate::runs) fn follow_launched(
        self: &Arc<Self>,
        rec: RunRecord,
        typed_prompt: Option<String>,
        pinned: crate::runs::providers::Pinned,
    ) -> Arc<Run> {
        let run = self.attach(rec, typed_prompt.is_some(), Some(pinned));
        if let Some(prompt) = typed_prompt {
            self.core.clone().spawn_first_prompt(run.clone(), prompt);
        }
        if run.record().worktree.is_some() {
            self.core.clone().spawn_diff_watch(run.clone());
        }
        self.clone().spawn_tailer(run.clone(), false);
        run
    }

    /// A launch that failed (the caller removed its own files): the worktree made for
    /// it removed (never used: nothing of the operator's is in it), the run recorded as
    /// failed with `msg` and its first view published; the error to answer.
    pub(in crate::runs) async fn launch_failed(&self, mut rec: RunRecord, msg: String) -> RunError {
        if let Some(wt) = &rec.worktree {
            if let Err(e) = self.workspace_of(&rec).remove(wt).await {
                tracing::warn!(run = %rec.id, error = %e, "could not remove the failed run's worktree");
            }
        }
        rec.status = Status::Failed;
        rec.ended_at = Some(now_rfc3339());
        rec.error = Some(msg.clone());
        if let Err(e) = self.registry.put(&rec) {
            tracing::error!(run = %rec.id, error = %e, "could not record the failed run");
        }
        let id = rec.id.clone();
        // Its first view says so (a record not active: the tail has ended).
        let run = self.attach(rec, false, None);
        run.update(&self.registry, Read::AsIs, async |_: &mut Tail| ()).await;
        tracing::warn!(run = %id, error = %msg, "launch failed");
        RunError::LaunchFailed(msg)
    }

    /// The new run's worktree, if it gets one ([`crate::worktree::wanted`]), in its
    /// record's workspace (on its host, that is there, in the runner's home).
    pub(in crate::runs) async fn make_worktree(
        &self,
        rec: &RunRecord,
        req: &CreateRun,
    ) -> Result<Option<crate::worktree::Worktree>, RunError> {
        let id = &rec.id;
        let workspace = self.workspace_of(rec);
        let wt = match &req.fork {
            // A fork's: branched from its parent's files as they are now.
            Some(f) => workspace.fork(id, &req.workdir, f.worktree.as_ref()).await?,
            None => workspace.make(id, &req.workdir, req.worktree, self.config.runs.worktree).await?,
        };
        if let Some(wt) = &wt {
            tracing::info!(run = %id, path = %wt.path, branch = %wt.branch, base = %wt.base, host = ?rec.host, "made the run's worktree");
        }
        Ok(wt)
    }
}
