//! A worktree run's git in its jail, as the jail's plan carries it: the repository's
//! git folder read-only, and over the paths `git commit` writes, the run's own folder
//! (its *shadow*). What lab does with it (making it ready, bringing the branch back) is
//! the worktree's: [`crate::worktree::jailed`].

use crate::store::paths::RunId;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// What a sandboxed run's git needs, carried in its jail's plan to where the jail is
/// made.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JailedGit {
    /// The repository's git folder (`<repo>/.git`).
    pub common: String,
    /// The worktree's own git folder (`<common>/worktrees/<name>`).
    pub own: String,
    /// The worktree's folder.
    pub worktree: String,
    /// The run's branch, `lab/<id>`.
    pub branch: String,
    /// The run's own git folder, beside its worktree.
    pub shadow: String,
}

/// A path bound into the jail from elsewhere: `from` on the machine, at `at` inside.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Bind {
    pub from: String,
    pub at: String,
    pub write: bool,
}

/// The leaf of a run's branch (`lab/<id>` → `<id>`), if it is one.
pub fn leaf(branch: &str) -> Option<&str> {
    branch.strip_prefix("lab/").filter(|l| RunId::parse(l).is_some())
}

/// A commit id as git prints it (40 or 64 hex digits).
pub fn commit_id(s: &str) -> Option<&str> {
    let s = s.trim();
    ((s.len() == 40 || s.len() == 64) && s.bytes().all(|b| b.is_ascii_hexdigit())).then_some(s)
}

impl JailedGit {
    pub fn shadow(&self, p: &str) -> PathBuf {
        Path::new(&self.shadow).join(p)
    }

    pub fn common(&self, p: &str) -> PathBuf {
        Path::new(&self.common).join(p)
    }

    pub fn leaf(&self) -> &str {
        leaf(&self.branch).unwrap_or("-")
    }

    /// What the jail gets: the repository's git folder read-only, then the shadow's
    /// folders bound over what git writes, and the shadow itself (where its objects'
    /// alternates point).
    pub fn binds(&self) -> Vec<Bind> {
        let s = |p: PathBuf| p.to_string_lossy().into_owned();
        let b = |from: PathBuf, at: PathBuf, write: bool| Bind { from: s(from), at: s(at), write };
        vec![
            b(PathBuf::from(&self.common), PathBuf::from(&self.common), false),
            b(self.shadow("objects"), self.common("objects"), true),
            b(self.common("objects"), self.shadow("base-objects"), false),
            b(self.shadow("refs"), self.common("refs/heads/lab"), true),
            b(self.shadow("logs"), self.common("logs/refs/heads/lab"), true),
            b(self.shadow("worktree"), PathBuf::from(&self.own), true),
        ]
    }
}
