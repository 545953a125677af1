//! The transcript reader: follows one run's transcript incrementally. Only appended
//! bytes are read, at most [`MAX_CHUNK`] at a time; a partial last line waits (held,
//! never read again) for its newline; a line over [`MAX_LINE`] is skipped with one
//! warning; a truncated or replaced file starts over. What it gives is whole lines,
//! with where they start in the file and their first line number, for the provider to
//! parse ([`crate::runs::live::message_store::parse_chunk`]); what they mean is the tailer's.

use crate::store::fsutil;
use crate::store::paths::RunId;
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// Most transcript bytes read in one go (a chunk handed to the provider is this plus,
/// at most, the rest of one line).
pub const MAX_CHUNK: usize = 1 << 20;
/// Longest transcript line lab reads: a longer one is skipped with one warning (its
/// bytes are looked at once, never held).
pub const MAX_LINE: usize = 8 << 20;

/// One piece of what the transcript gave, in file order (see [`LineBuf::push`]).
#[derive(Debug, PartialEq, Eq)]
pub enum Piece {
    /// Whole lines, each ending in a newline: for the provider.
    Lines(Vec<u8>),
    /// Bytes of a line over [`MAX_LINE`], dropped unread; `start` says whether this is
    /// the first piece of that line (the one to warn about), `end` whether the line's
    /// newline is in it.
    Skipped { len: usize, start: bool, end: bool },
}

/// Complete lines out of the transcript's appended bytes, each byte looked at once: an
/// incomplete last line is kept here (at most `max_line` bytes) instead of being read
/// again, and a line that outgrows it is skipped to its newline.
#[derive(Debug)]
pub struct LineBuf {
    partial: Vec<u8>,
    skipping: bool,
    max_line: usize,
}

impl LineBuf {
    pub fn new(max_line: usize) -> LineBuf {
        LineBuf { partial: Vec::new(), skipping: false, max_line }
    }

    /// Bytes taken in but not given out yet (an incomplete line).
    pub fn held(&self) -> usize {
        self.partial.len()
    }

    pub fn clear(&mut self) {
        self.partial = Vec::new();
        self.skipping = false;
    }

    /// Take in the bytes that follow everything taken before; what they complete.
    pub fn push(&mut self, data: &[u8]) -> Vec<Piece> {
        fn flush(out: &mut Vec<Piece>, lines: &mut Vec<u8>) {
            if !lines.is_empty() {
                out.push(Piece::Lines(std::mem::take(lines)));
            }
        }
        let mut out = Vec::new();
        let mut lines = Vec::new();
        let mut rest = data;
        while let Some(nl) = rest.iter().position(|b| *b == b'\n') {
            let (line, tail) = rest.split_at(nl + 1);
            rest = tail;
            if self.skipping {
                flush(&mut out, &mut lines);
                out.push(Piece::Skipped { len: line.len(), start: false, end: true });
                self.skipping = false;
            } else if self.partial.len() + nl > self.max_line {
                flush(&mut out, &mut lines);
                out.push(Piece::Skipped { len: self.partial.len() + line.len(), start: true, end: true });
                self.partial = Vec::new();
            } else {
                lines.append(&mut self.partial);
                lines.extend_from_slice(line);
            }
        }
        flush(&mut out, &mut lines);
        if !rest.is_empty() {
            if self.skipping {
                out.push(Piece::Skipped { len: rest.len(), start: false, end: false });
            } else if self.partial.len() + rest.len() > self.max_line {
                out.push(Piece::Skipped { len: self.partial.len() + rest.len(), start: true, end: false });
                self.partial = Vec::new();
                self.skipping = true;
            } else {
                self.partial.extend_from_slice(rest);
            }
        }
        out
    }
}

/// Identity of a file version: a change in any part means "re-read it".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::runs) struct FileSig {
    pub ino: u64,
    pub len: u64,
    pub mtime_ns: i128,
}

