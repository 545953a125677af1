//! The audit log: every operator action — who (a device, or the token's holder), what,
//! on which run, and whether lab applied it or refused it and why — appended as one
//! JSON line to `<home>/audit.jsonl` (0600, in the 0700 home), rotated by size into
//! `audit.jsonl.1` … `.4`. Only appended to: nothing lab does rewrites an entry.
//! `GET /audit` and `lab audit` read it back ([`Audit::read`]).

use crate::store::fsutil;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// The size past which the file is rotated.
pub const ROTATE_AT: u64 = 4 * 1024 * 1024;
/// How many rotated files are kept (`.1` newest … `.4` oldest).
pub const KEEP: usize = 4;
/// The most entries one read returns.
pub const MAX_LIMIT: usize = 5000;
/// The longest text an entry's detail keeps of an operator's message (the rest is
/// counted, not kept).
pub const TEXT_KEPT: usize = 200;

/// Who did it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Actor {
    /// A logged-in device.
    Device { device_id: String, device_name: String },
    /// `"bearer"`: a caller with lab's token itself (a script, the CLI); `"anyone"`: a
    /// `lab serve --no-token` caller (anyone on this machine).
    Other(String),
}

impl Actor {
    pub fn bearer() -> Actor {
        Actor::Other("bearer".into())
    }
    pub fn anyone() -> Actor {
        Actor::Other("anyone".into())
    }
}

/// What came of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    Applied,
    Refused,
}

/// One line of the log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    /// When (RFC 3339, UTC, milliseconds).
    pub t: String,
    pub actor: Actor,
    /// `run.start`, `dialog.answer`, `terminal.take`, … (docs/api.md lists them).
    pub action: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    /// What was asked (the option chosen, the message's start, …): an object.
    #[serde(default)]
    pub detail: Value,
    pub outcome: Outcome,
    /// Why it was refused (lab's error: `code: message`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// Which entries a read wants.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    pub run: Option<String>,
    pub from: Option<SystemTime>,
    pub to: Option<SystemTime>,
    /// The newest this many (default 500, at most [`MAX_LIMIT`]).
    pub limit: Option<usize>,
}

impl Filter {
    /// A filter from what a caller typed (`GET /audit`'s query, `lab audit`'s flags):
    /// times in RFC 3339, a limit of 1 to [`MAX_LIMIT`]; else why not, each name after
    /// `prefix` as the caller spells it (`from`, `--from`).
    pub fn parse(
        run: Option<String>,
        from: Option<String>,
        to: Option<String>,
        limit: Option<usize>,
        prefix: &str,
    ) -> Result<Filter, String> {
        let time = |s: Option<String>, name: &str| {
            s.map(|s| {
                humantime::parse_rfc3339_weak(&s).map_err(|_| {
                    format!("{prefix}{name} is not an RFC 3339 time (got {s:?}; e.g. 2026-12-05T10:00:00Z)")
                })
            })
            .transpose()
        };
        if limit.is_some_and(|l| l == 0 || l > MAX_LIMIT) {
            return Err(format!("{prefix}limit is 1 to {MAX_LIMIT}"));
        }
        Ok(Filter { run, from: time(from, "from")?, to: time(to, "to")?, limit })
    }

    /// Whether `e` is wanted (its time unreadable: only without a time bound).
    pub fn wants(&self, e: &Entry) -> bool {
        if self.run.as_deref().is_some_and(|r| e.run_id.as_deref() != Some(r)) {
            return false;
        }
        if self.from.is_none() && self.to.is_none() {
            return true;
        }
        let Ok(t) = humantime::parse_rfc3339(&e.t) else { return false };
        self.from.is_none_or(|f| t >= f) && self.to.is_none_or(|to| t < to)
    }
}

/// The log of one lab home.
pub struct Audit {
    file: PathBuf,
    /// One writer at a time in this process (another process — the CLI — takes the
    /// file's lock too).
    writing: std::sync::Mutex<()>,
}

impl Audit {
    pub fn new(home: &Path) -> Audit {
        Audit { file: crate::store::paths::Home::new(home.to_path_buf()).audit_file(), writing: Default::default() }
    }

