//! A worktree per run: when a run's workdir is in a git repository with a commit, lab
//! makes the branch `lab/<run-id>` from the repository's HEAD and a worktree for it
//! (under `<home>/worktrees`, or lab.toml's `[runs] worktree_dir`), and the agent runs
//! there, so two runs in one repository never touch each other's files. [`diff`] shows
//! what the agent changed, [`merge`] brings it into the base branch, [`remove`] takes
//! the worktree and its branch away (only on the operator's `discard`).
//!
//! Git is reached through the `git` CLI ([`git`]): the operator's own git, its own
//! diff algorithm and its own output (so lab's diff is `git diff`'s), with no C library
//! to build and no second implementation of the index to trust. See docs/worktrees.md.

pub mod call;
pub mod diff;
pub mod merge;
pub mod review;

use crate::paths::RunId;
use serde::{Deserialize, Serialize};
use std::ffi::OsStr;
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

/// What a git command printed, and whether it succeeded.
#[derive(Debug)]
pub struct GitOutput {
    pub ok: bool,
    pub code: Option<i32>,
    pub stdout: Vec<u8>,
    pub stderr: String,
}

/// Run `git -C dir <args>` with lab's settings: none of lab serve's `GIT_*` variables
/// (the command's own `env` instead), no prompts, no pager, no colour, paths printed as
/// they are, and a [`GIT_TIMEOUT`] after which it is killed. Errors only when git
/// could not run or took too long; see [`git`] for the usual checked form.
pub async fn run_git(dir: &Path, args: &[&str], env: &[(&str, &OsStr)]) -> Result<GitOutput, String> {
    let mut cmd = tokio::process::Command::new("git");
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("GIT_") {
            cmd.env_remove(&k);
        }
    }
    cmd.arg("-C")
        .arg(dir)
        .args(["-c", "core.quotepath=false", "-c", "color.ui=never", "-c", "core.pager=cat"])
        .args(args)
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_OPTIONAL_LOCKS", "0")
        .env("LC_ALL", "C")
        .envs(env.iter().copied())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    let child = cmd.spawn().map_err(|e| format!("running git: {e}"))?;
    let out = tokio::time::timeout(GIT_TIMEOUT, child.wait_with_output())
        .await
        .map_err(|_| format!("git {} took longer than {}s and was stopped", args.join(" "), GIT_TIMEOUT.as_secs()))?
        .map_err(|e| format!("running git: {e}"))?;
    Ok(GitOutput {
        ok: out.status.success(),
        code: out.status.code(),
        stdout: out.stdout,
        stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
    })
}

/// [`run_git`], with a failure as an error naming the command and what git said.
pub async fn git(dir: &Path, args: &[&str], env: &[(&str, &OsStr)]) -> Result<Vec<u8>, String> {
    let out = run_git(dir, args, env).await?;
    if out.ok {
        Ok(out.stdout)
    } else {
        Err(format!("git {} failed: {}", args.join(" "), out.stderr))
    }
}

/// [`git`]'s output as one trimmed line of text.
pub async fn git_line(dir: &Path, args: &[&str]) -> Result<String, String> {
    git_line_env(dir, args, &[]).await
}

/// [`git_line`] with variables set for the command.
pub async fn git_line_env(dir: &Path, args: &[&str], env: &[(&str, &OsStr)]) -> Result<String, String> {
    Ok(String::from_utf8_lossy(&git(dir, args, env).await?).trim().to_string())
}

/// The repository `workdir` is in, if any.
pub async fn find_repo(workdir: &Path) -> Result<Option<Repo>, String> {
    let out = run_git(workdir, &["rev-parse", "--show-toplevel", "--show-prefix"], &[]).await?;
    if !out.ok {
        // Not a repository (or inside a bare one / a .git folder): no worktree.
        return Ok(None);
    }
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut lines = text.lines();
    let (Some(root), prefix) = (lines.next(), lines.next().unwrap_or("")) else { return Ok(None) };
    let root = PathBuf::from(root);
    let head = run_git(&root, &["rev-parse", "--verify", "--quiet", "HEAD^{commit}"], &[]).await?;
    let head = head.ok.then(|| String::from_utf8_lossy(&head.stdout).trim().to_string());
    let head_ref = run_git(&root, &["symbolic-ref", "--quiet", "--short", "HEAD"], &[]).await?;
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
    git(&repo.root, &["worktree", "add", "--quiet", "-b", &branch, &path_s, &head], &[])
        .await
        .map_err(|e| format!("making the run's worktree: {e}"))?;
    Ok(Worktree {
        path: path_s,
        branch,
        base: head,
        base_ref: repo.head_ref.clone(),
        repo: repo.root.to_string_lossy().into_owned(),
        subdir: repo.prefix.clone(),
        merged: None,
        discarded: false,
    })
}

/// Remove a worktree and its branch (the operator's `discard`, or a launch that failed
/// before the agent ran). What is already gone is not an error.
pub async fn remove(wt: &Worktree) -> Result<(), String> {
    let repo = Path::new(&wt.repo);
    if Path::new(&wt.path).exists() {
        git(repo, &["worktree", "remove", "--force", "--force", &wt.path], &[])
            .await
            .map_err(|e| format!("removing the worktree: {e}"))?;
    } else {
        let _ = run_git(repo, &["worktree", "prune"], &[]).await;
    }
    let refname = format!("refs/heads/{}", wt.branch);
    if run_git(repo, &["show-ref", "--verify", "--quiet", &refname], &[]).await?.ok {
        git(repo, &["branch", "-D", &wt.branch], &[]).await.map_err(|e| format!("deleting the branch: {e}"))?;
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
            subdir: String::new(),
            merged: None,
            discarded: false,
        };
        assert_eq!(wt.agent_dir(), Path::new("/h/wt/app-r-1"));
        wt.subdir = "crates/core".into();
        assert_eq!(wt.agent_dir(), Path::new("/h/wt/app-r-1/crates/core"));
    }
}
