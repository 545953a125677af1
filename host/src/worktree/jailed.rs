//! A sandboxed run's git. Its jail sees the repository's git folder read-only: no
//! config, hooks, other branches or other worktrees' folders to write. What `git
//! commit` in the jail writes goes to a folder of the run's own beside its worktree
//! (its *shadow*), bound over the few paths git writes:
//!
//! | in the jail | is |
//! |---|---|
//! | `<repo>/.git` | the repository's, read-only |
//! | `<repo>/.git/objects` | `shadow/objects`: new objects; the repository's through `info/alternates` |
//! | `shadow/base-objects` | the repository's objects, read-only |
//! | `<repo>/.git/refs/heads/lab` | `shadow/refs`: only the run's branch |
//! | `<repo>/.git/logs/refs/heads/lab` | `shadow/logs`: its reflog |
//! | `<repo>/.git/worktrees/<name>` | `shadow/worktree`: a copy of its own (HEAD, index) |
//!
//! lab brings the branch back ([`JailedGit::bring_back`]) before it looks at it (a
//! diff, a merge), when the jail ends and before the next launch: the commits' objects
//! packed into the repository by lab's own hardened git (the shadow only as an object
//! store, never as a repository whose config is read), the branch moved only from
//! where it was, the worktree's index set to the new commit. Nothing else the agent
//! wrote there is taken.

use super::{Git, Worktree};
pub use crate::sandbox::git::{commit_id, leaf, Bind, JailedGit};
use std::ffi::OsStr;
use std::path::{Path, PathBuf};

/// The repository's git directory a worktree's own git folder is in
/// (`<repo>/.git/worktrees/<name>` → `<repo>/.git`; a record from before lab kept it:
/// `<repo>/.git`).
pub fn git_common_dir(wt: &Worktree) -> PathBuf {
    let own = Path::new(&wt.git_dir);
    own.parent()
        .filter(|p| p.file_name().is_some_and(|n| n == "worktrees"))
        .and_then(Path::parent)
        .map_or_else(|| Path::new(&wt.repo).join(".git"), Path::to_path_buf)
}

impl JailedGit {
    /// The jailed git of `wt` if a sandbox made its shadow.
    pub fn found(wt: &Worktree) -> Option<JailedGit> {
        let g = JailedGit::of(wt, &git_common_dir(wt)).ok()?;
        std::fs::symlink_metadata(&g.shadow).is_ok_and(|m| m.is_dir()).then_some(g)
    }

    /// The jailed git of `wt` (whose repository's git folder is `common`).
    pub fn of(wt: &Worktree, common: &Path) -> Result<JailedGit, String> {
        leaf(&wt.branch).ok_or_else(|| format!("the worktree's branch {} is not a run's", wt.branch))?;
        let own = if wt.git_dir.is_empty() {
            common.join("worktrees").join(Path::new(&wt.path).file_name().ok_or("the worktree has no folder name")?)
        } else {
            PathBuf::from(&wt.git_dir)
        };
        let s = |p: &Path| p.to_string_lossy().into_owned();
        Ok(JailedGit {
            common: s(common),
            own: s(&own),
            worktree: wt.path.clone(),
            branch: wt.branch.clone(),
            shadow: format!("{}.git-jail", wt.path.trim_end_matches('/')),
        })
    }

