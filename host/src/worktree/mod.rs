//! A worktree per run: when a run's workdir is in a git repository with a commit, lab
//! makes the branch `lab/<run-id>` from the repository's HEAD and a worktree for it
//! (under `<home>/worktrees`, or lab.toml's `[runs] worktree_dir`), and the agent runs
//! there, so two runs in one repository never touch each other's files. [`diff`] shows
//! what the agent changed, [`merge`] brings it into the base branch, [`remove`] takes
//! the worktree and its branch away (only on the operator's `discard`).
//!
//! Git is reached through the `git` CLI ([`Git`]): the operator's own git, its own
//! diff algorithm and its own output (so lab's diff is `git diff`'s), with no C library
//! to build and no second implementation of the index to trust; never discovered from
//! a worktree, and with nothing a repository names executed ([`git`]). See
//! docs/worktrees.md and docs/security.md.

pub mod call;
pub mod diff;
pub mod fork;
pub mod git;
pub mod jailed;
pub mod merge;
pub mod review;

use crate::store::paths::RunId;
pub use git::{Git, GitOutput, Unsafe};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How long one git command may take before it is killed.
pub const GIT_TIMEOUT: Duration = Duration::from_secs(60);

/// A run's worktree, as its record keeps it and its body shows it (`worktree`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Worktree {
    /// The worktree's folder.
    pub path: String,
    /// The run's branch, `lab/<run-id>`.
    pub branch: String,
    /// The commit the branch was made from (the repository's HEAD then).
    pub base: String,
    /// The branch the repository's checkout was on then, which a merge goes into (null:
    /// HEAD was detached; a merge then needs none of it and is refused).
    pub base_ref: Option<String>,
    /// The repository's top folder (its main checkout).
    pub repo: String,
    /// The worktree's git folder (in the repository's `worktrees/`), as git named it
    /// when lab made the worktree: every later git command names it (`--git-dir`)
    /// instead of reading the worktree's `.git` ("": a record from before; found from
    /// `repo`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub git_dir: String,
    /// The workdir's folder below the repository's top, where the agent starts in the
    /// worktree ("" for the top).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub subdir: String,
    /// The commit a merge made (null before).
    #[serde(default)]
    pub merged: Option<String>,
    /// The worktree and branch were removed (`discard`).
    #[serde(default)]
    pub discarded: bool,
}

impl Worktree {
    /// Where the agent runs: the worktree, at the workdir's place in the repository.
    pub fn agent_dir(&self) -> PathBuf {
        if self.subdir.is_empty() {
            PathBuf::from(&self.path)
        } else {
            Path::new(&self.path).join(&self.subdir)
        }
    }
}

/// A workdir's repository, as [`find_repo`] found it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Repo {
    pub root: PathBuf,
    /// HEAD's commit (None: the repository has no commit yet).
    pub head: Option<String>,
    /// The branch HEAD names (None: detached).
    pub head_ref: Option<String>,
    /// The workdir below `root` ("" or ending in `/`, as git prints it).
    pub prefix: String,
}

/// Whether a new run gets a worktree: what the request asked (`worktree`), else
/// lab.toml's default (`[runs] worktree`, else true), and only in a repository with a
/// commit. Asking for one where there is none is an error, said plainly.
pub fn wanted(requested: Option<bool>, default: Option<bool>, repo: Option<&Repo>) -> Result<bool, String> {
    let has_commit = repo.is_some_and(|r| r.head.is_some());
    match requested {
        Some(false) => Ok(false),
        Some(true) if has_commit => Ok(true),
        Some(true) => Err(match repo {
            None => "worktree: the workdir is not in a git repository".into(),
            Some(r) => format!("worktree: the repository {} has no commit yet", r.root.display()),
        }),
        None => Ok(has_commit && default.unwrap_or(true)),
    }
}

/// The branch a run's work is on.
pub fn branch_for(run: &RunId) -> String {
    format!("lab/{run}")
}

/// Where a run's worktree goes: `<dir>/<repository's folder name>-<run-id>`.
pub fn path_for(dir: &Path, repo_root: &Path, run: &RunId) -> PathBuf {
    let name: String = repo_root
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.' { c } else { '_' })
        .take(48)
        .collect();
    let name = name.trim_start_matches('.');
    if name.is_empty() {
        dir.join(run.as_str())
    } else {
        dir.join(format!("{name}-{run}"))
    }
}

/// The repository `workdir` is in, if any.
pub async fn find_repo(workdir: &Path) -> Result<Option<Repo>, String> {
    let git = Git::found(workdir).await?;
    let out = git.run(&["rev-parse", "--show-toplevel", "--show-prefix"], &[]).await?;
    if !out.ok {
        // Not a repository (or inside a bare one / a .git folder): no worktree.
        return Ok(None);
    }
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut lines = text.lines();
    let (Some(root), prefix) = (lines.next(), lines.next().unwrap_or("")) else { return Ok(None) };
    let root = PathBuf::from(root);
    let head = git.run(&["rev-parse", "--verify", "--quiet", "HEAD^{commit}"], &[]).await?;
    let head = head.ok.then(|| String::from_utf8_lossy(&head.stdout).trim().to_string());
    let head_ref = git.run(&["symbolic-ref", "--quiet", "--short", "HEAD"], &[]).await?;
    let head_ref = head_ref.ok.then(|| String::from_utf8_lossy(&head_ref.stdout).trim().to_string());
    Ok(Some(Repo { root, head, head_ref, prefix: prefix.trim_end_matches('/').to_string() }))
}