    /// Append `e`. A failure is logged, never the caller's: an action is not undone
    /// because its record could not be written (lab's log says so).
    pub fn append(&self, e: &Entry) {
        if let Err(err) = self.try_append(e) {
            tracing::error!(error = %err, action = %e.action, "the audit log could not be written");
        }
    }

    fn try_append(&self, e: &Entry) -> std::io::Result<()> {
        let _one = self.writing.lock().unwrap_or_else(|p| p.into_inner());
        let mut line = serde_json::to_vec(e).map_err(std::io::Error::other)?;
        line.push(b'\n');
        let mut f = fsutil::private_file(&self.file)?;
        let _lock = Flock::exclusive(&f)?;
        if f.metadata()?.len() + line.len() as u64 > ROTATE_AT && f.metadata()?.len() > 0 {
            rotate(&self.file)?;
            drop(_lock);
            f = fsutil::private_file(&self.file)?;
            let _lock = Flock::exclusive(&f)?;
            return f.write_all(&line);
        }
        f.write_all(&line)
    }

    /// The entries `filter` wants, oldest first: the newest `limit` of them. Lines that
    /// are not entries (a torn write) are skipped.
    pub fn read(&self, filter: &Filter) -> std::io::Result<Vec<Entry>> {
        let limit = filter.limit.unwrap_or(500).clamp(1, MAX_LIMIT);
        let mut out = std::collections::VecDeque::new();
        let mut files: Vec<PathBuf> = (1..=KEEP).rev().map(|n| rotated(&self.file, n)).collect();
        files.push(self.file.clone());
        for path in files {
            let Some(f) = fsutil::open_untrusted(&path)? else { continue };
            for line in std::io::BufReader::new(f).split(b'\n') {
                let Ok(e) = serde_json::from_slice::<Entry>(&line?) else { continue };
                if filter.wants(&e) {
                    if out.len() == limit {
                        out.pop_front();
                    }
                    out.push_back(e);
                }
            }
        }
        Ok(out.into())
    }
}

/// `audit.jsonl.<n>`.
fn rotated(file: &Path, n: usize) -> PathBuf {
    let mut s = file.as_os_str().to_owned();
    s.push(format!(".{n}"));
    PathBuf::from(s)
}

/// Shift `.1`… up by one (the oldest goes) and make the current file `.1`.
fn rotate(file: &Path) -> std::io::Result<()> {
    fsutil::remove_if_exists(&rotated(file, KEEP))?;
    for n in (1..KEEP).rev() {
        match std::fs::rename(rotated(file, n), rotated(file, n + 1)) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
    }
    std::fs::rename(file, rotated(file, 1))
}

/// An exclusive `flock` on an open file, until dropped.
struct Flock(std::os::fd::RawFd);

