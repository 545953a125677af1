//! The run registry: one record per run in an embedded database (redb) under lab's
//! home, so runs survive a restart of `lab serve`.
//!
//! Opening is careful, because a damaged file must give a clear error rather than a
//! panic (redb asserts on some damage) or, worse, a silently empty registry:
//! - a missing file is created (0600, initialised under a temp name, then renamed);
//! - an empty file or one without redb's header is refused;
//! - otherwise a private copy is opened first and checked (redb's integrity check
//!   and a full read, panics caught): damage is reported without touching the file;
//! - only then the file itself is opened (and read once, panics caught again).

use crate::store::fsutil;
use crate::store::paths::RunId;
use anyhow::{anyhow, bail, Context as _, Result};
use redb::{Database, ReadableTable, TableDefinition};
use serde::{Deserialize, Serialize};
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};

const RUNS: TableDefinition<'static, &str, &[u8]> = TableDefinition::new("runs");

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Active,
    Ended,
    /// The launch failed; `error` says why.
    Failed,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunRecord {
    pub id: RunId,
    pub provider: String,
    pub workdir: String,
    pub prompt: String,
    pub permission_mode: Option<String>,
    pub status: Status,
    pub created_at: String,
    pub ended_at: Option<String>,
    pub tmux_target: String,
    pub tmux_socket: String,
    pub session_id: Option<String>,
    pub transcript_path: Option<String>,
    pub dialog_hooker: bool,
    pub error: Option<String>,
    /// The run's own worktree (None: it runs in `workdir`).
    #[serde(default)]
    pub worktree: Option<crate::worktree::Worktree>,
    /// The host it runs on (`lab hosts`); None: this machine.
    #[serde(default)]
    pub host: Option<String>,
    /// On a host: its transcript's path there (`transcript_path` is lab's mirror).
    #[serde(default)]
    pub remote_transcript: Option<String>,
    /// The run it was forked from (`POST /runs/{id}/fork`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<RunId>,
    /// Why it ended, as lab saw it (the agent exited, the operator stopped it, its
    /// session was gone when lab serve started); cleared when it is resumed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_reason: Option<String>,
    /// Whether it goes on by itself once a usage limit its agent hit resets, and with
    /// what message (None: a run from before lab offered it, off).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resume_after_limit: Option<AutoResume>,
    /// The sandbox its agent runs in (`none`: none).
    #[serde(default, skip_serializing_if = "crate::sandbox::Kind::is_none")]
    pub sandbox: crate::sandbox::Kind,
    /// The operator turned answer rules off for it: every prompt waits for them.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub rules_off: bool,
}

/// A run's choice (its record keeps it; the default comes from lab.toml when the run
/// is made).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AutoResume {
    pub on: bool,
    /// The message it goes on with.
    pub prompt: String,
}

impl RunRecord {
    /// A run's record as it begins: active since `created_at`, in tmux session
    /// `lab-<id>`, every other fact unknown yet. Launch and the tests and benches that
    /// write histories start here and set the rest by struct update
    /// (`RunRecord { host: …, ..RunRecord::new(…) }`) or with [`RunRecord::ended`].
    pub fn new(id: RunId, provider: &str, workdir: &str, prompt: &str, created_at: &str) -> RunRecord {
        RunRecord {
            tmux_target: format!("lab-{id}"),
            id,
            provider: provider.to_string(),
            workdir: workdir.to_string(),
            prompt: prompt.to_string(),
            permission_mode: None,
            status: Status::Active,
            created_at: created_at.to_string(),
            ended_at: None,
            tmux_socket: String::new(),
            session_id: None,
            transcript_path: None,
            dialog_hooker: false,
            error: None,
            worktree: None,
            host: None,
            remote_transcript: None,
            parent: None,
            end_reason: None,
            resume_after_limit: None,
            sandbox: crate::sandbox::Kind::None,
            rules_off: false,
        }
    }

    /// The same record, ended at `at`.
    pub fn ended(self, at: &str) -> RunRecord {
        RunRecord { status: Status::Ended, ended_at: Some(at.to_string()), ..self }
    }