    /// Before a launch, where the jail is made: what the last jail committed brought
    /// back, then the shadow made afresh from the repository (its objects kept), and
    /// the mount points the binds need made in the repository's git folder.
    pub async fn prepare(&self) -> Result<(), String> {
        if Path::new(&self.shadow).exists() {
            self.bring_back().await?;
        }
        let repo = Git::git_dir(Path::new(&self.common)).await?;
        let head = repo.line(&["rev-parse", "--verify", &format!("refs/heads/{}^{{commit}}", self.branch)]).await?;
        let head = commit_id(&head).ok_or("the run's branch is no commit")?.to_string();
        let private =
            |p: &Path| crate::store::fsutil::private_dir(p).map_err(|e| format!("making {}: {e}", p.display()));
        private(Path::new(&self.shadow))?;
        for d in ["objects/info", "base-objects", "logs"] {
            std::fs::create_dir_all(self.shadow(d)).map_err(|e| format!("making the run's git folder: {e}"))?;
        }
        let write =
            |p: PathBuf, text: String| std::fs::write(&p, text).map_err(|e| format!("writing {}: {e}", p.display()));
        write(self.shadow("objects/info/alternates"), format!("{}\n", self.shadow("base-objects").display()))?;
        let _ = std::fs::remove_dir_all(self.shadow("refs"));
        std::fs::create_dir_all(self.shadow("refs")).map_err(|e| format!("making the run's git folder: {e}"))?;
        write(self.shadow("refs").join(self.leaf()), format!("{head}\n"))?;
        let _ = std::fs::remove_dir_all(self.shadow("worktree"));
        copy_tree(Path::new(&self.own), &self.shadow("worktree"), 4)?;
        for d in ["refs/heads/lab", "logs/refs/heads/lab"] {
            std::fs::create_dir_all(self.common(d)).map_err(|e| format!("making {}: {e}", self.common(d).display()))?;
        }
        Ok(())
    }

    /// The commit the jail moved the run's branch to, brought into the repository:
    /// `None` when it did not move it (or there is no shadow).
    pub async fn bring_back(&self) -> Result<Option<String>, String> {
        let file = self.shadow("refs").join(self.leaf());
        let Ok(Some(text)) = crate::store::fsutil::read_untrusted(&file, 256) else { return Ok(None) };
        let Some(new) = commit_id(&String::from_utf8_lossy(&text)).map(str::to_string) else {
            return Err(format!("the run's branch in its sandbox ({}) is not a commit id", file.display()));
        };
        let repo = Git::git_dir(Path::new(&self.common)).await?;
        let refname = format!("refs/heads/{}", self.branch);
        let old = repo.line(&["rev-parse", "--verify", &format!("{refname}^{{commit}}")]).await?;
        if old == new {
            return Ok(None);
        }
        // The shadow's objects, read by the repository's git as an object store only.
        let objects = self.shadow("objects");
        let env: [(&str, &OsStr); 1] = [("GIT_ALTERNATE_OBJECT_DIRECTORIES", objects.as_os_str())];
        let kind = repo.line_env(&["cat-file", "-t", &new], &env).await.unwrap_or_default();
        if kind != "commit" {
            return Err(format!("the run's branch in its sandbox names {new}, which is no commit it wrote"));
        }
        let pack = self.common("objects/pack/pack");
        let input = format!("{new}\n^{old}\n");
        let out = repo
            .run_input(&["pack-objects", "--revs", "--quiet", &pack.to_string_lossy()], &env, Some(input.as_bytes()))
            .await?;
        if !out.ok {
            return Err(format!("bringing the run's commits into the repository: {}", out.stderr));
        }
        repo.ok(&["update-ref", "-m", "lab: from the run's sandbox", &refname, &new, &old], &[])
            .await
            .map_err(|e| format!("moving the run's branch: {e}"))?;
        // The worktree's index at the new commit (its files are the agent's already).
        let wt = Git::worktree(&Worktree {
            path: self.worktree.clone(),
            branch: self.branch.clone(),
            base: String::new(),
            base_ref: None,
            repo: String::new(),
            git_dir: self.own.clone(),
            subdir: String::new(),
            merged: None,
            discarded: false,
        })
        .await
        .map_err(|e| e.to_string())?;
        let head = wt.line(&["symbolic-ref", "-q", "HEAD"]).await.unwrap_or_default();
        if head == refname {
            wt.ok(&["read-tree", &new], &[]).await.map_err(|e| format!("setting the worktree's index: {e}"))?;
        }
        Ok(Some(new))
    }
}