pub(in crate::runs) fn sig_of(path: &Path) -> Option<(FileSig, SystemTime)> {
    let m = std::fs::metadata(path).ok()?;
    let mtime_ns = m.mtime() as i128 * 1_000_000_000 + m.mtime_nsec() as i128;
    Some((FileSig { ino: m.ino(), len: m.len(), mtime_ns }, m.modified().ok()?))
}

/// Read at most `max` bytes of the transcript from `offset` (opened as an untrusted
/// file: no symlink, FIFO or device). A missing file reads as nothing.
pub fn read_at_most(path: &Path, offset: u64, max: usize) -> std::io::Result<Vec<u8>> {
    let Some(mut f) = fsutil::open_untrusted(path)? else { return Ok(Vec::new()) };
    f.seek(SeekFrom::Start(offset))?;
    let mut buf = Vec::new();
    f.take(max as u64).read_to_end(&mut buf)?;
    Ok(buf)
}

/// Whole lines read from the transcript: bytes `at..at+bytes.len()`, the first of them
/// line `first_line` (0-based) of the file.
#[derive(Debug, PartialEq, Eq)]
pub struct Lines {
    pub at: u64,
    pub bytes: Vec<u8>,
    pub first_line: u64,
}

/// What one [`TranscriptReader::step`] found.
#[derive(Debug, PartialEq, Eq)]
pub enum Step {
    /// Nothing more to read now.
    Done,
    /// The file was truncated or replaced: what was taken from it is void, and the
    /// reader starts over from its first byte.
    Restarted,
    /// Whole lines, in file order (possibly none: only a held or skipped part).
    Read(Vec<Lines>),
}

/// Where a run's transcript has been read to.
#[derive(Debug)]
pub struct TranscriptReader {
    path: Option<PathBuf>,
    /// Where the next unconsumed byte is (`lines` holds what follows it up to the read
    /// position: an incomplete line).
    offset: u64,
    lines: LineBuf,
    lines_seen: u64,
    /// The file as it was when everything in it was taken in.
    sig: Option<FileSig>,
    /// The file as last seen by a `stat` (read or not: a partial last line).
    seen: Option<FileSig>,
    modified: Option<SystemTime>,
}

impl TranscriptReader {
    pub fn new(path: Option<PathBuf>) -> TranscriptReader {
        TranscriptReader {
            path,
            offset: 0,
            lines: LineBuf::new(MAX_LINE),
            lines_seen: 0,
            sig: None,
            seen: None,
            modified: None,
        }
    }

    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// The transcript is named now (by the session-info channel).
    pub fn set_path(&mut self, path: PathBuf) {
        self.path = Some(path);
    }

    /// When the transcript was last seen written.
    pub fn modified(&self) -> Option<SystemTime> {
        self.modified
    }

    /// Start over from the file's first byte.
    pub fn restart(&mut self) {
        self.offset = 0;
        self.lines.clear();
        self.lines_seen = 0;
        self.sig = None;
    }

    /// Whether the file has been looked at since this reader was made (it may not
    /// have existed then): false for a run found at start and never followed.
    pub fn looked(&self) -> bool {
        self.seen.is_some() || self.offset > 0
    }

    /// Whether the file changed since it was last looked at (a `stat`, nothing read).
    pub fn changed_on_disk(&self) -> bool {
        self.path.as_deref().is_some_and(|t| sig_of(t).map(|(s, _)| s) != self.seen)
    }

