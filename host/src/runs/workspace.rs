//! Where a run's worktree is and its git work is done: on this machine, or on the run's
//! host by its runner. Both do the same calls ([`crate::worktree::call::exec`]); a
//! run on a host never has its worktree's paths opened here.

use super::api::RunError;
use super::work::WorkError;
use crate::hosts::protocol::{Op, Reply};
use crate::worktree::call::{self, WorkCall, WorkDone, WorkFailed};
use crate::worktree::{diff, merge, review, Worktree};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// The most bytes of patches a diff from a host carries (it travels in one frame).
pub const HOST_DIFF_LIMIT: usize = 512 << 10;
/// How long a host has for one piece of git work (git's own limit, and the way).
const HOST_WITHIN: Duration = Duration::from_secs(crate::worktree::GIT_TIMEOUT.as_secs() + 15);

pub enum Workspace {
    /// This machine: new worktrees go in `worktrees`.
    Here { worktrees: PathBuf },
    /// The runner of `host`.
    Host { hosts: Arc<crate::hosts::Hosts>, host: String },
}

impl Workspace {
    async fn call(&self, call: WorkCall) -> Result<WorkDone, WorkFailed> {
        match self {
            Workspace::Here { worktrees } => call::exec(call, worktrees).await,
            Workspace::Host { hosts, host } => {
                match hosts.call(host, Op::Work { call: Box::new(call) }, HOST_WITHIN).await {
                    Ok(Reply::Text { text }) => serde_json::from_str::<call::WorkOutcome>(&text).map_err(|e| {
                        WorkFailed::Failed(format!("host {host} answered what is not a work outcome: {e}"))
                    })?,
                    Ok(Reply::Error { message }) => Err(WorkFailed::Failed(format!("host {host}: {message}"))),
                    Ok(other) => Err(WorkFailed::Failed(format!("host {host} answered {other:?}"))),
                    Err(e) => Err(WorkFailed::Failed(e)),
                }
            }
        }
    }

    fn unexpected(done: WorkDone) -> WorkFailed {
        WorkFailed::Failed(format!("an answer of another kind: {done:?}"))
    }

    /// The new run's worktree, if it gets one.
    pub async fn make(
        &self,
        run: &crate::paths::RunId,
        workdir: &str,
        requested: Option<bool>,
        default: Option<bool>,
    ) -> Result<Option<Worktree>, RunError> {
        let c = WorkCall::Make { run: run.to_string(), workdir: workdir.into(), requested, default };
        match self.call(c).await {
            Ok(WorkDone::Worktree(wt)) => Ok(wt),
            Ok(other) => Err(RunError::Internal(Self::unexpected(other).to_string())),
            Err(WorkFailed::BadRequest(m)) => Err(RunError::BadRequest(m)),
            Err(WorkFailed::Make(m)) => Err(RunError::LaunchFailed(m)),
            Err(e) => Err(RunError::Internal(e.to_string())),
        }
    }

    pub async fn remove(&self, worktree: &Worktree) -> Result<(), String> {
        match self.call(WorkCall::Remove { worktree: worktree.clone() }).await {
            Ok(WorkDone::Removed) => Ok(()),
            Ok(other) => Err(Self::unexpected(other).to_string()),
            Err(e) => Err(e.to_string()),
        }
    }

    pub async fn summary(&self, worktree: &Worktree) -> Result<diff::Summary, String> {
        match self.call(WorkCall::Summary { worktree: worktree.clone() }).await {
            Ok(WorkDone::Summary(s)) => Ok(s),
            Ok(other) => Err(Self::unexpected(other).to_string()),
            Err(e) => Err(e.to_string()),
        }
    }

    pub async fn diff(&self, worktree: &Worktree) -> Result<diff::Diff, RunError> {
        let limit = match self {
            Workspace::Here { .. } => diff::PATCH_TOTAL_LIMIT,
            Workspace::Host { .. } => HOST_DIFF_LIMIT,
        };
        match self.call(WorkCall::Diff { worktree: worktree.clone(), limit }).await {
            Ok(WorkDone::Diff(d)) => Ok(d),
            Ok(other) => Err(RunError::Internal(Self::unexpected(other).to_string())),
            Err(WorkFailed::NoWorktree(m)) => Err(RunError::NoWorktree(m)),
            Err(e) => Err(RunError::Internal(e.to_string())),
        }
    }

    /// The text of the line a review comment is on.
    pub async fn line(&self, worktree: &Worktree, c: &review::Comment) -> Result<String, RunError> {
        let call = WorkCall::Line { worktree: worktree.clone(), path: c.path.clone(), side: c.side, line: c.line };
        match self.call(call).await {
            Ok(WorkDone::Line(l)) => Ok(l),
            Ok(other) => Err(RunError::Internal(Self::unexpected(other).to_string())),
            Err(WorkFailed::BadRequest(m)) => Err(RunError::BadRequest(m)),
            Err(WorkFailed::NoWorktree(m)) => Err(RunError::NoWorktree(m)),
            Err(e) => Err(RunError::Internal(e.to_string())),
        }
    }

    pub async fn merge(
        &self,
        worktree: &Worktree,
        run: &crate::paths::RunId,
        strategy: merge::Strategy,
        message: Option<String>,
    ) -> Result<String, WorkError> {
        let call = WorkCall::Merge { worktree: worktree.clone(), run: run.to_string(), strategy, message };
        match self.call(call).await {
            Ok(WorkDone::Merged(commit)) => Ok(commit),
            Ok(other) => Err(WorkError::Run(RunError::Internal(Self::unexpected(other).to_string()))),
            Err(WorkFailed::Merge(e)) => Err(WorkError::Merge(e)),
            Err(WorkFailed::NoWorktree(m)) => Err(WorkError::Run(RunError::NoWorktree(m))),
            Err(WorkFailed::BadRequest(m)) => Err(WorkError::Run(RunError::BadRequest(m))),
            Err(e) => Err(WorkError::Merge(merge::MergeError::Failed(e.to_string()))),
        }
    }
}

impl super::Runs {
    /// Where the git work of a run on `host` (None: this machine) is done.
    pub(super) fn workspace_for(&self, host: Option<&str>) -> Workspace {
        match host {
            None => Workspace::Here {
                worktrees: self.config.runs.worktree_dir.clone().unwrap_or_else(|| self.home.worktrees_dir()),
            },
            Some(h) => Workspace::Host { hosts: self.hosts.clone(), host: h.to_string() },
        }
    }
}
