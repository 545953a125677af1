//! The audit log: every operator action — who (a device, or the token's holder), what,
//! on which run, and whether lab applied it or refused it and why — appended as one
//! JSON line to `<home>/audit.jsonl` (0600, in the 0700 home), rotated by size into
//! `audit.jsonl.1` … `.4`. Only appended to: nothing lab does rewrites an entry.
//! `GET /audit` and `lab audit` read it back ([`Audit::read`]), with the refusals below.
//!
//! What a caller without a credential contributes (a refused `POST /login`) can neither
//! wash the operators' entries out nor fill the log: it goes to a file of its own,
//! `audit.anonymous.jsonl` (rotated the same way), its reason and detail cut
//! ([`REASON_KEPT`], [`DETAIL_KEPT`]), at most [`STRANGER_PER_WINDOW`] entries per
//! source per [`STRANGER_WINDOW`] ([`Strangers`]); the rest are counted, and one entry
//! says how many ("and 1,204 more like it") when the window ends.

use crate::store::fsutil;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::HashMap;
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

/// The size past which the file is rotated.
pub const ROTATE_AT: u64 = 4 * 1024 * 1024;
/// How many rotated files are kept (`.1` newest … `.4` oldest).
pub const KEEP: usize = 4;
/// The most entries one read returns.
pub const MAX_LIMIT: usize = 5000;
/// The longest text an entry's detail keeps of an operator's message (the rest is
/// counted, not kept).
pub const TEXT_KEPT: usize = 200;
/// The most characters of an entry's reason (and run id) kept.
pub const REASON_KEPT: usize = 300;
/// The most bytes of a caller-without-credential's detail kept (else only its size).
pub const DETAIL_KEPT: usize = 512;
/// Full entries of refusals from one source per window, at most.
pub const STRANGER_PER_WINDOW: u32 = 5;
/// The window.
pub const STRANGER_WINDOW: Duration = Duration::from_secs(60);
/// Sources followed one by one; past this many, new ones share one count.
pub const STRANGER_SOURCES: usize = 256;

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
    /// The refusals of callers without a credential (module docs).
    anonymous: PathBuf,
    /// One writer at a time in this process (another process — the CLI — takes the
    /// file's lock too).
    writing: std::sync::Mutex<()>,
    strangers: std::sync::Mutex<Strangers>,
}

impl Audit {
    pub fn new(home: &Path) -> Audit {
        let home = crate::store::paths::Home::new(home.to_path_buf());
        Audit {
            file: home.audit_file(),
            anonymous: home.anonymous_audit_file(),
            writing: Default::default(),
            strangers: Default::default(),
        }
    }

    /// Append `e`. A failure is logged, never the caller's: an action is not undone
    /// because its record could not be written (lab's log says so).
    pub fn append(&self, e: &Entry) {
        if let Err(err) = self.try_append(&self.file, e) {
            tracing::error!(error = %err, action = %e.action, "the audit log could not be written");
        }
    }

    /// Log a refusal of a caller without a credential, from `source` (its address), by
    /// the module's rules: cut, in its own file, at most so many per source and window.
    pub fn refused_anonymously(&self, e: Entry, source: &str) {
        let e = Entry { detail: bounded_detail(e.detail), ..e };
        let (summaries, write) =
            self.strangers.lock().unwrap_or_else(|p| p.into_inner()).admit(source, Instant::now(), &e);
        self.append_anonymous(summaries.iter().chain(write.then_some(&e)));
    }

    /// Write the counts of the windows that have ended (lab serve calls this every
    /// window; `all`: every count, at a stop).
    pub fn sweep(&self, all: bool) {
        let now = Instant::now();
        let summaries = {
            let mut s = self.strangers.lock().unwrap_or_else(|p| p.into_inner());
            if all {
                s.flush()
            } else {
                s.due(now)
            }
        };
        self.append_anonymous(summaries.iter());
    }

    fn append_anonymous<'a>(&self, entries: impl Iterator<Item = &'a Entry>) {
        for e in entries {
            if let Err(err) = self.try_append(&self.anonymous, e) {
                tracing::error!(error = %err, action = %e.action, "the audit log could not be written");
            }
        }
    }

    fn try_append(&self, file: &Path, e: &Entry) -> std::io::Result<()> {
        let _one = self.writing.lock().unwrap_or_else(|p| p.into_inner());
        let mut line = serde_json::to_vec(e).map_err(std::io::Error::other)?;
        line.push(b'\n');
        let mut f = fsutil::private_file(file)?;
        let _lock = Flock::exclusive(&f)?;
        if f.metadata()?.len() + line.len() as u64 > ROTATE_AT && f.metadata()?.len() > 0 {
            rotate(file)?;
            drop(_lock);
            f = fsutil::private_file(file)?;
            let _lock = Flock::exclusive(&f)?;
            return f.write_all(&line);
        }
        f.write_all(&line)
    }

    /// The entries `filter` wants, oldest first: the newest `limit` of them, the
    /// operators' and the refusals of callers without a credential together. Lines that
    /// are not entries (a torn write) are skipped.
    pub fn read(&self, filter: &Filter) -> std::io::Result<Vec<Entry>> {
        let limit = filter.limit.unwrap_or(500).clamp(1, MAX_LIMIT);
        let mut all = read_files(&self.file, filter, limit)?;
        all.extend(read_files(&self.anonymous, filter, limit)?);
        // Oldest first by time (RFC 3339, one width: text order is time order); the
        // operators' first at a tie.
        all.sort_by(|a, b| a.t.cmp(&b.t));
        let skip = all.len().saturating_sub(limit);
        Ok(all.split_off(skip))
    }
}

