//! A run's diff: everything in its worktree against the base commit — commits, staged
//! and unstaged changes, untracked files (not ignored ones) — as `git diff` shows it.
//! The worktree is snapshotted into a tree through a private copy of its index
//! ([`snapshot`]), so the agent's own index is never touched; then one `git diff
//! --raw --numstat` gives each file's status and counts, and one `git diff` its patch.

use super::{Git, Worktree};
use serde::{Deserialize, Serialize};
use std::ffi::OsStr;
use std::path::{Path, PathBuf};

/// A file's patch longer than this is cut (at a line) and marked.
pub const PATCH_FILE_LIMIT: usize = 256 * 1024;
/// Patches past this many bytes in all are left out (the files still listed, marked).
pub const PATCH_TOTAL_LIMIT: usize = 4 * 1024 * 1024;
/// Files past this many are left out of the list.
pub const MAX_FILES: usize = 5_000;

/// `GET /runs/{id}/diff`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Diff {
    pub base: String,
    /// The worktree's HEAD commit (the agent's commits end there; uncommitted changes
    /// are on top of it).
    pub head: String,
    pub files: Vec<FileDiff>,
    /// Something was left out: a patch cut or dropped (see each file's
    /// `patch_truncated`) or files past [`MAX_FILES`].
    pub truncated: bool,
    #[serde(flatten)]
    pub summary: Summary,
}

/// Files changed and lines added and deleted in all (the event stream's `diff`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Summary {
    pub files_changed: usize,
    pub additions: u64,
    pub deletions: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Added,
    Modified,
    Deleted,
    Renamed,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileDiff {
    pub path: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub old_path: Option<String>,
    pub status: Status,
    pub additions: u64,
    pub deletions: u64,
    pub binary: bool,
    /// The file's part of `git diff`'s output, from its `diff --git` line.
    pub patch: String,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub patch_truncated: bool,
}

/// One file as `git diff --raw --numstat -z` names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub path: String,
    pub old_path: Option<String>,
    pub status: Status,
    /// None: binary.
    pub counts: Option<(u64, u64)>,
}

/// Parse `git diff -z -M --raw --numstat`: the raw records (status and paths), then the
/// numstat records in the same order (counts; `-` for binary files).
pub fn parse_raw_numstat(out: &[u8]) -> Result<Vec<Entry>, String> {
    let text = String::from_utf8_lossy(out);
    let mut tokens = text.split('\0').filter(|t| !t.is_empty()).peekable();
    let mut entries = Vec::new();
    while let Some(t) = tokens.next_if(|t| t.starts_with(':')) {
        let letter = t.rsplit(' ').next().and_then(|s| s.chars().next()).ok_or("git printed an empty status")?;
        let first = tokens.next().ok_or("git's raw diff ends in the middle of a record")?.to_string();
        let (path, old_path, status) = match letter {
            'R' | 'C' => {
                let new = tokens.next().ok_or("git's raw diff ends in the middle of a rename")?.to_string();
                // A copy (not asked for) shows as the new file added.
                if letter == 'R' {
                    (new, Some(first), Status::Renamed)
                } else {
                    (new, None, Status::Added)
                }
            }
            'A' => (first, None, Status::Added),
            'D' => (first, None, Status::Deleted),
            'M' | 'T' => (first, None, Status::Modified),
            other => return Err(format!("git printed an unexpected file status {other:?}")),
        };
        entries.push(Entry { path, old_path, status, counts: None });
    }
    for e in entries.iter_mut() {
        let t = tokens.next().ok_or("git's numstat has fewer files than its raw diff")?;
        let mut parts = t.splitn(3, '\t');
        let (add, del) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
        if parts.next().is_some_and(|p| p.is_empty()) {
            // A rename: the two paths follow.
            tokens.next();
            tokens.next();
        }
        e.counts = match (add.parse(), del.parse()) {
            (Ok(a), Ok(d)) => Some((a, d)),
            _ if add == "-" && del == "-" => None,
            _ => return Err(format!("git printed unexpected counts {t:?}")),
        };
    }
    Ok(entries)
}

/// `git diff`'s patch cut into its files' parts, in order (each from its `diff --git`
/// line; no content line can start so, every one of them has a prefix character).
pub fn split_patch(patch: &str) -> Vec<&str> {
    let mut starts: Vec<usize> = Vec::new();
    let mut at = 0;
    for line in patch.split_inclusive('\n') {
        if line.starts_with("diff --git ") {
            starts.push(at);
        }
        at += line.len();
    }
    starts.iter().enumerate().map(|(i, &s)| &patch[s..starts.get(i + 1).copied().unwrap_or(patch.len())]).collect()
}

