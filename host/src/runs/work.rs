//! The run's work ([`crate::worktree`]) through the API: its diff, review comments sent
//! to the agent as one message (composer rules apply), merge into the base, discard.

use super::{Core, Run, RunError};
use crate::worktree::{diff::Diff, merge::MergeError, merge::Strategy, review, Worktree};
use std::sync::Arc;

/// Why a merge was refused or failed.
#[derive(Debug)]
pub enum WorkError {
    Run(RunError),
    Merge(MergeError),
}

impl From<RunError> for WorkError {
    fn from(e: RunError) -> Self {
        WorkError::Run(e)
    }
}

/// The run's worktree, unless it has none or it was discarded (whether it is still
/// there is checked where it is, by each call).
fn worktree_of(run: &Run) -> Result<Worktree, RunError> {
    let wt = run.record().worktree.ok_or_else(|| {
        RunError::NoWorktree("the run has no worktree: its workdir is not in a git repository, or it was started with \"worktree\": false".into())
    })?;
    if wt.discarded {
        return Err(RunError::NoWorktree("the run's worktree was discarded".into()));
    }
    Ok(wt)
}

/// How often at most a run's diff summary is counted again.
const DIFF_WATCH_PAUSE: std::time::Duration = std::time::Duration::from_secs(1);

impl Core {
    /// Keep the run's view's `diff` summary up to date: counted at once, then again
    /// (at most once per [`DIFF_WATCH_PAUSE`]) whenever new messages arrived — the agent's
    /// edits come with its tool calls — and once more after the run ended; merges and
    /// discards count it themselves. Summaries of different runs take turns (one git at a
    /// time for all watches), so many runs never fork many gits at once.
    pub(super) fn spawn_diff_watch(self: Arc<Self>, run: Arc<Run>) {
        tokio::spawn(async move {
            let mut views = run.subscribe();
            let mut shutdown = self.news.shutdown.subscribe();
            let mut counted_at: Option<usize> = None;
            let mut counted_ended = false;
            loop {
                let (count, ended) = {
                    let s = views.borrow_and_update();
                    (s.message_count, s.derived.state == super::live::view::RunState::Ended)
                };
                if counted_at != Some(count) || (ended && !counted_ended) {
                    counted_at = Some(count);
                    counted_ended = ended;
                    if !self.count_diff(&run).await {
                        return;
                    }
                }
                if ended {
                    return;
                }
                tokio::select! {
                    r = views.changed() => if r.is_err() { return },
                    _ = shutdown.changed() => return,
                }
                tokio::time::sleep(DIFF_WATCH_PAUSE).await;
            }
        });
    }

    /// Count the run's diff into its view; false when there is no worktree to count.
    async fn count_diff(&self, run: &Arc<Run>) -> bool {
        let Some(wt) = run.record().worktree.filter(|w| !w.discarded) else {
            run.set_diff(None);
            return false;
        };
        let counted = {
            let _one_at_a_time = self.turns.diff_counting.lock().await;
            run.transport().workspace(self, &run.record()).summary(&wt).await
        };
        match counted {
            Ok(s) => run.set_diff(Some(s)),
            Err(e) => tracing::debug!(run = %run.id, error = %e, "could not count the run's diff"),
        }
        true
    }

    /// `GET /runs/{id}/diff`.
    pub async fn diff(&self, run: &Arc<Run>) -> Result<Diff, RunError> {
        let wt = worktree_of(run)?;
        run.transport().workspace(self, &run.record()).diff(&wt).await
    }

    /// `POST /runs/{id}/review`: each comment with its line's text, as one message.
    pub async fn review(
        self: &Arc<Self>,
        run: &Arc<Run>,
        comments: Vec<review::Comment>,
        summary: Option<String>,
    ) -> Result<(), RunError> {
        let wt = worktree_of(run)?;
        if comments.is_empty() && summary.as_deref().is_none_or(|s| s.trim().is_empty()) {
            return Err(RunError::BadRequest("a review needs comments or a summary".into()));
        }
        if comments.len() > review::MAX_COMMENTS {
            return Err(RunError::BadRequest(format!("a review takes at most {} comments", review::MAX_COMMENTS)));
        }
        let mut quoted = Vec::with_capacity(comments.len());
        let workspace = run.transport().workspace(self, &run.record());
        for (i, c) in comments.into_iter().enumerate() {
            review::check_path(&c.path).map_err(RunError::BadRequest)?;
            if c.text.trim().is_empty() {
                return Err(RunError::BadRequest(format!("comment {} has no text", i + 1)));
            }
            let line = workspace.line(&wt, &c).await?;
            quoted.push((c, line));
        }
        let text = review::message(&quoted, summary.as_deref());
        self.send_message(run, &text).await
    }

    /// `POST /runs/{id}/merge`: the new commit on the base branch.
    pub async fn merge(
        &self,
        run: &Arc<Run>,
        strategy: Strategy,
        message: Option<String>,
    ) -> Result<String, WorkError> {
        if let Some(m) = &message {
            let m = super::answer::input::chat_text(m).map_err(|e| RunError::text(e, "message"))?;
            if m.len() > 64 * 1024 {
                return Err(RunError::TooLarge("message is longer than 64 KiB".into()).into());
            }
        }
        let _turn = self.turns.work.lock().await;
        let wt = worktree_of(run)?;
        let commit = run.transport().workspace(self, &run.record()).merge(&wt, &run.id, strategy, message).await?;
        tracing::info!(run = %run.id, commit = %commit, base = ?wt.base_ref, "merged the run's branch");
        let rec = {
            let mut rec = run.record.lock().unwrap();
            if let Some(w) = rec.worktree.as_mut() {
                w.merged = Some(commit.clone());
            }
            rec.clone()
        };
        self.registry.put(&rec).map_err(|e| RunError::Internal(format!("recording the merge: {e}")))?;
        run.view.touch();
        self.count_diff(run).await;
        Ok(commit)
    }

    /// `POST /runs/{id}/discard`: an ended run's worktree and branch removed.
    pub async fn discard(&self, run: &Arc<Run>) -> Result<(), RunError> {
        if run.record().status == super::registry::Status::Active {
            return Err(RunError::RunActive);
        }
        let _turn = self.turns.work.lock().await;
        let Some(wt) = run.record().worktree else {
            return Err(RunError::NoWorktree("the run has no worktree".into()));
        };
        if wt.discarded {
            return Err(RunError::NoWorktree("the run's worktree was already discarded".into()));
        }
        run.transport().workspace(self, &run.record()).remove(&wt).await.map_err(RunError::Internal)?;
        tracing::info!(run = %run.id, path = %wt.path, branch = %wt.branch, "discarded the run's worktree and branch");
        let rec = {
            let mut rec = run.record.lock().unwrap();
            if let Some(w) = rec.worktree.as_mut() {
                w.discarded = true;
            }
            rec.clone()
        };
        self.registry.put(&rec).map_err(|e| RunError::Internal(format!("recording the discard: {e}")))?;
        run.view.touch();
        run.set_diff(None);
        Ok(())
    }
}
