//! What a runner follows for lab serve: a run's transcript (new bytes, by offset), its
//! spool and marker (their content whenever it changes), and its terminal session
//! (gone: the run ended). Polled every [`POLL`]: cheap for the handful of runs one
//! machine holds, and bounded.

use crate::hosts::protocol::{HookFile, Up};
use crate::paths::RunFiles;
use crate::tmux::Tmux;
use base64::Engine as _;
use std::io::{Read, Seek, SeekFrom};
use std::path::PathBuf;
use std::time::Duration;
use tokio::sync::mpsc::UnboundedSender;

/// How often files are looked at.
pub const POLL: Duration = Duration::from_millis(20);
/// How often the session is looked for.
pub const SESSION_EVERY: u32 = 25;
/// The most transcript bytes one frame carries (base64 makes it 4/3 of this).
pub const CHUNK: usize = 256 << 10;
/// The largest hook file sent up (bigger ones are not a prompt lab shows).
pub const HOOK_FILE_MAX: u64 = 512 << 10;

/// One run being followed.
pub struct Watch {
    pub run: String,
    pub target: String,
    pub transcript: Option<PathBuf>,
    pub offset: u64,
    pub files: RunFiles,
}

/// New bytes of `path` from `offset`, at most [`CHUNK`] (none: nothing new, or no file).
pub fn read_from(path: &std::path::Path, offset: u64) -> Option<Vec<u8>> {
    let mut f = std::fs::File::open(path).ok()?;
    let len = f.metadata().ok()?.len();
    if len <= offset {
        return None;
    }
    f.seek(SeekFrom::Start(offset)).ok()?;
    let mut buf = Vec::new();
    f.take(CHUNK as u64).read_to_end(&mut buf).ok()?;
    (!buf.is_empty()).then_some(buf)
}

/// A hook file's content now (None: absent, or too big / not text to be a prompt).
fn hook_file(path: &std::path::Path) -> Option<String> {
    let meta = std::fs::metadata(path).ok()?;
    if meta.len() > HOOK_FILE_MAX {
        return None;
    }
    std::fs::read_to_string(path).ok()
}

/// Send what the transcript holds past `w.offset` (false: nobody listens any more).
fn send_transcript(w: &mut Watch, out: &UnboundedSender<Up>) -> bool {
    let Some(t) = &w.transcript else { return true };
    while let Some(bytes) = read_from(t, w.offset) {
        let data = base64::engine::general_purpose::STANDARD.encode(&bytes);
        if out.send(Up::Transcript { run: w.run.clone(), offset: w.offset, data }).is_err() {
            return false;
        }
        w.offset += bytes.len() as u64;
    }
    true
}

/// Follow `w` until its session is gone (then say so) or the task is aborted.
pub async fn follow(mut w: Watch, tmux: Tmux, out: UnboundedSender<Up>) {
    let mut last: [Option<Option<String>>; 2] = [None, None];
    let mut n: u32 = 0;
    loop {
        if !send_transcript(&mut w, &out) {
            return;
        }
        for (i, (file, path)) in
            [(HookFile::Spool, &w.files.spool), (HookFile::Marker, &w.files.marker)].into_iter().enumerate()
        {
            let now = hook_file(path);
            if last[i].as_ref() != Some(&now) {
                if out.send(Up::RunFile { run: w.run.clone(), file, content: now.clone() }).is_err() {
                    return;
                }
                last[i] = Some(now);
            }
        }
        if n.is_multiple_of(SESSION_EVERY) {
            let (tmux, target) = (tmux.clone(), w.target.clone());
            let alive = tokio::task::spawn_blocking(move || tmux.has_session(&target)).await.unwrap_or(true);
            if !alive {
                // What the agent wrote last, then the end.
                send_transcript(&mut w, &out);
                let _ = out.send(Up::Ended { run: w.run.clone() });
                return;
            }
        }
        n = n.wrapping_add(1);
        tokio::time::sleep(POLL).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_what_is_new_in_chunks() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("t");
        assert_eq!(read_from(&p, 0), None, "no file yet");
        std::fs::write(&p, b"ab\ncd\n").unwrap();
        assert_eq!(read_from(&p, 0).unwrap(), b"ab\ncd\n");
        assert_eq!(read_from(&p, 3).unwrap(), b"cd\n");
        assert_eq!(read_from(&p, 6), None);
        std::fs::write(&p, vec![b'x'; CHUNK + 5]).unwrap();
        assert_eq!(read_from(&p, 0).unwrap().len(), CHUNK);
        assert_eq!(read_from(&p, CHUNK as u64).unwrap().len(), 5);
    }
}