    /// Read what was appended since the last step (at most [`MAX_CHUNK`] bytes); call
    /// again until [`Step::Done`].
    pub fn step(&mut self, run: &RunId) -> Step {
        let Some(path) = self.path.clone() else { return Step::Done };
        let Some((sig, modified)) = sig_of(&path) else { return Step::Done };
        self.seen = Some(sig);
        if Some(sig) == self.sig {
            return Step::Done;
        }
        let read_pos = self.offset + self.lines.held() as u64;
        if sig.len < read_pos || self.sig.is_some_and(|s| s.ino != sig.ino) {
            tracing::warn!(run = %run, "transcript was truncated or replaced; re-reading it from the start");
            self.restart();
            return Step::Restarted;
        }
        let data = match read_at_most(&path, read_pos, MAX_CHUNK) {
            Ok(d) => d,
            Err(e) => {
                tracing::warn!(run = %run, error = %e, "cannot read the transcript");
                return Step::Done;
            }
        };
        self.modified = Some(modified);
        if data.is_empty() {
            // Everything there is was read (an incomplete last line is held).
            self.sig = (sig.len == read_pos).then_some(sig);
            return Step::Done;
        }
        let caught_up = read_pos + data.len() as u64 == sig.len;
        let mut out = Vec::new();
        for piece in self.lines.push(&data) {
            match piece {
                Piece::Lines(bytes) => {
                    let at = self.offset;
                    self.offset += bytes.len() as u64;
                    let first_line = self.lines_seen;
                    self.lines_seen += bytes.iter().filter(|b| **b == b'\n').count() as u64;
                    out.push(Lines { at, bytes, first_line });
                }
                Piece::Skipped { len, start, end } => {
                    if start {
                        tracing::warn!(
                            run = %run,
                            line = self.lines_seen,
                            max = MAX_LINE,
                            "skipping a transcript line over the length limit"
                        );
                    }
                    self.offset += len as u64;
                    if end {
                        self.lines_seen += 1;
                    }
                }
            }
        }
        if caught_up {
            self.sig = Some(sig);
        }
        Step::Read(out)
    }

    /// Mark the file as just looked at (tests of the backstop poll).
    #[cfg(test)]
    pub(in crate::runs) fn look(&mut self) {
        self.seen = self.path.as_deref().and_then(sig_of).map(|(s, _)| s);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_lines_come_out_an_incomplete_one_is_held_and_an_overlong_one_skipped() {
        let mut l = LineBuf::new(8);
        assert_eq!(l.push(b"one\ntwo\nthr"), [Piece::Lines(b"one\ntwo\n".to_vec())]);
        assert_eq!(l.held(), 3);
        assert_eq!(l.push(b"ee\n"), [Piece::Lines(b"three\n".to_vec())]);
        assert_eq!(l.held(), 0);
        // A line of 9 bytes: skipped whole, the lines around it kept.
        assert_eq!(
            l.push(b"a\n123456789\nb\n"),
            [
                Piece::Lines(b"a\n".to_vec()),
                Piece::Skipped { len: 10, start: true, end: true },
                Piece::Lines(b"b\n".to_vec())
            ]
        );
        // One that outgrows the limit before its newline: dropped as it comes, never held.
        assert_eq!(l.push(b"12345"), []);
        assert_eq!(l.push(b"6789"), [Piece::Skipped { len: 9, start: true, end: false }]);
        assert_eq!(l.held(), 0);
        assert_eq!(l.push(b"more"), [Piece::Skipped { len: 4, start: false, end: false }]);
        assert_eq!(
            l.push(b"x\nok\n"),
            [Piece::Skipped { len: 2, start: false, end: true }, Piece::Lines(b"ok\n".to_vec())]
        );
        // Exactly the limit is fine.
        assert_eq!(l.push(b"12345678\n"), [Piece::Lines(b"12345678\n".to_vec())]);
    }

    #[test]
    fn the_transcript_is_read_from_an_offset_at_most_a_chunk_at_a_time() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("t.jsonl");
        std::fs::write(&p, b"aaaa\nbbbb\n").unwrap();
        assert_eq!(read_at_most(&p, 0, 6).unwrap(), b"aaaa\nb");
        assert_eq!(read_at_most(&p, 5, 100).unwrap(), b"bbbb\n");
        assert_eq!(read_at_most(&d.path().join("missing"), 0, 10).unwrap(), b"");
        assert!(read_at_most(Path::new("/dev/zero"), 0, 10).is_err(), "a device is no transcript");
    }
}
