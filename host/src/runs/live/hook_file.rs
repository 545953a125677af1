//! The hook-file reader: one of the files an agent's hooks write for lab (the spool,
//! the blocked marker, the session info). It is looked at by `stat` and read only when
//! it changed, as untrusted input ([`fsutil::read_untrusted`]: no symlink, FIFO or
//! device, at most what `lab hook` ever writes). What the bytes mean is the
//! provider's; what follows from them, the tailer's.

use crate::runs::live::transcript::{sig_of, FileSig};
use crate::store::fsutil;
use crate::store::paths::RunId;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// What one [`HookFile::look`] found.
#[derive(Debug, PartialEq, Eq)]
pub enum Look {
    /// The same version as last time: nothing read.
    Same,
    /// No file (it was removed, or never written).
    Gone,
    /// A file lab does not read (a symlink, a FIFO, too big: said in the log).
    Refused,
    /// A new version: its bytes, when it was written, and its mtime in nanoseconds (a
    /// version's identity: [`crate::runs::live::spool::identify`]).
    Written { bytes: Vec<u8>, written: SystemTime, mtime_ns: i128 },
}

#[derive(Debug)]
pub struct HookFile {
    path: PathBuf,
    /// What the log calls it ("spool", "blocked marker", "session info").
    what: &'static str,
    /// The version last looked at.
    sig: Option<FileSig>,
}

impl HookFile {
    pub fn new(path: PathBuf, what: &'static str) -> HookFile {
        HookFile { path, what, sig: None }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether the file changed since it was last looked at (a `stat`, nothing read).
    pub fn changed_on_disk(&self) -> bool {
        sig_of(&self.path).map(|(s, _)| s) != self.sig
    }

    /// Look at the file; `again` reads it even when it did not change.
    pub fn look(&mut self, run: &RunId, again: bool) -> Look {
        let now = sig_of(&self.path);
        if now.map(|(s, _)| s) == self.sig && !again {
            return Look::Same;
        }
        self.sig = now.map(|(s, _)| s);
        let Some((sig, written)) = now else { return Look::Gone };
        match fsutil::read_untrusted(&self.path, crate::agents::hook::MAX_PAYLOAD) {
            Ok(Some(bytes)) => Look::Written { bytes, written, mtime_ns: sig.mtime_ns },
            Ok(None) => Look::Gone,
            Err(e) => {
                tracing::warn!(run = %run, file = %self.path.display(), error = %e, "ignoring the {} file", self.what);
                Look::Refused
            }
        }
    }

    /// Delete the file if it is still the version last looked at (a newer one, written
    /// meanwhile, is another prompt's and stays). Whether it was that version.
    pub fn remove_if_unchanged(&mut self, run: &RunId) -> bool {
        if sig_of(&self.path).map(|(s, _)| s) != self.sig {
            return false;
        }
        if let Err(e) = fsutil::remove_if_exists(&self.path) {
            tracing::warn!(run = %run, error = %e, "could not delete a stale {}", self.what);
        }
        self.sig = None;
        true
    }

    /// Take the file's current version as looked at, without reading it (tests of the
    /// backstop poll).
    #[cfg(test)]
    pub(in crate::runs) fn seen(&mut self) {
        self.sig = sig_of(&self.path).map(|(s, _)| s);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hook_file_is_read_once_per_version_and_removed_only_as_seen() {
        let d = tempfile::tempdir().unwrap();
        let run = RunId::parse("r-1").unwrap();
        let mut f = HookFile::new(d.path().join("r-1.spool.json"), "spool");
        assert_eq!(f.look(&run, false), Look::Same, "none, as before");
        assert_eq!(f.look(&run, true), Look::Gone, "looked at again: none");
        std::fs::write(f.path(), b"{\"a\":1}").unwrap();
        assert!(f.changed_on_disk());
        assert!(matches!(f.look(&run, false), Look::Written { ref bytes, .. } if bytes == b"{\"a\":1}"));
        assert_eq!(f.look(&run, false), Look::Same);
        assert!(matches!(f.look(&run, true), Look::Written { .. }), "read again when asked");
        assert!(f.remove_if_unchanged(&run));
        assert!(!f.path().exists());
        std::fs::write(f.path(), b"{}").unwrap();
        assert!(!f.remove_if_unchanged(&run), "a version not looked at stays");
        assert!(f.path().exists());
        assert!(matches!(f.look(&run, false), Look::Written { .. }));
        std::fs::remove_file(f.path()).unwrap();
        assert_eq!(f.look(&run, false), Look::Gone, "removed by someone else");
        std::os::unix::fs::symlink("/etc/hostname", f.path()).unwrap();
        assert_eq!(f.look(&run, false), Look::Refused);
    }
}
