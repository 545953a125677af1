//! What a runner follows for lab serve: a run's transcript (new bytes, by offset), its
//! spool, marker and session info (their content whenever it changes), and its terminal session
//! (gone: the run ended). A change in the folders of those files wakes the run's
//! follower at once (one inotify watcher for all of the runner's runs, [`Wakes`]);
//! it also looks every [`BACKSTOP`] (a folder that did not exist yet, a lost event),
//! or every [`POLL`] where files cannot be watched. The session is looked for every
//! [`SESSION_EVERY`].

use crate::machines::hosts::protocol::{HookFile, Up};
use crate::machines::tmux::Tmux;
use crate::store::paths::RunFiles;
use base64::Engine as _;
use std::collections::HashMap;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};
use tokio::sync::mpsc::UnboundedSender;
use tokio::sync::Notify;

/// How often files are looked at where they cannot be watched.
pub const POLL: Duration = Duration::from_millis(20);
/// How often files are looked at anyway while they are watched.
pub const BACKSTOP: Duration = Duration::from_millis(250);
/// How often the session is looked for.
pub const SESSION_EVERY: Duration = Duration::from_millis(500);
/// The most transcript bytes one frame carries (base64 makes it 4/3 of this).
pub const CHUNK: usize = 256 << 10;
/// The largest hook file sent up (bigger ones are not a prompt lab shows).
pub const HOOK_FILE_MAX: u64 = 512 << 10;

/// One inotify watcher for every run a runner follows: a change in a watched folder
/// wakes the followers that asked for it. Cloned freely.
#[derive(Clone)]
pub struct Wakes(Arc<WakesInner>);

struct WakesInner {
    /// None: files cannot be watched here (no inotify, or its limits reached).
    watcher: Mutex<Option<notify::RecommendedWatcher>>,
    /// Watched folders and whom a change in each wakes.
    dirs: Mutex<HashMap<PathBuf, Vec<Weak<Notify>>>>,
}

impl Default for Wakes {
    fn default() -> Self {
        Wakes::new()
    }
}

impl Wakes {
    pub fn new() -> Wakes {
        Wakes(Arc::new_cyclic(|me: &Weak<WakesInner>| {
            let me = me.clone();
            let watcher = notify::recommended_watcher(move |ev: notify::Result<notify::Event>| {
                if let Some(me) = me.upgrade() {
                    me.changed(ev);
                }
            })
            .map_err(|e| tracing::warn!(error = %e, "cannot watch files; the runner polls them"))
            .ok();
            WakesInner { watcher: Mutex::new(watcher), dirs: Mutex::default() }
        }))
    }

    /// Wake `who` when something in `dir` changes. Whether it will (false: no such
    /// folder yet, or files cannot be watched here).
    pub fn watch(&self, dir: &Path, who: &Arc<Notify>) -> bool {
        use notify::Watcher;
        let subscribe = |subs: &mut Vec<Weak<Notify>>| {
            subs.retain(|w| w.strong_count() > 0);
            if !subs.iter().any(|w| w.as_ptr() == Arc::as_ptr(who)) {
                subs.push(Arc::downgrade(who));
            }
        };
        if let Some(subs) = self.0.dirs.lock().unwrap().get_mut(dir) {
            subscribe(subs);
            return true;
        }
        // Not under the folder map's lock: adding a watch waits on the watcher's thread,
        // which takes that lock to deliver a change (waiting there for it would deadlock).
        {
            let mut watcher = self.0.watcher.lock().unwrap();
            let Some(w) = watcher.as_mut() else { return false };
            if !dir.is_dir() || w.watch(dir, notify::RecursiveMode::NonRecursive).is_err() {
                return false;
            }
        }
        subscribe(self.0.dirs.lock().unwrap().entry(dir.to_path_buf()).or_default());
        true
    }
}

impl WakesInner {
    fn changed(&self, ev: notify::Result<notify::Event>) {
        let dirs = self.dirs.lock().unwrap();
        let wake = |subs: &Vec<Weak<Notify>>| subs.iter().filter_map(Weak::upgrade).for_each(|n| n.notify_one());
        match ev {
            Ok(ev) if !ev.need_rescan() => {
                for p in &ev.paths {
                    if let Some(subs) = p.parent().and_then(|d| dirs.get(d)) {
                        wake(subs);
                    }
                }
            }
            // Events were lost: everyone looks again.
            _ => dirs.values().for_each(wake),
        }
    }
}

