//! The ACP file-system methods, confined to the run's workdir: a path must be absolute,
//! have no `..`, and name a place below the workdir as the agent was told it or as it
//! resolves; the file is then reached by walking down from the workdir without
//! following a symlink anywhere ([`crate::store::fsutil::open_beneath`],
//! [`crate::store::fsutil::write_beneath`]), so a link planted in the workdir (to `~/.profile`,
//! dangling or not) is refused, never followed out. Anything else is an error to the
//! agent, logged by the caller.

use std::path::{Component, Path, PathBuf};

/// The largest file the agent may read or write through lab.
pub const MAX_FILE: u64 = 16 << 20;

/// `requested` as the same place below `root` (the workdir, resolved), or why not.
/// `told` is the workdir as the agent was told it (its `cwd`), which may be spelled
/// otherwise; nothing of `requested` itself is resolved.
pub fn confine(root: &Path, told: &Path, requested: &str) -> Result<PathBuf, String> {
    let p = Path::new(requested);
    if !p.is_absolute() {
        return Err(format!("{requested:?} is not an absolute path"));
    }
    if p.components().any(|c| matches!(c, Component::ParentDir | Component::CurDir)) {
        return Err(format!("{requested:?} has a `..` in it"));
    }
    let rel = p
        .strip_prefix(root)
        .or_else(|_| p.strip_prefix(told))
        .map_err(|_| format!("{requested:?} is outside the run's workdir {}", root.display()))?;
    Ok(root.join(rel))
}

/// [`confine`] for a folder a command runs in: the deepest part that exists resolved
/// (symlinks followed), which must stay inside the root; the rest plain names.
pub fn confine_dir(root: &Path, requested: &str) -> Result<PathBuf, String> {
    let p = Path::new(requested);
    if !p.is_absolute() {
        return Err(format!("{requested:?} is not an absolute path"));
    }
    if p.components().any(|c| matches!(c, Component::ParentDir)) {
        return Err(format!("{requested:?} has a `..` in it"));
    }
    let mut existing = p.to_path_buf();
    let mut rest = Vec::new();
    while !existing.exists() {
        match (existing.file_name(), existing.parent()) {
            (Some(name), Some(parent)) => {
                rest.push(name.to_os_string());
                existing = parent.to_path_buf();
            }
            _ => return Err(format!("{requested:?} is outside the run's workdir")),
        }
    }
    let resolved = std::fs::canonicalize(&existing).map_err(|e| format!("{requested:?}: {e}"))?;
    if !resolved.starts_with(root) {
        return Err(format!("{requested:?} is outside the run's workdir {}", root.display()));
    }
    Ok(rest.into_iter().rev().fold(resolved, |acc, n| acc.join(n)))
}

/// A text file's lines from `line` (1-based), at most `limit` of them: `path` (from
/// [`confine`]) reached from `root` without following a symlink, a regular file, at
/// most [`MAX_FILE`] bytes.
pub fn read(root: &Path, path: &Path, line: Option<u64>, limit: Option<u64>) -> Result<String, String> {
    let shown = path.display();
    let f = crate::store::fsutil::open_beneath(root, path)
        .map_err(|e| format!("{shown}: {e}"))?
        .ok_or_else(|| format!("{shown}: no such file"))?;
    let bytes = crate::store::fsutil::read_capped(f, MAX_FILE as usize).map_err(|e| format!("{shown}: {e}"))?;
    let text = String::from_utf8(bytes).map_err(|_| format!("{shown} is not UTF-8 text"))?;
    if line.is_none() && limit.is_none() {
        return Ok(text);
    }
    let skip = line.unwrap_or(1).saturating_sub(1) as usize;
    let take = limit.map_or(usize::MAX, |l| l as usize);
    Ok(text.split_inclusive('\n').skip(skip).take(take).collect())
}

/// Write a text file (its folders made as needed): `path` (from [`confine`]) reached
/// from `root` without following a symlink, created exclusively when new, an existing
/// one only if it is a regular file.
pub fn write(root: &Path, path: &Path, content: &str) -> Result<(), String> {
    crate::store::fsutil::write_beneath(root, path, content.as_bytes(), MAX_FILE as usize)
        .map_err(|e| format!("{}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_paths_inside_the_workdir_are_reached_and_no_link_is_followed() {
        let d = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(d.path()).unwrap();
        let work = root.join("w");
        std::fs::create_dir_all(work.join("src")).unwrap();
        std::fs::write(work.join("src/a.txt"), "1\n2\n3\n").unwrap();
        std::fs::write(root.join("secret"), "s").unwrap();
        std::os::unix::fs::symlink(root.join("secret"), work.join("link")).unwrap();
        std::os::unix::fs::symlink(&root, work.join("up")).unwrap();
        std::os::unix::fs::symlink(root.join("profile"), work.join("notes.md")).unwrap();
        std::os::unix::fs::symlink(&work, root.join("told")).unwrap();
        let told = root.join("told");
        let w = |p: &str| format!("{}/{p}", work.display());
        let c = |p: &str| confine(&work, &told, p);
        assert_eq!(c(&w("src/a.txt")).unwrap(), work.join("src/a.txt"));
        assert_eq!(c(&format!("{}/src/a.txt", told.display())).unwrap(), work.join("src/a.txt"), "as told");
        assert_eq!(c(&w("new/dir/b.txt")).unwrap(), work.join("new/dir/b.txt"));
        assert!(c("src/a.txt").unwrap_err().contains("absolute"));
        assert!(c(&w("../secret")).unwrap_err().contains(".."));
        assert!(c("/etc/passwd").unwrap_err().contains("outside"));
        let read_ = |p: &str| read(&work, &c(&w(p)).unwrap(), None, None);
        assert_eq!(read(&work, &work.join("src/a.txt"), Some(2), Some(1)).unwrap(), "2\n");
        assert_eq!(read_("src/a.txt").unwrap(), "1\n2\n3\n");
        assert!(read_("src").unwrap_err().contains("directory"));
        assert!(read_("link").unwrap_err().contains("symlink"), "a symlink out");
        assert!(read_("up/secret").unwrap_err().contains("symlink"), "a linked folder out");
        let write_ = |p: &str, t: &str| write(&work, &c(&w(p)).unwrap(), t);
        write_("new/dir/b.txt", "hi").unwrap();
        assert_eq!(std::fs::read_to_string(work.join("new/dir/b.txt")).unwrap(), "hi");
        write_("src/a.txt", "x").unwrap();
        assert_eq!(std::fs::read_to_string(work.join("src/a.txt")).unwrap(), "x", "replaced whole");
        assert!(write_("src", "x").is_err());
        // A dangling link to a file outside: refused, nothing made there.
        assert!(write_("notes.md", "pwned").unwrap_err().contains("symlink"));
        assert!(!root.join("profile").exists());
        assert!(write_("link", "pwned").unwrap_err().contains("symlink"));
        assert_eq!(std::fs::read_to_string(root.join("secret")).unwrap(), "s");
        assert!(write_("up/x.txt", "pwned").unwrap_err().contains("symlink"));
        assert!(!root.join("x.txt").exists());
        assert!(confine_dir(&work, &w("up")).unwrap_err().contains("outside"));
        assert_eq!(confine_dir(&work, &w("src")).unwrap(), work.join("src"));
    }
}
