//! Who could have written a path lab trusts: lab's home and everything in it (the
//! runtime files, the registry, the token, `lab.toml`, `providers/*.wasm`) must be out
//! of every other local user's reach, or one of them could plant a configuration that
//! points an agent at their program, a provider component, or a launch file.
//!
//! The rules (OpenSSH's `StrictModes`, applied to lab's home):
//!
//! - every directory on the home's real path is owned by lab's user or root, and one
//!   that group or others may write is sticky (`/tmp`): nobody else can rename the home
//!   or what leads to it;
//! - a symlink on the way there is lab's user's or root's;
//! - the home itself is lab's user's directory;
//! - lab's own directories and files in it are real directories and files of lab's
//!   user, never symlinks;
//! - the operator's files (`lab.toml`, `providers/` and its components) are lab's
//!   user's or root's and writable by nobody else.
//!
//! The decisions are pure ([`chain_dir`], [`own_entry`], [`operator_file`]) over the
//! facts of `lstat`/`stat` ([`crate::store::fsutil::OwnerFacts`]); the walks do the I/O.

use crate::store::fsutil::{self, Kind, OwnerFacts, Stat};
use std::path::{Path, PathBuf};

const ROOT: u32 = 0;

/// A directory on the real path to the home (not the home itself).
pub fn chain_dir(facts: &impl OwnerFacts, euid: u32) -> Option<String> {
    if facts.mode() & libc::S_IFMT != libc::S_IFDIR {
        return Some("it is not a directory".into());
    }
    if facts.uid() != euid && facts.uid() != ROOT {
        return Some(format!("it is owned by uid {}, neither lab's uid {euid} nor root", facts.uid()));
    }
    if facts.mode() & 0o022 != 0 && facts.mode() & libc::S_ISVTX == 0 {
        return Some(format!(
            "group or others may write it and it is not sticky (mode {:04o}): they could replace what is in it",
            facts.mode() & 0o7777
        ));
    }
    None
}

/// One of lab's own directories or files in its home (or the home itself): the right
/// kind, never a symlink, lab's user's. Its mode lab sets itself.
pub fn own_entry(facts: &impl OwnerFacts, kind: Kind, euid: u32) -> Option<String> {
    match fsutil::untrusted(facts, kind, euid) {
        Some(why) if why.starts_with("it is writable") => None,
        other => other,
    }
}

/// An operator's file lab loads (`lab.toml`, a component, `providers/`): lab's user's
/// or root's, writable by nobody else.
pub fn operator_file(facts: &impl OwnerFacts, kind: Kind, euid: u32) -> Option<String> {
    let owner = if facts.uid() == ROOT { euid } else { facts.uid() };
    fsutil::untrusted(&Stat { uid: owner, mode: facts.mode() }, kind, euid)
}

/// Check the way to lab's home `home` (absolute; it may not exist yet) and the home
/// itself when it exists. The error names the path and what is wrong with it.
pub fn check_home(home: &Path) -> Result<(), String> {
    let euid = fsutil::euid();
    let bad = |p: &Path, why: String| format!("{} cannot hold lab's home: {why}", p.display());
    // Symlinks on the given path: only lab's user's or root's.
    let mut prefix = PathBuf::new();
    for comp in home.components() {
        prefix.push(comp);
        match std::fs::symlink_metadata(&prefix) {
            Ok(m) if m.file_type().is_symlink() && OwnerFacts::uid(&m) != euid && OwnerFacts::uid(&m) != ROOT => {
                return Err(bad(&prefix, format!("it is a symlink owned by uid {}", OwnerFacts::uid(&m))));
            }
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => break,
            Err(e) => return Err(bad(&prefix, e.to_string())),
        }
    }
    // The real path: the home if it exists, else its nearest existing ancestor.
    let existing = home.ancestors().find(|p| p.exists()).unwrap_or(Path::new("/"));
    let real = std::fs::canonicalize(existing).map_err(|e| bad(existing, e.to_string()))?;
    let home_exists = existing == home;
    for dir in real.ancestors() {
        let m = std::fs::metadata(dir).map_err(|e| bad(dir, e.to_string()))?;
        let why = if home_exists && dir == real { own_entry(&m, Kind::Dir, euid) } else { chain_dir(&m, euid) };
        if let Some(why) = why {
            return Err(bad(dir, why));
        }
    }
    Ok(())
}

