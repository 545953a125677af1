//! Every git command lab runs, and where: [`Git`] is one repository, either the
//! operator's (found from a folder, `git -C`) or a run's worktree (named: `--git-dir`
//! and `--work-tree` as lab recorded them when it made it, never discovered from the
//! worktree, whose files are the agent's).
//!
//! Each command runs with everything a repository can make git execute turned off
//! ([`HARDENING`] and [`Git::neutralized`]): the file-system monitor, hooks (the hooks
//! path is `/dev/null`, where no file can ever be), filter and merge drivers, diff
//! drivers and external diff, signing, submodule recursion, automatic gc and every
//! transport. docs/security.md lists the commands.

use super::{Worktree, GIT_TIMEOUT};
use std::ffi::OsStr;
use std::path::{Path, PathBuf};

/// Config every git command lab runs is given (`-c`, above the repository's own).
pub const HARDENING: [&str; 13] = [
    "core.quotepath=false",
    "color.ui=never",
    "core.pager=cat",
    "core.fsmonitor=false",
    "core.hooksPath=/dev/null",
    "diff.external=",
    "commit.gpgSign=false",
    "tag.gpgSign=false",
    "submodule.recurse=false",
    "diff.ignoreSubmodules=all",
    "gc.auto=0",
    "maintenance.auto=false",
    "protocol.allow=never",
];

/// What a git command printed, and whether it succeeded.
#[derive(Debug)]
pub struct GitOutput {
    pub ok: bool,
    pub code: Option<i32>,
    pub stdout: Vec<u8>,
    pub stderr: String,
}

/// Where a command runs.
#[derive(Debug, Clone)]
enum Place {
    /// The repository git finds from this folder (the operator's).
    Found(PathBuf),
    /// A run's worktree, by its recorded git folder (never discovered).
    Named { git_dir: PathBuf, work_tree: PathBuf },
    /// A repository's git folder alone (no work tree).
    GitDir(PathBuf),
}

/// One repository, with its drivers turned off; see the module's text.
#[derive(Debug, Clone)]
pub struct Git {
    place: Place,
    /// `-c` settings that turn off the drivers this repository's config defines.
    off: Vec<String>,
}

/// Why a worktree cannot be reached safely.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unsafe {
    /// The worktree was discarded or its folder is gone.
    Gone(String),
    /// Its `.git` is no longer the file lab wrote (the agent's side replaced it).
    Replaced(String),
}

impl std::fmt::Display for Unsafe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unsafe::Gone(s) | Unsafe::Replaced(s) => f.write_str(s),
        }
    }
}

/// What `<worktree>/.git` says when git made it: `gitdir: <folder>`.
pub fn gitdir_of(git_file: &[u8]) -> Option<PathBuf> {
    let text = std::str::from_utf8(git_file).ok()?.strip_prefix("gitdir: ")?;
    let dir = Path::new(text.strip_suffix('\n').unwrap_or(text));
    (dir.is_absolute() && !text.trim_end_matches('\n').contains('\n')).then(|| dir.to_path_buf())
}

/// The `-c` settings that turn off every filter, merge and diff driver `names` (the
/// repository's config keys) define.
pub fn neutralizing(names: &[u8]) -> Vec<String> {
    let mut off = Vec::new();
    for name in String::from_utf8_lossy(names).split(['\0', '\n']).filter(|n| !n.is_empty()) {
        // git prints the section and key in lower case, the driver's name as it is.
        let Some((section, rest)) = name.split_once('.') else { continue };
        let Some((driver, key)) = rest.rsplit_once('.') else { continue };
        let keys: &[&str] = match (section.to_ascii_lowercase().as_str(), key.to_ascii_lowercase().as_str()) {
            ("filter", "clean" | "smudge" | "process" | "required") => {
                &["clean=", "smudge=", "process=", "required=false"]
            }
            ("merge", "driver") => &["driver="],
            ("diff", "command" | "textconv") => &["command=", "textconv="],
            _ => continue,
        };
        for k in keys {
            let s = format!("{}.{driver}.{k}", section.to_ascii_lowercase());
            if !off.contains(&s) {
                off.push(s);
            }
        }
    }
    off
}

impl Git {
    /// The operator's repository git finds from `dir` (its config read once, to turn
    /// its drivers off).
    pub async fn found(dir: &Path) -> Result<Git, String> {
        Git { place: Place::Found(dir.to_path_buf()), off: vec![] }.neutralized().await
    }