/// `s` cut to at most `limit` bytes, at the end of a line where there is one.
fn cut(s: &str, limit: usize) -> &str {
    if s.len() <= limit {
        return s;
    }
    let end = crate::util::text::head(s, limit).len();
    match s[..end].rfind('\n') {
        Some(nl) => &s[..=nl],
        None => &s[..end],
    }
}

/// The files of a diff, from its entries and its patch's parts (same order), within the
/// limits; and whether anything was left out.
pub fn assemble(entries: Vec<Entry>, patches: &[&str], file_limit: usize, total_limit: usize) -> (Vec<FileDiff>, bool) {
    let mut truncated = entries.len() > MAX_FILES;
    let mut total = 0usize;
    let files = entries
        .into_iter()
        .take(MAX_FILES)
        .enumerate()
        .map(|(i, e)| {
            let whole = patches.get(i).copied().unwrap_or("");
            let room = total_limit.saturating_sub(total);
            let patch = cut(whole, file_limit.min(room));
            total += patch.len();
            let patch_truncated = patch.len() < whole.len();
            truncated |= patch_truncated;
            let (additions, deletions) = e.counts.unwrap_or((0, 0));
            FileDiff {
                path: e.path,
                old_path: e.old_path,
                status: e.status,
                additions,
                deletions,
                binary: e.counts.is_none(),
                patch: patch.to_string(),
                patch_truncated,
            }
        })
        .collect();
    (files, truncated)
}

pub fn summarize(entries: &[Entry]) -> Summary {
    let (additions, deletions) = entries.iter().filter_map(|e| e.counts).fold((0, 0), |(a, d), (x, y)| (a + x, d + y));
    Summary { files_changed: entries.len(), additions, deletions }
}

/// A private copy of a worktree's index, removed when dropped.
struct ScratchIndex(PathBuf);