/// One run being followed.
pub struct Watch {
    pub run: String,
    pub target: String,
    pub transcript: Option<PathBuf>,
    pub offset: u64,
    pub files: RunFiles,
    /// A sandboxed run's egress ledger, sent up as it changes (None: no sandbox).
    pub ledger: Option<PathBuf>,
    /// Why its transcript is no longer followed (said once in the log).
    pub refused: Option<String>,
}

/// What reading a transcript from an offset found.
#[derive(Debug, PartialEq, Eq)]
pub enum Chunk {
    /// New bytes, at most [`CHUNK`].
    Bytes(Vec<u8>),
    /// Nothing new (or no file yet).
    Nothing,
    /// Not the agent's transcript to follow: not a regular file of its own (a symlink,
    /// a FIFO, a kernel file), or a hole where the next bytes would be (a sparse file:
    /// an agent appending its lines never leaves one). Never read.
    Refused(String),
}

/// New bytes of `path` from `offset`: opened as the agent's side's files are
/// ([`crate::store::fsutil::open_untrusted`]: no symlink followed, never blocking, a regular
/// file not of the kernel's).
pub fn read_from(path: &std::path::Path, offset: u64) -> Chunk {
    let mut f = match crate::store::fsutil::open_untrusted(path) {
        Ok(Some(f)) => f,
        Ok(None) => return Chunk::Nothing,
        Err(e) => return Chunk::Refused(e.to_string()),
    };
    let Ok(len) = f.metadata().map(|m| m.len()) else { return Chunk::Nothing };
    if len <= offset {
        return Chunk::Nothing;
    }
    if let Some(data) = seek(&f, offset, libc::SEEK_DATA) {
        if data != offset {
            return Chunk::Refused(format!("a hole of {} bytes at {offset} (a sparse file)", data - offset));
        }
    }
    // Up to the next hole (the file's end when it has none).
    let data_end = seek(&f, offset, libc::SEEK_HOLE).unwrap_or(len).clamp(offset, len);
    if f.seek(SeekFrom::Start(offset)).is_err() {
        return Chunk::Nothing;
    }
    let mut buf = Vec::new();
    let take = (data_end - offset).min(CHUNK as u64);
    if (&mut f).take(take).read_to_end(&mut buf).is_err() || buf.is_empty() {
        return Chunk::Nothing;
    }
    Chunk::Bytes(buf)
}

/// Where the file's next data (`SEEK_DATA`) or hole (`SEEK_HOLE`) is from `offset`:
/// its end when there is none; None: the file system cannot say.
fn seek(f: &std::fs::File, offset: u64, whence: i32) -> Option<u64> {
    use std::os::fd::AsRawFd;
    let at = i64::try_from(offset).ok()?;
    // SAFETY: an open descriptor; the result is checked.
    let r = unsafe { libc::lseek(f.as_raw_fd(), at, whence) };
    if r >= 0 {
        return Some(r as u64);
    }
    match std::io::Error::last_os_error().raw_os_error() {
        Some(libc::ENXIO) => f.metadata().ok().map(|m| m.len()),
        _ => None,
    }
}

/// A hook file's content now (None: absent, or not a regular file of the agent's,
/// too big or not text to be a prompt): read as [`read_from`] opens a file.
fn hook_file(path: &std::path::Path) -> Option<String> {
    let bytes = crate::store::fsutil::read_untrusted(path, HOOK_FILE_MAX as usize).ok()??;
    String::from_utf8(bytes).ok()
}