    /// A run's worktree, after checking its `.git` is still the file lab wrote.
    pub async fn worktree(wt: &Worktree) -> Result<Git, Unsafe> {
        let place = checked(wt)?;
        Git { place, off: vec![] }.neutralized().await.map_err(Unsafe::Gone)
    }

    /// A repository by its git folder (`<repo>/.git`), with no work tree: for refs and
    /// objects only.
    pub async fn git_dir(dir: &Path) -> Result<Git, String> {
        Git { place: Place::GitDir(dir.to_path_buf()), off: vec![] }.neutralized().await
    }

    /// The folder commands run in.
    pub fn dir(&self) -> &Path {
        match &self.place {
            Place::Found(d) | Place::GitDir(d) => d,
            Place::Named { work_tree, .. } => work_tree,
        }
    }

    /// This repository with every driver its config names turned off.
    async fn neutralized(mut self) -> Result<Git, String> {
        let out =
            self.run(&["config", "--null", "--name-only", "--get-regexp", r"^(filter|merge|diff)\..*\."], &[]).await?;
        // 1: no such key (or no repository: the command that follows says so).
        self.off = if out.ok { neutralizing(&out.stdout) } else { vec![] };
        Ok(self)
    }

    /// Run `git <args>` here with lab's settings: none of lab serve's `GIT_*` variables
    /// (`env` instead), [`HARDENING`] and the drivers off, no prompts, and a
    /// [`GIT_TIMEOUT`] after which it is killed. Errors only when git could not run or
    /// took too long; see [`Git::ok`] for the usual checked form.
    pub async fn run(&self, args: &[&str], env: &[(&str, &OsStr)]) -> Result<GitOutput, String> {
        self.run_input(args, env, None).await
    }

    /// [`Git::run`] with `input` on the command's stdin.
    pub async fn run_input(
        &self,
        args: &[&str],
        env: &[(&str, &OsStr)],
        input: Option<&[u8]>,
    ) -> Result<GitOutput, String> {
        let mut cmd = tokio::process::Command::new("git");
        for (k, _) in std::env::vars_os() {
            if k.to_string_lossy().starts_with("GIT_") {
                cmd.env_remove(&k);
            }
        }
        match &self.place {
            Place::Found(dir) => {
                cmd.arg("-C").arg(dir);
            }
            Place::Named { git_dir, work_tree } => {
                let mut g = std::ffi::OsString::from("--git-dir=");
                g.push(git_dir);
                let mut w = std::ffi::OsString::from("--work-tree=");
                w.push(work_tree);
                cmd.arg("-C").arg(work_tree).arg(g).arg(w);
            }
            Place::GitDir(git_dir) => {
                let mut g = std::ffi::OsString::from("--git-dir=");
                g.push(git_dir);
                cmd.arg("-C").arg(git_dir).arg(g);
            }
        }
        for c in HARDENING.iter().copied().chain(self.off.iter().map(String::as_str)) {
            cmd.args(["-c", c]);
        }
        cmd.args(args)
            .env("GIT_TERMINAL_PROMPT", "0")
            .env("GIT_OPTIONAL_LOCKS", "0")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_ATTR_NOSYSTEM", "1")
            .env("GIT_NO_REPLACE_OBJECTS", "1")
            .env("LC_ALL", "C")
            .envs(env.iter().copied())
            .stdin(if input.is_some() { std::process::Stdio::piped() } else { std::process::Stdio::null() })
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true);
        let mut child = cmd.spawn().map_err(|e| format!("running git: {e}"))?;
        let feed = match (input, child.stdin.take()) {
            (Some(bytes), Some(mut stdin)) => {
                let bytes = bytes.to_vec();
                Some(tokio::spawn(async move {
                    use tokio::io::AsyncWriteExt;
                    let _ = stdin.write_all(&bytes).await;
                }))
            }
            _ => None,
        };
        let out = tokio::time::timeout(GIT_TIMEOUT, child.wait_with_output())
            .await
            .map_err(|_| format!("git {} took longer than {}s and was stopped", args.join(" "), GIT_TIMEOUT.as_secs()))?
            .map_err(|e| format!("running git: {e}"))?;
        if let Some(f) = feed {
            let _ = f.await;
        }
        Ok(GitOutput {
            ok: out.status.success(),
            code: out.status.code(),
            stdout: out.stdout,
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        })
    }

    /// [`Git::run`], with a failure as an error naming the command and what git said.
    pub async fn ok(&self, args: &[&str], env: &[(&str, &OsStr)]) -> Result<Vec<u8>, String> {
        let out = self.run(args, env).await?;
        if out.ok {
            Ok(out.stdout)
        } else {
            Err(format!("git {} failed: {}", args.join(" "), out.stderr))
        }
    }

    /// [`Git::ok`]'s output as one trimmed line of text.
    pub async fn line(&self, args: &[&str]) -> Result<String, String> {
        self.line_env(args, &[]).await
    }

    /// [`Git::line`] with variables set for the command.
    pub async fn line_env(&self, args: &[&str], env: &[(&str, &OsStr)]) -> Result<String, String> {
        Ok(String::from_utf8_lossy(&self.ok(args, env).await?).trim().to_string())
    }
}

