//! What a jail may hold, decided before it is made (pure: paths in, verdicts out):
//! a workdir too broad to jail (the machine, a home), lab's own paths inside a bound
//! one (masked by an empty tmpfs), a workdir inside lab's own files (refused).

use std::path::{Component, Path, PathBuf};

/// Whether `p` is `ancestor` or inside it, component by component (`/a/bc` is not in
/// `/a/b`).
pub fn within(p: &Path, ancestor: &Path) -> bool {
    p.starts_with(ancestor)
}

/// Why `workdir` is too broad to jail, if it is: the whole machine, the folder that
/// holds users' homes, a user's home, or a folder that holds one of `homes` (the
/// agent's HOME, lab serve's). A jail with such a workdir bound read-write would hand
/// the agent every project, key and agent config of the account.
pub fn broad_workdir(workdir: &Path, homes: &[PathBuf]) -> Option<String> {
    let normal = lexical(workdir);
    if normal == Path::new("/") {
        return Some("the whole machine (/)".into());
    }
    if normal == Path::new("/home") {
        return Some("/home holds users' homes".into());
    }
    if let Some(h) = homes.iter().find(|h| within(h, &normal)) {
        return Some(if h == &normal {
            format!("{} is a home folder", normal.display())
        } else {
            format!("{} holds the home folder {}", normal.display(), h.display())
        });
    }
    if normal.parent() == Some(Path::new("/home")) || normal == Path::new("/root") {
        return Some(format!("{} is a user's home folder", normal.display()));
    }
    None
}

/// `p` with `.` and `..` taken out by its words alone (`/home/o/..` → `/home`).
pub fn lexical(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            c => out.push(c),
        }
    }
    out
}

/// A bound path and what it is on the machine (symlinks resolved where it exists).
#[derive(Debug, Clone)]
pub struct Bound {
    /// Where the jail sees it (the path as bound).
    pub at: PathBuf,
    /// What it is on the machine.
    pub real: PathBuf,
}

/// The mount points to mask with an empty tmpfs: each of lab's own paths (`lab`, real
/// paths) that lies inside a bound path, where the jail sees it. A path of lab's the
/// jail does not hold (not inside any bind) needs none: the jail's root is empty but
/// for what is bound.
pub fn masks(lab: &[PathBuf], bound: &[Bound]) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = vec![];
    for own in lab {
        for b in bound {
            if let Ok(rest) = own.strip_prefix(&b.real) {
                let at = b.at.join(rest);
                if !out.contains(&at) {
                    out.push(at);
                }
            }
        }
    }
    // One inside another is hidden by it already.
    let all = out.clone();
    out.retain(|m| !all.iter().any(|o| o != m && within(m, o)));
    out
}

/// A workdir inside lab's own files (its home, its worktrees folder) is refused: the
/// mask that hides them would hide the workdir too. A run's own worktree is lab's to
/// give and is not checked here.
pub fn workdir_in_lab(workdir_real: &Path, lab: &[PathBuf]) -> Option<String> {
    lab.iter().find(|l| within(workdir_real, l)).map(|l| {
        format!(
            "the workdir {} is inside lab's own files ({}): a jail there would see lab's token, sockets and other runs",
            workdir_real.display(),
            l.display()
        )
    })
}

/// `p` with symlinks resolved when it exists (else as given).
pub fn real(p: &Path) -> PathBuf {
    std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> PathBuf {
        PathBuf::from(s)
    }

    #[test]
    fn the_machine_and_homes_are_too_broad_a_workdir() {
        let homes = [p("/home/o")];
        for (w, says) in [
            ("/", "whole machine"),
            ("/home", "users' homes"),
            ("/root", "home folder"),
            ("/home/o", "is a home folder"),
            ("/home/o/", "is a home folder"),
            ("/home/someone", "a user's home"),
            ("/home/o/..", "users' homes"),
        ] {
            let why = broad_workdir(Path::new(w), &homes).unwrap_or_else(|| panic!("{w} is broad"));
            assert!(why.contains(says), "{w}: {why}");
        }
        let why = broad_workdir(Path::new("/srv"), &[p("/srv/users/o")]).unwrap();
        assert!(why.contains("holds the home folder /srv/users/o"), "{why}");
        for w in ["/home/o/proj", "/srv/work", "/tmp/x", "/home/o/.local/state/lab/worktrees/r-1", "/homework"] {
            assert_eq!(broad_workdir(Path::new(w), &homes), None, "{w}");
        }
    }

    #[test]
    fn lab_s_paths_inside_a_bind_are_masked_where_the_jail_sees_them() {
        let lab = [p("/home/o/.local/state/lab"), p("/srv/wt")];
        let bound = [
            Bound { at: p("/home/o"), real: p("/home/o") },
            Bound { at: p("/work"), real: p("/srv") },
            Bound { at: p("/home/o/proj"), real: p("/home/o/proj") },
        ];
        assert_eq!(masks(&lab, &bound), [p("/home/o/.local/state/lab"), p("/work/wt")]);
        assert!(masks(&lab, &bound[2..]).is_empty(), "a project beside lab's home holds none of it");
        let nested = [p("/h/lab"), p("/h/lab/worktrees")];
        assert_eq!(
            masks(&nested, &bound[..1].iter().map(|_| Bound { at: p("/h"), real: p("/h") }).collect::<Vec<_>>()),
            [p("/h/lab")]
        );
        assert!(masks(
            &[p("/home/o/.local/state/labx")],
            &[Bound { at: p("/home/o/.local/state/lab"), real: p("/home/o/.local/state/lab") }]
        )
        .is_empty());
    }

    #[test]
    fn a_workdir_inside_lab_s_files_is_refused() {
        let lab = [p("/h/lab"), p("/srv/wt")];
        assert!(workdir_in_lab(Path::new("/h/lab"), &lab).unwrap().contains("lab's own files (/h/lab)"));
        assert!(workdir_in_lab(Path::new("/h/lab/runtime"), &lab).is_some());
        assert!(workdir_in_lab(Path::new("/srv/wt/r-2"), &lab).is_some());
        assert_eq!(workdir_in_lab(Path::new("/h/labwork"), &lab), None);
        assert_eq!(workdir_in_lab(Path::new("/h"), &lab), None, "holding it is masked, not refused");
    }
}
