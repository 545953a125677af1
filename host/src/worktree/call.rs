//! A run's git work as calls ([`WorkCall`]), done by [`exec`] on the machine where the
//! worktree is: here for a run on this machine, by the host's runner for a run on
//! another host (the same function there). Serializable both ways: a call goes to a
//! runner in one frame ([`crate::machines::hosts::protocol::Op::Work`]) and its outcome comes back as
//! JSON ([`WorkOutcome`]).

use super::diff::{self, Diff, Summary};
use super::merge::{self, MergeError, Strategy};
use super::{review, Git, Unsafe, Worktree};
use crate::store::paths::RunId;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// One piece of a run's git work.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "work", rename_all = "snake_case", deny_unknown_fields)]
pub enum WorkCall {
    /// The new run's worktree, if it gets one ([`super::wanted`]): `requested` is the
    /// run's `worktree`, `default` lab.toml's `[runs] worktree`.
    Make { run: String, workdir: String, requested: Option<bool>, default: Option<bool> },
    /// A forked run's worktree ([`super::fork`]): from the parent run's worktree
    /// `from`, else from the checkout its `workdir` is in; none when that is no
    /// repository with a commit (the fork runs in the workdir, as its parent did).
    Fork { run: String, workdir: String, from: Option<Worktree> },
    /// Remove the worktree and its branch.
    Remove { worktree: Worktree },
    /// The diff's counts.
    Summary { worktree: Worktree },
    /// The whole diff, with at most `limit` bytes of patches.
    Diff { worktree: Worktree, limit: usize },
    /// Line `line` of file `path` (in the worktree, or at the base commit): the text a
    /// review comment quotes.
    Line { worktree: Worktree, path: String, side: review::Side, line: u32 },
    /// Merge the run's branch into its base.
    Merge { worktree: Worktree, run: String, strategy: Strategy, message: Option<String> },
}

/// What a call gave.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "done", content = "value", rename_all = "snake_case")]
pub enum WorkDone {
    Worktree(Option<Worktree>),
    Removed,
    Summary(Summary),
    Diff(Diff),
    Line(String),
    Merged(String),
}

/// Why a call did not.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[serde(tag = "failed", content = "message", rename_all = "snake_case")]
pub enum WorkFailed {
    /// The request cannot be done as asked (the operator's to fix).
    #[error("{0}")]
    BadRequest(String),
    /// The worktree is not there (discarded, gone).
    #[error("{0}")]
    NoWorktree(String),
    /// Making the worktree failed.
    #[error("{0}")]
    Make(String),
    #[error("{0:?}")]
    Merge(MergeError),
    /// Git failed.
    #[error("{0}")]
    Failed(String),
}

/// The outcome as it travels.
pub type WorkOutcome = Result<WorkDone, WorkFailed>;

/// What a runner checks of a call before doing it: run ids are run ids, paths
/// absolute, a commit message and a review's path within their limits.
pub fn check(call: &WorkCall) -> Result<(), String> {
    let absolute = |p: &str| Path::new(p).is_absolute() && !p.contains('\0') && p.len() <= 4096;
    let worktree_ok =
        |w: &Worktree| absolute(&w.path) && absolute(&w.repo) && (w.git_dir.is_empty() || absolute(&w.git_dir));
    let run_ok = |r: &str| RunId::parse(r).is_some();
    let ok = match call {
        WorkCall::Make { run, workdir, .. } => run_ok(run) && absolute(workdir),
        WorkCall::Fork { run, workdir, from } => {
            run_ok(run) && absolute(workdir) && from.as_ref().is_none_or(&worktree_ok)
        }
        WorkCall::Remove { worktree } | WorkCall::Summary { worktree } | WorkCall::Diff { worktree, .. } => {
            worktree_ok(worktree)
        }
        WorkCall::Line { worktree, path, .. } => worktree_ok(worktree) && review::check_path(path).is_ok(),
        WorkCall::Merge { worktree, run, message, .. } => {
            worktree_ok(worktree) && run_ok(run) && message.as_ref().is_none_or(|m| m.len() <= 64 * 1024)
        }
    };
    if ok {
        Ok(())
    } else {
        Err("a work call with a run id, path or message that is not one".into())
    }
}