/// The newest `limit` entries `filter` wants in `file` and its rotations, oldest first.
fn read_files(file: &Path, filter: &Filter, limit: usize) -> std::io::Result<Vec<Entry>> {
    let mut out = std::collections::VecDeque::new();
    let mut files: Vec<PathBuf> = (1..=KEEP).rev().map(|n| rotated(file, n)).collect();
    files.push(file.to_path_buf());
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

/// One source's window of refusals.
#[derive(Debug, Clone)]
struct Window {
    start: Instant,
    written: u32,
    /// Held back: how many, when the first and the last were, and the last itself.
    more: u64,
    first: String,
    last: Option<Entry>,
}

/// The rate of refusals of callers without a credential, per source: the first
/// [`STRANGER_PER_WINDOW`] of a [`STRANGER_WINDOW`] are written, the rest counted; a
/// window's count becomes one entry when it ends ([`Strangers::due`]) or when the
/// source's next refusal opens a new one. At most [`STRANGER_SOURCES`] are followed.
#[derive(Debug, Default)]
pub struct Strangers {
    sources: HashMap<String, Window>,
}

/// The key of the sources past [`STRANGER_SOURCES`].
const OTHERS: &str = "other sources";

impl Strangers {
    /// A refusal `e` from `source` at `now`: the counts to write first (a window that
    /// ended), and whether `e` is written.
    pub fn admit(&mut self, source: &str, now: Instant, e: &Entry) -> (Vec<Entry>, bool) {
        let summaries = self.due(now);
        let key =
            if self.sources.contains_key(source) || self.sources.len() < STRANGER_SOURCES { source } else { OTHERS };
        let w = self.sources.entry(key.to_string()).or_insert_with(|| Window {
            start: now,
            written: 0,
            more: 0,
            first: String::new(),
            last: None,
        });
        if w.written < STRANGER_PER_WINDOW {
            w.written += 1;
            return (summaries, true);
        }
        if w.more == 0 {
            w.first = e.t.clone();
        }
        w.more += 1;
        w.last = Some(e.clone());
        (summaries, false)
    }

    /// The counts of the windows that ended by `now` (their sources forgotten).
    pub fn due(&mut self, now: Instant) -> Vec<Entry> {
        let ended: Vec<String> = self
            .sources
            .iter()
            .filter(|(_, w)| now.duration_since(w.start) >= STRANGER_WINDOW)
            .map(|(k, _)| k.clone())
            .collect();
        let mut out: Vec<Entry> =
            ended.into_iter().filter_map(|k| self.sources.remove(&k).and_then(|w| summary(&k, w))).collect();
        out.sort_by(|a, b| a.t.cmp(&b.t));
        out
    }

    /// Every count now (lab stops).
    pub fn flush(&mut self) -> Vec<Entry> {
        let mut out: Vec<Entry> = self.sources.drain().filter_map(|(k, w)| summary(&k, w)).collect();
        out.sort_by(|a, b| a.t.cmp(&b.t));
        out
    }
}

/// The one entry that stands for a window's held-back refusals (none if none were).
fn summary(source: &str, w: Window) -> Option<Entry> {
    let last = w.last?;
    let reason = format!(
        "and {} more like it from {source} ({} to {}); the last: {}",
        thousands(w.more),
        w.first,
        last.t,
        last.reason.as_deref().unwrap_or("refused")
    );
    Some(Entry {
        t: crate::util::time::now_rfc3339(),
        detail: serde_json::json!({"more_like_it": w.more, "source": source, "first": w.first, "last": last.t}),
        reason: Some(cut(&reason, REASON_KEPT * 2)),
        ..last
    })
}

/// `1204` as `1,204`.
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// `text`'s first `n` characters, and how long it was when that is not all of it.
pub fn cut(text: &str, n: usize) -> String {
    let count = text.chars().count();
    if count <= n {
        return text.to_string();
    }
    let kept: String = text.chars().take(n).collect();
    format!("{kept}… ({count} characters)")
}

/// A caller-without-credential's detail: kept when small, else only its size.
fn bounded_detail(detail: Value) -> Value {
    let size = serde_json::to_vec(&detail).map_or(0, |v| v.len());
    if size <= DETAIL_KEPT {
        detail
    } else {
        serde_json::json!({"bytes": size})
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
        run_id: run_id.map(|r| cut(&r, REASON_KEPT)),
        detail,
        outcome: if refused.is_some() { Outcome::Refused } else { Outcome::Applied },
        reason: refused.map(|r| cut(&r, REASON_KEPT)),
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
    use serde_json::json;
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
    fn refusals_of_strangers_are_written_a_few_per_source_and_window_and_the_rest_counted() {
        let mut s = Strangers::default();
        let t0 = Instant::now();
        let refusal = |i: u32| Entry {
            t: format!("2026-12-07T10:00:{i:02}.000Z"),
            ..entry(Actor::Other("nobody".into()), "device.login", None, Value::Null, Some(format!("bad_request: {i}")))
        };
        let mut written = 0;
        for i in 0..40 {
            let (summaries, write) = s.admit("10.0.0.1", t0 + Duration::from_millis(i as u64), &refusal(i));
            assert!(summaries.is_empty());
            written += write as u32;
        }
        assert_eq!(written, STRANGER_PER_WINDOW);
        // Another source has its own share.
        assert!(s.admit("10.0.0.2", t0, &refusal(0)).1);
        assert!(s.due(t0 + Duration::from_secs(1)).is_empty(), "the window is not over");
        // The window over: one entry says how many more there were, and the source's
        // next refusal is written again.
        let later = t0 + STRANGER_WINDOW + Duration::from_secs(1);
        let (summaries, write) = s.admit("10.0.0.1", later, &refusal(41));
        assert!(write);
        assert_eq!(summaries.len(), 1, "10.0.0.2 held none back: no count for it");
        let c = &summaries[0];
        assert_eq!(c.detail["more_like_it"], 35);
        assert_eq!(c.detail["first"], "2026-12-07T10:00:05.000Z");
        assert_eq!(c.detail["last"], "2026-12-07T10:00:39.000Z");
        let why = c.reason.as_deref().unwrap();
        assert!(why.starts_with("and 35 more like it from 10.0.0.1") && why.ends_with("bad_request: 39"), "{why}");
        assert_eq!((c.action.as_str(), c.outcome), ("device.login", Outcome::Refused));
        // Past the sources followed, new ones share one count.
        let mut s = Strangers::default();
        for n in 0..STRANGER_SOURCES + 10 {
            for _ in 0..=STRANGER_PER_WINDOW {
                s.admit(&format!("10.1.{}.{}", n / 256, n % 256), t0, &refusal(1));
            }
        }
        assert_eq!(s.sources.len(), STRANGER_SOURCES + 1);
        let all = s.flush();
        let others = all.iter().find(|e| e.detail["source"] == OTHERS).unwrap();
        assert_eq!(others.detail["more_like_it"], 10 * (STRANGER_PER_WINDOW as u64 + 1) - STRANGER_PER_WINDOW as u64);
        assert_eq!(thousands(1204), "1,204");
        assert_eq!(thousands(1_000_000), "1,000,000");
        assert_eq!(thousands(12), "12");
    }

    #[test]
    fn a_stranger_s_refusal_is_cut_kept_apart_and_read_with_the_rest() {
        let d = tempfile::tempdir().unwrap();
        let a = Audit::new(d.path());
        a.append(&e("run.start", Some("r1"), "2026-12-05T10:00:00.000Z"));
        let huge = "x".repeat(500 * 1024);
        let nobody = Actor::Other("nobody".into());
        for i in 0..30 {
            let mut r =
                entry(nobody.clone(), "device.login", None, json!({"name": huge}), Some(format!("{i}: {huge}")));
            r.t = format!("2026-12-05T11:00:{i:02}.000Z");
            a.refused_anonymously(r, "127.0.0.1");
        }
        a.append(&e("run.stop", Some("r1"), "2026-12-05T12:00:00.000Z"));
        a.sweep(true);
        let size = |p: &str| std::fs::metadata(d.path().join(p)).map_or(0, |m| m.len());
        assert!(size("audit.anonymous.jsonl") < 8 * 1024, "{}", size("audit.anonymous.jsonl"));
        assert!(!d.path().join("audit.anonymous.jsonl.1").exists());
        let all = a.read(&Filter::default()).unwrap();
        let actions: Vec<(&str, Outcome)> = all.iter().map(|e| (e.action.as_str(), e.outcome)).collect();
        assert_eq!(actions.first(), Some(&("run.start", Outcome::Applied)), "{actions:?}");
        assert_eq!(actions.iter().filter(|(a, _)| *a == "device.login").count(), STRANGER_PER_WINDOW as usize + 1);
        assert!(all.iter().all(|e| e.reason.as_deref().is_none_or(|r| r.chars().count() < 2 * REASON_KEPT + 40)));
        assert_eq!(all[1].detail, json!({"bytes": 500 * 1024 + 11}));
        assert_eq!(all.last().unwrap().detail["more_like_it"], 25);
        assert_eq!(all.iter().filter(|e| e.action == "run.stop").count(), 1);
        let mode = std::fs::metadata(d.path().join("audit.anonymous.jsonl")).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }

    #[test]
    fn a_message_is_kept_by_its_start_and_length() {
        let long = "é".repeat(TEXT_KEPT + 5);
        let v = text_detail(&long);
        assert_eq!(v["chars"], TEXT_KEPT + 5);
        assert_eq!(v["text"].as_str().unwrap().chars().count(), TEXT_KEPT);
    }
}