    /// [`RecordHead::may_rest`], of the whole record.
    pub fn may_rest(&self) -> bool {
        may_rest(self.status, self.worktree.as_ref().map(|w| w.discarded))
    }

    /// Where the agent runs: its worktree (at the workdir's place in it), else the workdir.
    pub fn agent_dir(&self) -> std::path::PathBuf {
        match &self.worktree {
            Some(wt) => wt.agent_dir(),
            None => std::path::PathBuf::from(&self.workdir),
        }
    }

    /// Take in what a run's live state learnt that its record keeps: the agent's
    /// session id and a transcript path it named late (each kept once known), and its
    /// end (an active run becomes ended at `now`). Whether anything changed.
    pub fn take_live_facts(
        &mut self,
        session_id: Option<&str>,
        transcript: Option<&Path>,
        ended: bool,
        now: impl FnOnce() -> String,
    ) -> bool {
        let mut changed = false;
        if let (None, Some(sid)) = (&self.session_id, session_id) {
            self.session_id = Some(sid.to_string());
            changed = true;
        }
        if let (None, Some(t)) = (&self.transcript_path, transcript) {
            self.transcript_path = Some(t.to_string_lossy().into_owned());
            changed = true;
        }
        if ended && self.status == Status::Active {
            self.status = Status::Ended;
            self.ended_at = Some(now());
            changed = true;
        }
        changed
    }

    /// Take in the transcript path on its host that a run there named late (kept once
    /// known). Whether it changed the record.
    pub fn take_remote_transcript(&mut self, named: Option<&str>) -> bool {
        match (&self.remote_transcript, named) {
            (None, Some(t)) if self.host.is_some() => {
                self.remote_transcript = Some(t.to_string());
                true
            }
            _ => false,
        }
    }
}

impl<'de> Deserialize<'de> for RunId {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        RunId::parse(&s).ok_or_else(|| serde::de::Error::custom(format!("invalid run id {s:?}")))
    }
}

/// What start-up reads of every record ([`Registry::sift`]): enough to tell an ended
/// run that may rest from one to follow, and to order the list.
#[derive(Debug, Clone, Deserialize)]
pub struct RecordHead {
    pub id: RunId,
    pub status: Status,
    pub created_at: String,
    #[serde(default)]
    worktree: Option<WorktreeHead>,
}

#[derive(Debug, Clone, Deserialize)]
struct WorktreeHead {
    #[serde(default)]
    discarded: bool,
}

impl RecordHead {
    /// Whether its run is over and has nothing left to watch: not active, and no
    /// worktree but a discarded one (a kept worktree's diff is watched).
    pub fn may_rest(&self) -> bool {
        may_rest(self.status, self.worktree.as_ref().map(|w| w.discarded))
    }
}

/// The rule of both `may_rest`: over, and no worktree but a discarded one (`discarded`:
/// None without a worktree).
fn may_rest(status: Status, discarded: Option<bool>) -> bool {
    status != Status::Active && discarded.unwrap_or(true)
}

/// The registry's in-memory page cache ([`redb::Builder::set_cache_size`]).
const REGISTRY_CACHE: usize = 4 << 20;

pub struct Registry {
    db: Database,
}

/// redb's file header starts with these bytes.
const REDB_MAGIC: [u8; 9] = [b'r', b'e', b'd', b'b', 0x1A, 0x0A, 0xA9, 0x0D, 0x0A];

/// What an existing registry file looks like before redb is let near it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileShape {
    Missing,
    Empty,
    NotRedb,
    Redb,
}

/// Classify a registry file from its length (None: missing) and first bytes.
pub fn shape(len: Option<u64>, head: &[u8]) -> FileShape {
    match len {
        None => FileShape::Missing,
        Some(0) => FileShape::Empty,
        Some(_) if head.starts_with(&REDB_MAGIC) => FileShape::Redb,
        Some(_) => FileShape::NotRedb,
    }
}