/// The worktree's git folder as recorded (a record from before lab kept it: the one
/// git names in the repository's `worktrees/` after the worktree's folder, if that
/// folder's `gitdir` points back at it).
fn recorded_git_dir(wt: &Worktree) -> Result<PathBuf, Unsafe> {
    if !wt.git_dir.is_empty() {
        return Ok(PathBuf::from(&wt.git_dir));
    }
    let name = Path::new(&wt.path).file_name().ok_or_else(|| Unsafe::Gone("the worktree has no folder name".into()))?;
    let admin = Path::new(&wt.repo).join(".git/worktrees").join(name);
    let back = crate::store::fsutil::read_untrusted(&admin.join("gitdir"), 8192).ok().flatten().unwrap_or_default();
    let want = Path::new(&wt.path).join(".git");
    if String::from_utf8_lossy(&back).trim_end() == want.to_string_lossy() {
        Ok(admin)
    } else {
        Err(Unsafe::Gone(format!("the git folder of the worktree {} is not where lab expects it", wt.path)))
    }
}

/// Whether lab may run git in a worktree: there, and its `.git` the file lab wrote.
pub fn check(wt: &Worktree) -> Result<(), Unsafe> {
    checked(wt).map(|_| ())
}

/// Where a worktree's commands run, once its `.git` is the file lab wrote.
fn checked(wt: &Worktree) -> Result<Place, Unsafe> {
    if wt.discarded {
        return Err(Unsafe::Gone("the run's worktree was discarded".into()));
    }
    let work_tree = PathBuf::from(&wt.path);
    match std::fs::symlink_metadata(&work_tree) {
        Ok(m) if m.is_dir() => {}
        _ => return Err(Unsafe::Gone(format!("the run's worktree {} is gone", wt.path))),
    }
    let git_dir = recorded_git_dir(wt)?;
    let replaced = || {
        Unsafe::Replaced(format!(
            "the worktree's .git is no longer the file lab wrote (something in {} replaced it): lab runs no git there",
            wt.path
        ))
    };
    let git_file = work_tree.join(".git");
    let content = match crate::store::fsutil::read_untrusted(&git_file, 8192) {
        Ok(Some(c)) => c,
        _ => return Err(replaced()),
    };
    if gitdir_of(&content).as_deref() != Some(git_dir.as_path()) {
        return Err(replaced());
    }
    Ok(Place::Named { git_dir, work_tree })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_driver_a_config_names_is_turned_off() {
        let names = b"filter.lfs.clean\0filter.lfs.smudge\0filter.Evil.required\0merge.ours.driver\0\
diff.a.b.textconv\0diff.x.funcname\0core.fsmonitor\0merge.tool\0";
        let off = neutralizing(names);
        assert_eq!(
            off,
            [
                "filter.lfs.clean=",
                "filter.lfs.smudge=",
                "filter.lfs.process=",
                "filter.lfs.required=false",
                "filter.Evil.clean=",
                "filter.Evil.smudge=",
                "filter.Evil.process=",
                "filter.Evil.required=false",
                "merge.ours.driver=",
                "diff.a.b.command=",
                "diff.a.b.textconv=",
            ]
        );
        assert!(neutralizing(b"").is_empty());
    }

    #[test]
    fn a_git_file_names_one_absolute_folder() {
        assert_eq!(gitdir_of(b"gitdir: /r/.git/worktrees/a\n"), Some(PathBuf::from("/r/.git/worktrees/a")));
        assert_eq!(gitdir_of(b"gitdir: /r/.git/worktrees/a"), Some(PathBuf::from("/r/.git/worktrees/a")));
        assert_eq!(gitdir_of(b"gitdir: ../x\n"), None);
        assert_eq!(gitdir_of(b"[core]\n"), None);
        assert_eq!(gitdir_of(b"gitdir: /a\n/b\n"), None);
    }
}
