//! The mirror of a run on a host's transcript (`<home>/remote/<run>.jsonl`), bounded:
//! what a runner sends is hostile until checked, and a runner (or an agent there with a
//! sparse 100 GB transcript) must not fill lab serve's disk.
//!
//! - **The per-line rule of a local transcript**: the bytes of a line past
//!   [`MAX_LINE`] are not stored; the mirror keeps their place as a hole (a sparse
//!   file: no disk), so the mirror's length stays the host transcript's offset and the
//!   tailer skips the line as over-long, counted, as it does here.
//! - **A cap per run** (`[runs] host_transcript_max_mb`, default
//!   [`DEFAULT_MAX_MB`]) on the mirror's length, and **a free-space floor** on lab's
//!   disk (`[runs] host_transcript_min_free_mb`, default [`DEFAULT_MIN_FREE_MB`]): when
//!   one is reached the mirror stops growing, the run's view says why
//!   (`transcript_stopped`), and lab keeps serving. A later `lab serve` goes on from
//!   where the mirror ends if the reason is gone.

use crate::runs::live::transcript::MAX_LINE;
use crate::store::paths::RunId;
use std::collections::HashMap;
use std::ops::Range;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Mutex;

/// The default cap on a mirror's length, in MiB.
pub const DEFAULT_MAX_MB: u64 = 1024;
/// The default free space lab keeps on its disk, in MiB.
pub const DEFAULT_MIN_FREE_MB: u64 = 512;

/// Where a run's mirror stands.
#[derive(Debug, Clone, Default)]
struct Standing {
    /// Bytes of its unfinished last line (None: not read from the file yet).
    line: Option<u64>,
    /// Why it stopped growing.
    stopped: Option<String>,
}

/// What appending did.
#[derive(Debug, PartialEq, Eq)]
pub enum Appended {
    /// New bytes are in the mirror.
    Added,
    /// Nothing new (all of it was there, a gap, or the mirror stopped before).
    Nothing,
    /// The mirror stopped growing now, for this reason.
    Stopped(String),
}

/// Every remote run's mirror standing, and the limits.
pub struct Mirrors {
    max: u64,
    min_free: u64,
    runs: Mutex<HashMap<RunId, Standing>>,
}

impl Mirrors {
    /// Limits in MiB (None: the defaults).
    pub fn new(max_mb: Option<u64>, min_free_mb: Option<u64>) -> Mirrors {
        Mirrors {
            max: max_mb.unwrap_or(DEFAULT_MAX_MB).max(1).saturating_mul(1 << 20),
            min_free: min_free_mb.unwrap_or(DEFAULT_MIN_FREE_MB).saturating_mul(1 << 20),
            runs: Mutex::default(),
        }
    }

    /// Why run `id`'s mirror stopped growing (None: it has not).
    pub fn stopped(&self, id: &RunId) -> Option<String> {
        self.runs.lock().unwrap().get(id).and_then(|s| s.stopped.clone())
    }

    /// The run ended: its standing goes.
    pub fn forget(&self, id: &RunId) {
        self.runs.lock().unwrap().remove(id);
    }