impl Drop for ScratchIndex {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Whether `file_name` is one of the scratch indexes [`snapshot`] makes beside a
/// worktree's index (or its lock).
pub fn is_scratch_index(file_name: &str) -> bool {
    file_name.strip_prefix(SCRATCH_PREFIX).is_some_and(|r| r.ends_with(".index") || r.ends_with(".index.lock"))
}

/// The start of a scratch index's name.
const SCRATCH_PREFIX: &str = "lab-snapshot-";

/// The worktree as it is now, as a tree object: its index copied (so unchanged files
/// are not hashed again), every change and untracked file added to the copy, written.
pub async fn snapshot(git: &Git) -> Result<String, String> {
    let git_dir = git.line(&["rev-parse", "--absolute-git-dir"]).await?;
    let scratch =
        ScratchIndex(Path::new(&git_dir).join(format!("{SCRATCH_PREFIX}{}.index", uuid::Uuid::new_v4().simple())));
    match std::fs::copy(Path::new(&git_dir).join("index"), &scratch.0) {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(format!("copying the worktree's index: {e}")),
    }
    let env: [(&str, &OsStr); 1] = [("GIT_INDEX_FILE", scratch.0.as_os_str())];
    git.ok(&["add", "--all", "--", ":/"], &env).await?;
    git.line_env(&["write-tree"], &env).await
}

/// The options every diff lab reads is made with: renames found, no external diff or
/// text conversion, `a/` `b/` prefixes, paths from the top, submodules not entered.
const DIFF_ARGS: [&str; 7] = [
    "-M",
    "--no-ext-diff",
    "--no-textconv",
    "--src-prefix=a/",
    "--dst-prefix=b/",
    "--no-relative",
    "--ignore-submodules=all",
];

async fn entries(git: &Git, base: &str, tree: &str) -> Result<Vec<Entry>, String> {
    let mut args = vec!["diff", "-z", "--raw", "--numstat"];
    args.extend(DIFF_ARGS);
    args.extend([base, tree, "--"]);
    parse_raw_numstat(&git.ok(&args, &[]).await?)
}

/// The run's whole diff.
pub async fn diff(wt: &Worktree) -> Result<Diff, String> {
    let git = Git::worktree(wt).await.map_err(|e| e.to_string())?;
    diff_within(&git, wt, PATCH_TOTAL_LIMIT).await
}

/// [`diff`] of the worktree `git` reaches, with at most `total_limit` bytes of patches
/// in all.
pub async fn diff_within(git: &Git, wt: &Worktree, total_limit: usize) -> Result<Diff, String> {
    let tree = snapshot(git).await?;
    let head = git.line(&["rev-parse", "--verify", "HEAD"]).await?;
    let entries = entries(git, &wt.base, &tree).await?;
    let summary = summarize(&entries);
    let mut args = vec!["diff", "--patch"];
    args.extend(DIFF_ARGS);
    args.extend([wt.base.as_str(), tree.as_str(), "--"]);
    let patch = git.ok(&args, &[]).await?;
    let patch = String::from_utf8_lossy(&patch);
    let parts = split_patch(&patch);
    if parts.len() != entries.len() {
        return Err(format!("git's patch has {} files and its file list {}", parts.len(), entries.len()));
    }
    let (files, truncated) = assemble(entries, &parts, PATCH_FILE_LIMIT.min(total_limit), total_limit);
    Ok(Diff { base: wt.base.clone(), head, files, truncated, summary })
}

/// Only the counts (the event stream's summary).
pub async fn summary(git: &Git, wt: &Worktree) -> Result<Summary, String> {
    let tree = snapshot(git).await?;
    Ok(summarize(&entries(git, &wt.base, &tree).await?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_and_numstat_records_become_files() {
        let out = b":100644 100644 aaa bbb M\0src/a.rs\0:000000 100644 000 ccc A\0new file.txt\0\
:100644 000000 ddd 000 D\0gone.txt\0:100644 100644 eee eee R100\0old name\0new name\0\
:000000 100644 000 fff A\0img.png\0\
3\t1\tsrc/a.rs\x002\t0\tnew file.txt\x000\t5\tgone.txt\x000\t0\t\0old name\0new name\0-\t-\timg.png\0";
        let e = parse_raw_numstat(out).unwrap();
        assert_eq!(e.len(), 5);
        assert_eq!(
            e[0],
            Entry { path: "src/a.rs".into(), old_path: None, status: Status::Modified, counts: Some((3, 1)) }
        );
        assert_eq!(e[1].path, "new file.txt");
        assert_eq!(e[1].status, Status::Added);
        assert_eq!(e[2].status, Status::Deleted);
        assert_eq!(e[2].counts, Some((0, 5)));
        assert_eq!(
            e[3],
            Entry {
                path: "new name".into(),
                old_path: Some("old name".into()),
                status: Status::Renamed,
                counts: Some((0, 0))
            }
        );
        assert_eq!(e[4].counts, None);
        assert_eq!(summarize(&e), Summary { files_changed: 5, additions: 5, deletions: 6 });
        assert_eq!(parse_raw_numstat(b"").unwrap(), vec![]);
        assert!(parse_raw_numstat(b":100644 100644 a b M\0x\0").unwrap_err().contains("fewer files"));
        assert!(parse_raw_numstat(b":100644 100644 a b X\0x\0").unwrap_err().contains("unexpected file status"));
    }

    #[test]
    fn a_patch_is_cut_into_its_files() {
        let p = "diff --git a/x b/x\nindex 1..2 100644\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-diff --git no\n+a\n\
diff --git a/y b/y\nnew file mode 100644\nBinary files /dev/null and b/y differ\n";
        let parts = split_patch(p);
        assert_eq!(parts.len(), 2);
        assert!(parts[0].starts_with("diff --git a/x") && parts[0].ends_with("+a\n"));
        assert!(parts[1].starts_with("diff --git a/y") && parts[1].ends_with("differ\n"));
        assert_eq!(parts.concat(), p);
        assert!(split_patch("").is_empty());
    }

    #[test]
    fn large_patches_are_cut_at_a_line_and_marked() {
        let e = |p: &str| Entry { path: p.into(), old_path: None, status: Status::Modified, counts: Some((1, 1)) };
        let patches = ["diff --git a/a b/a\n+12345\n+67890\n", "diff --git a/b b/b\n+x\n", "diff --git a/c b/c\n+y\n"];
        let (files, truncated) = assemble(vec![e("a"), e("b"), e("c")], &patches, 30, 52);
        assert!(truncated);
        assert_eq!(files[0].patch, "diff --git a/a b/a\n+12345\n");
        assert!(files[0].patch_truncated);
        assert_eq!(files[1].patch, patches[1]);
        assert!(!files[1].patch_truncated);
        // The total is spent: the rest are listed without their patch.
        assert!(files[2].patch_truncated && files[2].patch.len() < patches[2].len());
        let (files, truncated) = assemble(vec![e("b")], &patches[1..2], 30, 52);
        assert!(!truncated && !files[0].binary);
    }
}