impl Flock {
    fn exclusive(f: &std::fs::File) -> std::io::Result<Flock> {
        use std::os::fd::AsRawFd;
        let fd = f.as_raw_fd();
        // SAFETY: flock on a descriptor this process holds open; no memory is touched.
        if unsafe { libc::flock(fd, libc::LOCK_EX) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(Flock(fd))
    }
}

impl Drop for Flock {
    fn drop(&mut self) {
        // SAFETY: as above; the file outlives the guard (it is declared before it).
        unsafe { libc::flock(self.0, libc::LOCK_UN) };
    }
}

/// An entry of `action` by `actor` now.
pub fn entry(actor: Actor, action: &str, run_id: Option<String>, detail: Value, refused: Option<String>) -> Entry {
    Entry {
        t: crate::util::time::now_rfc3339(),
        actor,
        action: action.to_string(),
        run_id,
        detail,
        outcome: if refused.is_some() { Outcome::Refused } else { Outcome::Applied },
        reason: refused,
    }
}

/// An operator's text as the log keeps it: its first [`TEXT_KEPT`] characters and how
/// long it was.
pub fn text_detail(text: &str) -> Value {
    let kept: String = text.chars().take(TEXT_KEPT).collect();
    serde_json::json!({"text": kept, "chars": text.chars().count()})
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn e(action: &str, run: Option<&str>, t: &str) -> Entry {
        Entry { t: t.into(), ..entry(Actor::bearer(), action, run.map(str::to_string), Value::Null, None) }
    }

    #[test]
    fn entries_are_appended_private_read_back_filtered_and_limited() {
        let d = tempfile::tempdir().unwrap();
        let a = Audit::new(d.path());
        a.append(&e("run.start", Some("r1"), "2026-12-05T10:00:00.000Z"));
        let dev = Actor::Device { device_id: "d1".into(), device_name: "Phone".into() };
        a.append(&Entry { actor: dev.clone(), ..e("dialog.answer", Some("r2"), "2026-12-05T11:00:00.000Z") });
        a.append(&entry(Actor::anyone(), "run.stop", Some("r1".into()), Value::Null, Some("run_ended: gone".into())));
        let mode = std::fs::metadata(d.path().join("audit.jsonl")).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let all = a.read(&Filter::default()).unwrap();
        assert_eq!(
            all.iter().map(|e| e.action.as_str()).collect::<Vec<_>>(),
            ["run.start", "dialog.answer", "run.stop"]
        );
        assert_eq!(all[1].actor, dev);
        assert_eq!((all[2].outcome, all[2].reason.as_deref()), (Outcome::Refused, Some("run_ended: gone")));
        let line = std::fs::read_to_string(d.path().join("audit.jsonl")).unwrap();
        assert!(line.contains(r#""actor":{"device_id":"d1","device_name":"Phone"}"#), "{line}");
        assert!(line.contains(r#""actor":"bearer""#) && line.contains(r#""outcome":"refused""#), "{line}");
        let r1 = a.read(&Filter { run: Some("r1".into()), ..Default::default() }).unwrap();
        assert_eq!(r1.len(), 2);
        let from = humantime::parse_rfc3339("2026-12-05T10:30:00Z").unwrap();
        let to = humantime::parse_rfc3339("2026-12-05T12:00:00Z").unwrap();
        let window = a.read(&Filter { from: Some(from), to: Some(to), ..Default::default() }).unwrap();
        assert_eq!(window.iter().map(|e| e.action.as_str()).collect::<Vec<_>>(), ["dialog.answer"]);
        let newest = a.read(&Filter { limit: Some(1), ..Default::default() }).unwrap();
        assert_eq!(newest[0].action, "run.stop");
        // A torn line is skipped, not an error.
        std::fs::OpenOptions::new()
            .append(true)
            .open(d.path().join("audit.jsonl"))
            .unwrap()
            .write_all(b"{\"t\":")
            .unwrap();
        a.append(&e("merge", None, "2026-12-05T12:00:00.000Z"));
        assert_eq!(a.read(&Filter::default()).unwrap().len(), 3, "the torn line and the one glued to it are skipped");
    }

    #[test]
    fn the_file_rotates_by_size_and_reads_span_the_rotations() {
        let d = tempfile::tempdir().unwrap();
        let a = Audit::new(d.path());
        let big = "x".repeat(600 * 1024);
        for i in 0..40 {
            a.append(&Entry { detail: serde_json::json!({"i": i, "pad": big}), ..e("message.send", None, "t") });
        }
        for n in 1..=KEEP {
            assert!(rotated(&d.path().join("audit.jsonl"), n).exists(), ".{n}");
            let mode = std::fs::metadata(rotated(&d.path().join("audit.jsonl"), n)).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        assert!(!rotated(&d.path().join("audit.jsonl"), KEEP + 1).exists());
        let read = a.read(&Filter { limit: Some(MAX_LIMIT), ..Default::default() }).unwrap();
        let is: Vec<i64> = read.iter().map(|e| e.detail["i"].as_i64().unwrap()).collect();
        assert_eq!(is.last(), Some(&39), "the newest is in the current file");
        assert!(is.windows(2).all(|w| w[1] == w[0] + 1), "oldest first, none lost between files: {is:?}");
        assert!(is.len() < 40, "the oldest rotated out");
    }

    #[test]
    fn a_message_is_kept_by_its_start_and_length() {
        let long = "é".repeat(TEXT_KEPT + 5);
        let v = text_detail(&long);
        assert_eq!(v["chars"], TEXT_KEPT + 5);
        assert_eq!(v["text"].as_str().unwrap().chars().count(), TEXT_KEPT);
    }
}