    /// Append the part of `bytes` (which start at `offset` of the host's transcript)
    /// that `path` does not hold yet, within the limits. A chunk past the end (a gap)
    /// is dropped: the runner sends from where the mirror ends when it follows the run
    /// again.
    pub fn append(&self, id: &RunId, path: &Path, offset: u64, bytes: &[u8]) -> std::io::Result<Appended> {
        let mut runs = self.runs.lock().unwrap();
        let standing = runs.entry(id.clone()).or_default();
        if standing.stopped.is_some() {
            return Ok(Appended::Nothing);
        }
        let len = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
        if offset > len {
            tracing::warn!(file = %path.display(), offset, len, "a transcript chunk past the mirror's end; dropped");
            return Ok(Appended::Nothing);
        }
        let skip = (len - offset) as usize;
        if skip >= bytes.len() {
            return Ok(Appended::Nothing);
        }
        let new = &bytes[skip..];
        let why = if len + new.len() as u64 > self.max {
            Some(format!(
                "the transcript passed {} MiB, lab's cap for the mirror of a run on a host ([runs] \
host_transcript_max_mb): what the agent wrote after that is not shown",
                self.max >> 20
            ))
        } else {
            match free_space(path.parent().unwrap_or(Path::new("/"))) {
                Some(free) if free < self.min_free.saturating_add(new.len() as u64) => Some(format!(
                    "lab's disk has less than {} MiB free ([runs] host_transcript_min_free_mb): the transcript's \
mirror stopped growing; what the agent wrote after that is not shown",
                    self.min_free >> 20
                )),
                _ => None,
            }
        };
        if let Some(why) = why {
            tracing::warn!(run = %id, %why, "the mirror of a run's transcript stopped");
            standing.stopped = Some(why.clone());
            return Ok(Appended::Stopped(why));
        }
        let line = match standing.line {
            Some(l) => l,
            None => last_line_len(path, len)?,
        };
        let (stored, line, dropped) = plan(new, line, MAX_LINE as u64);
        let f = std::fs::OpenOptions::new().write(true).create(true).truncate(false).open(path)?;
        for r in &stored {
            f.write_all_at(&new[r.clone()], len + r.start as u64)?;
        }
        // A hole to the end where the last bytes were not stored.
        f.set_len(len + new.len() as u64)?;
        standing.line = Some(line);
        if dropped > 0 {
            tracing::warn!(run = %id, lines = dropped, max = MAX_LINE, "lines over the limit in a host's transcript; not stored");
        }
        Ok(Appended::Added)
    }
}

/// Which parts of `new` are stored, given `line` bytes of an unfinished line before it:
/// every byte of a line up to `max_line` and the newline that ends it; the bytes of a
/// line past `max_line` are left out (a hole). Also the unfinished line's length after
/// `new`, and how many over-long lines ended in it.
pub fn plan(new: &[u8], mut line: u64, max_line: u64) -> (Vec<Range<usize>>, u64, u64) {
    let mut stored: Vec<Range<usize>> = Vec::new();
    let mut dropped = 0;
    let mut keep = |r: Range<usize>| {
        if r.is_empty() {
            return;
        }
        match stored.last_mut() {
            Some(last) if last.end == r.start => last.end = r.end,
            _ => stored.push(r),
        }
    };
    let mut pos = 0;
    while pos < new.len() {
        let end = new[pos..].iter().position(|&b| b == b'\n').map_or(new.len(), |i| pos + i + 1);
        let ends_line = new[end - 1] == b'\n';
        let room = max_line.saturating_sub(line) as usize;
        keep(pos..end.min(pos + room));
        line += (end - pos) as u64;
        if ends_line {
            if line > max_line {
                dropped += 1;
                keep(end - 1..end);
            }
            line = 0;
        }
        pos = end;
    }
    (stored, line, dropped)
}

/// Bytes of the unfinished last line of the first `len` bytes of `path` (looked for in
/// at most its last `MAX_LINE + 1` bytes: a longer line is over-long either way).
fn last_line_len(path: &Path, len: u64) -> std::io::Result<u64> {
    let look = len.min(MAX_LINE as u64 + 1);
    if look == 0 {
        return Ok(0);
    }
    let f = std::fs::File::open(path)?;
    let mut tail = vec![0u8; look as usize];
    f.read_exact_at(&mut tail, len - look)?;
    Ok(match tail.iter().rposition(|&b| b == b'\n') {
        Some(i) => look - i as u64 - 1,
        None => look,
    })
}