/// The run's worktree for git ([`Git::worktree`]): one that is gone, or whose `.git`
/// the agent's side replaced, is no worktree to lab (said so, nothing run).
async fn reach(worktree: &Worktree) -> Result<Git, WorkFailed> {
    // A sandboxed run's commits are in its own git folder until lab brings them back.
    if let Some(jailed) = super::jailed::JailedGit::found(worktree) {
        if let Err(e) = jailed.bring_back().await {
            tracing::warn!(worktree = %worktree.path, "the run's commits stay in its sandbox's git folder: {e}");
        }
    }
    Git::worktree(worktree).await.map_err(|e| match e {
        Unsafe::Gone(m) | Unsafe::Replaced(m) => WorkFailed::NoWorktree(m),
    })
}

/// The largest file a review comment's line is read from.
const LINE_FILE_MAX: usize = 16 * 1024 * 1024;

/// Do `call` on this machine; a new worktree goes in `worktrees` (this machine's folder
/// for them).
pub async fn exec(call: WorkCall, worktrees: &Path) -> WorkOutcome {
    let failed = WorkFailed::Failed;
    match call {
        WorkCall::Make { run, workdir, requested, default } => {
            let run = RunId::parse(&run).ok_or_else(|| WorkFailed::BadRequest("not a run id".into()))?;
            if requested == Some(false) || (requested.is_none() && default == Some(false)) {
                return Ok(WorkDone::Worktree(None));
            }
            let repo = super::find_repo(Path::new(&workdir)).await.map_err(failed)?;
            if !super::wanted(requested, default, repo.as_ref()).map_err(WorkFailed::BadRequest)? {
                return Ok(WorkDone::Worktree(None));
            }
            let Some(repo) = repo else { return Ok(WorkDone::Worktree(None)) };
            let wt = super::create(&repo, worktrees, &run).await.map_err(WorkFailed::Make)?;
            Ok(WorkDone::Worktree(Some(wt)))
        }
        WorkCall::Fork { run, workdir, from } => {
            let run = RunId::parse(&run).ok_or_else(|| WorkFailed::BadRequest("not a run id".into()))?;
            let (source, repo) = match &from {
                Some(parent) => {
                    let git = reach(parent).await?;
                    let repo = super::Repo {
                        root: PathBuf::from(&parent.repo),
                        head: None,
                        head_ref: parent.base_ref.clone(),
                        prefix: parent.subdir.clone(),
                    };
                    (git, repo)
                }
                None => match super::find_repo(Path::new(&workdir)).await.map_err(failed)? {
                    Some(repo) if repo.head.is_some() => (Git::found(&repo.root).await.map_err(failed)?, repo),
                    _ => return Ok(WorkDone::Worktree(None)),
                },
            };
            let wt =
                super::fork::fork(&source, from.as_ref(), &repo, worktrees, &run).await.map_err(WorkFailed::Make)?;
            Ok(WorkDone::Worktree(Some(wt)))
        }
        WorkCall::Remove { worktree } => super::remove(&worktree).await.map(|()| WorkDone::Removed).map_err(failed),
        WorkCall::Summary { worktree } => {
            let git = reach(&worktree).await?;
            diff::summary(&git, &worktree).await.map(WorkDone::Summary).map_err(failed)
        }
        WorkCall::Diff { worktree, limit } => {
            let git = reach(&worktree).await?;
            diff::diff_within(&git, &worktree, limit).await.map(WorkDone::Diff).map_err(failed)
        }
        WorkCall::Line { worktree, path, side, line } => {
            let git = reach(&worktree).await?;
            review::check_path(&path).map_err(WorkFailed::BadRequest)?;
            let content = match side {
                review::Side::New => {
                    let root = PathBuf::from(&worktree.path);
                    let f = crate::store::fsutil::open_beneath(&root, &root.join(&path))
                        .map_err(|e| WorkFailed::BadRequest(format!("{path}: {e}")))?
                        .ok_or_else(|| WorkFailed::BadRequest(format!("{path} is not in the run's worktree")))?;
                    crate::store::fsutil::read_capped(f, LINE_FILE_MAX).map_err(|e| failed(e.to_string()))?
                }
                review::Side::Old => {
                    let spec = format!("{}:{}", worktree.base, path.trim_start_matches("./"));
                    git.ok(&["cat-file", "blob", &spec], &[])
                        .await
                        .map_err(|_| WorkFailed::BadRequest(format!("{path} is not in the base commit")))?
                }
            };
            review::line_text(&content, line, &path).map(WorkDone::Line).map_err(WorkFailed::BadRequest)
        }
        WorkCall::Merge { worktree, run, strategy, message } => {
            let run = RunId::parse(&run).ok_or_else(|| WorkFailed::BadRequest("not a run id".into()))?;
            let git = reach(&worktree).await?;
            merge::merge(&git, &worktree, &run, strategy, message.as_deref())
                .await
                .map(WorkDone::Merged)
                .map_err(WorkFailed::Merge)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_and_outcomes_travel_as_json() {
        let wt = Worktree {
            path: "/w/repo-r-1".into(),
            branch: "lab/r-1".into(),
            base: "abc".into(),
            base_ref: Some("main".into()),
            repo: "/w/repo".into(),
            git_dir: String::new(),
            subdir: String::new(),
            merged: None,
            discarded: false,
        };
        let call = WorkCall::Line { worktree: wt.clone(), path: "a.txt".into(), side: review::Side::Old, line: 3 };
        let text = serde_json::to_string(&call).unwrap();
        assert_eq!(serde_json::from_str::<WorkCall>(&text).unwrap(), call);
        for out in [
            Ok(WorkDone::Worktree(Some(wt))),
            Ok(WorkDone::Removed),
            Ok(WorkDone::Summary(Summary { files_changed: 1, additions: 2, deletions: 3 })),
            Ok(WorkDone::Merged("def".into())),
            Err(WorkFailed::Merge(MergeError::Conflict(vec!["a.txt".into()]))),
            Err(WorkFailed::NoWorktree("gone".into())),
        ] {
            let text = serde_json::to_string(&out).unwrap();
            assert_eq!(serde_json::from_str::<WorkOutcome>(&text).unwrap(), out, "{text}");
        }
        assert!(serde_json::from_str::<WorkCall>(r#"{"work":"remove","worktree":{},"x":1}"#).is_err());
    }

    #[test]
    fn a_runner_refuses_calls_lab_would_never_make() {
        let wt = |path: &str| Worktree {
            path: path.into(),
            branch: "lab/r-1".into(),
            base: "abc".into(),
            base_ref: None,
            repo: "/w/repo".into(),
            git_dir: String::new(),
            subdir: String::new(),
            merged: None,
            discarded: false,
        };
        let make = |run: &str, workdir: &str| WorkCall::Make {
            run: run.into(),
            workdir: workdir.into(),
            requested: None,
            default: None,
        };
        assert_eq!(check(&make("r-1", "/w/repo")), Ok(()));
        assert!(check(&make("../x", "/w/repo")).is_err(), "not a run id");
        assert!(check(&make("r-1", "repo")).is_err(), "a relative workdir");
        assert!(check(&WorkCall::Summary { worktree: wt("rel/path") }).is_err());
        assert!(check(&WorkCall::Remove { worktree: wt("/w/a\0b") }).is_err());
        let line =
            |path: &str| WorkCall::Line { worktree: wt("/w/t"), path: path.into(), side: review::Side::New, line: 1 };
        assert_eq!(check(&line("src/a.rs")), Ok(()));
        assert!(check(&line("../../etc/passwd")).is_err());
        let merge = |message: usize| WorkCall::Merge {
            worktree: wt("/w/t"),
            run: "r-1".into(),
            strategy: Strategy::Merge,
            message: Some("m".repeat(message)),
        };
        assert_eq!(check(&merge(10)), Ok(()));
        assert!(check(&merge(64 * 1024 + 1)).is_err());
    }
}