/// Send what the transcript holds past `w.offset` (false: nobody listens any more).
fn send_transcript(w: &mut Watch, out: &UnboundedSender<Up>) -> bool {
    let Some(t) = &w.transcript else { return true };
    if w.refused.is_some() {
        return true;
    }
    loop {
        match read_from(t, w.offset) {
            Chunk::Bytes(bytes) => {
                let data = base64::engine::general_purpose::STANDARD.encode(&bytes);
                if out.send(Up::Transcript { run: w.run.clone(), offset: w.offset, data }).is_err() {
                    return false;
                }
                w.offset += bytes.len() as u64;
            }
            Chunk::Nothing => return true,
            Chunk::Refused(why) => {
                tracing::warn!(run = %w.run, transcript = %t.display(), %why, "the run's transcript is not followed any more");
                w.refused = Some(why);
                return true;
            }
        }
    }
}

/// One look at the run's files: its transcript's new bytes and each hook file that
/// changed since `last`, sent up (false: nobody listens any more). Blocking reads.
fn look(w: &mut Watch, last: &mut [Option<Option<String>>; 4], out: &UnboundedSender<Up>) -> bool {
    if !send_transcript(w, out) {
        return false;
    }
    let files = [
        (HookFile::Spool, Some(&w.files.spool)),
        (HookFile::Marker, Some(&w.files.marker)),
        (HookFile::Session, Some(&w.files.session)),
        (HookFile::Ledger, w.ledger.as_ref()),
    ];
    for (i, (file, path)) in files.into_iter().enumerate() {
        let Some(path) = path else { continue };
        let now = hook_file(path);
        if last[i].as_ref() != Some(&now) {
            tracing::debug!(run = %w.run, ?file, present = now.is_some(), "a hook file changed; sent up");
            if out.send(Up::RunFile { run: w.run.clone(), file, content: now.clone() }).is_err() {
                return false;
            }
            last[i] = Some(now);
        }
    }
    true
}