/// Bytes free for lab on the file system of `dir` (None: cannot say).
fn free_space(dir: &Path) -> Option<u64> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes()).ok()?;
    // SAFETY: a valid C string and out-parameter; the result is checked.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return None;
    }
    #[allow(clippy::unnecessary_cast)] // the fields' types differ between targets
    Some(st.f_bavail as u64 * st.f_frsize as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    #[test]
    #[allow(clippy::single_range_in_vec_init)] // one stored part is what is meant
    fn lines_over_the_limit_are_left_out_but_their_newline_kept() {
        assert_eq!(plan(b"ab\ncd\n", 0, 4), (vec![0..6], 0, 0));
        // "abcdef" is over 4: its first 4 bytes and its newline stored, the rest a hole.
        assert_eq!(plan(b"abcdef\nx\n", 0, 4), (vec![0..4, 6..9], 0, 1));
        // An unfinished line carried over: 3 bytes before, 2 more fit.
        assert_eq!(plan(b"abcd", 3, 5), (vec![0..2], 7, 0));
        assert_eq!(plan(b"e\nok", 7, 5), (vec![1..4], 2, 1));
        assert_eq!(plan(b"", 2, 5), (vec![], 2, 0));
    }

    #[test]
    fn the_mirror_takes_each_byte_once_and_no_gaps() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("m.jsonl");
        let m = Mirrors::new(None, Some(0));
        let id = RunId::parse("r-1").unwrap();
        assert_eq!(m.append(&id, &p, 0, b"ab\n").unwrap(), Appended::Added);
        assert_eq!(m.append(&id, &p, 3, b"cd\n").unwrap(), Appended::Added);
        assert_eq!(m.append(&id, &p, 0, b"ab\n").unwrap(), Appended::Nothing, "sent again after a reconnect");
        assert_eq!(m.append(&id, &p, 4, b"d\nef\n").unwrap(), Appended::Added, "overlapping");
        assert_eq!(m.append(&id, &p, 99, b"x").unwrap(), Appended::Nothing, "a gap");
        assert_eq!(std::fs::read(&p).unwrap(), b"ab\ncd\nef\n");
    }

    #[test]
    fn an_over_long_line_takes_no_disk_and_the_cap_stops_the_mirror() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("m.jsonl");
        let m = Mirrors::new(Some(40), Some(0));
        let id = RunId::parse("r-1").unwrap();
        let mut at = 0u64;
        let send = |at: &mut u64, bytes: &[u8]| {
            let r = m.append(&id, &p, *at, bytes).unwrap();
            *at += bytes.len() as u64;
            r
        };
        assert_eq!(send(&mut at, b"{\"a\":1}\n"), Appended::Added);
        // 24 MiB of one line, in chunks: the first MAX_LINE bytes stored, the rest a hole.
        let chunk = vec![b'x'; 1 << 20];
        for _ in 0..24 {
            assert_eq!(send(&mut at, &chunk), Appended::Added);
        }
        assert_eq!(send(&mut at, b"\n{\"b\":2}\n"), Appended::Added);
        let meta = std::fs::metadata(&p).unwrap();
        assert_eq!(meta.len(), at, "the mirror's length is the transcript's offset");
        assert!(meta.blocks() * 512 < (MAX_LINE as u64) + (2 << 20), "{} bytes on disk", meta.blocks() * 512);
        let text = std::fs::read(&p).unwrap();
        assert!(text.ends_with(b"\n{\"b\":2}\n"));
        assert!(text.starts_with(b"{\"a\":1}\nxxx"));
        // Past 40 MiB: stopped, said once, nothing more written.
        for _ in 0..20 {
            send(&mut at, &chunk);
        }
        let why = m.stopped(&id).expect("stopped");
        assert!(why.contains("40 MiB") && why.contains("host_transcript_max_mb"), "{why}");
        assert!(std::fs::metadata(&p).unwrap().len() <= 40 << 20);
        assert_eq!(send(&mut at, b"more\n"), Appended::Nothing);
        // A mirror found after a restart goes on with its unfinished line's length.
        let again = Mirrors::new(Some(80), Some(0));
        let len = std::fs::metadata(&p).unwrap().len();
        assert_eq!(again.append(&id, &p, len, b"tail").unwrap(), Appended::Added);
    }

    #[test]
    fn the_free_space_floor_stops_the_mirror() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("m.jsonl");
        let m = Mirrors::new(None, Some(u64::MAX >> 21));
        let id = RunId::parse("r-1").unwrap();
        match m.append(&id, &p, 0, b"ab\n").unwrap() {
            Appended::Stopped(why) => assert!(why.contains("host_transcript_min_free_mb"), "{why}"),
            other => panic!("{other:?}"),
        }
        assert!(!p.exists() || std::fs::metadata(&p).unwrap().len() == 0);
    }
}
