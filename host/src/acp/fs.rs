//! The ACP file-system methods, confined to the run's workdir: a path must be absolute,
//! have no `..`, and resolve (symlinks followed) inside the root. Anything else is an
//! error to the agent, logged by the caller.

use std::path::{Component, Path, PathBuf};

/// The largest file the agent may read or write through lab.
pub const MAX_FILE: u64 = 16 << 20;

/// `requested` as a path inside `root` (canonical), or why not.
pub fn confine(root: &Path, requested: &str) -> Result<PathBuf, String> {
    let p = Path::new(requested);
    if !p.is_absolute() {
        return Err(format!("{requested:?} is not an absolute path"));
    }
    if p.components().any(|c| matches!(c, Component::ParentDir)) {
        return Err(format!("{requested:?} has a `..` in it"));
    }
    // The deepest part that exists, resolved; the rest must be plain names.
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

/// A text file's lines from `line` (1-based), at most `limit` of them.
pub fn read(path: &Path, line: Option<u64>, limit: Option<u64>) -> Result<String, String> {
    let meta = std::fs::metadata(path).map_err(|e| format!("{}: {e}", path.display()))?;
    if !meta.is_file() {
        return Err(format!("{} is not a regular file", path.display()));
    }
    if meta.len() > MAX_FILE {
        return Err(format!("{} is {} bytes; lab reads at most {MAX_FILE}", path.display(), meta.len()));
    }
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    if line.is_none() && limit.is_none() {
        return Ok(text);
    }
    let skip = line.unwrap_or(1).saturating_sub(1) as usize;
    let take = limit.map_or(usize::MAX, |l| l as usize);
    Ok(text.split_inclusive('\n').skip(skip).take(take).collect())
}

/// Write a text file (its folders made as needed, all inside the root already).
pub fn write(path: &Path, content: &str) -> Result<(), String> {
    if content.len() as u64 > MAX_FILE {
        return Err(format!("{} bytes is more than lab writes ({MAX_FILE})", content.len()));
    }
    if path.is_dir() {
        return Err(format!("{} is a directory", path.display()));
    }
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(|e| format!("{}: {e}", parent.display()))?;
    }
    std::fs::write(path, content).map_err(|e| format!("{}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_paths_inside_the_workdir_are_reached() {
        let d = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(d.path()).unwrap();
        let work = root.join("w");
        std::fs::create_dir_all(work.join("src")).unwrap();
        std::fs::write(work.join("src/a.txt"), "1\n2\n3\n").unwrap();
        std::fs::write(root.join("secret"), "s").unwrap();
        std::os::unix::fs::symlink(root.join("secret"), work.join("link")).unwrap();
        std::os::unix::fs::symlink(&root, work.join("up")).unwrap();
        let w = |p: &str| format!("{}/{p}", work.display());
        assert_eq!(confine(&work, &w("src/a.txt")).unwrap(), work.join("src/a.txt"));
        assert_eq!(confine(&work, &w("new/dir/b.txt")).unwrap(), work.join("new/dir/b.txt"));
        assert!(confine(&work, "src/a.txt").unwrap_err().contains("absolute"));
        assert!(confine(&work, &w("../secret")).unwrap_err().contains(".."));
        assert!(confine(&work, &w("link")).unwrap_err().contains("outside"), "a symlink out");
        assert!(confine(&work, &w("up/secret")).unwrap_err().contains("outside"), "a linked folder out");
        assert!(confine(&work, "/etc/passwd").unwrap_err().contains("outside"));
        assert_eq!(read(&work.join("src/a.txt"), Some(2), Some(1)).unwrap(), "2\n");
        assert_eq!(read(&work.join("src/a.txt"), None, None).unwrap(), "1\n2\n3\n");
        assert!(read(&work.join("src"), None, None).unwrap_err().contains("not a regular file"));
        write(&confine(&work, &w("new/dir/b.txt")).unwrap(), "hi").unwrap();
        assert_eq!(std::fs::read_to_string(work.join("new/dir/b.txt")).unwrap(), "hi");
        assert!(write(&work.join("src"), "x").unwrap_err().contains("directory"));
    }
}