/// Copy the folder `from` to `to` (made 0700): regular files and folders only, at most
/// `depth` levels (a worktree's git folder: HEAD, index, logs/). Not copied: locks
/// (a lock held now would be a stale one in the copy) and lab's own scratch indexes
/// (its diff's, made and removed beside the index while lab serve looks at the run's
/// work); a file gone between the listing and its copy is not missed.
fn copy_tree(from: &Path, to: &Path, depth: usize) -> Result<(), String> {
    crate::store::fsutil::private_dir(to).map_err(|e| format!("making {}: {e}", to.display()))?;
    let entries = std::fs::read_dir(from).map_err(|e| format!("reading {}: {e}", from.display()))?;
    for e in entries.flatten() {
        let Ok(t) = e.file_type() else { continue };
        let name = e.file_name();
        let name = name.to_string_lossy();
        if name.ends_with(".lock") || super::diff::is_scratch_index(&name) {
            continue;
        }
        let dest = to.join(e.file_name());
        if t.is_file() {
            match std::fs::copy(e.path(), &dest) {
                Err(err) if err.kind() == std::io::ErrorKind::NotFound => continue,
                Err(err) => return Err(format!("copying {}: {err}", e.path().display())),
                Ok(_) => {}
            }
        } else if t.is_dir() && depth > 0 {
            copy_tree(&e.path(), &dest, depth - 1)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_git_folder_is_copied_without_locks_or_lab_s_scratch_indexes() {
        let d = tempfile::tempdir().unwrap();
        let (from, to) = (d.path().join("from"), d.path().join("to"));
        std::fs::create_dir_all(from.join("logs")).unwrap();
        for f in [
            "HEAD",
            "index",
            "logs/HEAD",
            "index.lock",
            "lab-snapshot-0123abcd.index",
            "lab-snapshot-0123abcd.index.lock",
        ] {
            std::fs::write(from.join(f), f).unwrap();
        }
        copy_tree(&from, &to, 2).unwrap();
        let mut got: Vec<String> = walk(&to);
        got.sort();
        assert_eq!(got, ["HEAD", "index", "logs/HEAD"]);
    }

    fn walk(dir: &Path) -> Vec<String> {
        let mut out = Vec::new();
        for e in std::fs::read_dir(dir).unwrap().flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if e.file_type().unwrap().is_dir() {
                out.extend(walk(&e.path()).into_iter().map(|f| format!("{name}/{f}")));
            } else {
                out.push(name);
            }
        }
        out
    }

    fn wt() -> Worktree {
        Worktree {
            path: "/wt/repo-r-1".into(),
            branch: "lab/r-1".into(),
            base: "abc".into(),
            base_ref: Some("main".into()),
            repo: "/repo".into(),
            git_dir: "/repo/.git/worktrees/repo-r-1".into(),
            subdir: String::new(),
            merged: None,
            discarded: false,
        }
    }

    #[test]
    fn the_jail_writes_only_the_shadow() {
        let j = JailedGit::of(&wt(), Path::new("/repo/.git")).unwrap();
        assert_eq!(j.shadow, "/wt/repo-r-1.git-jail");
        let binds = j.binds();
        assert_eq!(binds[0], Bind { from: "/repo/.git".into(), at: "/repo/.git".into(), write: false });
        for b in binds.iter().filter(|b| b.write) {
            assert!(b.from.starts_with("/wt/repo-r-1.git-jail/"), "only the shadow is written: {b:?}");
        }
        let at: Vec<&str> = binds.iter().filter(|b| b.write).map(|b| b.at.as_str()).collect();
        assert_eq!(
            at,
            [
                "/repo/.git/objects",
                "/repo/.git/refs/heads/lab",
                "/repo/.git/logs/refs/heads/lab",
                "/repo/.git/worktrees/repo-r-1"
            ]
        );
        let mut other = wt();
        other.branch = "main".into();
        assert!(JailedGit::of(&other, Path::new("/repo/.git")).is_err(), "only a run's branch");
    }

    #[test]
    fn only_a_commit_id_is_taken_from_the_shadow() {
        assert_eq!(commit_id(&"a".repeat(40)), Some("a".repeat(40).as_str()));
        assert_eq!(commit_id(&format!("{}\n", "b".repeat(64))), Some("b".repeat(64).as_str()));
        assert_eq!(commit_id("ref: refs/heads/main"), None);
        assert_eq!(commit_id(&"g".repeat(40)), None);
        assert_eq!(commit_id("--all"), None);
    }
}
