//! Merging a run's work into its base branch, and nothing else changed when it cannot:
//! the worktree's uncommitted changes become a commit object first (the run's branch
//! moves to it only once the merge is done), `git merge-tree` finds conflicts without a
//! checkout, the base's checkout is refused when its own uncommitted changes touch a
//! merged file, and the base moves by a fast-forward to the merge commit lab made.

use super::{Git, Worktree};
use crate::store::paths::RunId;
use std::collections::BTreeSet;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Strategy {
    /// A merge commit with the base and the run's branch as parents.
    #[default]
    Merge,
    /// One commit on the base with all of the run's changes.
    Squash,
}

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MergeError {
    /// These files conflict; nothing was changed.
    Conflict(Vec<String>),
    /// The base's checkout has uncommitted changes in these merged files.
    BaseDirty(Vec<String>),
    /// The run's branch has nothing the base lacks.
    NothingToMerge,
    /// A merge is not possible for this worktree (a detached base, gone, discarded).
    Refused(String),
    /// Git failed.
    Failed(String),
}

impl From<String> for MergeError {
    fn from(e: String) -> Self {
        MergeError::Failed(e)
    }
}

/// The message of the commit that holds the agent's uncommitted changes.
pub fn uncommitted_message(run: &RunId) -> String {
    format!("lab: the agent's uncommitted changes in run {run}\n\nCommitted by lab before merging the run's branch.")
}

/// The merge commit's message when the operator gave none.
pub fn default_message(strategy: Strategy, run: &RunId, branch: &str, base_ref: &str) -> String {
    match strategy {
        Strategy::Merge => format!("Merge {branch} (lab run {run}) into {base_ref}"),
        Strategy::Squash => format!("lab run {run}: the agent's changes from {branch}"),
    }
}

/// `git merge-tree --write-tree -z --name-only --no-messages`'s output: the tree, then
/// the conflicted files (each once, in order), then an empty record.
pub fn parse_merge_tree(out: &[u8]) -> (String, Vec<String>) {
    let text = String::from_utf8_lossy(out);
    let mut tokens = text.split('\0');
    let tree = tokens.next().unwrap_or("").trim().to_string();
    let mut seen = BTreeSet::new();
    let files = tokens.take_while(|t| !t.is_empty()).filter(|t| seen.insert(t.to_string())).map(String::from).collect();
    (tree, files)
}

/// The paths `git status --porcelain=v1 -z` names (both of a rename).
pub fn parse_status_paths(out: &[u8]) -> BTreeSet<String> {
    let text = String::from_utf8_lossy(out);
    let mut paths = BTreeSet::new();
    let mut tokens = text.split('\0').filter(|t| !t.is_empty());
    while let Some(t) = tokens.next() {
        if t.len() < 4 {
            continue;
        }
        let (xy, path) = t.split_at(3);
        paths.insert(path.to_string());
        if xy.starts_with('R') || xy.starts_with('C') {
            if let Some(orig) = tokens.next() {
                paths.insert(orig.to_string());
            }
        }
    }
    paths
}

/// Where `refs/heads/<branch>` is checked out (`git worktree list --porcelain -z`).
pub fn checked_out_at(list: &[u8], branch: &str) -> Option<PathBuf> {
    let text = String::from_utf8_lossy(list);
    let want = format!("branch refs/heads/{branch}");
    let mut path = None;
    for t in text.split('\0') {
        if let Some(p) = t.strip_prefix("worktree ") {
            path = Some(PathBuf::from(p));
        } else if t == want {
            return path;
        }
    }
    None
}

/// Whether two paths name one folder (as they are, or once resolved).
fn same_folder(a: &Path, b: &Path) -> bool {
    a == b || matches!((std::fs::canonicalize(a), std::fs::canonicalize(b)), (Ok(x), Ok(y)) if x == y)
}

/// The identity lab commits with when git has none configured (a fresh machine).
async fn identity(repo: &Git) -> Result<Vec<(&'static str, &'static OsStr)>, String> {
    if repo.run(&["var", "GIT_COMMITTER_IDENT"], &[]).await?.ok && repo.run(&["var", "GIT_AUTHOR_IDENT"], &[]).await?.ok
    {
        return Ok(vec![]);
    }
    Ok(vec![
        ("GIT_AUTHOR_NAME", OsStr::new("lab")),
        ("GIT_AUTHOR_EMAIL", OsStr::new("lab@localhost")),
        ("GIT_COMMITTER_NAME", OsStr::new("lab")),
        ("GIT_COMMITTER_EMAIL", OsStr::new("lab@localhost")),
    ])
}