/// Make the run's branch from the repository's HEAD and its worktree in `dir`.
pub async fn create(repo: &Repo, dir: &Path, run: &RunId) -> Result<Worktree, String> {
    let head = repo.head.clone().ok_or("the repository has no commit")?;
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| format!("creating {}: {e}", dir.display()))?;
    let path = path_for(dir, &repo.root, run);
    let branch = branch_for(run);
    let path_s = path.to_string_lossy().into_owned();
    // No hook (post-checkout), monitor or filter of the repository's runs ([`git`]).
    Git::found(&repo.root)
        .await?
        .ok(&["worktree", "add", "--quiet", "-b", &branch, &path_s, &head], &[])
        .await
        .map_err(|e| format!("making the run's worktree: {e}"))?;
    // The `.git` file git just wrote, before the agent runs: where the worktree's git
    // folder is, from now on named, never read from the worktree again.
    let git_file = crate::store::fsutil::read_untrusted(&path.join(".git"), 8192)
        .map_err(|e| format!("reading the new worktree's .git: {e}"))?
        .unwrap_or_default();
    let git_dir = git::gitdir_of(&git_file)
        .ok_or_else(|| format!("the new worktree's .git in {path_s} does not name its git folder"))?;
    Ok(Worktree {
        path: path_s,
        branch,
        base: head,
        base_ref: repo.head_ref.clone(),
        repo: repo.root.to_string_lossy().into_owned(),
        git_dir: git_dir.to_string_lossy().into_owned(),
        subdir: repo.prefix.clone(),
        merged: None,
        discarded: false,
    })
}

/// Remove a worktree and its branch (the operator's `discard`, or a launch that failed
/// before the agent ran). What is already gone is not an error.
pub async fn remove(wt: &Worktree) -> Result<(), String> {
    let repo = Git::found(Path::new(&wt.repo)).await?;
    let path = Path::new(&wt.path);
    match git::check(&Worktree { discarded: false, ..wt.clone() }) {
        _ if std::fs::symlink_metadata(path).is_err() => {
            let _ = repo.run(&["worktree", "prune"], &[]).await;
        }
        Ok(_) => {
            repo.ok(&["worktree", "remove", "--force", "--force", &wt.path], &[])
                .await
                .map_err(|e| format!("removing the worktree: {e}"))?;
        }
        Err(_) => {
            // Its `.git` was replaced: git would not know it as the worktree (and lab
            // runs no git in it); its folder goes (symlinks in it are removed, never
            // followed), then git forgets it.
            std::fs::remove_dir_all(path).map_err(|e| format!("removing the worktree {}: {e}", wt.path))?;
            let _ = repo.run(&["worktree", "prune"], &[]).await;
        }
    }
    // A sandboxed run's own git folder goes with it.
    if let Some(j) = jailed::JailedGit::found(wt) {
        std::fs::remove_dir_all(&j.shadow).map_err(|e| format!("removing {}: {e}", j.shadow))?;
    }
    let refname = format!("refs/heads/{}", wt.branch);
    if repo.run(&["show-ref", "--verify", "--quiet", &refname], &[]).await?.ok {
        repo.ok(&["branch", "-D", &wt.branch], &[]).await.map_err(|e| format!("deleting the branch: {e}"))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repo(head: Option<&str>) -> Repo {
        Repo { root: "/src/app".into(), head: head.map(String::from), head_ref: None, prefix: String::new() }
    }

    #[test]
    fn a_worktree_is_made_inside_a_repository_with_a_commit_unless_refused() {
        let with = repo(Some("abc"));
        let empty = repo(None);
        assert_eq!(wanted(None, None, Some(&with)), Ok(true));
        assert_eq!(wanted(None, Some(false), Some(&with)), Ok(false));
        assert_eq!(wanted(Some(true), Some(false), Some(&with)), Ok(true));
        assert_eq!(wanted(Some(false), None, Some(&with)), Ok(false));
        assert_eq!(wanted(None, None, Some(&empty)), Ok(false));
        assert_eq!(wanted(None, Some(true), None), Ok(false));
        assert!(wanted(Some(true), None, None).unwrap_err().contains("not in a git repository"));
        assert!(wanted(Some(true), None, Some(&empty)).unwrap_err().contains("/src/app has no commit yet"));
        assert_eq!(wanted(Some(false), None, None), Ok(false));
    }

    #[test]
    fn the_branch_and_folder_are_named_after_the_run() {
        let id = RunId::parse("r-0123456789ab").unwrap();
        assert_eq!(branch_for(&id), "lab/r-0123456789ab");
        assert_eq!(
            path_for(Path::new("/h/wt"), Path::new("/src/my app"), &id),
            Path::new("/h/wt/my_app-r-0123456789ab")
        );
        assert_eq!(path_for(Path::new("/h/wt"), Path::new("/"), &id), Path::new("/h/wt/r-0123456789ab"));
        assert_eq!(path_for(Path::new("/h/wt"), Path::new("/src/..x"), &id), Path::new("/h/wt/x-r-0123456789ab"));
    }

    #[test]
    fn the_agent_starts_at_the_workdir_s_place_in_the_worktree() {
        let mut wt = Worktree {
            path: "/h/wt/app-r-1".into(),
            branch: "lab/r-1".into(),
            base: "abc".into(),
            base_ref: Some("main".into()),
            repo: "/src/app".into(),
            git_dir: String::new(),
            subdir: String::new(),
            merged: None,
            discarded: false,
        };
        assert_eq!(wt.agent_dir(), Path::new("/h/wt/app-r-1"));
        wt.subdir = "crates/core".into();
        assert_eq!(wt.agent_dir(), Path::new("/h/wt/app-r-1/crates/core"));
    }
}