/// Check one of lab's own entries in its home, if it exists (`lstat`: a symlink is
/// refused, not followed).
pub fn check_own(path: &Path, kind: Kind) -> Result<(), String> {
    match std::fs::symlink_metadata(path) {
        Ok(m) => match own_entry(&m, kind, fsutil::euid()) {
            Some(why) => Err(format!("{}: {why}; lab keeps its state only in its own files", path.display())),
            None => Ok(()),
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(format!("{}: {e}", path.display())),
    }
}

/// Check an operator's file or directory lab is about to load, if it exists (a
/// symlink is followed: what counts is the file it reaches).
pub fn check_operator(path: &Path, kind: Kind) -> Result<(), String> {
    match std::fs::metadata(path) {
        Ok(m) => match operator_file(&m, kind, fsutil::euid()) {
            Some(why) => Err(format!(
                "{}: {why}; another user could change what lab loads (fix it with chmod go-w, or chown)",
                path.display()
            )),
            None => Ok(()),
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(format!("{}: {e}", path.display())),
    }
}

/// The most bytes of an operator's file lab reads ([`read_operator`]).
pub const OPERATOR_FILE_MAX: u64 = 512 * 1024 * 1024;

/// Read an operator's file lab loads (a provider component), checked as it is read: it
/// is opened once (a symlink followed, never blocking on a FIFO); the opened file must
/// be a regular file of lab's user or root that nobody else may write
/// ([`operator_file`]), and every folder on its real path must be out of other users'
/// reach as the home's are ([`chain_dir`]: a symlink into a shared folder leads to a
/// file anyone there could swap). The bytes come from the descriptor checked, so a file
/// replaced after the check is never what is read.
pub fn read_operator(path: &Path) -> Result<Vec<u8>, String> {
    use std::io::Read;
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    let euid = fsutil::euid();
    let bad = |why: String| format!("{}: {why}", path.display());
    let fix = "another user could change what lab loads (fix it with chmod go-w, or chown)";
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC | libc::O_NOCTTY)
        .open(path)
        .map_err(|e| bad(e.to_string()))?;
    let m = f.metadata().map_err(|e| bad(e.to_string()))?;
    if let Some(why) = operator_file(&m, Kind::File, euid) {
        return Err(bad(format!("{why}; {fix}")));
    }
    // Where the opened file really is: the path resolved, and proven the same file.
    let real = std::fs::canonicalize(path).map_err(|e| bad(e.to_string()))?;
    let at = std::fs::metadata(&real).map_err(|e| bad(e.to_string()))?;
    if (at.dev(), at.ino()) != (m.dev(), m.ino()) {
        return Err(bad("it changed while lab read it; it is read again on the next change".into()));
    }
    for dir in real.ancestors().skip(1) {
        let dm = std::fs::metadata(dir).map_err(|e| bad(format!("{}: {e}", dir.display())))?;
        if let Some(why) = chain_dir(&dm, euid) {
            let via = if real == path { String::new() } else { format!(" (it leads to {})", real.display()) };
            return Err(bad(format!("its folder {}{via}: {why}; {fix}", dir.display())));
        }
    }
    if m.len() > OPERATOR_FILE_MAX {
        return Err(bad(format!("it is {} bytes, over lab's {OPERATOR_FILE_MAX}", m.len())));
    }
    let mut bytes = Vec::with_capacity(m.len() as usize);
    f.take(OPERATOR_FILE_MAX).read_to_end(&mut bytes).map_err(|e| bad(format!("reading it: {e}")))?;
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(uid: u32, mode: u32) -> Stat {
        Stat { uid, mode }
    }
    const DIR: u32 = libc::S_IFDIR;
    const REG: u32 = libc::S_IFREG;
    const LNK: u32 = libc::S_IFLNK;

    #[test]
    fn the_chain_to_the_home_is_root_s_or_lab_s_and_sticky_where_shared() {
        let me = 1000;
        assert_eq!(chain_dir(&f(0, DIR | 0o755), me), None, "/home");
        assert_eq!(chain_dir(&f(me, DIR | 0o700), me), None, "~");
        assert_eq!(chain_dir(&f(0, DIR | 0o1777), me), None, "/tmp: sticky");
        assert!(chain_dir(&f(0, DIR | 0o777), me).unwrap().contains("not sticky"));
        assert!(chain_dir(&f(me, DIR | 0o775), me).unwrap().contains("mode 0775"));
        assert!(chain_dir(&f(1001, DIR | 0o755), me).unwrap().contains("uid 1001"));
        assert!(chain_dir(&f(me, REG | 0o600), me).is_some());
    }

    #[test]
    fn lab_s_own_entries_are_its_own_real_files() {
        let me = 1000;
        assert_eq!(own_entry(&f(me, DIR | 0o700), Kind::Dir, me), None);
        assert_eq!(own_entry(&f(me, DIR | 0o777), Kind::Dir, me), None, "lab fixes the mode itself");
        assert!(own_entry(&f(me, LNK | 0o777), Kind::Dir, me).unwrap().contains("symlink"));
        assert!(own_entry(&f(0, DIR | 0o700), Kind::Dir, me).unwrap().contains("uid 0"));
        assert!(own_entry(&f(1001, REG | 0o600), Kind::File, me).unwrap().contains("uid 1001"));
    }

    #[test]
    fn operator_files_are_writable_by_their_owner_only() {
        let me = 1000;
        assert_eq!(operator_file(&f(me, REG | 0o644), Kind::File, me), None);
        assert_eq!(operator_file(&f(0, REG | 0o644), Kind::File, me), None, "installed by root");
        assert!(operator_file(&f(me, REG | 0o666), Kind::File, me).unwrap().contains("writable"));
        assert!(operator_file(&f(0, REG | 0o664), Kind::File, me).unwrap().contains("writable"));
        assert!(operator_file(&f(1001, REG | 0o644), Kind::File, me).unwrap().contains("uid 1001"));
        assert_eq!(operator_file(&f(0, REG | 0o600), Kind::File, 0), None, "root's own");
    }

    #[test]
    fn an_operator_s_file_is_read_only_from_folders_nobody_else_may_write() {
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir().unwrap();
        let own = d.path().join("own");
        std::fs::create_dir(&own).unwrap();
        std::fs::write(own.join("a.wasm"), b"bytes").unwrap();
        assert_eq!(read_operator(&own.join("a.wasm")).unwrap(), b"bytes");
        // Through a symlink to a safe place: read.
        std::os::unix::fs::symlink(own.join("a.wasm"), d.path().join("link.wasm")).unwrap();
        assert_eq!(read_operator(&d.path().join("link.wasm")).unwrap(), b"bytes");
        // Into a shared folder that is not sticky: refused, the folder named.
        let shared = d.path().join("shared");
        std::fs::create_dir(&shared).unwrap();
        std::fs::write(shared.join("b.wasm"), b"theirs").unwrap();
        std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o777)).unwrap();
        std::os::unix::fs::symlink(shared.join("b.wasm"), d.path().join("b.wasm")).unwrap();
        let e = read_operator(&d.path().join("b.wasm")).unwrap_err();
        assert!(e.contains(&format!("its folder {}", shared.display())) && e.contains("not sticky"), "{e}");
        // A FIFO is refused without blocking.
        let fifo = own.join("f.wasm");
        let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: mkfifo on a path this test made.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        assert!(read_operator(&fifo).unwrap_err().contains("a special file"));
        std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o700)).unwrap();
    }

    #[test]
    fn the_walk_refuses_a_shared_non_sticky_parent_and_a_foreign_symlink() {
        let d = tempfile::tempdir().unwrap();
        assert_eq!(check_home(&d.path().join("h")), Ok(()), "not there yet: its parents are checked");
        std::fs::create_dir(d.path().join("h")).unwrap();
        assert_eq!(check_home(&d.path().join("h")), Ok(()));
        let shared = d.path().join("shared");
        std::fs::create_dir(&shared).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o777)).unwrap();
        let err = check_home(&shared.join("h")).unwrap_err();
        assert!(err.contains("shared cannot hold lab's home") && err.contains("not sticky"), "{err}");
        // Through a symlink of lab's own user: what counts is where it leads.
        std::os::unix::fs::symlink(d.path().join("h"), d.path().join("link")).unwrap();
        assert_eq!(check_home(&d.path().join("link")), Ok(()));
        std::os::unix::fs::symlink(&shared, d.path().join("to-shared")).unwrap();
        assert!(check_home(&d.path().join("to-shared/h")).unwrap_err().contains("not sticky"));
        std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o700)).unwrap();
    }
}
