//! A forked run's worktree: its own branch `lab/<run-id>` from the parent run's HEAD,
//! with the parent's files as they are at the fork (uncommitted changes and untracked
//! files included, ignored ones not) as the fork's own uncommitted changes. The parent
//! keeps its files; from then on neither run touches the other's.

use super::{diff, Git, Repo, Worktree};
use crate::store::paths::RunId;
use std::path::Path;

/// Make `run`'s worktree in `dir` from the worktree `source` reaches: the parent run's
/// own worktree (`parent`: its base and base branch are the fork's, so the fork's diff
/// and merge cover the parent's work before the fork too), or, for a parent that ran in
/// its workdir's own checkout, that checkout (`repo`, as [`super::find_repo`] found it).
pub async fn fork(
    source: &Git,
    parent: Option<&Worktree>,
    repo: &Repo,
    dir: &Path,
    run: &RunId,
) -> Result<Worktree, String> {
    // The parent's state first: nothing is made when it cannot be read.
    let tree = diff::snapshot(source).await.map_err(|e| format!("reading the parent run's files: {e}"))?;
    let head = source
        .line(&["rev-parse", "--verify", "HEAD^{commit}"])
        .await
        .map_err(|e| format!("reading the parent run's HEAD: {e}"))?;
    let from = Repo { head: Some(head), ..repo.clone() };
    let mut wt = super::create(&from, dir, run).await?;
    let copied = async {
        let git = Git::worktree(&wt).await.map_err(|e| e.to_string())?;
        // The index and the files become the parent's state (files the state lacks go);
        // then the index goes back to HEAD, so what differs is uncommitted, as it was.
        git.ok(&["read-tree", "-u", "--reset", &tree], &[]).await?;
        git.ok(&["reset", "--quiet"], &[]).await.map(|_| ())
    }
    .await;
    if let Err(e) = copied {
        let _ = super::remove(&wt).await;
        return Err(format!("copying the parent run's files into the fork's worktree: {e}"));
    }
    if let Some(p) = parent {
        wt.base = p.base.clone();
        wt.base_ref = p.base_ref.clone();
        wt.subdir = p.subdir.clone();
    }
    Ok(wt)
}
