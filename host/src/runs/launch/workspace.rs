//! Where a run's worktree is and its git work is done: a [`WorkPlace`] — this machine
//! ([`Here`]), or a run's host by its runner (the remote transport's). Every place
//! does the same calls ([`crate::worktree::call::exec`]); a run on a host never has
//! its worktree's paths opened here. [`Workspace`] is the work itself, wherever.

use crate::runs::api::RunError;
use crate::runs::work::WorkError;
use crate::worktree::call::{self, WorkCall, WorkDone, WorkFailed};
use crate::worktree::{diff, merge, review, Worktree};
use futures_util::future::BoxFuture;
use std::path::PathBuf;

/// Where git work is done.
pub trait WorkPlace: Send + Sync {
    /// Do `call` there.
    fn exec(&self, call: WorkCall) -> BoxFuture<'_, Result<WorkDone, WorkFailed>>;
    /// The most bytes of patches one diff from there carries.
    fn diff_limit(&self) -> usize {
        diff::PATCH_TOTAL_LIMIT
    }
}

/// This machine: new worktrees go in `worktrees`.
pub struct Here {
    pub worktrees: PathBuf,
}

impl WorkPlace for Here {
    fn exec(&self, c: WorkCall) -> BoxFuture<'_, Result<WorkDone, WorkFailed>> {
        Box::pin(call::exec(c, &self.worktrees))
    }
}

/// A run's git work, done where its worktree is.
pub struct Workspace(Box<dyn WorkPlace>);

impl Workspace {
    pub fn at(place: impl WorkPlace + 'static) -> Workspace {
        Workspace(Box::new(place))
    }

    async fn call(&self, call: WorkCall) -> Result<WorkDone, WorkFailed> {
        self.0.exec(call).await
    }

    /// `call`'s outcome, when it is what `pick` takes.
    async fn call_for<T>(&self, call: WorkCall, pick: fn(WorkDone) -> Option<T>) -> Result<T, WorkFailed> {
        pick(self.call(call).await?).ok_or_else(|| WorkFailed::Failed("an answer of another kind".into()))
    }

    /// The new run's worktree, if it gets one.
    pub async fn make(
        &self,
        run: &crate::store::paths::RunId,
        workdir: &str,
        requested: Option<bool>,
        default: Option<bool>,
    ) -> Result<Option<Worktree>, RunError> {
        let c = WorkCall::Make { run: run.to_string(), workdir: workdir.into(), requested, default };
        Ok(self.call_for(c, |d| if let WorkDone::Worktree(wt) = d { Some(wt) } else { None }).await?)
    }

    /// A forked run's worktree: from its parent's worktree `from`, else from the
    /// checkout `workdir` is in (none outside a repository).
    pub async fn fork(
        &self,
        run: &crate::store::paths::RunId,
        workdir: &str,
        from: Option<&Worktree>,
    ) -> Result<Option<Worktree>, RunError> {
        let c = WorkCall::Fork { run: run.to_string(), workdir: workdir.into(), from: from.cloned() };
        Ok(self.call_for(c, |d| if let WorkDone::Worktree(wt) = d { Some(wt) } else { None }).await?)
    }

    pub async fn remove(&self, worktree: &Worktree) -> Result<(), String> {
        let c = WorkCall::Remove { worktree: worktree.clone() };
        self.call_for(c, |d| if let WorkDone::Removed = d { Some(()) } else { None }).await.map_err(|e| e.to_string())
    }

    pub async fn summary(&self, worktree: &Worktree) -> Result<diff::Summary, String> {
        let c = WorkCall::Summary { worktree: worktree.clone() };
        self.call_for(c, |d| if let WorkDone::Summary(s) = d { Some(s) } else { None }).await.map_err(|e| e.to_string())
    }

    pub async fn diff(&self, worktree: &Worktree) -> Result<diff::Diff, RunError> {
        let limit = self.0.diff_limit();
        let c = WorkCall::Diff { worktree: worktree.clone(), limit };
        Ok(self.call_for(c, |d| if let WorkDone::Diff(d) = d { Some(d) } else { None }).await?)
    }

    /// The text of the line a review comment is on.
    pub async fn line(&self, worktree: &Worktree, c: &review::Comment) -> Result<String, RunError> {
        let c = WorkCall::Line { worktree: worktree.clone(), path: c.path.clone(), side: c.side, line: c.line };
        Ok(self.call_for(c, |d| if let WorkDone::Line(l) = d { Some(l) } else { None }).await?)
    }

    pub async fn merge(
        &self,
        worktree: &Worktree,
        run: &crate::store::paths::RunId,
        strategy: merge::Strategy,
        message: Option<String>,
    ) -> Result<String, WorkError> {
        let c = WorkCall::Merge { worktree: worktree.clone(), run: run.to_string(), strategy, message };
        Ok(self.call_for(c, |d| if let WorkDone::Merged(commit) = d { Some(commit) } else { None }).await?)
    }
}

/// What a failed piece of git work is to the API.
impl From<WorkFailed> for RunError {
    fn from(e: WorkFailed) -> Self {
        match e {
            WorkFailed::BadRequest(m) => RunError::BadRequest(m),
            WorkFailed::NoWorktree(m) => RunError::NoWorktree(m),
            WorkFailed::Make(m) => RunError::LaunchFailed(m),
            e @ (WorkFailed::Merge(_) | WorkFailed::Failed(_)) => RunError::Internal(e.to_string()),
        }
    }
}

/// A merge's: its own refusals as they are, git's failures as a failed merge.
impl From<WorkFailed> for WorkError {
    fn from(e: WorkFailed) -> Self {
        match e {
            WorkFailed::Merge(e) => WorkError::Merge(e),
            WorkFailed::Failed(m) => WorkError::Merge(merge::MergeError::Failed(m)),
            e => WorkError::Run(e.into()),
        }
    }
}

impl crate::runs::Core {
    /// Where the git work of a run on this machine is done.
    pub(in crate::runs) fn workspace_here(&self) -> Workspace {
        Workspace::at(Here {
            worktrees: self.config.runs.worktree_dir.clone().unwrap_or_else(|| self.home.worktrees_dir()),
        })
    }
}