/// Merge the run's work into `wt.base_ref`; the new commit on it. `dir` is the run's
/// worktree ([`Git::worktree`]).
pub async fn merge(
    dir: &Git,
    wt: &Worktree,
    run: &RunId,
    strategy: Strategy,
    message: Option<&str>,
) -> Result<String, MergeError> {
    let Some(base_ref) = wt.base_ref.as_deref() else {
        return Err(MergeError::Refused(
            "the repository's HEAD was detached when the run started: there is no branch to merge into".into(),
        ));
    };
    let repo = &Git::found(Path::new(&wt.repo)).await?;
    let target_ref = format!("refs/heads/{base_ref}");
    let target = repo
        .line(&["rev-parse", "--verify", &format!("{target_ref}^{{commit}}")])
        .await
        .map_err(|_| MergeError::Refused(format!("the base branch {base_ref} is gone")))?;
    let ident = identity(repo).await?;

    // The agent's uncommitted changes, as a commit on its HEAD (not on its branch yet).
    let tree = super::diff::snapshot(dir).await?;
    let head = dir.line(&["rev-parse", "--verify", "HEAD"]).await?;
    let head_tree = dir.line(&["rev-parse", "--verify", "HEAD^{tree}"]).await?;
    let tip = if tree == head_tree {
        head.clone()
    } else {
        let msg = uncommitted_message(run);
        dir.line_env(&["commit-tree", &tree, "-p", &head, "-m", &msg], &ident).await?
    };
    if repo.run(&["merge-base", "--is-ancestor", &tip, &target], &[]).await?.ok {
        return Err(MergeError::NothingToMerge);
    }

    let out =
        repo.run(&["merge-tree", "--write-tree", "-z", "--name-only", "--no-messages", &target, &tip], &[]).await?;
    let (merged_tree, conflicts) = parse_merge_tree(&out.stdout);
    match out.code {
        Some(0) => {}
        Some(1) => return Err(MergeError::Conflict(conflicts)),
        _ => return Err(MergeError::Failed(format!("git merge-tree failed: {}", out.stderr))),
    }
    // A squash merged before (or changes the base already has): nothing would change.
    if merged_tree == repo.line(&["rev-parse", "--verify", &format!("{target}^{{tree}}")]).await? {
        return Err(MergeError::NothingToMerge);
    }

    // The base's checkout (if it has one) must not have uncommitted changes where the
    // merge writes.
    let list = repo.ok(&["worktree", "list", "--porcelain", "-z"], &[]).await?;
    let checkout = match checked_out_at(&list, base_ref) {
        // lab runs git only in the repository's main checkout: another worktree's
        // `.git` (a run's, the agent's side) is never read.
        Some(co) if same_folder(&co, Path::new(&wt.repo)) => Some(repo),
        Some(co) => {
            return Err(MergeError::Refused(format!(
                "the base branch {base_ref} is checked out in the worktree {}, not in the repository's main checkout: \
lab merges only into a branch checked out there or nowhere",
                co.display()
            )))
        }
        None => None,
    };
    if let Some(co) = checkout {
        let changed = repo.ok(&["diff", "--name-only", "-z", "--no-renames", &target, &merged_tree, "--"], &[]).await?;
        let changed: BTreeSet<String> =
            String::from_utf8_lossy(&changed).split('\0').filter(|t| !t.is_empty()).map(String::from).collect();
        let status = co.ok(&["status", "--porcelain=v1", "-z", "--untracked-files=all", "--no-renames"], &[]).await?;
        let dirty: Vec<String> = parse_status_paths(&status).intersection(&changed).cloned().collect();
        if !dirty.is_empty() {
            return Err(MergeError::BaseDirty(dirty));
        }
    }

    let msg = message.map(str::to_string).unwrap_or_else(|| default_message(strategy, run, &wt.branch, base_ref));
    let mut args = vec!["commit-tree", merged_tree.as_str(), "-p", target.as_str()];
    if strategy == Strategy::Merge {
        args.extend(["-p", tip.as_str()]);
    }
    args.extend(["-m", msg.as_str()]);
    let commit = repo.line_env(&args, &ident).await?;

    // The base moves first: if that fails, nothing did.
    match &checkout {
        Some(co) => {
            co.ok(&["merge", "--ff-only", "--quiet", "--no-verify", &commit], &[])
                .await
                .map_err(|e| MergeError::Failed(format!("moving {base_ref} to the merge: {e}")))?;
        }
        None => {
            repo.ok(&["update-ref", "-m", "lab: merge", &target_ref, &commit, &target], &[]).await?;
        }
    }
    if tip != head {
        // The run's branch takes the commit of its uncommitted changes; its index
        // follows (the files are already so).
        let branch_ref = format!("refs/heads/{}", wt.branch);
        dir.ok(&["update-ref", "-m", "lab: the agent's uncommitted changes", &branch_ref, &tip, &head], &[]).await?;
        dir.ok(&["reset", "--quiet"], &[]).await?;
    }
    Ok(commit)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merge_tree_output_gives_the_tree_and_each_conflicted_file_once() {
        assert_eq!(parse_merge_tree(b"abc123\0"), ("abc123".into(), vec![]));
        let (tree, files) = parse_merge_tree(b"abc\0a.txt\0a.txt\0b/c.rs\0\0Auto-merging a.txt\0");
        assert_eq!(tree, "abc");
        assert_eq!(files, vec!["a.txt", "b/c.rs"]);
    }

    #[test]
    fn status_names_both_paths_of_a_rename() {
        let p = parse_status_paths(b" M src/a.rs\0?? new.txt\0R  to.txt\0from.txt\0");
        assert_eq!(p.into_iter().collect::<Vec<_>>(), vec!["from.txt", "new.txt", "src/a.rs", "to.txt"]);
    }

    #[test]
    fn the_checkout_of_a_branch_is_found_in_the_worktree_list() {
        let list = b"worktree /src/app\0HEAD aaa\0branch refs/heads/main\0\0worktree /h/wt/app-r-1\0HEAD bbb\0branch refs/heads/lab/r-1\0\0worktree /x\0HEAD ccc\0detached\0\0";
        assert_eq!(checked_out_at(list, "main"), Some(PathBuf::from("/src/app")));
        assert_eq!(checked_out_at(list, "lab/r-1"), Some(PathBuf::from("/h/wt/app-r-1")));
        assert_eq!(checked_out_at(list, "dev"), None);
    }

    #[test]
    fn messages_say_what_lab_committed() {
        let id = RunId::parse("r-1").unwrap();
        assert!(uncommitted_message(&id).contains("uncommitted changes in run r-1"));
        assert_eq!(default_message(Strategy::Merge, &id, "lab/r-1", "main"), "Merge lab/r-1 (lab run r-1) into main");
    }
}