/// Follow `w` until its session is gone (then say so) or the task is aborted.
pub async fn follow(mut w: Watch, tmux: Tmux, wakes: Wakes, out: UnboundedSender<Up>) {
    let mut last: [Option<Option<String>>; 4] = [None, None, None, None];
    let woken = Arc::new(Notify::new());
    let mut session_looked: Option<Instant> = None;
    loop {
        // The folders (again, until they exist): the run's hook files' and its transcript's.
        let dirs = [
            w.files.spool.parent(),
            w.transcript.as_deref().and_then(Path::parent),
            w.ledger.as_deref().and_then(Path::parent),
        ];
        let watched = dirs.into_iter().flatten().all(|d| wakes.watch(d, &woken));
        // The reads off the async workers: each is bounded and never blocks, but a
        // large transcript takes a while.
        let sent = out.clone();
        let Ok((back, seen, listening)) = tokio::task::spawn_blocking(move || {
            let listening = look(&mut w, &mut last, &sent);
            (w, last, listening)
        })
        .await
        else {
            return;
        };
        (w, last) = (back, seen);
        if !listening {
            return;
        }
        if session_looked.is_none_or(|t| t.elapsed() >= SESSION_EVERY) {
            session_looked = Some(Instant::now());
            let (tmux, target) = (tmux.clone(), w.target.clone());
            let alive = tokio::task::spawn_blocking(move || tmux.has_session(&target)).await.unwrap_or(true);
            if !alive {
                // What the agent wrote last, then the end.
                send_transcript(&mut w, &out);
                let _ = out.send(Up::Ended { run: w.run.clone() });
                return;
            }
        }
        let wait = if watched { BACKSTOP.min(SESSION_EVERY) } else { POLL };
        let _ = tokio::time::timeout(wait, woken.notified()).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_change_in_a_watched_folder_wakes_whoever_watches_it_and_only_them() {
        let d = tempfile::tempdir().unwrap();
        let (a, b) = (d.path().join("a"), d.path().join("b"));
        let wakes = Wakes::new();
        let (one, two) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
        assert!(!wakes.watch(&a, &one), "no such folder yet");
        std::fs::create_dir(&a).unwrap();
        std::fs::create_dir(&b).unwrap();
        assert!(wakes.watch(&a, &one));
        assert!(wakes.watch(&a, &one), "again: the same");
        assert!(wakes.watch(&b, &two));
        std::fs::write(a.join("spool.json"), b"{}").unwrap();
        tokio::time::timeout(Duration::from_secs(5), one.notified()).await.expect("woken by the change");
        assert!(
            tokio::time::timeout(Duration::from_millis(200), two.notified()).await.is_err(),
            "a change elsewhere does not wake"
        );
        drop(one);
        std::fs::write(b.join("t.jsonl"), b"x").unwrap();
        tokio::time::timeout(Duration::from_secs(5), two.notified()).await.expect("woken");
    }

    /// Watching a new folder while changes elsewhere are being delivered: the watcher's
    /// thread (which takes the folder map to wake) and the one adding a folder (which
    /// waits on that thread) must not wait on each other.
    #[test]
    fn a_folder_is_added_while_changes_are_delivered() {
        let d = tempfile::tempdir().unwrap();
        let busy = d.path().join("busy");
        std::fs::create_dir(&busy).unwrap();
        let wakes = Wakes::new();
        let who = Arc::new(Notify::new());
        assert!(wakes.watch(&busy, &who));
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let writer = {
            let (busy, stop) = (busy.clone(), stop.clone());
            std::thread::spawn(move || {
                for i in 0..100_000u32 {
                    if stop.load(std::sync::atomic::Ordering::Relaxed) {
                        break;
                    }
                    std::fs::write(busy.join(format!("f{}", i % 8)), i.to_le_bytes()).unwrap();
                }
            })
        };
        let (done, finished) = std::sync::mpsc::channel();
        let (root, adder_wakes, adder_who) = (d.path().to_path_buf(), wakes.clone(), who.clone());
        std::thread::spawn(move || {
            for i in 0..300 {
                let dir = root.join(format!("new{i}"));
                std::fs::create_dir(&dir).unwrap();
                assert!(adder_wakes.watch(&dir, &adder_who));
            }
            let _ = done.send(());
        });
        let r = finished.recv_timeout(Duration::from_secs(20));
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        writer.join().unwrap();
        // (On failure the adder thread stays stuck; the test process ends anyway.)
        assert!(r.is_ok(), "adding folders got stuck while changes were delivered");
    }

    #[test]
    fn reads_what_is_new_in_chunks() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("t");
        let bytes = |r: Chunk| match r {
            Chunk::Bytes(b) => b,
            other => panic!("{other:?}"),
        };
        assert_eq!(read_from(&p, 0), Chunk::Nothing, "no file yet");
        std::fs::write(&p, b"ab\ncd\n").unwrap();
        assert_eq!(bytes(read_from(&p, 0)), b"ab\ncd\n");
        assert_eq!(bytes(read_from(&p, 3)), b"cd\n");
        assert_eq!(read_from(&p, 6), Chunk::Nothing);
        std::fs::write(&p, vec![b'x'; CHUNK + 5]).unwrap();
        assert_eq!(bytes(read_from(&p, 0)).len(), CHUNK);
        assert_eq!(bytes(read_from(&p, CHUNK as u64)).len(), 5);
    }

    #[test]
    fn what_is_not_the_agent_s_own_file_is_never_read() {
        let d = tempfile::tempdir().unwrap();
        let refused = |p: &Path| matches!(read_from(p, 0), Chunk::Refused(_));
        let link = d.path().join("environ");
        std::os::unix::fs::symlink("/proc/self/environ", &link).unwrap();
        assert!(refused(&link), "a symlink");
        assert_eq!(hook_file(&link), None);
        assert!(refused(Path::new("/proc/self/environ")), "a kernel file");
        let fifo = d.path().join("fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        assert!(refused(&fifo), "a FIFO, without blocking");
        assert_eq!(hook_file(&fifo), None);
        // A sparse transcript: 1 GiB of hole after a line.
        let sparse = d.path().join("sparse.jsonl");
        let f = std::fs::File::create(&sparse).unwrap();
        std::io::Write::write_all(&mut &f, b"{}\n").unwrap();
        f.set_len(1 << 30).unwrap();
        match read_from(&sparse, 0) {
            // The data before the hole (at most the file system's block after it).
            Chunk::Bytes(b) => assert!(b.starts_with(b"{}\n") && b.len() <= CHUNK, "{}", b.len()),
            other => panic!("{other:?}"),
        }
        assert!(matches!(read_from(&sparse, 1 << 20), Chunk::Refused(_)), "the hole is never sent");
    }
}