/// The error for a damaged registry: names the file and says what to do.
pub fn damaged(path: &Path, why: &str) -> anyhow::Error {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let aside = format!("{}.bak", path.display());
    anyhow!(
        "the run registry {name} is damaged ({why}): {path} was left as it is. Move it aside \
         (mv {p} {a}) and lab starts with an empty registry; runs in tmux keep going, but lab no \
         longer lists the old ones",
        path = path.display(),
        p = crate::util::shell::quote(&path.to_string_lossy()),
        a = crate::util::shell::quote(&aside),
    )
}

/// Run `f`, turning a panic into `Err(its message)`, without the default hook printing
/// a banner for it: redb asserts on some kinds of damage.
fn no_panic<T>(f: impl FnOnce() -> T) -> Result<T, String> {
    use std::sync::Arc;
    type Hook = Box<dyn Fn(&std::panic::PanicHookInfo<'_>) + Sync + Send + 'static>;
    let previous: Arc<Hook> = Arc::new(std::panic::take_hook());
    let me = std::thread::current().id();
    let others = previous.clone();
    std::panic::set_hook(Box::new(move |info| {
        if std::thread::current().id() != me {
            others(info)
        }
    }));
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    std::panic::set_hook(Box::new(move |info| previous(info)));
    result.map_err(|payload| {
        let msg = payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown panic".into());
        format!("redb stopped on an internal check: {msg}")
    })
}

/// Every key and value of the runs table, read once (a missing table is fine).
fn read_everything(db: &Database) -> Result<usize> {
    let tx = db.begin_read()?;
    let t = match tx.open_table(RUNS) {
        Ok(t) => t,
        Err(redb::TableError::TableDoesNotExist(_)) => return Ok(0),
        Err(e) => return Err(e.into()),
    };
    let mut n = 0;
    for entry in t.iter()? {
        let (k, v) = entry?;
        n += k.value().len() + v.value().len();
    }
    Ok(n)
}

/// Open a private copy of the registry and check it: redb's integrity check (which
/// may write, hence the copy) and a full read. The original is not touched.
/// `Ok(Some(why))`: the registry is damaged; `Err`: the copy could not be made.
fn check_copy(path: &Path, original: &mut std::fs::File) -> Result<Option<String>> {
    let copy = temp_sibling(path, "check");
    // One left by a lab killed mid-check (same pid, by chance) is not in the way.
    fsutil::remove_if_exists(&copy)?;
    let made = (|| -> std::io::Result<()> {
        let mut out = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(&copy)?;
        std::io::copy(original, &mut out)?;
        out.sync_all()
    })();
    if let Err(e) = made {
        let _ = fsutil::remove_if_exists(&copy);
        return Err(anyhow!("cannot check the run registry {}: copying it to {}: {e}", path.display(), copy.display()));
    }
    let verdict = no_panic(|| -> Result<()> {
        let mut db = Database::open(&copy).map_err(|e| anyhow!("{e}"))?;
        if !db.check_integrity().map_err(|e| anyhow!("{e}"))? {
            bail!("its integrity check failed (redb could only roll it back to an earlier commit)");
        }
        read_everything(&db)?;
        Ok(())
    });
    let _ = fsutil::remove_if_exists(&copy);
    Ok(match verdict {
        Ok(Ok(())) => None,
        Ok(Err(e)) => Some(format!("{e:#}")),
        Err(panic) => Some(panic),
    })
}

fn temp_sibling(path: &Path, what: &str) -> PathBuf {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    path.with_file_name(format!(".{name}.{what}.{}", std::process::id()))
}

/// A new, empty registry: initialised under a temp name, then renamed into place, so
/// a crash never leaves an empty file behind (which would be refused as damaged).
fn create_new(path: &Path) -> Result<()> {
    let tmp = temp_sibling(path, "new");
    let result = (|| -> Result<()> {
        let _ = fsutil::remove_if_exists(&tmp);
        let file = std::fs::OpenOptions::new().read(true).write(true).create_new(true).mode(0o600).open(&tmp)?;
        let db = Database::builder().create_file(file)?;
        let tx = db.begin_write()?;
        tx.open_table(RUNS)?;
        tx.commit()?;
        drop(db);
        std::fs::rename(&tmp, path)?;
        Ok(())
    })();
    if result.is_err() {
        let _ = fsutil::remove_if_exists(&tmp);
    }
    result.with_context(|| format!("creating the run registry {}", path.display()))
}

impl Registry {
    pub fn open(path: &Path) -> Result<Registry> {
        let opened = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NOFOLLOW).open(path);
        let mut file = match opened {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                create_new(path)?;
                return Registry::open_checked(path);
            }
            Err(e) => return Err(anyhow!("opening the run registry {}: {e}", path.display())),
            Ok(f) => f,
        };
        // redb holds an exclusive flock while a database is open: a busy file is
        // another `lab serve`, not damage.
        // SAFETY: flock on a file descriptor we own; no memory is involved.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
            bail!("the run registry {} is in use: is another `lab serve` using this home?", path.display());
        }
        let len = file.metadata()?.len();
        let mut head = [0u8; REDB_MAGIC.len()];
        let got = std::io::Read::read(&mut file, &mut head)?;
        match shape(Some(len), &head[..got]) {
            FileShape::Empty => return Err(damaged(path, "it is empty (0 bytes)")),
            FileShape::NotRedb => return Err(damaged(path, "it is not a redb database: its header is wrong")),
            FileShape::Missing | FileShape::Redb => {}
        }
        std::io::Seek::rewind(&mut file)?;
        if let Some(why) = check_copy(path, &mut file)? {
            return Err(damaged(path, &why));
        }
        drop(file); // releases the lock for redb's own
        fsutil::set_mode(path, 0o600)?;
        Registry::open_checked(path)
    }

    /// Open the (checked) file itself and read it once, panics caught.
    fn open_checked(path: &Path) -> Result<Registry> {
        no_panic(|| -> Result<Registry> {
            // A small cache: records are read once at start and written one at a time,
            // so redb's default (1 GiB) would only keep a long history's pages in memory.
            let db = Database::builder().set_cache_size(REGISTRY_CACHE).open(path).map_err(|e| match e {
                redb::DatabaseError::DatabaseAlreadyOpen => {
                    anyhow!("the run registry {} is in use: is another `lab serve` using this home?", path.display())
                }
                e => damaged(path, &e.to_string()),
            })?;
            let tx = db.begin_write()?;
            tx.open_table(RUNS)?;
            tx.commit()?;
            read_everything(&db)?;
            Ok(Registry { db })
        })
        .map_err(|panic| damaged(path, &panic))?
    }

    pub fn put(&self, rec: &RunRecord) -> Result<()> {
        self.put_all(std::slice::from_ref(rec))
    }

    /// Save every record of `recs` in one transaction (one commit to disk): all of
    /// them or, on an error, none.
    pub fn put_all(&self, recs: &[RunRecord]) -> Result<()> {
        if recs.is_empty() {
            return Ok(());
        }
        let tx = self.db.begin_write()?;
        {
            let mut t = tx.open_table(RUNS)?;
            for rec in recs {
                let bytes = serde_json::to_vec(rec)?;
                t.insert(rec.id.as_str(), bytes.as_slice())?;
            }
        }
        tx.commit()?;
        Ok(())
    }

    pub fn get(&self, id: &RunId) -> Result<Option<RunRecord>> {
        let tx = self.db.begin_read()?;
        let t = tx.open_table(RUNS)?;
        match t.get(id.as_str())? {
            Some(v) => Ok(Some(serde_json::from_slice(v.value())?)),
            None => Ok(None),
        }
    }

    /// The records of `ids` (None where there is none, or it is damaged), read in one
    /// transaction.
    pub fn get_many(&self, ids: &[&RunId]) -> Result<Vec<Option<RunRecord>>> {
        let tx = self.db.begin_read()?;
        let t = tx.open_table(RUNS)?;
        let mut out = Vec::with_capacity(ids.len());
        for id in ids {
            out.push(match t.get(id.as_str())? {
                Some(v) => serde_json::from_slice(v.value())
                    .inspect_err(|e| tracing::warn!(run = %id, error = %e, "skipping a damaged run record"))
                    .ok(),
                None => None,
            });
        }
        Ok(out)
    }

    /// Every run, oldest first, read in two depths: the [`RecordHead`] of each, and the
    /// whole record of those `whole` picks (the others are returned as their head, so a
    /// long history is not decoded, nor held, at start). A damaged record is skipped
    /// with a warning.
    pub fn sift(&self, whole: impl Fn(&RecordHead) -> bool) -> Result<(Vec<RecordHead>, Vec<RunRecord>)> {
        let tx = self.db.begin_read()?;
        let t = tx.open_table(RUNS)?;
        let (mut heads, mut records) = (Vec::new(), Vec::new());
        for entry in t.iter()? {
            let (k, v) = entry?;
            let head = match serde_json::from_slice::<RecordHead>(v.value()) {
                Ok(h) if whole(&h) => h,
                Ok(h) => {
                    heads.push(h);
                    continue;
                }
                Err(e) => {
                    tracing::warn!(run = k.value(), error = %e, "skipping a damaged run record");
                    continue;
                }
            };
            match serde_json::from_slice::<RunRecord>(v.value()) {
                Ok(r) => records.push(r),
                Err(e) => tracing::warn!(run = %head.id, error = %e, "skipping a damaged run record"),
            }
        }
        heads.sort_by(|a, b| a.created_at.cmp(&b.created_at).then_with(|| a.id.cmp(&b.id)));
        records.sort_by(|a, b| a.created_at.cmp(&b.created_at).then_with(|| a.id.cmp(&b.id)));
        Ok((heads, records))
    }

    /// Every run, oldest first. A damaged record is skipped with a warning.
    pub fn list(&self) -> Result<Vec<RunRecord>> {
        let tx = self.db.begin_read()?;
        let t = tx.open_table(RUNS)?;
        let mut out = Vec::new();
        for entry in t.iter()? {
            let (k, v) = entry?;
            match serde_json::from_slice::<RunRecord>(v.value()) {
                Ok(r) => out.push(r),
                Err(e) => tracing::warn!(run = k.value(), error = %e, "skipping a damaged run record"),
            }
        }
        out.sort_by(|a, b| a.created_at.cmp(&b.created_at).then_with(|| a.id.cmp(&b.id)));
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The record keeps the first session id and transcript path it is told, and ends
    /// once; nothing new is no change (so nothing is written).
    #[test]
    fn a_record_takes_what_the_live_state_learnt_once() {
        let mut r = rec("r-1", "t0");
        let t = Path::new("/h/t.jsonl");
        assert!(!r.take_live_facts(None, None, false, || unreachable!()), "nothing learnt");
        assert!(r.take_live_facts(Some("s1"), None, false, || unreachable!()));
        assert!(!r.take_live_facts(Some("s2"), None, false, || unreachable!()), "the first id stays");
        assert!(r.take_live_facts(Some("s2"), Some(t), false, || unreachable!()));
        assert!(!r.take_live_facts(Some("s1"), Some(Path::new("/other")), false, || unreachable!()));
        assert_eq!((r.session_id.as_deref(), r.transcript_path.as_deref()), (Some("s1"), Some("/h/t.jsonl")));
        assert!(r.take_live_facts(Some("s1"), Some(t), true, || "t9".into()));
        assert_eq!((r.status, r.ended_at.as_deref()), (Status::Ended, Some("t9")));
        assert!(!r.take_live_facts(Some("s1"), Some(t), true, || unreachable!()), "ended once");
        assert!(!r.take_remote_transcript(Some("/there/t.jsonl")), "a run here has none");
        let mut there = RunRecord { host: Some("m1".into()), ..rec("r-3", "t0") };
        assert!(!there.take_remote_transcript(None));
        assert!(there.take_remote_transcript(Some("/there/t.jsonl")));
        assert!(!there.take_remote_transcript(Some("/there/other.jsonl")), "the first stays");
        assert_eq!(there.remote_transcript.as_deref(), Some("/there/t.jsonl"));
        let mut failed = RunRecord { status: Status::Failed, ..rec("r-2", "t0") };
        assert!(!failed.take_live_facts(None, None, true, || unreachable!()), "a failed run stays failed");
    }

    fn rec(id: &str, at: &str) -> RunRecord {
        RunRecord {
            tmux_socket: "/s".into(),
            dialog_hooker: true,
            ..RunRecord::new(RunId::parse(id).unwrap(), "p", "/w", "hi", at)
        }
    }

    #[test]
    fn records_survive_reopening() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("registry.redb");
        {
            let r = Registry::open(&path).unwrap();
            r.put(&rec("b", "2026-01-02T00:00:00Z")).unwrap();
            r.put(&rec("a", "2026-01-01T00:00:00Z")).unwrap();
            let mut b = rec("b", "2026-01-02T00:00:00Z");
            b.status = Status::Ended;
            r.put(&b).unwrap();
        }
        let r = Registry::open(&path).unwrap();
        let all = r.list().unwrap();
        assert_eq!(all.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(), vec!["a", "b"]);
        // Many in one commit.
        let many: Vec<RunRecord> = (0..3).map(|i| rec(&format!("c{i}"), "2026-01-03T00:00:00Z")).collect();
        r.put_all(&many).unwrap();
        r.put_all(&[]).unwrap();
        assert_eq!(r.list().unwrap().len(), 5);
        assert_eq!(r.get(&RunId::parse("b").unwrap()).unwrap().unwrap().status, Status::Ended);
        assert!(r.get(&RunId::parse("zz").unwrap()).unwrap().is_none());
    }

    /// Start-up decodes the whole record of the runs to follow only; the others (over,
    /// nothing to watch) are their head, read whole when listed, several at once.
    #[test]
    fn sift_reads_whole_only_the_records_it_is_asked_for() {
        let d = tempfile::tempdir().unwrap();
        let r = Registry::open(&d.path().join("registry.redb")).unwrap();
        let worktree = |discarded: bool| {
            serde_json::from_value::<crate::worktree::Worktree>(serde_json::json!({
                "path": "/w/wt", "branch": "lab/x", "base": "abc", "base_ref": "main", "repo": "/w",
                "subdir": "", "discarded": discarded,
            }))
            .unwrap()
        };
        let ended = |id: &str, at: &str| RunRecord { status: Status::Ended, ..rec(id, at) };
        r.put_all(&[
            rec("a", "t1"),
            ended("b", "t5"),
            RunRecord { worktree: Some(worktree(false)), ..ended("c", "t3") },
            RunRecord { worktree: Some(worktree(true)), status: Status::Failed, ..rec("d", "t2") },
        ])
        .unwrap();
        {
            // A head without the rest of a record, and bytes that are no record at all.
            let tx = r.db.begin_write().unwrap();
            let mut t = tx.open_table(RUNS).unwrap();
            t.insert("e", br#"{"id":"e","status":"ended","created_at":"t4"}"#.as_slice()).unwrap();
            t.insert("f", b"not json".as_slice()).unwrap();
            drop(t);
            tx.commit().unwrap();
        }
        let (heads, records) = r.sift(|h| !h.may_rest()).unwrap();
        let ids = |v: Vec<&RunId>| v.into_iter().map(|id| id.as_str().to_string()).collect::<Vec<_>>();
        assert_eq!(ids(heads.iter().map(|h| &h.id).collect()), ["d", "e", "b"], "oldest first");
        assert_eq!(ids(records.iter().map(|r| &r.id).collect()), ["a", "c"], "to follow: active, or a kept worktree");
        assert!(records.iter().all(|r| r.prompt == "hi"), "whole records");
        let got = r.get_many(&heads.iter().map(|h| &h.id).collect::<Vec<_>>()).unwrap();
        assert_eq!(
            got.iter().map(|r| r.as_ref().map(|r| r.id.as_str())).collect::<Vec<_>>(),
            [Some("d"), None, Some("b")]
        );
        assert_eq!(r.get_many(&[&RunId::parse("zz").unwrap()]).unwrap(), [None]);
    }

    #[test]
    fn file_shapes() {
        assert_eq!(shape(None, b""), FileShape::Missing);
        assert_eq!(shape(Some(0), b""), FileShape::Empty);
        assert_eq!(shape(Some(4), b"redb"), FileShape::NotRedb);
        assert_eq!(shape(Some(100), b"hello, wor"), FileShape::NotRedb);
        assert_eq!(shape(Some(4096), &REDB_MAGIC), FileShape::Redb);
    }

    /// A registry with a few records, as bytes.
    fn good_registry(dir: &Path) -> Vec<u8> {
        let path = dir.join("good.redb");
        let r = Registry::open(&path).unwrap();
        for i in 0..40 {
            let mut rec = rec(&format!("r-{i}"), "2026-01-01T00:00:00Z");
            rec.prompt = "p".repeat(2000);
            r.put(&rec).unwrap();
        }
        drop(r);
        std::fs::read(&path).unwrap()
    }

    #[test]
    fn a_new_registry_is_private_and_an_existing_one_is_fixed() {
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("registry.redb");
        drop(Registry::open(&path).unwrap());
        let mode = || std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(), 0o600);
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o664)).unwrap();
        drop(Registry::open(&path).unwrap());
        assert_eq!(mode(), 0o600);
        let names: Vec<_> = std::fs::read_dir(d.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names, vec![std::ffi::OsString::from("registry.redb")], "no temp or check copies left");
    }

    #[test]
    fn damaged_registries_are_refused_with_a_clear_error_and_left_untouched() {
        let d = tempfile::tempdir().unwrap();
        let good = good_registry(d.path());
        assert!(good.len() > 64 << 10, "{}", good.len());
        let mut noise = 0x2545F4914F6CDD1Du64;
        let mut random = |n: usize| -> Vec<u8> {
            (0..n)
                .map(|_| {
                    noise ^= noise << 13;
                    noise ^= noise >> 7;
                    noise ^= noise << 17;
                    noise as u8
                })
                .collect()
        };
        // Where the records live (not the file's preallocated, unused middle).
        let data_at = good.windows(64).position(|w| w.iter().all(|b| *b == b'p')).unwrap();
        let over = |at: usize, with: &[u8]| {
            let mut b = good.clone();
            b[at..at + with.len()].copy_from_slice(with);
            b
        };
        let cases: Vec<(&str, Vec<u8>)> = vec![
            ("truncated to 4 KiB", good[..4096].to_vec()),
            ("empty", Vec::new()),
            ("random header", over(0, &random(512))),
            ("random bytes after the magic", over(9, &random(4000))),
            ("random bytes over the records", over(data_at, &random(8 << 10))),
            ("text", b"this is not a database\n".repeat(300)),
        ];
        for (what, bytes) in cases {
            let path = d.path().join("registry.redb");
            std::fs::write(&path, &bytes).unwrap();
            let err = match Registry::open(&path) {
                Ok(r) => panic!("{what}: opened, with {} runs", r.list().map(|l| l.len()).unwrap_or(0)),
                Err(e) => format!("{e:#}"),
            };
            assert!(err.contains("registry.redb is damaged"), "{what}: {err}");
            assert!(err.contains("mv "), "{what}: {err}");
            assert_eq!(std::fs::read(&path).unwrap(), bytes, "{what}: the file was changed");
            let left: Vec<_> = std::fs::read_dir(d.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
            assert_eq!(left.len(), 2, "{what}: {left:?}");
        }
    }

    #[test]
    fn a_registry_in_use_is_reported_as_such() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("registry.redb");
        let _first = Registry::open(&path).unwrap();
        let err = format!("{:#}", Registry::open(&path).err().unwrap());
        assert!(err.contains("in use"), "{err}");
        assert!(!err.contains("damaged"), "{err}");
    }
}
